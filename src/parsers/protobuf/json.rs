//! Protobuf bytes to JSON, straight from the wire.
//!
//! The proto3 JSON mapping that protobuf's own tools print (`MessageToDict`
//! with field names as in the .proto): int64 and uint64 as strings, enums
//! by name, bytes as base64, `Timestamp` as RFC 3339, default scalars left
//! out, unknown fields dropped. It walks the bytes with the wire scanner and
//! writes text as it goes — no decoded message is built — which makes a log
//! of half a million records a matter of seconds, and it checks what a
//! decoder checks (wire types against the schema, UTF-8 of strings): a
//! message it writes is one a protobuf library would accept.
//!
//! Lists of `{key, nested_key, value_json}` items (how W&B stores logged
//! values) can be written as objects of decoded values instead; see
//! [`Options::items`].

use std::fmt::Write;

use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor, SerializeOptions};

use super::wire::{Field, Scanner, Wire, varint};
use crate::data::Range;

/// Deepest nesting written.
const MAX_DEPTH: u32 = 100;

/// How to write.
#[derive(Clone, Copy, Default)]
pub struct Options {
    /// (message type, field) pairs whose repeated `{key, nested_key,
    /// value_json}` items are written as one object `{name: value}`, the
    /// name being the nested keys joined by `/` (or the key), the value the
    /// parsed `value_json` (or null).
    pub items: &'static [(&'static str, &'static str)],
}

/// Writes the JSON of the message `bytes` of type `desc` to `out`; `Err`
/// says why the bytes are not a valid message of that type (what is written
/// by then is unspecified).
pub fn write(
    out: &mut String,
    bytes: &[u8],
    desc: &MessageDescriptor,
    opts: &Options,
) -> Result<(), String> {
    let mut o = Out {
        text: std::mem::take(out),
        on: true,
    };
    let r = message(&mut o, bytes, desc, opts, 0, 0);
    *out = o.text;
    r
}

/// Checks that `bytes` decode as `desc` (what [`write`] checks, without
/// writing), leaving out the field numbered `skip` (checked elsewhere).
pub fn check_except(
    bytes: &[u8],
    desc: &MessageDescriptor,
    opts: &Options,
    skip: u32,
) -> Result<(), String> {
    let mut o = Out {
        text: String::new(),
        on: false,
    };
    message(&mut o, bytes, desc, opts, 0, skip)
}

/// Where JSON goes: a string, or nowhere when only checking.
pub struct Out {
    text: String,
    on: bool,
}

impl Out {
    fn push(&mut self, c: char) {
        if self.on {
            self.text.push(c);
        }
    }
    fn push_str(&mut self, s: &str) {
        if self.on {
            self.text.push_str(s);
        }
    }
    fn len(&self) -> usize {
        self.text.len()
    }
    fn truncate(&mut self, n: usize) {
        self.text.truncate(n);
    }
    fn starts_with(&self, c: char) -> bool {
        self.text.starts_with(c)
    }
    fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

impl Write for Out {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.push_str(s);
        Ok(())
    }
}

