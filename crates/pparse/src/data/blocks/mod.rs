//! A decoded stream made of independently decodable blocks (bzip2 blocks,
//! xz blocks, zstd frames), with random access and bounded memory.
//!
//! A [`BlockSource`] is filled by the parser of its format during the first
//! pass: it opens a [`BlockReader`] on each block it finds
//! ([`BlockCodec::open`]), calls [`BlockSource::begin_block`], pumps the
//! reader's output in with [`BlockSource::pump`], and closes the block with
//! [`BlockSource::end_block`]. The source never holds the decoded bytes
//! itself:
//!
//! * what was just produced goes into the global [`ChunkCache`] in 64 KiB
//!   chunks, where parsers reading right behind the decoder find it;
//! * the table of blocks (compressed range → decoded range) is the only
//!   thing kept per block, a few words each;
//! * a read of an evicted chunk opens a reader on the block that holds it
//!   and decodes that block from its start, up to the chunk; the reader is
//!   kept, so sequential reads go on where the last one ended.
//!
//! A block's decoded length is whatever its first pass produced: a block
//! cut off by the end of the input, or by invalid data after some output,
//! keeps that output, and re-reading stops at the same place. A lost block
//! contributes no bytes.
//!
//! One huge block (a zstd frame of 1 GB) is streamed through the cache the
//! same way; a random read inside it decodes from the block's start up to
//! the chunk asked for, since these formats have no point to resume from
//! inside a block. That costs time (at most one block's decoding per
//! evicted chunk read out of order), never memory beyond the cache and the
//! decoder's own window.

mod ahead;
pub(crate) mod bzip2;
mod codec;
pub(crate) mod xz;
pub(crate) mod zstd;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};

use self::codec::OUT_BUF;
pub use self::codec::{BlockCodec, BlockReader, Pull};
use super::cache::{Chunk, ChunkCache};
use super::growth;
pub use super::source::Block;
use super::source::{Data, Range, Recipe, Source};
use super::stats::Counted;

/// Cache granularity of decoded bytes.
pub const CHUNK: u64 = 64 * 1024;
/// Input read size for one decoder call.
const IN_BUF: usize = 64 * 1024;

static NEXT_KEY: AtomicU64 = AtomicU64::new(1 << 40);

/// Labels a stream of blocks may carry (labels are static strings).
const LABELS: [&str; 7] = [
    "bzip2 stream",
    "xz stream",
    "zstd stream",
    "bzip2 entry",
    "lzma entry",
    "zstd entry",
    "xz entry",
];

struct Tail {
    /// Decoded offset of `buf[0]`, a multiple of [`CHUNK`].
    start: u64,
    buf: Vec<u8>,
}

/// A reader kept between reads, at decoded offset `pos` of block `block`.
struct Replay {
    block: usize,
    pos: u64,
    reader: Box<dyn BlockReader>,
}

/// A decoded stream of independent blocks. See the module docs.
pub struct BlockSource {
    key: u64,
    /// The session's I/O counters, from `input`.
    counters: Counted,
    input: Data,
    codec: Arc<dyn BlockCodec>,
    /// Workers decoding the blocks ahead of the first pass, once it opens
    /// its first block with more than one thread set.
    ahead: Mutex<AheadState>,
    blocks: RwLock<Vec<Block>>,
    tail: Mutex<Tail>,
    avail: AtomicU64,
    done: AtomicBool,
    replay: Mutex<Option<Replay>>,
    label: &'static str,
    /// CRC-32 of each [`CHUNK`] of decoded bytes, recorded as the first
    /// pass makes them (an index keeps them).
    chunk_crcs: Mutex<Vec<u32>>,
    /// Whether chunks decoded again are checked against `chunk_crcs`: a
    /// stream read back from an index, whose blocks could be moved.
    checks_chunks: bool,
}

/// Whether workers decode a stream's blocks ahead.
enum AheadState {
    /// Not yet asked: the first block the first pass opens decides.
    Unasked,
    On(crate::data::ahead::Ahead<ahead::Blocks>),
    /// None were started.
    Off,
    /// They were, and the stream is complete: blocks taken from them, and
    /// blocks the first pass decoded itself.
    Ended(u64, u64),
}

