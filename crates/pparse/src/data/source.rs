//! The [`Source`] trait, [`Range`], and the helpers every reader of bytes
//! uses (see the [`crate::data`] module docs).

use std::io;
use std::sync::Arc;

use super::checkpoints::{StreamLayout, WindowStore};
use super::stats::Counters;

/// Bytes a sequential reader passes between two calls of
/// [`Source::release`]. A mapped file's pages count in the process's RSS
/// until then: every reader of a pass holds up to this much (and the
/// kernel's read-ahead) resident, and a call costs one `madvise`.
pub const RELEASE_STEP: u64 = 4 << 20;

/// One immutable byte source. See the module docs.
pub trait Source: Send + Sync + 'static {
    /// Number of bytes that can be read now.
    fn available(&self) -> u64;
    /// True once no more bytes will ever arrive: `available()` is the final length.
    ///
    /// Ask it *before* `available()` or a read whose shortness it is to
    /// judge: bytes may arrive in between, and a length or a short read
    /// taken before a `true` may be older than the end (a complete file
    /// then looks cut off). Read first, the answer is safe either way.
    fn is_final(&self) -> bool;
    /// How many bytes there are now, and whether that is all: read in the
    /// order that is safe while bytes arrive (see [`Source::is_final`]).
    fn extent(&self) -> (u64, bool) {
        let fin = self.is_final();
        (self.available(), fin)
    }
    /// Reads bytes at `offset` into `buf`; returns how many were read, which is
    /// less than `buf.len()` only at the end of the available bytes.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize>;
    /// The whole source as one slice, when it lives in memory or in a mapping.
    fn as_slice(&self) -> Option<&[u8]> {
        None
    }
    /// Hint that `[start, end)` will not be read again soon, so its pages may be
    /// dropped from this process (it keeps RSS flat during one sequential pass).
    /// Readers call it every [`RELEASE_STEP`] bytes.
    fn release(&self, _start: u64, _end: u64) {}
    /// Short description for status lines ("file", "gzip stream", ...).
    fn describe(&self) -> &'static str;
    /// Where byte `offset` comes from in the source this one is made from:
    /// (that source, the offset in it, whether the offset is exact). For a
    /// decoded stream it is the input position of the nearest checkpoint
    /// before `offset`, which is exact only at the checkpoint itself.
    fn origin(&self, _offset: u64) -> Option<(Data, u64, bool)> {
        None
    }
    /// Whether these bytes are a window of the source they come from, byte
    /// for byte (a tar member, a stored zip entry), not decoded from it.
    fn is_window(&self) -> bool {
        false
    }
    /// The length the source will have once final, when it is known before
    /// the bytes arrive (a tar member's window on a stream still being
    /// decoded): a parser may wait for all of it rather than read it as it
    /// comes.
    fn final_len(&self) -> Option<u64> {
        None
    }
    /// How the source is made, so that an index can make it again without
    /// reading it through (see [`Recipe`]).
    fn recipe(&self) -> Recipe<'_> {
        Recipe::Opaque
    }
    /// The I/O counters of the session these bytes belong to: a mapped file
    /// holds them, and what is made of another source passes its on.
    fn counters(&self) -> Option<&Arc<Counters>> {
        None
    }
    /// The same bytes in a smaller source, once these are final: the tree
    /// keeps it in their place when nothing parses them any more, so that a
    /// decoder's state is let go when its stream ends (a tar of many small
    /// `.gz` files; see `Tree::settle_sources`).
    fn settled(&self) -> Option<Data> {
        None
    }
}

/// How a [`Source`] is made of other sources.
pub enum Recipe<'a> {
    /// Nothing an index can rebuild (bytes in memory, a test source).
    Opaque,
    /// A session's own file: mapped, or a remote object.
    File,
    /// The window `range` of another source.
    Slice {
        /// The source it is a window of.
        of: &'a Data,
        /// The window.
        range: Range,
    },
    /// A decoded deflate stream.
    Inflate {
        /// The compressed bytes it is decoded from.
        input: &'a Data,
        /// Its checkpoints; `None` until it is decoded to its end.
        stream: Option<StreamLayout>,
        /// Where its checkpoints' windows are read from.
        windows: &'a dyn WindowStore,
    },
    /// A stream of independently decoded blocks (bzip2, xz, zstd).
    Blocks {
        /// The compressed bytes it is decoded from.
        input: &'a Data,
        /// The name of the codec that decodes one block (see
        /// `parsers::block_codec`).
        codec: &'static str,
        /// Its label ("xz stream").
        label: &'static str,
        /// Its blocks, and the CRC-32 of each 64 KiB of decoded bytes;
        /// `None` until it is decoded to its end.
        blocks: Option<(Vec<Block>, Vec<u32>)>,
    },
}

