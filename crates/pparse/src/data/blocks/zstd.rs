//! zstd's frame decoder: each frame decodes on its own with the reference
//! decoder, so each is a checkpoint of the decoded stream; a frame's
//! header is read here too (see the parser, `parsers/compress/zstd.rs`,
//! for frames found after damage and what is reported).

use std::io;

use crate::data::{Block, BlockCodec, BlockReader, Data, Fill, InputBuf, Pull, Range, Source};

/// A zstd frame's magic number.
pub(crate) const MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Where a frame whose first block header is at `at` ends, by its block
/// headers (RFC 8878 §3.1.1.2), with its checksum; `None` when a block
/// is reserved, oversized or cut.
pub(crate) fn frame_end(data: &dyn Source, mut at: u64, checksum: bool) -> Option<u64> {
    let avail = data.available();
    loop {
        let mut h = [0u8; 3];
        if data.read_at(at, &mut h).ok()? < 3 {
            return None;
        }
        let v = u32::from_le_bytes([h[0], h[1], h[2], 0]);
        let (last, kind, size) = (v & 1 == 1, (v >> 1) & 3, u64::from(v >> 3));
        if size > 128 * 1024 {
            return None;
        }
        let body = match kind {
            0 | 2 => size,
            1 => 1,
            _ => return None,
        };
        at = at.checked_add(3 + body)?;
        if at > avail {
            return None;
        }
        if last {
            return at
                .checked_add(if checksum { 4 } else { 0 })
                .filter(|&e| e <= avail);
        }
    }
}

pub(crate) fn is_skippable(b: &[u8]) -> bool {
    b.len() >= 4 && b[0] & 0xf0 == 0x50 && b[1..4] == [0x2a, 0x4d, 0x18]
}

/// Decodes one zstd frame with the reference decoder (also a zip entry's).
pub(crate) struct Codec;

impl BlockCodec for Codec {
    fn name(&self) -> &'static str {
        "zstd frame"
    }

    fn open(&self, input: &Data, block: &Block) -> io::Result<Box<dyn BlockReader>> {
        let mut dctx = zstd::zstd_safe::DCtx::try_create()
            .ok_or_else(|| io::Error::other("cannot create a zstd decoder"))?;
        // Windows up to pparse's limit, not only the library's default.
        let log = 63 - crate::data::decoder_window_limit().leading_zeros();
        dctx.set_parameter(zstd::zstd_safe::DParameter::WindowLogMax(log.clamp(10, 31)))
            .map_err(|c| io::Error::other(zstd::zstd_safe::get_error_name(c).to_string()))?;
        Ok(Box::new(FrameReader {
            dctx,
            input: input.clone(),
            inbuf: InputBuf::new(block.input.start),
            ended: false,
            error: None,
        }))
    }

    /// The frame after this one (found by its block headers), past any
    /// skippable frames (pzstd writes one before each frame).
    fn next_block(&self, input: &dyn Source, block: &Block) -> Option<Block> {
        let mut at = frame_after(input, block.input.start)?;
        loop {
            let mut b = [0u8; 18];
            let n = input.read_at(at, &mut b).ok()?;
            let head = &b[..n];
            if is_skippable(head) && n >= 8 {
                let size = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
                at = at.checked_add(8 + u64::from(size))?;
                continue;
            }
            return head.starts_with(&MAGIC).then_some(Block {
                input: Range::new(at, at),
                out_start: 0,
                out_len: 0,
                aux: [0, 0],
            });
        }
    }
}

/// Where the frame whose magic is at `at` ends, by its header and block
/// headers.
fn frame_after(input: &dyn Source, at: u64) -> Option<u64> {
    let mut b = [0u8; 18];
    let n = input.read_at(at, &mut b).ok()?;
    let h = parse_frame_header(&b[..n])?;
    frame_end(input, at + h.len as u64, h.checksum)
}

pub(crate) struct FrameReader {
    pub(crate) dctx: zstd::zstd_safe::DCtx<'static>,
    pub(crate) input: Data,
    pub(crate) inbuf: InputBuf,
    pub(crate) ended: bool,
    pub(crate) error: Option<String>,
}

impl BlockReader for FrameReader {
    fn read(&mut self, out: &mut [u8]) -> Pull {
        if let Some(e) = self.error.take() {
            self.ended = true;
            return Pull::Error(e);
        }
        if self.ended {
            return Pull::End;
        }
        for _ in 0..1024 {
            let fill = self.inbuf.fill(&*self.input);
            let mut ib = zstd::zstd_safe::InBuffer::around(self.inbuf.bytes());
            let mut ob = zstd::zstd_safe::OutBuffer::around(&mut out[..]);
            let r = self.dctx.decompress_stream(&mut ob, &mut ib);
            let consumed = ib.pos();
            let produced = ob.pos();
            self.inbuf.consume(consumed);
            match r {
                Err(code) => {
                    let mut msg = zstd::zstd_safe::get_error_name(code).to_string();
                    if msg.contains("memory") {
                        msg.push_str(&format!(
                            ": the frame's window is larger than the {} pparse decodes with (PPARSE_DECODER_MIB sets more)",
                            crate::util::human(crate::data::decoder_window_limit())
                        ));
                    }
                    if produced > 0 {
                        self.error = Some(msg);
                        return Pull::Out(produced);
                    }
                    self.ended = true;
                    return Pull::Error(msg);
                }
                Ok(0) => {
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
                    match fill {
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

/// A frame header's fields (RFC 8878 §3.1.1.1).
pub(crate) struct FrameHeader {
    pub(crate) len: usize,
    pub(crate) content_size: Option<u64>,
    pub(crate) window: Option<u64>,
    pub(crate) dict_id: Option<u32>,
    pub(crate) checksum: bool,
    pub(crate) single_segment: bool,
}

pub(crate) fn parse_frame_header(b: &[u8]) -> Option<FrameHeader> {
    let fhd = *b.get(4)?;
    let fcs_flag = fhd >> 6;
    let single = fhd & 0x20 != 0;
    let checksum = fhd & 0x04 != 0;
    let did_len = [0usize, 1, 2, 4][(fhd & 3) as usize];
    let fcs_len = match fcs_flag {
        0 if single => 1,
        0 => 0,
        1 => 2,
        2 => 4,
        _ => 8,
    };
    let mut p = 5;
    let window = if single {
        None
    } else {
        let wd = *b.get(p)?;
        p += 1;
        let exp = 10 + (wd >> 3) as u32;
        let base = 1u64 << exp;
        Some(base + (base / 8) * (wd & 7) as u64)
    };
    let dict_id = if did_len > 0 {
        let d = b.get(p..p + did_len)?;
        p += did_len;
        let mut x = [0u8; 4];
        x[..did_len].copy_from_slice(d);
        Some(u32::from_le_bytes(x))
    } else {
        None
    };
    let content_size = if fcs_len > 0 {
        let d = b.get(p..p + fcs_len)?;
        p += fcs_len;
        let mut x = [0u8; 8];
        x[..fcs_len].copy_from_slice(d);
        let v = u64::from_le_bytes(x);
        Some(if fcs_len == 2 { v + 256 } else { v })
    } else {
        None
    };
    Some(FrameHeader {
        len: p,
        content_size,
        window,
        dict_id,
        checksum,
        single_segment: single,
    })
}