/// What [`BlockSource::pump`] ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pumped {
    /// The output budget was used; call again.
    Progress,
    /// The reader ended ([`Pull::End`], [`Pull::NeedInput`],
    /// [`Pull::Truncated`] or [`Pull::Error`]).
    Stopped(Pull),
}

impl BlockSource {
    /// A new, empty stream decoded from `input` by `codec`; `label` names it
    /// in status lines ("bzip2 stream").
    pub fn new(input: Data, codec: Box<dyn BlockCodec>, label: &'static str) -> Arc<BlockSource> {
        Arc::new(BlockSource {
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            counters: input.counters().cloned(),
            input,
            codec: Arc::from(codec),
            ahead: Mutex::new(AheadState::Unasked),
            blocks: RwLock::new(Vec::new()),
            tail: Mutex::new(Tail {
                start: 0,
                buf: Vec::new(),
            }),
            avail: AtomicU64::new(0),
            done: AtomicBool::new(false),
            replay: Mutex::new(None),
            label,
            chunk_crcs: Mutex::new(Vec::new()),
            checks_chunks: false,
        })
    }

    /// The stream `blocks` describe, decoded from `input` by `codec` on
    /// demand (from an index). The table is checked for order and bounds,
    /// never trusted blindly, and each chunk decoded again is checked
    /// against `chunk_crcs`, the CRC-32s the first pass recorded (one per
    /// [`CHUNK`]): blocks moved onto other real blocks, whose own checks
    /// hold, still fail.
    pub fn restore(
        input: Data,
        codec: Box<dyn BlockCodec>,
        label: &str,
        blocks: Vec<Block>,
        chunk_crcs: Vec<u32>,
    ) -> io::Result<Arc<BlockSource>> {
        let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
        let label = LABELS
            .iter()
            .copied()
            .find(|l| *l == label)
            .ok_or_else(|| bad("unknown stream label"))?;
        let mut out = 0u64;
        for b in &blocks {
            if b.out_start != out || b.input.end < b.input.start {
                return Err(bad("blocks out of order"));
            }
            out = out
                .checked_add(b.out_len)
                .ok_or_else(|| bad("block sizes overflow"))?;
        }
        if chunk_crcs.len() as u64 != out.div_ceil(CHUNK) {
            return Err(bad("chunk checksums do not add up to the length"));
        }
        Ok(Arc::new(BlockSource {
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            counters: input.counters().cloned(),
            input,
            codec: Arc::from(codec),
            ahead: Mutex::new(AheadState::Off),
            blocks: RwLock::new(blocks),
            tail: Mutex::new(Tail {
                start: out - out % CHUNK,
                buf: Vec::new(),
            }),
            avail: AtomicU64::new(out),
            done: AtomicBool::new(true),
            replay: Mutex::new(None),
            label,
            chunk_crcs: Mutex::new(chunk_crcs),
            checks_chunks: true,
        }))
    }

    /// The compressed bytes.
    pub fn input(&self) -> &Data {
        &self.input
    }

    /// A reader at the start of a block whose compressed bytes start at
    /// `input_start` (the first pass uses it before [`Self::begin_block`]).
    /// With more than one thread set ([`crate::data::workers`]), the
    /// blocks after it are decoded ahead, and a block decoded ahead is
    /// read from what a worker made of it.
    pub fn open(&self, input_start: u64, aux: [u64; 2]) -> io::Result<Box<dyn BlockReader>> {
        let b = Block {
            input: Range::new(input_start, input_start),
            out_start: 0,
            out_len: 0,
            aux,
        };
        {
            let mut ahead = self.ahead.lock();
            // Workers start only where a second block is known to follow:
            // a stream of one block (a zip's bzip2 or zstd entry, of which
            // there may be thousands) has nothing to decode ahead.
            if let AheadState::Unasked = *ahead
                && (crate::data::workers::threads() < 2
                    || self.codec.next_block(&*self.input, &b).is_none())
            {
                *ahead = AheadState::Off;
            }
            if let AheadState::Unasked = *ahead {
                let blocks = ahead::Blocks {
                    input: self.input.clone(),
                    codec: self.codec.clone(),
                    counters: self.counters.clone(),
                };
                let threads = crate::data::workers::threads();
                *ahead = match crate::data::ahead::Ahead::start(&self.input, blocks, threads) {
                    Some(a) => AheadState::On(a),
                    None => AheadState::Off,
                };
            }
            if let AheadState::On(a) = &mut *ahead
                && let Some(r) = a.take(&(input_start, aux))
            {
                return Ok(Box::new(r));
            }
        }
        self.codec.open(&self.input, &b)
    }

