//! Decoding a piece of a deflate stream whose window is not known yet:
//! the fast path of [`super::parallel`]'s workers.
//!
//! The output is kept whole as 16-bit values and starts with the 32 KiB
//! window as markers (`MARK | i`, oldest first), so a copy reads the
//! output itself: no ring, no masks, and a copy that does not overlap
//! itself is one `memcpy`. It checks what zlib checks ([`resync`]'s
//! header reader and codes), so the bits it accepts zlib accepts too.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use super::codes::{DIST_BASE, DIST_EXTRA, LEN_BASE, LEN_EXTRA};
use super::resync::{self, Bits, Huff, MAX_HEADER_BYTES, MAX_SYMBOL_BITS, WINDOW};
use crate::data::pages::Pages;
use crate::data::source::Data;

/// The flag of a value that stands for byte `v & 0x7fff` of the window
/// before the piece.
pub(super) const MARK: u16 = 0x8000;

/// Input read at once.
const READ: usize = 1 << 20;

/// Where [`decode`] stopped.
pub(super) enum Stop {
    /// A block ended at this input bit, at or past `until`.
    Until(u64),
    /// A block ended at this input bit and the 32 KiB before it hold no
    /// marker: the window is known, zlib can go on.
    Clean(u64),
    /// The stream's last block ended; the stream ends at this input byte.
    End(u64),
}

/// Input bytes from some offset, read on as decoding needs them.
struct Input<'a> {
    data: &'a Data,
    buf: Vec<u8>,
    /// Input offset of `buf[0]`.
    start: u64,
}

impl Input<'_> {
    /// Reads more: `false` at the end of the input.
    fn more(&mut self) -> io::Result<bool> {
        let at = self.start + self.buf.len() as u64;
        let have = self.buf.len();
        self.buf.resize(have + READ, 0);
        let n = self.data.read_at(at, &mut self.buf[have..])?;
        self.buf.truncate(have + n);
        Ok(n > 0)
    }
    fn at_end(&self) -> bool {
        self.start + self.buf.len() as u64 >= self.data.available()
    }
}

/// Why [`decode`] gave up.
pub(super) enum Failed {
    /// After this many blocks decoded: the bits are no valid deflate
    /// there, or the input ends first.
    Invalid(usize),
    /// The output passed its limit, or decoding was stopped.
    Limit,
}

/// Decodes from the block header at input bit `start` until a block ends
/// at or past bit `until`, the window becomes known, or the stream ends,
/// into `out` (cleared first; it holds what was decoded, whatever the
/// answer). Returns the block ends and where it stopped.
pub(super) fn decode(
    data: &Data,
    start: u64,
    until: u64,
    max_out: usize,
    stop: &AtomicBool,
    out: &mut Pages<u16>,
) -> io::Result<Result<(Blocks, Stop), Failed>> {
    let mut blocks = Vec::new();
    // Room for the most it may make: its checks come before each symbol
    // and block, so one more copy, or a stored block, may pass them.
    out.clear();
    let room = out.spare(WINDOW + max_out + (1 << 16) + 512);
    let mut o = Out { buf: room, len: 0 };
    let done = run(data, start, until, max_out, stop, &mut blocks, &mut o);
    let len = o.len;
    out.advance(len);
    match done? {
        Some(end) => Ok(Ok((blocks, end))),
        None if stop.load(Ordering::Relaxed) => Ok(Err(Failed::Limit)),
        None => Ok(Err(Failed::Invalid(blocks.len()))),
    }
}

/// Block ends: output offset (after the markers) and input bit.
pub(super) type Blocks = Vec<(usize, u64)>;

/// The output being made: `buf[..len]`, in room that holds the most it
/// may make (so a push never checks for room).
struct Out<'a> {
    buf: &'a mut [u16],
    len: usize,
}

impl Out<'_> {
    #[inline]
    fn push(&mut self, v: u16) {
        self.buf[self.len] = v;
        self.len += 1;
    }
    fn values(&self) -> &[u16] {
        &self.buf[..self.len]
    }
}