fn message(
    out: &mut Out,
    b: &[u8],
    desc: &MessageDescriptor,
    opts: &Options,
    depth: u32,
    skip: u32,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("messages nested deeper than {MAX_DEPTH}"));
    }
    match desc.full_name() {
        "google.protobuf.Timestamp" => return timestamp(out, b),
        "google.protobuf.Empty" => {
            out.push_str("{}");
            return Ok(());
        }
        n if n.starts_with("google.protobuf.") => return well_known(out, b, desc),
        _ => {}
    }
    let all = Range::new(0, b.len() as u64);
    let mut fields: Vec<Field> = Vec::new();
    for f in Scanner::new(b, all) {
        let f = f.map_err(|e| format!("{} at byte {}", e.reason, e.offset))?;
        if f.cut {
            return Err(format!(
                "field {} runs past the end of its message",
                f.number
            ));
        }
        fields.push(f);
    }
    if !fields.windows(2).all(|w| w[0].number <= w[1].number) {
        fields.sort_by_key(|f| f.number);
    }
    out.push('{');
    let mut first = true;
    let mut i = 0;
    while i < fields.len() {
        let n = fields[i].number;
        let mut j = i;
        while j < fields.len() && fields[j].number == n {
            j += 1;
        }
        let group = &fields[i..j];
        i = j;
        let Some(fd) = desc.get_field(n).filter(|_| n != skip) else {
            continue;
        };
        let mark = out.len();
        if !first {
            out.push(',');
        }
        string_lit(out, fd.name());
        out.push(':');
        let wrote = if fd.is_map() {
            map(out, b, &fd, group, opts, depth)?;
            true
        } else if fd.is_list() {
            if opts
                .items
                .iter()
                .any(|&(m, f)| m == desc.full_name() && f == fd.name())
            {
                items(out, b, &fd, group)?;
            } else {
                list(out, b, &fd, group, opts, depth)?;
            }
            true
        } else {
            let f = &group[group.len() - 1];
            value(
                out,
                b,
                &fd,
                &fd.kind(),
                f,
                opts,
                depth,
                !fd.supports_presence(),
            )?
        };
        if wrote {
            first = false;
        } else {
            out.truncate(mark);
        }
    }
    out.push('}');
    Ok(())
}

fn bytes_of(b: &[u8], r: Range) -> &[u8] {
    &b[r.start as usize..r.end as usize]
}

/// Writes one value; returns false (writing nothing useful) for a default
/// scalar when `skip_default` is set.
#[allow(clippy::too_many_arguments)]
fn value(
    out: &mut Out,
    b: &[u8],
    fd: &FieldDescriptor,
    kind: &Kind,
    f: &Field,
    opts: &Options,
    depth: u32,
    skip_default: bool,
) -> Result<bool, String> {
    let want = match kind {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => Wire::I64,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => Wire::I32,
        Kind::String | Kind::Bytes => Wire::Len,
        Kind::Message(_) if fd.is_group() => Wire::Group,
        Kind::Message(_) => Wire::Len,
        _ => Wire::Varint,
    };
    if f.wire != want {
        return Err(format!(
            "field {} ({}) has wire type {}, not {}",
            f.number,
            fd.name(),
            f.wire.name(),
            want.name()
        ));
    }
    let v = f.int;
    if skip_default && !matches!(kind, Kind::Message(_)) {
        let empty = match want {
            Wire::Len => f.value.is_empty(),
            _ => v == 0,
        };
        if empty {
            return Ok(false);
        }
    }
    scalar_or_message(out, b, kind, f, opts, depth)?;
    Ok(true)
}

fn scalar_or_message(
    out: &mut Out,
    b: &[u8],
    kind: &Kind,
    f: &Field,
    opts: &Options,
    depth: u32,
) -> Result<(), String> {
    let v = f.int;
    match kind {
        Kind::Int32 => write!(out, "{}", v as i32),
        Kind::Sfixed32 => write!(out, "{}", v as u32 as i32),
        Kind::Uint32 | Kind::Fixed32 => write!(out, "{}", v as u32),
        Kind::Int64 | Kind::Sfixed64 => write!(out, "\"{}\"", v as i64),
        Kind::Uint64 | Kind::Fixed64 => write!(out, "\"{v}\""),
        Kind::Sint32 => write!(out, "{}", zigzag(v) as i32),
        Kind::Sint64 => write!(out, "\"{}\"", zigzag(v)),
        Kind::Bool => write!(out, "{}", v != 0),
        Kind::Double => {
            float(out, f64::from_bits(v));
            Ok(())
        }
        Kind::Float => {
            let x = f32::from_bits(v as u32);
            if x.is_finite() {
                write!(out, "{x:?}")
            } else {
                float(out, f64::from(x));
                Ok(())
            }
        }
        Kind::Enum(e) => match e.get_value(v as i32) {
            // The NullValue of struct.proto is JSON null.
            _ if e.full_name() == "google.protobuf.NullValue" => write!(out, "null"),
            Some(ev) => {
                string_lit(out, ev.name());
                Ok(())
            }
            None => write!(out, "{}", v as i32),
        },
        Kind::String => {
            let s = std::str::from_utf8(bytes_of(b, f.value))
                .map_err(|_| format!("field {}: a string that is not UTF-8", f.number))?;
            string_lit(out, s);
            Ok(())
        }
        Kind::Bytes => {
            out.push('"');
            base64(out, bytes_of(b, f.value));
            out.push('"');
            Ok(())
        }
        Kind::Message(m) => return message(out, bytes_of(b, f.value), m, opts, depth + 1, 0),
    }
    .map_err(|e| e.to_string())
}

fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A double as proto3 JSON: shortest round-trip digits; the non-finite ones
/// as strings.
fn float(out: &mut Out, x: f64) {
    if x.is_nan() {
        out.push_str("\"NaN\"");
    } else if x.is_infinite() {
        out.push_str(if x > 0.0 {
            "\"Infinity\""
        } else {
            "\"-Infinity\""
        });
    } else {
        let _ = write!(out, "{x:?}");
    }
}

fn list(
    out: &mut Out,
    b: &[u8],
    fd: &FieldDescriptor,
    group: &[Field],
    opts: &Options,
    depth: u32,
) -> Result<(), String> {
    let kind = fd.kind();
    let packable = !matches!(kind, Kind::String | Kind::Bytes | Kind::Message(_));
    out.push('[');
    let mut first = true;
    for f in group {
        if packable && f.wire == Wire::Len {
            for e in packed(b, f, &kind)? {
                if !first {
                    out.push(',');
                }
                first = false;
                scalar_or_message(out, b, &kind, &e, opts, depth)?;
            }
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        value(out, b, fd, &kind, f, opts, depth, false)?;
    }
    out.push(']');
    Ok(())
}

/// The elements of a packed field, as fields of their own.
fn packed(b: &[u8], f: &Field, kind: &Kind) -> Result<Vec<Field>, String> {
    let width = match kind {
        Kind::Double | Kind::Fixed64 | Kind::Sfixed64 => 8,
        Kind::Float | Kind::Fixed32 | Kind::Sfixed32 => 4,
        _ => 0,
    };
    let wire = match width {
        8 => Wire::I64,
        4 => Wire::I32,
        _ => Wire::Varint,
    };
    let data = bytes_of(b, f.value);
    let mut out = Vec::new();
    let mut p = 0usize;
    while p < data.len() {
        let (v, l) = if width > 0 {
            if p + width > data.len() {
                return Err(format!("field {}: packed values end inside one", f.number));
            }
            let mut w = [0u8; 8];
            w[..width].copy_from_slice(&data[p..p + width]);
            (u64::from_le_bytes(w), width)
        } else {
            match varint(&data[p..]) {
                Some((v, l)) if l > 0 => (v, l),
                _ => {
                    return Err(format!(
                        "field {}: packed values end inside a varint",
                        f.number
                    ));
                }
            }
        };
        let at = f.value.start + p as u64;
        out.push(Field {
            number: f.number,
            wire,
            range: Range::new(at, at + l as u64),
            value: Range::new(at, at + l as u64),
            int: v,
            cut: false,
        });
        p += l;
    }
    Ok(out)
}

fn map(
    out: &mut Out,
    b: &[u8],
    fd: &FieldDescriptor,
    group: &[Field],
    opts: &Options,
    depth: u32,
) -> Result<(), String> {
    let Kind::Message(entry) = fd.kind() else {
        return Err(format!("map field {} without an entry type", fd.name()));
    };
    let (Some(kf), Some(vf)) = (entry.get_field(1), entry.get_field(2)) else {
        return Err(format!("map field {} without key and value", fd.name()));
    };
    out.push('{');
    for (i, f) in group.iter().enumerate() {
        if f.wire != Wire::Len {
            return Err(format!("map field {} is not length-delimited", fd.name()));
        }
        let e = bytes_of(b, f.value);
        let mut key = Out {
            text: String::new(),
            on: true,
        };
        let mut val: Option<Field> = None;
        for x in Scanner::new(e, Range::new(0, e.len() as u64)) {
            let x = x.map_err(|e| e.reason)?;
            match x.number {
                1 => {
                    key.truncate(0);
                    scalar_or_message(&mut key, e, &kf.kind(), &x, opts, depth)?;
                }
                2 => val = Some(x),
                _ => {}
            }
        }
        if i > 0 {
            out.push(',');
        }
        if key.starts_with('"') {
            out.push_str(&key.text);
        } else if key.is_empty() {
            out.push_str(match kf.kind() {
                Kind::String => "\"\"",
                Kind::Bool => "\"false\"",
                _ => "\"0\"",
            });
        } else {
            let _ = write!(out, "\"{}\"", key.text);
        }
        out.push(':');
        match val {
            Some(x) => scalar_or_message(out, e, &vf.kind(), &x, opts, depth)?,
            None => out.push_str(match vf.kind() {
                Kind::Message(_) => "{}",
                Kind::String => "\"\"",
                Kind::Bool => "false",
                Kind::Int64 | Kind::Uint64 | Kind::Sint64 | Kind::Fixed64 | Kind::Sfixed64 => {
                    "\"0\""
                }
                Kind::Bytes => "\"\"",
                _ => "0",
            }),
        }
    }
    out.push('}');
    Ok(())
}

/// `[{key, nested_key, value_json}]` as `{name: value}`.
fn items(out: &mut Out, b: &[u8], fd: &FieldDescriptor, group: &[Field]) -> Result<(), String> {
    let Kind::Message(item) = fd.kind() else {
        return Err(format!("field {} is not a list of items", fd.name()));
    };
    let number = |name: &str| item.get_field_by_name(name).map_or(0, |f| f.number());
    let (key_no, nested_no, json_no) = (number("key"), number("nested_key"), number("value_json"));
    out.push('{');
    let mut name = String::new();
    for (i, f) in group.iter().enumerate() {
        if f.wire != Wire::Len {
            return Err(format!("field {}: an item that is not a message", f.number));
        }
        let e = bytes_of(b, f.value);
        let mut key: &[u8] = b"";
        let mut nested: Vec<&[u8]> = Vec::new();
        let mut json: Option<&[u8]> = None;
        for x in Scanner::new(e, Range::new(0, e.len() as u64)) {
            let x = x.map_err(|e| e.reason)?;
            if x.wire != Wire::Len {
                continue;
            }
            let v = bytes_of(e, x.value);
            if x.number == key_no {
                key = v;
            } else if x.number == nested_no {
                nested.push(v);
            } else if x.number == json_no {
                json = Some(v);
            }
        }
        name.clear();
        if nested.is_empty() {
            name.push_str(
                std::str::from_utf8(key)
                    .map_err(|_| "an item key that is not UTF-8".to_string())?,
            );
        } else {
            for (k, part) in nested.iter().enumerate() {
                if k > 0 {
                    name.push('/');
                }
                name.push_str(
                    std::str::from_utf8(part)
                        .map_err(|_| "an item key that is not UTF-8".to_string())?,
                );
            }
        }
        if i > 0 {
            out.push(',');
        }
        string_lit(out, &name);
        out.push(':');
        match json {
            None => out.push_str("null"),
            Some(j) => {
                let text = std::str::from_utf8(j)
                    .map_err(|_| "value_json that is not UTF-8".to_string())?;
                json_value(out, text);
            }
        }
    }
    out.push('}');
    Ok(())
}

/// Pastes JSON text that is valid and on one line; otherwise writes it
/// re-encoded (Python's `NaN`/`Infinity` become strings, text that is not
/// JSON a string).
fn json_value(out: &mut Out, text: &str) {
    let one_line = !text.contains(['\n', '\r']);
    if one_line && serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() {
        out.push_str(text.trim());
        return;
    }
    let v = crate::view::records::parse_value_json(text);
    out.push_str(&v.to_string());
}

fn timestamp(out: &mut Out, b: &[u8]) -> Result<(), String> {
    let (mut secs, mut nanos) = (0i64, 0i64);
    for f in Scanner::new(b, Range::new(0, b.len() as u64)) {
        let f = f.map_err(|e| e.reason)?;
        match (f.number, f.wire) {
            (1, Wire::Varint) => secs = f.int as i64,
            (2, Wire::Varint) => nanos = i64::from(f.int as i32),
            _ => {}
        }
    }
    let _ = write!(out, "\"{}\"", crate::util::rfc3339(secs, nanos));
    Ok(())
}

/// The other well-known types (Struct, Value, wrappers, Duration, Any …)
/// through the general decoder.
fn well_known(out: &mut Out, b: &[u8], desc: &MessageDescriptor) -> Result<(), String> {
    let msg = DynamicMessage::decode(desc.clone(), b).map_err(|e| e.to_string())?;
    let opts = SerializeOptions::new().use_proto_field_name(true);
    let mut ser = serde_json::Serializer::new(Vec::new());
    msg.serialize_with_options(&mut ser, &opts)
        .map_err(|e| e.to_string())?;
    out.push_str(&String::from_utf8_lossy(&ser.into_inner()));
    Ok(())
}

/// A JSON string literal.
fn string_lit(out: &mut Out, s: &str) {
    if !out.on {
        return;
    }
    out.text.push('"');
    let bytes = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b >= 0x20 && b != b'"' && b != b'\\' {
            i += 1;
            continue;
        }
        out.text.push_str(&s[start..i]);
        match b {
            b'"' => out.text.push_str("\\\""),
            b'\\' => out.text.push_str("\\\\"),
            b'\n' => out.text.push_str("\\n"),
            b'\r' => out.text.push_str("\\r"),
            b'\t' => out.text.push_str("\\t"),
            _ => {
                let _ = write!(out.text, "\\u{b:04x}");
            }
        }
        i += 1;
        start = i;
    }
    out.text.push_str(&s[start..]);
    out.text.push('"');
}

