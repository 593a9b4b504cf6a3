//! Reading HDF5's structures where they lie: the superblock, object
//! headers and their messages, and the members of a group (symbol tables:
//! a v1 B-tree of symbol-table nodes naming into a local heap; or link
//! messages in the group's own header).
//!
//! Every read is bounded by the bytes there are and by the limits below;
//! every address is checked against the file before it is followed, and
//! every walk keeps the addresses it has seen.

use std::collections::HashSet;

use crate::data::{Range, Source, read_exact_at};
use crate::offer::tensor::Dtype;

/// The signature before a superblock.
pub(crate) const MAGIC: &[u8; 8] = b"\x89HDF\r\n\x1a\n";
/// Where a superblock may start: 0, then 512 and each power of two after.
pub(crate) fn superblock_places(len: u64) -> impl Iterator<Item = u64> {
    std::iter::once(0).chain((9..64).map(|s| 1u64 << s).take_while(move |&at| at < len))
}
/// Offsets past this are in no file.
const MAX_OFFSET: u64 = i64::MAX as u64;
/// The undefined address (every bit set, in the file's offset size).
pub(crate) const UNDEF: u64 = u64::MAX;
/// Bytes of one object-header chunk read at most.
pub(crate) const MAX_CHUNK: u64 = 16 << 20;
/// Continuation chunks followed per object header at most.
const MAX_CHUNKS: usize = 4096;
/// Messages read per object header at most.
const MAX_MESSAGES: usize = 65_536;
/// Levels of a v1 B-tree followed at most.
pub(crate) const MAX_LEVELS: u32 = 64;
/// Members of one group listed at most.
pub(crate) const MAX_MEMBERS: usize = 1_000_000;
/// A local heap's data segment read at most.
const MAX_HEAP: u64 = 256 << 20;
/// Dimensions of a dataspace (HDF5 allows 32).
const MAX_RANK: usize = 32;

/// Why a structure could not be read: where, why, and whether the bytes
/// just end before it (a cut file) rather than hold something wrong.
#[derive(Clone, Debug)]
pub(crate) struct Bad {
    pub(crate) at: u64,
    pub(crate) why: String,
    pub(crate) cut: bool,
}

impl Bad {
    pub(crate) fn wrong(at: u64, why: impl Into<String>) -> Bad {
        Bad {
            at,
            why: why.into(),
            cut: false,
        }
    }
}

/// Reads `n` bytes at `at`, at most `MAX_CHUNK`, checked against the end.
pub(crate) fn bytes(src: &dyn Source, at: u64, n: u64, what: &str) -> Result<Vec<u8>, Bad> {
    if n > MAX_CHUNK {
        return Err(Bad::wrong(
            at,
            format!("{what} of {n} bytes is past the limit"),
        ));
    }
    let end = at
        .checked_add(n)
        .ok_or_else(|| Bad::wrong(at, format!("{what} ends past 2^64")))?;
    if end > src.available() {
        return Err(Bad {
            at,
            why: format!("{what} ends at {end:#x}, past the end of the file"),
            cut: true,
        });
    }
    let mut buf = vec![0; n as usize];
    match read_exact_at(src, at, &mut buf) {
        Ok(true) => Ok(buf),
        Ok(false) => Err(Bad {
            at,
            why: format!("{what} is cut"),
            cut: true,
        }),
        Err(e) => Err(Bad::wrong(at, format!("{what}: {e}"))),
    }
}

/// A little-endian cursor over bytes read from offset `base`.
pub(crate) struct Cur<'b> {
    b: &'b [u8],
    pos: usize,
    base: u64,
}

impl<'b> Cur<'b> {
    pub(crate) fn new(b: &'b [u8], base: u64) -> Cur<'b> {
        Cur { b, pos: 0, base }
    }
    /// The file offset of the next byte.
    pub(crate) fn at(&self) -> u64 {
        self.base + self.pos as u64
    }
    pub(crate) fn take(&mut self, n: usize) -> Result<&'b [u8], Bad> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(Bad::wrong(self.at(), "a field runs past its structure"));
        };
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub(crate) fn skip(&mut self, n: usize) -> Result<(), Bad> {
        self.take(n).map(|_| ())
    }
    pub(crate) fn u8(&mut self) -> Result<u8, Bad> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u16(&mut self) -> Result<u16, Bad> {
        Ok(self.uint(2)? as u16)
    }
    pub(crate) fn u32(&mut self) -> Result<u32, Bad> {
        Ok(self.uint(4)? as u32)
    }
    /// An unsigned little-endian integer of `n` bytes (1 to 8); all bits
    /// set reads as [`UNDEF`].
    pub(crate) fn uint(&mut self, n: usize) -> Result<u64, Bad> {
        if !(1..=8).contains(&n) {
            return Err(Bad::wrong(self.at(), format!("a field of {n} bytes")));
        }
        let s = self.take(n)?;
        if s.iter().all(|&b| b == 0xff) {
            return Ok(UNDEF);
        }
        Ok(s.iter().rev().fold(0u64, |v, &b| v << 8 | u64::from(b)))
    }
    pub(crate) fn rest(&self) -> usize {
        self.b.len() - self.pos
    }
}