    /// Blocks read from what workers decoded ahead, and blocks the first
    /// pass decoded itself while workers ran.
    pub fn ahead_counts(&self) -> (u64, u64) {
        match &*self.ahead.lock() {
            AheadState::On(a) => (a.taken, a.passed),
            AheadState::Ended(taken, passed) => (*taken, *passed),
            _ => (0, 0),
        }
    }

    /// Starts a block whose compressed bytes start at `input_start`; its
    /// output is what [`Self::pump`] appends until the next block starts.
    pub fn begin_block(&self, input_start: u64, aux: [u64; 2]) {
        let out = self.available();
        self.blocks.write().push(Block {
            input: Range::new(input_start, input_start),
            out_start: out,
            out_len: 0,
            aux,
        });
    }

    /// Sets where the current block's compressed bytes end.
    pub fn end_block(&self, input_end: u64) {
        if let Some(b) = self.blocks.write().last_mut() {
            b.input = Range::new(b.input.start, input_end);
        }
    }

    /// The blocks so far.
    pub fn blocks(&self) -> Vec<Block> {
        self.blocks.read().clone()
    }

    /// Decodes up to about `max` bytes from `reader` into the current
    /// block, handing each piece to `seen` (for checksums).
    pub fn pump(
        &self,
        reader: &mut dyn BlockReader,
        max: u64,
        scratch: &mut Vec<u8>,
        seen: &mut dyn FnMut(&[u8]),
    ) -> Pumped {
        scratch.resize(OUT_BUF, 0);
        let started = std::time::Instant::now();
        let mut made = 0u64;
        let r = loop {
            if made >= max {
                break Pumped::Progress;
            }
            match reader.read(scratch) {
                Pull::Out(n) => {
                    let n = n.min(scratch.len());
                    seen(&scratch[..n]);
                    self.append(&scratch[..n]);
                    made += n as u64;
                }
                other => break Pumped::Stopped(other),
            }
        };
        super::stats::decoded(self.counters.as_deref(), made, started.elapsed(), false);
        r
    }

    fn append(&self, mut data: &[u8]) {
        let mut t = self.tail.lock();
        let new_avail = self.avail.load(Ordering::Relaxed) + data.len() as u64;
        while !data.is_empty() {
            let room = CHUNK as usize - t.buf.len();
            let take = room.min(data.len());
            t.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if t.buf.len() == CHUNK as usize {
                self.chunk_crcs.lock().push(crc32fast::hash(&t.buf));
                let idx = t.start / CHUNK;
                // The full buffer becomes the chunk (see `InflateSource`'s
                // `append`).
                let buf = std::mem::replace(&mut t.buf, Vec::with_capacity(CHUNK as usize));
                ChunkCache::global().insert((self.key, idx), Arc::new(Chunk::from_vec(buf)));
                t.start += CHUNK;
            }
        }
        if let Some(b) = self.blocks.write().last_mut() {
            b.out_len = new_avail - b.out_start;
        }
        self.avail.store(new_avail, Ordering::Release);
        growth::grew(self);
    }

    /// Marks the stream complete: no more output will be appended.
    pub fn finish(&self) {
        // No more blocks to open: the workers go.
        {
            let mut ahead = self.ahead.lock();
            if let AheadState::On(a) = &*ahead {
                a.stop();
                *ahead = AheadState::Ended(a.taken, a.passed);
            }
        }
        let mut t = self.tail.lock();
        if !t.buf.is_empty() {
            self.chunk_crcs.lock().push(crc32fast::hash(&t.buf));
            let idx = t.start / CHUNK;
            ChunkCache::global().insert((self.key, idx), Chunk::copy_of(&t.buf));
            t.buf = Vec::new();
        }
        self.done.store(true, Ordering::Release);
        growth::grew(self);
    }

