//! Decoding one element of any [`Dtype`] from its bits: the small float
//! formats bit-exactly to `f32`, everything else to a [`Element`]. Apart from
//! the walk, so that the bit-level rules (packing, NaNs, subnormals) sit
//! with their tests and the `.npy` export can reuse them.

use crate::offer::tensor::{Dtype, TimeUnit};

/// One decoded element.
#[derive(Clone, Debug, PartialEq)]
pub enum Element {
    /// Every real float type, widened exactly to `f64`.
    Float(f64),
    /// Complex types: (real, imaginary).
    Complex(f64, f64),
    /// Signed integers (and `QI8`, `QI32`).
    Int(i64),
    /// Unsigned integers (and `QU8`, `QU4X2`, `QU2X4`).
    UInt(u64),
    /// A boolean element.
    Bool(bool),
    /// A NumPy `datetime64` (`delta` false) or `timedelta64` count.
    Time {
        /// Units since the epoch (or of the span); `i64::MIN` is NaT.
        count: i64,
        /// The unit of one count.
        unit: TimeUnit,
        /// A `timedelta64`.
        delta: bool,
    },
    /// A string or bytes element (`S`, `U`, `V`), as Python shows it.
    Text(Box<str>),
}

impl Element {
    /// The value as a real number: complex numbers give their modulus,
    /// booleans 0 or 1, 64-bit integers the nearest `f64`.
    #[inline]
    pub fn as_f64(&self) -> f64 {
        match *self {
            Element::Float(x) => x,
            Element::Complex(re, im) => re.hypot(im),
            Element::Int(i) => i as f64,
            Element::UInt(u) => u as f64,
            Element::Bool(b) => f64::from(u8::from(b)),
            Element::Time { count, .. } if count != i64::MIN => count as f64,
            Element::Time { .. } | Element::Text(_) => f64::NAN,
        }
    }

    /// The value as NumPy prints a `float64`/`complex128` scalar, which is
    /// Python's `repr` of `float`/`complex`: the shortest decimal that
    /// round-trips through `f64` (`0.1`, `1e-05`, `1e+16`, `-0.0`, `nan`,
    /// `inf`, `(1+2j)`, `-0j`), integers in decimal, booleans `True`/`False`.
    ///
    /// Narrower floats are shown by their exact `f64` value (an `F32` 0.1
    /// shows as `0.10000000149011612`), as `repr(float(x))` would.
    pub fn display(&self) -> String {
        match *self {
            Element::Float(x) => py_repr(x, true, false),
            Element::Complex(re, im) => {
                if re == 0.0 && re.is_sign_positive() {
                    format!("{}j", py_repr(im, false, false))
                } else {
                    format!(
                        "({}{}j)",
                        py_repr(re, false, false),
                        py_repr(im, false, true)
                    )
                }
            }
            Element::Int(i) => i.to_string(),
            Element::UInt(u) => u.to_string(),
            Element::Bool(b) => if b { "True" } else { "False" }.to_string(),
            Element::Time { count, unit, delta } => time_text(count, unit, delta),
            Element::Text(ref t) => t.to_string(),
        }
    }
}

