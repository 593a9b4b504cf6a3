//! The kernel dialect, what programs look like after lowering: ops named
//! `"matmul(phi_kernel)"` and types named after their place, never prefixed
//! (`cpu_tensor<…>`, `gpu_tensor<…>`, `undefined_tensor<…>`,
//! `cpu_tensor_array<f32>`, `gpu_sparse_coo_tensor_type<f32>`).

use crate::parsers::ml::paddle::ast::{Dims, TypeKind, intern};
use crate::parsers::ml::paddle::dialect::{Dialect, tensor_body};

/// The dialect.
pub static DIALECT: Dialect = Dialect {
    name: "kernel",
    bare_type,
    parse_type,
    parse_attr: |_, _| None,
};

fn bare_type(name: &str) -> bool {
    name.ends_with("_tensor")
        || name.ends_with("_tensor_array")
        || name.ends_with("_tensor_type")
        || name.ends_with("_selected_rows")
}

fn parse_type(name: &str, body: Option<&str>) -> Option<TypeKind> {
    let body = body?;
    let (dims, dtype) = if name.ends_with("_tensor") || name.ends_with("_selected_rows") {
        tensor_body(body)?
    } else if bare_type(name) {
        (Dims::new(), intern(body.trim()))
    } else {
        return None;
    };
    Some(TypeKind::Tensor {
        dialect: "kernel",
        name: intern(name),
        dims,
        dtype,
    })
}
