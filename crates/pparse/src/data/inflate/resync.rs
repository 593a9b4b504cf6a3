//! Deflate after damage: where a block can start, and decoding from there
//! without the 32 KiB of output the stream had before it.
//!
//! zlib cannot help here: it needs the window. This is a small deflate
//! decoder of its own whose history holds 16-bit values, so a back-reference
//! into the lost window yields a marker for "unknown" instead of a guess
//! (rapidgzip's idea). Unknown bytes are listed in
//! [`Recover::take_unknown`]; once 32 KiB of output holds no marker the
//! window is exact again and zlib can take over (see [`Recover::window`]).
//! The bytes written are those zlib writes given a window of 32 KiB of
//! zeros (zeros where they copy the lost window), which is how replays
//! re-read a recovered stream.
//!
//! [`find_block`] looks for a block start bit by bit: a dynamic-Huffman
//! header that passes every check zlib makes (counts, a complete precode,
//! code lengths that fit, complete codes with an end-of-block code), or a
//! stored block's `LEN`/`NLEN` at a byte boundary, or fixed-Huffman blocks
//! that decode 1,024 symbols without an invalid code; each candidate must
//! then decode on before it is believed. The rules of what is valid follow zlib's, so a
//! stream this decoder accepts, zlib accepts too.

use std::io;
use std::sync::OnceLock;

use super::codes::{CL_ORDER, DIST_BASE, DIST_EXTRA, LEN_BASE, LEN_EXTRA};
use super::sieve::{FIXED_PROOF, Sieve, precode_complete, stored_header_bits};
use crate::data::source::Data;

/// Size of the deflate window.
pub const WINDOW: usize = 32 * 1024;
const MASK: usize = WINDOW - 1;
/// The flag of a history value whose byte is unknown; alone, a byte of the
/// lost window (written as a zero, as zlib with a window of zeros would).
const UNKNOWN: u16 = 0x100;
/// Input read at once.
const IN_CHUNK: usize = 256 * 1024;
/// Bits one length/distance pair can take at most (15+5+15+13).
pub(super) const MAX_SYMBOL_BITS: u64 = 48;
/// Bytes a block header can take at most (a dynamic one: 3+14+57 bits and
/// 316 code lengths of up to 14 bits each).
pub(super) const MAX_HEADER_BYTES: usize = 600;
/// Unknown runs closer than this are reported as one.
const MERGE_GAP: u64 = 64;
/// Most unknown runs kept apart; past it, runs merge into one.
const MAX_RUNS: usize = 4096;

/// Bits of a byte slice, least significant first, from a bit offset.
/// Reads past the end give zeros and set `over`, so a caller that may be
/// at the true end of its input checks `over` before it uses a symbol.
pub(super) struct Bits<'a> {
    b: &'a [u8],
    next: usize,
    pub(super) acc: u64,
    pub(super) n: u32,
    pub(super) over: bool,
}

impl<'a> Bits<'a> {
    pub(super) fn new(b: &'a [u8], bit: u64) -> Bits<'a> {
        let mut r = Bits {
            b,
            next: (bit / 8) as usize,
            acc: 0,
            n: 0,
            over: false,
        };
        r.consume((bit % 8) as u32);
        r
    }
    #[inline]
    pub(super) fn refill(&mut self) {
        // Eight bytes at once where there are eight: the bytes past what
        // `n` counts land where the next refill puts them again.
        if let Some(w) = self.b.get(self.next..self.next + 8) {
            let w = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
            self.acc |= w << self.n;
            let k = (63 - self.n) / 8;
            self.next += k as usize;
            self.n += k * 8;
            return;
        }
        while self.n <= 56 {
            match self.b.get(self.next) {
                Some(&x) => {
                    self.acc |= (x as u64) << self.n;
                    self.next += 1;
                    self.n += 8;
                }
                None => break,
            }
        }
    }
    #[inline]
    fn peek(&mut self, k: u32) -> u32 {
        if self.n < k {
            self.refill();
        }
        (self.acc & ((1u64 << k) - 1)) as u32
    }
    #[inline]
    pub(super) fn consume(&mut self, k: u32) {
        if self.n < k {
            self.refill();
        }
        if self.n < k {
            self.over = true;
            self.acc = 0;
            self.n = 0;
            return;
        }
        self.acc >>= k;
        self.n -= k;
    }
    #[inline]
    pub(super) fn take(&mut self, k: u32) -> u32 {
        let v = self.peek(k);
        self.consume(k);
        v
    }
    /// Bit offset in the slice of the next unread bit.
    pub(super) fn pos(&self) -> u64 {
        self.next as u64 * 8 - self.n as u64
    }
    /// Bits left in the slice.
    pub(super) fn left(&self) -> u64 {
        self.b.len().saturating_sub(self.next) as u64 * 8 + self.n as u64
    }
}

/// A canonical Huffman code as a lookup table indexed by the next
/// `bits` input bits; an entry is `symbol | length << 9`, length 0 for a
/// bit pattern no code starts with (incomplete codes).
pub(super) struct Huff {
    pub(super) table: Vec<u16>,
    pub(super) bits: u32,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum CodeKind {
    /// The code-length code: must be complete.
    Precode,
    /// Literal/length and distance codes: complete, or a single code.
    Data,
}

/// Checks `lengths` as zlib does (over-subscribed: invalid; incomplete:
/// invalid unless a single one-bit code, or no code at all).
fn code_ok(lengths: &[u8], kind: CodeKind) -> bool {
    let mut count = [0u32; 16];
    for &l in lengths {
        count[l as usize] += 1;
    }
    let max = (1..16).rev().find(|&l| count[l] != 0).unwrap_or(0);
    if max == 0 {
        return true;
    }
    let mut left: i32 = 1;
    for c in &count[1..] {
        left <<= 1;
        left -= *c as i32;
        if left < 0 {
            return false;
        }
    }
    !(left > 0 && (kind == CodeKind::Precode || max != 1))
}

impl Huff {
    /// The table for `lengths`, which [`code_ok`] accepted.
    fn new(lengths: &[u8]) -> Huff {
        let bits = lengths.iter().copied().max().unwrap_or(0).max(1) as u32;
        let mut table = vec![0u16; 1 << bits];
        let mut count = [0u16; 16];
        for &l in lengths {
            count[l as usize] += 1;
        }
        count[0] = 0;
        let mut next = [0u16; 16];
        let mut code = 0u16;
        for l in 1..16 {
            code = (code + count[l - 1]) << 1;
            next[l] = code;
        }
        for (sym, &l) in lengths.iter().enumerate() {
            if l == 0 {
                continue;
            }
            let c = next[l as usize];
            next[l as usize] += 1;
            let rev = (c.reverse_bits() >> (16 - l)) as usize;
            let entry = sym as u16 | (l as u16) << 9;
            let mut i = rev;
            while i < table.len() {
                table[i] = entry;
                i += 1 << l;
            }
        }
        Huff { table, bits }
    }