/// A `datetime64` or `timedelta64` as NumPy's `str` shows it
/// (`2024-01-31T12:00:00.000`, as many fields as the unit has;
/// `30 milliseconds`).
fn time_text(count: i64, unit: TimeUnit, delta: bool) -> String {
    if count == i64::MIN {
        return "NaT".into();
    }
    let name = TimeUnit::NAMES
        .get(usize::from(unit.unit))
        .copied()
        .unwrap_or("?");
    let Some(n) = count.checked_mul(i64::from(unit.count)) else {
        return format!("{count} × {}", unit.text());
    };
    if delta {
        // As NumPy's str: the count in the base unit, spelled out.
        let long = [
            "years",
            "months",
            "weeks",
            "days",
            "hours",
            "minutes",
            "seconds",
            "milliseconds",
            "microseconds",
            "nanoseconds",
            "picoseconds",
            "femtoseconds",
            "attoseconds",
        ];
        let word = long.get(usize::from(unit.unit)).copied().unwrap_or("?");
        return format!("{n} {word}");
    }
    match name {
        "Y" => return format!("{}", 1970i128 + i128::from(n)),
        "M" => {
            let (y, m) = (n.div_euclid(12), n.rem_euclid(12));
            return format!("{}-{:02}", 1970i128 + i128::from(y), m + 1);
        }
        _ => {}
    }
    // Whole days, then what is left of the day in units of 10^-digits s.
    let (per_day, digits): (i128, u32) = match name {
        "W" => (0, 0),
        "D" => (1, 0),
        "h" => (24, 0),
        "m" => (24 * 60, 0),
        _ => {
            let d = match name {
                "s" => 0,
                "ms" => 3,
                "us" => 6,
                "ns" => 9,
                "ps" => 12,
                "fs" => 15,
                _ => 18,
            };
            (86_400 * 10i128.pow(d), d)
        }
    };
    let n = i128::from(n);
    let (days, rest) = if name == "W" {
        (n * 7, 0)
    } else {
        (n.div_euclid(per_day), n.rem_euclid(per_day))
    };
    let (y, mo, d) = civil(days);
    let date = format!("{y}-{mo:02}-{d:02}");
    match name {
        "W" | "D" => date,
        "h" => format!("{date}T{rest:02}"),
        "m" => format!("{date}T{:02}:{:02}", rest / 60, rest % 60),
        _ => {
            let scale = 10i128.pow(digits);
            let secs = rest / scale;
            let frac = rest % scale;
            let hms = format!(
                "{date}T{:02}:{:02}:{:02}",
                secs / 3600,
                secs / 60 % 60,
                secs % 60
            );
            if digits == 0 {
                hms
            } else {
                format!("{hms}.{frac:0w$}", w = digits as usize)
            }
        }
    }
}

/// The proleptic Gregorian (year, month, day) of day `z` after 1970-01-01.
fn civil(z: i128) -> (i128, i128, i128) {
    // Counting in 400-year eras from 0000-03-01 makes leap days the last
    // day of each year.
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i128::from(m <= 2);
    (y, m, d)
}

/// An x87 extended-precision number (the first 10 bytes, little-endian, of
/// NumPy's 16-byte `longdouble`) rounded to the nearest `f64`.
fn f80_to_f64(b: [u8; 10]) -> f64 {
    let sig = u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]));
    let se = u16::from_le_bytes([b[8], b[9]]);
    let neg = se & 0x8000 != 0;
    let exp = i32::from(se & 0x7fff);
    let mag = if exp == 0x7fff {
        if sig << 1 == 0 {
            f64::INFINITY
        } else {
            f64::NAN
        }
    } else {
        // value = sig × 2^(exp − 16383 − 63); (sig as f64) rounds once,
        // the scaling by powers of two is exact until the f64 range ends.
        let mut v = sig as f64;
        let mut e = if exp == 0 {
            1 - 16383 - 63
        } else {
            exp - 16383 - 63
        };
        while e > 0 && v.is_finite() {
            let k = e.min(1000);
            v *= pow2(k);
            e -= k;
        }
        while e < 0 && v != 0.0 {
            let k = (-e).min(1000);
            v *= pow2(-k);
            e += k;
        }
        v
    };
    if neg { -mag } else { mag }
}

/// Python's `repr` of bytes (`b'ab\x00'`), at most `max` bytes shown.
fn bytes_repr(b: &[u8], max: usize) -> String {
    // Python quotes with " when there is a ' and no ".
    let q = if b.contains(&b'\'') && !b.contains(&b'"') {
        '"'
    } else {
        '\''
    };
    let mut s = format!("b{q}");
    for &c in b.iter().take(max) {
        match c {
            b'\\' => s.push_str("\\\\"),
            _ if char::from(c) == q => {
                s.push('\\');
                s.push(q);
            }
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            0x20..=0x7e => s.push(char::from(c)),
            _ => s.push_str(&format!("\\x{c:02x}")),
        }
    }
    if b.len() > max {
        s.push('…');
    }
    s.push(q);
    s
}

