//! One deflate stream decoded on several threads (rapidgzip's idea).
//!
//! The input is cut into pieces of [`PIECE_IN`] bytes. A worker looks for
//! the first bit in its piece where a dynamic or stored block may start
//! (`resync::Candidates`; fixed-Huffman blocks are passed over) and
//! decodes from there without the window before it (`marked`): a byte
//! that copies the unknown window is kept as a marker naming the window
//! byte it copies. A candidate that does not decode a block is followed by
//! the next. Once 32 KiB of output hold no marker the window is known,
//! and zlib decodes on. The worker stops at the first block end at or past
//! its piece's end.
//!
//! Nothing a worker made is believed on its own. The [`Inflater`] decodes
//! in order, as it does on one thread, and takes a piece only when its own
//! exact decoding stands at a block end at the very bit where the piece
//! starts: then that bit is a block start, and the bytes before it are the
//! window its markers name. Where a worker started at a bit that is no
//! block start, or found none, the Inflater decodes through that piece
//! itself, so a piece never puts a wrong byte in the stream; it only ever
//! saves time.
//!
//! [`Inflater`]: super::Inflater

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::marked::{self, MARK};
use super::resync;
use super::zlib::{Code, RawInflate, split_bit};
use crate::data::pages::Pages;
use crate::data::source::{Data, read_exact_at};
use crate::data::workers::{cheap_to_read, threads};

/// Input bytes per piece.
pub const PIECE_IN: u64 = 4 << 20;
/// Output a piece may decode to; past it the worker gives the piece up
/// (the Inflater decodes it itself, within its own budgets): pieces in
/// flight stay a few tens of MiB whatever the compression ratio.
const PIECE_OUT_MAX: usize = 48 << 20;
/// Marker buffers larger than this (values) are not kept for the next
/// piece: most pieces have their window after a few hundred KiB.
const MARKED_KEPT: usize = 2 << 20;
/// Byte buffers of more than this many times a piece's input are not
/// kept for the next piece.
const BYTES_KEPT: usize = 4;
/// Pieces the stream must have left for workers to be worth starting.
const MIN_PIECES: u64 = 3;
/// Output zlib is given room for at once.
const STEP: usize = 256 << 10;

/// How a stream is decoded ahead: by how many threads, in pieces of how
/// many input bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Worker threads; below 2, none.
    pub threads: usize,
    /// Input bytes per piece.
    pub piece: u64,
}

impl Plan {
    /// [`threads`] workers, pieces of [`PIECE_IN`].
    pub fn default_now() -> Plan {
        Plan {
            threads: threads(),
            piece: PIECE_IN,
        }
    }
}

/// What a worker decoded of one piece.
pub(crate) struct Piece {
    /// Input bit just after its last block, a block boundary; when
    /// `ended`, the input byte just after the stream.
    pub end: u64,
    /// Whether the stream's last block ends it.
    pub ended: bool,
    /// Its bytes are `bytes[..len]` (the buffer past them is kept for
    /// the next piece); the first are to be filled from `marked` (see
    /// [`Piece::resolve`]). Empty when the piece is marked `whole`.
    bytes: Pages<u8>,
    len: usize,
    /// Whether every byte of it was decoded with markers: its bytes are
    /// then resolved into `marked`'s own buffer (two bytes per value, so
    /// byte `i` never overwrites a value not read yet), and no second
    /// buffer of its size is held.
    whole: bool,
    /// The CRC-32 of its bytes after the marked ones.
    exact_crc: u32,
    /// The 32 KiB window as markers, then the output before the window was
    /// known: bytes below 0x100, and `MARK | i` for byte `i` of the window.
    pub(super) marked: Pages<u16>,
    /// Each block end in it that is not the stream's: the output offset in
    /// the piece and the input bit.
    pub blocks: Vec<(usize, u64)>,
}

