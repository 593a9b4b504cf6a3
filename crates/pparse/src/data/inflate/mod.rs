//! Decoded deflate streams with random access and bounded memory.
//!
//! An [`InflateSource`] is the output of one or more raw deflate streams laid
//! end to end (the members of a gzip file, or one zip entry). It is filled by
//! an [`Inflater`] that a parser drives step by step, and it never holds the
//! decoded bytes itself:
//!
//! * what was just produced goes into the global [`ChunkCache`] in 64 KiB
//!   chunks, where parsers reading right behind the decoder find it;
//! * every 4 MiB of output, at a deflate block boundary, the decoder records a
//!   checkpoint (input byte, bit offset, 32 KiB window on disk), as zlib's
//!   `zran.c` does;
//! * a read of an evicted chunk resumes decoding from the nearest checkpoint
//!   before it: about 6 ms for a 4 MiB span at zlib-rs speed.
//!
//! So a 600 GB decoded stream costs a few MB of checkpoint table in RAM, a few
//! GB of windows on disk, and the cache budget.

mod codes;
mod marked;
pub(crate) mod members;
pub mod parallel;
pub mod resync;
mod settled;
mod sieve;
mod windows;
pub(crate) use windows::forget_in_child as windows_forget_in_child;
pub mod zlib;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use parking_lot::{Mutex, RwLock};

use super::cache::{Chunk, ChunkCache};
pub use super::checkpoints::{Checkpoint, Segment, StreamLayout, WindowSlot, WindowStore};
use super::growth;
use super::source::{Data, Recipe, Source};
use super::stats::Counted;
use members::Member;
use zlib::{Code, RawInflate, split_bit};

/// Cache granularity of decoded bytes.
pub const CHUNK: u64 = 64 * 1024;
/// Output distance between checkpoints.
pub const SPAN: u64 = 4 << 20;
/// Input read size for one decoder call. Buffers stay below glibc's mmap
/// threshold on purpose: a tar of 23,000 small `.gz` files makes as many
/// decoders, and large short-lived buffers fragmented the heap.
const IN_BUF: usize = 64 * 1024;
/// Output buffer of one decoder call.
const OUT_BUF: usize = 64 * 1024;

/// How many times the cache's budget of a stream decoded ahead on the
/// helper thread is kept out of the cache (see
/// `InflateSource::trim_ahead`): 48 MiB with the default 16 MiB cache,
/// the lead (`LEAD` in the gzip parser) and as much again for the
/// parsers of the members behind it. On the 10 GB tar.gz of
/// `peers/index.sh` nothing was decoded twice with 3, and 6 only cost
/// 96 MiB more.
pub const AHEAD_WINDOW: u64 = 3;

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);
/// Live replay decoders over all sources; above the limit they are dropped
/// after each read instead of kept for the next sequential read.
static LIVE_REPLAYS: AtomicUsize = AtomicUsize::new(0);
const MAX_LIVE_REPLAYS: usize = 16;

type Point = Checkpoint;

/// Labels a restored stream may carry (labels are static strings).
const LABELS: [&str; 2] = ["gzip stream", "deflate"];

struct Tail {
    /// Decoded offset of `buf[0]`, a multiple of [`CHUNK`].
    start: u64,
    buf: Vec<u8>,
}

/// A decoded deflate stream. See the module docs.
pub struct InflateSource {
    key: u64,
    /// The session's I/O counters, from `input`.
    counters: Counted,
    input: Data,
    segments: RwLock<Vec<Segment>>,
    tail: Mutex<Tail>,
    /// Bytes readers see (see [`InflateSource::stage`]).
    avail: AtomicU64,
    done: AtomicBool,
    /// Bytes the decoder has appended, and whether it has finished: ahead
    /// of `avail` and `done` only while the stream is staged.
    written: AtomicU64,
    written_done: AtomicBool,
    staged: AtomicBool,
    /// The end of the furthest read.
    read_to: AtomicU64,
    /// Full chunks a staged decoder appended past the furthest read, by
    /// index: kept out of the cache until a read passes them, so that a
    /// decoder running ahead does not evict what the parsers behind it have
    /// yet to read (in a least-recently-used cache, the bytes waiting to
    /// be read are the least recently used).
    ahead: Mutex<std::collections::VecDeque<(u64, Arc<Chunk>)>>,
    /// Boxed: most streams (a zip's small entries) are never re-read, and
    /// a decoder kept inline would cost each of them its size.
    replay: Mutex<Option<Box<Replay>>>,
    label: &'static str,
    span: u64,
    /// Where windows are read from when the stream was restored.
    store: Option<Arc<dyn WindowStore>>,
    /// It starts where decoding resumed after damage (see
    /// [`Inflater::recover`]); such a stream is not indexed.
    recovered: AtomicBool,
    /// CRC-32 of each chunk: computed as the first pass appends them, or
    /// read back from an index, where every chunk decoded again is checked
    /// against its CRC (see [`StreamLayout::chunk_crcs`]).
    chunk_crcs: Mutex<Vec<u32>>,
    /// Whether `chunk_crcs` came from an index and is checked.
    checks_chunks: bool,
    /// Whether the raw deflate data must end where the stream does (see
    /// [`InflateSource::checked`]): a read that reaches the end checks it.
    ends_exactly: bool,
}

impl InflateSource {
    /// A new, empty stream decoded from `input`. `label` names it in status
    /// lines ("gzip stream", "deflate").
    pub fn new(input: Data, label: &'static str) -> Arc<InflateSource> {
        Self::with_span(input, label, SPAN)
    }

    /// Like [`InflateSource::new`] with checkpoints every `span` output bytes.
    pub fn with_span(input: Data, label: &'static str, span: u64) -> Arc<InflateSource> {
        Arc::new(InflateSource {
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            counters: input.counters().cloned(),
            input,
            segments: RwLock::new(Vec::new()),
            tail: Mutex::new(Tail {
                start: 0,
                buf: Vec::new(),
            }),
            avail: AtomicU64::new(0),
            done: AtomicBool::new(false),
            written: AtomicU64::new(0),
            written_done: AtomicBool::new(false),
            staged: AtomicBool::new(false),
            read_to: AtomicU64::new(0),
            ahead: Mutex::new(std::collections::VecDeque::new()),
            replay: Mutex::new(None),
            label,
            span: span.max(1024),
            store: None,
            recovered: AtomicBool::new(false),
            chunk_crcs: Mutex::new(Vec::new()),
            checks_chunks: false,
            ends_exactly: false,
        })
    }

    /// The compressed bytes it is decoded from.
    pub fn input(&self) -> &Data {
        &self.input
    }

    /// A finished stream's checkpoints and length, for an index; `None`
    /// while it is still being decoded.
    pub fn layout(&self) -> Option<StreamLayout> {
        if !self.is_final() {
            return None;
        }
        Some(StreamLayout {
            label: self.label,
            span: self.span,
            len: self.available(),
            segments: self.segments.read().clone(),
            chunk_crcs: self.chunk_crcs.lock().clone(),
        })
    }

    /// The last checkpoint at or before decoded offset `out` that is at or
    /// after `from` (a member's start): its decoded offset and input bit.
    /// Checkpoints lie on block boundaries, so a decoder that needs no
    /// window can begin there (see `resync::Recover`).
    pub fn block_before(&self, from: u64, out: u64) -> Option<(u64, u64)> {
        let segs = self.segments.read();
        let k = segs
            .partition_point(|s| s.out_start <= out)
            .checked_sub(1)?;
        let points = &segs[k].points;
        let p = points[..points.partition_point(|p| p.out <= out)].last()?;
        if p.out < from {
            return None;
        }
        Some((p.out, (p.input.checked_mul(8)?).checked_sub(p.bits as u64)?))
    }