/// Bob Jenkins' lookup3 `hashlittle` with an initial value of 0: the
/// checksum of version 2 structures.
pub(crate) fn lookup3(data: &[u8]) -> u32 {
    /// The word at the start of `s` (at most 4 bytes), zero-padded.
    fn word(s: &[u8]) -> u32 {
        let mut w = [0u8; 4];
        w[..s.len()].copy_from_slice(s);
        u32::from_le_bytes(w)
    }
    /// Subtracts `z`, xors `z` rotated by `k`, adds `w` — one of the six
    /// steps of lookup3's mix.
    fn step(x: &mut u32, z: u32, k: u32, w: &mut u32, y: u32) {
        *x = x.wrapping_sub(z);
        *x ^= z.rotate_left(k);
        *w = w.wrapping_add(y);
    }
    /// One of the seven steps of lookup3's final mix.
    fn fin(x: &mut u32, y: u32, k: u32) {
        *x ^= y;
        *x = x.wrapping_sub(y.rotate_left(k));
    }
    let init = 0xdead_beefu32.wrapping_add(data.len() as u32);
    let (mut a, mut b, mut c) = (init, init, init);
    let mut k = data;
    while k.len() > 12 {
        a = a.wrapping_add(word(&k[0..4]));
        b = b.wrapping_add(word(&k[4..8]));
        c = c.wrapping_add(word(&k[8..12]));
        step(&mut a, c, 4, &mut c, b);
        step(&mut b, a, 6, &mut a, c);
        step(&mut c, b, 8, &mut b, a);
        step(&mut a, c, 16, &mut c, b);
        step(&mut b, a, 19, &mut a, c);
        step(&mut c, b, 4, &mut b, a);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    let n = k.len();
    a = a.wrapping_add(word(&k[..n.min(4)]));
    if n > 4 {
        b = b.wrapping_add(word(&k[4..n.min(8)]));
    }
    if n > 8 {
        c = c.wrapping_add(word(&k[8..n]));
    }
    fin(&mut c, b, 14);
    fin(&mut a, c, 11);
    fin(&mut b, a, 25);
    fin(&mut c, b, 16);
    fin(&mut a, c, 4);
    fin(&mut b, a, 14);
    fin(&mut c, b, 24);
    c
}

/// What the superblock says.
#[derive(Clone, Debug)]
pub(crate) struct Superblock {
    /// Where it starts in the file.
    pub(crate) at: u64,
    /// Its bytes.
    pub(crate) len: u64,
    pub(crate) version: u8,
    /// Bytes of an address and of a length.
    pub(crate) offsets: u8,
    pub(crate) lengths: u8,
    /// The file offset addresses count from.
    pub(crate) base: u64,
    /// The end of the file it records (relative to `base`).
    pub(crate) eof: u64,
    /// The root group's object header (a file offset).
    pub(crate) root: u64,
    /// Its checksum (versions 2 and 3) holds.
    pub(crate) checksum: Option<bool>,
}

impl Superblock {
    /// Finds and reads the superblock: at 0, 512, 1024, …
    pub(crate) fn find(src: &dyn Source) -> Result<Superblock, Bad> {
        let len = src.available();
        let mut magic = [0u8; 8];
        for at in superblock_places(len) {
            if read_exact_at(src, at, &mut magic).unwrap_or(false) && &magic == MAGIC {
                return Superblock::read(src, at);
            }
        }
        Err(Bad::wrong(
            0,
            "no HDF5 signature at 0 or at 512 times a power of two",
        ))
    }

    fn read(src: &dyn Source, at: u64) -> Result<Superblock, Bad> {
        let head = bytes(src, at, 16, "the superblock")?;
        let version = head[8];
        let (offsets, lengths) = match version {
            0 | 1 => (head[13], head[14]),
            2 | 3 => (head[9], head[10]),
            v => return Err(Bad::wrong(at + 8, format!("superblock version {v}"))),
        };
        for (what, n) in [("offsets", offsets), ("lengths", lengths)] {
            if ![2, 4, 8].contains(&n) {
                return Err(Bad::wrong(at, format!("size of {what} {n} (2, 4 or 8)")));
            }
        }
        let o = usize::from(offsets);
        let len = match version {
            0 => 24 + 4 * o + (o * 2 + 24),
            1 => 28 + 4 * o + (o * 2 + 24),
            _ => 12 + 4 * o + 4,
        } as u64;
        let b = bytes(src, at, len, "the superblock")?;
        let mut c = Cur::new(&b, at);
        let (base, eof, root, checksum) = if version < 2 {
            c.skip(if version == 0 { 24 } else { 28 })?;
            let base = c.uint(o)?;
            let _free = c.uint(o)?;
            let eof = c.uint(o)?;
            let _driver = c.uint(o)?;
            // The root group's symbol-table entry.
            let _name = c.uint(o)?;
            let root = c.uint(o)?;
            (base, eof, root, None)
        } else {
            c.skip(12)?;
            let base = c.uint(o)?;
            let _ext = c.uint(o)?;
            let eof = c.uint(o)?;
            let root = c.uint(o)?;
            let sum = c.u32()?;
            let body = &b[..b.len() - 4];
            (base, eof, root, Some(lookup3(body) == sum))
        };
        if base == UNDEF || root == UNDEF {
            return Err(Bad::wrong(at, "the superblock has no root group"));
        }
        let root = base
            .checked_add(root)
            .filter(|&r| r <= MAX_OFFSET)
            .ok_or_else(|| Bad::wrong(at, "root group address past any file"))?;
        Ok(Superblock {
            at,
            len,
            version,
            offsets,
            lengths,
            base,
            eof,
            root,
            checksum,
        })
    }

    /// The file offset of `addr`, `None` when undefined or past any file
    /// (2^63): small sums on an offset then never overflow.
    pub(crate) fn abs(&self, addr: u64) -> Option<u64> {
        (addr != UNDEF)
            .then(|| self.base.checked_add(addr))
            .flatten()
            .filter(|&a| a <= MAX_OFFSET)
    }
}

/// One message of an object header.
#[derive(Clone, Debug)]
pub(crate) struct Message {
    pub(crate) kind: u16,
    /// Where its data starts.
    pub(crate) at: u64,
    pub(crate) data: Vec<u8>,
}

/// An object header, with the messages of all its chunks.
#[derive(Clone, Debug, Default)]
pub(crate) struct Header {
    pub(crate) version: u8,
    /// Its first chunk's bytes in the file.
    pub(crate) range: Range,
    pub(crate) messages: Vec<Message>,
    /// What was wrong in it: a bad checksum, a continuation that could
    /// not be read (the messages before are kept).
    pub(crate) problems: Vec<Bad>,
}

/// Message types.
pub(crate) mod msg {
    pub(crate) const DATASPACE: u16 = 0x1;
    pub(crate) const LINK_INFO: u16 = 0x2;
    pub(crate) const DATATYPE: u16 = 0x3;
    pub(crate) const LINK: u16 = 0x6;
    pub(crate) const LAYOUT: u16 = 0x8;
    pub(crate) const GROUP_INFO: u16 = 0xa;
    pub(crate) const FILTERS: u16 = 0xb;
    pub(crate) const ATTRIBUTE: u16 = 0xc;
    pub(crate) const CONTINUATION: u16 = 0x10;
    pub(crate) const SYMBOL_TABLE: u16 = 0x11;

    /// A message type's name.
    pub(crate) fn name(kind: u16) -> &'static str {
        match kind {
            0x0 => "nil",
            0x1 => "dataspace",
            0x2 => "link info",
            0x3 => "datatype",
            0x4 | 0x5 => "fill value",
            0x6 => "link",
            0x7 => "external files",
            0x8 => "layout",
            0x9 => "bogus",
            0xa => "group info",
            0xb => "filter pipeline",
            0xc => "attribute",
            0xd => "comment",
            0xe | 0x12 => "modification time",
            0xf => "shared message table",
            0x10 => "continuation",
            0x11 => "symbol table",
            0x13 => "B-tree K values",
            0x14 => "driver info",
            0x15 => "attribute info",
            0x16 => "reference count",
            0x17 => "file space info",
            _ => "unknown message",
        }
    }
}

impl Header {
    /// Reads the object header at file offset `at` and its continuations.
    pub(crate) fn read(src: &dyn Source, sb: &Superblock, at: u64) -> Result<Header, Bad> {
        let mut sig = [0u8; 4];
        let first = bytes(src, at, 4, "an object header")?;
        sig.copy_from_slice(&first);
        let mut h = Header::default();
        // (offset, length, v2 signature expected) of chunks still to read.
        let mut chunks: Vec<(u64, u64)> = Vec::new();
        let mut seen = HashSet::new();
        if &sig == b"OHDR" {
            h.version = 2;
            let pre = bytes(src, at, 6, "an object header")?;
            let flags = pre[5];
            let mut n = 6usize;
            if flags & 0x20 != 0 {
                n += 16;
            }
            if flags & 0x10 != 0 {
                n += 4;
            }
            let size_len = 1usize << (flags & 3);
            let pre = bytes(src, at, (n + size_len) as u64, "an object header")?;
            let mut c = Cur::new(&pre, at);
            c.skip(n)?;
            let size = c.uint(size_len)?;
            let start = at + (n + size_len) as u64;
            let end = start
                .checked_add(size)
                .and_then(|e| e.checked_add(4))
                .ok_or_else(|| Bad::wrong(at, "object header size past 2^64"))?;
            h.range = Range::new(at, end);
            let body = bytes(src, at, end - at, "an object header")?;
            check_sum(&body, at, &mut h.problems);
            let creation = flags & 0x04 != 0;
            h.read_v2_messages(
                &body[n + size_len..body.len() - 4],
                start,
                sb,
                creation,
                &mut chunks,
            )?;
            seen.insert(at);
            let mut k = 0;
            while let Some((off, len)) = chunks.pop() {
                k += 1;
                if k > MAX_CHUNKS || !seen.insert(off) {
                    h.problems
                        .push(Bad::wrong(off, "a continuation seen before"));
                    continue;
                }
                match bytes(src, off, len, "a continuation block") {
                    Ok(b) if b.len() >= 8 && &b[..4] == b"OCHK" => {
                        check_sum(&b, off, &mut h.problems);
                        let body = &b[4..b.len() - 4];
                        if let Err(e) = h.read_v2_messages(body, off + 4, sb, creation, &mut chunks)
                        {
                            h.problems.push(e);
                        }
                    }
                    Ok(_) => h
                        .problems
                        .push(Bad::wrong(off, "a continuation block without OCHK")),
                    Err(e) => h.problems.push(e),
                }
            }
        } else {
            let pre = bytes(src, at, 16, "an object header")?;
            let mut c = Cur::new(&pre, at);
            h.version = c.u8()?;
            if h.version != 1 {
                return Err(Bad::wrong(
                    at,
                    format!("object header version {}", h.version),
                ));
            }
            c.skip(1)?;
            let _count = c.u16()?;
            let _refs = c.u32()?;
            let size = u64::from(c.u32()?);
            h.range = Range::new(at, at + 16 + size);
            chunks.push((at + 16, size));
            let mut k = 0;
            while let Some((off, len)) = chunks.pop() {
                k += 1;
                if k > MAX_CHUNKS || !seen.insert(off) {
                    h.problems
                        .push(Bad::wrong(off, "a continuation seen before"));
                    continue;
                }
                match bytes(src, off, len, "object header messages") {
                    Ok(b) => {
                        if let Err(e) = h.read_v1_messages(&b, off, sb, &mut chunks) {
                            h.problems.push(e);
                        }
                    }
                    Err(e) if k == 1 => return Err(e),
                    Err(e) => h.problems.push(e),
                }
            }
        }
        Ok(h)
    }

