//! An opcode's argument as `pickletools` shows it, and as JSON.

use super::ops::{Arg, Op, Payload};
use super::vm;
use crate::data::Source;

/// The argument as pickletools prints it (`repr(arg)`), cut at `max` bytes.
pub(super) fn arg_repr(op: &Op, data: &dyn Source, max: usize) -> Option<String> {
    let mut out = String::new();
    arg_repr_into(op, data, max, &mut out, &mut Vec::new()).then_some(out)
}

/// [`arg_repr`] appended to `out` (false when the opcode has no argument),
/// with `scratch` for payload bytes: the listing's hot path, which must not
/// allocate per opcode.
pub(super) fn arg_repr_into(
    op: &Op,
    data: &dyn Source,
    max: usize,
    out: &mut String,
    scratch: &mut Vec<u8>,
) -> bool {
    use std::fmt::Write;
    let start = out.len();
    match &op.arg {
        Arg::None => return false,
        Arg::Bool(b) => out.push_str(if *b { "True" } else { "False" }),
        Arg::Int(v) => {
            let _ = write!(out, "{v}");
        }
        Arg::Big(s) => out.push_str(s),
        Arg::Float(f) => out.push_str(&vm::py_float(*f)),
        Arg::Text(t) => vm::py_str_into(t, out),
        Arg::Payload(kind, r) => {
            let n = (r.len() as usize).min(max + 4);
            scratch.clear();
            scratch.resize(n, 0);
            let k = data.read_at(r.start, scratch).unwrap_or(0);
            scratch.truncate(k);
            match kind {
                Payload::Bytes => out.push_str(&vm::py_bytes(scratch)),
                Payload::ByteArray => {
                    let _ = write!(out, "bytearray({})", vm::py_bytes(scratch));
                }
                Payload::Latin1 => {
                    let text: String = scratch.iter().map(|&c| c as char).collect();
                    vm::py_str_into(&text, out);
                }
                Payload::Utf8 => vm::py_str_into(&String::from_utf8_lossy(scratch), out),
            }
        }
    }
    if out.len() - start > max {
        let mut cut = start + max;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    true
}

/// The argument as JSON (docs/contract.md): bytes as `{"hex": ...}`, integers
/// beyond 2^53 as strings, NaN and infinities as strings, C1 controls in
/// strings escaped as JSON escapes C0 ones (see [`crate::name::c1_escaped`]).
pub(super) fn arg_json(op: &Op, data: &dyn Source) -> String {
    let js = |s: &str| {
        let quoted = serde_json::to_string(s).expect("strings serialise");
        match crate::name::c1_escaped(quoted.as_bytes()) {
            std::borrow::Cow::Borrowed(_) => quoted,
            std::borrow::Cow::Owned(b) => String::from_utf8(b).expect("JSON is UTF-8"),
        }
    };
    match &op.arg {
        Arg::None => "null".into(),
        Arg::Bool(b) => b.to_string(),
        Arg::Int(v) if v.unsigned_abs() > 1 << 53 => format!("\"{v}\""),
        Arg::Int(v) => v.to_string(),
        Arg::Big(s) => format!("\"{s}\""),
        Arg::Float(f) if f.is_nan() => "\"nan\"".into(),
        Arg::Float(f) if f.is_infinite() => if *f > 0.0 { "\"inf\"" } else { "\"-inf\"" }.into(),
        // Python's repr of a finite float is valid JSON.
        Arg::Float(f) => vm::py_float(*f),
        Arg::Text(t) => js(t),
        Arg::Payload(..) => {
            let mut out = Vec::new();
            write_arg_json(op, data, &mut out).expect("writing to memory");
            String::from_utf8(out).expect("JSON is UTF-8")
        }
    }
}

/// [`arg_json`] written to `out`, payloads streamed in 1 MiB pieces: a
/// 4 GiB BINBYTES8 costs 1 MiB of memory, not 12 GiB of hex.
pub(super) fn write_arg_json(
    op: &Op,
    data: &dyn Source,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let Arg::Payload(kind, r) = &op.arg else {
        return out.write_all(arg_json(op, data).as_bytes());
    };
    const PIECE: u64 = 1 << 20;
    let bytes = matches!(kind, Payload::Bytes | Payload::ByteArray);
    out.write_all(if bytes { b"{\"hex\":\"" } else { b"\"" })?;
    let mut buf = vec![0u8; PIECE.min(r.len()) as usize + 4];
    let mut text = String::new();
    // UTF-8 cut between pieces: the start of a character, kept for the next.
    let mut carry = 0usize;
    let mut at = r.start;
    while at < r.end {
        let want = PIECE.min(r.end - at) as usize;
        let got = data.read_at(at, &mut buf[carry..carry + want]).unwrap_or(0);
        if got == 0 {
            break;
        }
        at += got as u64;
        let piece = &buf[..carry + got];
        text.clear();
        let used = match kind {
            Payload::Bytes | Payload::ByteArray => {
                for b in piece {
                    text.push(char::from_digit((b >> 4) as u32, 16).expect("a nibble"));
                    text.push(char::from_digit((b & 15) as u32, 16).expect("a nibble"));
                }
                piece.len()
            }
            Payload::Latin1 => {
                text.extend(piece.iter().map(|&c| c as char));
                piece.len()
            }
            Payload::Utf8 => {
                let valid = match std::str::from_utf8(piece) {
                    Ok(_) => piece.len(),
                    // An incomplete character at the end waits for the next piece.
                    Err(e) if e.error_len().is_none() && at < r.end => e.valid_up_to(),
                    Err(_) => piece.len(),
                };
                text.push_str(&String::from_utf8_lossy(&piece[..valid]));
                valid
            }
        };
        if bytes {
            out.write_all(text.as_bytes())?;
        } else {
            // `text` ends at a character boundary: its C1 controls are whole.
            let quoted = serde_json::to_string(&text).expect("strings serialise");
            let quoted = crate::name::c1_escaped(quoted.as_bytes());
            out.write_all(&quoted[1..quoted.len() - 1])?;
        }
        buf.copy_within(used..carry + got, 0);
        carry = carry + got - used;
    }
    out.write_all(if bytes { b"\"}" } else { b"\"" })
}
