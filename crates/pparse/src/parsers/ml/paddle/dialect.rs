//! What a dialect contributes to reading a printed program: the types and
//! tagged attributes it names. The registry is [`super::dialects::DIALECTS`];
//! a new dialect is one file there and one line in it. What no dialect takes
//! stays an opaque value with its text, never an error.

use super::ast::{AttrValue, Dims, TypeKind, Word};

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
/// Read byte by byte: every op prints several of these.
pub fn tensor_body(body: &str) -> Option<(Dims, Word)> {
    let body = body.trim();
    let b = body.as_bytes();
    // The element type follows the last `x`; one version printed a layout
    // after it (`f32 NCHW`): keep the type.
    let (dims_text, dtype) = match memchr::memrchr(b'x', b) {
        Some(i) => (&b[..i], &body[i + 1..]),
        None => (&b[..0], body),
    };
    let dtype = match memchr::memchr(b' ', dtype.as_bytes()) {
        Some(i) => &dtype[..i],
        None => dtype,
    };
    if dtype.is_empty() {
        return None;
    }
    let mut dims = Dims::new();
    if !dims_text.is_empty() {
        for d in dims_text.split(|&c| c == b'x') {
            dims.push(dim(d)?);
        }
    }
    Some((dims, super::ast::intern(dtype)))
}

/// One dim: `?` or `-1` (unknown), or a decimal that fits an `i64`.
fn dim(d: &[u8]) -> Option<i64> {
    let (neg, digits) = match d {
        [b'?'] => return Some(-1),
        [b'-', rest @ ..] => (true, rest),
        [b'+', rest @ ..] => (false, rest),
        _ => (false, d),
    };
    if digits.is_empty() {
        return None;
    }
    let mut n: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        let v = i64::from(c - b'0');
        n = n.checked_mul(10)?;
        n = if neg {
            n.checked_sub(v)?
        } else {
            n.checked_add(v)?
        };
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::tensor_body;

    #[test]
    fn tensor_bodies() {
        let dims = |s: &str| tensor_body(s).map(|(d, t)| (d.to_vec(), t.into_owned()));
        assert_eq!(dims("2x-1x3xf32"), Some((vec![2, -1, 3], "f32".into())));
        assert_eq!(dims("f32"), Some((vec![], "f32".into())));
        assert_eq!(dims(" ?x4xi64 NCHW "), Some((vec![-1, 4], "i64".into())));
        assert_eq!(
            dims("-9223372036854775808x9223372036854775807xb"),
            Some((vec![i64::MIN, i64::MAX], "b".into()))
        );
        for bad in [
            "",
            "x",
            "2xx3xf32",
            "9223372036854775808xf32",
            "2a3xf32",
            "-xf32",
        ] {
            assert_eq!(dims(bad), None, "{bad:?}");
        }
    }
}
