//! Tensor values: decoding elements of every [`Dtype`], statistics over a
//! whole tensor, and export as a NumPy `.npy` file.
//!
//! Everything here is a pure function of a [`Tensor`] and the [`Source`]
//! holding its bytes. Nothing reads a whole tensor into memory: elements are
//! visited in C (row-major) order and their bytes fetched in bounded chunks
//! (borrowed straight from the mapping when the source is mapped). Bytes
//! that are not there (a truncated file, a storage that is cut off) are never
//! an error or a panic: they make elements *missing*, which [`values`] stops
//! at, [`stats`] counts and [`write_npy`] refuses to export.
//!
//! # Layout
//!
//! The element with multi-index `(i0, .., in)` starts at bit
//! `(Σ i_k·stride_k)·bits` after byte [`Tensor::offset`], with strides in
//! elements ([`Tensor::stride`]; `None` means C-contiguous). Its bytes must
//! lie within `offset .. offset + length` and within the source's available
//! bytes, otherwise it is missing. A stride vector whose length differs from
//! the shape's is ignored (the tensor is read as C-contiguous).
//!
//! Multi-byte elements are little-endian unless [`Tensor::big_endian`];
//! complex numbers are two floats (real, imaginary), each in that order.
//!
//! # Sub-byte types
//!
//! Neither the safetensors format nor the OCP MX specification prescribes
//! how 4- and 6-bit elements are packed in memory. pparse reads them as one
//! little-endian bit stream: element `k` occupies bits `k·b .. k·b + b` of
//! the stream, where bit `j` of the stream is bit `j % 8` (least significant
//! first) of byte `j / 8`. For [`Dtype::F4`] this is two elements per byte,
//! the low nibble first (PyTorch's `float4_e2m1fn_x2` order); for
//! [`Dtype::F6_E2M3`] and [`Dtype::F6_E3M2`] it is four elements per three
//! bytes: `b0 = e0 | e1 << 6`, `b1 = e1 >> 2 | e2 << 4`, `b2 = e2 >> 4 | e3 << 2`.
//!
//! # Float formats
//!
//! All small float formats are those of the `ml_dtypes` Python package:
//!
//! | dtype | `ml_dtypes` | bias | specials |
//! |---|---|---|---|
//! | `F8_E4M3` | `float8_e4m3fn` | 7 | NaN = `S.1111.111`, no infinities (max 448) |
//! | `F8_E5M2` | `float8_e5m2` | 15 | IEEE: ±inf, NaNs |
//! | `F8_E4M3FNUZ` | `float8_e4m3fnuz` | 8 | `0x80` = NaN, no −0, no infinities |
//! | `F8_E5M2FNUZ` | `float8_e5m2fnuz` | 16 | `0x80` = NaN, no −0, no infinities |
//! | `F8_E8M0` | `float8_e8m0fnu` | 127 | value `2^(e−127)`, `0xFF` = NaN, no sign, no zero |
//! | `F4` | `float4_e2m1fn` | 1 | none (max 6) |
//! | `F6_E2M3` | `float6_e2m3fn` | 1 | none (max 7.5) |
//! | `F6_E3M2` | `float6_e3m2fn` | 3 | none (max 28) |
//!
//! `F16` is IEEE binary16, `BF16` the top half of an IEEE binary32, `C32`
//! two `F16` (real, imaginary). Every value of these formats is exactly
//! representable as an `f32`, which is how they are decoded and exported.
//! NaNs become the `f32` NaN `ml_dtypes` produces with `astype(float32)`
//! (sign kept, quiet, no payload; for the FNUZ types `-nan`), except that
//! `BF16` and `F16` NaNs keep their payload bits, as NumPy does.
//!
//! Quantized torch types (`QI8`, `QU8`, `QI32`, `QU4X2`, `QU2X4`) decode
//! as their stored integers (without scale and zero point); `QU4X2` and
//! `QU2X4` as the packed byte.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::data::{self, Source};
use crate::offer::tensor::{Dtype, Tensor};