    /// The next symbol, or `None` for a pattern that is no code.
    #[inline]
    pub(super) fn decode(&self, r: &mut Bits) -> Option<u16> {
        let e = self.table[r.peek(self.bits) as usize];
        let len = (e >> 9) as u32;
        if len == 0 {
            return None;
        }
        r.consume(len);
        Some(e & 0x1ff)
    }
}

pub(super) fn fixed() -> &'static (Huff, Huff) {
    static FIXED: OnceLock<(Huff, Huff)> = OnceLock::new();
    FIXED.get_or_init(|| {
        let mut l = [0u8; 288];
        l[..144].fill(8);
        l[144..256].fill(9);
        l[256..280].fill(7);
        l[280..].fill(8);
        (Huff::new(&l), Huff::new(&[5u8; 30]))
    })
}

/// Reads a dynamic block's header after its 3 type bits: the two codes,
/// or why they are invalid (zlib's words).
pub(super) fn dynamic_header(r: &mut Bits) -> Result<(Huff, Huff), &'static str> {
    let hlit = r.take(5) as usize + 257;
    let hdist = r.take(5) as usize + 1;
    let hclen = r.take(4) as usize + 4;
    if hlit > 286 || hdist > 30 {
        return Err("too many length or distance symbols");
    }
    let mut cl = [0u8; 19];
    for &i in &CL_ORDER[..hclen] {
        cl[i] = r.take(3) as u8;
    }
    if !code_ok(&cl, CodeKind::Precode) || cl.iter().all(|&l| l == 0) {
        return Err("invalid code lengths set");
    }
    let pre = Huff::new(&cl);
    let mut lens = [0u8; 316];
    let total = hlit + hdist;
    let mut i = 0;
    while i < total {
        let sym = pre.decode(r).ok_or("invalid code lengths set")?;
        let (value, repeat) = match sym {
            0..=15 => {
                lens[i] = sym as u8;
                i += 1;
                continue;
            }
            16 => {
                let prev = *lens[..i].last().ok_or("invalid bit length repeat")?;
                (prev, 3 + r.take(2) as usize)
            }
            17 => (0, 3 + r.take(3) as usize),
            _ => (0, 11 + r.take(7) as usize),
        };
        if i + repeat > total {
            return Err("invalid bit length repeat");
        }
        lens[i..i + repeat].fill(value);
        i += repeat;
    }
    if r.over {
        return Err("input ends inside a block header");
    }
    if lens[256] == 0 {
        return Err("invalid code -- missing end-of-block");
    }
    let (lit, dist) = (&lens[..hlit], &lens[hlit..total]);
    if !code_ok(lit, CodeKind::Data) {
        return Err("invalid literal/lengths set");
    }
    if !code_ok(dist, CodeKind::Data) {
        return Err("invalid distances set");
    }
    Ok((Huff::new(lit), Huff::new(dist)))
}

enum Block {
    /// A block header comes next.
    Header,
    Codes {
        /// The block's codes; `None`: the fixed ones.
        codes: Option<Box<(Huff, Huff)>>,
        last: bool,
    },
    Stored {
        left: u32,
        last: bool,
    },
    /// After the last block.
    End,
}

/// What [`Recover::run`] ended with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The output limit was reached; call again.
    Progress,
    /// A block that is not the last ended: a place where decoding can
    /// resume (see [`Recover::window`], [`Recover::bit`]).
    Block,
    /// The last block ended; the stream's bytes end at this input byte.
    End(u64),
    /// More input is needed and may still arrive.
    NeedInput,
    /// The input ended for good inside the stream.
    Truncated,
    /// Invalid deflate data at this input bit.
    Error(u64, &'static str),
}

/// A deflate decoder that starts at any block boundary with an unknown
/// window. See the module docs.
pub struct Recover {
    input: Data,
    buf: Vec<u8>,
    /// Input offset of `buf[0]`.
    buf_start: u64,
    /// Input bit offset of the next unread bit.
    bit: u64,
    block: Block,
    hist: Box<[u16]>,
    produced: u64,
    /// Output offset just past the last unknown byte.
    unknown_end: u64,
    /// The unknown run being extended, and the finished ones.
    run: Option<(u64, u64)>,
    runs: Vec<(u64, u64)>,
    merge_all: bool,
    blocks: u64,
    /// Dynamic-Huffman headers and stored `LEN`/`NLEN` pairs that checked
    /// out, and every [`FIXED_PROOF`] symbols of fixed-Huffman blocks: what
    /// random bits rarely pass (see [`confirm`]).
    evidence: u64,
    /// Symbols decoded in fixed-Huffman blocks not yet counted as evidence.
    fixed_syms: u64,
    /// Whether no block header was read yet.
    first: bool,
    /// While the blocks decoded so far are all fixed-Huffman ones and fewer
    /// than [`FIXED_PROOF`] symbols long.
    fixed_lead: bool,
    /// The stream began with fewer than [`FIXED_PROOF`] fixed-Huffman
    /// symbols before another block type: nothing vouches for them.
    unproven: bool,
    /// Input bit before which symbols are doubted: their bytes are
    /// unknown. A stream that starts with fixed-Huffman blocks may have
    /// started inside the damage, or out of step with the real symbols
    /// (see [`fixed_sync`]).
    sync_at: u64,
    /// Work beside decoding, in input bits decoded: finding where a
    /// leading fixed-Huffman run is in step.
    side_work: u64,
}

impl Recover {
    /// Decodes `input` from the block header at bit `bit`.
    pub fn new(input: Data, bit: u64) -> Recover {
        Recover {
            input,
            buf: Vec::new(),
            buf_start: 0,
            bit,
            block: Block::Header,
            hist: vec![UNKNOWN; WINDOW].into_boxed_slice(),
            produced: 0,
            unknown_end: 0,
            run: None,
            runs: Vec::new(),
            merge_all: false,
            blocks: 0,
            evidence: 0,
            fixed_syms: 0,
            first: true,
            fixed_lead: false,
            unproven: false,
            sync_at: 0,
            side_work: 0,
        }
    }

    /// Input bit offset of the next unread bit.
    pub fn bit(&self) -> u64 {
        self.bit
    }
    /// Bytes produced.
    pub fn produced(&self) -> u64 {
        self.produced
    }
    /// Blocks decoded to their end.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }
    /// Whether the last 32 KiB of output hold no unknown byte: from here
    /// on every byte is exact, and zlib can continue with [`Self::window`].
    pub fn clean(&self) -> bool {
        self.produced >= self.unknown_end + WINDOW as u64
    }
    /// The last 32 KiB of output, as it was written.
    pub fn window(&self) -> Vec<u8> {
        let n = (self.produced as usize).min(WINDOW);
        let mut w = Vec::with_capacity(n);
        for k in (1..=n).rev() {
            w.push(self.hist[(self.produced as usize).wrapping_sub(k) & MASK] as u8);
        }
        w
    }
    /// Forgets the output so far, as if decoding began here with an
    /// unknown window: between two symbols of a block (after a run that
    /// reached its output limit) the decoder keeps the block's codes and
    /// goes on from this bit. Bytes after it that copy what came before
    /// are unknown. The caller vouches that the symbols from here on are
    /// in step with the real ones (`gzip`'s located damage lies before).
    pub fn restart_here(&mut self) {
        self.hist.fill(UNKNOWN);
        self.produced = 0;
        self.unknown_end = 0;
        self.run = None;
        self.runs.clear();
        self.merge_all = false;
        self.first = false;
        self.fixed_lead = false;
        self.unproven = false;
        self.sync_at = 0;
    }

    /// Output ranges of unknown bytes found since the last call, merged
    /// when closer than 64 bytes (so some known bytes may be listed; an
    /// unknown one never goes unlisted). With `all`, the run still being
    /// extended is included.
    pub fn take_unknown(&mut self, all: bool) -> Vec<(u64, u64)> {
        if all && let Some(r) = self.run.take() {
            self.runs.push(r);
        }
        std::mem::take(&mut self.runs)
    }

