//! Tensors: one table for every model format.
//!
//! A [`Tensor`] names a run of bytes in some extraction (the safetensors
//! file, a torch storage record) and says how to read it. Formats make them
//! (see [`super::TensorOffer`]); the view layer lists and decodes them.

use std::borrow::Cow;

use super::ggml::GgmlType;
use crate::extraction::ExtId;
use crate::status::Status;

/// Element types, spelled as safetensors spells them; the torch-only types
/// get names in the same style, and the NumPy types safetensors lacks are
/// spelled as NumPy's `dtype.str` without its byte order (`M8[ns]`, `S5`,
/// `U3`, `V20`).
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
    /// Signed 4-bit integer, two per byte, the first in the low bits
    /// (ONNX's `INT4`).
    I4,
    /// Unsigned 4-bit integer, packed as [`Dtype::I4`] (ONNX's `UINT4`).
    U4,
    /// Signed 2-bit integer, four per byte, the first in the low bits
    /// (ONNX's `INT2`).
    I2,
    /// Unsigned 2-bit integer, packed as [`Dtype::I2`] (ONNX's `UINT2`).
    U2,
    /// x87 extended precision (64-bit significand) stored in 16 bytes: NumPy's
    /// `longdouble` on x86-64 (`<f16`, `float128`).
    F128,
    /// Complex of two [`Dtype::F128`] (`<c32`, `complex256`).
    C256,
    /// NumPy `datetime64`: a signed 64-bit count of units since
    /// 1970-01-01T00:00, `i64::MIN` being NaT.
    Datetime(TimeUnit),
    /// NumPy `timedelta64`: a signed 64-bit count of units.
    Timedelta(TimeUnit),
    /// NumPy `S{n}`: `n` bytes, NUL-padded.
    Bytes(u32),
    /// NumPy `U{n}`: `n` UCS-4 code points (4 bytes each), NUL-padded.
    Unicode(u32),
    /// NumPy `V{n}`: opaque records of `n` bytes; structured dtypes too,
    /// whose fields the format lists beside the tensor.
    Void(u32),
    /// A block-quantized GGML type (GGUF); see [`super::ggml`].
    Ggml(GgmlType),
}

/// The unit of a NumPy `datetime64`/`timedelta64`: one of `Y M W D h m s ms
/// us ns ps fs as` times a multiplier (`[10ms]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimeUnit {
    /// Index into [`TimeUnit::NAMES`].
    pub unit: u8,
    /// How many units one count is (1 unless written as `[10ms]`).
    pub count: u32,
}

impl TimeUnit {
    /// The unit names NumPy writes, longest first.
    pub const NAMES: [&'static str; 13] = [
        "Y", "M", "W", "D", "h", "m", "s", "ms", "us", "ns", "ps", "fs", "as",
    ];

    /// Parses what is between the brackets of `M8[10ms]`.
    pub fn parse(s: &str) -> Option<TimeUnit> {
        let digits = s.bytes().take_while(u8::is_ascii_digit).count();
        let (n, name) = s.split_at(digits);
        let count = if n.is_empty() { 1 } else { n.parse().ok()? };
        let unit = Self::NAMES.iter().position(|u| *u == name)? as u8;
        (count > 0).then_some(TimeUnit { unit, count })
    }

    /// As NumPy writes it between brackets (`ns`, `10ms`).
    pub fn text(self) -> String {
        let name = Self::NAMES.get(usize::from(self.unit)).unwrap_or(&"?");
        if self.count == 1 {
            (*name).to_string()
        } else {
            format!("{}{name}", self.count)
        }
    }
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

    /// The name as in a safetensors header (`F32`, `BF16`, `F8_E4M3`, ...);
    /// see the type's docs for the others.
    pub fn name(self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
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
            Dtype::I4 => "I4",
            Dtype::U4 => "U4",
            Dtype::I2 => "I2",
            Dtype::U2 => "U2",
            Dtype::F128 => "F128",
            Dtype::C256 => "C256",
            Dtype::Datetime(u) => return format!("M8[{}]", u.text()).into(),
            Dtype::Timedelta(u) => return format!("m8[{}]", u.text()).into(),
            Dtype::Bytes(n) => return format!("S{n}").into(),
            Dtype::Unicode(n) => return format!("U{n}").into(),
            Dtype::Void(n) => return format!("V{n}").into(),
            Dtype::Ggml(t) => return t.name(),
        })
    }

    /// Parses a safetensors dtype name (one of [`Dtype::ALL`]).
    pub fn parse(s: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == s)
    }

    /// Whether elements are stored in blocks of several (a GGML quantized
    /// type): such a tensor has no per-element bits, and is read by blocks.
    pub fn is_block(self) -> bool {
        matches!(self, Dtype::Ggml(_))
    }

    /// Bits per element; 0 for a block type (see [`Dtype::is_block`]).
    pub fn bits(self) -> u64 {
        match self {
            Dtype::F4 | Dtype::I4 | Dtype::U4 => 4,
            Dtype::I2 | Dtype::U2 => 2,
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
            Dtype::C128 | Dtype::F128 => 128,
            Dtype::C256 => 256,
            Dtype::Datetime(_) | Dtype::Timedelta(_) => 64,
            Dtype::Bytes(n) | Dtype::Void(n) => u64::from(n) * 8,
            Dtype::Unicode(n) => u64::from(n) * 32,
            Dtype::Ggml(_) => 0,
        }
    }

    /// Bytes for `n` elements, `None` on overflow, a partial byte or a
    /// partial block.
    pub fn bytes_for(self, n: u64) -> Option<u64> {
        if let Dtype::Ggml(t) = self {
            return t.bytes_for(n);
        }
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
    /// How the elements are written in `offset .. offset + length`.
    pub encoding: Encoding,
}

/// How a tensor's elements are written in its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Encoding {
    /// As in memory: each element's bits, one after the other.
    #[default]
    Raw,
    /// Protobuf varints (ONNX `int32_data`, `int64_data`, `uint64_data`),
    /// an element's bits in the low bits of each: one element per varint,
    /// except 4- and 2-bit types, whose varints each hold one packed byte.
    Varints,
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
            assert_eq!(Dtype::parse(&d.name()), Some(d));
        }
        let ns = TimeUnit::parse("10ms").unwrap();
        assert_eq!(Dtype::Datetime(ns).name(), "M8[10ms]");
        assert_eq!(TimeUnit::parse("ns").unwrap().text(), "ns");
        assert_eq!(TimeUnit::parse("0s"), None);
        assert_eq!(TimeUnit::parse("fortnight"), None);
        assert_eq!(Dtype::Unicode(3).bytes_for(2), Some(24));
        assert_eq!(Dtype::Ggml(GgmlType(2)).bytes_for(64), Some(36));
        assert_eq!(Dtype::parse("F8_E4M3FN"), None);
        assert_eq!(Dtype::F4.bytes_for(3), None);
        assert_eq!(Dtype::F4.bytes_for(4), Some(2));
        assert_eq!(Dtype::BF16.bytes_for(10), Some(20));
        assert_eq!(Dtype::F6_E2M3.bytes_for(4), Some(3));
    }
}
