//! Compressors: gzip, bzip2, xz and zstd. Each parser walks its format's
//! framing (members, streams, blocks, frames) and hands the decoding to a
//! source under [`crate::data`] (deflate's in `data/inflate`, the block
//! decoders' in `data/blocks/`); `decoded` is what they share: the
//! decoded stream's child, its step loop's output and the lost-input
//! reporting after damage.

pub(crate) mod bzip2;
pub(crate) mod decoded;
pub(crate) mod gzip;
pub(crate) mod xz;
pub(crate) mod zstd;
