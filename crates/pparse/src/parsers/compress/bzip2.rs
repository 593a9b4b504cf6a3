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
//! Every input byte may be hostile, and a block magic is six bytes anyone
//! can write. So before a decoder is opened, the block is walked by hand
//! (`walk_block`: its header, tables and every Huffman symbol, with
//! libbz2's checks): a fake fails there at the cost of reading it, and a
//! real block's symbol count sets the smallest level that holds it (libbz2
//! zeroes 400 kB per level for each block it opens). Blocks over 128 KiB
//! compressed skip the walk: it would cost 5% of their decoding, and
//! their decoder is small beside them. A small block (at
//! most `SMALL` symbols, a tiny stream's) is decoded there too, without
//! libbz2.
//!
//! * a block whose CRC fails keeps its bytes and is marked corrupt;
//! * a block that does not decode is lost: its compressed bits are
//!   reported, and the decoded stream gets a point of loss (the length of
//!   what it held is unknown); blocks lost in a row (fake magics) are one
//!   lost range, one node and one record;
//! * a stream cut off keeps every whole block before the cut.

use std::io;

use crate::data::{Block, BlockCodec, BlockReader, Data, Pull, Range, Source, view};
use crate::node::{Node, Value};
use crate::offer::Offers;
use crate::parsers::api::{Format, Parser, Sniff, Step, StepCx};
use crate::parsers::compress::decoded::{Decoded, Run};
use crate::status::Damage;

/// bzip2: streams, blocks, the decoded stream.
pub static FORMAT: Format = Format {
    name: "bzip2",
    extent: None,
    sniff,
    parse: |data, _| Box::new(Bzip2Parser::new(data.clone())),
    load,
    offers: Offers::NONE,
};

const BLOCK_MAGIC: u64 = 0x3141_5926_5359;
const EOS_MAGIC: u64 = 0x1772_4538_5090;
const MASK48: u64 = (1 << 48) - 1;
/// Longest compressed block accepted (a real one is under 2.5 MB; the
/// bits of one block are held in memory to decode it).
const MAX_BLOCK_BYTES: u64 = 8 << 20;
/// Clean streams in a row shown as one lazy node (`streams N–M`): a file
/// of 250,000 one-byte streams would otherwise hold 750,000 nodes. A
/// group is rebuilt from its bytes when opened ([`load`]).
const GROUP: u64 = 1024;
/// Streams longer than this are not grouped: big streams are few.
const GROUP_STREAM: u64 = 64 << 10;
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
/// after `from` (a bit offset), in at most about `max` bytes. The bytes are
/// read in windows that start small and double, so that a magic close by
/// (the next of many small blocks or fakes) costs a read of its
/// neighbourhood, not of `max` bytes, when the source is not in memory.
fn find_magic(data: &dyn Source, from: u64, max: u64, scratch: &mut Vec<u8>) -> Found {
    let base = from / 8;
    let max = max.clamp(64, 1 << 20);
    let mut reg: u64 = 0;
    let mut at = base;
    let mut window = 256u64;
    while at - base < max {
        let want = window.min(max - (at - base));
        let Ok(w) = view(data, at, want as usize, scratch) else {
            break;
        };
        let got = w.len() as u64;
        for &b in w {
            reg = (reg << 8) | b as u64;
            at += 1;
            let loaded = (at - base) * 8;
            if loaded < 48 {
                continue;
            }
            let end = at * 8;
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
        if got < want {
            break;
        }
        window = (window * 2).min(64 << 10);
    }
    Found::Upto((at * 8).saturating_sub(47).max(from))
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

/// A block's bits as libbz2 reads them, most significant first.
struct Bits<'a> {
    b: &'a [u8],
    next: usize,
    acc: u64,
    n: u32,
}

/// Why the pre-pass rejected a block.
type Reject = &'static str;

impl Bits<'_> {
    /// `k` (at most 32) bits.
    fn get(&mut self, k: u32) -> Result<u32, Reject> {
        while self.n < k {
            let Some(&b) = self.b.get(self.next) else {
                return Err("its data ends early");
            };
            self.acc = (self.acc << 8) | b as u64;
            self.next += 1;
            self.n += 8;
        }
        self.n -= k;
        Ok(((self.acc >> self.n) & ((1u64 << k) - 1)) as u32)
    }
}