    /// Drops this stream's decoded chunks from the cache, so that the next
    /// reads must decode their blocks again.
    pub fn evict(&self) {
        ChunkCache::global().forget(self.key);
        *self.replay.lock() = None;
    }

    fn read_tail(&self, offset: u64, buf: &mut [u8]) -> usize {
        let t = self.tail.lock();
        if offset < t.start || offset >= t.start + t.buf.len() as u64 {
            return 0;
        }
        let at = (offset - t.start) as usize;
        let n = buf.len().min(t.buf.len() - at);
        buf[..n].copy_from_slice(&t.buf[at..at + n]);
        n
    }

    /// The index of the block holding decoded offset `pos`.
    fn block_at(&self, pos: u64) -> Option<(usize, Block)> {
        let blocks = self.blocks.read();
        let i = blocks.partition_point(|b| b.out_start + b.out_len <= pos);
        let b = *blocks.get(i)?;
        (b.out_start <= pos).then_some((i, b))
    }

    /// Decodes chunk `idx` again from the blocks that hold it.
    fn chunk(&self, idx: u64) -> io::Result<Arc<Chunk>> {
        if let Some(c) = ChunkCache::global().get((self.key, idx)) {
            return Ok(c);
        }
        let mut guard = self.replay.lock();
        if let Some(c) = ChunkCache::global().get((self.key, idx)) {
            return Ok(c);
        }
        let started = std::time::Instant::now();
        let mut decoded = 0u64;
        let target = idx * CHUNK;
        let end = (target + CHUNK).min(self.available());
        let mut acc: Vec<u8> = Vec::with_capacity(end.saturating_sub(target) as usize);
        let mut skip = Vec::new();
        let mut pos = target;
        let result = loop {
            if pos >= end {
                break Ok(());
            }
            let Some((bi, b)) = self.block_at(pos) else {
                break Err(io::Error::other(format!("no decoded data at {pos:#x}")));
            };
            let reuse = matches!(&*guard, Some(r) if r.block == bi && r.pos <= pos);
            if !reuse {
                match self.codec.open(&self.input, &b) {
                    Ok(reader) => {
                        *guard = Some(Replay {
                            block: bi,
                            pos: b.out_start,
                            reader,
                        });
                    }
                    Err(e) => break Err(e),
                }
            }
            let r = guard.as_mut().expect("replay set above");
            let block_end = b.out_start + b.out_len;
            let stop = end.min(block_end);
            let mut failed = None;
            while r.pos < stop {
                let skipping = r.pos < pos;
                let want = if skipping { pos - r.pos } else { stop - r.pos }.min(OUT_BUF as u64);
                let want = want as usize;
                let got = if skipping {
                    skip.resize(want, 0);
                    r.reader.read(&mut skip[..want])
                } else {
                    let at = acc.len();
                    acc.resize(at + want, 0);
                    let g = r.reader.read(&mut acc[at..]);
                    let n = match g {
                        Pull::Out(n) => n.min(want),
                        _ => 0,
                    };
                    acc.truncate(at + n);
                    g
                };
                match got {
                    Pull::Out(n) => {
                        let n = n.min(want) as u64;
                        r.pos += n;
                        decoded += n;
                    }
                    other => {
                        failed = Some(io::Error::other(format!(
                            "re-decoding block #{} stopped at {:#x} ({other:?})",
                            bi + 1,
                            r.pos
                        )));
                        break;
                    }
                }
            }
            if let Some(e) = failed {
                *guard = None;
                break Err(e);
            }
            pos = stop;
            if r.pos >= block_end {
                *guard = None;
            }
        };
        super::stats::decoded(self.counters.as_deref(), decoded, started.elapsed(), true);
        result?;
        self.check_chunk(idx, &acc)?;
        let c = Arc::new(Chunk::from_vec(acc));
        ChunkCache::global().insert((self.key, idx), c.clone());
        Ok(c)
    }
}

