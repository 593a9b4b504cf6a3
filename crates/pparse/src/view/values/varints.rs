//! Tensors whose elements are protobuf varints (ONNX's `int32_data`,
//! `int64_data` and `uint64_data`), read as if they were raw: the varints
//! are decoded into the bytes `raw_data` would hold for the same tensor, so
//! that decoding, statistics and export need no second path.
//!
//! The decoded bytes are held in memory for one pass, up to
//! [`MAX_DECODED`]; writers put big tensors in `raw_data`, and a field's
//! varints are never fewer bytes than the elements they decode to divided
//! by eight.

use crate::data::{MemSource, Source};
use crate::offer::tensor::{Encoding, Tensor};

/// Decoded bytes at most: elements beyond are missing.
const MAX_DECODED: u64 = 256 << 20;

/// Field bytes read at once.
const PIECE: usize = 1 << 16;

/// The tensor as raw bytes when it is stored as varints: a copy of `t`
/// over the decoded bytes of its first `upto` elements (at most), and
/// those bytes. `None` for a raw tensor.
///
/// The varints end where the field's bytes end or one is cut off; the
/// elements they do not give are missing.
pub(super) fn raw(t: &Tensor, data: &dyn Source, upto: u64) -> Option<(Tensor, MemSource)> {
    if t.encoding != Encoding::Varints {
        return None;
    }
    let bits = t.dtype.bits();
    let need = t
        .numel()
        .min(upto)
        .saturating_mul(bits)
        .div_ceil(8)
        .min(MAX_DECODED);
    let mut out = Vec::new();
    let mut pack = Packer::default();
    let (mut value, mut shift) = (0u64, 0u32);
    let end = t.offset.saturating_add(t.length).min(data.available());
    let mut at = t.offset;
    let mut buf = vec![0u8; PIECE];
    'read: while at < end && (out.len() as u64) < need {
        let want = PIECE.min((end - at) as usize);
        let got = match data.read_at(at, &mut buf[..want]) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        at += got as u64;
        for &b in &buf[..got] {
            if shift < 64 {
                value |= u64::from(b & 0x7f) << shift;
            }
            shift += 7;
            if b & 0x80 != 0 {
                // Longer than any varint: the field is not varints.
                if shift >= 70 {
                    break 'read;
                }
                continue;
            }
            push(bits, value, &mut pack, &mut out);
            (value, shift) = (0, 0);
            if out.len() as u64 >= need {
                break 'read;
            }
        }
    }
    // The last 6-bit elements' partial byte.
    if pack.bits > 0 {
        out.push(pack.acc as u8);
    }
    out.truncate(need as usize);
    let mut raw = t.clone();
    raw.offset = 0;
    raw.length = out.len() as u64;
    raw.stride = None;
    raw.big_endian = false;
    raw.encoding = Encoding::Raw;
    Some((raw, MemSource::new(out)))
}

/// The tensor and bytes to read: `decoded` ([`raw`]) when the
/// tensor is stored as varints.
pub(super) fn as_raw<'a>(
    t: &'a Tensor,
    data: &'a dyn Source,
    decoded: &'a Option<(Tensor, MemSource)>,
) -> (&'a Tensor, &'a dyn Source) {
    match decoded {
        Some((t, d)) => (t, d),
        None => (t, data),
    }
}

/// 6-bit elements packed into a little-endian bit stream (see the module
/// docs of [`super`]).
#[derive(Default)]
struct Packer {
    acc: u32,
    bits: u32,
}

/// Appends what one varint holds: an element's bits in its low bits, or for
/// 4- and 2-bit types a byte of packed elements.
fn push(bits: u64, v: u64, pack: &mut Packer, out: &mut Vec<u8>) {
    match bits {
        2 | 4 => out.push(v as u8),
        6 => {
            pack.acc |= ((v & 0x3f) as u32) << pack.bits;
            pack.bits += 6;
            while pack.bits >= 8 {
                out.push(pack.acc as u8);
                pack.acc >>= 8;
                pack.bits -= 8;
            }
        }
        8 | 16 | 32 | 64 => out.extend_from_slice(&v.to_le_bytes()[..bits as usize / 8]),
        // No ONNX type of another width is stored as varints: its
        // elements are missing.
        _ => {}
    }
}
