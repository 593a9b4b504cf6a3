//! JSON as Python's `json` module writes it: besides JSON it may hold
//! `NaN`, `Infinity` and `-Infinity` (W&B stores logged values this way, and
//! a diverged loss is NaN).

use serde_json::Value;

/// Parses JSON text that Python wrote; `NaN`, `Infinity` and `-Infinity`
/// are kept as strings. Text that is not JSON at all is kept as a string.
pub(crate) fn parse_value_json(text: &str) -> Value {
    if let Ok(v) = serde_json::from_str(text) {
        return v;
    }
    let fixed = quote_non_finite(text);
    serde_json::from_str(&fixed).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// Quotes the bare tokens `NaN`, `Infinity`, `-Infinity` outside strings.
fn quote_non_finite(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut in_str = false;
    let mut escaped = false;
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if in_str {
            if escaped {
                escaped = false;
            } else if c == b'\\' {
                escaped = true;
            } else if c == b'"' {
                in_str = false;
            }
        } else if c == b'"' {
            in_str = true;
        } else {
            let rest = &text[i..];
            if let Some(tok) = ["-Infinity", "Infinity", "NaN"]
                .into_iter()
                .find(|t| rest.starts_with(t))
            {
                out.push('"');
                out.push_str(tok);
                out.push('"');
                i += tok.len();
                continue;
            }
        }
        // Copy one whole character.
        let ch = text[i..].chars().next().expect("in bounds");
        out.push(ch);
        i += ch.len_utf8();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_json_is_read() {
        assert_eq!(parse_value_json("NaN"), Value::String("NaN".into()));
        assert_eq!(
            parse_value_json("[1, -Infinity, \"NaN\"]"),
            serde_json::json!([1, "-Infinity", "NaN"])
        );
        assert_eq!(
            parse_value_json("{\"a\": 1.5}"),
            serde_json::json!({"a": 1.5})
        );
        assert_eq!(
            parse_value_json("not json"),
            Value::String("not json".into())
        );
    }
}