/// Selectors libbz2 keeps (more are read and dropped).
const MAX_SELECTORS: usize = 18002;
/// Longest Huffman code.
const MAX_CODE_LEN: usize = 23;

/// One Huffman table, built as libbz2's `create_decode_tables` builds it.
struct Table {
    limit: [i32; 258],
    base: [i32; 258],
    perm: [u16; 258],
    min_len: u32,
}

impl Table {
    fn new(lens: &[u8]) -> Table {
        let mut t = Table {
            limit: [0; 258],
            base: [0; 258],
            perm: [0; 258],
            min_len: 32,
        };
        let min = *lens.iter().min().unwrap_or(&32);
        let max = *lens.iter().max().unwrap_or(&0);
        t.min_len = min as u32;
        let mut pp = 0;
        for i in min..=max {
            for (j, &l) in lens.iter().enumerate() {
                if l == i {
                    t.perm[pp] = j as u16;
                    pp += 1;
                }
            }
        }
        for &l in lens {
            t.base[l as usize + 1] += 1;
        }
        for i in 1..MAX_CODE_LEN {
            t.base[i] += t.base[i - 1];
        }
        let mut vec = 0;
        for i in min as usize..=max as usize {
            vec += t.base[i + 1] - t.base[i];
            t.limit[i] = vec - 1;
            vec <<= 1;
        }
        for i in min as usize..max as usize {
            t.base[i + 1] = (2 * (t.limit[i] + 1)) - t.base[i + 1];
        }
        t
    }

    /// The next symbol, decoded as libbz2 decodes it.
    fn symbol(&self, r: &mut Bits) -> Result<u16, Reject> {
        let mut zn = self.min_len;
        let mut zvec = r.get(zn)? as i32;
        loop {
            if zn > 20 {
                return Err("a Huffman code is longer than 20 bits");
            }
            if zvec <= self.limit[zn as usize] {
                let i = zvec - self.base[zn as usize];
                return usize::try_from(i)
                    .ok()
                    .and_then(|i| self.perm.get(i).copied())
                    .ok_or("a Huffman code is out of range");
            }
            zn += 1;
            zvec = (zvec << 1) | r.get(1)? as i32;
        }
    }
}

/// [`walk_block`]'s count alone.
#[cfg(test)]
fn check_block(mini: &[u8]) -> Result<u32, Reject> {
    walk_block(mini, false).map(|w| w.nblock)
}

/// Blocks of at most this many symbols are decoded by [`decode_small`]
/// rather than by libbz2, whose decoder zeroes at least 450 kB however
/// small the block (a tiny stream cost 20 µs of it). Their output is at
/// most 51 times this.
const SMALL: u32 = 16 << 10;

/// Blocks over this many compressed bytes are opened at level 9 without
/// [`walk_block`]: a 3.6 MB decoder per 128 KiB of input at worst.
const WALK_MAX: usize = 128 << 10;

/// What [`walk_block`] learned.
struct Walked {
    nblock: u32,
    /// A small block's decoded bytes, when it is small, not randomised,
    /// and its data ends where the stream's end marker follows.
    small: Option<Vec<u8>>,
}