impl Piece {
    /// Its bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        if self.whole {
            &bytemuck::cast_slice::<u16, u8>(&self.marked[..])[..self.len]
        } else {
            &self.bytes[..self.len]
        }
    }

    /// Adds its bytes to `crc`, once resolved: the marked ones, then the
    /// CRC the worker computed of the rest.
    pub(crate) fn crc_after(&self, crc: &mut crc32fast::Hasher) {
        let marked = self.marked.len().saturating_sub(resync::WINDOW);
        crc.update(&self.bytes()[..marked]);
        let rest = (self.len - marked) as u64;
        crc.combine(&crc32fast::Hasher::new_with_initial_len(
            self.exact_crc,
            rest,
        ));
    }

    /// Fills the marked bytes from `window`, the 32 KiB of output before
    /// the piece; `false` if `window` is shorter or a value names no byte.
    pub(crate) fn resolve(&mut self, window: &[u8]) -> bool {
        let marked = self.marked.get(resync::WINDOW..).unwrap_or_default();
        if marked.is_empty() {
            return true;
        }
        if window.len() < resync::WINDOW {
            return false;
        }
        // Every value's byte, by lookup: bytes are themselves, markers
        // their window byte (the marking decoder writes nothing else).
        let mut table = vec![0u8; 1 << 16];
        for (v, t) in table.iter_mut().enumerate().take(0x100) {
            *t = v as u8;
        }
        table[MARK as usize..].copy_from_slice(&window[..resync::WINDOW]);
        if self.whole {
            // In place: byte `i` is written at offset `i`, value `i` read
            // from offset `2 * (WINDOW + i)`, always ahead of it.
            let raw = bytemuck::cast_slice_mut::<u16, u8>(&mut self.marked[..]);
            for i in 0..self.len {
                let at = 2 * (resync::WINDOW + i);
                let v = u16::from_ne_bytes([raw[at], raw[at + 1]]);
                raw[i] = table[v as usize];
            }
            return true;
        }
        for (b, &v) in self.bytes[..self.len].iter_mut().zip(marked) {
            *b = table[v as usize];
        }
        true
    }
}

/// The state of one piece.
enum Slot {
    /// A worker looks for its first block.
    Finding,
    /// A worker decodes from this bit.
    Decoding(u64),
    /// Done: where it started, if a block was found, and what it made,
    /// if decoding reached the piece's end.
    Done(Option<u64>, Option<Box<Piece>>),
}

struct State {
    /// Pieces claimed and not yet taken, by index, with the attempt.
    slots: std::collections::BTreeMap<u64, (u32, Slot)>,
    /// Where pieces not yet started must start: the end of the piece
    /// before, decoded first.
    hints: std::collections::BTreeMap<u64, u64>,
    /// The next piece a worker claims.
    next: u64,
    /// Workers claim pieces below this only: the consumer's next piece
    /// plus the threads and one, so pieces in flight stay few (one being
    /// appended, one per thread, and one done ahead).
    horizon: u64,
}

/// Spare byte buffers and marker buffers.
type Pool = (Vec<Pages<u8>>, Vec<Pages<u16>>);

struct Shared {
    input: Data,
    /// Input bytes per piece.
    piece: u64,
    /// Pieces `first..end` are decoded ahead.
    end: u64,
    state: Mutex<State>,
    cv: Condvar,
    stop: AtomicBool,
    /// The consumer waits for the readers of its output (see
    /// [`Ahead::pause`]): no new piece is begun.
    paused: AtomicBool,
    /// Buffers of pieces taken, for the next ones: no page is faulted in
    /// and cleared again for every piece.
    pool: Mutex<Pool>,
    /// Buffers of each kind the pool keeps.
    keep: usize,
}

impl Shared {
    /// Keeps a piece's buffers for the next pieces, as many as are in
    /// flight at once.
    fn give_back(&self, bytes: Pages<u8>, marked: Pages<u16>) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        // A buffer written far for a piece of a high ratio is not kept:
        // the pool holds the pages most pieces need, not the most any did.
        if bytes.capacity() > 0
            && pool.0.len() < self.keep
            && bytes.written() <= BYTES_KEPT * self.piece as usize
        {
            pool.0.push(bytes);
        }
        // Nor is the buffer of a piece marked whole, its size in values.
        if marked.capacity() > 0 && pool.1.len() < self.keep && marked.written() <= MARKED_KEPT {
            pool.1.push(marked);
        }
    }
}

/// Workers decoding one stream's pieces ahead of its [`Inflater`]. Dropping
/// it stops them.
///
/// [`Inflater`]: super::Inflater
pub(crate) struct Ahead {
    shared: Arc<Shared>,
    /// The next piece the consumer may take.
    next: u64,
    threads: u64,
    /// The process it was started in: a forked child has no workers.
    pid: u32,
    /// Pieces taken, and pieces the consumer decoded itself.
    pub(crate) taken: u64,
    pub(crate) passed: u64,
}

