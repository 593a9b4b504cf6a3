//! `builtin`: scalar types, dense tensors (`builtin.tensor<…>`, printed
//! `tensor<…>` since 3.0) and the untagged-by-dialect attribute tags of the
//! older printer (`(Float)`, `(Int32)`, `(Array)`, …).

use crate::parsers::ml::paddle::ast::{AttrValue, TypeKind, intern};
use crate::parsers::ml::paddle::dialect::{Dialect, tensor_body};

/// The dialect.
pub static DIALECT: Dialect = Dialect {
    name: "builtin",
    bare_type,
    parse_type,
    parse_attr,
};

/// Scalar types as the printer names them.
const SCALARS: &[&str] = &[
    "bf16",
    "f16",
    "f32",
    "f64",
    "b",
    "i8",
    "u8",
    "i16",
    "i32",
    "i64",
    "index",
    "c64",
    "c128",
    "f8e4m3fn",
    "f8e5m2",
    "undefined",
];

fn bare_type(name: &str) -> bool {
    name == "tensor" || SCALARS.contains(&name)
}

fn parse_type(name: &str, body: Option<&str>) -> Option<TypeKind> {
    match (name, body) {
        ("tensor", Some(b)) => {
            let (dims, dtype) = tensor_body(b)?;
            Some(TypeKind::Tensor {
                dialect: "builtin",
                name: intern(name),
                dims,
                dtype,
            })
        }
        (s, None) if SCALARS.contains(&s) => Some(TypeKind::Scalar(intern(s))),
        _ => None,
    }
}

fn parse_attr(tag: &str, value: &AttrValue) -> Option<AttrValue> {
    Some(match (tag, value) {
        ("Float" | "Double", AttrValue::Int(i)) => AttrValue::Float(*i as f64),
        ("Float" | "Double", v @ AttrValue::Float(_)) => v.clone(),
        ("Int32" | "Int64" | "Index", v @ AttrValue::Int(_)) => v.clone(),
        ("Bool", v @ AttrValue::Bool(_)) => v.clone(),
        ("Array", v @ AttrValue::Array(_)) => v.clone(),
        ("Str", v @ AttrValue::Str(_)) => v.clone(),
        ("Pointer" | "Complex64" | "Complex128" | "Type", _) => AttrValue::Opaque,
        _ => return None,
    })
}