    fn push(
        &mut self,
        kind: u16,
        at: u64,
        data: &[u8],
        sb: &Superblock,
        more: &mut Vec<(u64, u64)>,
    ) -> Result<(), Bad> {
        if self.messages.len() >= MAX_MESSAGES {
            return Err(Bad::wrong(at, "more messages than the limit"));
        }
        if kind == msg::CONTINUATION {
            let mut c = Cur::new(data, at);
            let off = c.uint(usize::from(sb.offsets))?;
            let len = c.uint(usize::from(sb.lengths))?;
            let off = sb
                .abs(off)
                .ok_or_else(|| Bad::wrong(at, "a continuation to nowhere"))?;
            more.push((off, len));
        }
        self.messages.push(Message {
            kind,
            at,
            data: data.to_vec(),
        });
        Ok(())
    }

    fn read_v1_messages(
        &mut self,
        b: &[u8],
        base: u64,
        sb: &Superblock,
        more: &mut Vec<(u64, u64)>,
    ) -> Result<(), Bad> {
        let mut c = Cur::new(b, base);
        while c.rest() >= 8 {
            let kind = c.u16()?;
            let size = usize::from(c.u16()?);
            c.skip(4)?;
            let at = c.at();
            let data = c.take(size)?;
            if kind != 0 {
                self.push(kind, at, data, sb, more)?;
            }
        }
        Ok(())
    }

    fn read_v2_messages(
        &mut self,
        b: &[u8],
        base: u64,
        sb: &Superblock,
        creation: bool,
        more: &mut Vec<(u64, u64)>,
    ) -> Result<(), Bad> {
        let head = if creation { 6 } else { 4 };
        let mut c = Cur::new(b, base);
        // What is left is a gap smaller than a message's header.
        while c.rest() >= head {
            let kind = u16::from(c.u8()?);
            let size = usize::from(c.u16()?);
            c.skip(head - 3)?;
            let at = c.at();
            let data = c.take(size)?;
            if kind != 0 {
                self.push(kind, at, data, sb, more)?;
            }
        }
        Ok(())
    }

    /// Its first message of `kind`.
    pub(crate) fn find(&self, kind: u16) -> Option<&Message> {
        self.messages.iter().find(|m| m.kind == kind)
    }

    /// What kind of object it is.
    pub(crate) fn kind(&self) -> ObjectKind {
        if self.find(msg::LAYOUT).is_some() {
            ObjectKind::Dataset
        } else if [
            msg::SYMBOL_TABLE,
            msg::LINK_INFO,
            msg::LINK,
            msg::GROUP_INFO,
        ]
        .iter()
        .any(|&k| self.find(k).is_some())
        {
            ObjectKind::Group
        } else if self.find(msg::DATATYPE).is_some() {
            ObjectKind::Datatype
        } else {
            ObjectKind::Other
        }
    }
}

/// Checks the lookup3 checksum in the last 4 bytes of `b`.
pub(crate) fn check_sum(b: &[u8], at: u64, problems: &mut Vec<Bad>) {
    let n = b.len().saturating_sub(4);
    let want = u32::from_le_bytes(b[n..].try_into().unwrap_or([0; 4]));
    if lookup3(&b[..n]) != want {
        problems.push(Bad::wrong(at, "checksum does not match"));
    }
}

/// What an object header describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ObjectKind {
    Group,
    Dataset,
    Datatype,
    Other,
}

/// One member of a group.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub(crate) name: Vec<u8>,
    /// Its object header (a file offset), for a hard link.
    pub(crate) header: Option<u64>,
    /// A soft or external link's target, as text.
    pub(crate) target: Option<String>,
}

/// Bytes that encode numbers up to `x` (HDF5's rule for the variable-size
/// counts of v2 B-trees).
fn enc_size(x: u64) -> usize {
    (63 - x.max(1).leading_zeros() as usize) / 8 + 1
}

/// The managed direct blocks of a fractal heap: (heap offset, size, file
/// offset), found from its root block.
struct Heap {
    blocks: Vec<(u64, u64, u64)>,
    /// Bytes of a heap ID's offset and length fields.
    off_size: usize,
    len_size: usize,
}

impl Heap {
    fn read(
        src: &dyn Source,
        sb: &Superblock,
        at: u64,
        problems: &mut Vec<Bad>,
    ) -> Result<Heap, Bad> {
        let (o, l) = (usize::from(sb.offsets), usize::from(sb.lengths));
        let n = 4 + 1 + 2 + 2 + 1 + 4 + 12 * l + 2 * o + 2 + 2 * l + 2 + 2 + o + 2;
        let b = bytes(src, at, n as u64, "a fractal heap header")?;
        if &b[..4] != b"FRHP" {
            return Err(Bad::wrong(at, "no FRHP signature"));
        }
        let mut c = Cur::new(&b, at);
        c.skip(5)?;
        let id_len = usize::from(c.u16()?);
        let filters = c.u16()?;
        let _flags = c.u8()?;
        c.skip(4 + l + o + l + o + 8 * l)?;
        let width = u64::from(c.u16()?);
        let start = c.uint(l)?;
        let max_direct = c.uint(l)?;
        let max_bits = u32::from(c.u16()?);
        let _start_rows = c.u16()?;
        let root = c.uint(o)?;
        let rows = u64::from(c.u16()?);
        if filters != 0 {
            return Err(Bad::wrong(at, "a fractal heap with filters"));
        }
        if width == 0
            || width > 65_536
            || !start.is_power_of_two()
            || !max_direct.is_power_of_two()
            || max_direct < start
            || max_bits > 64
        {
            return Err(Bad::wrong(at, "a fractal heap of impossible geometry"));
        }
        let off_size = (max_bits as usize).div_ceil(8);
        let len_size = id_len.saturating_sub(1 + off_size);
        if !(1..=8).contains(&len_size) {
            return Err(Bad::wrong(at, format!("heap IDs of {id_len} bytes")));
        }
        let mut heap = Heap {
            blocks: Vec::new(),
            off_size,
            len_size,
        };
        let Some(root) = sb.abs(root) else {
            return Ok(heap);
        };
        let geo = Geometry {
            width,
            start,
            max_direct_rows: u64::from(max_direct.trailing_zeros() - start.trailing_zeros()) + 2,
        };
        if rows == 0 {
            heap.blocks.push((0, start, root));
        } else {
            let mut seen = HashSet::new();
            geo.indirect(src, sb, &mut heap, root, rows, 0, 0, &mut seen, problems);
        }
        heap.blocks.sort_unstable();
        Ok(heap)
    }

    /// The file range of the object `id` names.
    fn locate(&self, id: &[u8], at: u64) -> Result<(u64, u64), Bad> {
        let mut c = Cur::new(id, at);
        let kind = c.u8()?;
        if kind & 0x30 != 0 {
            return Err(Bad::wrong(at, "a huge or tiny object: not read yet"));
        }
        let off = c.uint(self.off_size)?;
        let len = c.uint(self.len_size)?;
        let i = self.blocks.partition_point(|b| b.0 <= off);
        let Some(&(b_off, b_size, b_at)) = i.checked_sub(1).and_then(|i| self.blocks.get(i)) else {
            return Err(Bad::wrong(at, "a heap ID before the heap's first block"));
        };
        let inside = off - b_off;
        if inside.checked_add(len).is_none_or(|e| e > b_size) {
            return Err(Bad::wrong(at, "a heap ID past its block"));
        }
        Ok((b_at + inside, len))
    }
}

