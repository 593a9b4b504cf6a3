//! Tensors: one table for every model format.
//!
//! A [`Tensor`] names a run of bytes in some extraction (the safetensors
//! file, a torch storage record) and says how to read it. Formats make them
//! (see [`super::TensorOffer`]); the view layer lists and decodes them.

use crate::extraction::ExtId;
use crate::status::Status;

/// Element types, spelled as safetensors spells them; the torch-only types
/// get names in the same style.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// One byte, 0 or 1.
    BOOL,
    /// 4-bit float (E2M1, OCP MX).
    F4,
    /// 6-bit float, 2 exponent bits (OCP MX).
    F6_E2M3,
    /// 6-bit float, 3 exponent bits (OCP MX).
    F6_E3M2,
    /// Unsigned 8-bit integer.
    U8,
    /// Signed 8-bit integer.
    I8,
    /// 8-bit float, 5 exponent bits.
    F8_E5M2,
    /// 8-bit float, 4 exponent bits (the FN variant: no infinities).
    F8_E4M3,
    /// 8-bit exponent-only scale (OCP MX).
    F8_E8M0,
    /// 8-bit float, 4 exponent bits, no negative zero (AMD).
    F8_E4M3FNUZ,
    /// 8-bit float, 5 exponent bits, no negative zero (AMD).
    F8_E5M2FNUZ,
    /// Signed 16-bit integer.
    I16,
    /// Unsigned 16-bit integer.
    U16,
    /// IEEE half precision.
    F16,
    /// bfloat16.
    BF16,
    /// Signed 32-bit integer.
    I32,
    /// Unsigned 32-bit integer.
    U32,
    /// IEEE single precision.
    F32,
    /// Complex of two F32.
    C64,
    /// IEEE double precision.
    F64,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 64-bit integer.
    U64,
    /// torch: complex128, complex32, quantized and bit types.
    C128,
    /// Complex of two F16 (torch).
    C32,
    /// Quantized signed 8-bit (torch).
    QI8,
    /// Quantized unsigned 8-bit (torch).
    QU8,
    /// Quantized signed 32-bit (torch).
    QI32,
    /// Two quantized unsigned 4-bit values per byte (torch).
    QU4X2,
    /// Four quantized unsigned 2-bit values per byte (torch).
    QU2X4,
}

impl Dtype {
    /// Every dtype, in the order of the safetensors enum, torch's after.
    pub const ALL: [Dtype; 29] = [
        Dtype::BOOL,
        Dtype::F4,
        Dtype::F6_E2M3,
        Dtype::F6_E3M2,
        Dtype::U8,
        Dtype::I8,
        Dtype::F8_E5M2,
        Dtype::F8_E4M3,
        Dtype::F8_E8M0,
        Dtype::F8_E4M3FNUZ,
        Dtype::F8_E5M2FNUZ,
        Dtype::I16,
        Dtype::U16,
        Dtype::F16,
        Dtype::BF16,
        Dtype::I32,
        Dtype::U32,
        Dtype::F32,
        Dtype::C64,
        Dtype::F64,
        Dtype::I64,
        Dtype::U64,
        Dtype::C128,
        Dtype::C32,
        Dtype::QI8,
        Dtype::QU8,
        Dtype::QI32,
        Dtype::QU4X2,
        Dtype::QU2X4,
    ];

