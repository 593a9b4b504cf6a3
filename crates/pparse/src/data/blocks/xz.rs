//! xz's block decoder (and the LZMA of zip entries): each xz block
//! decodes on its own with liblzma, so each is a checkpoint of the decoded
//! stream; its header, check and the variable-length integers of the
//! format are read here (see the parser, `parsers/compress/xz.rs`, for
//! streams, the index and damage).

use std::io;

use crate::data::{
    Block, BlockCodec, BlockReader, Data, Fill, InputBuf, Pull, Range, Source, view,
};

/// xz's CRC-64 (ECMA-182, reflected).
pub(crate) const CRC64_TABLE: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u64;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xc96c_5795_d787_0f42
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

pub(crate) fn crc64_update(crc: u64, bytes: &[u8]) -> u64 {
    let mut c = !crc;
    for &b in bytes {
        c = CRC64_TABLE[((c as u8) ^ b) as usize] ^ (c >> 8);
    }
    !c
}

/// Bytes of the check of type `id`.
pub(crate) fn check_size(id: u8) -> usize {
    match id {
        0 => 0,
        1..=3 => 4,
        4..=6 => 8,
        7..=9 => 16,
        10..=12 => 32,
        _ => 64,
    }
}

pub(crate) fn check_name(id: u8) -> &'static str {
    match id {
        0 => "none",
        1 => "CRC32",
        4 => "CRC64",
        10 => "SHA-256",
        _ => "reserved",
    }
}

/// The running check of a block's decoded bytes.
pub(crate) enum Check {
    None,
    Crc32(crc32fast::Hasher),
    Crc64(u64),
    Sha256(Box<sha2::Sha256>),
    /// A reserved check id: its bytes are skipped, not verified.
    Unknown,
    /// The stream header is lost: every check this parser knows is
    /// computed, and the one whose size fits is used.
    Any(crc32fast::Hasher, u64, Box<sha2::Sha256>),
}

impl Check {
    pub(crate) fn new(id: u8) -> Check {
        use sha2::Digest;
        match id {
            0 => Check::None,
            1 => Check::Crc32(crc32fast::Hasher::new()),
            4 => Check::Crc64(0),
            10 => Check::Sha256(Box::new(sha2::Sha256::new())),
            _ => Check::Unknown,
        }
    }
    pub(crate) fn update(&mut self, b: &[u8]) {
        use sha2::Digest;
        match self {
            Check::Crc32(h) => h.update(b),
            Check::Crc64(c) => *c = crc64_update(*c, b),
            Check::Sha256(h) => h.update(b),
            Check::Any(a, c, h) => {
                a.update(b);
                *c = crc64_update(*c, b);
                h.update(b);
            }
            Check::None | Check::Unknown => {}
        }
    }
    /// The check as stored, or `None` when it cannot be computed.
    pub(crate) fn value(&self) -> Option<Vec<u8>> {
        use sha2::Digest;
        match self {
            Check::None => Some(Vec::new()),
            Check::Crc32(h) => Some(h.clone().finalize().to_le_bytes().to_vec()),
            Check::Crc64(c) => Some(c.to_le_bytes().to_vec()),
            Check::Sha256(h) => Some((**h).clone().finalize().to_vec()),
            Check::Unknown => None,
            Check::Any(..) => None,
        }
    }
    /// For a stream whose header is lost: the check of type `id`.
    pub(crate) fn into_type(self, id: u8) -> Check {
        match (self, id) {
            (Check::Any(a, _, _), 1) => Check::Crc32(a),
            (Check::Any(_, c, _), 4) => Check::Crc64(c),
            (Check::Any(_, _, h), 10) => Check::Sha256(h),
            (Check::Any(..), 0) => Check::None,
            (c, _) => c,
        }
    }
}

/// A variable-length integer at `b[*p..]`: 7 bits a byte, at most 9 bytes.
pub(crate) fn vli(b: &[u8], p: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for i in 0..9 {
        let x = *b.get(*p)?;
        *p += 1;
        v |= ((x & 0x7f) as u64) << (7 * i);
        if x & 0x80 == 0 {
            if i > 0 && x == 0 {
                return None; // not the shortest form
            }
            return Some(v);
        }
    }
    None
}

/// A parsed block header.
#[derive(Debug, Clone)]
pub(crate) struct BlockHeader {
    pub(crate) len: usize,
    pub(crate) csize: Option<u64>,
    pub(crate) usize: Option<u64>,
    pub(crate) filters: Vec<(u64, Vec<u8>)>,
}

