//! bzip2: streams, blocks found at any bit offset, recovery, and the
//! decoded stream.
//!
//! A bzip2 block starts with the 48-bit magic 0x314159265359 at any bit
//! offset and decodes on its own; a stream ends with 0x177245385090 and the
//! combined CRC. The parser finds each block's end by searching bit by bit
//! for the next magic, and decodes the block by itself, as bzip2recover
//! does but in memory: a tiny stream of "BZh9", the block's bits shifted to
//! byte alignment, the end-of-stream magic and the block CRC as combined
//! CRC, fed to the `bzip2` crate's decoder. So damage loses only its block:
//! the blocks after it decode, and each block is a checkpoint of the
//! decoded stream (a [`crate::data::BlockSource`]).
//!
//! * a block whose CRC fails keeps its bytes and is marked corrupt;
//! * a block that does not decode is lost: its compressed bits are
//!   reported, and the decoded stream gets a point of loss (the length of
//!   what it held is unknown);
//! * a stream cut off keeps every whole block before the cut.

use std::io;

use super::api::{Format, Parser, Sniff, Step, StepCx};
use super::decoded::{Decoded, Run};
use crate::data::{Block, BlockCodec, BlockReader, Data, Pull, Range, Source, view};
use crate::node::{Node, Value};
use crate::offer::Offers;
use crate::status::Damage;

/// bzip2: streams, blocks, the decoded stream.
pub static FORMAT: Format = Format {
    name: "bzip2",
    extent: None,
    sniff,
    parse: |data, _| Box::new(Bzip2Parser::new(data.clone())),
    load: |_, _| Vec::new(),
    offers: Offers::NONE,
};

const BLOCK_MAGIC: u64 = 0x3141_5926_5359;
const EOS_MAGIC: u64 = 0x1772_4538_5090;
const MASK48: u64 = (1 << 48) - 1;
/// Longest compressed block accepted (a real one is under 2.5 MB; the
/// bits of one block are held in memory to decode it).
const MAX_BLOCK_BYTES: u64 = 8 << 20;
const NAMES: &[(&str, &str)] = &[
    (".tbz2", ".tar"),
    (".tbz", ".tar"),
    (".bz2", ""),
    (".bz", ""),
];

fn is_header(b: &[u8]) -> bool {
    b.len() >= 4 && &b[..3] == b"BZh" && (b'1'..=b'9').contains(&b[3])
}

fn sniff(s: &Sniff) -> bool {
    if is_header(s.head) && s.head.len() >= 10 {
        // The first block magic (or the end of an empty stream) follows.
        let m = u64::from_be_bytes([
            0, 0, s.head[4], s.head[5], s.head[6], s.head[7], s.head[8], s.head[9],
        ]);
        if m == BLOCK_MAGIC || m == EOS_MAGIC {
            return true;
        }
    }
    // By name: a damaged stream header is reported and the blocks after
    // it are found by their magic.
    NAMES.iter().any(|(suffix, _)| s.name.ends_with(suffix))
}