    /// Appends a history value: its low byte is the output, bit 8 says
    /// it is unknown (so unknown bytes are what zlib with a window of zeros
    /// writes, and replays agree).
    #[inline]
    fn put(&mut self, v: u16, out: &mut Vec<u8>) {
        let p = self.produced;
        self.hist[p as usize & MASK] = v;
        out.push(v as u8);
        if v & UNKNOWN != 0 {
            self.unknown_end = p + 1;
            match &mut self.run {
                Some((_, end)) if self.merge_all || p <= *end + MERGE_GAP => *end = p + 1,
                _ => {
                    if let Some(r) = self.run.replace((p, p + 1)) {
                        self.runs.push(r);
                        if self.runs.len() >= MAX_RUNS {
                            self.merge_all = true;
                        }
                    }
                }
            }
        }
        self.produced = p + 1;
    }

    /// Makes input from the current byte on present: `Ok(true)` when at
    /// least `want` bytes (or all that will ever exist) are buffered.
    fn fill(&mut self, want: usize) -> io::Result<bool> {
        let at = self.bit / 8;
        let have_end = self.buf_start + self.buf.len() as u64;
        let (avail, fin) = self.input.extent();
        if at >= self.buf_start && at + want as u64 <= have_end {
            return Ok(true);
        }
        if at >= self.buf_start && have_end >= avail && at <= have_end {
            // Everything there is, is buffered.
            return Ok(fin);
        }
        let n = avail.saturating_sub(at).min(IN_CHUNK.max(want) as u64) as usize;
        self.buf.resize(n, 0);
        let got = self.input.read_at(at, &mut self.buf)?;
        self.buf.truncate(got);
        self.buf_start = at;
        Ok(got >= want || (fin && at + got as u64 >= avail))
    }

    /// Decodes until about `max` more bytes were appended to `out`, or a
    /// block ends, or an event.
    pub fn run(&mut self, out: &mut Vec<u8>, max: usize) -> io::Result<Event> {
        let stop = out.len() + max;
        loop {
            match &self.block {
                Block::End => return Ok(Event::End(self.bit.div_ceil(8))),
                Block::Header => {
                    if !self.fill(MAX_HEADER_BYTES)? {
                        return Ok(self.starved());
                    }
                    let rel = self.bit - self.buf_start * 8;
                    let start_bit = self.bit;
                    let mut r = Bits::new(&self.buf, rel);
                    let last = r.take(1) == 1;
                    let kind = r.take(2);
                    let block = match kind {
                        0 => {
                            // To the byte boundary; LEN and NLEN follow.
                            let skip = (8 - (r.pos() % 8) as u32) % 8;
                            r.consume(skip);
                            Block::Stored {
                                left: u32::MAX,
                                last,
                            }
                        }
                        1 => Block::Codes { codes: None, last },
                        2 => match dynamic_header(&mut r) {
                            Ok(c) => Block::Codes {
                                codes: Some(Box::new(c)),
                                last,
                            },
                            Err(_) if r.over => return Ok(self.starved_final()),
                            Err(e) => return Ok(Event::Error(self.bit, e)),
                        },
                        _ => return Ok(Event::Error(self.bit, "invalid block type")),
                    };
                    if r.over {
                        return Ok(self.starved_final());
                    }
                    self.bit = self.buf_start * 8 + r.pos();
                    if kind == 2 {
                        self.evidence += 1;
                    }
                    if std::mem::take(&mut self.first) {
                        self.fixed_lead = kind == 1;
                        if kind == 1 {
                            self.sync_at = u64::MAX;
                        }
                    } else if kind != 1 && std::mem::take(&mut self.fixed_lead) {
                        self.unproven = true;
                    } else if kind != 1 && self.sync_at == u64::MAX {
                        // A header that checked out: in step from here.
                        self.sync_at = start_bit;
                    }
                    self.block = block;
                }
                Block::Stored { left, last } => {
                    let (left, last) = (*left, *last);
                    if left == u32::MAX {
                        if !self.fill(4)? {
                            return Ok(self.starved());
                        }
                        let at = (self.bit / 8 - self.buf_start) as usize;
                        // A final input may hold fewer than 4 bytes here.
                        let Some(b) = self.buf.get(at..at + 4) else {
                            return Ok(self.starved());
                        };
                        let len = u16::from_le_bytes([b[0], b[1]]);
                        let nlen = u16::from_le_bytes([b[2], b[3]]);
                        if len != !nlen {
                            return Ok(Event::Error(self.bit, "invalid stored block lengths"));
                        }
                        self.bit += 32;
                        self.evidence += 1;
                        self.block = Block::Stored {
                            left: len as u32,
                            last,
                        };
                        continue;
                    }
                    if left == 0 {
                        self.end_block(last);
                        if !last {
                            return Ok(Event::Block);
                        }
                        continue;
                    }
                    if out.len() >= stop {
                        return Ok(Event::Progress);
                    }
                    if !self.fill(1)? {
                        return Ok(self.starved());
                    }
                    let at = (self.bit / 8 - self.buf_start) as usize;
                    let n = (left as usize)
                        .min(self.buf.len() - at)
                        .min(stop - out.len());
                    if n == 0 {
                        return Ok(self.starved_final());
                    }
                    for k in 0..n {
                        let v = self.buf[at + k] as u16;
                        self.put(v, out);
                    }
                    self.bit += n as u64 * 8;
                    self.block = Block::Stored {
                        left: left - n as u32,
                        last,
                    };
                }
                Block::Codes { .. } => {
                    if !self.fill(4096)? && self.input.available() <= self.bit / 8 {
                        return Ok(self.starved());
                    }
                    match self.codes(out, stop) {
                        Some(e) => return Ok(e),
                        None => continue,
                    }
                }
            }
        }
    }

    /// Counts a symbol of a fixed-Huffman block toward evidence; `at` is
    /// the input bit after it. When the stream's leading fixed-Huffman
    /// run is proven, finds where its symbols are surely in step.
    #[inline]
    fn count_fixed(&mut self, at: u64, last: bool) {
        self.fixed_syms += 1;
        if self.fixed_syms >= FIXED_PROOF {
            self.evidence += 1;
            self.fixed_syms = 0;
            if std::mem::take(&mut self.fixed_lead) {
                let (sync, steps) = fixed_sync(&self.input, at, last);
                self.sync_at = sync.unwrap_or(u64::MAX);
                self.side_work += steps * 8;
            }
        }
    }

    /// Whether the stream so far began with a fixed-Huffman run too short
    /// to vouch for it.
    fn unvouched_lead(&self) -> bool {
        self.unproven || self.fixed_lead
    }

    fn end_block(&mut self, last: bool) {
        self.blocks += 1;
        self.block = if last { Block::End } else { Block::Header };
    }

    /// Input is missing: a wait, or the end of the input for good.
    fn starved(&self) -> Event {
        if self.input.is_final() {
            Event::Truncated
        } else {
            Event::NeedInput
        }
    }
    /// The buffered input ran out although it was filled: if the input is
    /// final it is truncated, else more must be read.
    fn starved_final(&self) -> Event {
        self.starved()
    }