    /// The stream `layout` describes, decoded from `input` on demand: a
    /// read resumes at the nearest checkpoint, whose window `store` holds.
    /// The layout is checked for order and bounds, never trusted blindly.
    pub fn restore(
        input: Data,
        layout: StreamLayout,
        store: Arc<dyn WindowStore>,
    ) -> io::Result<Arc<InflateSource>> {
        let bad = |why: &str| io::Error::new(io::ErrorKind::InvalidData, why.to_string());
        Self::known_label(layout.label).ok_or_else(|| bad("unknown stream label"))?;
        let mut out = 0u64;
        for s in &layout.segments {
            if s.out_start != out || s.out_end < s.out_start {
                return Err(bad("segments out of order"));
            }
            let first = s
                .points
                .first()
                .ok_or_else(|| bad("segment without a start"))?;
            if first.out != s.out_start || first.window.is_some() || first.bits != 0 {
                return Err(bad("segment start is not a stream start"));
            }
            let mut last = first;
            for p in &s.points[1..] {
                if p.out <= last.out || p.out > s.out_end || p.input < last.input || p.bits > 7 {
                    return Err(bad("checkpoints out of order"));
                }
                if p.bits > 0 && p.input == 0 {
                    return Err(bad("checkpoint before the input"));
                }
                if p.window.is_none() {
                    return Err(bad("checkpoint without a window"));
                }
                last = p;
            }
            out = s.out_end;
        }
        if out != layout.len {
            return Err(bad("segments do not add up to the length"));
        }
        if !layout.chunk_crcs.is_empty()
            && layout.chunk_crcs.len() as u64 != layout.len.div_ceil(CHUNK)
        {
            return Err(bad("chunk checksums do not add up to the length"));
        }
        Ok(Self::restored(input, layout, Some(store)))
    }

    /// The raw deflate stream `input`, already decoded once and found to
    /// make exactly `len` bytes (a zip entry whose CRC and size matched),
    /// decoded again from its start when it is read. Until then it holds
    /// no decoder, buffer or checkpoint: a zip of a million small entries
    /// keeps none for entries nobody reads again.
    pub fn checked(input: Data, len: u64) -> Arc<InflateSource> {
        let layout = from_start("deflate", SPAN, len, 0, Vec::new());
        let mut s = Self::restored(input, layout, None);
        // The entry was checked to make exactly `len` bytes: a read that
        // reaches its end checks that the deflate data ends there too, so
        // a size changed in an index fails instead of cutting the bytes.
        if let Some(s) = Arc::get_mut(&mut s) {
            s.ends_exactly = true;
        }
        s
    }

    /// A finished stream read through `layout`, which is in order.
    fn restored(
        input: Data,
        layout: StreamLayout,
        store: Option<Arc<dyn WindowStore>>,
    ) -> Arc<InflateSource> {
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        Self::restored_as(key, input, layout, store)
    }

    /// [`InflateSource::restored`] under cache key `key`.
    fn restored_as(
        key: u64,
        input: Data,
        layout: StreamLayout,
        store: Option<Arc<dyn WindowStore>>,
    ) -> Arc<InflateSource> {
        let label = Self::known_label(layout.label).unwrap_or("deflate");
        Arc::new(InflateSource {
            key,
            counters: input.counters().cloned(),
            input,
            segments: RwLock::new(layout.segments),
            tail: Mutex::new(Tail {
                start: layout.len - layout.len % CHUNK,
                buf: Vec::new(),
            }),
            avail: AtomicU64::new(layout.len),
            done: AtomicBool::new(true),
            written: AtomicU64::new(layout.len),
            written_done: AtomicBool::new(true),
            staged: AtomicBool::new(false),
            read_to: AtomicU64::new(0),
            ahead: Mutex::new(std::collections::VecDeque::new()),
            replay: Mutex::new(None),
            label,
            span: layout.span.max(1024),
            checks_chunks: !layout.chunk_crcs.is_empty(),
            ends_exactly: false,
            chunk_crcs: Mutex::new(layout.chunk_crcs),
            store,
            recovered: AtomicBool::new(false),
        })
    }

    /// Checks chunk `idx` decoded again against the CRC the first pass
    /// recorded, when the stream was read back from an index that has them:
    /// an index whose checkpoints resume at the wrong place fails here
    /// instead of serving other bytes.
    fn check_chunk(&self, idx: u64, data: &[u8]) -> io::Result<()> {
        if !self.checks_chunks {
            return Ok(());
        }
        crate::data::cache::check_chunk_crc(&self.chunk_crcs, self.label, CHUNK, idx, data)
    }