/// Walks the block of a one-block stream (`mini`, from its header on) as
/// libbz2 would before it decodes any byte: the block's header, symbol
/// map, selectors, code lengths and every Huffman symbol, with libbz2's
/// checks, to the end-of-block symbol. Returns the number of symbols
/// before the inverse BWT (libbz2's `nblock`, counted after the first
/// run-length coding), which sets the level the stream needs. A block
/// this rejects is one libbz2 (at level 9) fails before any output, and
/// one it accepts gives output: so a fake block costs no decoder, and a
/// small one a decoder sized to it. Allocates at most 18 KB, and when
/// `keep`, a small block's symbols and decoded bytes.
fn walk_block(mini: &[u8], keep: bool) -> Result<Walked, Reject> {
    const RUNA: u16 = 0;
    const RUNB: u16 = 1;
    const CAP: u32 = 9 * 100_000;
    let mut r = Bits {
        b: mini,
        next: 4,
        acc: 0,
        n: 0,
    };
    if ((r.get(24)? as u64) << 24 | r.get(24)? as u64) != BLOCK_MAGIC {
        return Err("no block magic");
    }
    r.get(32)?; // block CRC
    let randomised = r.get(1)? == 1;
    let orig_ptr = r.get(24)?;
    if orig_ptr > 10 + CAP {
        return Err("its BWT origin is out of range");
    }
    let used16 = r.get(16)?;
    let mut in_use = 0u32;
    let mut unseq = [0u8; 256];
    for i in 0..16 {
        if used16 & (0x8000 >> i) != 0 {
            let m = r.get(16)?;
            for j in 0..16 {
                if m & (0x8000 >> j) != 0 {
                    unseq[in_use as usize] = (i * 16 + j) as u8;
                    in_use += 1;
                }
            }
        }
    }
    if in_use == 0 {
        return Err("it uses no byte values");
    }
    let alpha = in_use as usize + 2;
    let groups = r.get(3)? as usize;
    if !(2..=6).contains(&groups) {
        return Err("its number of Huffman tables is not 2 to 6");
    }
    let n_sel = r.get(15)? as usize;
    if n_sel < 1 {
        return Err("it has no selectors");
    }
    let kept = n_sel.min(MAX_SELECTORS);
    let mut selectors = Vec::with_capacity(kept);
    let mut pos: [u8; 6] = [0, 1, 2, 3, 4, 5];
    for i in 0..n_sel {
        let mut j = 0;
        while r.get(1)? == 1 {
            j += 1;
            if j >= groups {
                return Err("a selector is out of range");
            }
        }
        if i < kept {
            pos[..=j].rotate_right(1);
            selectors.push(pos[0]);
        }
    }
    let mut tables = Vec::with_capacity(groups);
    let mut lens = [0u8; 258];
    for _ in 0..groups {
        let mut curr = r.get(5)? as i32;
        for l in lens.iter_mut().take(alpha) {
            loop {
                if !(1..=20).contains(&curr) {
                    return Err("a Huffman code length is not 1 to 20");
                }
                if r.get(1)? == 0 {
                    break;
                }
                curr += if r.get(1)? == 0 { 1 } else { -1 };
            }
            *l = curr as u8;
        }
        tables.push(Table::new(&lens[..alpha]));
    }
    let eob = (in_use + 1) as u16;
    let mut nblock: u32 = 0;
    let mut group = 0usize;
    let mut left = 50u32;
    let mut table = &tables[selectors[0] as usize];
    // The run of RUNA/RUNB symbols being read: its length and weight.
    let mut run: Option<(u32, u32)> = None;
    // A small block's bytes before the inverse BWT, and the MTF list.
    let mut keep = keep && !randomised;
    let mut bytes: Vec<u8> = Vec::new();
    let mut mtf: [u8; 256] = std::array::from_fn(|i| i as u8);
    loop {
        let sym = table.symbol(&mut r)?;
        if sym == RUNA || sym == RUNB {
            let (es, log_n) = run.unwrap_or((0, 0));
            if log_n >= 21 {
                return Err("a run is too long");
            }
            run = Some((es + ((sym as u32 + 1) << log_n), log_n + 1));
        } else {
            if let Some((es, _)) = run.take() {
                if nblock + es > CAP {
                    return Err("the block is longer than 900 kB");
                }
                nblock += es;
                keep &= nblock <= SMALL;
                if keep {
                    bytes.resize(nblock as usize, unseq[mtf[0] as usize]);
                }
            }
            if sym == eob {
                break;
            }
            if nblock >= CAP {
                return Err("the block is longer than 900 kB");
            }
            nblock += 1;
            keep &= nblock <= SMALL;
            if keep {
                let v = sym as usize - 1;
                let x = mtf[v];
                mtf.copy_within(0..v, 1);
                mtf[0] = x;
                bytes.push(unseq[x as usize]);
            }
        }
        left -= 1;
        if left == 0 {
            group += 1;
            let Some(&s) = selectors.get(group) else {
                return Err("it has too few selectors");
            };
            table = &tables[s as usize];
            left = 50;
        }
    }
    if orig_ptr >= nblock {
        return Err("its BWT origin is out of range");
    }
    let mut small = None;
    if keep {
        // libbz2 reads the end-of-stream marker next; anything else there
        // is for libbz2 to report.
        let next = r
            .get(24)
            .and_then(|a| Ok((a as u64) << 24 | r.get(24)? as u64));
        if next == Ok(EOS_MAGIC) {
            small = decode_small(bytes, orig_ptr);
        }
    }
    Ok(Walked { nblock, small })
}