    /// Decodes symbols of a Huffman block from the buffer. `None`: the
    /// buffer runs low or the block ended; call `run` again.
    fn codes(&mut self, out: &mut Vec<u8>, stop: usize) -> Option<Event> {
        let Block::Codes { codes, last } = std::mem::replace(&mut self.block, Block::End) else {
            return None;
        };
        let buf = std::mem::take(&mut self.buf);
        let at_end =
            self.input.is_final() && self.buf_start + buf.len() as u64 >= self.input.available();
        let mut r = Bits::new(&buf, self.bit - self.buf_start * 8);
        let (lit, dist) = match &codes {
            Some(c) => (&c.0, &c.1),
            None => {
                let f = fixed();
                (&f.0, &f.1)
            }
        };
        let mut result = None;
        let mut ended = false;
        let fixed_codes = codes.is_none();
        loop {
            if out.len() >= stop {
                result = Some(Event::Progress);
                break;
            }
            if r.left() < MAX_SYMBOL_BITS && !at_end {
                break; // refill
            }
            let start = r.pos();
            let Some(sym) = lit.decode(&mut r) else {
                result = Some(Event::Error(
                    self.buf_start * 8 + start,
                    "invalid literal/length code",
                ));
                break;
            };
            if sym < 256 {
                if r.over {
                    result = Some(Event::Truncated);
                    break;
                }
                let doubt = self.buf_start * 8 + start < self.sync_at;
                if fixed_codes {
                    self.count_fixed(self.buf_start * 8 + r.pos(), last);
                }
                self.put(if doubt { sym | UNKNOWN } else { sym }, out);
                continue;
            }
            if sym == 256 {
                if r.over {
                    result = Some(Event::Truncated);
                    break;
                }
                ended = true;
                break;
            }
            let li = (sym - 257) as usize;
            if li >= 29 {
                result = Some(Event::Error(
                    self.buf_start * 8 + start,
                    "invalid literal/length code",
                ));
                break;
            }
            let len = LEN_BASE[li] as usize + r.take(LEN_EXTRA[li] as u32) as usize;
            let Some(ds) = dist.decode(&mut r) else {
                result = Some(Event::Error(
                    self.buf_start * 8 + start,
                    "invalid distance code",
                ));
                break;
            };
            if ds >= 30 {
                result = Some(Event::Error(
                    self.buf_start * 8 + start,
                    "invalid distance code",
                ));
                break;
            }
            let d =
                DIST_BASE[ds as usize] as usize + r.take(DIST_EXTRA[ds as usize] as u32) as usize;
            if r.over {
                result = Some(Event::Truncated);
                break;
            }
            let doubt = self.buf_start * 8 + start < self.sync_at;
            if fixed_codes {
                self.count_fixed(self.buf_start * 8 + r.pos(), last);
            }
            for _ in 0..len {
                let v = self.hist[(self.produced as usize).wrapping_sub(d) & MASK];
                self.put(if doubt { v | UNKNOWN } else { v }, out);
            }
        }
        // Where the last whole symbol ended.
        let pos = if r.over { None } else { Some(r.pos()) };
        let low = r.left() < MAX_SYMBOL_BITS;
        if let Some(p) = pos {
            self.bit = self.buf_start * 8 + p;
        }
        self.buf = buf;
        if ended {
            self.end_block(last);
            return if last { None } else { Some(Event::Block) };
        }
        self.block = Block::Codes { codes, last };
        if result.is_none() && low && !at_end {
            // Read on from the current byte; if nothing more can come yet,
            // say so rather than spin.
            let more = self.input.available() > self.buf_start + self.buf.len() as u64;
            if !more {
                return Some(self.starved());
            }
            self.buf_start = u64::MAX; // force a re-read from self.bit
            self.buf.clear();
            return None;
        }
        result
    }
}

/// What [`find_block`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A block that decodes begins at this input bit.
    Block(u64),
    /// The budget was used up to this input bit; call again from it.
    Scanned(u64),
    /// More input is needed (and may arrive) to go on from this bit.
    NeedInput(u64),
    /// No block begins before the end given or the end of the input.
    Nothing,
}

/// Output a candidate must decode to without two block ends to be believed.
const CONFIRM_OUT: u64 = 1 << 20;

/// Whether decoding from input bit `bit` holds up. Random bits pass as
/// fixed-Huffman blocks for a while (about 36 symbols on average: 2% of
/// fixed codes are invalid), so what counts as evidence is what they
/// rarely pass: dynamic headers and stored `LEN`/`NLEN` that checked out,
/// and each [`FIXED_PROOF`] fixed-Huffman symbols decoded without an
/// error. Two of them and two block ends; or one and [`CONFIRM_OUT`] bytes
/// without an error; or the stream's end where `end_ok` says a stream may
/// end; or, when the input is cut, two, or one and 256 KiB. A stream that
/// starts with fixed-Huffman blocks must prove them before anything else
/// counts: else random bits that happen to end a "block" where a real one
/// starts would pass, and their bytes would become the real block's
/// window. `None`: input is missing.
fn confirm(input: &Data, bit: u64, end_ok: &dyn Fn(u64) -> bool, limit: u64) -> (Verdict, u64) {
    let mut d = Recover::new(input.clone(), bit);
    let mut sink = Vec::with_capacity(64 * 1024);
    let verdict = loop {
        sink.clear();
        let Ok(ev) = d.run(&mut sink, 64 * 1024) else {
            break Verdict::Fails;
        };
        if d.unproven {
            break Verdict::Fails;
        }
        let e = d.evidence;
        match ev {
            Event::Block if e >= 2 && d.blocks() >= 2 => break Verdict::Holds,
            Event::Block | Event::Progress if e >= 1 && d.produced() >= CONFIRM_OUT => {
                break Verdict::Holds;
            }
            Event::Block | Event::Progress if d.produced() >= 4 * CONFIRM_OUT => {
                break Verdict::Fails;
            }
            Event::Block | Event::Progress if d.bit().saturating_sub(bit) + d.side_work > limit => {
                break Verdict::OverBudget;
            }
            Event::Block | Event::Progress => {}
            Event::End(at) => {
                break if e >= 1 && !d.unvouched_lead() && end_ok(at) {
                    Verdict::Holds
                } else {
                    Verdict::Fails
                };
            }
            Event::NeedInput => break Verdict::NeedInput,
            Event::Truncated => {
                break if !d.unvouched_lead() && (e >= 2 || (e >= 1 && d.produced() >= 256 * 1024)) {
                    Verdict::Holds
                } else {
                    Verdict::Fails
                };
            }
            Event::Error(..) => break Verdict::Fails,
        }
    };
    (verdict, d.bit().saturating_sub(bit) + d.side_work)
}

/// What [`confirm`] made of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// A block begins there.
    Holds,
    /// Decoding from there fails, for a reason a later candidate that
    /// falls into step with it shares.
    Fails,
    /// Trial decoding would cost more than the scan's budget allows.
    OverBudget,
    /// Input is missing.
    NeedInput,
}

/// Input bits a scan may trial-decode per bit it scans, and on top of
/// that: what bounds a scan's work, whatever the bytes. Real data decides
/// most candidates within a few symbols and confirms a real block within
/// the allowance; bytes made to pass the cheap checks everywhere run out
/// of it instead of costing a trial decode to their end per candidate.
const TRIAL_PER_BIT: u64 = 8;
const TRIAL_ALLOWANCE: u64 = 2 << 23;