    /// The static label spelled `s`, if a stream can carry it.
    pub fn known_label(s: &str) -> Option<&'static str> {
        LABELS.iter().copied().find(|l| *l == s)
    }

    /// Drops this stream's decoded chunks from the cache, so that the next
    /// reads must decode again from checkpoints.
    pub fn evict(&self) {
        ChunkCache::global().forget(self.key);
        self.ahead.lock().clear();
        *self.replay.lock() = None;
    }

    /// Marks the stream complete: no more output will be appended.
    pub fn finish(&self) {
        let mut t = self.tail.lock();
        if !t.buf.is_empty() {
            self.chunk_crcs.lock().push(crc32fast::hash(&t.buf));
            let idx = t.start / CHUNK;
            let data = Chunk::copy_of(&t.buf);
            ChunkCache::global().insert((self.key, idx), data);
            t.buf = Vec::new();
        }
        self.written_done.store(true, Ordering::Release);
        if !self.staged.load(Ordering::Acquire) {
            self.done.store(true, Ordering::Release);
            growth::grew(self);
        }
    }

    /// Moves what is kept ahead into the cache, which keeps what its budget
    /// allows: called once no parser reads behind the decoder any more, so
    /// that a session that stays open (the explorer, an index being
    /// written) does not hold the window for good. Bytes decoded later are
    /// kept ahead again.
    pub fn release_ahead(&self) {
        let kept = std::mem::take(&mut *self.ahead.lock());
        for (idx, c) in kept {
            ChunkCache::global().insert((self.key, idx), c);
        }
    }

    /// Stages the stream (`on`) while its decoder runs off the engine
    /// thread: what the decoder appends, and its end, reach readers only
    /// when [`InflateSource::publish`] is called, so that a parser never
    /// sees its input grow in the middle of a step. Unstaging publishes.
    pub fn stage(&self, on: bool) {
        self.staged.store(on, Ordering::Release);
        if !on {
            self.publish();
            if self.done.load(Ordering::Acquire) {
                self.release_ahead();
            }
        }
    }

    /// Shows readers what the decoder has appended (and its end) since the
    /// last call; returns whether anything changed.
    pub fn publish(&self) -> bool {
        let w = self.written.load(Ordering::Acquire);
        let end = self.written_done.load(Ordering::Acquire);
        let grew = self.avail.load(Ordering::Acquire) < w;
        let ended = end && !self.done.load(Ordering::Acquire);
        if grew {
            self.avail.store(w, Ordering::Release);
        }
        if ended {
            self.done.store(true, Ordering::Release);
        }
        if grew || ended {
            growth::grew(self);
        }
        grew || ended
    }

    /// Moves the oldest chunks kept ahead into the cache once more than
    /// [`AHEAD_WINDOW`] times the cache's budget is kept: the window holds
    /// the stream's most recent bytes for the parsers behind the decoder, which read them
    /// roughly in order (a tar's headers first, then the members it passed,
    /// by their own parsers), and which a least-recently-used cache would
    /// evict first.
    fn trim_ahead(&self) {
        let mut ahead = self.ahead.lock();
        let window = AHEAD_WINDOW * ChunkCache::global().budget() as u64;
        while ahead.len() as u64 * CHUNK > window
            && let Some((idx, c)) = ahead.pop_front()
        {
            ChunkCache::global().insert((self.key, idx), c);
        }
    }

    /// A chunk kept ahead (see `ahead`).
    fn chunk_ahead(&self, idx: u64) -> Option<Arc<Chunk>> {
        let ahead = self.ahead.lock();
        let at = ahead.binary_search_by_key(&idx, |(i, _)| *i).ok()?;
        Some(ahead[at].1.clone())
    }

    /// Counts every byte appended so far as read: the engine calls it when
    /// every parser waits, so that a decoder held back by its lead (see
    /// [`InflateSource::lead`]) goes on (a parser may wait for the end of a
    /// member further away than the lead).
    pub fn pass_reads(&self) {
        let w = self.written();
        self.read_to.fetch_max(w, Ordering::Relaxed);
    }

    /// Bytes appended past the furthest byte read: how far a decoder is
    /// ahead of the parsers reading its stream.
    pub fn lead(&self) -> u64 {
        self.written()
            .saturating_sub(self.read_to.load(Ordering::Relaxed))
    }

    /// Bytes the decoder has appended (readers may see fewer, see
    /// [`InflateSource::stage`]).
    fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    fn begin_segment(&self, input: u64) {
        self.begin_segment_at(input, 0, None);
    }

    fn begin_segment_at(&self, input: u64, bits: u8, window: Option<WindowSlot>) {
        let out = self.written();
        let mut segs = self.segments.write();
        // Most streams have one segment: room for four (a vector's first
        // growth) would cost each entry of a big zip 120 bytes.
        segs.reserve_exact(1);
        segs.push(Segment {
            out_start: out,
            out_end: out,
            points: vec![Point {
                out,
                input,
                bits,
                window,
            }],
        });
    }

    fn append(&self, mut data: &[u8]) {
        let mut t = self.tail.lock();
        let new_avail = self.written() + data.len() as u64;
        while !data.is_empty() {
            let room = CHUNK as usize - t.buf.len();
            let take = room.min(data.len());
            t.buf.extend_from_slice(&data[..take]);
            data = &data[take..];
            if t.buf.len() == CHUNK as usize {
                let idx = t.start / CHUNK;
                self.chunk_crcs.lock().push(crc32fast::hash(&t.buf));
                // The full buffer becomes the chunk, not a copy of it: every
                // decoded byte is copied once fewer. The stream is long, so
                // the next buffer is made whole at once.
                let buf = std::mem::replace(&mut t.buf, Vec::with_capacity(CHUNK as usize));
                let full = Arc::new(Chunk::from_vec(buf));
                if self.staged.load(Ordering::Acquire) {
                    self.ahead.lock().push_back((idx, full));
                    self.trim_ahead();
                } else {
                    ChunkCache::global().insert((self.key, idx), full);
                }
                t.start += CHUNK;
            }
        }
        if let Some(s) = self.segments.write().last_mut() {
            s.out_end = new_avail;
        }
        self.written.store(new_avail, Ordering::Release);
        if !self.staged.load(Ordering::Acquire) {
            self.avail.store(new_avail, Ordering::Release);
            growth::grew(self);
        }
    }

    fn add_point(&self, p: Point) {
        if let Some(s) = self.segments.write().last_mut() {
            s.points.push(p);
        }
    }

    /// Copies the part of `[offset, offset+buf.len())` that lies in the
    /// producer's unfinished chunk; returns bytes copied (0 if elsewhere).
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

    fn chunk(&self, idx: u64) -> io::Result<Arc<Chunk>> {
        if let Some(c) = ChunkCache::global().get((self.key, idx)) {
            return Ok(c);
        }
        if let Some(c) = self.chunk_ahead(idx) {
            return Ok(c);
        }
        let mut guard = self.replay.lock();
        // Another reader may have decoded it while we waited.
        if let Some(c) = ChunkCache::global().get((self.key, idx)) {
            return Ok(c);
        }
        let target = idx * CHUNK;
        let reuse = matches!(&*guard, Some(r) if r.acc_start == target
            || (r.pos <= target && target - r.pos <= self.span));
        if !reuse {
            *guard = Some(Box::new(Replay::start(self, target)?));
        }
        let r = guard.as_mut().expect("replay set above");
        let result = r.produce_until(self, idx);
        let at_end = self.done.load(Ordering::Acquire) && r.pos >= self.available();
        if result.is_err() || at_end || LIVE_REPLAYS.load(Ordering::Relaxed) > MAX_LIVE_REPLAYS {
            *guard = None;
        }
        result
    }
}

impl WindowStore for InflateSource {
    /// The window of checkpoint `slot` (see [`Checkpoint::window`]).
    fn read(&self, slot: WindowSlot, out: &mut Vec<u8>) -> io::Result<()> {
        match &self.store {
            Some(store) => store.read(slot, out),
            None => windows::get(slot, out),
        }
    }
}

impl Drop for InflateSource {
    fn drop(&mut self) {
        ChunkCache::global().forget(self.key);
    }
}

impl Source for InflateSource {
    fn available(&self) -> u64 {
        self.avail.load(Ordering::Acquire)
    }
    fn is_final(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let n = super::cache::read_chunked(
            (self.key, self.counters.as_deref()),
            CHUNK,
            self.available(),
            offset,
            buf,
            |pos, b| self.read_tail(pos, b),
            |idx| self.chunk(idx),
        )?;
        self.read_to.fetch_max(offset + n as u64, Ordering::Relaxed);
        Ok(n)
    }
    fn describe(&self) -> &'static str {
        self.label
    }
    fn counters(&self) -> Option<&Arc<super::stats::Counters>> {
        self.counters.as_ref()
    }
    fn origin(&self, offset: u64) -> Option<(Data, u64, bool)> {
        let segs = self.segments.read();
        let seg = segs.iter().rev().find(|s| s.out_start <= offset)?;
        let p = seg.points.iter().rev().find(|p| p.out <= offset)?;
        Some((self.input.clone(), p.input, p.out == offset))
    }
    fn settled(&self) -> Option<Data> {
        self.compact()
    }
    fn recipe(&self) -> Recipe<'_> {
        if self.recovered.load(Ordering::Relaxed) {
            return Recipe::Opaque;
        }
        Recipe::Inflate {
            input: &self.input,
            stream: InflateSource::layout(self),
            windows: self,
        }
    }
}

/// The layout of a stream `len` bytes long whose one checkpoint is its
/// start, at input offset `input`: what a decoder needs to make it again
/// from there (a zip entry checked once, a settled stream).
fn from_start(
    label: &'static str,
    span: u64,
    len: u64,
    input: u64,
    chunk_crcs: Vec<u32>,
) -> StreamLayout {
    StreamLayout {
        label,
        span,
        len,
        segments: vec![Segment {
            out_start: 0,
            out_end: len,
            points: vec![Checkpoint {
                out: 0,
                input,
                bits: 0,
                window: None,
            }],
        }],
        chunk_crcs,
    }
}

/// Buffered input for a decoder: bytes `buf[lo..hi]` are input offset `pos`.
struct InBuf {
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    pos: u64,
    /// The next read's size: it starts small and doubles to [`IN_BUF`],
    /// so that a stream of 50 bytes (one of thousands of gzip members in
    /// a row) reads about its own bytes, not 64 KiB after them.
    next: usize,
}

/// The first read of an [`InBuf`].
const IN_FIRST: usize = 512;

impl InBuf {
    /// An empty buffer: it grows (to [`IN_BUF`] at most) to what the input
    /// has, so that a stream of 30 bytes (a zip of a million small entries)
    /// does not clear 64 KiB.
    fn new(pos: u64) -> InBuf {
        InBuf {
            buf: Vec::new(),
            lo: 0,
            hi: 0,
            pos,
            next: IN_FIRST,
        }
    }
    fn is_empty(&self) -> bool {
        self.lo == self.hi
    }
    /// Refills from `input` if empty; returns false if nothing is available.
    fn refill(&mut self, input: &dyn Source) -> io::Result<bool> {
        if !self.is_empty() {
            return Ok(true);
        }
        let avail = input.available();
        if self.pos >= avail {
            return Ok(false);
        }
        let want = (avail - self.pos).min(self.next as u64) as usize;
        self.next = (self.next * 2).min(IN_BUF);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let n = input.read_at(self.pos, &mut self.buf[..want])?;
        self.lo = 0;
        self.hi = n;
        Ok(n > 0)
    }
    fn bytes(&self) -> &[u8] {
        &self.buf[self.lo..self.hi]
    }
    fn consume(&mut self, n: usize) {
        self.lo += n;
        self.pos += n as u64;
    }
    fn reset(&mut self, pos: u64) {
        self.lo = 0;
        self.hi = 0;
        self.pos = pos;
    }
}

