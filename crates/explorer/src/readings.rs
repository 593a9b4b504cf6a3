//! What the bytes under the hex cursor read as: integers, floats, varints,
//! text. Pure functions, so they are tested without a terminal.

/// One reading: a label and its value in both byte orders (or one value).
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub(super) label: &'static str,
    pub(super) le: String,
    pub(super) be: Option<String>,
}

fn get<const N: usize>(b: &[u8]) -> Option<[u8; N]> {
    b.get(..N)?.try_into().ok()
}

/// IEEE 754 half precision to f32.
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((h >> 10) & 0x1f) as i32;
    let frac = (h & 0x3ff) as f32;
    match exp {
        0 => sign * frac * 2f32.powi(-24),
        31 if frac == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        e => sign * (1.0 + frac / 1024.0) * 2f32.powi(e - 15),
    }
}

/// bfloat16 to f32 (the top half of an f32).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// Unsigned LEB128 (protobuf varint): value and length, at most 10 bytes.
pub fn uleb128(b: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for (i, &x) in b.iter().take(10).enumerate() {
        v |= ((x & 0x7f) as u64) << (7 * i);
        if x & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// Signed LEB128: value and length.
pub fn sleb128(b: &[u8]) -> Option<(i64, usize)> {
    let mut v: i64 = 0;
    for (i, &x) in b.iter().take(10).enumerate() {
        let shift = 7 * i as u32;
        v |= ((x & 0x7f) as i64) << shift;
        if x & 0x80 == 0 {
            if shift + 7 < 64 && x & 0x40 != 0 {
                v |= -1i64 << (shift + 7);
            }
            return Some((v, i + 1));
        }
    }
    None
}

/// Shortest text that reads back as the same f32.
fn float32(x: f32) -> String {
    if x.is_finite() && x != 0.0 && (x.abs() >= 1e7 || x.abs() < 1e-4) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

fn float64(x: f64) -> String {
    if x.is_finite() && x != 0.0 && (x.abs() >= 1e16 || x.abs() < 1e-4) {
        format!("{x:e}")
    } else {
        format!("{x}")
    }
}

/// Every reading of the bytes at the cursor (`b` starts at the cursor).
pub fn readings(b: &[u8]) -> Vec<Reading> {
    let mut out = Vec::new();
    let mut both = |label, le: Option<String>, be: Option<String>| {
        if let Some(le) = le {
            out.push(Reading { label, le, be });
        }
    };
    both(
        "u8",
        get::<1>(b).map(|x| format!("{} ({:#04x})", x[0], x[0])),
        None,
    );
    both("i8", get::<1>(b).map(|x| (x[0] as i8).to_string()), None);
    both(
        "u16",
        get::<2>(b).map(|x| u16::from_le_bytes(x).to_string()),
        get::<2>(b).map(|x| u16::from_be_bytes(x).to_string()),
    );
    both(
        "i16",
        get::<2>(b).map(|x| i16::from_le_bytes(x).to_string()),
        get::<2>(b).map(|x| i16::from_be_bytes(x).to_string()),
    );
    both(
        "u32",
        get::<4>(b).map(|x| u32::from_le_bytes(x).to_string()),
        get::<4>(b).map(|x| u32::from_be_bytes(x).to_string()),
    );
    both(
        "i32",
        get::<4>(b).map(|x| i32::from_le_bytes(x).to_string()),
        get::<4>(b).map(|x| i32::from_be_bytes(x).to_string()),
    );
    both(
        "u64",
        get::<8>(b).map(|x| u64::from_le_bytes(x).to_string()),
        get::<8>(b).map(|x| u64::from_be_bytes(x).to_string()),
    );
    both(
        "i64",
        get::<8>(b).map(|x| i64::from_le_bytes(x).to_string()),
        get::<8>(b).map(|x| i64::from_be_bytes(x).to_string()),
    );
    both(
        "f16",
        get::<2>(b).map(|x| float32(f16_to_f32(u16::from_le_bytes(x)))),
        get::<2>(b).map(|x| float32(f16_to_f32(u16::from_be_bytes(x)))),
    );
    both(
        "bf16",
        get::<2>(b).map(|x| float32(bf16_to_f32(u16::from_le_bytes(x)))),
        get::<2>(b).map(|x| float32(bf16_to_f32(u16::from_be_bytes(x)))),
    );
    both(
        "f32",
        get::<4>(b).map(|x| float32(f32::from_le_bytes(x))),
        get::<4>(b).map(|x| float32(f32::from_be_bytes(x))),
    );
    both(
        "f64",
        get::<8>(b).map(|x| float64(f64::from_le_bytes(x))),
        get::<8>(b).map(|x| float64(f64::from_be_bytes(x))),
    );
    both(
        "uleb128",
        uleb128(b).map(|(v, n)| format!("{v} ({n} bytes)")),
        None,
    );
    both(
        "sleb128",
        sleb128(b).map(|(v, n)| format!("{v} ({n} bytes)")),
        None,
    );
    let ascii: String = b
        .iter()
        .take(16)
        .map(|&c| {
            if (0x20..0x7f).contains(&c) {
                c as char
            } else {
                '.'
            }
        })
        .collect();
    both("ascii", Some(ascii), None);
    both("utf-8", Some(utf8_prefix(&b[..b.len().min(32)])), None);
    out
}

/// The text the bytes start with, escaped; an invalid first byte says so.
fn utf8_prefix(b: &[u8]) -> String {
    let valid = match std::str::from_utf8(b) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or(""),
    };
    if valid.is_empty() && !b.is_empty() {
        return "(not UTF-8)".to_string();
    }
    format!("\"{}\"", pparse::name::escape_str(valid))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find<'a>(r: &'a [Reading], label: &str) -> &'a Reading {
        r.iter().find(|x| x.label == label).unwrap()
    }

    #[test]
    fn integers_both_orders() {
        let r = readings(&[0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x88]);
        assert_eq!(find(&r, "u16").le, "513");
        assert_eq!(find(&r, "u16").be.as_deref(), Some("258"));
        assert_eq!(find(&r, "u32").le, "67305985");
        assert_eq!(find(&r, "i64").le, (-8644934341102468607i64).to_string());
        assert_eq!(find(&r, "i8").le, "1");
        assert!(r.iter().all(|x| x.label != "x"));
        // Short input: only what fits.
        let r = readings(&[0xff]);
        assert_eq!(find(&r, "i8").le, "-1");
        assert!(r.iter().all(|x| x.label != "u16"));
    }

    #[test]
    fn floats() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x7c00), f32::INFINITY);
        assert!(f16_to_f32(0x7e00).is_nan());
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
        let r = readings(&1.5f32.to_le_bytes());
        assert_eq!(find(&r, "f32").le, "1.5");
        let r = readings(&std::f64::consts::PI.to_be_bytes());
        assert_eq!(find(&r, "f64").be.as_deref(), Some("3.141592653589793"));
    }

    #[test]
    fn varints_and_text() {
        assert_eq!(uleb128(&[0xe5, 0x8e, 0x26]), Some((624485, 3)));
        assert_eq!(sleb128(&[0xc0, 0xbb, 0x78]), Some((-123456, 3)));
        assert_eq!(sleb128(&[0x7f]), Some((-1, 1)));
        assert_eq!(uleb128(&[0x80; 11]), None);
        let r = readings(b"h\xc3\xa9llo\x1b[2J");
        assert_eq!(find(&r, "ascii").le, "h..llo.[2J");
        assert_eq!(find(&r, "utf-8").le, "\"héllo\\x1b[2J\"");
    }
}
