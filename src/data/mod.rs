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

pub mod blocks;
mod cache;
pub mod checkpoints;
pub mod growth;
mod guard;
pub mod inflate;
mod mem;
mod mmap;
mod readahead;
mod regular;
mod remote;
mod slice;
mod source;
pub mod stats;

pub use blocks::{Block, BlockCodec, BlockReader, BlockSource, Fill, InputBuf, Pull, Pumped};
pub use cache::ChunkCache;
pub use guard::{ReadFailure, ReadGuard, take_read_failures};
pub use inflate::{InflateEvent, InflateSource, Inflater};
pub use mem::{HeadSource, MemSource};
pub use mmap::MmapSource;
pub use readahead::ReadAhead;
pub use regular::{irregular_kind, not_regular, open_regular, shown};
pub use remote::{RemoteLimits, RemoteSource, RemoteStats, is_remote_url, remote_stats};
pub use slice::SliceSource;
pub use source::{Cursor, Data, Layout, Range, Source, file_offset, le, read_exact_at, view};
