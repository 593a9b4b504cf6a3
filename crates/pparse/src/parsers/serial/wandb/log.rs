//! The W&B log layer: a LevelDB-style log of 32 KiB blocks and checksummed
//! chunks, reassembled into records.
//!
//! Framing (written by the `wandb` SDK): a 7-byte file header `:W&B`,
//! `E1 BE`, version 0, which sits inside the first block; then chunks, each
//! a 7-byte header (CRC-32 of type byte and payload, u16 length, type 1
//! FULL, 2 FIRST, 3 MIDDLE, 4 LAST) and its payload, never crossing a block
//! boundary. Fewer than 7 bytes left in a block are zero padding. A record
//! is one FULL chunk or FIRST, MIDDLE*, LAST.
//!
//! The wandb-core writer before 0.17.6 wrote the file header outside its
//! block buffer, so its blocks start 7 bytes later (`7 + k·32768`); such a
//! log is read with [`Framing::Shifted`], which [`detect`] picks by reading
//! the first blocks both ways.
//!
//! Damage never stops the reader. A chunk that fails (bad type, length past
//! its block, checksum mismatch) is reported with its range and reason, and
//! reading resumes at the next byte where a chunk header checks out — its
//! CRC makes a false match about a 2⁻³² chance — or at the next block.

use std::borrow::Cow;

use crate::data::Range;
use crate::parsers::serial::protobuf::wire::Bytes;
use crate::status::Status;

/// Size of a log block.
pub const BLOCK: u64 = 32 * 1024;
/// The file header: identifier, magic 0xBEE1 (little-endian) and version 0.
pub const MAGIC: [u8; 7] = [b':', b'W', b'&', b'B', 0xe1, 0xbe, 0x00];
/// Size of a chunk header.
pub const CHUNK_HEADER: u64 = 7;
/// Largest record reassembled; a longer chunk sequence is reported instead.
pub const MAX_RECORD: u64 = 256 << 20;

/// Where the blocks are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Blocks at `k·32768`; the file header is in block 0.
    Standard,
    /// Blocks at `7 + k·32768` (wandb-core before 0.17.6).
    Shifted,
}

impl Framing {
    fn shift(self) -> u64 {
        match self {
            Framing::Standard => 0,
            Framing::Shifted => 7,
        }
    }
    /// The end of the block holding `pos`.
    pub fn block_end(self, pos: u64) -> u64 {
        let s = self.shift();
        if pos < s {
            return s + BLOCK;
        }
        s + ((pos - s) / BLOCK + 1) * BLOCK
    }
    pub(super) fn describe(self) -> &'static str {
        match self {
            Framing::Standard => "32 KiB blocks from offset 0",
            Framing::Shifted => {
                "32 KiB blocks shifted by the 7-byte header (wandb-core before 0.17.6)"
            }
        }
    }
}

/// Chunk types.
pub const FULL: u8 = 1;
const FIRST: u8 = 2;
const MIDDLE: u8 = 3;
const LAST: u8 = 4;

pub(super) fn chunk_type_name(t: u8) -> &'static str {
    match t {
        FULL => "FULL",
        FIRST => "FIRST",
        MIDDLE => "MIDDLE",
        LAST => "LAST",
        _ => "invalid",
    }
}

/// One good chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub(super) kind: u8,
    /// Header and payload.
    pub range: Range,
    pub(super) crc: u32,
}

impl Chunk {
    pub(super) fn payload(&self) -> Range {
        Range::new(self.range.start + CHUNK_HEADER, self.range.end)
    }
}

/// Something wrong in the log: its bytes and what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damaged {
    /// The bytes given up: a chunk, a run of chunks, or up to where reading
    /// resumed.
    pub range: Range,
    /// Truncated when the log ends inside it, else corrupt.
    pub status: Status,
    /// What is wrong, for a reader.
    pub reason: String,
}