/// bzip2's CRC-32: polynomial 0x04c11db7, most significant bit first.
const CRC_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u32) << 24;
        let mut k = 0;
        while k < 8 {
            c = if c & 0x8000_0000 != 0 {
                (c << 1) ^ 0x04c1_1db7
            } else {
                c << 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

fn crc_update(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = crc;
    for &b in bytes {
        c = (c << 8) ^ CRC_TABLE[((c >> 24) as u8 ^ b) as usize];
    }
    c
}

/// `n` (at most 57) bits at bit offset `bit`, most significant first;
/// `None` if the bytes are not there.
fn bits_at(data: &dyn Source, bit: u64, n: u32) -> Option<u64> {
    let first = bit / 8;
    let last = (bit + n as u64).div_ceil(8);
    let mut buf = [0u8; 9];
    let len = (last - first) as usize;
    if !crate::data::read_exact_at(data, first, &mut buf[..len]).ok()? {
        return None;
    }
    let mut v: u128 = 0;
    for &b in &buf[..len] {
        v = (v << 8) | b as u128;
    }
    let drop = (len as u64 * 8) - (bit % 8) - n as u64;
    Some(((v >> drop) & ((1u128 << n) - 1)) as u64)
}

/// What a magic search found.
enum Found {
    /// A block or end-of-stream magic starting at this bit.
    Magic(u64),
    /// None starting before this bit.
    Upto(u64),
}

/// Searches bit by bit for a block or end-of-stream magic starting at or
/// after `from` (a bit offset), in at most about `max` bytes.
fn find_magic(data: &dyn Source, from: u64, max: u64, scratch: &mut Vec<u8>) -> Found {
    let base = from / 8;
    let Ok(w) = view(data, base, max.clamp(64, 1 << 20) as usize, scratch) else {
        return Found::Upto(from);
    };
    let mut reg: u64 = 0;
    for (i, &b) in w.iter().enumerate() {
        reg = (reg << 8) | b as u64;
        let loaded = (i as u64 + 1) * 8;
        if loaded < 48 {
            continue;
        }
        let end = (base + i as u64 + 1) * 8;
        for k in (0..8u64).rev() {
            if loaded < 48 + k {
                continue;
            }
            let v = (reg >> k) & MASK48;
            if v == BLOCK_MAGIC || v == EOS_MAGIC {
                let start = end - k - 48;
                if start >= from {
                    return Found::Magic(start);
                }
            }
        }
    }
    let scanned_to = (base + w.len() as u64) * 8;
    Found::Upto(scanned_to.saturating_sub(47).max(from))
}

/// Appends bits to a byte buffer, most significant first.
struct BitWriter {
    out: Vec<u8>,
    acc: u64,
    n: u32,
}

impl BitWriter {
    fn put(&mut self, v: u64, bits: u32) {
        for i in (0..bits).rev() {
            self.acc = (self.acc << 1) | ((v >> i) & 1);
            self.n += 1;
            if self.n == 8 {
                self.out.push(self.acc as u8);
                self.acc = 0;
                self.n = 0;
            }
        }
    }
    fn finish(mut self) -> Vec<u8> {
        if self.n > 0 {
            self.out.push((self.acc << (8 - self.n)) as u8);
        }
        self.out
    }
}

/// The one-block stream bzip2recover would write for bits `[s, e)`.
fn block_stream(data: &dyn Source, s: u64, e: u64) -> io::Result<Vec<u8>> {
    if e <= s + 80 || e - s > MAX_BLOCK_BYTES * 8 {
        return Err(io::Error::other("not a plausible block"));
    }
    let crc = bits_at(data, s + 48, 32).ok_or_else(|| io::Error::other("block cut off"))?;
    let first = s / 8;
    let last = e.div_ceil(8);
    let mut raw = vec![0u8; (last - first) as usize];
    if !crate::data::read_exact_at(data, first, &mut raw)? {
        return Err(io::Error::other("block bytes unavailable"));
    }
    // The block's bits moved to byte alignment: whole bytes first, then
    // the remaining bits through the bit writer.
    let k = (s % 8) as u32;
    let bits = e - s;
    let whole = (bits / 8) as usize;
    let mut out = Vec::with_capacity(whole + 16);
    out.extend_from_slice(b"BZh9");
    let at = |i: usize| raw.get(i).copied().unwrap_or(0) as u16;
    for i in 0..whole {
        let two = (at(i) << 8) | at(i + 1);
        out.push((two >> (8 - k)) as u8);
    }
    let mut w = BitWriter { out, acc: 0, n: 0 };
    let rem = (bits % 8) as u32;
    if rem > 0 {
        let two = (at(whole) << 8) | at(whole + 1);
        let byte = (two >> (8 - k)) as u8;
        w.put((byte >> (8 - rem)) as u64, rem);
    }
    w.put(EOS_MAGIC, 48);
    w.put(crc, 32);
    Ok(w.finish())
}

/// Decodes one block, its bit range in `aux`.
pub(crate) struct Codec;

impl BlockCodec for Codec {
    fn name(&self) -> &'static str {
        "bzip2 block"
    }

    fn open(&self, input: &Data, block: &Block) -> io::Result<Box<dyn BlockReader>> {
        let [s, e] = block.aux;
        Ok(Box::new(BlockDecoder {
            mini: block_stream(&**input, s, e)?,
            pos: 0,
            z: bzip2::Decompress::new(false),
            ended: false,
            error: None,
            start_bit: s,
        }))
    }
}

struct BlockDecoder {
    mini: Vec<u8>,
    pos: usize,
    z: bzip2::Decompress,
    ended: bool,
    error: Option<String>,
    start_bit: u64,
}

impl BlockReader for BlockDecoder {
    fn read(&mut self, out: &mut [u8]) -> Pull {
        if let Some(e) = self.error.take() {
            self.ended = true;
            return Pull::Error(e);
        }
        if self.ended {
            return Pull::End;
        }
        for _ in 0..64 {
            let (in0, out0) = (self.z.total_in(), self.z.total_out());
            let r = self
                .z
                .decompress(&self.mini[self.pos.min(self.mini.len())..], out);
            let consumed = (self.z.total_in() - in0) as usize;
            let produced = (self.z.total_out() - out0) as usize;
            self.pos += consumed;
            match r {
                Err(e) => {
                    let msg = format!("{e}");
                    if produced > 0 {
                        self.error = Some(msg);
                        return Pull::Out(produced);
                    }
                    self.ended = true;
                    return Pull::Error(msg);
                }
                Ok(bzip2::Status::StreamEnd) => {
                    self.ended = true;
                    return if produced > 0 {
                        Pull::Out(produced)
                    } else {
                        Pull::End
                    };
                }
                Ok(_) if produced > 0 => return Pull::Out(produced),
                Ok(_) if consumed > 0 => {}
                Ok(_) => {
                    self.ended = true;
                    return Pull::Error("block data ends early".into());
                }
            }
        }
        Pull::Error("the decoder made no progress".into())
    }
    /// The input byte the decoder has read up to (the block's bits start
    /// 32 bits into the one-block stream).
    fn input_pos(&self) -> u64 {
        (self.start_bit + (self.pos as u64 * 8).saturating_sub(32)) / 8
    }
}

/// Decodes a whole bzip2 stream from `block.input.start` as one block (a
/// zip entry compressed with bzip2: a read decodes from the entry's start).
pub(crate) struct StreamCodec;

impl BlockCodec for StreamCodec {
    fn name(&self) -> &'static str {
        "bzip2 stream"
    }

    fn open(&self, input: &Data, block: &Block) -> io::Result<Box<dyn BlockReader>> {
        Ok(Box::new(StreamDecoder {
            z: bzip2::Decompress::new(false),
            input: input.clone(),
            inbuf: crate::data::InputBuf::new(block.input.start),
            ended: false,
        }))
    }
}