/// What one [`Inflater::run`] call ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InflateEvent {
    /// The output budget was used; call again.
    Progress,
    /// The input has no more bytes yet but is still growing.
    NeedInput,
    /// The deflate stream ended; `in_end` is the input offset just after it.
    End {
        /// Input offset just after the stream.
        in_end: u64,
    },
    /// The input ended for good inside the deflate stream.
    Truncated {
        /// Where the input ended.
        in_end: u64,
    },
    /// Invalid deflate data, detected at or just before input offset `at`.
    Error {
        /// Input offset.
        at: u64,
        /// zlib's message.
        message: String,
    },
    /// The stream decodes to more than the limit set with
    /// [`Inflater::set_limit`]; decoding stopped at the limit.
    Overflow {
        /// Input offset.
        at: u64,
        /// What the limit was.
        message: String,
    },
}

/// The producer side: decodes one raw deflate stream from `input` into an
/// [`InflateSource`], taking checkpoints as it goes.
pub struct Inflater {
    src: Arc<InflateSource>,
    z: RawInflate,
    inbuf: InBuf,
    out: Vec<u8>,
    crc: crc32fast::Hasher,
    produced: u64,
    last_point: u64,
    released: u64,
    window: Vec<u8>,
    limit: Option<u64>,
    /// Output offsets where the last [`BLOCK_RING`] deflate blocks began,
    /// oldest first (see [`Inflater::suspect_from`]).
    block_starts: std::collections::VecDeque<u64>,
    /// Decoding after damage, until the window holds no unknown byte.
    rec: Option<Box<resync::Recover>>,
    /// Unknown output ranges found and not yet taken.
    unknown: Vec<(u64, u64)>,
    /// Workers decoding pieces ahead (see [`parallel`]), once started.
    ahead: Option<Box<parallel::Ahead>>,
    /// Whether starting them was considered (at the first run).
    ahead_tried: bool,
    /// How to decode ahead: `None` for [`parallel::Plan::default_now`].
    plan: Option<parallel::Plan>,
    /// The input offset the stream (or the decoding after a resync)
    /// began at.
    began: u64,
    /// A gzip member a worker decoded ahead, and how much of it is
    /// appended (see [`Inflater::new_member`]).
    made: Option<Box<(Member, usize)>>,
    /// A piece taken from them and being appended.
    taken: Option<Taken>,
}

/// A piece from the workers, being appended at a run's pace.
struct Taken {
    piece: Box<parallel::Piece>,
    /// The 32 KiB of output before the piece.
    before: Vec<u8>,
    /// Bytes of it appended.
    pos: usize,
    /// Its block ends passed.
    blocks: usize,
}

impl Taken {
    /// The 32 KiB of output before the piece's byte `at`.
    fn window_at(&self, at: usize) -> Vec<u8> {
        let bytes = &self.piece.bytes()[..at];
        let from_bytes = bytes.len().min(WINDOW_LEN);
        let mut w = Vec::with_capacity(WINDOW_LEN);
        let from_before = (WINDOW_LEN - from_bytes).min(self.before.len());
        w.extend_from_slice(&self.before[self.before.len() - from_before..]);
        w.extend_from_slice(&bytes[bytes.len() - from_bytes..]);
        w
    }
}

const WINDOW_LEN: usize = zlib::WINDOW;

/// Block starts remembered for [`Inflater::suspect_from`].
const BLOCK_RING: usize = 64;
/// Output of a block that random bytes are unlikely to have made.
const LONG_BLOCK: u64 = 16 << 10;

impl Inflater {
    /// Starts a new deflate stream at input offset `start`; its output is
    /// appended to `src` after what is already there.
    pub fn new(src: Arc<InflateSource>, start: u64) -> Inflater {
        src.begin_segment(start);
        Inflater::new_in_segment(src, start)
    }

    /// Starts a gzip member's deflate stream at input offset `start`, as
    /// [`Inflater::new`] does; `made`, the member as a worker decoded it
    /// ahead (`members.rs`), is appended instead of decoding it here when
    /// it starts at `start` and is shorter than a checkpoint span (decoding
    /// here would make no checkpoint in it either).
    pub(crate) fn new_member(
        src: Arc<InflateSource>,
        start: u64,
        made: Option<Member>,
    ) -> Inflater {
        let mut me = Inflater::new(src, start);
        if let Some(m) = made
            && m.body == start
            && (m.bytes.len() as u64) < me.src.span
        {
            me.made = Some(Box::new((m, 0)));
            me.ahead_tried = true;
        }
        me
    }

    /// Appends the member a worker decoded, up to `budget` bytes at a
    /// time, and ends where it ended.
    fn run_made(&mut self, budget: u64) -> InflateEvent {
        let Some(made) = &mut self.made else {
            return InflateEvent::Progress;
        };
        let (m, pos) = &mut **made;
        let n = (m.bytes.len() - *pos).min(budget.min(usize::MAX as u64) as usize);
        let bytes = &m.bytes[*pos..*pos + n];
        self.crc.update(bytes);
        self.src.append(bytes);
        self.produced += n as u64;
        *pos += n;
        if *pos < m.bytes.len() {
            return InflateEvent::Progress;
        }
        let in_end = m.in_end;
        self.made = None;
        self.inbuf.reset(in_end);
        InflateEvent::End { in_end }
    }

    /// Starts decoding `src`'s input at the block that begins at input bit
    /// `bit`, found after damage ([`resync::find_block`]): the 32 KiB
    /// before it are unknown, so the bytes that copy them are zeros and are
    /// listed by [`Inflater::take_unknown`]. `src` is not indexed.
    pub fn recover(src: Arc<InflateSource>, bit: u64) -> Inflater {
        let (input, bits) = split_bit(bit);
        src.recovered.store(true, Ordering::Relaxed);
        src.begin_segment_at(input, bits, Some(WindowSlot::UNKNOWN));
        let rec = resync::Recover::new(src.input.clone(), bit);
        let mut me = Inflater::new_in_segment(src, input);
        me.rec = Some(Box::new(rec));
        me
    }

    fn new_in_segment(src: Arc<InflateSource>, start: u64) -> Inflater {
        Inflater {
            src,
            z: RawInflate::new(),
            inbuf: InBuf::new(start),
            // Sized at the first run, to the limit when there is one.
            out: Vec::new(),
            crc: crc32fast::Hasher::new(),
            produced: 0,
            last_point: 0,
            released: start,
            window: Vec::new(),
            limit: None,
            block_starts: std::collections::VecDeque::from([0]),
            rec: None,
            unknown: Vec::new(),
            ahead: None,
            ahead_tried: false,
            began: start,
            made: None,
            plan: None,
            taken: None,
        }
    }

    /// Output ranges (offsets in this stream's output) of bytes that are
    /// unknown, found since the last call: back-references into the window
    /// lost before a resync point. Merged when close, so a few known bytes
    /// may be listed; an unknown one is never left out.
    pub fn take_unknown(&mut self) -> Vec<(u64, u64)> {
        std::mem::take(&mut self.unknown)
    }

    /// Whether bytes from here on are exact: not (or no longer) decoding
    /// with markers for an unknown window.
    pub fn exact(&self) -> bool {
        self.rec.is_none()
    }