impl BlockSource {
    /// Checks chunk `idx` decoded again against the CRC the first pass
    /// recorded, for a stream read back from an index.
    fn check_chunk(&self, idx: u64, data: &[u8]) -> io::Result<()> {
        if !self.checks_chunks {
            return Ok(());
        }
        super::cache::check_chunk_crc(&self.chunk_crcs, self.label, CHUNK, idx, data)
    }

    /// The CRC-32 of each chunk, once the stream is final.
    fn final_chunk_crcs(&self) -> Option<Vec<u32>> {
        self.is_final().then(|| self.chunk_crcs.lock().clone())
    }
}

impl Drop for BlockSource {
    fn drop(&mut self) {
        ChunkCache::global().forget(self.key);
    }
}

impl Source for BlockSource {
    fn available(&self) -> u64 {
        self.avail.load(Ordering::Acquire)
    }
    fn is_final(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        super::cache::read_chunked(
            (self.key, self.counters.as_deref()),
            CHUNK,
            self.available(),
            offset,
            buf,
            |pos, b| self.read_tail(pos, b),
            |idx| self.chunk(idx),
        )
    }
    fn describe(&self) -> &'static str {
        self.label
    }
    fn counters(&self) -> Option<&Arc<super::stats::Counters>> {
        self.counters.as_ref()
    }
    fn origin(&self, offset: u64) -> Option<(Data, u64, bool)> {
        let (_, b) = self.block_at(offset)?;
        Some((self.input.clone(), b.input.start, b.out_start == offset))
    }
    fn recipe(&self) -> Recipe<'_> {
        Recipe::Blocks {
            input: &self.input,
            codec: self.codec.name(),
            label: self.label,
            blocks: self.final_chunk_crcs().map(|crcs| (self.blocks(), crcs)),
        }
    }
}

/// Buffered input over a source that may still grow: what the readers of
/// xz blocks and zstd frames feed their decoders from.
pub struct InputBuf {
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    /// Input offset of the first unconsumed byte.
    pub pos: u64,
}

/// What [`InputBuf::fill`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    /// Bytes are buffered.
    Bytes,
    /// None now; the input is still growing.
    Wait,
    /// None ever: the input ended.
    Eof,
}

