//! The 68 pickle opcodes and a decoder that reads one at a time.
//!
//! Opcode arguments that are payloads (BINBYTES8, BINUNICODE, ...) are kept
//! as byte ranges, never copied: a 2 GB `bytes` object costs 16 bytes here.
//! Arguments written as text lines (protocol 0) are decoded, with a bound on
//! the line length.

use crate::data::{Range, Source, view};
pub use crate::offer::pickle::{Arg, OpError, Payload};

/// How an opcode's argument is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArgKind {
    None,
    /// Unsigned little-endian integer of this many bytes.
    Uint(u8),
    /// Signed 4-byte little-endian integer.
    Int4,
    /// `u8` length, then that many bytes of two's complement.
    Long1,
    /// `i32` length, then that many bytes of two's complement.
    Long4,
    /// Decimal text line (INT, GET, PUT): "00"/"01" are False/True for INT.
    DecimalShort,
    /// Decimal text line with an optional trailing `L` (LONG).
    DecimalLong,
    /// Quoted, escaped string line (STRING).
    StringNl,
    /// Unquoted string line (PERSID).
    StringNlNoEscape,
    /// Two unquoted lines, `module` and `name` (GLOBAL, INST).
    StringNlPair,
    /// raw-unicode-escape text line (UNICODE).
    UnicodeNl,
    /// Float as text (FLOAT).
    FloatNl,
    /// 8-byte big-endian IEEE 754 (BINFLOAT).
    Float8,
    /// Length-prefixed payload: (length bytes, what the payload is).
    Counted(u8, Payload),
}

/// One opcode's description.
#[derive(Debug, PartialEq, Eq)]
pub struct OpInfo {
    pub(crate) code: u8,
    pub(super) name: &'static str,
    arg: ArgKind,
    /// Protocol that introduced it.
    pub proto: u8,
}

macro_rules! ops {
    ($($code:expr, $name:literal, $arg:expr, $proto:expr;)*) => {
        /// Every opcode, in pickletools' order.
        pub static OPS: &[OpInfo] = &[$(OpInfo { code: $code, name: $name, arg: $arg, proto: $proto }),*];
    };
}

pub use table::OPS;

mod table {
    use super::ArgKind::*;
    use super::OpInfo;
    use super::Payload::*;

    ops! {
        b'I', "INT", DecimalShort, 0;
        b'J', "BININT", Int4, 1;
        b'K', "BININT1", Uint(1), 1;
        b'M', "BININT2", Uint(2), 1;
        b'L', "LONG", DecimalLong, 0;
        0x8a, "LONG1", Long1, 2;
        0x8b, "LONG4", Long4, 2;
        b'S', "STRING", StringNl, 0;
        b'T', "BINSTRING", Counted(4, Latin1), 1;
        b'U', "SHORT_BINSTRING", Counted(1, Latin1), 1;
        b'B', "BINBYTES", Counted(4, Bytes), 3;
        b'C', "SHORT_BINBYTES", Counted(1, Bytes), 3;
        0x8e, "BINBYTES8", Counted(8, Bytes), 4;
        0x96, "BYTEARRAY8", Counted(8, ByteArray), 5;
        0x97, "NEXT_BUFFER", None, 5;
        0x98, "READONLY_BUFFER", None, 5;
        b'N', "NONE", None, 0;
        0x88, "NEWTRUE", None, 2;
        0x89, "NEWFALSE", None, 2;
        b'V', "UNICODE", UnicodeNl, 0;
        0x8c, "SHORT_BINUNICODE", Counted(1, Utf8), 4;
        b'X', "BINUNICODE", Counted(4, Utf8), 1;
        0x8d, "BINUNICODE8", Counted(8, Utf8), 4;
        b'F', "FLOAT", FloatNl, 0;
        b'G', "BINFLOAT", Float8, 1;
        b']', "EMPTY_LIST", None, 1;
        b'a', "APPEND", None, 0;
        b'e', "APPENDS", None, 1;
        b'l', "LIST", None, 0;
        b')', "EMPTY_TUPLE", None, 1;
        b't', "TUPLE", None, 0;
        0x85, "TUPLE1", None, 2;
        0x86, "TUPLE2", None, 2;
        0x87, "TUPLE3", None, 2;
        b'}', "EMPTY_DICT", None, 1;
        b'd', "DICT", None, 0;
        b's', "SETITEM", None, 0;
        b'u', "SETITEMS", None, 1;
        0x8f, "EMPTY_SET", None, 4;
        0x90, "ADDITEMS", None, 4;
        0x91, "FROZENSET", None, 4;
        b'0', "POP", None, 0;
        b'2', "DUP", None, 0;
        b'(', "MARK", None, 0;
        b'1', "POP_MARK", None, 1;
        b'g', "GET", DecimalShort, 0;
        b'h', "BINGET", Uint(1), 1;
        b'j', "LONG_BINGET", Uint(4), 1;
        b'p', "PUT", DecimalShort, 0;
        b'q', "BINPUT", Uint(1), 1;
        b'r', "LONG_BINPUT", Uint(4), 1;
        0x94, "MEMOIZE", None, 4;
        0x82, "EXT1", Uint(1), 2;
        0x83, "EXT2", Uint(2), 2;
        0x84, "EXT4", Int4, 2;
        b'c', "GLOBAL", StringNlPair, 0;
        0x93, "STACK_GLOBAL", None, 4;
        b'R', "REDUCE", None, 0;
        b'b', "BUILD", None, 0;
        b'i', "INST", StringNlPair, 0;
        b'o', "OBJ", None, 1;
        0x81, "NEWOBJ", None, 2;
        0x92, "NEWOBJ_EX", None, 4;
        0x80, "PROTO", Uint(1), 2;
        b'.', "STOP", None, 0;
        0x95, "FRAME", Uint(8), 4;
        b'P', "PERSID", StringNlNoEscape, 0;
        b'Q', "BINPERSID", None, 1;
    }
}