/// A fractal heap's doubling table.
struct Geometry {
    width: u64,
    start: u64,
    max_direct_rows: u64,
}

impl Geometry {
    /// Block size of row `r`.
    fn size(&self, r: u64) -> Option<u64> {
        if r == 0 {
            Some(self.start)
        } else {
            self.start.checked_shl(u32::try_from(r - 1).ok()?)
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn indirect(
        &self,
        src: &dyn Source,
        sb: &Superblock,
        heap: &mut Heap,
        at: u64,
        rows: u64,
        heap_off: u64,
        depth: u32,
        seen: &mut HashSet<u64>,
        problems: &mut Vec<Bad>,
    ) {
        if depth > 16 || rows > 64 || !seen.insert(at) {
            problems.push(Bad::wrong(at, "a fractal heap block seen before"));
            return;
        }
        let o = usize::from(sb.offsets);
        let direct = rows.min(self.max_direct_rows);
        let entries = rows * self.width;
        let n = 5 + o + heap.off_size + entries as usize * o + 4;
        let b = match bytes(src, at, n as u64, "a fractal heap indirect block") {
            Ok(b) if &b[..4] == b"FHIB" => b,
            Ok(_) => return problems.push(Bad::wrong(at, "no FHIB signature")),
            Err(e) => return problems.push(e),
        };
        let mut c = Cur::new(&b, at);
        if c.skip(5 + o + heap.off_size).is_err() {
            return;
        }
        let mut off = heap_off;
        for r in 0..rows {
            let Some(size) = self.size(r) else { return };
            for _ in 0..self.width {
                let Ok(addr) = c.uint(o) else { return };
                if let Some(addr) = sb.abs(addr) {
                    if r < direct {
                        heap.blocks.push((off, size, addr));
                    } else {
                        // A child indirect block spans the rows of this
                        // size: log2(size / (start * width)) + 1 of them.
                        let span = size / self.start.saturating_mul(self.width).max(1);
                        let child_rows = u64::from(span.max(1).trailing_zeros()) + 1;
                        self.indirect(
                            src,
                            sb,
                            heap,
                            addr,
                            child_rows,
                            off,
                            depth + 1,
                            seen,
                            problems,
                        );
                    }
                }
                off = off.saturating_add(size);
            }
        }
    }
}

/// The link messages of a dense group: every record of its name index (a
/// v2 B-tree of type 5) names a link message in its fractal heap.
fn dense(
    src: &dyn Source,
    sb: &Superblock,
    heap_at: u64,
    tree: u64,
    out: &mut Vec<Member>,
    problems: &mut Vec<Bad>,
) {
    let heap = match Heap::read(src, sb, heap_at, problems) {
        Ok(h) => h,
        Err(e) => return problems.push(e),
    };
    let mut found = Vec::new();
    btree2(src, sb, tree, &[5], 5, problems, |_, r, at| {
        let id_at = at + 4;
        found.push(
            heap.locate(&r[4..], id_at)
                .and_then(|(a, len)| Ok((a, bytes(src, a, len, "a link message")?)))
                .and_then(|(a, m)| link(&m, a, sb)),
        );
        out.len() + found.len() < MAX_MEMBERS
    });
    for f in found {
        match f {
            Ok(l) => out.push(l),
            Err(e) => problems.push(e),
        }
    }
}

/// Visits the records of the v2 B-tree at `tree`, which must be of one of
/// the types `kinds` with records of at least `min_rec` bytes: `each`
/// gets the tree's type, a record's bytes and where they are, and returns
/// false to stop. Nodes whose checksum fails are skipped (a problem).
pub(crate) fn btree2(
    src: &dyn Source,
    sb: &Superblock,
    tree: u64,
    kinds: &[u8],
    min_rec: usize,
    problems: &mut Vec<Bad>,
    mut each: impl FnMut(u8, &[u8], u64) -> bool,
) {
    let o = usize::from(sb.offsets);
    let l = usize::from(sb.lengths);
    let head = match bytes(
        src,
        tree,
        (4 + 1 + 1 + 4 + 2 + 2 + 1 + 1 + o + 2 + l + 4) as u64,
        "a v2 B-tree header",
    ) {
        Ok(b) if &b[..4] == b"BTHD" => b,
        Ok(_) => return problems.push(Bad::wrong(tree, "no BTHD signature")),
        Err(e) => return problems.push(e),
    };
    let mut sums = Vec::new();
    check_sum(&head, tree, &mut sums);
    if !sums.is_empty() {
        return problems.extend(sums);
    }
    let mut c = Cur::new(&head, tree);
    let parsed = (|| -> Result<(u8, u64, usize, u32, u64, u64), Bad> {
        c.skip(5)?;
        let kind = c.u8()?;
        let node = u64::from(c.u32()?);
        let rec = usize::from(c.u16()?);
        let depth = u32::from(c.u16()?);
        c.skip(2)?;
        let root = c.uint(o)?;
        let n = u64::from(c.u16()?);
        Ok((kind, node, rec, depth, root, n))
    })();
    let (kind, node_size, rec, depth, root, root_n) = match parsed {
        Ok(p) => p,
        Err(e) => return problems.push(e),
    };
    if !kinds.contains(&kind)
        || rec < min_rec
        || !(16..=MAX_CHUNK).contains(&node_size)
        || depth > 32
    {
        return problems.push(Bad::wrong(
            tree,
            format!("a v2 B-tree of type {kind}, records of {rec} bytes"),
        ));
    }
    let Some(root) = sb.abs(root) else { return };
    // Record counts per node, and the bytes that encode them, by depth.
    let mut max_n = vec![(node_size - 10) / rec as u64];
    let mut cum = vec![max_n[0]];
    for d in 1..=depth as usize {
        let ptr = o + enc_size(max_n[d - 1]) + if d > 1 { enc_size(cum[d - 1]) } else { 0 };
        let m = node_size.saturating_sub(10 + ptr as u64) / (rec + ptr) as u64;
        max_n.push(m);
        cum.push((m + 1).saturating_mul(cum[d - 1]).saturating_add(m));
    }
    let mut seen = HashSet::new();
    let mut todo = vec![(root, root_n, depth)];
    while let Some((at, n, d)) = todo.pop() {
        if !seen.insert(at) {
            problems.push(Bad::wrong(at, "a v2 B-tree node seen before"));
            continue;
        }
        if n > max_n[d as usize] {
            problems.push(Bad::wrong(at, format!("a v2 B-tree node of {n} records")));
            continue;
        }
        let ptr = if d == 0 {
            0
        } else {
            o + enc_size(max_n[d as usize - 1])
                + if d > 1 {
                    enc_size(cum[d as usize - 1])
                } else {
                    0
                }
        };
        let len = 6 + n as usize * rec + if d == 0 { 0 } else { (n as usize + 1) * ptr } + 4;
        let b = match bytes(src, at, len as u64, "a v2 B-tree node") {
            Ok(b) if (d == 0 && &b[..4] == b"BTLF") || (d > 0 && &b[..4] == b"BTIN") => b,
            Ok(_) => {
                problems.push(Bad::wrong(at, "no BTLF or BTIN signature"));
                continue;
            }
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let mut sums = Vec::new();
        check_sum(&b, at, &mut sums);
        if !sums.is_empty() {
            // Its records and children cannot be trusted.
            problems.extend(sums);
            continue;
        }
        let mut c = Cur::new(&b, at);
        let _ = c.skip(6);
        for _ in 0..n {
            let rec_at = c.at();
            let Ok(r) = c.take(rec) else { break };
            if !each(kind, r, rec_at) {
                return;
            }
        }
        if d > 0 {
            let w = enc_size(max_n[d as usize - 1]);
            let tw = if d > 1 {
                enc_size(cum[d as usize - 1])
            } else {
                0
            };
            let mut kids = Vec::new();
            for _ in 0..=n {
                let (Ok(a), Ok(k)) = (c.uint(o), c.uint(w)) else {
                    break;
                };
                if c.skip(tw).is_err() {
                    break;
                }
                if let Some(a) = sb.abs(a) {
                    kids.push((a, k, d - 1));
                }
            }
            todo.extend(kids.into_iter().rev());
        }
    }
}

/// The members of the group whose header is `h`; problems met on the way
/// are added to `problems` (the members read before them are kept).
pub(crate) fn members(
    src: &dyn Source,
    sb: &Superblock,
    h: &Header,
    problems: &mut Vec<Bad>,
) -> Vec<Member> {
    let mut out = Vec::new();
    if let Some(m) = h.find(msg::SYMBOL_TABLE) {
        let mut c = Cur::new(&m.data, m.at);
        let o = usize::from(sb.offsets);
        let (Ok(tree), Ok(heap)) = (c.uint(o), c.uint(o)) else {
            problems.push(Bad::wrong(m.at, "a symbol table message is cut"));
            return out;
        };
        match (sb.abs(tree), sb.abs(heap)) {
            (Some(tree), Some(heap)) => symbol_table(src, sb, tree, heap, &mut out, problems),
            _ => problems.push(Bad::wrong(m.at, "a symbol table with no B-tree or heap")),
        }
        return out;
    }
    if let Some(info) = h.find(msg::LINK_INFO) {
        let mut c = Cur::new(&info.data, info.at);
        let heap = (|| -> Result<u64, Bad> {
            c.skip(1)?;
            let flags = c.u8()?;
            if flags & 1 != 0 {
                c.skip(8)?;
            }
            c.uint(usize::from(sb.offsets))
        })();
        let names = (|| -> Result<u64, Bad> {
            let _heap = heap.clone()?;
            c.uint(usize::from(sb.offsets))
        })();
        if let Ok(heap) = heap
            && let Some(heap) = sb.abs(heap)
        {
            let Some(tree) = names.ok().and_then(|t| sb.abs(t)) else {
                problems.push(Bad::wrong(info.at, "a dense group without a name index"));
                return out;
            };
            dense(src, sb, heap, tree, &mut out, problems);
            return out;
        }
    }
    for m in h.messages.iter().filter(|m| m.kind == msg::LINK) {
        match link(&m.data, m.at, sb) {
            Ok(l) => out.push(l),
            Err(e) => problems.push(e),
        }
        if out.len() >= MAX_MEMBERS {
            break;
        }
    }
    out
}

/// A link message.
fn link(b: &[u8], at: u64, sb: &Superblock) -> Result<Member, Bad> {
    let mut c = Cur::new(b, at);
    let version = c.u8()?;
    if version != 1 {
        return Err(Bad::wrong(at, format!("link message version {version}")));
    }
    let flags = c.u8()?;
    let kind = if flags & 0x08 != 0 { c.u8()? } else { 0 };
    if flags & 0x04 != 0 {
        c.skip(8)?;
    }
    if flags & 0x10 != 0 {
        c.skip(1)?;
    }
    let n = c.uint(1 << (flags & 3))?;
    let name = c.take(usize::try_from(n).unwrap_or(usize::MAX))?.to_vec();
    match kind {
        0 => {
            let addr = c.uint(usize::from(sb.offsets))?;
            Ok(Member {
                name,
                header: sb.abs(addr),
                target: None,
            })
        }
        1 => {
            let n = usize::from(c.u16()?);
            let t = c.take(n)?;
            Ok(Member {
                name,
                header: None,
                target: Some(String::from_utf8_lossy(t).into_owned()),
            })
        }
        k => Ok(Member {
            name,
            header: None,
            target: Some(format!("link of type {k}")),
        }),
    }
}

/// Walks a group's v1 B-tree (type 0) down to its symbol-table nodes.
fn symbol_table(
    src: &dyn Source,
    sb: &Superblock,
    tree: u64,
    heap: u64,
    out: &mut Vec<Member>,
    problems: &mut Vec<Bad>,
) {
    let names = match local_heap(src, sb, heap) {
        Ok(n) => n,
        Err(e) => {
            problems.push(e);
            return;
        }
    };
    let (o, l) = (usize::from(sb.offsets), usize::from(sb.lengths));
    let mut seen = HashSet::new();
    let mut todo = vec![(tree, 0u32)];
    while let Some((node, depth)) = todo.pop() {
        if depth > MAX_LEVELS || !seen.insert(node) {
            problems.push(Bad::wrong(node, "a B-tree node seen before"));
            continue;
        }
        let head = match bytes(src, node, 8, "a B-tree node") {
            Ok(b) => b,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        if &head[..4] == b"SNOD" {
            if let Err(e) = snod(src, sb, node, &names, out, problems) {
                problems.push(e);
            }
            continue;
        }
        if &head[..4] != b"TREE" {
            problems.push(Bad::wrong(node, "no TREE or SNOD signature"));
            continue;
        }
        let entries = u64::from(u16::from_le_bytes([head[6], head[7]]));
        let len = 8 + 2 * o as u64 + entries * (l + o) as u64 + l as u64;
        let b = match bytes(src, node, len, "a B-tree node") {
            Ok(b) => b,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let mut c = Cur::new(&b, node);
        let mut kids = Vec::new();
        let r = (|| -> Result<(), Bad> {
            c.skip(8 + 2 * o)?;
            for _ in 0..entries {
                c.skip(l)?;
                kids.push(c.uint(o)?);
            }
            Ok(())
        })();
        if let Err(e) = r {
            problems.push(e);
        }
        // Children in order: the stack takes them last first.
        for k in kids.into_iter().rev() {
            match sb.abs(k) {
                Some(k) => todo.push((k, depth + 1)),
                None => problems.push(Bad::wrong(node, "a B-tree child at no address")),
            }
        }
        if out.len() >= MAX_MEMBERS {
            break;
        }
    }
}

/// A symbol-table node's entries.
fn snod(
    src: &dyn Source,
    sb: &Superblock,
    at: u64,
    names: &[u8],
    out: &mut Vec<Member>,
    problems: &mut Vec<Bad>,
) -> Result<(), Bad> {
    for (name_at, header) in snod_entries(src, sb, at)? {
        let name = usize::try_from(name_at)
            .ok()
            .and_then(|i| names.get(i..))
            .map(|s| &s[..s.iter().position(|&b| b == 0).unwrap_or(s.len())]);
        let Some(name) = name else {
            problems.push(Bad::wrong(
                at,
                format!("a name at {name_at:#x}, past its heap"),
            ));
            continue;
        };
        out.push(Member {
            name: name.to_vec(),
            header: sb.abs(header),
            target: None,
        });
    }
    Ok(())
}

/// A symbol-table node's entries: (where the name is in its group's
/// local heap, the object header's address).
pub(crate) fn snod_entries(
    src: &dyn Source,
    sb: &Superblock,
    at: u64,
) -> Result<Vec<(u64, u64)>, Bad> {
    let o = usize::from(sb.offsets);
    let head = bytes(src, at, 8, "a symbol-table node")?;
    if &head[..4] != b"SNOD" {
        return Err(Bad::wrong(at, "no SNOD signature"));
    }
    let n = u64::from(u16::from_le_bytes([head[6], head[7]]));
    let entry = (2 * o + 24) as u64;
    let b = bytes(src, at + 8, n * entry, "a symbol-table node")?;
    let mut c = Cur::new(&b, at + 8);
    let mut out = Vec::new();
    for _ in 0..n {
        let name_at = c.uint(o)?;
        let header = c.uint(o)?;
        c.skip(24)?;
        out.push((name_at, header));
    }
    Ok(out)
}

/// A local heap's data segment.
pub(crate) fn local_heap(src: &dyn Source, sb: &Superblock, at: u64) -> Result<Vec<u8>, Bad> {
    let (o, l) = (usize::from(sb.offsets), usize::from(sb.lengths));
    let b = bytes(src, at, (8 + 2 * l + o) as u64, "a local heap")?;
    if &b[..4] != b"HEAP" {
        return Err(Bad::wrong(at, "no HEAP signature"));
    }
    let mut c = Cur::new(&b, at);
    c.skip(8)?;
    let size = c.uint(l)?;
    let _free = c.uint(l)?;
    let data = c.uint(o)?;
    let data = sb
        .abs(data)
        .ok_or_else(|| Bad::wrong(at, "a heap with no data"))?;
    if size > MAX_HEAP {
        return Err(Bad::wrong(at, format!("a heap of {size} bytes")));
    }
    bytes(src, data, size, "a local heap's data")
}

/// A dataspace: its dimensions (none for a scalar), or null.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Space {
    Scalar,
    Simple(Vec<u64>),
    Null,
}

pub(crate) fn dataspace(m: &Message, sb: &Superblock) -> Result<Space, Bad> {
    let mut c = Cur::new(&m.data, m.at);
    let version = c.u8()?;
    let rank = usize::from(c.u8()?);
    let _flags = c.u8()?;
    let kind = match version {
        1 => {
            c.skip(5)?;
            if rank == 0 { 0 } else { 1 }
        }
        2 => c.u8()?,
        v => return Err(Bad::wrong(m.at, format!("dataspace version {v}"))),
    };
    if rank > MAX_RANK {
        return Err(Bad::wrong(m.at, format!("{rank} dimensions")));
    }
    let mut dims = Vec::with_capacity(rank);
    for _ in 0..rank {
        dims.push(c.uint(usize::from(sb.lengths))?);
    }
    Ok(match kind {
        0 => Space::Scalar,
        1 => Space::Simple(dims),
        2 => Space::Null,
        k => return Err(Bad::wrong(m.at, format!("dataspace type {k}"))),
    })
}

/// A simple dataspace's largest dimensions (`None`: unlimited), when its
/// message gives them.
pub(crate) fn max_dims(m: &Message, sb: &Superblock) -> Option<Vec<Option<u64>>> {
    let mut c = Cur::new(&m.data, m.at);
    let version = c.u8().ok()?;
    let rank = usize::from(c.u8().ok()?);
    let flags = c.u8().ok()?;
    c.skip(if version == 1 { 5 } else { 1 }).ok()?;
    if flags & 1 == 0 || rank > MAX_RANK {
        return None;
    }
    let l = usize::from(sb.lengths);
    c.skip(rank * l).ok()?;
    (0..rank)
        .map(|_| c.uint(l).ok().map(|d| (d != UNDEF).then_some(d)))
        .collect()
}

/// A dataset's fill value, the bytes of one element, when its header
/// defines one (none: unwritten chunks read as zeros).
pub(crate) fn fill_value(h: &Header) -> Option<Vec<u8>> {
    let value = |c: &mut Cur| -> Option<Vec<u8>> {
        let n = c.u32().ok()? as usize;
        (n > 0 && n <= c.rest()).then(|| c.take(n).ok().map(<[u8]>::to_vec))?
    };
    if let Some(m) = h.find(0x5) {
        let mut c = Cur::new(&m.data, m.at);
        return match c.u8().ok()? {
            1 | 2 => {
                let _alloc = c.u8().ok()?;
                let _write = c.u8().ok()?;
                let defined = c.u8().ok()?;
                (defined != 0).then(|| value(&mut c))?
            }
            3 => {
                let flags = c.u8().ok()?;
                (flags & 0x20 != 0).then(|| value(&mut c))?
            }
            _ => None,
        };
    }
    let m = h.find(0x4)?;
    value(&mut Cur::new(&m.data, m.at))
}

/// A datatype, as far as it is told here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Type {
    pub(crate) class: u8,
    pub(crate) size: u32,
    pub(crate) big_endian: bool,
    /// Fixed-point: signed. Float: exponent bits.
    pub(crate) signed: bool,
    pub(crate) exponent_bits: u8,
    /// A compound's fields, an enum's names, an array's shape, in words.
    pub(crate) detail: Option<String>,
}

impl Type {
    /// The tensor element type, for the types a tensor can hold.
    pub(crate) fn dtype(&self) -> Option<Dtype> {
        Some(match (self.class, self.size, self.signed) {
            (0, 1, true) => Dtype::I8,
            (0, 1, false) => Dtype::U8,
            (0, 2, true) => Dtype::I16,
            (0, 2, false) => Dtype::U16,
            (0, 4, true) => Dtype::I32,
            (0, 4, false) => Dtype::U32,
            (0, 8, true) => Dtype::I64,
            (0, 8, false) => Dtype::U64,
            (1, 2, _) if self.exponent_bits == 5 => Dtype::F16,
            (1, 2, _) if self.exponent_bits == 8 => Dtype::BF16,
            (1, 4, _) => Dtype::F32,
            (1, 8, _) => Dtype::F64,
            (3, n, _) => Dtype::Bytes(n),
            (5 | 6, n, _) => Dtype::Void(n),
            _ => return None,
        })
    }

    /// In words: `f32`, `i64 (big-endian)`, `string[8]`, …
    pub(crate) fn text(&self) -> String {
        let order = if self.big_endian && self.class <= 1 {
            " (big-endian)"
        } else {
            ""
        };
        let base = match self.class {
            0 => format!(
                "{}{}",
                if self.signed { "i" } else { "u" },
                u64::from(self.size) * 8
            ),
            1 => match (self.size, self.exponent_bits) {
                (2, 8) => "bf16".to_string(),
                (n, _) => format!("f{}", u64::from(n) * 8),
            },
            2 => "time".to_string(),
            3 => format!("string[{}]", self.size),
            4 => format!("bitfield[{}]", self.size),
            5 => format!("opaque[{}]", self.size),
            6 => format!("compound[{}]", self.size),
            7 => "reference".to_string(),
            8 => format!("enum[{}]", self.size),
            9 => "variable-length".to_string(),
            10 => format!("array[{}]", self.size),
            k => format!("class {k}"),
        };
        match &self.detail {
            Some(d) => format!("{base} {d}"),
            None => base + order,
        }
    }
}

pub(crate) fn datatype(m: &Message) -> Result<Type, Bad> {
    datatype_at(&mut Cur::new(&m.data, m.at), 0)
}

/// Types nested in types (a compound's fields, an array's base) at most.
const MAX_TYPE_DEPTH: u32 = 8;
/// A compound's fields or an enum's names shown at most.
const SHOWN_FIELDS: usize = 16;

/// The datatype at `c`, which is left after it (its fields and base
/// types read too, to find where it ends).
fn datatype_at(c: &mut Cur, depth: u32) -> Result<Type, Bad> {
    if depth > MAX_TYPE_DEPTH {
        return Err(Bad::wrong(c.at(), "datatypes nested too deep"));
    }
    let at = c.at();
    let cv = c.u8()?;
    let bits = c.take(3)?;
    let size = c.u32()?;
    let class = cv & 0x0f;
    let version = cv >> 4;
    let flags = u32::from(bits[0]) | u32::from(bits[1]) << 8;
    let mut t = Type {
        class,
        size,
        big_endian: bits[0] & 1 != 0,
        signed: class == 0 && bits[0] & 0x08 != 0,
        exponent_bits: 0,
        detail: None,
    };
    // Names padded to 8 bytes (before version 3), NUL-terminated.
    let name = |c: &mut Cur, padded: bool| -> Result<String, Bad> {
        let rest = &c.b[c.pos..];
        let n = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or_else(|| Bad::wrong(c.at(), "a name without its end"))?;
        let s = crate::name::escape_bytes(&rest[..n]);
        c.skip(if padded {
            (n + 1).div_ceil(8) * 8
        } else {
            n + 1
        })?;
        Ok(s)
    };
    match class {
        0 | 4 => c.skip(4)?,
        1 => {
            // Bit offset, precision, exponent location, exponent size.
            c.skip(5)?;
            t.exponent_bits = c.u8()?;
            c.skip(6)?;
        }
        2 => c.skip(2)?,
        5 => c.skip((usize::from(bits[0])).div_ceil(8) * 8)?,
        6 => {
            let n = flags as usize;
            let mut fields = Vec::new();
            for _ in 0..n {
                let fname = name(c, version < 3)?;
                let off = match version {
                    1 | 2 => u64::from(c.u32()?),
                    _ => c.uint(
                        ((32 - size.max(1).leading_zeros()) as usize)
                            .div_ceil(8)
                            .max(1),
                    )?,
                };
                if version == 1 {
                    // Dimensionality, reserved, permutation, reserved, sizes.
                    c.skip(1 + 3 + 4 + 4 + 16)?;
                }
                let ft = datatype_at(c, depth + 1)?;
                if fields.len() < SHOWN_FIELDS {
                    fields.push(format!("{fname}: {} @{off}", ft.text()));
                }
            }
            if n > SHOWN_FIELDS {
                fields.push(format!("… {} more", n - SHOWN_FIELDS));
            }
            t.detail = Some(format!("{{{}}}", fields.join(", ")));
        }
        8 => {
            let base = datatype_at(c, depth + 1)?;
            let n = flags as usize;
            let mut names = Vec::new();
            for _ in 0..n {
                names.push(name(c, version < 3)?);
            }
            let width = base.size as usize;
            let mut shown = Vec::new();
            for (i, nm) in names.iter().enumerate() {
                let v = c.take(width)?;
                if i < SHOWN_FIELDS {
                    let v = v.iter().rev().fold(0u64, |a, &b| a << 8 | u64::from(b));
                    shown.push(format!("{nm}={v}"));
                }
            }
            if n > SHOWN_FIELDS {
                shown.push(format!("… {} more", n - SHOWN_FIELDS));
            }
            t.detail = Some(format!("of {} {{{}}}", base.text(), shown.join(", ")));
        }
        9 => {
            let base = datatype_at(c, depth + 1)?;
            t.detail = Some(if flags & 0x0f == 1 {
                "string".to_string()
            } else {
                format!("of {}", base.text())
            });
        }
        10 => {
            let rank = usize::from(c.u8()?);
            if version < 3 {
                c.skip(3)?;
            }
            let mut dims = Vec::new();
            for _ in 0..rank.min(MAX_RANK + 1) {
                dims.push(u64::from(c.u32()?));
            }
            if version < 3 {
                c.skip(4 * rank)?;
            }
            let base = datatype_at(c, depth + 1)?;
            t.detail = Some(format!(
                "of {} {}",
                base.text(),
                crate::offer::tensor::shape_text(&dims)
            ));
        }
        3 | 7 => {}
        k => return Err(Bad::wrong(at, format!("datatype class {k}"))),
    }
    Ok(t)
}

/// Where a dataset's values are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// In the header: the file range of its bytes.
    Compact(Range),
    /// One range of the file (none allocated: no address).
    Contiguous {
        at: Option<u64>,
        size: Option<u64>,
    },
    /// In chunks, found through a chunk index.
    Chunked(Chunking),
    Virtual,
}

/// How a chunked dataset is cut and where its chunks are listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Chunking {
    /// A chunk's dimensions, in elements.
    pub(crate) dims: Vec<u64>,
    /// Its index's address (none: no chunk written yet).
    pub(crate) index: Option<u64>,
    pub(crate) kind: IndexKind,
    /// Chunks at the dataset's far edges are stored unfiltered.
    pub(crate) edge_unfiltered: bool,
}

/// The structures that list a dataset's chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IndexKind {
    /// A v1 B-tree of type 1 (layout versions 1 to 3).
    BTree1,
    /// One chunk at the index address; its stored size and filter mask
    /// when it is filtered.
    Single(Option<(u64, u32)>),
    /// Chunks one after the other from the index address.
    Implicit,
    /// A fixed array (`FAHD`).
    Fixed,
    /// An extensible array (`EAHD`).
    Extensible,
    /// A v2 B-tree of type 10 or 11 (`BTHD`).
    BTree2,
}