/// Python's `repr` of a str, control and unassigned characters escaped, at
/// most `max` characters shown.
fn str_repr(chars: &[u32], max: usize) -> String {
    let has = |c: char| chars.contains(&u32::from(c));
    let q = if has('\'') && !has('"') { '"' } else { '\'' };
    let mut s = String::from(q);
    for (i, &c) in chars.iter().enumerate() {
        if i == max {
            s.push('…');
            break;
        }
        match char::from_u32(c) {
            Some('\\') => s.push_str("\\\\"),
            Some(ch) if ch == q => {
                s.push('\\');
                s.push(q);
            }
            Some(ch) if !ch.is_control() => s.push(ch),
            _ if c <= 0xff => s.push_str(&format!("\\x{c:02x}")),
            _ if c <= 0xffff => s.push_str(&format!("\\u{c:04x}")),
            _ => s.push_str(&format!("\\U{c:08x}")),
        }
    }
    s.push(q);
    s
}

/// Characters of a string element shown at most.
const TEXT_CHARS: usize = 80;

/// Python's `repr` of a float (format code `'r'`): shortest round-trip
/// digits, positional when the decimal exponent is in `-4 < e <= 16`.
/// `dot0` adds `.0` to integral positional values (`repr(float)` does, the
/// parts of `repr(complex)` do not); `sign` forces a `+` on non-negatives.
fn py_repr(x: f64, dot0: bool, sign: bool) -> String {
    let plus = if sign { "+" } else { "" };
    if x.is_nan() {
        return format!("{plus}nan");
    }
    if x.is_infinite() {
        return if x < 0.0 {
            "-inf".into()
        } else {
            format!("{plus}inf")
        };
    }
    // Rust's `{:e}` gives the shortest round-trip digits (`d.ddde±x`), but
    // breaks a tie between two candidates of that length upwards where
    // Python takes the one nearest to the value (ties to even): take the
    // correctly rounded decimal of that length when it round-trips.
    let shortest = format!("{:e}", x.abs());
    let n = shortest
        .split('e')
        .next()
        .map_or(1, |m| m.len().saturating_sub(1).max(1));
    let nearest = format!("{:.*e}", n - 1, x.abs());
    let sci = if nearest.parse::<f64>() == Ok(x.abs()) {
        nearest
    } else {
        shortest
    };
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let exp: i64 = exp.parse().unwrap_or(0);
    // Python's decpt: the value is 0.DIGITS × 10^decpt.
    let decpt = exp + 1;
    let n = digits.len() as i64;
    let body = if -4 < decpt && decpt <= 16 {
        if decpt <= 0 {
            format!("0.{}{}", "0".repeat((-decpt) as usize), digits)
        } else if decpt >= n {
            let zeros = "0".repeat((decpt - n) as usize);
            if dot0 {
                format!("{digits}{zeros}.0")
            } else {
                format!("{digits}{zeros}")
            }
        } else {
            let (a, b) = digits.split_at(decpt as usize);
            format!("{a}.{b}")
        }
    } else {
        let (a, b) = digits.split_at(1);
        let frac = if b.is_empty() {
            String::new()
        } else {
            format!(".{b}")
        };
        let es = if exp < 0 { '-' } else { '+' };
        format!("{a}{frac}e{es}{:02}", exp.unsigned_abs())
    };
    if x.is_sign_negative() {
        format!("-{body}")
    } else {
        format!("{plus}{body}")
    }
}

/// Decodes element number `index` of `bytes`: the element whose bits start
/// at bit `index × dtype.bits()` (for byte-sized types, at byte
/// `index × itemsize`; for `F4`/`F6` within the packed bit stream described
/// in the module docs). `None` when `bytes` is too short.
pub fn decode(dtype: Dtype, bytes: &[u8], index: u64, big_endian: bool) -> Option<Element> {
    let bit = index.checked_mul(dtype.bits())?;
    decode_at(dtype, bytes, bit, big_endian)
}