    /// The name as in a safetensors header (`F32`, `BF16`, `F8_E4M3`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Dtype::BOOL => "BOOL",
            Dtype::F4 => "F4",
            Dtype::F6_E2M3 => "F6_E2M3",
            Dtype::F6_E3M2 => "F6_E3M2",
            Dtype::U8 => "U8",
            Dtype::I8 => "I8",
            Dtype::F8_E5M2 => "F8_E5M2",
            Dtype::F8_E4M3 => "F8_E4M3",
            Dtype::F8_E8M0 => "F8_E8M0",
            Dtype::F8_E4M3FNUZ => "F8_E4M3FNUZ",
            Dtype::F8_E5M2FNUZ => "F8_E5M2FNUZ",
            Dtype::I16 => "I16",
            Dtype::U16 => "U16",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::I32 => "I32",
            Dtype::U32 => "U32",
            Dtype::F32 => "F32",
            Dtype::C64 => "C64",
            Dtype::F64 => "F64",
            Dtype::I64 => "I64",
            Dtype::U64 => "U64",
            Dtype::C128 => "C128",
            Dtype::C32 => "C32",
            Dtype::QI8 => "QI8",
            Dtype::QU8 => "QU8",
            Dtype::QI32 => "QI32",
            Dtype::QU4X2 => "QU4X2",
            Dtype::QU2X4 => "QU2X4",
        }
    }

    /// Parses a safetensors dtype name.
    pub fn parse(s: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.as_str() == s)
    }

    /// Bits per element.
    pub fn bits(self) -> u64 {
        match self {
            Dtype::F4 => 4,
            Dtype::F6_E2M3 | Dtype::F6_E3M2 => 6,
            Dtype::BOOL
            | Dtype::U8
            | Dtype::I8
            | Dtype::F8_E5M2
            | Dtype::F8_E4M3
            | Dtype::F8_E8M0
            | Dtype::F8_E4M3FNUZ
            | Dtype::F8_E5M2FNUZ
            | Dtype::QI8
            | Dtype::QU8
            | Dtype::QU4X2
            | Dtype::QU2X4 => 8,
            Dtype::I16 | Dtype::U16 | Dtype::F16 | Dtype::BF16 => 16,
            Dtype::I32 | Dtype::U32 | Dtype::F32 | Dtype::QI32 | Dtype::C32 => 32,
            Dtype::C64 | Dtype::F64 | Dtype::I64 | Dtype::U64 => 64,
            Dtype::C128 => 128,
        }
    }

    /// Bytes for `n` elements, `None` on overflow or a partial byte.
    pub fn bytes_for(self, n: u64) -> Option<u64> {
        let bits = n.checked_mul(self.bits())?;
        (bits % 8 == 0).then_some(bits / 8)
    }
}

/// One tensor: where its bytes are and how to read them.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    /// Path in the checkpoint's object (`model_state.linear.weight`), or the
    /// safetensors key.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Dimensions, outermost first.
    pub shape: Vec<u64>,
    /// torch: strides in elements.
    pub stride: Option<Vec<u64>>,
    /// torch: offset into the storage in elements.
    pub storage_offset: Option<u64>,
    /// The extraction holding the bytes.
    pub source: ExtId,
    /// Byte offset and length in `source`.
    pub offset: u64,
    /// See `offset`.
    pub length: u64,
    /// Complete, or truncated/corrupt when bytes are missing or wrong.
    pub status: Status,
    /// Why it is truncated or corrupt.
    pub detail: Option<String>,
    /// Big-endian bytes (a torch `byteorder` record saying so).
    pub big_endian: bool,
}

impl Tensor {
    /// Elements in the tensor; u64::MAX when the count overflows (the
    /// format marks such a tensor corrupt, see [`numel`]).
    pub fn numel(&self) -> u64 {
        numel(&self.shape).unwrap_or(u64::MAX)
    }
}

/// Elements of `shape`, `None` when the count overflows u64.
pub fn numel(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
}

/// `shape` as `[a, b, c]` for a message, the first 16 dimensions at most.
pub fn shape_text(shape: &[u64]) -> String {
    let dims: Vec<String> = shape.iter().take(16).map(|d| d.to_string()).collect();
    let more = if shape.len() > 16 { ", …" } else { "" };
    format!("[{}{more}]", dims.join(", "))
}

/// Why a tensor with this shape is corrupt.
pub fn overflow_text(shape: &[u64]) -> String {
    format!("element count of shape {} overflows", shape_text(shape))
}

/// Work that makes a tensor table without holding the tree's lock.
pub type TensorJob = Box<dyn FnOnce() -> Vec<Tensor> + Send>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sizes() {
        for d in Dtype::ALL {
            assert_eq!(Dtype::parse(d.as_str()), Some(d));
        }
        assert_eq!(Dtype::parse("F8_E4M3FN"), None);
        assert_eq!(Dtype::F4.bytes_for(3), None);
        assert_eq!(Dtype::F4.bytes_for(4), Some(2));
        assert_eq!(Dtype::BF16.bytes_for(10), Some(20));
        assert_eq!(Dtype::F6_E2M3.bytes_for(4), Some(3));
    }
}