/// [`decode`]'s loop: `None` when it gives up.
fn run(
    data: &Data,
    start: u64,
    until: u64,
    max_out: usize,
    stop: &AtomicBool,
    blocks: &mut Blocks,
    out: &mut Out,
) -> io::Result<Option<Stop>> {
    let mut input = Input {
        data,
        buf: Vec::new(),
        start: start / 8,
    };
    input.more()?;
    for i in 0..WINDOW as u16 {
        out.push(MARK | i);
    }
    // Output scanned for markers, and the end of the last one found.
    let mut scanned = WINDOW;
    let mut marker_end = WINDOW;
    let mut bit = start;
    loop {
        if stop.load(Ordering::Relaxed) || out.len - WINDOW > max_out {
            return Ok(None);
        }
        // The header, with the bytes it can take.
        let rel = bit - input.start * 8;
        if (input.buf.len() as u64) * 8 < rel + MAX_HEADER_BYTES as u64 * 8
            && !input.at_end()
            && !input.more()?
        {
            return Ok(None);
        }
        let mut r = Bits::new(&input.buf, rel);
        let last = r.take(1) == 1;
        let kind = r.take(2);
        let ended = match kind {
            0 => {
                let skip = (8 - (r.pos() % 8) as u32) % 8;
                r.consume(skip);
                let len = r.take(16);
                let nlen = r.take(16);
                if r.over || len != !nlen & 0xffff {
                    return Ok(None);
                }
                let from = (r.pos() / 8) as usize;
                while input.buf.len() < from + len as usize {
                    if !input.more()? {
                        return Ok(None);
                    }
                }
                for &b in &input.buf[from..from + len as usize] {
                    out.push(b as u16);
                }
                bit = input.start * 8 + (from as u64 + len as u64) * 8;
                true
            }
            1 => {
                let (lit, dist) = resync::fixed();
                bit = input.start * 8 + r.pos();
                codes(&mut input, &mut bit, lit, dist, out, max_out, stop)?
            }
            2 => {
                let Ok(c) = resync::dynamic_header(&mut r) else {
                    return Ok(None);
                };
                if r.over {
                    return Ok(None);
                }
                bit = input.start * 8 + r.pos();
                codes(&mut input, &mut bit, &c.0, &c.1, out, max_out, stop)?
            }
            _ => return Ok(None),
        };
        if !ended {
            return Ok(None);
        }
        if last {
            return Ok(Some(Stop::End(bit.div_ceil(8))));
        }
        blocks.push((out.len - WINDOW, bit));
        if bit >= until {
            return Ok(Some(Stop::Until(bit)));
        }
        if let Some(i) = out.values()[scanned..].iter().rposition(|&v| v >= 0x100) {
            marker_end = scanned + i + 1;
        }
        scanned = out.len;
        if out.len - marker_end >= WINDOW {
            return Ok(Some(Stop::Clean(bit)));
        }
        // Drop input behind: keep the buffer near its read size.
        let byte = (bit / 8 - input.start) as usize;
        if byte >= READ {
            input.buf.drain(..byte);
            input.start += byte as u64;
        }
    }
}