struct StreamDecoder {
    z: bzip2::Decompress,
    input: Data,
    inbuf: crate::data::InputBuf,
    ended: bool,
}

impl BlockReader for StreamDecoder {
    fn read(&mut self, out: &mut [u8]) -> Pull {
        if self.ended {
            return Pull::End;
        }
        for _ in 0..1024 {
            let fill = self.inbuf.fill(&*self.input);
            let (in0, out0) = (self.z.total_in(), self.z.total_out());
            let r = self.z.decompress(self.inbuf.bytes(), out);
            let consumed = (self.z.total_in() - in0) as usize;
            let produced = (self.z.total_out() - out0) as usize;
            self.inbuf.consume(consumed);
            match r {
                Err(e) => {
                    self.ended = true;
                    if produced > 0 {
                        return Pull::Out(produced);
                    }
                    return Pull::Error(format!("{e}"));
                }
                Ok(bzip2::Status::StreamEnd) => {
                    self.ended = true;
                    return if produced > 0 {
                        Pull::Out(produced)
                    } else {
                        Pull::End
                    };
                }
                Ok(_) if produced > 0 => return Pull::Out(produced),
                Ok(_) if consumed > 0 => {}
                Ok(_) => match fill {
                    crate::data::Fill::Bytes => {
                        self.ended = true;
                        return Pull::Error("the decoder made no progress".into());
                    }
                    crate::data::Fill::Wait => return Pull::NeedInput,
                    crate::data::Fill::Eof => return Pull::Truncated,
                },
            }
        }
        Pull::Error("the decoder made no progress".into())
    }
    fn input_pos(&self) -> u64 {
        self.inbuf.pos
    }
}

