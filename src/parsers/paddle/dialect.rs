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
pub fn tensor_body(body: &str) -> Option<(Vec<i64>, Box<str>)> {
    let body = body.trim();
    let (dims, dtype) = match body.rsplit_once('x') {
        Some((d, t)) => (Some(d), t),
        None => (None, body),
    };
    // One version printed a layout after the type: keep the type.
    let dtype = dtype.split_whitespace().next()?;
    let dims = match dims {
        None => Vec::new(),
        Some(d) => d
            .split('x')
            .map(|d| match d.trim() {
                "?" => Some(-1),
                d => d.parse::<i64>().ok(),
            })
            .collect::<Option<Vec<i64>>>()?,
    };
    Some((dims, dtype.into()))
}