/// One block of a stream of independently decoded blocks (bzip2 blocks,
/// xz blocks, zstd frames): where its compressed bytes are and what it
/// decoded to. See `data::blocks`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Its compressed bytes in the input (whole bytes around it, for a
    /// bit-aligned block).
    pub input: Range,
    /// Decoded offset of its first byte.
    pub out_start: u64,
    /// Bytes it decoded to.
    pub out_len: u64,
    /// What its codec needs to open it again (bzip2: the bit range).
    pub aux: [u64; 2],
}

/// Follows [`Source::origin`] down to the file: the file offset a byte comes
/// from, and whether it is exact (false once a decoded stream is crossed).
pub fn file_offset(src: &Data, offset: u64) -> (u64, bool) {
    let mut data = src.clone();
    let mut at = offset;
    let mut exact = true;
    for _ in 0..64 {
        match data.origin(at) {
            Some((parent, o, e)) => {
                data = parent;
                at = o;
                exact &= e;
            }
            None => break,
        }
    }
    (at, exact)
}

/// A shared handle to a [`Source`].
pub type Data = Arc<dyn Source>;

/// A half-open byte range `[start, end)` within one source.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Range {
    /// First offset in the range.
    pub start: u64,
    /// Offset just past the range.
    pub end: u64,
}

impl Range {
    /// `[start, end)`; an `end` before `start` makes an empty range at `start`.
    pub fn new(start: u64, end: u64) -> Range {
        Range {
            start,
            end: end.max(start),
        }
    }
    /// Bytes in the range.
    pub fn len(&self) -> u64 {
        self.end - self.start
    }
    /// Whether the range holds no byte.
    pub fn is_empty(&self) -> bool {
        self.end == self.start
    }
    /// Whether `offset` is in the range.
    pub fn contains(&self, offset: u64) -> bool {
        self.start <= offset && offset < self.end
    }
    /// Whether the two ranges share a byte.
    pub fn overlaps(&self, other: &Range) -> bool {
        self.start < other.end && other.start < self.end
    }
}

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#x}..{:#x}", self.start, self.end)
    }
}

/// Reads exactly `buf.len()` bytes at `offset`. Returns `Ok(false)` when fewer
/// bytes are available (the buffer's tail is then unspecified).
pub fn read_exact_at(src: &dyn Source, offset: u64, buf: &mut [u8]) -> io::Result<bool> {
    let mut done = 0;
    while done < buf.len() {
        let n = src.read_at(offset + done as u64, &mut buf[done..])?;
        if n == 0 {
            return Ok(false);
        }
        done += n;
    }
    Ok(true)
}

/// Up to `len` bytes at `offset`: borrowed from the source when it is mapped,
/// otherwise read into `scratch`. Shorter only at the end of the available bytes.
pub fn view<'a>(
    src: &'a dyn Source,
    offset: u64,
    len: usize,
    scratch: &'a mut Vec<u8>,
) -> io::Result<&'a [u8]> {
    let avail = src.available();
    if offset >= avail {
        return Ok(&[]);
    }
    let len = (len as u64).min(avail - offset) as usize;
    if let Some(all) = src.as_slice() {
        let start = offset as usize;
        super::stats::file_read(src.counters().map(|c| &**c), len as u64);
        return Ok(&all[start..start + len]);
    }
    scratch.resize(len, 0);
    let mut done = 0;
    while done < len {
        let n = src.read_at(offset + done as u64, &mut scratch[done..])?;
        if n == 0 {
            break;
        }
        done += n;
    }
    scratch.truncate(done);
    Ok(&scratch[..])
}

/// A sequential reader over a source: an offset plus the source. Parsers that
/// walk a structure field by field use it; it never reads past `end`.
pub struct Cursor<'a> {
    src: &'a dyn Source,
    /// Offset of the next byte to read.
    pub pos: u64,
    /// Offset the reads stop at.
    pub end: u64,
}