impl IndexKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            IndexKind::BTree1 => "v1 B-tree",
            IndexKind::Single(_) => "single chunk",
            IndexKind::Implicit => "implicit",
            IndexKind::Fixed => "fixed array",
            IndexKind::Extensible => "extensible array",
            IndexKind::BTree2 => "v2 B-tree",
        }
    }
}

pub(crate) fn layout(m: &Message, sb: &Superblock) -> Result<Layout, Bad> {
    let mut c = Cur::new(&m.data, m.at);
    let (o, l) = (usize::from(sb.offsets), usize::from(sb.lengths));
    let version = c.u8()?;
    match version {
        1 | 2 => {
            let rank = usize::from(c.u8()?);
            let class = c.u8()?;
            c.skip(5)?;
            let at = if class != 0 { sb.abs(c.uint(o)?) } else { None };
            let mut dims = Vec::new();
            for _ in 0..rank.min(MAX_RANK + 1) {
                dims.push(u64::from(c.u32()?));
            }
            match class {
                0 => {
                    let n = c.u32()? as usize;
                    let start = c.at();
                    c.take(n)?;
                    Ok(Layout::Compact(Range::new(start, start + n as u64)))
                }
                1 => Ok(Layout::Contiguous { at, size: None }),
                2 => {
                    // The last dimension is the element's size.
                    dims.pop();
                    Ok(Layout::Chunked(Chunking {
                        dims,
                        index: at,
                        kind: IndexKind::BTree1,
                        edge_unfiltered: false,
                    }))
                }
                k => Err(Bad::wrong(m.at, format!("layout class {k}"))),
            }
        }
        3..=5 => {
            let class = c.u8()?;
            match class {
                0 => {
                    let n = usize::from(c.u16()?);
                    let start = c.at();
                    c.take(n)?;
                    Ok(Layout::Compact(Range::new(start, start + n as u64)))
                }
                1 => {
                    let at = sb.abs(c.uint(o)?);
                    let size = c.uint(l)?;
                    Ok(Layout::Contiguous {
                        at,
                        size: Some(size),
                    })
                }
                2 if version == 3 => {
                    let rank = usize::from(c.u8()?);
                    let index = sb.abs(c.uint(o)?);
                    let mut dims = Vec::new();
                    for _ in 0..rank.min(MAX_RANK + 1) {
                        dims.push(u64::from(c.u32()?));
                    }
                    dims.pop();
                    Ok(Layout::Chunked(Chunking {
                        dims,
                        index,
                        kind: IndexKind::BTree1,
                        edge_unfiltered: false,
                    }))
                }
                2 => {
                    let flags = c.u8()?;
                    let rank = usize::from(c.u8()?);
                    let width = usize::from(c.u8()?);
                    let mut dims = Vec::new();
                    for _ in 0..rank.min(MAX_RANK + 1) {
                        dims.push(c.uint(width)?);
                    }
                    // The last dimension is the element's size.
                    dims.pop();
                    let kind = match c.u8()? {
                        1 if flags & 2 != 0 => IndexKind::Single(Some((c.uint(l)?, c.u32()?))),
                        1 => IndexKind::Single(None),
                        2 => IndexKind::Implicit,
                        3 => {
                            c.skip(1)?;
                            IndexKind::Fixed
                        }
                        4 => {
                            c.skip(5)?;
                            IndexKind::Extensible
                        }
                        5 => {
                            c.skip(6)?;
                            IndexKind::BTree2
                        }
                        k => return Err(Bad::wrong(m.at, format!("chunk index type {k}"))),
                    };
                    let index = sb.abs(c.uint(o)?);
                    Ok(Layout::Chunked(Chunking {
                        dims,
                        index,
                        kind,
                        edge_unfiltered: flags & 1 != 0,
                    }))
                }
                3 => Ok(Layout::Virtual),
                k => Err(Bad::wrong(m.at, format!("layout class {k}"))),
            }
        }
        v => Err(Bad::wrong(m.at, format!("layout version {v}"))),
    }
}