/// What the chunk layer finds, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A chunk whose header and checksum check out.
    Chunk(Chunk),
    /// Bytes that hold no good chunk.
    Damaged(Damaged),
}

/// The CRC the writers store: CRC-32 (IEEE) of the type byte and payload.
fn crc_of(kind: u8, payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&[kind]);
    h.update(payload);
    h.finalize()
}

/// Reads chunks from a position on. It holds no bytes: each call is given
/// them, so a parser can keep it across steps while its source grows.
pub struct ChunkReader {
    pub(super) layout: Framing,
    /// Where the next chunk starts.
    pub pos: u64,
    /// Where reading stops (the end of the bytes, or a block boundary
    /// while more bytes are coming).
    pub end: u64,
    buf: Vec<u8>,
}

/// A [`ChunkReader`] over some bytes, as an iterator.
pub struct Chunks<'a, B: ?Sized> {
    bytes: &'a B,
    reader: ChunkReader,
}

impl<'a, B: Bytes + ?Sized> Chunks<'a, B> {
    /// Chunks after the file header.
    pub fn new(bytes: &'a B, layout: Framing) -> Self {
        Chunks {
            bytes,
            reader: ChunkReader::new(layout, bytes.size()),
        }
    }

    /// Stops reading at `end` (at most the bytes' size).
    pub fn until(mut self, end: u64) -> Self {
        self.reader.end = self.reader.end.min(end);
        self
    }
}

impl<B: Bytes + ?Sized> Iterator for Chunks<'_, B> {
    type Item = Event;
    fn next(&mut self) -> Option<Event> {
        self.reader.next(self.bytes)
    }
}

impl ChunkReader {
    pub(super) fn new(layout: Framing, end: u64) -> ChunkReader {
        ChunkReader {
            layout,
            pos: MAGIC.len() as u64,
            end,
            buf: vec![0; BLOCK as usize],
        }
    }

    /// The chunk at `pos` if its header and checksum check out.
    fn chunk_at<B: Bytes + ?Sized>(
        &mut self,
        bytes: &B,
        pos: u64,
        block_end: u64,
    ) -> Result<Chunk, (Status, String)> {
        let avail = self.end;
        let mut h = [0u8; 7];
        let n = bytes.read(pos, &mut h[..((avail - pos).min(7)) as usize]);
        if n < 7 {
            return Err((
                Status::Truncated,
                format!("the log ends inside a chunk header ({n} of 7 bytes)"),
            ));
        }
        let crc = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let len = u64::from(u16::from_le_bytes([h[4], h[5]]));
        let kind = h[6];
        if kind == 0 && len == 0 && crc == 0 {
            return Err((
                Status::Corrupt,
                "zero bytes where a chunk header should be".into(),
            ));
        }
        if !(FULL..=LAST).contains(&kind) {
            return Err((Status::Corrupt, format!("invalid chunk type {kind}")));
        }
        let room = block_end - pos - CHUNK_HEADER;
        if len > room {
            return Err((
                Status::Corrupt,
                format!("implausible chunk length ({len} > {room} bytes left in the block)"),
            ));
        }
        let end = pos + CHUNK_HEADER + len;
        if end > avail {
            return Err((
                Status::Truncated,
                format!(
                    "the log ends inside a {} chunk ({} of {len} payload bytes)",
                    chunk_type_name(kind),
                    avail - pos - CHUNK_HEADER
                ),
            ));
        }
        let from = pos + CHUNK_HEADER;
        let got = match bytes.slice() {
            Some(s) => crc_of(kind, &s[from as usize..end as usize]),
            None => {
                let p = &mut self.buf[..len as usize];
                bytes.read(from, p);
                crc_of(kind, p)
            }
        };
        if got != crc {
            return Err((
                Status::Corrupt,
                format!(
                    "checksum mismatch in a {} chunk (stored {crc:08x}, computed {got:08x})",
                    chunk_type_name(kind)
                ),
            ));
        }
        Ok(Chunk {
            kind,
            range: Range::new(pos, end),
            crc,
        })
    }