/// The opcode table indexed by byte.
fn table() -> &'static [Option<&'static OpInfo>; 256] {
    static T: std::sync::OnceLock<[Option<&'static OpInfo>; 256]> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        let mut t = [None; 256];
        for o in OPS {
            t[o.code as usize] = Some(o);
        }
        t
    })
}

pub(super) fn info(code: u8) -> Option<&'static OpInfo> {
    table()[code as usize]
}

/// One decoded opcode.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    /// Offset of the opcode byte.
    pub pos: u64,
    pub(crate) info: &'static OpInfo,
    pub(super) arg: Arg,
    /// Bytes the opcode takes, its argument included.
    pub len: u64,
}

impl Op {
    pub(crate) fn range(&self) -> Range {
        Range::new(self.pos, self.pos + self.len)
    }
    /// The opcode's name as pickletools spells it (`BINPUT`, `STOP`).
    pub fn name(&self) -> &'static str {
        self.info.name
    }
    /// Its argument.
    pub fn arg(&self) -> &Arg {
        &self.arg
    }
}

/// Longest text-line argument accepted.
const MAX_LINE: usize = 1 << 20;

/// Reads the opcode at `pos`; `end` bounds it (the end of the bytes).
pub fn decode(data: &dyn Source, pos: u64, end: u64, scratch: &mut Vec<u8>) -> Result<Op, OpError> {
    let mut head = [0u8; 9];
    let n = data
        .read_at(pos, &mut head[..((end - pos).min(9)) as usize])
        .unwrap_or(0);
    if n == 0 {
        return Err(OpError::Short("the bytes end before STOP".into()));
    }
    let code = head[0];
    let Some(info) = info(code) else {
        return Err(OpError::Invalid(format!("invalid opcode {code:#04x}")));
    };
    let need = |k: usize| -> Result<(), OpError> {
        if n < 1 + k {
            Err(OpError::Short(format!("{} argument cut off", info.name)))
        } else {
            Ok(())
        }
    };
    let le = |k: usize| -> u64 {
        let mut v = 0u64;
        for i in 0..k {
            v |= (head[1 + i] as u64) << (8 * i);
        }
        v
    };
    let (arg, len) = match info.arg {
        ArgKind::None => (Arg::None, 1),
        ArgKind::Uint(k) => {
            need(k as usize)?;
            (Arg::Int(le(k as usize) as i64), 1 + k as u64)
        }
        ArgKind::Int4 => {
            need(4)?;
            (Arg::Int(le(4) as u32 as i32 as i64), 5)
        }
        ArgKind::Float8 => {
            need(8)?;
            let mut b = [0u8; 8];
            b.copy_from_slice(&head[1..9]);
            (Arg::Float(f64::from_be_bytes(b)), 9)
        }
        ArgKind::Long1 | ArgKind::Long4 => {
            let (hl, size) = if info.arg == ArgKind::Long1 {
                need(1)?;
                (1u64, le(1))
            } else {
                need(4)?;
                let s = le(4) as u32 as i32;
                if s < 0 {
                    return Err(OpError::Invalid(format!("LONG4 byte count < 0: {s}")));
                }
                (4, s as u64)
            };
            let start = pos + 1 + hl;
            if start + size > end {
                return Err(OpError::Short(format!(
                    "{} needs {size} bytes, {} remain",
                    info.name,
                    end.saturating_sub(start)
                )));
            }
            if size > 1 << 20 {
                return Err(OpError::Invalid(format!(
                    "{} of {size} bytes is too long to show",
                    info.name
                )));
            }
            let mut b = vec![0u8; size as usize];
            let _ = data.read_at(start, &mut b);
            (long_arg(&b), 1 + hl + size)
        }
        ArgKind::Counted(k, what) => {
            need(k as usize)?;
            let size = le(k as usize);
            if k == 4 && what == Payload::Latin1 && (size as u32 as i32) < 0 {
                return Err(OpError::Invalid(format!(
                    "string4 byte count < 0: {}",
                    size as u32 as i32
                )));
            }
            let start = pos + 1 + k as u64;
            let stop = start
                .checked_add(size)
                .ok_or_else(|| OpError::Invalid("length overflows".into()))?;
            if stop > end {
                return Err(OpError::Short(format!(
                    "{} needs {size} bytes, {} remain",
                    info.name,
                    end.saturating_sub(start)
                )));
            }
            (
                Arg::Payload(what, Range::new(start, stop)),
                1 + k as u64 + size,
            )
        }
        _ => {
            let lines = if info.arg == ArgKind::StringNlPair {
                2
            } else {
                1
            };
            let window = view(data, pos + 1, MAX_LINE * lines, scratch)
                .map_err(|e| OpError::Invalid(format!("read error: {e}")))?;
            let mut parts = Vec::new();
            let mut at = 0usize;
            for _ in 0..lines {
                match memchr::memchr(b'\n', &window[at..]) {
                    Some(i) => {
                        parts.push(window[at..at + i].to_vec());
                        at += i + 1;
                    }
                    None if window.len() - at >= MAX_LINE => {
                        return Err(OpError::Invalid(format!(
                            "{} line longer than 1 MiB",
                            info.name
                        )));
                    }
                    None => {
                        return Err(OpError::Short(format!(
                            "no newline found for {}",
                            info.name
                        )));
                    }
                }
            }
            (text_arg(info, &parts)?, 1 + at as u64)
        }
    };
    Ok(Op {
        pos,
        info,
        arg,
        len,
    })
}