/// The filters of a pipeline message, by their ids.
pub(crate) fn filters(m: &Message) -> Result<Vec<u16>, Bad> {
    let mut c = Cur::new(&m.data, m.at);
    let version = c.u8()?;
    let n = c.u8()?;
    if version == 1 {
        c.skip(6)?;
    }
    let mut out = Vec::new();
    for _ in 0..n {
        let id = c.u16()?;
        let name = if version == 1 || id >= 256 {
            usize::from(c.u16()?)
        } else {
            0
        };
        let _flags = c.u16()?;
        let values = usize::from(c.u16()?);
        let name = if version == 1 {
            name.div_ceil(8) * 8
        } else {
            name
        };
        c.skip(name)?;
        c.skip(values * 4)?;
        if version == 1 && values % 2 == 1 {
            c.skip(4)?;
        }
        out.push(id);
    }
    Ok(out)
}

/// A filter's name.
pub(crate) fn filter_name(id: u16) -> String {
    match id {
        1 => "deflate".into(),
        2 => "shuffle".into(),
        3 => "fletcher32".into(),
        4 => "szip".into(),
        5 => "nbit".into(),
        6 => "scaleoffset".into(),
        32000 => "lzf".into(),
        32001 => "blosc".into(),
        32004 => "lz4".into(),
        32008 => "bitshuffle".into(),
        32015 => "zstd".into(),
        n => format!("filter {n}"),
    }
}