    /// The next position after `from` (within its block) where a chunk
    /// checks out, or the block's end.
    fn resync<B: Bytes + ?Sized>(&mut self, bytes: &B, from: u64, block_end: u64) -> u64 {
        let mut h = [0u8; 7];
        let mut p = from;
        while p + CHUNK_HEADER <= block_end.min(self.end) {
            bytes.read(p, &mut h);
            let len = u64::from(u16::from_le_bytes([h[4], h[5]]));
            // Cheap tests first: a type byte and a length that fits.
            if (FULL..=LAST).contains(&h[6])
                && p + CHUNK_HEADER + len <= block_end.min(self.end)
                && self.chunk_at(bytes, p, block_end).is_ok()
            {
                return p;
            }
            p += 1;
        }
        block_end.min(self.end)
    }

    /// The next chunk or damage; `None` at `end`.
    pub fn next<B: Bytes + ?Sized>(&mut self, bytes: &B) -> Option<Event> {
        if self.pos >= self.end {
            return None;
        }
        let pos = self.pos;
        let block_end = self.layout.block_end(pos);
        let left = block_end - pos;
        if left < CHUNK_HEADER {
            // The block's trailer: zero padding.
            let stop = block_end.min(self.end);
            let mut t = [0u8; 7];
            let n = bytes.read(pos, &mut t[..(stop - pos) as usize]);
            self.pos = stop;
            if t[..n].iter().any(|&b| b != 0) {
                return Some(Event::Damaged(Damaged {
                    range: Range::new(pos, stop),
                    status: Status::Corrupt,
                    reason: format!("nonzero padding in the last {left} bytes of a block"),
                }));
            }
            return self.next(bytes);
        }
        match self.chunk_at(bytes, pos, block_end) {
            Ok(c) => {
                self.pos = c.range.end;
                Some(Event::Chunk(c))
            }
            Err((status, reason)) => {
                let to = if status == Status::Truncated {
                    self.end
                } else {
                    self.resync(bytes, pos + 1, block_end)
                };
                self.pos = to;
                let zeros = reason.starts_with("zero bytes");
                let mut bad = Damaged {
                    range: Range::new(pos, to),
                    status,
                    reason,
                };
                if zeros {
                    // Zeros to the end of the file are space a writer set
                    // aside and never filled (the run stopped): the log is cut.
                    if all_zero(bytes, pos, self.end) {
                        self.pos = self.end;
                        bad = Damaged {
                            range: Range::new(pos, self.end),
                            status: Status::Truncated,
                            reason: format!(
                                "the log ends in {} zero bytes (space never written)",
                                self.end - pos
                            ),
                        };
                    } else if all_zero(bytes, pos, to) {
                        bad.reason = format!("{} zero bytes where chunks should be", to - pos);
                    }
                }
                Some(Event::Damaged(bad))
            }
        }
    }
}

fn all_zero<B: Bytes + ?Sized>(b: &B, mut from: u64, to: u64) -> bool {
    let mut buf = [0u8; 4096];
    while from < to {
        let n = b.read(from, &mut buf[..((to - from).min(4096)) as usize]);
        if n == 0 || buf[..n].iter().any(|&x| x != 0) {
            return n == 0;
        }
        from += n as u64;
    }
    true
}

/// Blocks read by [`detect`] under each layout.
const DETECT_BLOCKS: u64 = 16;