impl<'a> Cursor<'a> {
    /// A cursor reading `range` of `src`.
    pub fn new(src: &'a dyn Source, range: Range) -> Cursor<'a> {
        Cursor {
            src,
            pos: range.start,
            end: range.end,
        }
    }
    /// Reads exactly `buf.len()` bytes or returns `None` (nothing consumed).
    pub fn read(&mut self, buf: &mut [u8]) -> Option<()> {
        if self.pos + buf.len() as u64 > self.end {
            return None;
        }
        match read_exact_at(self.src, self.pos, buf) {
            Ok(true) => {
                self.pos += buf.len() as u64;
                Some(())
            }
            _ => None,
        }
    }
    /// Reads one byte; `None` past the end.
    pub fn u8(&mut self) -> Option<u8> {
        let mut b = [0u8; 1];
        self.read(&mut b).map(|_| b[0])
    }
    /// Reads a little-endian u16; `None` past the end.
    pub fn u16le(&mut self) -> Option<u16> {
        let mut b = [0u8; 2];
        self.read(&mut b).map(|_| u16::from_le_bytes(b))
    }
    /// Reads a little-endian u32; `None` past the end.
    pub fn u32le(&mut self) -> Option<u32> {
        let mut b = [0u8; 4];
        self.read(&mut b).map(|_| u32::from_le_bytes(b))
    }
    /// Reads a little-endian u64; `None` past the end.
    pub fn u64le(&mut self) -> Option<u64> {
        let mut b = [0u8; 8];
        self.read(&mut b).map(|_| u64::from_le_bytes(b))
    }
    /// Reads `n` bytes into a new vector; `n` is bounded by the cursor's range,
    /// so a hostile length field cannot make it allocate more than exists.
    pub fn bytes(&mut self, n: u64) -> Option<Vec<u8>> {
        if n > self.end.saturating_sub(self.pos) || n > self.src.available() {
            return None;
        }
        let mut v = vec![0u8; n as usize];
        self.read(&mut v).map(|_| v)
    }
    /// Skips `n` bytes; `None` if that passes the end.
    pub fn skip(&mut self, n: u64) -> Option<()> {
        if self.pos + n > self.end {
            return None;
        }
        self.pos += n;
        Some(())
    }
}

/// Little-endian field readers over a fixed buffer (plain structs read from bytes).
pub mod le {
    /// The little-endian u16 at `b[at..]`.
    pub fn u16(b: &[u8], at: usize) -> u16 {
        u16::from_le_bytes([b[at], b[at + 1]])
    }
    /// The little-endian u32 at `b[at..]`.
    pub fn u32(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }
    /// The little-endian u64 at `b[at..]`.
    pub fn u64(b: &[u8], at: usize) -> u64 {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{MemSource, SliceSource};

    #[test]
    fn cursor_and_slices_stay_in_bounds() {
        let mem: Data = Arc::new(MemSource::new((0u8..100).collect()));
        let slice = SliceSource::new(mem.clone(), Range::new(10, 200));
        assert_eq!(slice.available(), 90);
        assert!(slice.is_final());
        let mut c = Cursor::new(&slice, Range::new(0, 20));
        assert_eq!(c.u8(), Some(10));
        assert_eq!(c.u16le(), Some(u16::from_le_bytes([11, 12])));
        assert_eq!(c.u32le(), Some(u32::from_le_bytes([13, 14, 15, 16])));
        assert_eq!(
            c.bytes(1000),
            None,
            "a length beyond the range allocates nothing"
        );
        assert_eq!(c.bytes(3), Some(vec![17, 18, 19]));
        assert_eq!(
            c.u64le(),
            Some(u64::from_le_bytes([20, 21, 22, 23, 24, 25, 26, 27]))
        );
        assert_eq!(c.skip(3), None, "only 2 bytes remain in the range");
        assert_eq!(c.u16le(), Some(u16::from_le_bytes([28, 29])));
        assert_eq!(c.u8(), None);
        let mut scratch = Vec::new();
        assert_eq!(
            view(&slice, 85, 10, &mut scratch).unwrap(),
            &[95, 96, 97, 98, 99]
        );
        assert!(view(&slice, 90, 10, &mut scratch).unwrap().is_empty());
    }
}