/// `n` (≤ 8) bits at bit offset `bit` of the little-endian bit stream `bytes`.
#[inline]
pub(super) fn bits_at(bytes: &[u8], bit: u64, n: u64) -> Option<u32> {
    let start = usize::try_from(bit / 8).ok()?;
    let shift = (bit % 8) as u32;
    let need = (shift as usize + n as usize).div_ceil(8);
    let b = bytes.get(start..start.checked_add(need)?)?;
    let mut acc = 0u32;
    for (i, byte) in b.iter().enumerate() {
        acc |= u32::from(*byte) << (8 * i);
    }
    Some((acc >> shift) & ((1u32 << n) - 1))
}

/// `N` bytes at byte `start`, in little-endian order (swapped when `be`).
#[inline]
fn le<const N: usize>(bytes: &[u8], start: usize, be: bool) -> Option<[u8; N]> {
    let mut a: [u8; N] = bytes.get(start..start.checked_add(N)?)?.try_into().ok()?;
    if be {
        a.reverse();
    }
    Some(a)
}

/// The value of a packed 4- or 2-bit integer's bits, sign-extended for the
/// signed types.
pub(super) fn small_int(dtype: Dtype, code: u32) -> i64 {
    let bits = dtype.bits() as u32;
    let v = i64::from(code & ((1 << bits) - 1));
    match dtype {
        Dtype::I4 | Dtype::I2 if v >= 1 << (bits - 1) => v - (1 << bits),
        _ => v,
    }
}

/// The byte offset of an element at bit `bit` of a byte-sized type.
#[inline]
pub(super) fn byte_of(bit: u64) -> Option<usize> {
    bit.is_multiple_of(8)
        .then_some(bit / 8)
        .and_then(|b| usize::try_from(b).ok())
}