enum State {
    /// A stream header ("BZh1".."BZh9") is expected at byte `at`.
    Header {
        at: u64,
    },
    /// A block or end-of-stream magic is expected at bit `bit`.
    Magic {
        bit: u64,
    },
    /// Looking for the end of the block at bit `start`, from bit `from`.
    Scan {
        start: u64,
        from: u64,
    },
    /// Decoding the block `[s, e)` (bits).
    Body {
        s: u64,
        e: u64,
        to_eof: bool,
        reader: Box<dyn BlockReader>,
        out_start: u64,
        crc: u32,
    },
    /// After a stream, at byte `at`: another stream, zero padding (from
    /// `pad`), or garbage.
    After {
        at: u64,
        pad: u64,
    },
    /// Looking for the next magic after damage found at bit `lost`.
    Resync {
        from: u64,
        lost: u64,
        why: String,
    },
    Done,
}

struct Bzip2Parser {
    data: Data,
    out: Decoded,
    /// Blocks seen in this stream (numbered from 1), and in all streams.
    blocks: u64,
    all_blocks: u64,
    /// Combined CRC of this stream's blocks; false once a block is lost
    /// or damaged (the combined CRC can no longer be checked).
    combined: u32,
    combined_ok: bool,
    streams: u64,
    state: State,
    scratch: Vec<u8>,
}

impl Bzip2Parser {
    fn new(data: Data) -> Bzip2Parser {
        Bzip2Parser {
            out: Decoded::new(data.clone(), Box::new(Codec), "bzip2 stream"),
            data,
            blocks: 0,
            all_blocks: 0,
            combined: 0,
            combined_ok: true,
            streams: 0,
            state: State::Header { at: 0 },
            scratch: Vec::new(),
        }
    }

    fn finish(&mut self, cx: &mut StepCx) -> Step {
        self.out.finish();
        let len = self.data.available();
        cx.progress(len, Some(len));
        self.state = State::Done;
        Step::Done
    }

    fn cut(&mut self, cx: &mut StepCx, why: &str) -> Step {
        let avail = self.data.available();
        cx.damage(Damage::truncated(Range::new(avail, avail), why.to_string()));
        let o = self.out.pos();
        self.out.damage(
            cx,
            Damage::truncated(
                Range::new(o, o),
                format!("decoded stream ends early: {why}"),
            ),
        );
        self.finish(cx)
    }

    fn header(&mut self, cx: &mut StepCx, at: u64) -> Option<Step> {
        let fin = self.data.is_final();
        let mut b = [0u8; 4];
        let n = self.data.read_at(at, &mut b).unwrap_or(0);
        if n < 4 {
            if !fin {
                return Some(Step::Blocked);
            }
            return Some(self.cut(cx, "file ends inside a bzip2 stream header"));
        }
        if !is_header(&b) {
            self.state = State::Resync {
                from: at * 8 + 1,
                lost: at * 8,
                why: format!("no bzip2 stream header at {at:#x}"),
            };
            return None;
        }
        self.streams += 1;
        self.blocks = 0;
        self.combined = 0;
        self.combined_ok = true;
        cx.push_node(
            Node::new(
                "stream header",
                format!("stream #{}", self.streams),
                Range::new(at, at + 4),
            )
            .text(format!(
                "BZh{} ({} kB blocks)",
                b[3] as char,
                (b[3] - b'0') as u32 * 100
            )),
        );
        self.state = State::Magic { bit: (at + 4) * 8 };
        None
    }