impl Ahead {
    /// Starts workers for the stream whose exact decoding is at input byte
    /// `at`, if it is worth it: more than one thread, the whole input there
    /// and cheap to read, and enough of it left.
    pub(crate) fn start(input: &Data, at: u64, plan: Plan) -> Option<Ahead> {
        let Plan { threads, piece } = plan;
        if threads < 2 || !input.is_final() || !cheap_to_read(input) {
            return None;
        }
        let len = input.available();
        if piece == 0 || len.saturating_sub(at) < MIN_PIECES * piece {
            return None;
        }
        let first = at / piece + 1;
        let end = len.div_ceil(piece);
        let shared = Arc::new(Shared {
            input: input.clone(),
            piece,
            end,
            state: Mutex::new(State {
                slots: Default::default(),
                hints: Default::default(),
                next: first,
                horizon: first + threads as u64 + 1,
            }),
            cv: Condvar::new(),
            stop: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            pool: Mutex::new((Vec::new(), Vec::new())),
            keep: threads + 1,
        });
        let spawned = crate::data::workers::spawn(threads, "pparse-inflate", &shared, work);
        if spawned == 0 {
            return None;
        }
        Some(Ahead {
            shared,
            next: first,
            threads: threads as u64,
            pid: std::process::id(),
            taken: 0,
            passed: 0,
        })
    }

    /// The consumer's exact decoding stands at a block end at input bit
    /// `at`: the piece that starts there, if one does and was decoded.
    /// Waits for the workers when the answer depends on them. Pieces the
    /// consumer has passed are dropped.
    pub(crate) fn at_boundary(&mut self, at: u64) -> Option<Box<Piece>> {
        if self.next >= self.shared.end || at < self.next * self.shared.piece * 8 {
            return None;
        }
        if self.pid != std::process::id() || self.shared.stop.load(Ordering::Relaxed) {
            self.next = self.shared.end;
            return None;
        }
        // Decoding again: a piece it waits for must be begun.
        self.pause(false);
        let shared = self.shared.clone();
        let sh = &*shared;
        let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if self.next >= sh.end || at < self.next * sh.piece * 8 {
                return None;
            }
            // Where does the next piece start?
            let start = match st.slots.get(&self.next).map(|s| &s.1) {
                None | Some(Slot::Finding) => {
                    st = sh.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                    continue;
                }
                Some(Slot::Decoding(s)) => Some(*s),
                Some(Slot::Done(s, _)) => *s,
            };
            match start {
                Some(s) if at < s => return None,
                Some(s) if at == s => {
                    if let Some((_, Slot::Decoding(_))) = st.slots.get(&self.next) {
                        st = sh.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                        continue;
                    }
                    let piece = match st.slots.remove(&self.next) {
                        Some((_, Slot::Done(_, p))) => p,
                        _ => None,
                    };
                    self.advance(&mut st);
                    if piece.is_some() {
                        self.taken += 1;
                    } else {
                        self.passed += 1;
                    }
                    return piece;
                }
                // Passed, or no block found: the consumer decodes it.
                _ => {
                    st.slots.remove(&self.next);
                    self.advance(&mut st);
                    self.passed += 1;
                }
            }
        }
    }

    /// While `on`, workers begin no new piece (those under way finish):
    /// the consumer is held back by the readers of its output, which are
    /// then the bottleneck, and a worker's decoding without the window
    /// costs more CPU than the consumer's own, CPU those readers could
    /// use. On a tar.gz of many small `.gz` files on two cores, workers
    /// that went on made listing slower than one thread.
    pub(crate) fn pause(&self, on: bool) {
        if self.pid != std::process::id() || self.shared.paused.load(Ordering::Relaxed) == on {
            return;
        }
        self.shared.paused.store(on, Ordering::Relaxed);
        if !on {
            let _guard = self.shared.state.lock();
            self.shared.cv.notify_all();
        }
    }

    /// Gives a piece's buffers back for the next pieces.
    pub(crate) fn recycle(&self, piece: Piece) {
        let Piece { bytes, marked, .. } = piece;
        if self.pid != std::process::id() {
            return;
        }
        self.shared.give_back(bytes, marked);
    }

    fn advance(&mut self, st: &mut State) {
        self.next += 1;
        st.horizon = self.next + self.threads + 1;
        // A worker still on a piece now passed finishes it for nothing;
        // its result is dropped when it is stored.
        let next = self.next;
        st.slots.retain(|&k, _| k >= next);
        st.hints.retain(|&k, _| k >= next);
        self.shared.cv.notify_all();
    }
}