/// Decodes the element at bit offset `bit` of `bytes`.
#[inline]
pub(super) fn decode_at(dtype: Dtype, bytes: &[u8], bit: u64, be: bool) -> Option<Element> {
    use Dtype::*;
    if let F4 | F6_E2M3 | F6_E3M2 = dtype {
        let code = bits_at(bytes, bit, dtype.bits())?;
        return Some(Element::Float(f64::from(f32::from_bits(small_f32(
            dtype, code,
        )))));
    }
    if let I4 | U4 | I2 | U2 = dtype {
        let v = small_int(dtype, bits_at(bytes, bit, dtype.bits())?);
        return Some(match dtype {
            I4 | I2 => Element::Int(v),
            _ => Element::UInt(v.unsigned_abs()),
        });
    }
    let at = byte_of(bit)?;
    Some(match dtype {
        BOOL => Element::Bool(*bytes.get(at)? != 0),
        U8 | QU8 | QU4X2 | QU2X4 => Element::UInt(u64::from(*bytes.get(at)?)),
        I8 | QI8 => Element::Int(i64::from(*bytes.get(at)? as i8)),
        F8_E5M2 | F8_E4M3 | F8_E8M0 | F8_E4M3FNUZ | F8_E5M2FNUZ => {
            let code = u32::from(*bytes.get(at)?);
            Element::Float(f64::from(f32::from_bits(small_f32(dtype, code))))
        }
        I16 => Element::Int(i64::from(i16::from_le_bytes(le(bytes, at, be)?))),
        U16 => Element::UInt(u64::from(u16::from_le_bytes(le(bytes, at, be)?))),
        F16 | BF16 => {
            let code = u32::from(u16::from_le_bytes(le(bytes, at, be)?));
            Element::Float(f64::from(f32::from_bits(small_f32(dtype, code))))
        }
        I32 | QI32 => Element::Int(i64::from(i32::from_le_bytes(le(bytes, at, be)?))),
        U32 => Element::UInt(u64::from(u32::from_le_bytes(le(bytes, at, be)?))),
        F32 => Element::Float(f64::from(f32::from_le_bytes(le(bytes, at, be)?))),
        I64 => Element::Int(i64::from_le_bytes(le(bytes, at, be)?)),
        U64 => Element::UInt(u64::from_le_bytes(le(bytes, at, be)?)),
        F64 => Element::Float(f64::from_le_bytes(le(bytes, at, be)?)),
        C32 => {
            let re = u32::from(u16::from_le_bytes(le(bytes, at, be)?));
            let im = u32::from(u16::from_le_bytes(le(bytes, at.checked_add(2)?, be)?));
            Element::Complex(
                f64::from(f32::from_bits(f16_to_f32(re))),
                f64::from(f32::from_bits(f16_to_f32(im))),
            )
        }
        C64 => Element::Complex(
            f64::from(f32::from_le_bytes(le(bytes, at, be)?)),
            f64::from(f32::from_le_bytes(le(bytes, at.checked_add(4)?, be)?)),
        ),
        C128 => Element::Complex(
            f64::from_le_bytes(le(bytes, at, be)?),
            f64::from_le_bytes(le(bytes, at.checked_add(8)?, be)?),
        ),
        F128 => Element::Float(f80_to_f64(le16(bytes, at, be)?)),
        C256 => Element::Complex(
            f80_to_f64(le16(bytes, at, be)?),
            f80_to_f64(le16(bytes, at.checked_add(16)?, be)?),
        ),
        Datetime(unit) | Timedelta(unit) => Element::Time {
            count: i64::from_le_bytes(le(bytes, at, be)?),
            unit,
            delta: matches!(dtype, Timedelta(_)),
        },
        Bytes(n) | Void(n) => {
            let raw = bytes.get(at..at.checked_add(n as usize)?)?;
            // NumPy drops the NUL padding of `S` items, not of `V` ones.
            let shown = if matches!(dtype, Bytes(_)) {
                let end = raw.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
                &raw[..end]
            } else {
                raw
            };
            Element::Text(bytes_repr(shown, TEXT_CHARS).into())
        }
        Unicode(n) => {
            let len = (n as usize).checked_mul(4)?;
            let raw = bytes.get(at..at.checked_add(len)?)?;
            let mut units: Vec<u32> = raw
                .chunks_exact(4)
                .map(|c| {
                    let a = [c[0], c[1], c[2], c[3]];
                    if be {
                        u32::from_be_bytes(a)
                    } else {
                        u32::from_le_bytes(a)
                    }
                })
                .collect();
            while units.last() == Some(&0) {
                units.pop();
            }
            Element::Text(str_repr(&units, TEXT_CHARS).into())
        }
        F4 | F6_E2M3 | F6_E3M2 | I4 | U4 | I2 | U2 | Ggml(_) => return None,
    })
}

/// The 10 significant bytes of a 16-byte `longdouble`, little-endian. A
/// big-endian one (not written on x86, but legal in a header) keeps them in
/// its last 10 bytes.
fn le16(bytes: &[u8], start: usize, be: bool) -> Option<[u8; 10]> {
    let a: [u8; 16] = le(bytes, start, be)?;
    a[..10].try_into().ok()
}

/// What a small float format does with its top codes.
#[derive(Clone, Copy)]
enum Special {
    /// IEEE: all-ones exponent is ±inf (zero mantissa) or NaN.
    Ieee,
    /// `fn`: only all-ones exponent and mantissa is NaN, no infinities.
    Fn,
    /// `fnuz`: only the negative-zero code is NaN.
    Fnuz,
    /// Every code is finite (`F4`, `F6`).
    Finite,
}

const F32_QNAN: u32 = 0x7fc0_0000;