    /// Where bytes that cannot be vouched for begin, after invalid data was
    /// found. Damage is noticed some way after it begins: random bytes
    /// decode as garbage through the block they hit (a complete Huffman code
    /// accepts any bits) until an end-of-block code, and the blocks they then
    /// seem to start are short (most are fixed-Huffman ones, ended by an
    /// impossible code after a few hundred symbols). So the suspect bytes
    /// begin in the last long block, or in the one before it when the damage
    /// took that block's header: suspect from the start of the block before
    /// the last one of at least `LONG_BLOCK` bytes.
    pub fn suspect_from(&self) -> u64 {
        let starts = &self.block_starts;
        let mut end = self.produced;
        for i in (0..starts.len()).rev() {
            if end - starts[i] >= LONG_BLOCK {
                return starts[i.saturating_sub(1)];
            }
            end = starts[i];
        }
        starts.front().copied().unwrap_or(0)
    }

    /// Stops decoding after `limit` bytes: a declared size that damaged or
    /// hostile data must not exceed (decompression bombs).
    pub fn set_limit(&mut self, limit: u64) {
        self.limit = Some(limit);
    }

    /// Decodes ahead on `plan.threads` threads (see [`parallel`]) rather
    /// than as `--threads` says; before the first run.
    pub fn set_plan(&mut self, plan: parallel::Plan) {
        self.plan = Some(plan);
    }

    /// Pieces decoded ahead that were taken, and those decoded here
    /// instead (their start was no block start the decoding here reached,
    /// or they did not decode): what tests check the parallel path by.
    pub fn pieces(&self) -> (u64, u64) {
        self.ahead.as_ref().map_or((0, 0), |a| (a.taken, a.passed))
    }

    /// Holds the workers decoding ahead (`on`) while the caller waits
    /// for the readers of this stream instead of decoding: they begin no
    /// new piece until it decodes again (see `parallel::Ahead::pause`).
    pub fn hold_workers(&self, on: bool) {
        if let Some(a) = &self.ahead {
            a.pause(on);
        }
    }

    /// Whether workers were started for this stream.
    pub fn has_workers(&self) -> bool {
        self.ahead.is_some()
    }

    /// The stream it appends to.
    pub fn source(&self) -> &Arc<InflateSource> {
        &self.src
    }

    /// Bytes produced by this stream so far.
    pub fn produced(&self) -> u64 {
        self.produced
    }
    /// CRC-32 of the bytes produced so far.
    pub fn crc(&self) -> u32 {
        self.crc.clone().finalize()
    }
    /// Input offset of the next byte the decoder will consume.
    pub fn input_pos(&self) -> u64 {
        self.inbuf.pos
    }

    /// Decodes until about `budget` bytes were produced, or an event.
    pub fn run(&mut self, budget: u64) -> InflateEvent {
        let started = std::time::Instant::now();
        let before = self.produced;
        let event = self.run_inner(budget);
        super::stats::decoded(
            self.src.counters.as_deref(),
            self.produced - before,
            started.elapsed(),
            false,
        );
        event
    }

    /// Starts workers (see [`parallel`]) once the stream has shown itself
    /// long enough for them, at most once.
    fn try_ahead(&mut self, input: &Data) {
        if self.limit.is_some() {
            self.ahead_tried = true;
            return;
        }
        let plan = self.plan.unwrap_or_else(parallel::Plan::default_now);
        // Only once the stream has shown itself longer than a quarter
        // piece (1 MiB): in a file of many small gzip members (bgzip's,
        // 64 KiB each), workers started at every member would look for
        // block starts in pieces that the member's end makes useless.
        if plan.threads < 2 || self.inbuf.pos.saturating_sub(self.began) >= plan.piece / 4 {
            self.ahead_tried = true;
            self.ahead = parallel::Ahead::start(input, self.inbuf.pos, plan).map(Box::new);
        }
    }

    fn run_inner(&mut self, budget: u64) -> InflateEvent {
        if self.made.is_some() {
            return self.run_made(budget);
        }
        if self.rec.is_some() {
            match self.run_recover(budget) {
                Some(e) => return e,
                None if self.rec.is_some() => return InflateEvent::Progress,
                None => {} // exact again: zlib goes on
            }
        }
        let input = self.src.input.clone();
        let mut made = 0u64;
        loop {
            if made >= budget {
                return InflateEvent::Progress;
            }
            if !self.ahead_tried {
                self.try_ahead(&input);
            }
            if self.taken.is_some() {
                match self.append_taken(budget - made) {
                    (_, Some(event)) => {
                        if !matches!(event, InflateEvent::Progress)
                            && let Some(a) = &self.ahead
                        {
                            a.stop();
                        }
                        return event;
                    }
                    (n, None) => {
                        made += n;
                        continue;
                    }
                }
            }
            if let Err(e) = self.inbuf.refill(&*input) {
                return InflateEvent::Error {
                    at: self.inbuf.pos,
                    message: format!("read error: {e}"),
                };
            }
            let was_empty = self.inbuf.is_empty();
            let room = match self.limit {
                Some(l) if self.produced >= l => {
                    // At the limit: the stream must end right here.
                    let mut probe = [0u8; 1];
                    let s = self.z.inflate(self.inbuf.bytes(), &mut probe, false);
                    self.inbuf.consume(s.consumed);
                    match s.code {
                        Code::StreamEnd if s.produced == 0 => {
                            return InflateEvent::End {
                                in_end: self.inbuf.pos,
                            };
                        }
                        _ if s.produced > 0 => {
                            return InflateEvent::Overflow {
                                at: self.inbuf.pos,
                                message: format!("decodes to more than the expected {l} bytes"),
                            };
                        }
                        Code::DataError => {
                            return InflateEvent::Error {
                                at: self.inbuf.pos,
                                message: self.z.message(),
                            };
                        }
                        _ if s.consumed > 0 => continue,
                        _ => match self.starved(&*input) {
                            Some(event) => return event,
                            None => continue,
                        },
                    }
                }
                Some(l) => (l - self.produced).min(OUT_BUF as u64) as usize,
                None => OUT_BUF,
            };
            if self.out.len() < room {
                self.out.resize(room, 0);
            }
            let s = self
                .z
                .inflate(self.inbuf.bytes(), &mut self.out[..room], true);
            self.inbuf.consume(s.consumed);
            if s.produced > 0 {
                let bytes = &self.out[..s.produced];
                self.crc.update(bytes);
                self.src.append(bytes);
                self.produced += s.produced as u64;
                made += s.produced as u64;
            }
            if self.z.at_block_boundary() {
                if self.block_starts.len() == BLOCK_RING {
                    self.block_starts.pop_front();
                }
                self.block_starts.push_back(self.produced);
                if self.produced - self.last_point >= self.src.span && s.code == Code::Ok {
                    self.checkpoint();
                }
                if let Some(ahead) = &mut self.ahead {
                    let bit = self.inbuf.pos * 8 - (self.z.data_type() & 7) as u64;
                    if let Some(piece) = ahead.at_boundary(bit) {
                        let mut before = Vec::new();
                        self.z.dictionary(&mut before);
                        let mut piece = piece;
                        if piece.resolve(&before) {
                            piece.crc_after(&mut self.crc);
                            self.taken = Some(Taken {
                                piece,
                                before,
                                pos: 0,
                                blocks: 0,
                            });
                            continue;
                        }
                    }
                }
            }
            if !matches!(s.code, Code::Ok | Code::BufError)
                && let Some(a) = &self.ahead
            {
                a.stop();
            }
            if self.inbuf.pos - self.released >= crate::data::source::RELEASE_STEP {
                input.release(self.released, self.inbuf.pos);
                self.released = self.inbuf.pos;
            }
            match s.code {
                Code::StreamEnd => {
                    return InflateEvent::End {
                        in_end: self.inbuf.pos,
                    };
                }
                Code::DataError => {
                    return InflateEvent::Error {
                        at: self.inbuf.pos,
                        message: self.z.message(),
                    };
                }
                Code::Ok | Code::BufError => {
                    if s.consumed == 0 && s.produced == 0 {
                        if !was_empty {
                            return InflateEvent::Error {
                                at: self.inbuf.pos,
                                message: "decoder made no progress".into(),
                            };
                        }
                        match self.starved(&*input) {
                            Some(event) => return event,
                            None => continue,
                        }
                    }
                }
            }
        }
    }