/// One decoded element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// Every real float type, widened exactly to `f64`.
    Float(f64),
    /// Complex types: (real, imaginary).
    Complex(f64, f64),
    /// Signed integers (and `QI8`, `QI32`).
    Int(i64),
    /// Unsigned integers (and `QU8`, `QU4X2`, `QU2X4`).
    UInt(u64),
    Bool(bool),
}

impl Value {
    /// The value as a real number: complex numbers give their modulus,
    /// booleans 0 or 1, 64-bit integers the nearest `f64`.
    #[inline]
    pub fn as_f64(&self) -> f64 {
        match *self {
            Value::Float(x) => x,
            Value::Complex(re, im) => re.hypot(im),
            Value::Int(i) => i as f64,
            Value::UInt(u) => u as f64,
            Value::Bool(b) => f64::from(u8::from(b)),
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
            Value::Float(x) => py_repr(x, true, false),
            Value::Complex(re, im) => {
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
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            Value::Bool(b) => if b { "True" } else { "False" }.to_string(),
        }
    }
}

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

// ---------------------------------------------------------------------------
// Element decoding.

/// Decodes element number `index` of `bytes`: the element whose bits start
/// at bit `index × dtype.bits()` (for byte-sized types, at byte
/// `index × itemsize`; for `F4`/`F6` within the packed bit stream described
/// in the module docs). `None` when `bytes` is too short.
pub fn decode(dtype: Dtype, bytes: &[u8], index: u64, big_endian: bool) -> Option<Value> {
    let bit = index.checked_mul(dtype.bits())?;
    decode_at(dtype, bytes, bit, big_endian)
}

/// `n` (≤ 8) bits at bit offset `bit` of the little-endian bit stream `bytes`.
#[inline]
fn bits_at(bytes: &[u8], bit: u64, n: u64) -> Option<u32> {
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

/// The byte offset of an element at bit `bit` of a byte-sized type.
#[inline]
fn byte_of(bit: u64) -> Option<usize> {
    bit.is_multiple_of(8)
        .then_some(bit / 8)
        .and_then(|b| usize::try_from(b).ok())
}

/// Decodes the element at bit offset `bit` of `bytes`.
#[inline]
fn decode_at(dtype: Dtype, bytes: &[u8], bit: u64, be: bool) -> Option<Value> {
    use Dtype::*;
    if let F4 | F6_E2M3 | F6_E3M2 = dtype {
        let code = bits_at(bytes, bit, dtype.bits())?;
        return Some(Value::Float(f64::from(f32::from_bits(small_f32(
            dtype, code,
        )))));
    }
    let at = byte_of(bit)?;
    Some(match dtype {
        BOOL => Value::Bool(*bytes.get(at)? != 0),
        U8 | QU8 | QU4X2 | QU2X4 => Value::UInt(u64::from(*bytes.get(at)?)),
        I8 | QI8 => Value::Int(i64::from(*bytes.get(at)? as i8)),
        F8_E5M2 | F8_E4M3 | F8_E8M0 | F8_E4M3FNUZ | F8_E5M2FNUZ => {
            let code = u32::from(*bytes.get(at)?);
            Value::Float(f64::from(f32::from_bits(small_f32(dtype, code))))
        }
        I16 => Value::Int(i64::from(i16::from_le_bytes(le(bytes, at, be)?))),
        U16 => Value::UInt(u64::from(u16::from_le_bytes(le(bytes, at, be)?))),
        F16 | BF16 => {
            let code = u32::from(u16::from_le_bytes(le(bytes, at, be)?));
            Value::Float(f64::from(f32::from_bits(small_f32(dtype, code))))
        }
        I32 | QI32 => Value::Int(i64::from(i32::from_le_bytes(le(bytes, at, be)?))),
        U32 => Value::UInt(u64::from(u32::from_le_bytes(le(bytes, at, be)?))),
        F32 => Value::Float(f64::from(f32::from_le_bytes(le(bytes, at, be)?))),
        I64 => Value::Int(i64::from_le_bytes(le(bytes, at, be)?)),
        U64 => Value::UInt(u64::from_le_bytes(le(bytes, at, be)?)),
        F64 => Value::Float(f64::from_le_bytes(le(bytes, at, be)?)),
        C32 => {
            let re = u32::from(u16::from_le_bytes(le(bytes, at, be)?));
            let im = u32::from(u16::from_le_bytes(le(bytes, at.checked_add(2)?, be)?));
            Value::Complex(
                f64::from(f32::from_bits(f16_to_f32(re))),
                f64::from(f32::from_bits(f16_to_f32(im))),
            )
        }
        C64 => Value::Complex(
            f64::from(f32::from_le_bytes(le(bytes, at, be)?)),
            f64::from(f32::from_le_bytes(le(bytes, at.checked_add(4)?, be)?)),
        ),
        C128 => Value::Complex(
            f64::from_le_bytes(le(bytes, at, be)?),
            f64::from_le_bytes(le(bytes, at.checked_add(8)?, be)?),
        ),
        F4 | F6_E2M3 | F6_E3M2 => return None,
    })
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
fn small_f32(dtype: Dtype, code: u32) -> u32 {
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
fn f16_to_f32(h: u32) -> u32 {
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

// ---------------------------------------------------------------------------
// Walking a tensor's elements in C order.

/// Bytes fetched from the source at once.
const CHUNK: u64 = 1 << 16;
/// Elements handed over per fetch at most (cancellation granularity).
const BATCH: u64 = 1 << 14;

/// A tensor's layout, normalized: dimensions of length 1 dropped, adjacent
/// dimensions that are contiguous with each other merged; at least one
/// dimension; every length ≥ 1 unless the tensor is empty.
struct Plan {
    /// (length, stride in elements), outermost first.
    dims: Vec<(u64, u64)>,
    numel: u64,
    bits: u64,
    /// Byte offset of element 0 in the source.
    base: u64,
    /// Bits present after `base` (fixed when the plan is made, so that two
    /// passes over a growing source see the same elements).
    limit: u128,
}

impl Plan {
    fn new(t: &Tensor, data: &dyn Source) -> Plan {
        let shape = &t.shape;
        let strides: Vec<u64> = match &t.stride {
            Some(s) if s.len() == shape.len() => s.clone(),
            _ => {
                let mut s = vec![1u64; shape.len()];
                for k in (0..shape.len().saturating_sub(1)).rev() {
                    s[k] = s[k + 1].saturating_mul(shape[k + 1]);
                }
                s
            }
        };
        let numel = shape.iter().fold(1u64, |a, &n| a.saturating_mul(n));
        let mut dims: Vec<(u64, u64)> = Vec::new();
        for (&n, &s) in shape.iter().zip(&strides) {
            if n == 1 {
                continue;
            }
            if let Some(last) = dims.last_mut()
                && n.checked_mul(s) == Some(last.1)
                && let Some(len) = last.0.checked_mul(n)
            {
                *last = (len, s);
                continue;
            }
            dims.push((n, s));
        }
        if dims.is_empty() {
            dims.push((1, 1));
        }
        let end = data.available().min(t.offset.saturating_add(t.length));
        Plan {
            dims,
            numel,
            bits: t.dtype.bits(),
            base: t.offset,
            limit: u128::from(end.saturating_sub(t.offset)) * 8,
        }
    }

    /// Whether elements are stored one after the other from element 0.
    fn contiguous(&self) -> bool {
        self.dims.len() == 1 && self.dims[0].1 == 1
    }
}

/// What the walk hands over for each element, in C order.
enum Item<'a> {
    /// A present element: its bits start at bit offset `.1` of `.0` (the
    /// slice is empty when the walk does not read).
    Here(&'a [u8], u64),
    /// This many consecutive elements whose bytes are not there.
    Gone(u64),
}

/// Visits `count` elements from C-order index `first`. `f` returns false
/// to stop; the result is false when it did. With `read` false no bytes
/// are fetched (presence depends on offsets only). With `release`, pages
/// of a contiguous tensor are released behind the walk.
fn walk(
    p: &Plan,
    data: &dyn Source,
    first: u64,
    count: u64,
    read: bool,
    release: bool,
    mut f: impl FnMut(Item<'_>) -> bool,
) -> io::Result<bool> {
    let nd = p.dims.len();
    let mut left = count.min(p.numel.saturating_sub(first));
    if left == 0 {
        return Ok(true);
    }
    let mut idx = vec![0u64; nd];
    let mut rem = first;
    for k in (0..nd).rev() {
        let n = p.dims[k].0.max(1);
        idx[k] = rem % n;
        rem /= n;
    }
    let bits = u128::from(p.bits);
    let release = release && p.contiguous();
    let mut scratch = Vec::new();
    while left > 0 {
        let lin: u128 = idx
            .iter()
            .zip(&p.dims)
            .map(|(&i, &(_, s))| u128::from(i) * u128::from(s))
            .fold(0u128, |a, b| a.saturating_add(b));
        let (n, s) = p.dims[nd - 1];
        let j = idx[nd - 1];
        let pos0 = lin.saturating_mul(bits);
        let step = u128::from(s) * bits;
        // How many of this row's next `take` elements are present: positions
        // grow along the row, so they are a prefix.
        let take = (n - j).min(left);
        let present = if pos0.saturating_add(bits) > p.limit {
            0
        } else {
            // A zero step (a broadcast row) repeats one present element.
            match (p.limit - pos0 - bits).checked_div(step) {
                None => take,
                Some(room) => u64::try_from(room + 1).map_or(take, |r| r.min(take)),
            }
        };
        if present == 0 {
            // Positions only grow with each index (strides are unsigned), so
            // with `m` the start of the run of trailing zero indices, every
            // element from here to the end of dimension `m - 1`'s run is
            // missing: skip them at once (the whole rest when `m` is 0).
            let m = (0..nd)
                .rev()
                .take_while(|&k| idx[k] == 0)
                .last()
                .unwrap_or(nd);
            let (level, block) = if m == 0 {
                (0, left)
            } else {
                let inner = p.dims[m..]
                    .iter()
                    .fold(1u64, |a, &(n, _)| a.saturating_mul(n));
                (m - 1, (p.dims[m - 1].0 - idx[m - 1]).saturating_mul(inner))
            };
            let block = block.min(left);
            if !f(Item::Gone(block)) {
                return Ok(false);
            }
            left -= block;
            if left > 0 && !next_run(&mut idx, &p.dims, level) {
                break;
            }
            continue;
        }
        let per = u128::from(CHUNK * 8)
            .checked_div(step)
            .map_or(BATCH, |k| u64::try_from(k).unwrap_or(BATCH).clamp(1, BATCH));
        let mut a = 0u64;
        while a < present {
            let b = (a + per).min(present);
            let start = pos0 + u128::from(a) * step;
            let end = pos0 + u128::from(b - 1) * step + bits;
            let lo = start / 8;
            let hi = end.div_ceil(8);
            // Present elements lie within `limit`, which fits in u64 bytes.
            let lo64 = u64::try_from(lo).unwrap_or(u64::MAX);
            let len = usize::try_from(hi - lo).unwrap_or(usize::MAX);
            let slice: &[u8] = if read {
                data::view(data, p.base.saturating_add(lo64), len, &mut scratch)?
            } else {
                &[]
            };
            for e in a..b {
                let off = pos0 + u128::from(e) * step - lo * 8;
                let ok = !read || off + bits <= slice.len() as u128 * 8;
                let item = if ok {
                    Item::Here(slice, off as u64)
                } else {
                    Item::Gone(1)
                };
                if !f(item) {
                    return Ok(false);
                }
            }
            if release {
                data.release(
                    p.base.saturating_add(lo64),
                    p.base.saturating_add(lo64.saturating_add(len as u64)),
                );
            }
            a = b;
        }
        if take > present && !f(Item::Gone(take - present)) {
            return Ok(false);
        }
        left -= take;
        if left > 0 && !next_run(&mut idx, &p.dims, nd - 1) {
            break;
        }
    }
    Ok(true)
}

/// Moves the multi-index past the end of dimension `level`'s current run:
/// indices `level..` become 0 and dimension `level - 1` goes up by one,
/// with carry. Returns false past the last element.
fn next_run(idx: &mut [u64], dims: &[(u64, u64)], level: usize) -> bool {
    for i in idx[level..].iter_mut() {
        *i = 0;
    }
    let mut k = level;
    while k > 0 {
        k -= 1;
        idx[k] += 1;
        if idx[k] < dims[k].0 {
            return true;
        }
        idx[k] = 0;
    }
    false
}

// ---------------------------------------------------------------------------
// Values.

/// Up to `count` elements from logical (C-order) index `first`, whatever
/// the strides. Stops at the first element whose bytes are missing, at the
/// end of the tensor, and at a read error.
pub fn values(t: &Tensor, data: &dyn Source, first: u64, count: usize) -> Vec<Value> {
    let p = Plan::new(t, data);
    let mut out = Vec::with_capacity(count.min(1 << 16));
    let _ = walk(
        &p,
        data,
        first,
        count as u64,
        true,
        false,
        |item| match item {
            Item::Here(bytes, bit) => match decode_at(t.dtype, bytes, bit, t.big_endian) {
                Some(v) => {
                    out.push(v);
                    true
                }
                None => false,
            },
            Item::Gone(_) => false,
        },
    );
    out
}

// ---------------------------------------------------------------------------
// Statistics.

/// Statistics over a tensor's elements, as `as_f64` values (complex: the
/// modulus). `count + nan + inf + missing` is the number of elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Stats {
    /// Finite values: the ones min, max, mean, std and the histogram are over.
    pub count: u64,
    pub nan: u64,
    /// Infinite values, either sign.
    pub inf: u64,
    /// NaN when `count` is 0.
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// Population standard deviation (ddof = 0).
    pub std: f64,
    /// Counts of `bins` equal bins over `[min, max]` (the last bin closed), as
    /// `numpy.histogram(x, bins, range=(min, max))` computes them (a range
    /// of one value becomes `[v − 0.5, v + 0.5]`). All zero when `count` is 0.
    pub hist: Vec<u64>,
    /// Elements whose bytes are not there.
    pub missing: u64,
}

/// Neumaier's compensated sum.
#[derive(Default)]
struct Sum {
    sum: f64,
    c: f64,
}

impl Sum {
    #[inline]
    fn add(&mut self, x: f64) {
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.c += (self.sum - t) + x;
        } else {
            self.c += (x - t) + self.sum;
        }
        self.sum = t;
    }
    fn total(&self) -> f64 {
        self.sum + self.c
    }
}

/// Equal-width bins as numpy.histogram builds them.
struct Bins {
    first: f64,
    last: f64,
    n: usize,
    edges: Vec<f64>,
}

impl Bins {
    fn new(min: f64, max: f64, n: usize) -> Bins {
        let (first, last) = if min == max {
            (min - 0.5, max + 0.5)
        } else {
            (min, max)
        };
        // numpy.linspace(first, last, n + 1): i·step + first, last exact.
        let delta = last - first;
        let div = n as f64;
        let step = delta / div;
        let mut edges: Vec<f64> = (0..=n)
            .map(|i| {
                let i = i as f64;
                if step == 0.0 {
                    i / div * delta + first
                } else {
                    i * step + first
                }
            })
            .collect();
        if let Some(e) = edges.last_mut() {
            *e = last;
        }
        Bins {
            first,
            last,
            n,
            edges,
        }
    }

    /// The bin of `x`, as numpy's histogram finds it.
    #[inline]
    fn index(&self, x: f64) -> Option<usize> {
        if self.n == 0 || !(x >= self.first && x <= self.last) {
            return None;
        }
        let f = (x - self.first) / (self.last - self.first) * self.n as f64;
        // A float-to-int cast saturates (NaN gives 0), like numpy's intp cast
        // for every value reachable here.
        let mut i = (f as usize).min(self.n);
        if i == self.n {
            i -= 1;
        }
        if x < self.edges[i] && i > 0 {
            i -= 1;
        }
        if i + 1 < self.n && x >= self.edges[i + 1] {
            i += 1;
        }
        Some(i)
    }
}

/// Elements between two looks at the cancel flag and progress reports.
const TICK: u64 = 1 << 16;

/// Statistics of a tensor's values, in two passes over its bytes: counts,
/// min, max and mean, then the spread and the histogram of `bins` bins.
/// NaN and infinite values are counted, and left out of everything else.
///
/// `progress(done, total)` is called now and then with elements visited so
/// far over both passes (`total` is twice the element count). Setting
/// `cancel` stops the work at the next check with an `Interrupted` error.
/// Read errors of the source are returned; missing bytes are not errors.
pub fn stats(
    t: &Tensor,
    data: &dyn Source,
    bins: usize,
    cancel: &AtomicBool,
    progress: &dyn Fn(u64, u64),
) -> io::Result<Stats> {
    let p = Plan::new(t, data);
    let total = p.numel.saturating_mul(2);
    let cancelled = || io::Error::new(io::ErrorKind::Interrupted, "statistics cancelled");
    let mut done = 0u64;
    let mut next = 0u64;
    // Counts `n` more elements; false when cancelled.
    let mut tick = |n: u64| -> bool {
        done = done.saturating_add(n);
        if done >= next {
            next = done.saturating_add(TICK);
            if cancel.load(Ordering::Relaxed) {
                return false;
            }
            progress(done.min(total), total);
        }
        true
    };
    let mut s = Stats {
        count: 0,
        nan: 0,
        inf: 0,
        min: f64::INFINITY,
        max: f64::NEG_INFINITY,
        mean: f64::NAN,
        std: f64::NAN,
        hist: vec![0; bins],
        missing: 0,
    };
    let mut sum = Sum::default();
    let (dtype, be) = (t.dtype, t.big_endian);
    if !tick(0) {
        return Err(cancelled());
    }
    let finished = walk(&p, data, 0, p.numel, true, true, |item| {
        match item {
            Item::Here(bytes, bit) => match decode_at(dtype, bytes, bit, be) {
                Some(v) => {
                    let x = v.as_f64();
                    if x.is_nan() {
                        s.nan += 1;
                    } else if x.is_infinite() {
                        s.inf += 1;
                    } else {
                        s.count += 1;
                        s.min = s.min.min(x);
                        s.max = s.max.max(x);
                        sum.add(x);
                    }
                }
                None => s.missing += 1,
            },
            Item::Gone(n) => {
                s.missing += n;
                return tick(n);
            }
        }
        tick(1)
    })?;
    if !finished {
        return Err(cancelled());
    }
    if s.count == 0 {
        s.min = f64::NAN;
        s.max = f64::NAN;
        progress(total, total);
        return Ok(s);
    }
    let mean = sum.total() / s.count as f64;
    s.mean = mean;
    let hist = Bins::new(s.min, s.max, bins);
    let mut sq = Sum::default();
    let mut counts = vec![0u64; bins];
    let finished = walk(&p, data, 0, p.numel, true, true, |item| match item {
        Item::Here(bytes, bit) => {
            if let Some(v) = decode_at(dtype, bytes, bit, be) {
                let x = v.as_f64();
                if x.is_finite() {
                    let d = x - mean;
                    sq.add(d * d);
                    if let Some(i) = hist.index(x) {
                        counts[i] += 1;
                    }
                }
            }
            tick(1)
        }
        Item::Gone(n) => tick(n),
    })?;
    if !finished {
        return Err(cancelled());
    }
    s.std = (sq.total() / s.count as f64).sqrt();
    s.hist = counts;
    progress(total, total);
    Ok(s)
}

// ---------------------------------------------------------------------------
// .npy export.

/// The NumPy dtype descriptor a tensor of `dtype` is exported with by
/// [`write_npy`] (always little-endian).
pub fn npy_descr(dtype: Dtype) -> &'static str {
    use Dtype::*;
    match dtype {
        BOOL => "|b1",
        I8 | QI8 => "|i1",
        U8 | QU8 | QU4X2 | QU2X4 => "|u1",
        I16 => "<i2",
        U16 => "<u2",
        F16 => "<f2",
        I32 | QI32 => "<i4",
        U32 => "<u4",
        F32 => "<f4",
        I64 => "<i8",
        U64 => "<u8",
        F64 => "<f8",
        C64 | C32 => "<c8",
        C128 => "<c16",
        BF16 | F8_E5M2 | F8_E4M3 | F8_E8M0 | F8_E4M3FNUZ | F8_E5M2FNUZ | F4 | F6_E2M3 | F6_E3M2 => {
            "<f4"
        }
    }
}

/// The `.npy` header for an array of `descr` and `shape`, byte for byte as
/// `numpy.save` writes it: format 1.0 (2.0 when the header is too long),
/// the dict padded with spaces and a newline to a multiple of 64 bytes,
/// including NumPy's spare room for a growing first axis.
fn npy_header(descr: &str, shape: &[u64]) -> Vec<u8> {
    let shape_repr = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        _ => {
            let parts: Vec<String> = shape.iter().map(u64::to_string).collect();
            format!("({})", parts.join(", "))
        }
    };
    let mut dict =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_repr}, }}");
    if let Some(first) = shape.first() {
        // numpy's GROWTH_AXIS_MAX_DIGITS.
        let digits = first.to_string().len();
        dict.push_str(&" ".repeat(21usize.saturating_sub(digits)));
    }
    let hlen = dict.len() + 1;
    let (version, size_len) = {
        let pad = 64 - (6 + 2 + 2 + hlen) % 64;
        if hlen + pad <= 0xffff {
            (1u8, 2usize)
        } else {
            (2u8, 4usize)
        }
    };
    let pad = 64 - (6 + 2 + size_len + hlen) % 64;
    let mut out = Vec::with_capacity(10 + hlen + pad);
    out.extend_from_slice(b"\x93NUMPY");
    out.extend_from_slice(&[version, 0]);
    let total = hlen + pad;
    if size_len == 2 {
        out.extend_from_slice(&(total as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(total as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(out.len() + pad, b' ');
    out.push(b'\n');
    out
}

/// Appends the exported (little-endian, [`npy_descr`]) bytes of the element
/// at bit `bit` of `bytes`; false when the bytes are short.
#[inline]
fn encode(dtype: Dtype, bytes: &[u8], bit: u64, be: bool, out: &mut Vec<u8>) -> bool {
    use Dtype::*;
    match dtype {
        F4 | F6_E2M3 | F6_E3M2 => match bits_at(bytes, bit, dtype.bits()) {
            Some(code) => {
                out.extend_from_slice(&small_f32(dtype, code).to_le_bytes());
                true
            }
            None => false,
        },
        _ => {
            let Some(at) = byte_of(bit) else {
                return false;
            };
            let size = (dtype.bits() / 8) as usize;
            let Some(raw) = at.checked_add(size).and_then(|end| bytes.get(at..end)) else {
                return false;
            };
            match dtype {
                BOOL => out.push(u8::from(raw[0] != 0)),
                F8_E5M2 | F8_E4M3 | F8_E8M0 | F8_E4M3FNUZ | F8_E5M2FNUZ => {
                    out.extend_from_slice(&small_f32(dtype, u32::from(raw[0])).to_le_bytes());
                }
                BF16 => {
                    let code = if be {
                        u16::from_be_bytes([raw[0], raw[1]])
                    } else {
                        u16::from_le_bytes([raw[0], raw[1]])
                    };
                    out.extend_from_slice(&small_f32(BF16, u32::from(code)).to_le_bytes());
                }
                C32 => {
                    for half in raw.chunks_exact(2) {
                        let code = if be {
                            u16::from_be_bytes([half[0], half[1]])
                        } else {
                            u16::from_le_bytes([half[0], half[1]])
                        };
                        out.extend_from_slice(&f16_to_f32(u32::from(code)).to_le_bytes());
                    }
                }
                _ => {
                    // Native types: the bytes as they are, each scalar (each
                    // half of a complex) swapped from big-endian if need be.
                    let part = if matches!(dtype, C64 | C128) {
                        size / 2
                    } else {
                        size
                    };
                    for scalar in raw.chunks_exact(part) {
                        if be {
                            out.extend(scalar.iter().rev());
                        } else {
                            out.extend_from_slice(scalar);
                        }
                    }
                }
            }
            true
        }
    }
}

/// Writes the tensor as a `.npy` file (format 1.0, as `numpy.save` writes
/// it) in C order whatever its strides, little-endian whatever its source.
/// Types NumPy has keep their type; `BF16`, the `F8` types, `F4` and `F6`
/// are converted exactly to `float32`, `C32` to `complex64`, and the
/// quantized types are written as their integer type (see [`npy_descr`]);
/// `BOOL` bytes are written as 0 or 1.
///
/// When any element's bytes are missing, nothing is written and the error
/// (`UnexpectedEof`) says how many elements are missing. Errors of the
/// source or of `out` are returned as they come (`out` may then hold part
/// of the file).
pub fn write_npy(t: &Tensor, data: &dyn Source, out: &mut impl Write) -> io::Result<()> {
    let p = Plan::new(t, data);
    let mut missing = 0u64;
    walk(&p, data, 0, p.numel, false, false, |item| {
        if let Item::Gone(n) = item {
            missing = missing.saturating_add(n);
        }
        true
    })?;
    if missing > 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!(
                "{missing} of {} elements of {} are missing: the data is cut off",
                p.numel, t.name
            ),
        ));
    }
    out.write_all(&npy_header(npy_descr(t.dtype), &t.shape))?;
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK as usize + 64);
    let mut err: Option<io::Error> = None;
    let (dtype, be) = (t.dtype, t.big_endian);
    let finished = walk(&p, data, 0, p.numel, true, true, |item| {
        let ok = match item {
            Item::Here(bytes, bit) => encode(dtype, bytes, bit, be, &mut buf),
            Item::Gone(_) => false,
        };
        if !ok {
            err = Some(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("bytes of {} went missing while writing", t.name),
            ));
            return false;
        }
        if buf.len() >= CHUNK as usize {
            if let Err(e) = out.write_all(&buf) {
                err = Some(e);
                return false;
            }
            buf.clear();
        }
        true
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    debug_assert!(finished);
    out.write_all(&buf)
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
            assert_eq!(Value::Float(x).display(), want, "{x:e}");
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
            assert_eq!(Value::Complex(re, im).display(), want);
        }
        assert_eq!(Value::Bool(true).display(), "True");
        assert_eq!(Value::Int(-3).display(), "-3");
        assert_eq!(Value::UInt(u64::MAX).display(), "18446744073709551615");
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
            Some(Value::Float(0.5))
        );
        assert_eq!(
            decode(Dtype::F4, &[0x71], 1, false),
            Some(Value::Float(6.0))
        );
        assert_eq!(decode(Dtype::F4, &[0x71], 2, false), None);
    }

    #[test]
    fn header_alignment() {
        for shape in [&[][..], &[3], &[3, 4], &[1 << 40, 7, 9]] {
            let h = npy_header("<f4", shape);
            assert_eq!(h.len() % 64, 0);
            assert_eq!(*h.last().unwrap(), b'\n');
        }
        let long = vec![7u64; 30_000];
        let h = npy_header("<f4", &long);
        assert_eq!(h[6], 2);
        assert_eq!(h.len() % 64, 0);
    }
}