/// A small block's bytes from its symbols (`tt`, after the move-to-front
/// decoding): the inverse BWT from `orig_ptr` as libbz2 does it, then the
/// first run-length coding undone. `None` where libbz2 would fail or its
/// output would depend on how it fails (the block's bytes end inside a
/// run's header): libbz2 decodes such a block.
fn decode_small(tt: Vec<u8>, orig_ptr: u32) -> Option<Vec<u8>> {
    let n = tt.len();
    let mut cf = [0u32; 257];
    for &b in &tt {
        cf[b as usize + 1] += 1;
    }
    for i in 1..257 {
        cf[i] += cf[i - 1];
    }
    let mut t: Vec<u32> = tt.iter().map(|&b| b as u32).collect();
    for (i, &b) in tt.iter().enumerate() {
        let c = &mut cf[b as usize];
        t[*c as usize] |= (i as u32) << 8;
        *c += 1;
    }
    // t[j] & 0xff is the next byte, t[j] >> 8 where the one after it is.
    let mut pos = t[orig_ptr as usize] >> 8;
    let mut seq = Vec::with_capacity(n);
    for _ in 0..n {
        let v = t[pos as usize];
        seq.push(v as u8);
        pos = v >> 8;
    }
    let mut out = Vec::with_capacity(n * 2);
    let mut i = 0;
    while i < n {
        let c = seq[i];
        let same = seq[i..n.min(i + 4)].iter().take_while(|&&x| x == c).count();
        if same < 4 {
            out.extend(std::iter::repeat_n(c, same));
            i += same;
            continue;
        }
        let count = *seq.get(i + 4)?;
        out.extend(std::iter::repeat_n(c, 4 + count as usize));
        i += 5;
    }
    Some(out)
}

/// The one-block stream bzip2recover would write for bits `[s, e)`, its
/// level the smallest that holds the block, and a small block's bytes
/// ([`SMALL`]); an error if [`walk_block`] rejects it.
fn block_stream(data: &dyn Source, s: u64, e: u64) -> io::Result<(Vec<u8>, Option<Vec<u8>>)> {
    let mut mini = mini_stream(data, s, e)?;
    if mini.len() > WALK_MAX {
        // A big block: the walk would add 5% to its decoding, and the
        // decoder's zeroing is small beside the block.
        return Ok((mini, None));
    }
    // The smallest level that holds the block: libbz2 allocates and
    // zeroes 400 kB per level for every block it opens.
    let w = walk_block(&mini, true).map_err(io::Error::other)?;
    mini[3] = b'0' + w.nblock.div_ceil(100_000).max(1) as u8;
    Ok((mini, w.small))
}

/// The one-block stream of bits `[s, e)` at level 9, unchecked.
fn mini_stream(data: &dyn Source, s: u64, e: u64) -> io::Result<Vec<u8>> {
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
        let (mini, small) = block_stream(&**input, s, e)?;
        if let Some(out) = small {
            return Ok(Box::new(SmallDecoder {
                out,
                at: 0,
                input_end: (s + (mini.len() as u64 * 8).saturating_sub(32)) / 8,
            }));
        }
        Ok(Box::new(BlockDecoder {
            mini,
            pos: 0,
            z: bzip2::Decompress::new(false),
            ended: false,
            error: None,
            start_bit: s,
        }))
    }
}

/// A small block decoded by [`walk_block`] when opened.
struct SmallDecoder {
    out: Vec<u8>,
    at: usize,
    /// Where libbz2 would have stopped reading (the whole one-block
    /// stream read).
    input_end: u64,
}