/// Picks the layout under which the first blocks read with fewer errors
/// (the standard one on a tie).
pub fn detect<B: Bytes + ?Sized>(b: &B) -> Framing {
    let end = b.size().min(DETECT_BLOCKS * BLOCK + 7);
    let score = |l: Framing| {
        Chunks::new(b, l)
            .until(end)
            .map(|e| match e {
                Event::Chunk(_) => 0u64,
                Event::Damaged(b) if b.status == Status::Truncated => 0,
                Event::Damaged(b) => 1 + b.range.len() / 1024,
            })
            .sum::<u64>()
    };
    let standard = score(Framing::Standard);
    if standard == 0 {
        return Framing::Standard;
    }
    if score(Framing::Shifted) < standard {
        Framing::Shifted
    } else {
        Framing::Standard
    }
}

/// Checks the 7-byte file header; `Err` says what is wrong.
pub fn check_header(head: &[u8]) -> Result<(), String> {
    if head.len() < 7 {
        return Err(format!(
            "the file is too short for the W&B header ({} of 7 bytes)",
            head.len()
        ));
    }
    if head[..4] != MAGIC[..4] {
        return Err(format!(
            "invalid W&B identifier {:02x?} (expected \":W&B\")",
            &head[..4]
        ));
    }
    if head[4..6] != MAGIC[4..6] {
        return Err(format!(
            "invalid W&B magic {:02x}{:02x} (expected e1be)",
            head[4], head[5]
        ));
    }
    if head[6] != 0 {
        return Err(format!("W&B log version {} (only 0 is known)", head[6]));
    }
    Ok(())
}

/// A record's chunks, or damage, from the chunk stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// The chunks of one whole record: a FULL, or FIRST, MIDDLE*, LAST.
    Record(Vec<Chunk>),
    /// Damage: bad chunks, or a record whose chunk sequence is broken.
    Damaged(Damaged),
}

impl Item {
    /// The bytes of the record's chunks (headers included), or of the damage.
    pub fn range(&self) -> Range {
        match self {
            Item::Record(c) => Range::new(c[0].range.start, c[c.len() - 1].range.end),
            Item::Damaged(b) => b.range,
        }
    }
}

/// Reassembles records from chunks, reporting broken sequences. Like
/// [`ChunkReader`] it is given the bytes on each call.
pub struct RecordReader {
    pub(super) chunks: ChunkReader,
    open: Vec<Chunk>,
    /// MIDDLE/LAST chunks seen without a FIRST, gathered into one report.
    orphans: Option<Range>,
    queue: std::collections::VecDeque<Item>,
    /// Set when the bytes are final: the end of the chunks is the end of the log.
    pub at_end: bool,
    done: bool,
}

/// A [`RecordReader`] over final bytes, as an iterator.
pub struct Records<'a, B: ?Sized> {
    bytes: &'a B,
    pub(super) reader: RecordReader,
}

impl<'a, B: Bytes + ?Sized> Records<'a, B> {
    /// Records after the file header, to the end of `bytes`.
    pub fn new(bytes: &'a B, layout: Framing) -> Self {
        Records {
            bytes,
            reader: RecordReader::new(ChunkReader::new(layout, bytes.size()), true),
        }
    }
}

impl<B: Bytes + ?Sized> Iterator for Records<'_, B> {
    type Item = Item;
    fn next(&mut self) -> Option<Item> {
        self.reader.next(self.bytes)
    }
}

impl RecordReader {
    pub(super) fn new(chunks: ChunkReader, at_end: bool) -> Self {
        RecordReader {
            chunks,
            open: Vec::new(),
            orphans: None,
            queue: Default::default(),
            at_end,
            done: false,
        }
    }

    /// Reports an unfinished record cut short by `why`.
    fn interrupt(&mut self, why: &str, status: Status) {
        if self.open.is_empty() {
            return;
        }
        let first = self.open[0].range.start;
        let last = self.open[self.open.len() - 1].range.end;
        let n = self.open.len();
        self.open.clear();
        self.queue.push_back(Item::Damaged(Damaged {
            range: Range::new(first, last),
            status,
            reason: format!(
                "a record of {n} chunk{} {why}",
                if n == 1 { "" } else { "s" }
            ),
        }));
    }