    fn magic(&mut self, cx: &mut StepCx, bit: u64) -> Option<Step> {
        let fin = self.data.is_final();
        let Some(m) = bits_at(&*self.data, bit, 48) else {
            if !fin {
                return Some(Step::Blocked);
            }
            return Some(self.cut(cx, "bzip2 stream ends without its end-of-stream marker"));
        };
        if m == BLOCK_MAGIC {
            self.state = State::Scan {
                start: bit,
                from: bit + 48,
            };
            return None;
        }
        if m == EOS_MAGIC {
            let Some(stored) = bits_at(&*self.data, bit + 48, 32) else {
                if !fin {
                    return Some(Step::Blocked);
                }
                return Some(self.cut(cx, "file ends inside the bzip2 end-of-stream marker"));
            };
            let stored = stored as u32;
            let r = Range::new(bit / 8, (bit + 80).div_ceil(8));
            let mut n = Node::new(
                "end of stream",
                format!("end of stream #{}", self.streams),
                r,
            )
            .text(format!(
                "combined CRC {stored:#010x}, {} blocks, at bit {bit}",
                self.blocks
            ));
            if self.combined_ok && stored != self.combined {
                let d = Damage::corrupt(
                    r,
                    format!(
                        "combined CRC mismatch: stored {stored:#010x}, computed {:#010x} from the blocks (a block is missing or extra)",
                        self.combined
                    ),
                );
                n = n.damaged(d.clone());
                cx.damage(d);
            }
            cx.push_node(n);
            let end = (bit + 80).div_ceil(8);
            self.state = State::After { at: end, pad: end };
            return None;
        }
        self.state = State::Resync {
            from: bit + 1,
            lost: bit,
            why: format!("no bzip2 block magic at bit {bit} ({:#x})", bit / 8),
        };
        None
    }

    fn scan(&mut self, cx: &mut StepCx, start: u64, from: u64) -> Option<Step> {
        let fin = self.data.is_final();
        let avail_bits = self.data.available() * 8;
        let data = self.data.clone();
        match find_magic(&*data, from, cx.budget, &mut self.scratch) {
            Found::Magic(e) => self.begin_body(cx, start, e, false),
            Found::Upto(next) => {
                if next - start > MAX_BLOCK_BYTES * 8 {
                    return self.begin_body(cx, start, start + MAX_BLOCK_BYTES * 8, false);
                }
                if next + 48 <= avail_bits {
                    self.state = State::Scan { start, from: next };
                    return Some(Step::Yield);
                }
                if !fin {
                    self.state = State::Scan { start, from: next };
                    return Some(Step::Blocked);
                }
                self.begin_body(cx, start, avail_bits, true)
            }
        }
    }

    fn begin_body(&mut self, cx: &mut StepCx, s: u64, e: u64, to_eof: bool) -> Option<Step> {
        self.blocks += 1;
        self.all_blocks += 1;
        self.out.ensure_child(cx, s / 8, NAMES);
        match self.out.src.open(s / 8, [s, e]) {
            Ok(reader) => {
                self.out.src.begin_block(s / 8, [s, e]);
                self.state = State::Body {
                    s,
                    e,
                    to_eof,
                    reader,
                    out_start: self.out.pos(),
                    crc: 0xffff_ffff,
                };
                None
            }
            Err(why) => self.lost_block(cx, s, e, to_eof, &why.to_string()),
        }
    }

    /// Block `[s, e)` decoded to nothing.
    fn lost_block(
        &mut self,
        cx: &mut StepCx,
        s: u64,
        e: u64,
        to_eof: bool,
        why: &str,
    ) -> Option<Step> {
        self.combined_ok = false;
        let k = self.blocks;
        let r = Range::new(s / 8, e.div_ceil(8));
        if to_eof {
            let d = Damage::truncated(r, format!("block #{k} is cut off ({why})"));
            cx.push_node(
                Node::new("partial block", format!("block #{k}"), r)
                    .text(format!("bits {s}..{e}, cut off"))
                    .damaged(d),
            );
            return Some(self.cut(
                cx,
                &format!("bzip2 block #{k} at bit {s} is cut off: its bytes cannot be decoded"),
            ));
        }
        self.out.record_lost(
            cx,
            s / 8,
            e / 8,
            &format!("bzip2 block #{k} at bit {s} does not decode ({why})"),
            "block",
            true,
        );
        self.state = State::Magic { bit: e };
        None
    }