fn text_arg(info: &OpInfo, parts: &[Vec<u8>]) -> Result<Arg, OpError> {
    let bad = |why: String| OpError::Invalid(format!("{}: {why}", info.name));
    let p = &parts[0];
    Ok(match info.arg {
        ArgKind::DecimalShort => match p.as_slice() {
            b"00" if info.name == "INT" => Arg::Bool(false),
            b"01" if info.name == "INT" => Arg::Bool(true),
            _ => decimal(p)
                .ok_or_else(|| bad(format!("invalid integer {:?}", String::from_utf8_lossy(p))))?,
        },
        ArgKind::DecimalLong => {
            let t = p.strip_suffix(b"L").unwrap_or(p);
            decimal(t)
                .ok_or_else(|| bad(format!("invalid integer {:?}", String::from_utf8_lossy(p))))?
        }
        ArgKind::FloatNl => {
            let s = std::str::from_utf8(p).map_err(|_| bad("not ASCII".into()))?;
            let v = parse_py_float(s.trim()).ok_or_else(|| bad(format!("invalid float {s:?}")))?;
            Arg::Float(v)
        }
        ArgKind::StringNl => {
            let q = p.first().copied().filter(|&c| c == b'\'' || c == b'"');
            let Some(q) = q else {
                return Err(bad("no string quotes".into()));
            };
            if p.len() < 2 || *p.last().unwrap_or(&0) != q {
                return Err(bad("string quote not found at both ends".into()));
            }
            let raw = escape_decode(&p[1..p.len() - 1]).map_err(bad)?;
            if !raw.is_ascii() {
                return Err(bad("not ASCII after unescaping".into()));
            }
            Arg::Text(String::from_utf8_lossy(&raw).into())
        }
        ArgKind::StringNlNoEscape | ArgKind::StringNlPair => {
            let mut out = Vec::new();
            for (i, p) in parts.iter().enumerate() {
                let raw = escape_decode(p).map_err(bad)?;
                if !raw.is_ascii() {
                    return Err(bad("not ASCII".into()));
                }
                if i > 0 {
                    out.push(b' ');
                }
                out.extend_from_slice(&raw);
            }
            Arg::Text(String::from_utf8_lossy(&out).into())
        }
        ArgKind::UnicodeNl => Arg::Text(raw_unicode_escape(p).map_err(bad)?.into()),
        _ => Arg::None,
    })
}