/// The `f32` bits of code `code` of a small float format (every dtype
/// narrower than 32 bits: F4, F6, F8, F16, BF16). Codes are taken modulo
/// the format's width. Other dtypes give 0.
#[inline]
pub(super) fn small_f32(dtype: Dtype, code: u32) -> u32 {
    use Dtype::*;
    match dtype {
        F16 => f16_to_f32(code & 0xffff),
        BF16 => (code & 0xffff) << 16,
        F8_E8M0 => {
            let e = code & 0xff;
            if e == 0xff {
                F32_QNAN
            } else if e == 0 {
                // 2^-127: an f32 subnormal.
                0x0040_0000
            } else {
                e << 23
            }
        }
        F8_E4M3 => minifloat(code & 0xff, 4, 3, 7, Special::Fn),
        F8_E5M2 => minifloat(code & 0xff, 5, 2, 15, Special::Ieee),
        F8_E4M3FNUZ => minifloat(code & 0xff, 4, 3, 8, Special::Fnuz),
        F8_E5M2FNUZ => minifloat(code & 0xff, 5, 2, 16, Special::Fnuz),
        F4 => minifloat(code & 0xf, 2, 1, 1, Special::Finite),
        F6_E2M3 => minifloat(code & 0x3f, 2, 3, 1, Special::Finite),
        F6_E3M2 => minifloat(code & 0x3f, 3, 2, 3, Special::Finite),
        _ => 0,
    }
}

/// A sign-exponent-mantissa float of `1 + ebits + mbits` bits as `f32` bits
/// (exact: every such format with `ebits <= 5`, `mbits <= 3` fits in f32).
#[inline]
fn minifloat(code: u32, ebits: u32, mbits: u32, bias: i32, special: Special) -> u32 {
    let width = 1 + ebits + mbits;
    let neg = code >> (width - 1) & 1 == 1;
    let emax = (1u32 << ebits) - 1;
    let mmax = (1u32 << mbits) - 1;
    let e = (code >> mbits) & emax;
    let m = code & mmax;
    let sign = if neg { 0x8000_0000 } else { 0 };
    match special {
        Special::Ieee if e == emax => {
            return if m == 0 {
                sign | 0x7f80_0000
            } else {
                sign | F32_QNAN
            };
        }
        Special::Fn if e == emax && m == mmax => return sign | F32_QNAN,
        Special::Fnuz if neg && e == 0 && m == 0 => return 0x8000_0000 | F32_QNAN,
        _ => {}
    }
    // value = m × 2^(1 − bias − mbits) for subnormals,
    //         (2^mbits + m) × 2^(e − bias − mbits) otherwise.
    let (sig, exp) = if e == 0 {
        (m, 1 - bias - mbits as i32)
    } else {
        ((1 << mbits) | m, e as i32 - bias - mbits as i32)
    };
    // Exact: a small integer times a power of two, representable in f32.
    let v = (f64::from(sig) * pow2(exp)) as f32;
    sign | v.to_bits()
}

