//! What a dialect contributes to reading a printed program: the types and
//! tagged attributes it names. The registry is [`super::dialects::DIALECTS`];
//! a new dialect is one file there and one line in it. What no dialect takes
//! stays an opaque value with its text, never an error.

use super::ast::{AttrValue, TypeKind};

/// A dialect's hooks.
pub struct Dialect {
    /// Its prefix: `builtin`, `pd_op`, `cf`, `kernel`.
    pub name: &'static str,
    /// Whether a type printed with no prefix is this dialect's (3.x prints
    /// `tensor<…>` for `builtin.tensor<…>`, and the kernel dialect never
    /// prints its prefix).
    pub bare_type: fn(name: &str) -> bool,
    /// A type `name` (prefix removed) with the text between its angle
    /// brackets, if it has them.
    pub parse_type: fn(name: &str, body: Option<&str>) -> Option<TypeKind>,
    /// An attribute tagged `(tag)` (prefix removed), given the value as
    /// read without the tag; `None` if the tag is not this dialect's.
    pub parse_attr: fn(tag: &str, value: &AttrValue) -> Option<AttrValue>,
}

/// Dims and element type of a tensor body, `2x-1x3xf32` or `f32` (0-D).
pub fn tensor_body(body: &str) -> Option<(Vec<i64>, super::ast::Word)> {
    let body = body.trim();
    // The element type follows the last `x`; one version printed a layout
    // after it (`f32 NCHW`): keep the type.
    let (dims_text, dtype) = match body.rfind('x') {
        Some(i) => (&body[..i], &body[i + 1..]),
        None => ("", body),
    };
    let dtype = dtype.split(' ').next().filter(|d| !d.is_empty())?;
    let mut dims = Vec::new();
    if !dims_text.is_empty() {
        for d in dims_text.split('x') {
            dims.push(match d.as_bytes() {
                b"?" => -1,
                _ => d.parse::<i64>().ok()?,
            });
        }
    }
    Some((dims, super::ast::intern(dtype)))
}
