//! Compressors: gzip, bzip2, xz and zstd. Each parser walks its format's
//! framing (members, streams, blocks, frames) and hands the decoding to a
//! source under [`crate::data`] (deflate's in `data/inflate`, the block
//! decoders' in `data/blocks/`). The block compressors (bzip2, xz, zstd)
//! share `decoded`, the decoded stream's child and how lost input is
//! recorded in it, and `driver`, which steps them: their step loop, the
//! resync after damage, what follows a stream, and the parse's end.

pub(crate) mod bzip2;
pub(crate) mod decoded;
pub(crate) mod driver;
pub(crate) mod gzip;
pub(crate) mod xz;
pub(crate) mod zstd;
