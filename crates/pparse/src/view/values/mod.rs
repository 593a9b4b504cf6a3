//! Tensor values: decoding elements of every `Dtype`, statistics over a
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
//! first) of byte `j / 8`. For `Dtype::F4` this is two elements per byte,
//! the low nibble first (PyTorch's `float4_e2m1fn_x2` order); for
//! `Dtype::F6_E2M3` and `Dtype::F6_E3M2` it is four elements per three
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
//!
//! # Files
//!
//! The code is cut by what it does: `decode.rs` turns an element's bits
//! into a [`Element`], `walk.rs` visits a tensor's elements in C order
//! whatever its strides, `stats.rs` and `npy.rs` are the two whole-tensor
//! passes built on the walk.

mod decode;
mod dequant;
mod npy;
mod stats;
mod varints;
mod walk;

pub use decode::{Element, decode};
pub use npy::{npy_descr, numpy_native, write_npy, write_npy_data};
pub use stats::{Stats, stats};

use crate::data::Source;
use crate::offer::tensor::Tensor;
use decode::decode_at;
use walk::{Item, Plan, walk};

/// Up to `count` elements from logical (C-order) index `first`, whatever
/// the strides. Stops at the first element whose bytes are missing, at the
/// end of the tensor, and at a read error.
pub fn values(t: &Tensor, data: &dyn Source, first: u64, count: usize) -> Vec<Element> {
    let decoded = varints::raw(t, data, first.saturating_add(count as u64));
    let (t, data) = varints::as_raw(t, data, &decoded);
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
            Item::Here(bytes, bit) => match decode_at(p.dtype, bytes, bit, p.be) {
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