impl Ahead {
    /// Stops the workers: the stream ended, or decoding it failed.
    pub(crate) fn stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        // In a forked child the workers are gone, and a lock one of them
        // held at the fork stays held: nothing to wake, nothing to take.
        if self.pid != std::process::id() {
            return;
        }
        let _guard = self.shared.state.lock();
        self.shared.cv.notify_all();
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A worker: claims pieces in order and decodes them, until stopped or
/// none is left.
fn work(sh: &Shared) {
    loop {
        let (k, attempt) = {
            let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if sh.stop.load(Ordering::Relaxed) || st.next >= sh.end {
                    return;
                }
                if st.next < st.horizon && !sh.paused.load(Ordering::Relaxed) {
                    break;
                }
                st = sh.cv.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            let k = st.next;
            st.next += 1;
            st.slots.insert(k, (0, Slot::Finding));
            (k, 0)
        };
        let mut job = Some((k, attempt, None));
        while let Some((k, attempt, from)) = job {
            // A panic is a bug, but must not leave the consumer waiting.
            let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                piece(sh, k, attempt, from)
            }));
            let slot = done.unwrap_or(Slot::Done(None, None));
            let end = match &slot {
                Slot::Done(_, Some(p)) if !p.ended => Some(p.end),
                _ => None,
            };
            store(sh, k, attempt, slot);
            job = end.and_then(|e| follow(sh, k + 1, e));
        }
    }
}

/// Piece `k` ended at a block end at bit `end`, which the next piece must
/// start at if piece `k` is the stream's. If the next piece started before
/// it (at bits that are no block start of the stream, whose decoding fell
/// into step with the stream's later: it decodes, but is never taken), or
/// found no start, it is decoded again from `end`: the job to do, with its
/// attempt. If the next piece is still looking for its start, it is told.
fn follow(sh: &Shared, k: u64, end: u64) -> Option<(u64, u32, Option<u64>)> {
    let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
    if k >= sh.end {
        return None;
    }
    let redo = match st.slots.get(&k) {
        None => {
            if k >= st.next {
                st.hints.insert(k, end);
            }
            return None;
        }
        Some((_, Slot::Finding)) => {
            st.hints.insert(k, end);
            return None;
        }
        Some((attempt, Slot::Decoding(s) | Slot::Done(Some(s), _))) => {
            (*s < end).then_some(*attempt)
        }
        Some((attempt, Slot::Done(None, _))) => Some(*attempt),
    };
    let attempt = redo? + 1;
    st.slots.insert(k, (attempt, Slot::Decoding(end)));
    sh.cv.notify_all();
    Some((k, attempt, Some(end)))
}

/// Finds where piece `k` starts and decodes it (attempt `attempt`): from
/// `from` if given (the end of the piece before), else from the first bit
/// that passes the cheap checks of a block start, or the next one, until
/// one decodes a block.
fn piece(sh: &Shared, k: u64, attempt: u32, from: Option<u64>) -> Slot {
    let until = (k + 1) * sh.piece * 8;
    let mut scan = k * sh.piece * 8;
    let mut candidates = resync::Candidates::new();
    loop {
        if sh.stop.load(Ordering::Relaxed) {
            return Slot::Done(None, None);
        }
        let start = match from {
            Some(b) => b,
            None => {
                let found = candidates.next(&sh.input, scan, until);
                let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
                // The piece before ended meanwhile: start where it did.
                match (st.hints.remove(&k), found) {
                    (Some(h), _) => h,
                    (None, Ok(Some(s))) => s,
                    (None, _) => return Slot::Done(None, None),
                }
            }
        };
        store(sh, k, attempt, Slot::Decoding(start));
        match decode(sh, start, until) {
            Ok(Ok(piece)) => return Slot::Done(Some(start), Some(Box::new(piece))),
            // No block decodes from a candidate: the next one.
            Ok(Err(marked::Failed::Invalid(0))) if from.is_none() => scan = start + 1,
            _ => return Slot::Done(Some(start), None),
        }
    }
}

/// Sets attempt `attempt` of piece `k`'s slot, unless the consumer has passed
/// the piece or a later attempt replaced it.
fn store(sh: &Shared, k: u64, attempt: u32, slot: Slot) {
    let mut st = sh.state.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((g, s)) = st.slots.get_mut(&k)
        && *g == attempt
    {
        *s = slot;
    }
    sh.cv.notify_all();
}

/// Decodes from the block at input bit `start` to the first block end at
/// or after bit `until` (or the stream's end). `Err`: the bits do not
/// decode that far, the output grew past [`PIECE_OUT_MAX`], or the
/// consumer stopped the workers.
fn decode(sh: &Shared, start: u64, until: u64) -> io::Result<Result<Piece, marked::Failed>> {
    let (mut bytes, mut marked) = {
        let mut pool = sh.pool.lock().unwrap_or_else(|e| e.into_inner());
        (
            pool.0.pop().unwrap_or_default(),
            pool.1.pop().unwrap_or_default(),
        )
    };
    let made = decode_into(sh, start, until, &mut bytes, &mut marked);
    match made {
        Ok(Ok(Made {
            end,
            ended,
            blocks,
            used,
            exact_crc,
        })) => {
            // Marked to its end: its bytes are resolved in `marked`'s
            // buffer, and the byte buffer is not needed.
            let whole = used.is_none();
            if whole {
                sh.give_back(std::mem::take(&mut bytes), Pages::new());
            }
            let len = used.unwrap_or(marked.len() - resync::WINDOW);
            Ok(Ok(Piece {
                end,
                ended,
                bytes,
                len,
                whole,
                exact_crc,
                marked,
                blocks,
            }))
        }
        Ok(Err(failed)) => {
            sh.give_back(bytes, marked);
            Ok(Err(failed))
        }
        Err(e) => {
            sh.give_back(bytes, marked);
            Err(e)
        }
    }
}

