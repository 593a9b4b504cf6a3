//! `pd_op`, Paddle's operator dialect: its tensor-like types
//! (`pd_op.tensor<…>` in 2023 prints, `pd_op.tensor_array<f32>`,
//! `pd_op.selectedrows<…>`, sparse tensors) and its tagged attributes of
//! the older printer (`(pd_op.DataType)float32`, `(pd_op.Place)Place(cpu)`,
//! `(pd_op.IntArray)[1,2]`, `(pd_op.DataLayout)NCHW`).

use crate::parsers::ml::paddle::ast::{AttrValue, Dims, TypeKind, intern};
use crate::parsers::ml::paddle::dialect::{Dialect, tensor_body};

/// The dialect.
pub static DIALECT: Dialect = Dialect {
    name: "pd_op",
    bare_type: |_| false,
    parse_type,
    parse_attr,
};

fn parse_type(name: &str, body: Option<&str>) -> Option<TypeKind> {
    let body = body?;
    let (dims, dtype) = match name {
        "tensor" | "selectedrows" | "sparsecootensor" | "sparsecsrtensor" => tensor_body(body)?,
        "tensor_array" => (Dims::new(), intern(body.trim())),
        _ => return None,
    };
    Some(TypeKind::Tensor {
        dialect: "pd_op",
        name: intern(name),
        dims,
        dtype,
    })
}

fn parse_attr(tag: &str, value: &AttrValue) -> Option<AttrValue> {
    Some(match (tag, value) {
        ("DataType" | "DataLayout", v @ AttrValue::Word(_)) => v.clone(),
        ("Place", v @ AttrValue::Place(_)) => v.clone(),
        ("IntArray", v @ AttrValue::Array(_)) => v.clone(),
        _ => return None,
    })
}