    fn body(&mut self, cx: &mut StepCx) -> Option<Step> {
        let State::Body {
            s,
            e,
            to_eof,
            reader,
            out_start,
            crc,
        } = &mut self.state
        else {
            return None;
        };
        let (s, e, to_eof, out_start) = (*s, *e, *to_eof, *out_start);
        let mut c = *crc;
        let run = self
            .out
            .run(cx, &mut **reader, &mut |b| c = crc_update(c, b));
        if let State::Body { crc, .. } = &mut self.state {
            *crc = c;
        }
        cx.progress(s / 8, Some(self.data.available()));
        let pull = match run {
            Run::More => return Some(Step::Yield),
            Run::Budget => {
                self.out.src.end_block(e.div_ceil(8));
                return Some(self.finish(cx));
            }
            Run::Stopped(p) => p,
        };
        let out_end = self.out.pos();
        let k = self.blocks;
        let reader_stop = match &self.state {
            State::Body { reader, .. } => reader.input_pos(),
            _ => e / 8,
        };
        let why = match &pull {
            Pull::Error(m) => m.clone(),
            Pull::Truncated | Pull::NeedInput => "its data ends early".into(),
            _ => String::new(),
        };
        if out_end == out_start {
            self.out.src.end_block(e.div_ceil(8));
            return self.lost_block(cx, s, e, to_eof, &why);
        }
        let computed = !c;
        let stored = bits_at(&*self.data, s + 48, 32).unwrap_or(0) as u32;
        let stop = reader_stop.min(e / 8);
        let trailing = computed == stored && matches!(pull, Pull::Error(_)) && e / 8 > stop + 8;
        let r_end = if trailing {
            (stop + 1).min(e.div_ceil(8))
        } else {
            e.div_ceil(8)
        };
        self.out.src.end_block(r_end);
        let r = Range::new(s / 8, r_end);
        let mut n = Node::new("block", format!("block #{k}"), r).value(Value::Str(
            format!(
                "bits {s}..{e}, decoded {out_start:#x}..{out_end:#x} ({} bytes), CRC {stored:#010x}",
                out_end - out_start
            )
            .into(),
        ));
        if computed != stored {
            self.combined_ok = false;
            let d = Damage::corrupt(
                r,
                format!(
                    "bzip2 block #{k}: CRC mismatch: stored {stored:#010x}, computed {computed:#010x} (decoded bytes kept)"
                ),
            );
            n = n.damaged(d.clone());
            cx.damage(d);
            self.out.damage(
                cx,
                Damage::corrupt(
                    Range::new(out_start, out_end),
                    format!("block #{k} fails its CRC"),
                ),
            );
        } else {
            self.combined = self.combined.rotate_left(1) ^ stored;
        }
        cx.push_node(n);
        self.state = State::Magic { bit: e };
        if trailing {
            // The block decoded and checks out, but the bits after its end
            // are no block magic: a magic was damaged, and the block it
            // began is lost up to the next magic found.
            {
                self.combined_ok = false;
                self.out.record_lost(
                    cx,
                    stop,
                    e / 8,
                    &format!(
                        "the bits after bzip2 block #{k} (which ends near {stop:#x}) are not a block magic ({why})"
                    ),
                    "block",
                    true,
                );
            }
        }
        None
    }

    fn after(&mut self, cx: &mut StepCx, at: u64, pad: u64) -> Option<Step> {
        let fin = self.data.is_final();
        let avail = self.data.available();
        let data = self.data.clone();
        let Ok(bytes) = view(&*data, at, 1 << 20, &mut self.scratch) else {
            return Some(self.finish(cx));
        };
        if bytes.is_empty() {
            if !fin {
                return Some(Step::Blocked);
            }
            if avail > pad {
                let r = Range::new(pad, avail);
                cx.push_node(Node::new("padding", "zero padding", r).uint(r.len()));
            }
            return Some(self.finish(cx));
        }
        if at == pad {
            if bytes.len() < 4 && !fin && b"BZh".starts_with(&bytes[..bytes.len().min(3)]) {
                return Some(Step::Blocked);
            }
            if is_header(bytes) {
                self.state = State::Header { at };
                return None;
            }
        }
        let zeros = bytes.iter().take_while(|&&b| b == 0).count();
        if zeros == bytes.len() {
            self.state = State::After {
                at: at + zeros as u64,
                pad,
            };
            return Some(Step::Yield);
        }
        let q = at + zeros as u64;
        if q > pad {
            let r = Range::new(pad, q);
            cx.push_node(Node::new("padding", "zero padding", r).uint(r.len()));
            self.state = State::After { at: q, pad: q };
            return None;
        }
        self.state = State::Resync {
            from: q * 8,
            lost: q * 8,
            why: "bytes after the end of the bzip2 stream are not bzip2 data".into(),
        };
        None
    }