/// Looks for the first input bit at or after `from`, before byte `end`,
/// where a deflate block begins that decodes (see the module docs),
/// scanning at most `budget` bytes and trial-decoding at most
/// `TRIAL_PER_BIT` input bits per bit scanned (plus an allowance):
/// candidates past that are passed over. `end_ok` says whether a deflate stream
/// may end at an input byte (a gzip trailer and the end of the file or the
/// next member follow; a zip entry's data ends there).
pub fn find_block(
    input: &Data,
    from: u64,
    end: u64,
    budget: u64,
    end_ok: &dyn Fn(u64) -> bool,
) -> io::Result<Found> {
    let stop = end.min((from / 8).saturating_add(budget.max(1)));
    let mut buf = vec![0u8; IN_CHUNK + MAX_HEADER_BYTES];
    let mut memo = FixedMemo::new();
    let mut sieve = Sieve::new(true);
    let mut bit = from;
    // Input bits trial-decoded so far.
    let mut spent = 0u64;
    while bit < stop.saturating_mul(8) {
        let base = bit / 8;
        let (avail, fin) = input.extent();
        if base >= avail {
            return Ok(if fin {
                Found::Nothing
            } else {
                Found::NeedInput(bit)
            });
        }
        let want = ((avail - base) as usize).min(buf.len());
        let got = input.read_at(base, &mut buf[..want])?;
        let b = &buf[..got];
        // A header near the end of what was read is read again later
        // with the bytes after it, unless there are none.
        let more = base + (got as u64) < avail || !fin;
        let lim = if more {
            got.saturating_sub(MAX_HEADER_BYTES)
        } else {
            got
        } as u64
            * 8;
        let lim = lim.min((stop - base) * 8);
        let mut rel = bit - base * 8;
        if rel >= lim {
            return Ok(if more {
                Found::NeedInput(bit)
            } else {
                Found::Nothing
            });
        }
        while rel < lim {
            let q = rel & !63;
            for r in positions(sieve.word(b, base, q), q, rel, lim) {
                let Some(at) = candidate(b, base * 8, r, &mut memo, true) else {
                    continue;
                };
                let at = base * 8 + at;
                if at < from {
                    continue;
                }
                let scanned = (base * 8 + r).saturating_sub(from);
                let allowed = scanned
                    .saturating_mul(TRIAL_PER_BIT)
                    .saturating_add(TRIAL_ALLOWANCE);
                let (verdict, cost) = if spent < allowed {
                    confirm(input, at, end_ok, allowed - spent)
                } else {
                    (Verdict::OverBudget, 0)
                };
                spent = spent.saturating_add(cost);
                match verdict {
                    Verdict::Holds => return Ok(Found::Block(at)),
                    Verdict::Fails => memo.failed(),
                    Verdict::OverBudget => memo.walk.clear(),
                    Verdict::NeedInput => return Ok(Found::NeedInput(base * 8 + r)),
                }
            }
            rel = (q + 64).min(lim);
        }
        bit = base * 8 + rel;
        if !more && rel >= got as u64 * 8 {
            return Ok(Found::Nothing);
        }
    }
    Ok(if bit >= end.saturating_mul(8) {
        Found::Nothing
    } else {
        Found::Scanned(bit)
    })
}

/// Finds the bits where a dynamic-Huffman or stored block may start by
/// every check of its header (what rapidgzip's block finder looks for):
/// no trial decode, for a caller that decodes from there anyway and asks
/// for the next one when that fails (see `parallel`). Fixed-Huffman
/// blocks are passed over: a decoder without the window cannot tell
/// whether it is in step with their symbols (see `fixed_sync`), and they
/// are most of the finder's work on bytes where no block starts. The
/// input read is kept, so asking again from just after a candidate reads
/// nothing twice. The input must be final.
pub struct Candidates {
    buf: Vec<u8>,
    /// Input offset of `buf[0]`, and the bytes of `buf` that hold input.
    base: u64,
    got: usize,
    /// Never used: fixed-Huffman runs are not looked at.
    memo: FixedMemo,
    sieve: Sieve,
}

impl Default for Candidates {
    fn default() -> Candidates {
        Candidates::new()
    }
}

impl Candidates {
    /// A finder with nothing read yet.
    pub fn new() -> Candidates {
        Candidates {
            buf: vec![0u8; IN_CHUNK + MAX_HEADER_BYTES],
            base: 0,
            got: 0,
            memo: FixedMemo::none(),
            sieve: Sieve::new(false),
        }
    }

    /// The first candidate bit in `[from, end)` (bits).
    pub fn next(&mut self, input: &Data, from: u64, end: u64) -> io::Result<Option<u64>> {
        let len = input.available();
        let mut bit = from;
        while bit < end {
            let base = bit / 8;
            if base >= len {
                return Ok(None);
            }
            // Read only when the bytes held do not cover `bit` with a
            // header's worth after it.
            let held = self.base + self.got as u64;
            let covered =
                base >= self.base && (base + (MAX_HEADER_BYTES as u64) < held || held >= len);
            if !covered {
                self.got = input.read_at(base, &mut self.buf)?;
                self.base = base;
            }
            let b = &self.buf[..self.got];
            let last = self.base + self.got as u64 >= len;
            let lim = if last {
                self.got
            } else {
                self.got.saturating_sub(MAX_HEADER_BYTES)
            } as u64
                * 8;
            let lim = lim.min(end - self.base * 8);
            let start = bit - self.base * 8;
            let mut rel = start;
            while rel < lim {
                let q = rel & !63;
                for r in positions(self.sieve.word(b, self.base, q), q, rel, lim) {
                    // A stored block's header is before its `LEN`, where
                    // it is found: one before `from` was given before.
                    if let Some(at) = candidate(b, self.base * 8, r, &mut self.memo, false)
                        && self.base * 8 + at >= from
                    {
                        return Ok(Some(self.base * 8 + at));
                    }
                }
                rel = (q + 64).min(lim);
            }
            if last || rel == start {
                return Ok(None);
            }
            bit = self.base * 8 + rel;
        }
        Ok(None)
    }
}

/// The positions of `mask` (bit `j` for bit `q + j`) in `from..to`, in
/// order.
fn positions(mask: u64, q: u64, from: u64, to: u64) -> impl Iterator<Item = u64> {
    let lo = from.saturating_sub(q).min(64);
    let hi = to.saturating_sub(q).min(64);
    let keep = (u64::MAX.checked_shl(lo as u32).unwrap_or(0))
        & (u64::MAX.checked_shr((64 - hi) as u32).unwrap_or(0));
    let mut m = mask & keep;
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let j = m.trailing_zeros() as u64;
            m &= m - 1;
            q + j
        })
    })
}

/// Where a block may start for a scan at bit `rel` of `b`, after the
/// cheap checks and before a trial decode (fixed-Huffman blocks only if
/// `fixed`): `rel` itself for a dynamic
/// header or a fixed-Huffman run that decodes [`FIXED_PROOF`] symbols (or
/// to the end of `b`); for a stored block whose `LEN`, `NLEN` are at byte
/// `rel / 8`, its header's bit in the byte before.
fn candidate(b: &[u8], base: u64, rel: u64, memo: &mut FixedMemo, fixed: bool) -> Option<u64> {
    if rel.is_multiple_of(8) {
        let i = (rel / 8) as usize;
        if i >= 1 && i + 4 <= b.len() {
            let len = u16::from_le_bytes([b[i], b[i + 1]]);
            let nlen = u16::from_le_bytes([b[i + 2], b[i + 3]]);
            if len == !nlen
                && let Some(k) = stored_header_bits(b[i - 1])
            {
                return Some(rel - 8 + k as u64);
            }
        }
    }
    // The 17 header bits, from one load where the bytes are there.
    let i = (rel / 8) as usize;
    let head = match b.get(i..i + 4) {
        Some(w) => (u32::from_le_bytes([w[0], w[1], w[2], w[3]]) >> (rel % 8)) & 0x1_ffff,
        None => Bits::new(b, rel).peek(17),
    };
    if (head >> 1) & 3 == 1 {
        return (fixed && fixed_run_holds(b, base, rel, memo)).then_some(rel);
    }
    // BTYPE = 2 (dynamic), HLIT <= 29, HDIST <= 29.
    if (head >> 1) & 3 != 2 || (head >> 3) & 31 > 29 || (head >> 8) & 31 > 29 {
        return None;
    }
    // Its code-length code must be complete: most positions fail here,
    // before any table is built.
    if !precode_complete(b, rel) {
        return None;
    }
    let mut r = Bits::new(b, rel);
    r.consume(3);
    match dynamic_header(&mut r) {
        Ok(_) if !r.over => Some(rel),
        _ => None,
    }
}

