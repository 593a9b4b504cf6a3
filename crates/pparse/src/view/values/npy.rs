//! Export of a tensor as a NumPy `.npy` file, byte for byte as
//! `numpy.save` writes it: its header, and each element re-encoded in a
//! type NumPy has.

use std::borrow::Cow;
use std::io::{self, Write};

use super::decode::{bits_at, byte_of, f16_to_f32, small_f32, small_int};
use super::walk::{CHUNK, Item, Plan, walk};
use crate::data::Source;
use crate::offer::tensor::{Dtype, Tensor};

/// The NumPy type of `dtype`'s stored bytes as they are (in the byte
/// order `big_endian` says), and the `ml_dtypes` type to view them as when
/// NumPy has none (`|V2` viewed as `bfloat16`); `None` when the bytes must
/// be decoded first (sub-byte, block-quantized, complex32, big-endian
/// bfloat16). The quantized torch types are their stored integers.
pub fn numpy_native(
    dtype: Dtype,
    big_endian: bool,
) -> Option<(Cow<'static, str>, Option<&'static str>)> {
    use Dtype::*;
    let o = if big_endian { '>' } else { '<' };
    let plain = |s: &'static str| Some((Cow::Borrowed(s), None));
    let ordered = |code: &str| Some((Cow::Owned(format!("{o}{code}")), None));
    let viewed = |s: &'static str, ext: &'static str| Some((Cow::Borrowed(s), Some(ext)));
    match dtype {
        BOOL => plain("|b1"),
        I8 | QI8 => plain("|i1"),
        U8 | QU8 | QU4X2 | QU2X4 => plain("|u1"),
        I16 => ordered("i2"),
        U16 => ordered("u2"),
        I32 | QI32 => ordered("i4"),
        U32 => ordered("u4"),
        I64 => ordered("i8"),
        U64 => ordered("u8"),
        F16 => ordered("f2"),
        F32 => ordered("f4"),
        F64 => ordered("f8"),
        F128 => ordered("f16"),
        C64 => ordered("c8"),
        C128 => ordered("c16"),
        C256 => ordered("c32"),
        Datetime(u) => ordered(&format!("M8[{}]", u.text())),
        Timedelta(u) => ordered(&format!("m8[{}]", u.text())),
        Unicode(n) => ordered(&format!("U{n}")),
        Bytes(n) => Some((format!("|S{n}").into(), None)),
        Void(n) => Some((format!("|V{n}").into(), None)),
        BF16 if !big_endian => viewed("|V2", "bfloat16"),
        F8_E5M2 => viewed("|V1", "float8_e5m2"),
        F8_E4M3 => viewed("|V1", "float8_e4m3fn"),
        F8_E4M3FNUZ => viewed("|V1", "float8_e4m3fnuz"),
        F8_E5M2FNUZ => viewed("|V1", "float8_e5m2fnuz"),
        F8_E8M0 => viewed("|V1", "float8_e8m0fnu"),
        _ => None,
    }
}

/// The NumPy dtype descriptor a tensor of `dtype` is exported with by
/// [`write_npy`] (always little-endian): its own type where NumPy has one,
/// else the type it is decoded to (float32 for the small floats and block
/// types, complex64 for complex32, one byte for packed 4- and 2-bit
/// integers).
pub fn npy_descr(dtype: Dtype) -> Cow<'static, str> {
    use Dtype::*;
    match numpy_native(dtype, false) {
        Some((descr, None)) => descr,
        _ => Cow::Borrowed(match dtype {
            I4 | I2 => "|i1",
            U4 | U2 => "|u1",
            C32 => "<c8",
            _ => "<f4",
        }),
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
pub(super) fn encode(dtype: Dtype, bytes: &[u8], bit: u64, be: bool, out: &mut Vec<u8>) -> bool {
    use Dtype::*;
    match dtype {
        F4 | F6_E2M3 | F6_E3M2 => match bits_at(bytes, bit, dtype.bits()) {
            Some(code) => {
                out.extend_from_slice(&small_f32(dtype, code).to_le_bytes());
                true
            }
            None => false,
        },
        I4 | U4 | I2 | U2 => match bits_at(bytes, bit, dtype.bits()) {
            Some(code) => {
                // One byte each: |i1 or |u1.
                out.push(small_int(dtype, code) as u8);
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
                Bytes(_) | Void(_) => out.extend_from_slice(raw),
                _ => {
                    // Native types: the bytes as they are, each scalar (each
                    // half of a complex, each code point) swapped from
                    // big-endian if need be.
                    let part = match dtype {
                        C64 | C128 | C256 => size / 2,
                        Unicode(_) => 4,
                        _ => size,
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
    write_elements(t, data, &mut |bytes: &[u8]| out.write_all(bytes), true)
}

/// What [`write_npy`] writes after the header: the elements in C order,
/// each encoded as [`npy_descr`] says, for a reader that builds the array
/// itself (the Python package's copies). Nothing is written when elements
/// are missing.
pub fn write_npy_data(t: &Tensor, data: &dyn Source, out: &mut impl Write) -> io::Result<()> {
    write_elements(t, data, &mut |bytes: &[u8]| out.write_all(bytes), false)
}

fn write_elements(
    t: &Tensor,
    data: &dyn Source,
    out: &mut dyn FnMut(&[u8]) -> io::Result<()>,
    header: bool,
) -> io::Result<()> {
    let decoded = super::varints::raw(t, data, u64::MAX);
    let (t, data) = super::varints::as_raw(t, data, &decoded);
    let p = Plan::new(t, data);
    if !p.decodable() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{} values of {} cannot be decoded", t.dtype.name(), t.name),
        ));
    }
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
    if header {
        out(&npy_header(&npy_descr(t.dtype), &t.shape))?;
    }
    let mut buf: Vec<u8> = Vec::with_capacity(CHUNK as usize + 64);
    let mut err: Option<io::Error> = None;
    let (dtype, be) = (p.dtype, p.be);
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
            if let Err(e) = out(&buf) {
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
    out(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

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