fn base64(out: &mut Out, data: &[u8]) {
    if !out.on {
        return;
    }
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for c in data.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        out.push(T[(n >> 18) as usize & 63] as char);
        out.push(T[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            T[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            T[n as usize & 63] as char
        } else {
            '='
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parsers::protobuf::schema;

    fn json(bytes: &[u8], ty: &str) -> Result<serde_json::Value, String> {
        let mut out = String::new();
        write(
            &mut out,
            bytes,
            &schema::message(ty).unwrap(),
            &Options::default(),
        )?;
        Ok(serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}")))
    }

    #[test]
    fn proto3_mapping() {
        // TensorProto: dims 2,3 (unpacked), float_data packed [1.5], name, raw_data.
        let mut b = vec![0x08, 2, 0x08, 3, 0x22, 4];
        b.extend(1.5f32.to_le_bytes());
        b.extend([0x42, 2, b'w', b'"', 0x4a, 2, 0xff, 0x00, 0x10, 1]);
        let v = json(&b, "onnx.TensorProto").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"dims": ["2", "3"], "data_type": 1, "float_data": [1.5], "name": "w\"", "raw_data": "/wA="})
        );
        // A wire type the schema does not allow is an error.
        assert!(json(&[0x42, 0x01], "onnx.TensorProto").is_err());
        assert!(json(&[0x42, 1, 0xff], "onnx.TensorProto").is_err());
    }

    #[test]
    fn base64_matches_the_standard() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foobar", "Zm9vYmFy"),
        ] {
            let mut s = Out {
                text: String::new(),
                on: true,
            };
            base64(&mut s, i.as_bytes());
            assert_eq!(s.text, o);
        }
    }
}