/// Bits from a symbol start within which the next one starts: a fixed
/// code's longest length/distance pair (8+5 and 5+13 bits).
const FIXED_PAIR_BITS: u64 = 31;
/// Input read to find where fixed-Huffman paths come into step.
const SYNC_SPAN: usize = 64 * 1024;

/// A fixed-Huffman decoding path of [`fixed_sync`]: the bit it is at, and
/// what comes there.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PathAt {
    /// A symbol of a block (of the last block or not).
    Symbol(u64, bool),
    /// A block header.
    Header(u64),
    /// Stopped at a header of another type, or after the last block.
    Stopped(u64),
}

impl PathAt {
    fn bit(self) -> u64 {
        match self {
            PathAt::Symbol(b, _) | PathAt::Header(b) | PathAt::Stopped(b) => b,
        }
    }
}

/// Where fixed-Huffman decoding is surely in step with the real symbols,
/// given that a symbol of a fixed-Huffman block (the last one if `last`)
/// ends at input bit `at` and that real fixed-Huffman data follows.
/// Decoding that starts off a symbol boundary does not always fall into
/// step with the real symbols, and in real data (unlike random bits) it
/// rarely meets an invalid code, so an error-free run proves nothing about
/// being in step. But one of the paths that start at each of the
/// [`FIXED_PAIR_BITS`] bits from `at` starts on a real boundary and stays
/// on the real symbols: where all paths that survive have met, decoding is
/// in step. `None`: they do not meet within [`SYNC_SPAN`] bytes.
fn fixed_sync(input: &Data, at: u64, last: bool) -> (Option<u64>, u64) {
    let base = at / 8;
    let mut buf = vec![0u8; SYNC_SPAN];
    let Ok(n) = input.read_at(base, &mut buf) else {
        return (None, 0);
    };
    let b = &buf[..n];
    let rel = at - base * 8;
    let (lit, dist) = fixed();
    let mut paths: Vec<PathAt> = (0..FIXED_PAIR_BITS)
        .map(|k| PathAt::Symbol(rel + k, last))
        .collect();
    // Symbols decoded, the work this costs.
    let mut steps = 0u64;
    loop {
        if paths.len() == 1 {
            return (Some(base * 8 + paths[0].bit()), steps);
        }
        // Advance the path furthest behind.
        let Some(i) = paths
            .iter()
            .enumerate()
            .filter(|(_, p)| !matches!(p, PathAt::Stopped(_)))
            .min_by_key(|(_, p)| p.bit())
            .map(|(i, _)| i)
        else {
            return (None, steps);
        };
        steps += 1;
        let mut r = Bits::new(b, paths[i].bit());
        if r.left() < MAX_SYMBOL_BITS {
            return (None, steps);
        }
        let next = match paths[i] {
            PathAt::Header(_) => {
                let head = r.take(3);
                if (head >> 1) & 3 == 1 {
                    Some(PathAt::Symbol(r.pos(), head & 1 == 1))
                } else {
                    Some(PathAt::Stopped(paths[i].bit()))
                }
            }
            PathAt::Symbol(_, last) => match lit.decode(&mut r) {
                Some(256) if last => Some(PathAt::Stopped(r.pos())),
                Some(256) => Some(PathAt::Header(r.pos())),
                Some(sym) if sym < 256 => Some(PathAt::Symbol(r.pos(), last)),
                Some(sym) if sym < 286 => {
                    r.consume(LEN_EXTRA[(sym - 257) as usize] as u32);
                    match dist.decode(&mut r) {
                        Some(ds) if ds < 30 => {
                            r.consume(DIST_EXTRA[ds as usize] as u32);
                            Some(PathAt::Symbol(r.pos(), last))
                        }
                        _ => None,
                    }
                }
                _ => None,
            },
            stopped @ PathAt::Stopped(_) => Some(stopped),
        };
        match next {
            // A path that lands where another is has met it.
            Some(p) if paths.iter().enumerate().any(|(k, q)| k != i && *q == p) => {
                paths.swap_remove(i);
            }
            Some(p) => paths[i] = p,
            None => {
                paths.swap_remove(i);
                if paths.is_empty() {
                    return (None, steps);
                }
            }
        }
    }
}

/// What [`fixed_run_holds`] learnt of the bits it decoded: from a state
/// (a bit position, whether a header or a symbol of a last block or not
/// comes next), how many symbols decode before the run stops. Runs from
/// nearby bits fall into step within a few symbols (Huffman codes
/// resynchronise), so most candidates end at a state already seen.
struct FixedMemo {
    /// `(state + 1, symbols left)`, indexed by the state's low bits.
    seen: Vec<(u64, u32)>,
    /// The states of the run under way, with the symbols decoded before
    /// each.
    path: Vec<(u64, u64)>,
    /// The states of the last run that held, until its trial decode
    /// decides: if that fails, runs that meet them fail alike.
    walk: Vec<u64>,
}

const MEMO_SLOTS: usize = 16384;

/// A state's slot: hashed, since the states of one run step by a
/// symbol's bits (by 8 bits in runs of one literal) and would fill a few
/// slots of a plain modulus.
fn memo_slot(state: u64) -> usize {
    (state.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 50) as usize % MEMO_SLOTS
}

impl FixedMemo {
    fn new() -> FixedMemo {
        FixedMemo {
            seen: vec![(0, 0); MEMO_SLOTS],
            path: Vec::new(),
            walk: Vec::new(),
        }
    }
    /// One that remembers nothing: every run is decoded to its end.
    fn none() -> FixedMemo {
        FixedMemo {
            seen: Vec::new(),
            path: Vec::new(),
            walk: Vec::new(),
        }
    }
    fn get(&self, state: u64) -> Option<u32> {
        let &(k, left) = self.seen.get(memo_slot(state))?;
        (k == state + 1).then_some(left)
    }
    fn set(seen: &mut [(u64, u32)], state: u64, left: u32) {
        if let Some(e) = seen.get_mut(memo_slot(state)) {
            *e = (state + 1, left);
        }
    }
    /// Records that the run under way stopped after `total` symbols.
    fn settle(&mut self, total: u64) {
        for &(st, at) in &self.path {
            let left = total.saturating_sub(at).min(u32::MAX as u64) as u32;
            FixedMemo::set(&mut self.seen, st, left);
        }
        self.path.clear();
    }
    /// Keeps the run under way, which held, as the one a trial decode
    /// now decides.
    /// Its states are marked as holding, so runs that meet them stop
    /// there instead of walking the same symbols again.
    fn held(&mut self) {
        self.walk.clear();
        for &(st, _) in &self.path {
            FixedMemo::set(&mut self.seen, st, u32::MAX);
            self.walk.push(st);
        }
        self.path.clear();
    }
    /// The trial decode of the last run that held failed. Once two
    /// fixed-Huffman runs meet, they decode the same symbols from the same
    /// bits, so a later candidate that meets this one within its first
    /// symbols fails the same way (with fewer symbols behind it, it has
    /// no more evidence): it is not decoded again. Without this, bytes
    /// that decode as literals from every other bit (alternating bits)
    /// cost a trial decode to their end per candidate: quadratic.
    fn failed(&mut self) {
        for &st in &self.walk {
            FixedMemo::set(&mut self.seen, st, 0);
        }
        self.walk.clear();
    }
}