/// Python's `int(bytes)`: optional sign, digits, surrounding whitespace,
/// underscores between digits.
fn decimal(t: &[u8]) -> Option<Arg> {
    let s = std::str::from_utf8(t).ok()?.trim();
    let (neg, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    let trimmed = if trimmed.is_empty() { "0" } else { trimmed };
    let signed = if neg && trimmed != "0" {
        format!("-{trimmed}")
    } else {
        trimmed.to_string()
    };
    Some(match signed.parse::<i64>() {
        Ok(v) => Arg::Int(v),
        Err(_) => Arg::Big(signed.into()),
    })
}

fn parse_py_float(s: &str) -> Option<f64> {
    let l = s.to_ascii_lowercase();
    match l.as_str() {
        "inf" | "+inf" | "infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" | "+nan" | "-nan" => Some(f64::NAN),
        _ => l.replace('_', "").parse::<f64>().ok(),
    }
}

/// A LONG1/LONG4 argument: little-endian two's complement.
fn long_arg(b: &[u8]) -> Arg {
    if b.is_empty() {
        return Arg::Int(0);
    }
    if b.len() <= 8 {
        let neg = b[b.len() - 1] & 0x80 != 0;
        let mut v: u64 = if neg { u64::MAX } else { 0 };
        for (i, &x) in b.iter().enumerate() {
            v &= !(0xff << (8 * i));
            v |= (x as u64) << (8 * i);
        }
        return Arg::Int(v as i64);
    }
    Arg::Big(twos_to_decimal(b).into())
}

/// Decimal text of a little-endian two's-complement integer.
pub fn twos_to_decimal(b: &[u8]) -> String {
    let neg = b.last().is_some_and(|&x| x & 0x80 != 0);
    // Magnitude, little-endian.
    let mut mag: Vec<u8> = if neg {
        let mut m: Vec<u8> = b.iter().map(|x| !x).collect();
        for x in &mut m {
            let (v, carry) = x.overflowing_add(1);
            *x = v;
            if !carry {
                break;
            }
        }
        m
    } else {
        b.to_vec()
    };
    // Repeated division by 10^9, most significant byte first.
    mag.reverse();
    let mut chunks = Vec::new();
    while mag.iter().any(|&x| x != 0) {
        let mut rem: u64 = 0;
        for x in &mut mag {
            let cur = (rem << 8) | *x as u64;
            *x = (cur / 1_000_000_000) as u8;
            rem = cur % 1_000_000_000;
        }
        chunks.push(rem);
        while mag.first() == Some(&0) {
            mag.remove(0);
        }
    }
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    match chunks.split_last() {
        None => s.push('0'),
        Some((top, rest)) => {
            s.push_str(&top.to_string());
            for c in rest.iter().rev() {
                s.push_str(&format!("{c:09}"));
            }
        }
    }
    s
}

/// Python's `codecs.escape_decode` (bytes literal escapes).
pub fn escape_decode(s: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        i += 1;
        let Some(&e) = s.get(i) else {
            return Err("trailing \\ in string".into());
        };
        i += 1;
        match e {
            b'\n' => {}
            b'\\' => out.push(b'\\'),
            b'\'' => out.push(b'\''),
            b'"' => out.push(b'"'),
            b'a' => out.push(7),
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'v' => out.push(11),
            b'0'..=b'7' => {
                let mut v = (e - b'0') as u32;
                for _ in 0..2 {
                    match s.get(i) {
                        Some(&d @ b'0'..=b'7') => {
                            v = v * 8 + (d - b'0') as u32;
                            i += 1;
                        }
                        _ => break,
                    }
                }
                out.push(v as u8);
            }
            b'x' => {
                let h = s.get(i..i + 2).and_then(|h| std::str::from_utf8(h).ok());
                match h.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(v) => {
                        out.push(v);
                        i += 2;
                    }
                    None => return Err(format!("invalid \\x escape at position {}", i - 2)),
                }
            }
            other => {
                out.push(b'\\');
                out.push(other);
            }
        }
    }
    Ok(out)
}