/// What [`decode_into`] made: where it ended, its block ends, and how
/// many bytes of the byte buffer are the piece's (`None`: it was marked
/// to its end, and the byte buffer holds nothing) with the CRC of those
/// after the marked ones.
struct Made {
    end: u64,
    ended: bool,
    blocks: marked::Blocks,
    used: Option<usize>,
    exact_crc: u32,
}

/// [`decode`] into the buffers given.
fn decode_into(
    sh: &Shared,
    start: u64,
    until: u64,
    bytes: &mut Pages<u8>,
    marked: &mut Pages<u16>,
) -> io::Result<Result<Made, marked::Failed>> {
    // Until the window is known: the marking decoder.
    let found = marked::decode(&sh.input, start, until, PIECE_OUT_MAX, &sh.stop, marked)?;
    let (mut blocks, stop) = match found {
        Ok(done) => done,
        Err(f) => return Ok(Err(f)),
    };
    let (end, ended) = match stop {
        marked::Stop::Until(bit) | marked::Stop::Clean(bit) => (bit, false),
        marked::Stop::End(byte) => (byte, true),
    };
    if !matches!(stop, marked::Stop::Clean(_)) {
        // Marked to its end.
        return Ok(Ok(Made {
            end,
            ended,
            blocks,
            used: None,
            exact_crc: 0,
        }));
    }
    let bit = end;
    // The window is known: zlib from this block on, after room for the
    // marked bytes (filled when the piece is resolved). Room for the most
    // a piece may make, so the buffer never moves.
    let first = marked.len() - resync::WINDOW;
    bytes.clear();
    bytes.spare(PIECE_OUT_MAX + 2 * STEP);
    bytes.advance(first);
    let done = |bytes: &Pages<u8>, blocks, end, ended| {
        Ok(Ok(Made {
            end,
            ended,
            blocks,
            used: Some(bytes.len()),
            exact_crc: crc32fast::hash(&bytes[first..]),
        }))
    };
    let window: Vec<u8> = marked[first..].iter().map(|&v| v as u8).collect();
    let (mut pos, bits) = split_bit(bit);
    let mut z = RawInflate::new();
    if bits > 0 {
        let mut b = [0u8; 1];
        if !read_exact_at(&*sh.input, pos - 1, &mut b)? {
            return Ok(Err(marked::Failed::Limit));
        }
        z.prime(bits, b[0] >> (8 - bits));
    }
    z.set_dictionary(&window);
    let mut inbuf = vec![0u8; 256 << 10];
    // Calls in a row that made no progress: zlib always makes some with
    // input and room, so a second one means it is stuck.
    let mut idle = 0;
    loop {
        if sh.stop.load(Ordering::Relaxed) || bytes.len() > PIECE_OUT_MAX {
            return Ok(Err(marked::Failed::Limit));
        }
        let n = sh.input.read_at(pos, &mut inbuf)?;
        if n == 0 {
            return Ok(Err(marked::Failed::Limit));
        }
        let mut lo = 0;
        while lo < n {
            let s = z.inflate(&inbuf[lo..n], bytes.spare(STEP), true);
            bytes.advance(s.produced);
            lo += s.consumed;
            pos += s.consumed as u64;
            if z.at_block_boundary() {
                let bit = pos * 8 - (z.data_type() & 7) as u64;
                blocks.push((bytes.len(), bit));
                if bit >= until {
                    return done(bytes, blocks, bit, false);
                }
            }
            match s.code {
                Code::StreamEnd => return done(bytes, blocks, pos, true),
                Code::DataError => return Ok(Err(marked::Failed::Limit)),
                Code::Ok | Code::BufError if s.consumed == 0 && s.produced == 0 => {
                    idle += 1;
                    if idle > 1 {
                        return Ok(Err(marked::Failed::Limit));
                    }
                }
                Code::Ok | Code::BufError => idle = 0,
            }
            if bytes.len() > PIECE_OUT_MAX {
                return Ok(Err(marked::Failed::Limit));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;
    use crate::data::inflate::{InflateEvent, InflateSource, Inflater, WindowStore};
    use std::io::Write;
    use std::process::{Command, Stdio};

    /// Bytes that compress as files do: lines of words, copies from far
    /// back (so pieces begin with markers), binary runs, and stretches of
    /// noise (so some blocks are stored).
    fn corpus(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let words = [
            "tensor",
            "block",
            "window",
            "marker",
            "stream",
            "piece",
            "zlib",
            "deflate",
            "the",
            "of",
            "a",
            "checkpoint",
            "index",
            "member",
            "archive",
            "0x1f8b",
            "\n",
            "  ",
        ];
        let mut out = Vec::with_capacity(len + 4096);
        while out.len() < len {
            match next() % 16 {
                0 if out.len() > 40_000 => {
                    // A copy from 20-32 KiB back: reaches into the window.
                    let d = 20_000 + (next() % 12_000) as usize;
                    let n = 50 + (next() % 400) as usize;
                    let from = out.len() - d;
                    for i in 0..n {
                        out.push(out[from + i]);
                    }
                }
                1 => out.extend((0..(next() % 300) as usize).map(|_| next() as u8)),
                2 => out.extend(std::iter::repeat_n(
                    (next() % 4) as u8,
                    (next() % 200) as usize,
                )),
                3 if next() % 64 == 0 => {
                    out.extend((0..20_000).map(|_| next() as u8));
                }
                _ => {
                    out.extend_from_slice(words[(next() % words.len() as u64) as usize].as_bytes());
                    out.push(b' ');
                }
            }
        }
        out.truncate(len);
        out
    }

    /// Runs `cmd` with `input` on stdin; its stdout, or `None` if the tool
    /// is not installed.
    fn pipe(cmd: &str, args: &[&str], input: &[u8]) -> Option<Vec<u8>> {
        let mut child = Command::new(cmd)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let mut stdin = child.stdin.take()?;
        let data = input.to_vec();
        let feeder = std::thread::spawn(move || stdin.write_all(&data));
        let out = child.wait_with_output().ok()?;
        feeder.join().ok()?.ok()?;
        assert!(out.status.success(), "{cmd} {args:?} failed");
        Some(out.stdout)
    }

    /// The raw deflate stream inside a gzip file written without a name.
    fn gzip_body(gz: &[u8]) -> Vec<u8> {
        assert_eq!(&gz[..3], &[0x1f, 0x8b, 8]);
        assert_eq!(gz[3], 0, "no optional header fields");
        gz[10..gz.len() - 8].to_vec()
    }

    /// Python's zlib: a raw deflate stream at `level` with `strategy`,
    /// flushed with `flush` every 128 KiB as pigz does (`""`: never).
    fn python_zlib(data: &[u8], level: u32, strategy: &str, flush: &str) -> Vec<u8> {
        let script = format!(
            "import sys, zlib\n\
             d = sys.stdin.buffer.read()\n\
             c = zlib.compressobj({level}, zlib.DEFLATED, -15, 8, zlib.{strategy})\n\
             out = []\n\
             for i in range(0, len(d), 131072):\n\
             \x20   out.append(c.compress(d[i:i + 131072]))\n\
             \x20   if '{flush}': out.append(c.flush(getattr(zlib, '{flush}') if '{flush}' else 0))\n\
             out.append(c.flush())\n\
             sys.stdout.buffer.write(b''.join(out))\n"
        );
        pipe("python3", &["-c", &script], data).expect("python3 is needed by the tests")
    }

    /// What decoding `raw` with `plan` made: the CRC of each 64 KiB chunk
    /// the first pass appended, the checkpoints with their windows, and
    /// the pieces taken and passed.
    struct Decoded {
        chunk_crcs: Vec<u32>,
        points: Vec<(u64, u64, u8, Vec<u8>)>,
        pieces: (u64, u64),
        /// The CRC-32 of the stream as the decoder summed it.
        crc: u32,
    }

    /// A decoder of `raw` that decodes ahead as `plan` says, with a
    /// checkpoint every 64 KiB.
    fn inflater(raw: &[u8], plan: Plan) -> (Arc<InflateSource>, Inflater) {
        let input: Data = Arc::new(MemSource::new(raw.to_vec()));
        let src = InflateSource::with_span(input, "test", 64 << 10);
        let mut inf = Inflater::new(src.clone(), 0);
        inf.set_plan(plan);
        (src, inf)
    }

    fn decode(raw: &[u8], plan: Plan) -> Decoded {
        decode_with(raw, plan, |_, _| {})
    }

    /// [`decode`], calling `between` with the Inflater and the run's
    /// number before each run.
    fn decode_with(raw: &[u8], plan: Plan, mut between: impl FnMut(&Inflater, u64)) -> Decoded {
        let (src, mut inf) = inflater(raw, plan);
        for k in 0.. {
            between(&inf, k);
            match inf.run(1 << 20) {
                InflateEvent::Progress => {}
                InflateEvent::End { in_end } => {
                    assert_eq!(
                        in_end,
                        raw.len() as u64,
                        "the stream ends at the input's end"
                    );
                    break;
                }
                e => panic!("unexpected {e:?}"),
            }
        }
        src.finish();
        let layout = src.layout().expect("finished");
        let mut points = Vec::new();
        for seg in &layout.segments {
            for p in &seg.points {
                let mut w = Vec::new();
                if let Some(slot) = p.window {
                    src.read(slot, &mut w).expect("window");
                }
                points.push((p.out, p.input, p.bits, w));
            }
        }
        Decoded {
            chunk_crcs: layout.chunk_crcs,
            points,
            pieces: inf.pieces(),
            crc: inf.crc(),
        }
    }

    /// Workers held while the consumer waits for its readers, released
    /// before it decodes again or not (its next piece releases them):
    /// the bytes and checkpoints are one thread's, pieces are still
    /// taken, and nothing waits for ever.
    #[test]
    fn held_workers_change_nothing_but_who_decodes() {
        let data = corpus(3 << 20, 5);
        let raw = python_zlib(&data, 6, "Z_DEFAULT_STRATEGY", "");
        let one = decode(&raw, SERIAL);
        let held = decode_with(&raw, PIECES, |inf, k| {
            inf.hold_workers(true);
            if k % 2 == 0 {
                inf.hold_workers(false);
            }
        });
        assert_eq!(held.chunk_crcs, crcs(&data));
        assert_eq!(held.points, one.points);
        assert!(held.pieces.0 > 0, "pieces taken: {:?}", held.pieces);
    }

    fn crcs(data: &[u8]) -> Vec<u32> {
        data.chunks(64 << 10).map(crc32fast::hash).collect()
    }

    const PIECES: Plan = Plan {
        threads: 2,
        piece: 48 << 10,
    };
    const SERIAL: Plan = Plan {
        threads: 1,
        piece: 48 << 10,
    };

    /// Streams from GNU gzip at every level, from pigz where it is
    /// installed, and from Python's zlib with each strategy (fixed codes
    /// only, stored blocks only, pigz's flushes): decoded on two threads
    /// in small pieces, every byte is the input's, and the checkpoints
    /// (with their windows) are those of decoding on one thread.
    #[test]
    fn pieces_decode_every_writers_streams_as_one_thread_does() {
        let data = corpus(3 << 20, 7);
        let mut streams: Vec<(String, Vec<u8>)> = Vec::new();
        for level in 1..=9 {
            let gz = pipe("gzip", &[&format!("-{level}"), "-n", "-c"], &data)
                .expect("gzip is needed by the tests");
            streams.push((format!("gzip -{level}"), gzip_body(&gz)));
        }
        for args in [&["-6", "-n", "-c"][..], &["-i", "-n", "-c"][..]] {
            match pipe("pigz", args, &data) {
                Some(gz) => streams.push((format!("pigz {args:?}"), gzip_body(&gz))),
                None => eprintln!("pigz is not installed: its streams are not checked"),
            }
        }
        for (level, strategy, flush) in [
            (6, "Z_DEFAULT_STRATEGY", ""),
            (6, "Z_FILTERED", ""),
            (6, "Z_HUFFMAN_ONLY", ""),
            (6, "Z_RLE", ""),
            (6, "Z_FIXED", ""),
            (0, "Z_DEFAULT_STRATEGY", ""),
            (6, "Z_DEFAULT_STRATEGY", "Z_SYNC_FLUSH"),
            (9, "Z_DEFAULT_STRATEGY", "Z_FULL_FLUSH"),
        ] {
            let raw = python_zlib(&data, level, strategy, flush);
            streams.push((format!("zlib level {level} {strategy} {flush}"), raw));
        }
        let want = crcs(&data);
        for (name, raw) in &streams {
            let one = decode(raw, SERIAL);
            let two = decode(raw, PIECES);
            assert_eq!(one.chunk_crcs, want, "{name}: one thread");
            assert_eq!(two.chunk_crcs, want, "{name}: pieces");
            assert_eq!(two.crc, crc32fast::hash(&data), "{name}: the stream's CRC");
            assert!(one.points.len() > 10, "{name}: checkpoints were taken");
            assert_eq!(two.points, one.points, "{name}: the same checkpoints");
            assert_eq!(one.pieces, (0, 0), "{name}");
            // Fixed-Huffman blocks prove no start: no piece is taken there.
            if strategy_has_starts(name) {
                assert!(
                    two.pieces.0 > raw.len() as u64 / PIECES.piece / 2,
                    "{name}: pieces were taken ({:?} of {})",
                    two.pieces,
                    raw.len() as u64 / PIECES.piece
                );
            }
        }
    }

    fn strategy_has_starts(name: &str) -> bool {
        !name.contains("Z_FIXED")
    }

    /// A stream of stored blocks that hold another deflate stream: a
    /// worker starting in a piece finds the inner stream's blocks, which
    /// decode, but no block of the outer stream starts there. Those pieces
    /// are never taken; the bytes are the input's.
    #[test]
    fn pieces_that_decode_but_start_nowhere_in_the_stream_are_not_taken() {
        let inner = python_zlib(&corpus(2 << 20, 11), 6, "Z_DEFAULT_STRATEGY", "");
        let outer = python_zlib(&inner, 0, "Z_DEFAULT_STRATEGY", "");
        let two = decode(&outer, PIECES);
        assert_eq!(two.chunk_crcs, crcs(&inner));
        assert_eq!(two.points, decode(&outer, SERIAL).points);
        // Stored blocks start every 64 KiB or so; the inner stream's
        // blocks are found first in most pieces, and those are passed.
        assert!(two.pieces.1 > 0, "pieces passed: {:?}", two.pieces);
    }

    /// Streams one after another in one source, as a gzip file's members
    /// are decoded: workers start for a stream once it has gone on for a
    /// piece, never for one shorter (a file of many small members,
    /// bgzip's, started two threads at each); each stream's bytes are
    /// right either way.
    #[test]
    fn workers_start_for_long_streams_only() {
        let (big_text, small_text) = (corpus(1 << 20, 3), corpus(20 << 10, 4));
        let big = python_zlib(&big_text, 6, "Z_DEFAULT_STRATEGY", "");
        let small = python_zlib(&small_text, 6, "Z_DEFAULT_STRATEGY", "");
        assert!(big.len() as u64 >= 4 * PIECES.piece && (small.len() as u64) < PIECES.piece);
        let order = [
            (&big, &big_text),
            (&small, &small_text),
            (&small, &small_text),
            (&big, &big_text),
        ];
        let raw: Vec<u8> = order.iter().flat_map(|s| s.0.iter().copied()).collect();
        let want: Vec<u8> = order.iter().flat_map(|s| s.1.iter().copied()).collect();
        let input: Data = Arc::new(MemSource::new(raw));
        let src = InflateSource::with_span(input, "test", 64 << 10);
        let mut at = 0u64;
        let mut started = Vec::new();
        for (stream, _) in order {
            let mut inf = Inflater::new(src.clone(), at);
            inf.set_plan(PIECES);
            let end = loop {
                match inf.run(16 << 10) {
                    InflateEvent::Progress => {}
                    InflateEvent::End { in_end } => break in_end,
                    e => panic!("{e:?}"),
                }
            };
            assert_eq!(end, at + stream.len() as u64);
            started.push(inf.has_workers());
            assert_eq!(inf.has_workers(), inf.pieces().0 > 0);
            at = end;
        }
        src.finish();
        assert_eq!(started, [true, false, false, true]);
        let mut got = vec![0; want.len()];
        assert_eq!(
            crate::data::Source::read_at(&*src, 0, &mut got).unwrap(),
            want.len()
        );
        assert!(got == want);
    }

    /// Decodes until an event that is not progress: the event, the bytes
    /// produced and their CRC.
    fn until_event(raw: &[u8], plan: Plan) -> (InflateEvent, u64, u32) {
        let (_src, mut inf) = inflater(raw, plan);
        loop {
            match inf.run(1 << 20) {
                InflateEvent::Progress => {}
                e => return (e, inf.produced(), inf.crc()),
            }
        }
    }

    /// Damage, a cut, or zeros late in a stream: decoding in pieces ends
    /// with the event decoding on one thread ends with, at the same byte,
    /// after the same bytes.
    #[test]
    fn damage_ends_pieces_as_it_ends_one_thread() {
        let gz = pipe("gzip", &["-6", "-n", "-c"], &corpus(3 << 20, 5)).expect("gzip");
        let raw = gzip_body(&gz);
        let at = raw.len() * 3 / 4;
        let mut flipped = raw.clone();
        flipped[at] ^= 0x10;
        let mut zeroed = raw.clone();
        zeroed[at..at + 4096].fill(0);
        let cut = raw[..at].to_vec();
        for (name, bad) in [("flipped", flipped), ("zeroed", zeroed), ("cut", cut)] {
            let one = until_event(&bad, SERIAL);
            let two = until_event(&bad, PIECES);
            assert_eq!(two, one, "{name}");
        }
    }
}