pub(crate) fn filter_name(id: u64) -> &'static str {
    match id {
        0x21 => "LZMA2",
        0x03 => "delta",
        0x04 => "x86",
        0x05 => "PowerPC",
        0x06 => "IA-64",
        0x07 => "ARM",
        0x08 => "ARM-Thumb",
        0x09 => "SPARC",
        0x0a => "ARM64",
        0x0b => "RISC-V",
        _ => "unknown",
    }
}

/// Parses the block header at the start of `b`; `Err(None)` when `b` is
/// too short to tell.
pub(crate) fn parse_block_header(b: &[u8]) -> Result<BlockHeader, Option<String>> {
    let first = *b.first().ok_or(None)?;
    if first == 0 {
        return Err(Some("an index, not a block header".into()));
    }
    let len = (first as usize + 1) * 4;
    if b.len() < len {
        return Err(None);
    }
    let h = &b[..len];
    let stored = u32::from_le_bytes([h[len - 4], h[len - 3], h[len - 2], h[len - 1]]);
    let computed = crc32fast::hash(&h[..len - 4]);
    if stored != computed {
        return Err(Some(format!(
            "block header CRC32 mismatch: stored {stored:#010x}, computed {computed:#010x}"
        )));
    }
    let bad = |s: &str| Err(Some(s.to_string()));
    let flags = h[1];
    if flags & 0x3c != 0 {
        return bad("reserved block flags set");
    }
    let body = &h[..len - 4];
    let mut p = 2;
    let csize = if flags & 0x40 != 0 {
        match vli(body, &mut p) {
            Some(0) | None => return bad("invalid compressed size"),
            v => v,
        }
    } else {
        None
    };
    let usize = if flags & 0x80 != 0 {
        match vli(body, &mut p) {
            None => return bad("invalid uncompressed size"),
            v => v,
        }
    } else {
        None
    };
    let n = (flags & 3) as usize + 1;
    let mut filters = Vec::with_capacity(n);
    for i in 0..n {
        let Some(id) = vli(body, &mut p) else {
            return bad("invalid filter id");
        };
        let Some(psize) = vli(body, &mut p) else {
            return bad("invalid filter properties size");
        };
        let end = p.saturating_add(psize as usize);
        if psize > 255 || end > body.len() {
            return bad("filter properties run past the header");
        }
        let props = body[p..end].to_vec();
        p = end;
        let last = i + 1 == n;
        let ok = match id {
            0x21 => last && props.len() == 1 && props[0] <= 40,
            0x03 => !last && props.len() == 1,
            0x04..=0x0b => !last && (props.is_empty() || props.len() == 4),
            _ => false,
        };
        if !ok {
            return Err(Some(format!(
                "unsupported or invalid filter {id:#x} ({})",
                filter_name(id)
            )));
        }
        filters.push((id, props));
    }
    if body[p..].iter().any(|&x| x != 0) {
        return bad("non-zero block header padding");
    }
    Ok(BlockHeader {
        len,
        csize,
        usize,
        filters,
    })
}

/// Decodes one block: header at `block.input.start`.
pub(crate) struct Codec;