impl BlockReader for SmallDecoder {
    fn read(&mut self, out: &mut [u8]) -> Pull {
        let n = out.len().min(self.out.len() - self.at);
        if n == 0 {
            return Pull::End;
        }
        out[..n].copy_from_slice(&self.out[self.at..self.at + n]);
        self.at += n;
        Pull::Out(n)
    }
    fn input_pos(&self) -> u64 {
        self.input_end
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
    /// Streams whose every block and combined CRC matched, and whether
    /// every stream so far did: the file then proves its own bytes.
    checked_streams: u64,
    all_checked: bool,
    streams: u64,
    state: State,
    scratch: Vec<u8>,
    /// Blocks that did not decode, in a row, not yet reported.
    lost: Option<LostRun>,
    /// The nodes of the stream being read, and of the clean streams
    /// before it not yet pushed (see [`GROUP`]): `grouped` of them, from
    /// stream number `group_first`.
    cur: Vec<Node>,
    in_stream: bool,
    group: Vec<Node>,
    grouped: u64,
    group_first: u64,
}

/// Blocks in a row that did not decode: bytes `[from, to)`, the first
/// starting at bit `bit`, numbered `first` to `last`, and why the first
/// failed.
struct LostRun {
    from: u64,
    to: u64,
    bit: u64,
    first: u64,
    last: u64,
    why: String,
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
            checked_streams: 0,
            all_checked: true,
            streams: 0,
            state: State::Header { at: 0 },
            scratch: Vec::new(),
            lost: None,
            cur: Vec::new(),
            in_stream: false,
            group: Vec::new(),
            grouped: 0,
            group_first: 1,
        }
    }

    fn finish(&mut self, cx: &mut StepCx) -> Step {
        self.flush_lost(cx);
        self.flush_nodes(cx);
        self.out.finish();
        if self.all_checked && self.checked_streams > 0 {
            cx.proved();
        }
        let len = self.data.available();
        cx.progress(len, Some(len));
        self.state = State::Done;
        Step::Done
    }

    fn cut(&mut self, cx: &mut StepCx, why: &str) -> Step {
        self.all_checked = false;
        self.flush_lost(cx);
        self.flush_nodes(cx);
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

    /// Pushes a node; the lost run before it goes first. A stream's nodes
    /// are held until its end, where a clean small stream joins a group.
    fn push(&mut self, cx: &mut StepCx, node: Node) {
        self.flush_lost(cx);
        if self.in_stream {
            let end = node.kind == "end of stream";
            self.cur.push(node);
            if end {
                self.in_stream = false;
                self.end_stream(cx);
            }
            return;
        }
        self.flush_nodes(cx);
        cx.push_node(node);
    }

    /// A stream's nodes are complete: a clean small one joins the group.
    fn end_stream(&mut self, cx: &mut StepCx) {
        let span = match (self.cur.first(), self.cur.last()) {
            (Some(a), Some(b)) => b.range.end.saturating_sub(a.range.start),
            _ => u64::MAX,
        };
        let clean = self.combined_ok && self.cur.iter().all(|n| n.damage.is_none());
        if !clean || span > GROUP_STREAM {
            self.flush_nodes(cx);
            return;
        }
        if self.grouped == 0 {
            self.group_first = self.streams;
        }
        self.group.append(&mut self.cur);
        self.grouped += 1;
        if self.grouped == GROUP {
            let r = Range::new(
                self.group[0].range.start,
                self.group[self.group.len() - 1].range.end,
            );
            let (a, b) = (self.group_first, self.group_first + GROUP - 1);
            self.group.clear();
            self.grouped = 0;
            cx.push_node(
                Node::new("streams", format!("streams #{a}–#{b}"), r)
                    .uint(GROUP)
                    .lazy(),
            );
        }
    }

    /// Pushes the held nodes one by one.
    fn flush_nodes(&mut self, cx: &mut StepCx) {
        for n in self.group.drain(..).chain(self.cur.drain(..)) {
            cx.push_node(n);
        }
        self.grouped = 0;
    }

    /// Reports the blocks lost in a row, if any.
    fn flush_lost(&mut self, cx: &mut StepCx) {
        let Some(run) = self.lost.take() else {
            return;
        };
        let LostRun {
            from,
            to,
            bit,
            first,
            last,
            why,
        } = run;
        let what = if first == last {
            format!("bzip2 block #{first} at bit {bit} does not decode ({why})")
        } else {
            format!(
                "bzip2 blocks #{first} to #{last} ({} block magics from bit {bit}) do not decode (the first: {why})",
                last - first + 1
            )
        };
        self.flush_nodes(cx);
        self.out.record_lost(cx, from, to, &what, "block", true);
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
        self.flush_lost(cx);
        self.in_stream = true;
        self.push(
            cx,
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
            if self.combined_ok && stored == self.combined {
                self.checked_streams += 1;
            } else {
                self.all_checked = false;
            }
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
            self.push(cx, n);
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
        self.all_checked = false;
        let k = self.blocks;
        let r = Range::new(s / 8, e.div_ceil(8));
        if to_eof {
            let d = Damage::truncated(r, format!("block #{k} is cut off ({why})"));
            self.flush_lost(cx);
            self.push(
                cx,
                Node::new("partial block", format!("block #{k}"), r)
                    .text(format!("bits {s}..{e}, cut off"))
                    .damaged(d),
            );
            return Some(self.cut(
                cx,
                &format!("bzip2 block #{k} at bit {s} is cut off: its bytes cannot be decoded"),
            ));
        }
        // Blocks that do not decode in a row (fake magics, or damage
        // spanning several blocks) are one lost range: one node and one
        // record, however many magics are in it.
        match &mut self.lost {
            Some(run) => {
                run.to = e / 8;
                run.last = k;
            }
            None => {
                self.lost = Some(LostRun {
                    from: s / 8,
                    to: e / 8,
                    bit: s,
                    first: k,
                    last: k,
                    why: why.to_string(),
                });
            }
        }
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
            self.all_checked = false;
            let d = Damage::corrupt(
                r,
                format!(
                    "bzip2 block #{k}: CRC mismatch: stored {stored:#010x}, computed {computed:#010x} (decoded bytes kept)"
                ),
            );
            n = n.damaged(d.clone());
            cx.damage(d);
            // It decoded without an error: which of its bytes are wrong is
            // not known.
            self.out.damage(
                cx,
                Damage::unverified(
                    Range::new(out_start, out_end),
                    format!(
                        "block #{k} fails its CRC; it decoded without an error, and which bytes are wrong is not known"
                    ),
                ),
            );
        } else {
            self.combined = self.combined.rotate_left(1) ^ stored;
        }
        self.push(cx, n);
        self.state = State::Magic { bit: e };
        if trailing {
            // The block decoded and checks out, but the bits after its end
            // are no block magic: a magic was damaged, and the block it
            // began is lost up to the next magic found.
            {
                self.combined_ok = false;
                self.all_checked = false;
                self.flush_lost(cx);
                self.flush_nodes(cx);
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
        // Right after a stream, another stream's header is the likely
        // next thing: a short read, not a megabyte per stream.
        let len = if at == pad { 64 } else { 1 << 20 };
        let Ok(bytes) = view(&*data, at, len, &mut self.scratch) else {
            return Some(self.finish(cx));
        };
        if bytes.is_empty() {
            if !fin {
                return Some(Step::Blocked);
            }
            if avail > pad {
                let r = Range::new(pad, avail);
                self.push(cx, Node::new("padding", "zero padding", r).uint(r.len()));
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
            self.push(cx, Node::new("padding", "zero padding", r).uint(r.len()));
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
                self.all_checked = false;
                self.flush_lost(cx);
                self.flush_nodes(cx);
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
                self.flush_lost(cx);
                self.flush_nodes(cx);
                self.out
                    .record_lost(cx, lost / 8, avail, &why, "block", false);
                Some(self.finish(cx))
            }
        }
    }
}

/// A group's nodes, rebuilt from its bytes (clean streams: a header,
/// blocks, an end of stream each). Blocks are shown by their bits and
/// CRC, without the decoded offsets the first pass gave them.
fn load(data: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    if node.kind != "streams" {
        return Vec::new();
    }
    let mut k: u64 = node
        .name
        .trim_start_matches("streams #")
        .split('–')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1);
    let mut out = Vec::new();
    let mut scratch = Vec::new();
    let mut at = node.range.start;
    while at + 4 <= node.range.end {
        let mut b = [0u8; 4];
        if !matches!(crate::data::read_exact_at(data, at, &mut b), Ok(true)) || !is_header(&b) {
            break;
        }
        out.push(
            Node::new(
                "stream header",
                format!("stream #{k}"),
                Range::new(at, at + 4),
            )
            .text(format!(
                "BZh{} ({} kB blocks)",
                b[3] as char,
                (b[3] - b'0') as u32 * 100
            )),
        );
        let (mut bit, mut blocks) = ((at + 4) * 8, 0u64);
        loop {
            match bits_at(data, bit, 48) {
                Some(BLOCK_MAGIC) => {
                    let Found::Magic(e) = find_magic(data, bit + 48, GROUP_STREAM, &mut scratch)
                    else {
                        return out;
                    };
                    blocks += 1;
                    let crc = bits_at(data, bit + 48, 32).unwrap_or(0);
                    out.push(
                        Node::new(
                            "block",
                            format!("block #{blocks}"),
                            Range::new(bit / 8, e.div_ceil(8)),
                        )
                        .text(format!("bits {bit}..{e}, CRC {crc:#010x}")),
                    );
                    bit = e;
                }
                Some(EOS_MAGIC) => {
                    let stored = bits_at(data, bit + 48, 32).unwrap_or(0);
                    out.push(
                        Node::new(
                            "end of stream",
                            format!("end of stream #{k}"),
                            Range::new(bit / 8, (bit + 80).div_ceil(8)),
                        )
                        .text(format!(
                            "combined CRC {stored:#010x}, {blocks} blocks, at bit {bit}"
                        )),
                    );
                    at = (bit + 80).div_ceil(8);
                    k += 1;
                    break;
                }
                _ => return out,
            }
        }
    }
    out
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
    use crate::parsers::compress::decoded::{check_random_reads, decode_block, fixture};

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

    /// Decodes a one-block stream to its end or first error: its output
    /// and whether it ended well.
    fn decode_mini(mini: &[u8]) -> (Vec<u8>, bool) {
        let mut z = bzip2::Decompress::new(false);
        let mut out = Vec::with_capacity(1 << 20);
        loop {
            let at = z.total_in() as usize;
            if out.len() == out.capacity() {
                out.reserve(1 << 20);
            }
            match z.decompress_vec(&mini[at..], &mut out) {
                Ok(bzip2::Status::StreamEnd) => return (out, true),
                Ok(_) if z.total_in() as usize > at || out.len() < out.capacity() => {
                    if z.total_in() as usize == at && out.len() < out.capacity() {
                        return (out, false);
                    }
                }
                Ok(_) => {}
                Err(_) => return (out, false),
            }
        }
    }

    /// bzip2's first run-length coding of a block's bytes: runs of 4 to
    /// 255 equal bytes become 4 bytes and a count.
    fn rle1_len(b: &[u8]) -> u32 {
        let (mut n, mut i) = (0, 0);
        while i < b.len() {
            let run = b[i..].iter().take(255).take_while(|&&c| c == b[i]).count();
            n += if run >= 4 { 5 } else { run as u32 };
            i += run;
        }
        n
    }

    /// Bytes with long runs, text and noise.
    fn sample(len: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 4 {
                0 => out.extend(std::iter::repeat_n(
                    (x >> 8) as u8,
                    (x >> 16) as usize % 3000,
                )),
                1 => out.extend_from_slice(b"the quick brown fox jumps over the lazy dog "),
                2 => out.extend((0..64).map(|i| (x >> (i % 56)) as u8)),
                _ => out.push(b'a' + (x >> 20) as u8 % 3),
            }
        }
        out.truncate(len);
        out
    }

    /// The bit ranges of a stream's blocks.
    fn block_bits(input: &Data) -> Vec<(u64, u64)> {
        let mut scratch = Vec::new();
        let (mut bit, mut out) = (32, Vec::new());
        while bits_at(&**input, bit, 48) == Some(BLOCK_MAGIC) {
            let Found::Magic(e) = find_magic(&**input, bit + 48, 1 << 23, &mut scratch) else {
                panic!("no end");
            };
            out.push((bit, e));
            bit = e;
        }
        out
    }

    #[test]
    fn check_block_takes_real_blocks_and_sizes_them() {
        for (level, len, seed) in [
            (1, 1_300_000, 1),
            (5, 700_000, 2),
            (9, 2_000_000, 3),
            (9, 1, 4),
        ] {
            let data = sample(len, seed);
            let mut file = Vec::new();
            std::io::Read::read_to_end(
                &mut bzip2::read::BzEncoder::new(&data[..], bzip2::Compression::new(level)),
                &mut file,
            )
            .unwrap();
            let input: Data = Arc::new(MemSource::new(file));
            let blocks = block_bits(&input);
            assert!(!blocks.is_empty());
            let mut all = Vec::new();
            for (s, e) in blocks {
                let (mini, small) = block_stream(&*input, s, e).unwrap();
                let nblock = check_block(&mini).unwrap();
                let (out, ok) = decode_mini(&mini);
                assert!(ok, "level {level}, block at bit {s}");
                assert_eq!(small.is_some(), nblock <= SMALL);
                if let Some(small) = small {
                    assert!(small == out, "level {level}, block at bit {s}");
                }
                assert_eq!(nblock, rle1_len(&out), "level {level}, block at bit {s}");
                assert!(mini[3] - b'0' <= level as u8);
                all.extend(out);
            }
            assert!(all == data, "level {level}");
        }
    }

    /// The pre-pass rejects only blocks libbz2 decodes no byte of (libbz2
    /// may still fail one it takes: its inverse BWT and run-length
    /// decoding are not checked).
    #[test]
    fn check_block_agrees_with_libbz2() {
        let data = sample(3000, 7);
        let mut file = Vec::new();
        std::io::Read::read_to_end(
            &mut bzip2::read::BzEncoder::new(&data[..], bzip2::Compression::new(9)),
            &mut file,
        )
        .unwrap();
        let input: Data = Arc::new(MemSource::new(file));
        let (s, e) = block_bits(&input)[0];
        let good = mini_stream(&*input, s, e).unwrap();
        let (mut taken, mut rejected) = (0, 0);
        for bit in 80..(good.len() * 8 - 80) {
            let mut m = good.clone();
            m[bit / 8] ^= 0x80 >> (bit % 8);
            let (out, _) = decode_mini(&m);
            match walk_block(&m, true) {
                Ok(w) => {
                    taken += 1;
                    if let Some(small) = w.small {
                        assert!(small == out, "bit {bit}: decoded otherwise than by libbz2");
                    }
                }
                Err(why) => {
                    rejected += 1;
                    assert!(out.is_empty(), "bit {bit}: {why}, yet libbz2 gave output");
                }
            }
        }
        assert!(taken > 0 && rejected > 0, "{taken} {rejected}");
        // Fake blocks: a magic and zeros, a magic and noise.
        let mut x = 99u64;
        for i in 0..2000 {
            let mut m = b"BZh9".to_vec();
            m.extend_from_slice(&BLOCK_MAGIC.to_be_bytes()[2..]);
            for _ in 0..(i % 40) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                m.push(if i < 40 { 0 } else { x as u8 });
            }
            m.extend_from_slice(&EOS_MAGIC.to_be_bytes()[2..]);
            m.extend_from_slice(&[0; 4]);
            let (out, _) = decode_mini(&m);
            match check_block(&m) {
                Ok(_) => assert!(i >= 40, "a magic and zeros is no block"),
                Err(why) => assert!(out.is_empty(), "fake {i}: {why}, yet libbz2 gave output"),
            }
        }
    }

    /// Small blocks of every shape (runs that end at the block's end,
    /// runs of 4 to 255 and longer) decode as libbz2 decodes them.
    #[test]
    fn small_blocks_decode_as_libbz2_does() {
        let mut small = 0;
        for seed in 1..400u64 {
            let len = (seed * 37 % 3000) as usize;
            let mut data = sample(len, seed);
            if seed % 3 == 0 {
                data.extend(std::iter::repeat_n(b'z', (seed % 300) as usize));
            }
            if data.is_empty() {
                continue;
            }
            let mut file = Vec::new();
            std::io::Read::read_to_end(
                &mut bzip2::read::BzEncoder::new(&data[..], bzip2::Compression::new(1)),
                &mut file,
            )
            .unwrap();
            let input: Data = Arc::new(MemSource::new(file));
            for (s, e) in block_bits(&input) {
                let (mini, w) = block_stream(&*input, s, e).unwrap();
                let (out, ok) = decode_mini(&mini);
                assert!(ok);
                if let Some(w) = w {
                    small += 1;
                    assert!(w == out, "seed {seed}");
                }
            }
        }
        assert!(small > 350, "{small}");
    }

    #[test]
    fn crc_of_known_text() {
        // bzip2's block CRC of "hello\n" is stored in `echo hello | bzip2`.
        assert_eq!(!crc_update(0xffff_ffff, b"123456789"), 0xfc89_1918);
    }
}