    fn orphan(&mut self, c: &Chunk) {
        let r = match self.orphans {
            Some(r) => Range::new(r.start, c.range.end),
            None => c.range,
        };
        self.orphans = Some(r);
    }

    fn flush_orphans(&mut self) {
        if let Some(r) = self.orphans.take() {
            self.queue.push_back(Item::Damaged(Damaged {
                range: r,
                status: Status::Corrupt,
                reason: "the end of a record whose first chunk is lost".into(),
            }));
        }
    }

    fn open_len(&self) -> u64 {
        self.open.iter().map(|c| c.payload().len()).sum()
    }

    /// The next record or damage; `None` when the chunks run out (for good
    /// once `at_end` is set, else until `chunks.end` grows).
    pub fn next<B: Bytes + ?Sized>(&mut self, bytes: &B) -> Option<Item> {
        loop {
            if let Some(i) = self.queue.pop_front() {
                return Some(i);
            }
            if self.done {
                return None;
            }
            let Some(ev) = self.chunks.next(bytes) else {
                if !self.at_end {
                    return None;
                }
                self.done = true;
                self.flush_orphans();
                self.interrupt("is cut off by the end of the log", Status::Truncated);
                continue;
            };
            match ev {
                Event::Damaged(b) => {
                    self.flush_orphans();
                    if b.status == Status::Truncated {
                        self.interrupt("is cut off by the end of the log", Status::Truncated);
                    } else {
                        self.interrupt("is broken by the damage after it", Status::Corrupt);
                    }
                    self.queue.push_back(Item::Damaged(b));
                }
                Event::Chunk(c) => match c.kind {
                    FULL => {
                        self.flush_orphans();
                        self.interrupt("is interrupted by a FULL chunk", Status::Corrupt);
                        self.queue.push_back(Item::Record(vec![c]));
                    }
                    FIRST => {
                        self.flush_orphans();
                        self.interrupt("is interrupted by a FIRST chunk", Status::Corrupt);
                        self.open.push(c);
                    }
                    _ if self.open.is_empty() => {
                        self.orphan(&c);
                        if c.kind == LAST {
                            self.flush_orphans();
                        }
                    }
                    _ => {
                        self.open.push(c);
                        if self.open_len() > MAX_RECORD {
                            self.interrupt(
                                "is larger than 256 MiB: not reassembled",
                                Status::Corrupt,
                            );
                        } else if c.kind == LAST {
                            let chunks = std::mem::take(&mut self.open);
                            self.queue.push_back(Item::Record(chunks));
                        }
                    }
                },
            }
        }
    }
}

/// The payload of a record: borrowed when it is one chunk of bytes in
/// memory or mapped, else reassembled from its chunks.
pub fn payload<'a, B: Bytes + ?Sized>(b: &'a B, chunks: &[Chunk]) -> Cow<'a, [u8]> {
    if let ([c], Some(s)) = (chunks, b.slice()) {
        let p = c.payload();
        if let Some(v) = s.get(p.start as usize..p.end as usize) {
            return Cow::Borrowed(v);
        }
    }
    Cow::Owned(payload_owned(b, chunks))
}

/// The payload of a record, reassembled from its chunks into memory.
fn payload_owned<B: Bytes + ?Sized>(b: &B, chunks: &[Chunk]) -> Vec<u8> {
    let total: u64 = chunks.iter().map(|c| c.payload().len()).sum();
    let mut out = vec![0u8; total.min(MAX_RECORD) as usize];
    let mut at = 0usize;
    for c in chunks {
        let p = c.payload();
        let n = (p.len() as usize).min(out.len() - at);
        b.read(p.start, &mut out[at..at + n]);
        at += n;
    }
    out
}

/// Maps an offset in a reassembled payload to the file offset it came from.
pub fn file_offset(chunks: &[Chunk], mut at: u64) -> u64 {
    for c in chunks {
        let p = c.payload();
        if at < p.len() {
            return p.start + at;
        }
        at -= p.len();
    }
    chunks.last().map_or(0, |c| c.range.end)
}

