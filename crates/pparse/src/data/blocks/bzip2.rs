//! bzip2's block decoder: a block found at any bit offset decodes on its
//! own, so each is a checkpoint of the decoded stream (see the parser,
//! `parsers/compress/bzip2.rs`, for how blocks are found and damage
//! reported). Hostile blocks are walked by hand before libbz2 opens them
//! ([`walk_block`]), and small ones are decoded here without it.

use std::io;

use crate::data::{Block, BlockCodec, BlockReader, Data, Pull, Range, Source, view};

pub(crate) const BLOCK_MAGIC: u64 = 0x3141_5926_5359;
pub(crate) const EOS_MAGIC: u64 = 0x1772_4538_5090;
pub(crate) const MASK48: u64 = (1 << 48) - 1;
/// Longest compressed block accepted (a real one is under 2.5 MB; the
/// bits of one block are held in memory to decode it).
pub(crate) const MAX_BLOCK_BYTES: u64 = 8 << 20;

/// bzip2's CRC-32: polynomial 0x04c11db7, most significant bit first.
pub(crate) const CRC_TABLE: [u32; 256] = {
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

pub(crate) fn crc_update(crc: u32, bytes: &[u8]) -> u32 {
    let mut c = crc;
    for &b in bytes {
        c = (c << 8) ^ CRC_TABLE[((c >> 24) as u8 ^ b) as usize];
    }
    c
}

/// `n` (at most 57) bits at bit offset `bit`, most significant first;
/// `None` if the bytes are not there.
pub(crate) fn bits_at(data: &dyn Source, bit: u64, n: u32) -> Option<u64> {
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
pub(crate) enum Found {
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
pub(crate) fn find_magic(data: &dyn Source, from: u64, max: u64, scratch: &mut Vec<u8>) -> Found {
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
pub(crate) struct BitWriter {
    pub(crate) out: Vec<u8>,
    pub(crate) acc: u64,
    pub(crate) n: u32,
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
pub(crate) struct Bits<'a> {
    pub(crate) b: &'a [u8],
    pub(crate) next: usize,
    pub(crate) acc: u64,
    pub(crate) n: u32,
}

/// Why the pre-pass rejected a block.
pub(crate) type Reject = &'static str;

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
pub(crate) const MAX_SELECTORS: usize = 18002;
/// Longest Huffman code.
pub(crate) const MAX_CODE_LEN: usize = 23;

/// One Huffman table, built as libbz2's `create_decode_tables` builds it.
pub(crate) struct Table {
    pub(crate) limit: [i32; 258],
    pub(crate) base: [i32; 258],
    pub(crate) perm: [u16; 258],
    pub(crate) min_len: u32,
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
pub(crate) fn check_block(mini: &[u8]) -> Result<u32, Reject> {
    walk_block(mini, false).map(|w| w.nblock)
}

/// Blocks of at most this many symbols are decoded by [`decode_small`]
/// rather than by libbz2, whose decoder zeroes at least 450 kB however
/// small the block (a tiny stream cost 20 µs of it). Their output is at
/// most 51 times this.
pub(crate) const SMALL: u32 = 16 << 10;

/// Blocks over this many compressed bytes are opened at level 9 without
/// [`walk_block`]: a 3.6 MB decoder per 128 KiB of input at worst.
pub(crate) const WALK_MAX: usize = 128 << 10;

/// What [`walk_block`] learned.
pub(crate) struct Walked {
    pub(crate) nblock: u32,
    /// A small block's decoded bytes, when it is small, not randomised,
    /// and its data ends where the stream's end marker follows.
    pub(crate) small: Option<Vec<u8>>,
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
pub(crate) fn walk_block(mini: &[u8], keep: bool) -> Result<Walked, Reject> {
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
pub(crate) fn decode_small(tt: Vec<u8>, orig_ptr: u32) -> Option<Vec<u8>> {
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
pub(crate) fn block_stream(
    data: &dyn Source,
    s: u64,
    e: u64,
) -> io::Result<(Vec<u8>, Option<Vec<u8>>)> {
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
pub(crate) fn mini_stream(data: &dyn Source, s: u64, e: u64) -> io::Result<Vec<u8>> {
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

    /// The block whose magic ends this one, up to the next magic; after an
    /// end-of-stream marker, the first block of a stream that follows it
    /// at once (pbzip2 writes a stream per block).
    fn next_block(&self, input: &dyn Source, block: &Block) -> Option<Block> {
        let [_, e] = block.aux;
        let start = match bits_at(input, e, 48)? {
            BLOCK_MAGIC => e,
            EOS_MAGIC => {
                let at = e.checked_add(80)?.div_ceil(8);
                let mut head = [0u8; 4];
                if !crate::data::read_exact_at(input, at, &mut head).ok()?
                    || &head[..3] != b"BZh"
                    || !(b'1'..=b'9').contains(&head[3])
                {
                    return None;
                }
                let bit = (at + 4) * 8;
                (bits_at(input, bit, 48)? == BLOCK_MAGIC).then_some(bit)?
            }
            _ => return None,
        };
        // The first pass's scan: the next magic, within the longest block.
        let mut scratch = Vec::new();
        let mut from = start + 48;
        let end = loop {
            match find_magic(input, from, 1 << 20, &mut scratch) {
                Found::Magic(m) => break m,
                Found::Upto(next) if next > from && next - start <= MAX_BLOCK_BYTES * 8 => {
                    from = next;
                }
                Found::Upto(_) => return None,
            }
        };
        (end - start <= MAX_BLOCK_BYTES * 8).then_some(Block {
            input: Range::new(start / 8, start / 8),
            out_start: 0,
            out_len: 0,
            aux: [start, end],
        })
    }
}

/// A small block decoded by [`walk_block`] when opened.
pub(crate) struct SmallDecoder {
    pub(crate) out: Vec<u8>,
    pub(crate) at: usize,
    /// Where libbz2 would have stopped reading (the whole one-block
    /// stream read).
    pub(crate) input_end: u64,
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

pub(crate) struct BlockDecoder {
    pub(crate) mini: Vec<u8>,
    pub(crate) pos: usize,
    pub(crate) z: bzip2::Decompress,
    pub(crate) ended: bool,
    pub(crate) error: Option<String>,
    pub(crate) start_bit: u64,
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

pub(crate) struct StreamDecoder {
    pub(crate) z: bzip2::Decompress,
    pub(crate) input: Data,
    pub(crate) inbuf: crate::data::InputBuf,
    pub(crate) ended: bool,
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