    /// Decodes with the unknown-window decoder until the budget is used, an
    /// event, or the window is exact again at a block end (`None` with
    /// `rec` cleared: zlib takes over from there).
    fn run_recover(&mut self, budget: u64) -> Option<InflateEvent> {
        let mut made = 0u64;
        let mut out = Vec::with_capacity(OUT_BUF);
        loop {
            let rec = self.rec.as_mut()?;
            if made >= budget {
                return None;
            }
            let room = match self.limit {
                Some(l) => (l.saturating_sub(self.produced) as usize).min(OUT_BUF),
                None => OUT_BUF,
            };
            out.clear();
            let ev = match rec.run(&mut out, room.max(1)) {
                Ok(ev) => ev,
                Err(e) => {
                    return Some(InflateEvent::Error {
                        at: rec.bit() / 8,
                        message: format!("read error: {e}"),
                    });
                }
            };
            if let Some(l) = self.limit
                && self.produced + out.len() as u64 > l
            {
                out.truncate(l.saturating_sub(self.produced) as usize);
            }
            let n = out.len() as u64;
            self.unknown.extend(rec.take_unknown(false));
            self.crc.update(&out);
            self.src.append(&out);
            self.produced += n;
            made += n;
            if let Some(l) = self.limit
                && self.produced >= l
                && ev == resync::Event::Progress
            {
                return Some(InflateEvent::Overflow {
                    at: rec.bit() / 8,
                    message: format!("decodes to more than the expected {l} bytes"),
                });
            }
            match ev {
                resync::Event::Progress => {}
                resync::Event::Block => {
                    if self.block_starts.len() == BLOCK_RING {
                        self.block_starts.pop_front();
                    }
                    self.block_starts.push_back(self.produced);
                    let (input, bits) = split_bit(rec.bit());
                    let clean = rec.clean();
                    let due = clean || self.produced - self.last_point >= self.src.span;
                    if due {
                        // The window as a replay from the segment start
                        // (zlib with a window of zeros) makes it.
                        self.window = rec.window();
                    }
                    if clean {
                        self.unknown.extend(rec.take_unknown(true));
                    }
                    if due {
                        self.point_at(input, bits);
                    }
                    if clean {
                        let window = std::mem::take(&mut self.window);
                        let resumed = self.resume_at(input, bits, &window);
                        self.window = window;
                        if let Err(e) = resumed {
                            return Some(e);
                        }
                        self.released = self.released.min(input);
                        self.rec = None;
                        return None;
                    }
                }
                resync::Event::End(in_end) => {
                    self.unknown.extend(rec.take_unknown(true));
                    return Some(InflateEvent::End { in_end });
                }
                resync::Event::NeedInput => return Some(InflateEvent::NeedInput),
                resync::Event::Truncated => {
                    self.unknown.extend(rec.take_unknown(true));
                    return Some(InflateEvent::Truncated {
                        in_end: self.src.input.available(),
                    });
                }
                resync::Event::Error(bit, why) => {
                    self.unknown.extend(rec.take_unknown(true));
                    return Some(InflateEvent::Error {
                        at: bit.div_ceil(8),
                        message: why.to_string(),
                    });
                }
            }
        }
    }

    /// Appends up to `budget` bytes of the piece taken from the workers,
    /// passing its block ends as decoding them here would (checkpoints
    /// where they are due), and at its end resumes zlib after it. Returns
    /// the bytes appended, and an event if the run ends with one.
    fn append_taken(&mut self, budget: u64) -> (u64, Option<InflateEvent>) {
        let Some(mut t) = self.taken.take() else {
            return (0, None);
        };
        let mut made = 0u64;
        loop {
            // Block ends at this offset.
            while let Some(&(at, bit)) = t.piece.blocks.get(t.blocks)
                && at == t.pos
            {
                t.blocks += 1;
                if self.block_starts.len() == BLOCK_RING {
                    self.block_starts.pop_front();
                }
                self.block_starts.push_back(self.produced);
                if self.produced - self.last_point >= self.src.span {
                    self.window = t.window_at(t.pos);
                    let (input, bits) = split_bit(bit);
                    self.point_at(input, bits);
                }
            }
            let len = t.piece.bytes().len();
            if t.pos == len {
                break;
            }
            if made >= budget {
                self.taken = Some(t);
                return (made, Some(InflateEvent::Progress));
            }
            let next = t.piece.blocks.get(t.blocks).map_or(len, |b| b.0);
            let to = next.min(t.pos + OUT_BUF);
            let bytes = &t.piece.bytes()[t.pos..to];
            super::stats::decoded_ahead(self.src.counters.as_deref(), bytes.len() as u64);
            self.src.append(bytes);
            self.produced += bytes.len() as u64;
            made += bytes.len() as u64;
            t.pos = to;
        }
        let end = t.piece.end;
        let ended = t.piece.ended;
        let window = t.window_at(t.piece.bytes().len());
        if let Some(a) = &self.ahead {
            a.recycle(*t.piece);
        }
        if ended {
            self.inbuf.reset(end);
            return (made, Some(InflateEvent::End { in_end: end }));
        }
        let (input, bits) = split_bit(end);
        // The file pages behind are done with, whether the next piece is
        // taken too or zlib resumes (pieces taken in a row never reach the
        // release in the serial loop).
        if input - self.released >= crate::data::source::RELEASE_STEP {
            self.src.input.release(self.released, input);
            self.released = input;
        }
        // The next piece may start right here.
        if let Some(mut piece) = self.ahead.as_mut().and_then(|a| a.at_boundary(end))
            && piece.resolve(&window)
        {
            piece.crc_after(&mut self.crc);
            self.taken = Some(Taken {
                piece,
                before: window,
                pos: 0,
                blocks: 0,
            });
            return (made, None);
        }
        if let Err(e) = self.resume_at(input, bits, &window) {
            return (made, Some(e));
        }
        (made, None)
    }

    /// Makes zlib decode on from a block start (`input` and the bits of
    /// the byte before it still to read), with `window` before it.
    fn resume_at(&mut self, input: u64, bits: u8, window: &[u8]) -> Result<(), InflateEvent> {
        self.z = RawInflate::new();
        if bits > 0 {
            let mut b = [0u8; 1];
            let ok = super::source::read_exact_at(&*self.src.input, input - 1, &mut b);
            if !matches!(ok, Ok(true)) {
                return Err(InflateEvent::Error {
                    at: input,
                    message: "input unreadable at the resync point".into(),
                });
            }
            self.z.prime(bits, b[0] >> (8 - bits));
        }
        self.z.set_dictionary(window);
        self.inbuf.reset(input);
        Ok(())
    }

    /// The decoder needs bytes it does not have: `None` if more input has
    /// arrived meanwhile, else truncation (input final) or a wait.
    fn starved(&self, input: &dyn Source) -> Option<InflateEvent> {
        // Read "final" first: if it is set, `available` is the final length.
        let fin = input.is_final();
        if input.available() > self.inbuf.pos {
            return None;
        }
        Some(if fin {
            InflateEvent::Truncated {
                in_end: self.inbuf.pos,
            }
        } else {
            InflateEvent::NeedInput
        })
    }

    fn checkpoint(&mut self) {
        self.z.dictionary(&mut self.window);
        let bits = (self.z.data_type() & 7) as u8;
        self.point_at(self.inbuf.pos, bits);
    }