/// Python's `raw-unicode-escape` decoding: bytes are latin-1 characters,
/// except `\uXXXX` and `\UXXXXXXXX`.
pub fn raw_unicode_escape(s: &[u8]) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\' && matches!(s.get(i + 1), Some(b'u' | b'U')) {
            // An odd run of backslashes escapes; count them.
            let n = if s[i + 1] == b'u' { 4 } else { 8 };
            let hex = s
                .get(i + 2..i + 2 + n)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u32::from_str_radix(h, 16).ok())
                .ok_or("truncated \\uXXXX escape")?;
            out.push(char::from_u32(hex).ok_or("\\U escape out of range")?);
            i += 2 + n;
            continue;
        }
        out.push(s[i] as char);
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    fn one(bytes: &[u8]) -> Result<Op, OpError> {
        let m = MemSource::new(bytes.to_vec());
        decode(&m, 0, bytes.len() as u64, &mut Vec::new())
    }

    #[test]
    fn table_has_68_distinct_opcodes() {
        assert_eq!(OPS.len(), 68);
        let mut seen = std::collections::HashSet::new();
        for o in OPS {
            assert!(seen.insert(o.code), "{}", o.name);
        }
    }

    #[test]
    fn arguments() {
        assert_eq!(one(b"\x80\x02").unwrap().arg, Arg::Int(2));
        assert_eq!(one(b"J\xff\xff\xff\xff").unwrap().arg, Arg::Int(-1));
        assert_eq!(one(b"I01\n").unwrap().arg, Arg::Bool(true));
        assert_eq!(one(b"I-12\n").unwrap().arg, Arg::Int(-12));
        assert_eq!(
            one(b"L123456789012345678901234L\n").unwrap().arg,
            Arg::Big("123456789012345678901234".into())
        );
        assert_eq!(one(b"\x8a\x02\x00\x80").unwrap().arg, Arg::Int(-32768));
        assert_eq!(one(b"\x8a\x00").unwrap().arg, Arg::Int(0));
        let big = one(b"\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19").unwrap();
        assert_eq!(big.arg, Arg::Big("119547037146038801333356".into()));
        assert_eq!(
            one(b"G?\xf8\x00\x00\x00\x00\x00\x00").unwrap().arg,
            Arg::Float(1.5)
        );
        assert_eq!(one(b"F-1.25\n").unwrap().arg, Arg::Float(-1.25));
        assert_eq!(
            one(b"S'a\\n\\\\b\\x00c'\n").unwrap().arg,
            Arg::Text("a\n\\b\0c".into())
        );
        assert_eq!(
            one(b"ccollections\nOrderedDict\n").unwrap().arg,
            Arg::Text("collections OrderedDict".into())
        );
        assert_eq!(
            one(b"V\\u00e9t\xe9\n").unwrap().arg,
            Arg::Text("été".into())
        );
        let b = one(b"C\x03abc").unwrap();
        assert_eq!(b.arg, Arg::Payload(Payload::Bytes, Range::new(2, 5)));
        assert_eq!(b.len, 5);
    }

    #[test]
    fn damage() {
        assert!(matches!(one(b"\xff"), Err(OpError::Invalid(_))));
        assert!(matches!(
            one(b"X\x05\x00\x00\x00ab"),
            Err(OpError::Short(_))
        ));
        assert!(matches!(one(b"J\x01"), Err(OpError::Short(_))));
        assert!(matches!(one(b"cmod\nna"), Err(OpError::Short(_))));
        assert!(matches!(one(b"S'abc\n"), Err(OpError::Invalid(_))));
        assert!(matches!(
            one(b"\x8b\xff\xff\xff\xff"),
            Err(OpError::Invalid(_))
        ));
        assert_eq!(twos_to_decimal(&[0xff; 9]), "-1");
        assert_eq!(
            twos_to_decimal(&[0, 0, 0, 0, 0, 0, 0, 0, 1]),
            "18446744073709551616"
        );
    }
}