/// 2^e for -1022 <= e <= 1023, exactly.
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// IEEE half to single, bit-exact (NaN payloads kept), as NumPy converts.
#[inline]
pub(super) fn f16_to_f32(h: u32) -> u32 {
    let sign = (h & 0x8000) << 16;
    let exp = h & 0x7c00;
    let man = h & 0x03ff;
    if exp == 0x7c00 {
        return sign | 0x7f80_0000 | (man << 13);
    }
    if exp == 0 {
        // Zero or subnormal: man × 2^-24, exact in f32.
        return sign | ((f64::from(man) * pow2(-24)) as f32).to_bits();
    }
    sign | (((h & 0x7fff) + 0x1_c000) << 13)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_repr() {
        let cases: [(f64, &str); 16] = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (1e-4, "0.0001"),
            (1.5e-5, "1.5e-05"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456.789, "123456.789"),
            (f64::MAX, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (-2.5e300, "-2.5e+300"),
        ];
        for (x, want) in cases {
            assert_eq!(Element::Float(x).display(), want, "{x:e}");
        }
        let complex = [
            ((1.0, 2.0), "(1+2j)"),
            ((0.0, 1.0), "1j"),
            ((0.0, -0.0), "-0j"),
            ((-0.0, 1.0), "(-0+1j)"),
            ((1.0, -0.0), "(1-0j)"),
            ((f64::NAN, f64::NEG_INFINITY), "(nan-infj)"),
            ((1.0, f64::NAN), "(1+nanj)"),
            ((1e16, 1e-5), "(1e+16+1e-05j)"),
            ((1.5, 0.1), "(1.5+0.1j)"),
        ];
        for ((re, im), want) in complex {
            assert_eq!(Element::Complex(re, im).display(), want);
        }
        assert_eq!(Element::Bool(true).display(), "True");
        assert_eq!(Element::Int(-3).display(), "-3");
        assert_eq!(Element::UInt(u64::MAX).display(), "18446744073709551615");
    }

    #[test]
    fn small_formats() {
        let f = |d, c| f32::from_bits(small_f32(d, c));
        assert_eq!(f(Dtype::F8_E4M3, 0x7e), 448.0);
        assert!(f(Dtype::F8_E4M3, 0x7f).is_nan());
        assert_eq!(f(Dtype::F8_E5M2, 0x7c), f32::INFINITY);
        assert_eq!(f(Dtype::F8_E4M3FNUZ, 0x7f), 240.0);
        assert!(f(Dtype::F8_E4M3FNUZ, 0x80).is_nan());
        assert_eq!(f(Dtype::F8_E5M2FNUZ, 0x7f), 57344.0);
        assert_eq!(f(Dtype::F8_E8M0, 127), 1.0);
        assert_eq!(f(Dtype::F8_E8M0, 0), pow2(-127) as f32);
        assert_eq!(f(Dtype::F4, 7), 6.0);
        assert_eq!(f(Dtype::F6_E2M3, 31), 7.5);
        assert_eq!(f(Dtype::F6_E3M2, 31), 28.0);
        assert_eq!(f(Dtype::F16, 0x7bff), 65504.0);
        assert_eq!(f(Dtype::F16, 1), pow2(-24) as f32);
        assert_eq!(f(Dtype::BF16, 0x3f80), 1.0);
    }

    #[test]
    fn packed_bits() {
        // F6 codes 1, 2, 3, 4 packed little-endian.
        let codes = [1u32, 2, 3, 4];
        let mut acc = 0u32;
        for (i, c) in codes.iter().enumerate() {
            acc |= c << (6 * i);
        }
        let bytes = acc.to_le_bytes();
        for (i, c) in codes.iter().enumerate() {
            assert_eq!(bits_at(&bytes[..3], 6 * i as u64, 6), Some(*c));
        }
        assert_eq!(bits_at(&bytes[..2], 18, 6), None);
        assert_eq!(
            decode(Dtype::F4, &[0x71], 0, false),
            Some(Element::Float(0.5))
        );
        assert_eq!(
            decode(Dtype::F4, &[0x71], 1, false),
            Some(Element::Float(6.0))
        );
        assert_eq!(decode(Dtype::F4, &[0x71], 2, false), None);
    }

    #[test]
    fn packed_integers() {
        // ONNX packs the first element in the low nibble (bits).
        let nib = [0x9f_u8, 0x07];
        let i4: Vec<_> = (0..3).map(|i| decode(Dtype::I4, &nib, i, false)).collect();
        assert_eq!(
            i4,
            [
                Some(Element::Int(-1)),
                Some(Element::Int(-7)),
                Some(Element::Int(7))
            ]
        );
        assert_eq!(decode(Dtype::U4, &nib, 1, false), Some(Element::UInt(9)));
        // 0b11_10_01_00: 0, 1, -2, -1 as INT2; 0, 1, 2, 3 as UINT2.
        let two = [0xe4_u8];
        let i2: Vec<_> = (0..4).map(|i| decode(Dtype::I2, &two, i, false)).collect();
        assert_eq!(i2, [0, 1, -2, -1].map(|v| Some(Element::Int(v))).to_vec());
        assert_eq!(decode(Dtype::U2, &two, 3, false), Some(Element::UInt(3)));
        assert_eq!(decode(Dtype::U2, &two, 4, false), None);
    }
}