    /// Records a checkpoint here whose window is `self.window`.
    fn point_at(&mut self, input: u64, bits: u8) {
        let Ok(w) = windows::put(&self.window) else {
            return; // no checkpoint: reads just resume from an earlier one
        };
        self.src.add_point(Point {
            out: self.src.written(),
            input,
            bits,
            window: Some(w),
        });
        self.last_point = self.produced;
    }
}

/// A decoder re-reading an already produced stream from a checkpoint, kept
/// between reads so that sequential reads continue where the last one ended.
struct Replay {
    seg: usize,
    z: RawInflate,
    inbuf: InBuf,
    /// Decoded offset of the next byte the decoder produces.
    pos: u64,
    /// Decoded offset where the bytes in `acc` start.
    acc_start: u64,
    acc: Vec<u8>,
    out: Vec<u8>,
    /// Input before this offset has been handed back ([`Source::release`]).
    released: u64,
}

impl Replay {
    /// Positions a decoder at the last checkpoint at or before `target`.
    fn start(src: &InflateSource, target: u64) -> io::Result<Replay> {
        let segs = src.segments.read();
        let seg = segs
            .iter()
            .rposition(|s| {
                s.out_start <= target && (target < s.out_end || s.out_start == s.out_end)
            })
            .or_else(|| segs.iter().rposition(|s| s.out_start <= target))
            .ok_or_else(|| io::Error::other(format!("no decoded data at {target:#x}")))?;
        let s = &segs[seg];
        let best = s.points.iter().rposition(|p| p.out <= target).unwrap_or(0);
        drop(segs);
        // A window that cannot be read back (a damaged index) costs time,
        // not bytes: decoding resumes at an earlier checkpoint instead,
        // down to the stream's start, which needs no window.
        let mut tried = best;
        let (p, z) = loop {
            let p = src.segments.read()[seg].points[tried];
            match Self::decoder_at(src, &p) {
                Ok(z) => break (p, z),
                Err(e) if tried == 0 || p.window.is_none() => return Err(e),
                Err(_) => tried -= 1,
            }
        };
        let start_in = p.input;
        LIVE_REPLAYS.fetch_add(1, Ordering::Relaxed);
        Ok(Replay {
            seg,
            z,
            inbuf: InBuf::new(start_in),
            pos: p.out,
            acc_start: target - target % CHUNK,
            acc: Vec::with_capacity(CHUNK as usize),
            out: vec![0; CHUNK as usize],
            released: start_in,
        })
    }

    /// A decoder ready to resume at checkpoint `p`.
    fn decoder_at(src: &InflateSource, p: &Point) -> io::Result<RawInflate> {
        let mut z = RawInflate::new();
        if p.bits > 0 {
            let mut b = [0u8; 1];
            if !super::source::read_exact_at(&*src.input, p.input - 1, &mut b)? {
                return Err(io::Error::other("checkpoint input unavailable"));
            }
            z.prime(p.bits, b[0] >> (8 - p.bits));
        }
        if p.window == Some(WindowSlot::UNKNOWN) {
            if !z.set_dictionary(&[0u8; resync::WINDOW]) {
                return Err(io::Error::other("cannot set an unknown window"));
            }
        } else if let Some(w) = p.window {
            let mut win = Vec::new();
            WindowStore::read(src, w, &mut win)?;
            if !z.set_dictionary(&win) {
                return Err(io::Error::other("cannot restore decoder window"));
            }
        }
        Ok(z)
    }

    /// Decodes forward until chunk `idx` is complete (or the stream ends),
    /// caching every chunk it completes on the way; returns chunk `idx`.
    fn produce_until(&mut self, src: &InflateSource, idx: u64) -> io::Result<Arc<Chunk>> {
        let started = std::time::Instant::now();
        let before = self.pos;
        let r = self.produce_inner(src, idx);
        super::stats::decoded(
            src.counters.as_deref(),
            self.pos - before,
            started.elapsed(),
            true,
        );
        r
    }

    fn produce_inner(&mut self, src: &InflateSource, idx: u64) -> io::Result<Arc<Chunk>> {
        let target = idx * CHUNK;
        if self.acc_start != target {
            if self.pos > target {
                return Err(io::Error::other("replay positioned past target"));
            }
            self.acc_start = target;
            self.acc.clear();
        }
        let cache = ChunkCache::global();
        let avail = src.available();
        loop {
            let seg_end = src.segments.read()[self.seg].out_end;
            let chunk_end = (self.acc_start + CHUNK).min(avail);
            if self.pos >= chunk_end || (self.pos >= seg_end && self.is_last_seg(src)) {
                // This chunk is complete (or the stream ends inside it).
                if src.ends_exactly && self.pos >= seg_end && self.is_last_seg(src) {
                    self.check_end(src)?;
                }
                let this = self.acc_start / CHUNK;
                src.check_chunk(this, &self.acc)?;
                let data = Chunk::copy_of(&self.acc);
                cache.insert((src.key, this), data.clone());
                self.acc_start += CHUNK;
                self.acc.clear();
                if this >= idx {
                    return Ok(data);
                }
                continue;
            }
            if self.pos >= seg_end {
                // Next deflate stream (next gzip member).
                self.seg += 1;
                let first = src.segments.read()[self.seg].points[0];
                let next_in = first.input;
                self.z = Replay::decoder_at(src, &first)?;
                self.inbuf.reset(next_in);
                self.released = next_in;
                continue;
            }
            self.inbuf.refill(&*src.input)?;
            let room = (seg_end - self.pos).min(self.out.len() as u64) as usize;
            let s = self
                .z
                .inflate(self.inbuf.bytes(), &mut self.out[..room], false);
            self.inbuf.consume(s.consumed);
            // A long re-read (cat, search) keeps the input's RSS flat too.
            if self.inbuf.pos >= self.released + (16 << 20) {
                src.input.release(self.released, self.inbuf.pos);
                self.released = self.inbuf.pos;
            }
            if s.produced == 0 && s.consumed == 0 && s.code != Code::Ok {
                return Err(io::Error::other(format!(
                    "re-decoding failed at {:#x}: {}",
                    self.pos,
                    self.z.message()
                )));
            }
            let bytes = &self.out[..s.produced];
            // Keep only what falls in the chunk being assembled.
            let skip = self
                .acc_start
                .saturating_sub(self.pos)
                .min(bytes.len() as u64) as usize;
            self.acc.extend_from_slice(&bytes[skip..]);
            self.pos += s.produced as u64;
            if s.code == Code::StreamEnd && self.pos < seg_end {
                return Err(io::Error::other("stream ended early while re-reading"));
            }
            while self.acc.len() as u64 > CHUNK {
                // Spill over into the following chunk(s).
                let rest = self.acc.split_off(CHUNK as usize);
                let this = self.acc_start / CHUNK;
                src.check_chunk(this, &self.acc)?;
                let data = Chunk::copy_of(&self.acc);
                cache.insert((src.key, this), data.clone());
                self.acc = rest;
                self.acc_start += CHUNK;
                if this >= idx {
                    // Keep the remainder for the next read.
                    return Ok(data);
                }
            }
        }
    }