/// An attribute: its name, type, shape and where its value is.
pub(crate) struct Attribute {
    pub(crate) name: Vec<u8>,
    pub(crate) dtype: Type,
    pub(crate) space: Space,
    /// Its value's bytes.
    pub(crate) value: Vec<u8>,
}

/// An attribute message (versions 1 to 3).
pub(crate) fn attribute(m: &Message, sb: &Superblock) -> Result<Attribute, Bad> {
    let mut c = Cur::new(&m.data, m.at);
    let version = c.u8()?;
    if !(1..=3).contains(&version) {
        return Err(Bad::wrong(
            m.at,
            format!("attribute message version {version}"),
        ));
    }
    c.skip(1)?;
    let n = usize::from(c.u16()?);
    let t = usize::from(c.u16()?);
    let s = usize::from(c.u16()?);
    if version == 3 {
        c.skip(1)?;
    }
    // Version 1 pads each part to 8 bytes.
    let pad = |n: usize| if version == 1 { n.div_ceil(8) * 8 } else { n };
    let name = c.take(pad(n))?;
    let name = name[..name
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(n.min(name.len()))]
        .to_vec();
    let t_at = c.at();
    let tb = c.take(pad(t))?;
    let s_at = c.at();
    let sbytes = c.take(pad(s))?;
    let dtype = datatype(&Message {
        kind: msg::DATATYPE,
        at: t_at,
        data: tb.to_vec(),
    })?;
    let space = dataspace(
        &Message {
            kind: msg::DATASPACE,
            at: s_at,
            data: sbytes.to_vec(),
        },
        sb,
    )?;
    let value = c.take(c.rest())?.to_vec();
    Ok(Attribute {
        name,
        dtype,
        space,
        value,
    })
}