/// Whether fixed-Huffman blocks from the header at bit `rel` of `b`
/// decode [`FIXED_PROOF`] symbols without an invalid code, or run into
/// the end of `b` trying (then the trial decode decides). Only the
/// symbols are checked: a copy's distance may reach into the unknown
/// window. `b` starts at input bit `base`.
fn fixed_run_holds(b: &[u8], base: u64, rel: u64, memo: &mut FixedMemo) -> bool {
    let (lit, dist) = fixed();
    // The first symbol's state is often on a run seen before.
    memo.walk.clear();
    if let Some(left) =
        memo.get((base + rel + 3) * 4 + (b[(rel / 8) as usize] >> (rel % 8) & 1) as u64)
    {
        return left as u64 >= FIXED_PROOF;
    }
    let mut r = Bits::new(b, rel);
    let mut syms = 0u64;
    memo.path.clear();
    // Symbols this run decodes before it stops (None: it got far enough,
    // or to the end of `b`).
    let stop = 'run: loop {
        let st = (base + r.pos()) * 4 + 2;
        if let Some(left) = memo.get(st) {
            break 'run Some(syms + left as u64);
        }
        memo.path.push((st, syms));
        let head = r.take(3);
        if r.over {
            break None;
        }
        if (head >> 1) & 3 != 1 {
            break Some(syms);
        }
        let last = (head & 1) as u64;
        loop {
            if r.left() < MAX_SYMBOL_BITS {
                break 'run None;
            }
            let st = (base + r.pos()) * 4 + last;
            if let Some(left) = memo.get(st) {
                break 'run Some(syms + left as u64);
            }
            memo.path.push((st, syms));
            let Some(sym) = lit.decode(&mut r) else {
                break 'run Some(syms);
            };
            if sym == 256 {
                if last == 1 {
                    break 'run Some(syms);
                }
                break;
            }
            if sym > 256 {
                let li = (sym - 257) as usize;
                if li >= 29 {
                    break 'run Some(syms);
                }
                r.consume(LEN_EXTRA[li] as u32);
                match dist.decode(&mut r) {
                    Some(ds) if ds < 30 => r.consume(DIST_EXTRA[ds as usize] as u32),
                    _ => break 'run Some(syms),
                }
            }
            syms += 1;
            if syms >= FIXED_PROOF {
                break 'run None;
            }
        }
    };
    match stop {
        Some(total) if total < FIXED_PROOF => {
            memo.settle(total);
            false
        }
        Some(total) => {
            let walk: Vec<u64> = memo.path.iter().map(|&(st, _)| st).collect();
            memo.settle(total);
            memo.walk = walk;
            true
        }
        None => {
            memo.held();
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;
    use crate::data::inflate::zlib::{Code, RawInflate};
    use std::sync::Arc;

    /// The one-load precode check says what reading the lengths one by
    /// one and checking them as zlib does says, at every bit of random
    /// bytes (complete codes are rare: the bytes are many).
    #[test]
    fn the_fast_precode_check_agrees_with_zlibs() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let b: Vec<u8> = (0..200_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let mut complete = 0;
        for rel in 0..(b.len() as u64 - 16) * 8 {
            let mut r = Bits::new(&b, rel + 13);
            let hclen = r.take(4) as usize + 4;
            let mut cl = [0u8; 19];
            for &i in &CL_ORDER[..hclen] {
                cl[i] = r.take(3) as u8;
            }
            let zlib = code_ok(&cl, CodeKind::Precode) && cl.iter().any(|&l| l != 0);
            assert_eq!(precode_complete(&b, rel), zlib, "bit {rel}");
            complete += usize::from(zlib);
        }
        assert!(complete > 1000, "{complete}");
    }

    fn deflate(data: &[u8], level: u32) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::new(level));
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    /// Text-like data with long-range repeats, as a tar of sources is:
    /// words from a vocabulary of random ones, and random numbers.
    fn sample(n: usize) -> Vec<u8> {
        let mut x = 0x9e3779b97f4a7c15u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let vocab: Vec<Vec<u8>> = (0..2000)
            .map(|_| {
                let len = 2 + next() % 9;
                (0..len).map(|_| b'a' + (next() % 26) as u8).collect()
            })
            .collect();
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let r = next();
            out.extend_from_slice(&vocab[(r % 2000) as usize]);
            out.push(if r % 11 == 0 { b'\n' } else { b' ' });
            if r % 5 == 0 {
                out.extend_from_slice(format!("{} ", r >> 40).as_bytes());
            }
        }
        out.truncate(n);
        out
    }

    /// Input bit offsets of every block boundary zlib sees, with the
    /// output offset there.
    fn boundaries(z: &[u8]) -> Vec<(u64, u64)> {
        let mut d = RawInflate::new();
        let mut out = vec![0u8; 1 << 16];
        let (mut pos, mut made) = (0usize, 0u64);
        let mut v = Vec::new();
        loop {
            let s = d.inflate(&z[pos..], &mut out, true);
            pos += s.consumed;
            made += s.produced as u64;
            if d.at_block_boundary() {
                let bits = (d.data_type() & 7) as u64;
                v.push((pos as u64 * 8 - bits, made));
            }
            if s.code == Code::StreamEnd || s.code == Code::DataError {
                break;
            }
        }
        v.dedup();
        v
    }

    fn mem(b: Vec<u8>) -> Data {
        Arc::new(MemSource::new(b))
    }

    fn decode_all(d: &mut Recover) -> (Vec<u8>, Event) {
        let mut out = Vec::new();
        loop {
            match d.run(&mut out, 1 << 20).unwrap() {
                Event::Progress | Event::Block => {}
                e => return (out, e),
            }
        }
    }

    #[test]
    fn decodes_from_every_block_boundary_with_unknowns_marked() {
        let data = sample(3 << 20);
        for level in [2, 6, 9] {
            let z = deflate(&data, level);
            let input = mem(z.clone());
            let bounds = boundaries(&z);
            assert!(bounds.len() > 3, "level {level}: {} blocks", bounds.len());
            for &(bit, out_at) in bounds.iter().take(6) {
                let mut d = Recover::new(input.clone(), bit);
                let (out, ev) = decode_all(&mut d);
                assert_eq!(ev, Event::End(z.len() as u64), "level {level} bit {bit}");
                let want = &data[out_at as usize..];
                assert_eq!(out.len(), want.len());
                let unknown = d.take_unknown(true);
                let mut is_unknown = vec![false; out.len()];
                for (s, e) in &unknown {
                    is_unknown[*s as usize..*e as usize].fill(true);
                }
                for (i, (&a, &b)) in out.iter().zip(want).enumerate() {
                    assert!(
                        is_unknown[i] || a == b,
                        "level {level} byte {i} wrong and not listed"
                    );
                }
                // zlib with a window of zeros gives the same bytes.
                let mut z2 = RawInflate::new();
                let k = (bit % 8) as u8;
                let byte = (bit / 8) as usize;
                let mut from = byte;
                if k > 0 {
                    z2.prime(8 - k, z[byte] >> k);
                    from += 1;
                }
                assert!(z2.set_dictionary(&[0u8; WINDOW]));
                let mut again = vec![0u8; out.len() + 16];
                let s = z2.inflate(&z[from..], &mut again, false);
                assert_eq!(s.code, Code::StreamEnd);
                assert_eq!(&again[..s.produced], &out[..]);
            }
        }
    }

    #[test]
    fn finds_the_next_block_after_damage() {
        let data = sample(4 << 20);
        let mut z = deflate(&data, 6);
        let bounds = boundaries(&z);
        let hit = z.len() / 3;
        let mut x = 12345u64;
        for b in &mut z[hit..hit + 4096] {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = (x >> 33) as u8;
        }
        let input = mem(z.clone());
        let from = (hit as u64 + 4096) * 8;
        let want = bounds.iter().find(|b| b.0 >= from).unwrap();
        let f = find_block(&input, from, z.len() as u64, u64::MAX, &|e| {
            e == z.len() as u64
        })
        .unwrap();
        assert_eq!(f, Found::Block(want.0));
    }

    #[test]
    fn finds_pigz_style_stored_blocks() {
        // A stream made of independent parts joined by empty stored blocks.
        let data = sample(1 << 20);
        let mut z = Vec::new();
        let mut e = flate2::write::DeflateEncoder::new(&mut z, flate2::Compression::new(6));
        use std::io::Write;
        for part in data.chunks(128 * 1024) {
            e.write_all(part).unwrap();
            e.flush().unwrap();
        }
        e.finish().unwrap();
        let input = mem(z.clone());
        let f = find_block(&input, z.len() as u64 * 4, z.len() as u64, u64::MAX, &|e| {
            e == z.len() as u64
        })
        .unwrap();
        let Found::Block(s) = f else { panic!("{f:?}") };
        let mut d = Recover::new(input.clone(), s);
        let (out, ev) = decode_all(&mut d);
        assert_eq!(ev, Event::End(z.len() as u64));
        let tail = &data[data.len() - out.len()..];
        let unknown = d.take_unknown(true);
        let mut ok = vec![true; out.len()];
        for (s, e) in unknown {
            ok[s as usize..e as usize].fill(false);
        }
        assert!(
            out.iter()
                .zip(tail)
                .zip(&ok)
                .all(|((a, b), k)| !k || a == b)
        );
    }

    #[test]
    fn a_stored_header_cut_short_is_truncation() {
        // BFINAL=0, BTYPE=00, then two of the four LEN/NLEN bytes.
        let input = mem(vec![0x00, 0x05, 0x00]);
        let mut d = Recover::new(input, 0);
        let (out, ev) = decode_all(&mut d);
        assert!(out.is_empty());
        assert_eq!(ev, Event::Truncated);
    }

    /// Fixed-Huffman blocks written bit by bit as RFC 1951 §3.2.6 says:
    /// `blocks` blocks of `per` symbols (literals of `text`, and every
    /// seventh a copy of 3 bytes from 1 back), the last one final. Gives
    /// the stream and the bit where each block starts.
    fn fixed_stream(text: &[u8], blocks: usize, per: usize) -> (Vec<u8>, Vec<u64>) {
        let mut out = Vec::new();
        let (mut acc, mut n) = (0u64, 0u32);
        let mut bits = 0u64;
        let mut put = |v: u32, k: u32, msb_first: bool, out: &mut Vec<u8>| {
            let v = if msb_first {
                v.reverse_bits() >> (32 - k)
            } else {
                v
            };
            acc |= (v as u64) << n;
            n += k;
            bits += k as u64;
            while n >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                n -= 8;
            }
            bits
        };
        let lit = |c: u32| match c {
            0..=143 => (0x30 + c, 8),
            144..=255 => (0x190 + c - 144, 9),
            256..=279 => (c - 256, 7),
            _ => (0xc0 + c - 280, 8),
        };
        let mut starts = Vec::new();
        let mut t = text.iter().cycle();
        for k in 0..blocks {
            starts.push(put(0, 0, false, &mut out));
            put(u32::from(k + 1 == blocks), 1, false, &mut out);
            put(1, 2, false, &mut out);
            for i in 0..per {
                if i % 7 == 6 {
                    let (c, l) = lit(257);
                    put(c, l, true, &mut out);
                    put(0, 5, true, &mut out);
                } else {
                    let (c, l) = lit(*t.next().unwrap() as u32);
                    put(c, l, true, &mut out);
                }
            }
            let (c, l) = lit(256);
            put(c, l, true, &mut out);
        }
        if n > 0 {
            out.push(acc as u8);
        }
        (out, starts)
    }

    /// Every bit the full checks take as a candidate, the sieve gives (it
    /// may give more: the full checks go on where it stops). Its
    /// fixed-Huffman counts are exact: on random bytes it lets through
    /// only runs that reach the end of the bytes. Checked on random bytes,
    /// on zlib's dynamic blocks and on fixed-Huffman blocks.
    #[test]
    fn the_sieve_gives_every_bit_the_full_checks_take() {
        let mut x = 7u64;
        let random: Vec<u8> = (0..48 * 1024)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                (x >> 33) as u8
            })
            .collect();
        // Over 64 Kibit: runs that cross from one window of the sieve's
        // fixed-Huffman count into the next.
        let (fixed, starts) = fixed_stream(&sample(4096), 3, 3000);
        let dynamic = deflate(&sample(40_000), 6);
        let stored = deflate(&sample(40_000), 0);
        for (name, b) in [
            ("random", &random),
            ("fixed", &fixed),
            ("dynamic", &dynamic),
            ("stored", &stored),
        ] {
            let mut sieve = Sieve::new(true);
            let (mut taken, mut fixed_extra) = (0, 0);
            let nbits = b.len() as u64 * 8;
            let mut word = 0;
            for rel in 0..nbits {
                if rel % 64 == 0 {
                    word = sieve.word(b, 0, rel);
                }
                let given = word >> (rel % 64) & 1 == 1;
                let full = candidate(b, 0, rel, &mut FixedMemo::none(), true).is_some();
                assert!(given || !full, "{name}: bit {rel} passes the full checks");
                taken += usize::from(full);
                let head = Bits::new(b, rel).peek(3);
                if given && !full && (head >> 1) & 3 == 1 {
                    fixed_extra += 1;
                }
            }
            match name {
                "random" => assert!(fixed_extra < 1000, "{fixed_extra} fixed let through"),
                "fixed" => {
                    for &s in &starts {
                        assert!(candidate(b, 0, s, &mut FixedMemo::none(), true).is_some());
                    }
                }
                _ => assert!(taken > 0, "{name}"),
            }
        }
    }

    /// Candidates are found past the first read: a stored block after
    /// 1 MiB of zeros (which hold no candidate, checked), as parallel
    /// decoding meets it in a piece of big blocks.
    #[test]
    fn candidates_are_found_past_the_first_read() {
        let mut b = vec![0u8; 1 << 20];
        let mut c = Candidates::new();
        let end = b.len() as u64 * 8;
        assert_eq!(c.next(&mem(b.clone()), 0, end).unwrap(), None);
        b.extend_from_slice(&deflate(&sample(100), 0));
        b.extend_from_slice(&[0x55; 64]);
        let end = b.len() as u64 * 8;
        let found = Candidates::new().next(&mem(b), 0, end).unwrap();
        assert_eq!(found, Some(1 << 23));
    }

    #[test]
    fn random_bytes_hold_no_block() {
        let mut x = 99u64;
        let b: Vec<u8> = (0..256 * 1024)
            .map(|_| {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                (x >> 33) as u8
            })
            .collect();
        let n = b.len() as u64;
        let f = find_block(&mem(b), 0, n, u64::MAX, &|e| e == n).unwrap();
        assert_eq!(f, Found::Nothing);
    }
}