    /// Checks that the deflate data ends where the stream does: the
    /// decoder, given room, makes no further byte.
    fn check_end(&mut self, src: &InflateSource) -> io::Result<()> {
        let mut one = [0u8; 1];
        loop {
            self.inbuf.refill(&*src.input)?;
            let s = self.z.inflate(self.inbuf.bytes(), &mut one, false);
            self.inbuf.consume(s.consumed);
            if s.produced > 0 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the index does not match the file: the deflate data goes on past the {} bytes it was checked to make",
                        self.pos
                    ),
                ));
            }
            if s.code == Code::StreamEnd || s.consumed == 0 {
                return Ok(());
            }
        }
    }

    fn is_last_seg(&self, src: &InflateSource) -> bool {
        self.seg + 1 >= src.segments.read().len()
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        LIVE_REPLAYS.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    fn fixture(name: &str) -> Vec<u8> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/");
        std::fs::read(format!("{dir}{name}")).expect("fixture")
    }

    struct XorShift(u64);
    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }

    /// Decodes the single member of a GNU gzip file into a source with a
    /// checkpoint at every deflate block boundary.
    fn decode(gz: &[u8]) -> Arc<InflateSource> {
        assert_eq!(gz[3] & 8, 8, "fixture has FNAME");
        let start = 10 + gz[10..].iter().position(|&b| b == 0).unwrap() + 1;
        let input: Data = Arc::new(MemSource::new(gz.to_vec()));
        let src = InflateSource::with_span(input, "test", 1024);
        let mut inf = Inflater::new(src.clone(), start as u64);
        loop {
            match inf.run(1 << 20) {
                InflateEvent::Progress => {}
                InflateEvent::End { in_end } => {
                    assert_eq!(in_end as usize, gz.len() - 8);
                    break;
                }
                e => panic!("unexpected {e:?}"),
            }
        }
        src.finish();
        src
    }

    /// A stream read back through a layout whose checkpoints or checksums
    /// lie (a forged index) never serves other bytes: every chunk decoded
    /// again is checked against the CRC the first pass recorded.
    #[test]
    fn a_restored_stream_checks_every_chunk_it_decodes_again() {
        let gz = fixture("nested.tar.gz");
        let src = decode(&gz);
        let n = src.available() as usize;
        let mut reference = vec![0; n];
        assert_eq!(src.read_at(0, &mut reference).unwrap(), n);
        let mut layout = src.layout().expect("finished");
        layout.label = "gzip stream";
        assert_eq!(layout.chunk_crcs.len() as u64, (n as u64).div_ceil(CHUNK));
        let store: Arc<dyn WindowStore> = src.clone();
        // As recorded: every byte comes back.
        let good =
            InflateSource::restore(src.input().clone(), layout.clone(), store.clone()).unwrap();
        let mut buf = vec![0; n];
        assert_eq!(good.read_at(0, &mut buf).unwrap(), n);
        assert!(buf == reference);
        // A changed checksum.
        let mut l = layout.clone();
        l.chunk_crcs[1] ^= 1;
        let s = InflateSource::restore(src.input().clone(), l, store.clone()).unwrap();
        let err = s.read_at(CHUNK, &mut buf).unwrap_err();
        assert!(
            err.to_string().contains("index does not match the file"),
            "{err}"
        );
        // The checkpoint each chunk is decoded again from, moved or given
        // other bits: the chunk comes back right or not at all.
        let points = &layout.segments[0].points;
        let (mut tried, mut refused) = (0, 0);
        for c in 1..(n as u64).div_ceil(CHUNK) {
            let at = c * CHUNK;
            let k = points.iter().rposition(|p| p.out <= at).unwrap();
            if k == 0 {
                continue;
            }
            for forge in 0..4 {
                let mut l = layout.clone();
                let p = &mut l.segments[0].points[k];
                match forge {
                    0 => p.input += 1,
                    1 => p.input -= 1,
                    2 => p.input += 13,
                    _ => p.bits = (p.bits + 3) % 8,
                }
                tried += 1;
                let Ok(s) = InflateSource::restore(src.input().clone(), l, store.clone()) else {
                    refused += 1;
                    continue;
                };
                let mut b = vec![0; CHUNK as usize];
                match s.read_at(at, &mut b) {
                    Ok(k) => assert!(
                        b[..k] == reference[at as usize..at as usize + k],
                        "checkpoint {k} forged ({forge}): other bytes at {at:#x}"
                    ),
                    Err(_) => refused += 1,
                }
            }
        }
        assert!(
            tried > 0 && refused == tried,
            "{refused} of {tried} forgeries refused"
        );
    }

    /// A stream decoded off the engine keeps its chunks ahead of the
    /// cache; its parser finishes it after unstaging it, so finishing
    /// lets nothing go, and the engine's `release_ahead` once the parse
    /// is over does: the chunks go to the cache, and every byte still
    /// reads the same.
    #[test]
    fn chunks_kept_ahead_are_let_go_when_released() {
        let gz = fixture("nested.tar.gz");
        let start = 10 + gz[10..].iter().position(|&b| b == 0).unwrap() + 1;
        let input: Data = Arc::new(MemSource::new(gz.to_vec()));
        let src = InflateSource::new(input, "test");
        let mut inf = Inflater::new(src.clone(), start as u64);
        src.stage(true);
        while let InflateEvent::Progress = inf.run(1 << 20) {}
        src.stage(false);
        src.finish();
        let n = src.available();
        let full = (n / CHUNK) as usize;
        assert!(full >= 2, "{n} bytes");
        assert_eq!(src.ahead.lock().len(), full);
        let mut before = vec![0; n as usize];
        assert_eq!(src.read_at(0, &mut before).unwrap() as u64, n);
        src.release_ahead();
        assert!(src.ahead.lock().is_empty());
        let mut after = vec![0; n as usize];
        assert_eq!(src.read_at(0, &mut after).unwrap() as u64, n);
        assert!(before == after);
    }

    #[test]
    fn random_reads_after_eviction_resume_from_checkpoints() {
        let gz = fixture("nested.tar.gz");
        let src = decode(&gz);
        let n = src.available() as usize;
        let points = src.segments.read()[0].points.clone();
        assert!(
            points.len() > 3,
            "expected several checkpoints, got {}",
            points.len()
        );
        assert!(
            points.iter().any(|p| p.bits > 0),
            "no checkpoint in mid-byte"
        );
        let mut reference = vec![0; n];
        assert_eq!(src.read_at(0, &mut reference).unwrap(), n);
        let t = &gz[gz.len() - 8..];
        assert_eq!(
            crc32fast::hash(&reference),
            u32::from_le_bytes([t[0], t[1], t[2], t[3]])
        );
        assert_eq!(n as u32, u32::from_le_bytes([t[4], t[5], t[6], t[7]]));
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for i in 0..300 {
            if i % 3 == 0 {
                src.evict();
            }
            let off = (rng.next() % n as u64) as usize;
            let len = (rng.next() % 150_000) as usize + 1;
            let mut buf = vec![0; len];
            let k = src.read_at(off as u64, &mut buf).unwrap();
            assert_eq!(k, len.min(n - off));
            assert_eq!(
                &buf[..k],
                &reference[off..off + k],
                "read at {off} len {len}"
            );
        }
        src.evict();
        let mut again = Vec::new();
        crate::unpack::copy_source(&*src, &mut again).unwrap();
        assert_eq!(again, reference);
    }

    #[test]
    fn truncated_input_keeps_every_decodable_byte() {
        let gz = fixture("nested.tar.gz");
        let full = decode(&gz);
        let mut reference = vec![0; full.available() as usize];
        full.read_at(0, &mut reference).unwrap();
        for cut in [30usize, 1000, 33_333, 70_000, gz.len() - 9] {
            let start = 10 + gz[10..].iter().position(|&b| b == 0).unwrap() + 1;
            let input: Data = Arc::new(MemSource::new(gz[..cut].to_vec()));
            let src = InflateSource::with_span(input, "test", CHUNK);
            let mut inf = Inflater::new(src.clone(), start as u64);
            let ev = loop {
                match inf.run(1 << 20) {
                    InflateEvent::Progress => {}
                    e => break e,
                }
            };
            assert!(
                matches!(ev, InflateEvent::Truncated { .. }),
                "cut {cut}: {ev:?}"
            );
            src.finish();
            let n = src.available() as usize;
            assert!(n > 0 || cut < 100);
            src.evict();
            let mut got = vec![0; n];
            assert_eq!(src.read_at(0, &mut got).unwrap(), n);
            assert_eq!(got, reference[..n]);
        }
    }
}
