//! GGML tensor types: the block-quantized element types of GGUF files.
//!
//! A GGML type stores elements in blocks: `block` elements take `bytes`
//! bytes (a Q8_0 block is one f16 scale and 32 signed bytes: 32 elements in
//! 34 bytes). The plain types (F32, F16, BF16, I8 … F64) are blocks of one
//! and map to the ordinary [`Dtype`](super::tensor::Dtype)s; the others are
//! [`Dtype::Ggml`](super::tensor::Dtype::Ggml) with a [`GgmlType`].
//!
//! Names and sizes are those of the `gguf` Python package (0.19.0,
//! `GGMLQuantizationType` and `GGML_QUANT_SIZES`), so that a tensor list
//! reads as `gguf-dump` prints it. Ids that were removed from ggml keep
//! their old names; ids the table does not know have no size, and a tensor
//! of such a type cannot be checked.

/// One GGML type by its id in a GGUF tensor info.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GgmlType(pub u32);

/// (id, name, elements per block, bytes per block). Block sizes of removed
/// types are their last known ones.
const TABLE: &[(u32, &str, u64, u64)] = &[
    (0, "F32", 1, 4),
    (1, "F16", 1, 2),
    (2, "Q4_0", 32, 18),
    (3, "Q4_1", 32, 20),
    (4, "Q4_2", 32, 18),
    (5, "Q4_3", 32, 20),
    (6, "Q5_0", 32, 22),
    (7, "Q5_1", 32, 24),
    (8, "Q8_0", 32, 34),
    (9, "Q8_1", 32, 40),
    (10, "Q2_K", 256, 84),
    (11, "Q3_K", 256, 110),
    (12, "Q4_K", 256, 144),
    (13, "Q5_K", 256, 176),
    (14, "Q6_K", 256, 210),
    (15, "Q8_K", 256, 292),
    (16, "IQ2_XXS", 256, 66),
    (17, "IQ2_XS", 256, 74),
    (18, "IQ3_XXS", 256, 98),
    (19, "IQ1_S", 256, 50),
    (20, "IQ4_NL", 32, 18),
    (21, "IQ3_S", 256, 110),
    (22, "IQ2_S", 256, 82),
    (23, "IQ4_XS", 256, 136),
    (24, "I8", 1, 1),
    (25, "I16", 1, 2),
    (26, "I32", 1, 4),
    (27, "I64", 1, 8),
    (28, "F64", 1, 8),
    (29, "IQ1_M", 256, 56),
    (30, "BF16", 1, 2),
    (31, "Q4_0_4_4", 32, 18),
    (32, "Q4_0_4_8", 32, 18),
    (33, "Q4_0_8_8", 32, 18),
    (34, "TQ1_0", 256, 54),
    (35, "TQ2_0", 256, 66),
    (36, "IQ4_NL_4_4", 32, 18),
    (37, "IQ4_NL_4_8", 32, 18),
    (38, "IQ4_NL_8_8", 32, 18),
    (39, "MXFP4", 32, 17),
    (40, "NVFP4", 64, 36),
    (41, "Q1_0", 128, 18),
];

impl GgmlType {
    fn entry(self) -> Option<&'static (u32, &'static str, u64, u64)> {
        TABLE.iter().find(|e| e.0 == self.0)
    }

    /// Its name as the `gguf` package spells it (`Q4_K`), or `type N` for
    /// an id the table does not know.
    pub fn name(self) -> std::borrow::Cow<'static, str> {
        match self.entry() {
            Some(e) => e.1.into(),
            None => format!("type {}", self.0).into(),
        }
    }

    /// (elements per block, bytes per block), `None` for an unknown id.
    pub fn block(self) -> Option<(u64, u64)> {
        self.entry().map(|e| (e.2, e.3))
    }

    /// Bytes for `n` elements; `None` for an unknown id, on overflow, or
    /// when `n` is not a whole number of blocks.
    pub fn bytes_for(self, n: u64) -> Option<u64> {
        let (block, bytes) = self.block()?;
        n.is_multiple_of(block)
            .then(|| (n / block).checked_mul(bytes))
            .flatten()
    }

    /// Every id the table knows.
    pub fn known() -> impl Iterator<Item = GgmlType> {
        TABLE.iter().map(|e| GgmlType(e.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(GgmlType(8).name(), "Q8_0");
        assert_eq!(GgmlType(8).bytes_for(64), Some(68));
        assert_eq!(GgmlType(8).bytes_for(33), None);
        assert_eq!(GgmlType(99).block(), None);
        assert_eq!(GgmlType(99).name(), "type 99");
        let mut ids: Vec<u32> = GgmlType::known().map(|t| t.0).collect();
        ids.dedup();
        assert_eq!(ids.len(), TABLE.len());
    }
}