impl BlockCodec for Codec {
    fn name(&self) -> &'static str {
        "xz block"
    }

    fn open(&self, input: &Data, block: &Block) -> io::Result<Box<dyn BlockReader>> {
        let mut buf = Vec::new();
        let b = view(&**input, block.input.start, 1024, &mut buf)?;
        let h = parse_block_header(b)
            .map_err(|e| io::Error::other(e.unwrap_or_else(|| "block header cut off".into())))?;
        let mut f = liblzma::stream::Filters::new();
        let mut dict_note = None;
        for (id, props) in &h.filters {
            let r = match id {
                0x21 => match lzma2_dict(props) {
                    Some(dict) if dict > crate::data::decoder_window_limit() => {
                        // Decoded with the limit as its dictionary: right
                        // unless a match reaches back further, which the
                        // decoder reports (see `XzReader::dict`).
                        let mut o = liblzma::stream::LzmaOptions::new_preset(6)
                            .map_err(|e| io::Error::other(format!("{e:?}")))?;
                        o.dict_size(crate::data::decoder_window_limit() as u32);
                        dict_note = Some(dict);
                        Ok(f.lzma2(&o))
                    }
                    _ => f.lzma2_properties(props),
                },
                0x03 => f.delta_properties(props),
                0x04 => f.x86_properties(props),
                0x05 => f.powerpc_properties(props),
                0x06 => f.ia64_properties(props),
                0x07 => f.arm_properties(props),
                0x08 => f.arm_thumb_properties(props),
                0x09 => f.sparc_properties(props),
                0x0a => f.arm64_properties(props),
                0x0b => f.riscv_properties(props),
                _ => return Err(io::Error::other("unsupported filter")),
            };
            r.map_err(|e| io::Error::other(format!("filter {id:#x}: {e:?}")))?;
        }
        let z = liblzma::stream::Stream::new_raw_decoder(&f)
            .map_err(|e| io::Error::other(format!("cannot start the decoder: {e:?}")))?;
        Ok(Box::new(XzReader {
            z,
            input: input.clone(),
            inbuf: InputBuf::new(block.input.start + h.len as u64),
            limit: h.csize.map(|c| block.input.start + h.len as u64 + c),
            ended: false,
            pre: Vec::new(),
            pre_pos: 0,
            dict: dict_note,
            error: None,
        }))
    }

    /// The block after this one, when its header gives its compressed
    /// size (xz -T and most multi-block writers do): past the padding and
    /// the check, whose size is the one a valid block header follows.
    fn next_block(&self, input: &dyn Source, block: &Block) -> Option<Block> {
        let at = block.input.start;
        let mut buf = Vec::new();
        let h = parse_block_header(view(input, at, 1024, &mut buf).ok()?).ok()?;
        let data_end = at.checked_add(h.len as u64)?.checked_add(h.csize?)?;
        let padded = data_end.checked_add((4 - (data_end - at) % 4) % 4)?;
        [8u64, 4, 32, 0].into_iter().find_map(|check| {
            let next = padded + check;
            let b = view(input, next, 1024, &mut buf).ok()?;
            parse_block_header(b).is_ok().then_some(Block {
                input: Range::new(next, next),
                out_start: 0,
                out_len: 0,
                aux: [0, 0],
            })
        })
    }
}

/// The dictionary size an LZMA2 filter's properties byte gives; `None`
/// for a byte over 40.
pub(crate) fn lzma2_dict(props: &[u8]) -> Option<u64> {
    let b = *props.first()?;
    match b {
        40 => Some(u32::MAX as u64),
        0..40 => Some((2 | (b as u64 & 1)) << (b / 2 + 11)),
        _ => None,
    }
}

/// Decodes a whole xz stream from `block.input.start` as one block (a zip
/// entry of method 95: a read decodes from the entry's start).
pub(crate) struct StreamCodec;

impl BlockCodec for StreamCodec {
    fn name(&self) -> &'static str {
        "xz stream"
    }

    fn open(&self, input: &Data, block: &Block) -> io::Result<Box<dyn BlockReader>> {
        let z = liblzma::stream::Stream::new_stream_decoder(
            crate::data::decoder_window_limit().saturating_add(64 << 20),
            0,
        )
        .map_err(|e| io::Error::other(format!("cannot start the decoder: {e:?}")))?;
        Ok(Box::new(XzReader {
            z,
            input: input.clone(),
            inbuf: InputBuf::new(block.input.start),
            limit: None,
            ended: false,
            pre: Vec::new(),
            pre_pos: 0,
            dict: None,
            error: None,
        }))
    }
}

/// Decodes a zip entry of method 14 (LZMA): after its 4-byte version and
/// size field, 5 bytes of LZMA properties, then LZMA data. It is fed to
/// liblzma's `.lzma` decoder behind a 13-byte header made of those
/// properties and the decoded size (`aux[0]`; `u64::MAX` when the entry
/// says an end marker ends the data).
pub(crate) struct LzmaZipCodec;

impl BlockCodec for LzmaZipCodec {
    fn name(&self) -> &'static str {
        "lzma zip"
    }

    fn open(&self, input: &Data, block: &Block) -> io::Result<Box<dyn BlockReader>> {
        let mut head = [0u8; 9];
        if !crate::data::read_exact_at(&**input, block.input.start, &mut head)? {
            return Err(io::Error::other("LZMA header cut off"));
        }
        let psize = u16::from_le_bytes([head[2], head[3]]);
        if psize != 5 {
            return Err(io::Error::other(format!(
                "LZMA properties of {psize} bytes (5 expected)"
            )));
        }
        let mut pre = head[4..9].to_vec();
        pre.extend_from_slice(&block.aux[0].to_le_bytes());
        let z = liblzma::stream::Stream::new_lzma_decoder(
            crate::data::decoder_window_limit().saturating_add(64 << 20),
        )
        .map_err(|e| io::Error::other(format!("cannot start the decoder: {e:?}")))?;
        Ok(Box::new(XzReader {
            z,
            input: input.clone(),
            inbuf: InputBuf::new(block.input.start + 9),
            limit: None,
            ended: false,
            pre,
            pre_pos: 0,
            dict: None,
            error: None,
        }))
    }
}