    fn resync(&mut self, cx: &mut StepCx, from: u64, lost: u64, why: String) -> Option<Step> {
        let fin = self.data.is_final();
        let avail_bits = self.data.available() * 8;
        let data = self.data.clone();
        match find_magic(&*data, from, cx.budget, &mut self.scratch) {
            Found::Magic(m) => {
                self.combined_ok = false;
                self.out
                    .record_lost(cx, lost / 8, m / 8, &why, "block", true);
                self.state = State::Magic { bit: m };
                None
            }
            Found::Upto(next) => {
                if next + 48 <= avail_bits {
                    self.state = State::Resync {
                        from: next,
                        lost,
                        why,
                    };
                    return Some(Step::Yield);
                }
                if !fin {
                    self.state = State::Resync {
                        from: next,
                        lost,
                        why,
                    };
                    return Some(Step::Blocked);
                }
                let avail = self.data.available();
                self.out
                    .record_lost(cx, lost / 8, avail, &why, "block", false);
                Some(self.finish(cx))
            }
        }
    }
}

impl Parser for Bzip2Parser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        for _ in 0..64 {
            let r = match &self.state {
                State::Header { at } => self.header(cx, *at),
                State::Magic { bit } => self.magic(cx, *bit),
                State::Scan { start, from } => self.scan(cx, *start, *from),
                State::Body { .. } => self.body(cx),
                State::After { at, pad } => self.after(cx, *at, *pad),
                State::Resync { from, lost, why } => {
                    let (from, lost, why) = (*from, *lost, why.clone());
                    self.resync(cx, from, lost, why)
                }
                State::Done => Some(Step::Done),
            };
            if let Some(step) = r {
                return step;
            }
        }
        Step::Yield
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::data::{BlockSource, MemSource};
    use crate::parsers::decoded::{check_random_reads, decode_block, fixture};

    #[test]
    fn blocks_are_checkpoints() {
        let file = fixture("nested.tar.bz2");
        let mut reference = Vec::new();
        std::io::Read::read_to_end(&mut bzip2::read::BzDecoder::new(&file[..]), &mut reference)
            .unwrap();
        let input: Data = Arc::new(MemSource::new(file.clone()));
        let src = BlockSource::new(input.clone(), Box::new(Codec), "test");
        let mut scratch = Vec::new();
        let mut bit = 32;
        let mut blocks = 0;
        while bits_at(&*input, bit, 48) == Some(BLOCK_MAGIC) {
            let Found::Magic(e) = find_magic(&*input, bit + 48, 1 << 22, &mut scratch) else {
                panic!("no end");
            };
            decode_block(&src, bit / 8, [bit, e]);
            bit = e;
            blocks += 1;
        }
        src.finish();
        assert_eq!(blocks, 5);
        check_random_reads(&src, &reference);
    }

    #[test]
    fn bits_and_streams() {
        let b = [0b1010_1010u8, 0b1100_1100, 0xff];
        let m: Data = Arc::new(MemSource::new(b.to_vec()));
        assert_eq!(bits_at(&*m, 1, 8), Some(0b0101_0101));
        assert_eq!(bits_at(&*m, 4, 12), Some(0b1010_1100_1100));
        assert_eq!(bits_at(&*m, 20, 8), None);
    }

    #[test]
    fn crc_of_known_text() {
        // bzip2's block CRC of "hello\n" is stored in `echo hello | bzip2`.
        assert_eq!(!crc_update(0xffff_ffff, b"123456789"), 0xfc89_1918);
    }
}
