//! How a decoded stream can be resumed: its checkpoints and where their
//! windows are kept. Plain data, shared by the decoder that records them
//! (`inflate`), the sources that describe themselves (`source`) and the
//! index that saves and restores them.

use std::io;

/// Where a checkpoint's window is kept: in the process's temporary window
/// file while a stream is decoded, or in a window store (an index file)
/// for a restored stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowSlot {
    /// Offset in the store.
    pub off: u64,
    /// Bytes in the store.
    pub len: u32,
}

impl WindowSlot {
    /// The window before a point where decoding resumed after damage: it
    /// is unknown, and decoding starts from 32 KiB of zeros (the bytes that
    /// copy it are listed as damage; see `inflate::resync`).
    pub const UNKNOWN: WindowSlot = WindowSlot {
        off: u64::MAX,
        len: 0,
    };
}

/// A place where decoding can resume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checkpoint {
    /// Decoded offset.
    pub out: u64,
    /// Input offset of the first byte not yet consumed.
    pub input: u64,
    /// Unused bits of the byte before `input` (0..=7).
    pub bits: u8,
    /// The 32 KiB of output before `out`, where it is kept (none at the
    /// start of a deflate stream).
    pub window: Option<WindowSlot>,
}

/// Where checkpoint windows are read back from, by slot: a decoded
/// stream's own store, or an index file.
pub trait WindowStore: Send + Sync {
    /// The window at `slot`, into `out` (resized to fit).
    fn read(&self, slot: WindowSlot, out: &mut Vec<u8>) -> io::Result<()>;
}

/// One raw deflate stream's share of the decoded bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Decoded offset where the stream's output begins.
    pub out_start: u64,
    /// Decoded offset where it ends.
    pub out_end: u64,
    /// Checkpoints; the first is the stream start (no window).
    pub points: Vec<Checkpoint>,
}

/// What a finished stream knows of itself: enough to read it again at
/// random without decoding it from the start (see `InflateSource::layout`).
#[derive(Clone, Debug)]
pub struct StreamLayout {
    /// Its label ("gzip stream", "deflate").
    pub label: &'static str,
    /// Output distance between checkpoints.
    pub span: u64,
    /// Decoded length.
    pub len: u64,
    /// One per raw deflate stream laid end to end.
    pub segments: Vec<Segment>,
    /// The CRC-32 of each 64 KiB chunk of the decoded bytes (the last one
    /// shorter), as the first pass decoded them; empty when not recorded.
    /// A stream read back from an index checks every chunk it decodes
    /// again against them before a byte of it is served.
    pub chunk_crcs: Vec<u32>,
}