pub(crate) struct XzReader {
    pub(crate) z: liblzma::stream::Stream,
    pub(crate) input: Data,
    pub(crate) inbuf: InputBuf,
    /// Input offset the compressed data ends at, when the header says.
    pub(crate) limit: Option<u64>,
    pub(crate) ended: bool,
    /// Bytes fed before the input (a made-up header).
    pub(crate) pre: Vec<u8>,
    pub(crate) pre_pos: usize,
    /// The dictionary the block declares, when it is decoded with less
    /// ([`crate::data::decoder_window_limit`]).
    pub(crate) dict: Option<u64>,
    /// An error met after output that was returned first.
    pub(crate) error: Option<String>,
}

impl XzReader {
    /// What an error from liblzma means here.
    fn why(&self, e: liblzma::stream::Error) -> String {
        let limit = crate::data::decoder_window_limit();
        match self.dict {
            Some(dict) if self.z.total_out() > limit => format!(
                "{e:?} error in the compressed data after {} decoded bytes; the block declares a dictionary of {} and pparse decodes with at most {} (PPARSE_DECODER_MIB), so a match that reaches back further reads as an error: with that much memory the block may decode",
                self.z.total_out(),
                crate::util::human(dict),
                crate::util::human(limit)
            ),
            _ => format!("{e:?} error in the compressed data"),
        }
    }
}

impl BlockReader for XzReader {
    fn read(&mut self, out: &mut [u8]) -> Pull {
        if let Some(e) = self.error.take() {
            return Pull::Error(e);
        }
        if self.ended {
            return Pull::End;
        }
        for _ in 0..1024 {
            let from_pre = self.pre_pos < self.pre.len();
            let fill = if from_pre {
                Fill::Bytes
            } else {
                self.inbuf.fill(&*self.input)
            };
            let mut bytes = if from_pre {
                &self.pre[self.pre_pos..]
            } else {
                self.inbuf.bytes()
            };
            if let Some(l) = self.limit {
                let room = l.saturating_sub(self.inbuf.pos);
                bytes = &bytes[..(bytes.len() as u64).min(room) as usize];
            }
            let (in0, out0) = (self.z.total_in(), self.z.total_out());
            let r = self.z.process(bytes, out, liblzma::stream::Action::Run);
            let consumed = (self.z.total_in() - in0) as usize;
            let produced = (self.z.total_out() - out0) as usize;
            let had_bytes = !bytes.is_empty();
            if from_pre {
                self.pre_pos += consumed;
            } else {
                self.inbuf.consume(consumed);
            }
            match r {
                Err(e) => {
                    self.ended = true;
                    let why = self.why(e);
                    if produced > 0 {
                        self.error = Some(why);
                        return Pull::Out(produced);
                    }
                    return Pull::Error(why);
                }
                Ok(liblzma::stream::Status::StreamEnd) => {
                    self.ended = true;
                    return if produced > 0 {
                        Pull::Out(produced)
                    } else {
                        Pull::End
                    };
                }
                Ok(_) => {
                    if produced > 0 {
                        return Pull::Out(produced);
                    }
                    if consumed > 0 {
                        continue;
                    }
                    if self.limit.is_some_and(|l| self.inbuf.pos >= l) {
                        self.ended = true;
                        return Pull::Error(
                            "compressed data does not end at the size its header gives".into(),
                        );
                    }
                    match fill {
                        Fill::Bytes if had_bytes => {
                            self.ended = true;
                            return Pull::Error("the decoder made no progress".into());
                        }
                        Fill::Bytes => continue,
                        Fill::Wait => return Pull::NeedInput,
                        Fill::Eof => return Pull::Truncated,
                    }
                }
            }
        }
        Pull::Error("the decoder made no progress".into())
    }
    fn input_pos(&self) -> u64 {
        self.inbuf.pos
    }
}