/// Writes `records` as a log the way wandb's writers do, blocks laid out
/// by `layout` (tests build logs of any size and layout with it).
pub fn write_log(records: &[Vec<u8>], layout: Framing) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    for r in records {
        let mut rest = &r[..];
        let mut first = true;
        loop {
            let left = layout.block_end(out.len() as u64) - out.len() as u64;
            if left < CHUNK_HEADER {
                out.extend(std::iter::repeat_n(0, left as usize));
                continue;
            }
            let room = (left - CHUNK_HEADER) as usize;
            let n = rest.len().min(room);
            let end = n == rest.len();
            let kind = match (first, end) {
                (true, true) => FULL,
                (true, false) => FIRST,
                (false, true) => LAST,
                (false, false) => MIDDLE,
            };
            out.extend(crc_of(kind, &rest[..n]).to_le_bytes());
            out.extend((n as u16).to_le_bytes());
            out.push(kind);
            out.extend(&rest[..n]);
            rest = &rest[n..];
            first = false;
            if end {
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs(b: &[u8], l: Framing) -> Vec<Item> {
        Records::new(b, l).collect()
    }

    fn sample() -> Vec<Vec<u8>> {
        (0..40u8).map(|i| vec![i; 3000 + i as usize * 37]).collect()
    }

    #[test]
    fn both_layouts_round_trip_and_are_detected() {
        for l in [Framing::Standard, Framing::Shifted] {
            let data = sample();
            let log = write_log(&data, l);
            assert_eq!(detect(&log[..]), l);
            let got: Vec<Vec<u8>> = recs(&log, l)
                .into_iter()
                .map(|i| match i {
                    Item::Record(c) => payload(&log[..], &c).into_owned(),
                    Item::Damaged(b) => panic!("{b:?}"),
                })
                .collect();
            assert_eq!(got, data);
        }
    }

    #[test]
    fn damage_resyncs_within_the_block() {
        let data = sample();
        let mut log = write_log(&data, Framing::Standard);
        // Flip a payload byte of record 2 (FULL, in block 0).
        let items = recs(&log, Framing::Standard);
        let r2 = items[2].range();
        log[r2.start as usize + 10] ^= 0xff;
        let items = recs(&log, Framing::Standard);
        let bad: Vec<&Damaged> = items
            .iter()
            .filter_map(|i| match i {
                Item::Damaged(b) => Some(b),
                _ => None,
            })
            .collect();
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert!(bad[0].reason.contains("checksum"), "{}", bad[0].reason);
        assert_eq!(bad[0].range, r2);
        assert_eq!(items.len(), data.len());
    }

    #[test]
    fn truncation_is_not_corruption() {
        let data = sample();
        let log = write_log(&data, Framing::Standard);
        for cut in (8..log.len()).step_by(997) {
            let items = recs(&log[..cut], Framing::Standard);
            for i in &items {
                if let Item::Damaged(b) = i {
                    assert_eq!(b.status, Status::Truncated, "cut {cut}: {b:?}");
                }
            }
            let whole = items
                .iter()
                .filter(|i| matches!(i, Item::Record(_)))
                .count();
            let expect = recs(&log, Framing::Standard)
                .iter()
                .filter(|i| i.range().end <= cut as u64)
                .count();
            assert_eq!(whole, expect, "cut {cut}");
        }
    }

    #[test]
    fn zero_tail_is_truncation() {
        let mut log = write_log(&sample()[..3], Framing::Standard);
        log.extend(vec![0u8; 40000]);
        let items = recs(&log, Framing::Standard);
        let Item::Damaged(b) = items.last().unwrap() else {
            panic!()
        };
        assert_eq!(b.status, Status::Truncated, "{b:?}");
        assert_eq!(items.len(), 4);
    }
}