/// Elements of an attribute's value shown at most.
const SHOWN: usize = 8;
/// Bytes of one string shown at most.
const SHOWN_TEXT: usize = 200;

impl Attribute {
    /// Its value in words: numbers, strings (fixed-length, or variable
    /// length from the global heap), the first few of an array.
    pub(crate) fn text(&self, src: &dyn Source, sb: &Superblock) -> Option<String> {
        let count = match &self.space {
            Space::Scalar => 1,
            Space::Simple(d) => crate::offer::tensor::numel(d)?,
            Space::Null => return Some("null".into()),
        };
        let o = usize::from(sb.offsets);
        let size = match self.dtype.class {
            9 => 4 + o + 4,
            _ => self.dtype.size as usize,
        };
        if size == 0 {
            return None;
        }
        let mut items = Vec::new();
        for i in 0..count.min(SHOWN as u64) as usize {
            let b = self.value.get(i * size..(i + 1) * size)?;
            items.push(self.item(b, src, sb)?);
        }
        let more = if count > SHOWN as u64 { ", …" } else { "" };
        Some(match &self.space {
            Space::Scalar => items.pop()?,
            _ => format!("[{}{more}]", items.join(", ")),
        })
    }

    fn item(&self, b: &[u8], src: &dyn Source, sb: &Superblock) -> Option<String> {
        let t = &self.dtype;
        let word = |b: &[u8]| -> u64 {
            let it = b.iter();
            if t.big_endian {
                it.fold(0u64, |v, &x| v << 8 | u64::from(x))
            } else {
                it.rev().fold(0u64, |v, &x| v << 8 | u64::from(x))
            }
        };
        Some(match (t.class, t.size) {
            (0, n @ (1 | 2 | 4 | 8)) => {
                let v = word(b);
                if t.signed {
                    let shift = 64 - 8 * n;
                    (((v << shift) as i64) >> shift).to_string()
                } else {
                    v.to_string()
                }
            }
            (1, 4) => f32::from_bits(word(b) as u32).to_string(),
            (1, 8) => f64::from_bits(word(b)).to_string(),
            (3 | 9, _) => quote(&self.string(b, src, sb)?),
            _ => return None,
        })
    }

    /// One string element: fixed-length (up to its first NUL) or
    /// variable-length (from the global heap).
    fn string(&self, b: &[u8], src: &dyn Source, sb: &Superblock) -> Option<Vec<u8>> {
        match self.dtype.class {
            3 => Some(b[..b.iter().position(|&x| x == 0).unwrap_or(b.len())].to_vec()),
            9 => {
                let mut c = Cur::new(b, 0);
                let len = u64::from(c.u32().ok()?);
                let coll = sb.abs(c.uint(usize::from(sb.offsets)).ok()?)?;
                let index = c.u32().ok()?;
                let mut s = global_heap_object(src, sb, coll, index).ok()?;
                s.truncate(len as usize);
                Some(s)
            }
            _ => None,
        }
    }

    /// Its value as strings (a scalar or an array of fixed- or
    /// variable-length strings), at most `max` of them.
    pub(crate) fn strings(
        &self,
        src: &dyn Source,
        sb: &Superblock,
        max: usize,
    ) -> Option<Vec<Vec<u8>>> {
        let count = match &self.space {
            Space::Scalar => 1,
            Space::Simple(d) => crate::offer::tensor::numel(d)?,
            Space::Null => 0,
        };
        let size = match self.dtype.class {
            3 => self.dtype.size as usize,
            9 => 4 + usize::from(sb.offsets) + 4,
            _ => return None,
        };
        if size == 0 {
            return None;
        }
        (0..count.min(max as u64) as usize)
            .map(|i| self.string(self.value.get(i * size..(i + 1) * size)?, src, sb))
            .collect()
    }
}

/// A string from a file for display: escaped, quoted, its start only.
fn quote(b: &[u8]) -> String {
    let cut = b.len() > SHOWN_TEXT;
    let s = crate::name::escape_bytes(&b[..b.len().min(SHOWN_TEXT)]);
    format!("\"{s}{}\"", if cut { "…" } else { "" })
}

/// Object `index` of the global heap collection at `at`.
fn global_heap_object(
    src: &dyn Source,
    sb: &Superblock,
    at: u64,
    index: u32,
) -> Result<Vec<u8>, Bad> {
    let l = usize::from(sb.lengths);
    let head = bytes(src, at, 8 + l as u64, "a global heap collection")?;
    if &head[..4] != b"GCOL" {
        return Err(Bad::wrong(at, "no GCOL signature"));
    }
    let size = Cur::new(&head[8..], at + 8).uint(l)?;
    let b = bytes(src, at, size, "a global heap collection")?;
    let mut c = Cur::new(&b, at);
    c.skip(8 + l)?;
    while c.rest() >= 8 + l {
        let i = c.u16()?;
        c.skip(6)?;
        let n = usize::try_from(c.uint(l)?).unwrap_or(usize::MAX);
        if i == 0 {
            break;
        }
        let data = c.take(n)?;
        if u32::from(i) == index {
            return Ok(data.to_vec());
        }
        c.skip(n.div_ceil(8) * 8 - n)?;
    }
    Err(Bad::wrong(
        at,
        format!("no object {index} in its global heap"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// lookup3's published values for hashlittle with an initial value
    /// of 0.
    #[test]
    fn lookup3_matches_its_reference_values() {
        assert_eq!(lookup3(b""), 0xdeadbeef);
        assert_eq!(lookup3(b"Four score and seven years ago"), 0x17770551);
    }
}