impl InputBuf {
    /// A buffer reading from input offset `pos`.
    pub fn new(pos: u64) -> InputBuf {
        InputBuf {
            buf: Vec::new(),
            lo: 0,
            hi: 0,
            pos,
        }
    }
    /// Refills from `input` when empty.
    pub fn fill(&mut self, input: &dyn Source) -> Fill {
        if self.lo < self.hi {
            return Fill::Bytes;
        }
        let (avail, fin) = input.extent();
        if self.pos >= avail {
            return if fin { Fill::Eof } else { Fill::Wait };
        }
        if self.buf.len() < IN_BUF {
            self.buf.resize(IN_BUF, 0);
        }
        let want = ((avail - self.pos) as usize).min(self.buf.len());
        match input.read_at(self.pos, &mut self.buf[..want]) {
            Ok(n) if n > 0 => {
                self.lo = 0;
                self.hi = n;
                Fill::Bytes
            }
            _ => Fill::Eof,
        }
    }
    /// The buffered bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf[self.lo..self.hi]
    }
    /// Marks `n` buffered bytes consumed.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.hi - self.lo);
        self.lo += n;
        self.pos += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    /// A toy codec: block `i` is `aux[0]` bytes of value `aux[1]`.
    struct Toy;
    struct ToyReader {
        left: u64,
        byte: u8,
    }
    impl BlockReader for ToyReader {
        fn read(&mut self, out: &mut [u8]) -> Pull {
            if self.left == 0 {
                return Pull::End;
            }
            let n = (out.len() as u64).min(self.left).min(1000) as usize;
            out[..n].fill(self.byte);
            self.left -= n as u64;
            Pull::Out(n)
        }
        fn input_pos(&self) -> u64 {
            0
        }
    }
    impl BlockCodec for Toy {
        fn name(&self) -> &'static str {
            "toy"
        }
        fn open(&self, _: &Data, b: &Block) -> io::Result<Box<dyn BlockReader>> {
            Ok(Box::new(ToyReader {
                left: b.aux[0],
                byte: b.aux[1] as u8,
            }))
        }
    }

    #[test]
    fn random_reads_redecode_only_their_blocks() {
        let input: Data = Arc::new(MemSource::new(vec![0; 10]));
        let src = BlockSource::new(input, Box::new(Toy), "toy");
        let sizes = [70_000u64, 1, 0, 200_000, 65_536, 3];
        let mut reference = Vec::new();
        let mut scratch = Vec::new();
        for (i, &n) in sizes.iter().enumerate() {
            let aux = [n, i as u64 + 1];
            let mut r = src.open(i as u64, aux).unwrap();
            src.begin_block(i as u64, aux);
            loop {
                match src.pump(&mut *r, 5000, &mut scratch, &mut |_| {}) {
                    Pumped::Progress => {}
                    Pumped::Stopped(p) => {
                        assert_eq!(p, Pull::End);
                        break;
                    }
                }
            }
            src.end_block(i as u64 + 1);
            reference.extend(std::iter::repeat_n(i as u8 + 1, n as usize));
        }
        src.finish();
        assert_eq!(src.available(), reference.len() as u64);
        let mut x = 12345u64;
        for i in 0..200 {
            if i % 2 == 0 {
                src.evict();
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let off = x % reference.len() as u64;
            let len = (x >> 20) % 150_000 + 1;
            let mut buf = vec![0; len as usize];
            let k = src.read_at(off, &mut buf).unwrap();
            let want = (len).min(reference.len() as u64 - off) as usize;
            assert_eq!(k, want);
            assert_eq!(buf[..k], reference[off as usize..off as usize + k]);
        }
        assert_eq!(src.origin(70_000).map(|o| (o.1, o.2)), Some((1, true)));
    }

    /// A stream read back through its blocks and chunk CRCs serves its
    /// bytes; with two blocks of one length swapped (each still a block
    /// its codec decodes), the chunks they make fail their recorded CRCs
    /// and no byte of them is served.
    #[test]
    fn restored_blocks_moved_fail_their_chunk_crcs() {
        let input: Data = Arc::new(MemSource::new(vec![0; 10]));
        let src = BlockSource::new(input.clone(), Box::new(Toy), "bzip2 stream");
        let mut scratch = Vec::new();
        for i in 0..3u64 {
            let aux = [100_000, i + 1];
            let mut r = src.open(i, aux).unwrap();
            src.begin_block(i, aux);
            while src.pump(&mut *r, 1 << 20, &mut scratch, &mut |_| {}) == Pumped::Progress {}
            src.end_block(i + 1);
        }
        src.finish();
        let Recipe::Blocks {
            blocks: Some((blocks, crcs)),
            ..
        } = src.recipe()
        else {
            panic!("a final stream has its blocks");
        };
        assert_eq!(crcs.len(), 5);
        let good = BlockSource::restore(
            input.clone(),
            Box::new(Toy),
            "bzip2 stream",
            blocks.clone(),
            crcs.clone(),
        )
        .unwrap();
        let mut buf = vec![0; 300_000];
        assert_eq!(good.read_at(0, &mut buf).unwrap(), 300_000);
        assert!(buf[..100_000].iter().all(|&b| b == 1) && buf[200_000..].iter().all(|&b| b == 3));
        let mut swapped = blocks.clone();
        (swapped[0].aux, swapped[2].aux) = (blocks[2].aux, blocks[0].aux);
        let forged = BlockSource::restore(
            input.clone(),
            Box::new(Toy),
            "bzip2 stream",
            swapped,
            crcs.clone(),
        )
        .unwrap();
        let err = forged.read_at(0, &mut buf).unwrap_err();
        assert!(
            err.to_string()
                .contains("the index does not match the file"),
            "{err}"
        );
        // The middle block was not moved: its whole chunks still read.
        assert!(
            forged
                .read_at(2 * CHUNK, &mut buf[..CHUNK as usize])
                .is_ok()
        );
        assert!(
            BlockSource::restore(
                input,
                Box::new(Toy),
                "bzip2 stream",
                blocks,
                crcs[1..].to_vec()
            )
            .is_err()
        );
    }
}