/// Decodes the symbols of a Huffman block from input bit `*bit` to its
/// end-of-block code (`true`), leaving `*bit` after it; `false`: an
/// invalid code, a distance past the output, or the input ends.
fn codes(
    input: &mut Input,
    bit: &mut u64,
    lit: &Huff,
    dist: &Huff,
    out: &mut Out,
    max_out: usize,
    stop: &AtomicBool,
) -> io::Result<bool> {
    // Past this many values it gives up: checked before every symbol, so
    // the output passes it by one copy at most.
    let most = WINDOW + max_out;
    loop {
        if stop.load(Ordering::Relaxed) || out.len > most {
            return Ok(false);
        }
        let at_end = input.at_end();
        let mut r = Bits::new(&input.buf, *bit - input.start * 8);
        // The tables, indexed by the next `bits` input bits: an entry is
        // `symbol | length << 9`, length 0 for no code.
        let (lt, lmask) = (&lit.table[..], (1u64 << lit.bits) - 1);
        let (dt, dmask) = (&dist.table[..], (1u64 << dist.bits) - 1);
        loop {
            if out.len > most {
                return Ok(false);
            }
            if r.left() < MAX_SYMBOL_BITS {
                if !at_end {
                    break;
                }
                // The last bits of the input: the careful path.
                match slow_symbol(&mut r, lit, dist, out)? {
                    Some(true) => {
                        *bit = input.start * 8 + r.pos();
                        return Ok(true);
                    }
                    Some(false) => continue,
                    None => return Ok(false),
                }
            }
            // At least 48 bits are left: one refill holds a whole
            // length/distance pair with its extra bits.
            if r.n < 48 {
                r.refill();
            }
            let e = lt[(r.acc & lmask) as usize];
            let len = (e >> 9) as u32;
            if len == 0 {
                return Ok(false);
            }
            r.acc >>= len;
            r.n -= len;
            let sym = e & 0x1ff;
            if sym < 256 {
                out.push(sym);
                continue;
            }
            if sym == 256 {
                *bit = input.start * 8 + r.pos();
                return Ok(true);
            }
            let li = (sym - 257) as usize;
            if li >= 29 {
                return Ok(false);
            }
            let xl = LEN_EXTRA[li] as u32;
            let n = LEN_BASE[li] as usize + (r.acc & ((1u64 << xl) - 1)) as usize;
            r.acc >>= xl;
            r.n -= xl;
            let e = dt[(r.acc & dmask) as usize];
            let dl = (e >> 9) as u32;
            let ds = (e & 0x1ff) as usize;
            if dl == 0 || ds >= 30 {
                return Ok(false);
            }
            r.acc >>= dl;
            r.n -= dl;
            let xd = DIST_EXTRA[ds] as u32;
            let d = DIST_BASE[ds] as usize + (r.acc & ((1u64 << xd) - 1)) as usize;
            r.acc >>= xd;
            r.n -= xd;
            copy(out, d, n)?;
        }
        if r.over {
            return Ok(false);
        }
        *bit = input.start * 8 + r.pos();
        // Drop what is behind, read on.
        let byte = (*bit / 8 - input.start) as usize;
        if byte >= READ {
            input.buf.drain(..byte);
            input.start += byte as u64;
        }
        if !input.more()? {
            return Ok(false);
        }
    }
}

/// Appends the `len` values that start `d` back; `Err` past the output's
/// start (its window markers included).
#[inline]
fn copy(out: &mut Out, d: usize, len: usize) -> io::Result<()> {
    if d > out.len || d == 0 {
        return Err(io::ErrorKind::InvalidData.into());
    }
    let from = out.len - d;
    if d >= len {
        out.buf.copy_within(from..from + len, out.len);
        out.len += len;
    } else {
        for i in 0..len {
            let v = out.buf[from + i];
            out.push(v);
        }
    }
    Ok(())
}

/// One symbol near the end of the input, every read checked: `Some(true)`
/// at the end-of-block code, `Some(false)` after a literal or a copy,
/// `None` for an invalid code or bits past the end.
fn slow_symbol(r: &mut Bits, lit: &Huff, dist: &Huff, out: &mut Out) -> io::Result<Option<bool>> {
    let Some(sym) = lit.decode(r) else {
        return Ok(None);
    };
    if r.over {
        return Ok(None);
    }
    if sym < 256 {
        out.push(sym);
        return Ok(Some(false));
    }
    if sym == 256 {
        return Ok(Some(true));
    }
    let li = (sym - 257) as usize;
    if li >= 29 {
        return Ok(None);
    }
    let len = LEN_BASE[li] as usize + r.take(LEN_EXTRA[li] as u32) as usize;
    let Some(ds) = dist.decode(r) else {
        return Ok(None);
    };
    if ds >= 30 {
        return Ok(None);
    }
    let d = DIST_BASE[ds as usize] as usize + r.take(DIST_EXTRA[ds as usize] as u32) as usize;
    if r.over || d > out.len {
        return Ok(None);
    }
    copy(out, d, len)?;
    Ok(Some(false))
}
