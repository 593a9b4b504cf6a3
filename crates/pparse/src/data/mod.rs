//! Byte sources: the only code that touches raw bytes.
//!
//! A [`Source`] is one immutable sequence of bytes that may still be growing:
//! a memory-mapped file ([`MmapSource`]), a window into another source
//! ([`SliceSource`]), a decoded deflate stream ([`InflateSource`]), a stream
//! of independently decoded blocks (bzip2, xz, zstd: [`BlockSource`]), bytes in
//! memory ([`MemSource`]) or an object on a web server or S3, read with range
//! requests ([`RemoteSource`]). Parsers read through [`Source::read_at`] at absolute
//! offsets (like `pread`), so several readers can share one source without a
//! shared cursor, and nothing ever needs the whole source in memory.
//!
//! A source that is still growing (a gzip stream being decoded) reports how
//! many bytes exist *now* with [`Source::available`] and whether more can come
//! with [`Source::is_final`]. A parser that needs bytes beyond `available()` of
//! a source that is not final yields and is stepped again later; if the source
//! is final, the bytes will never come: the input is truncated.

mod ahead;
pub mod blocks;
mod cache;
pub mod checkpoints;
pub mod fork;
pub mod growth;
mod guard;
pub mod inflate;
mod mem;
mod mmap;
mod pages;
mod per_process;
mod readahead;
mod regular;
mod remote;
mod slice;
mod source;
pub mod stats;
pub mod trace;
pub mod workers;

pub use blocks::{Block, BlockCodec, BlockReader, BlockSource, Fill, InputBuf, Pull, Pumped};
pub use cache::ChunkCache;
pub use guard::{ReadFailure, ReadGuard, take_read_failures};
pub use inflate::{InflateEvent, InflateSource, Inflater};
pub use mem::{HeadSource, MemSource};
pub use mmap::MmapSource;
pub use readahead::ReadAhead;

/// Memory one decoder's window may take: an xz/LZMA dictionary or a zstd
/// window declared larger than this is decoded with this much, which is
/// enough unless a match reaches further back (then the decoder says the
/// block needs more, and by how much). 256 MiB covers every `xz` preset
/// (64 MiB at -9) and zstd up to `--long=28`; `PPARSE_DECODER_MIB` sets
/// another limit. A declared 4 GiB dictionary would otherwise cost
/// gigabytes for a file of a few hundred KB.
pub fn decoder_window_limit() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        std::env::var("PPARSE_DECODER_MIB")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&m| m >= 1)
            .map_or(256 << 20, |m| m.saturating_mul(1 << 20).min(4 << 30))
    })
}
pub use regular::{irregular_kind, not_regular, open_regular, shown};
pub use remote::{RemoteLimits, RemoteSource, RemoteStats, is_remote_url, put_file, remote_stats};
pub use slice::SliceSource;
pub use source::{
    Cursor, Data, RELEASE_STEP, Range, Recipe, Source, file_offset, le, read_exact_at, view,
};
