//! The block finder's cheap checks, 64 bit positions at a time.
//!
//! A deflate block may start at any bit, and on bytes that hold no block
//! the finder looks at every one of them, so what it does per bit decides
//! its speed. [`Sieve::word`] gives the positions of 64 consecutive bits
//! that pass the checks that cost nothing per candidate:
//!
//! * dynamic-Huffman headers: the block type and the two counts, from a
//!   few shifts and ands of a 128-bit load (64 positions in one word), so
//!   three positions in four are out before anything is looked at one by
//!   one;
//! * stored blocks: `LEN` is `!NLEN` at a byte boundary, after a byte
//!   that can hold the header;
//! * fixed-Huffman blocks: the run of symbols from the header decodes
//!   [`FIXED_PROOF`] symbols without an invalid code. Decoding that from
//!   every candidate costs a walk each; instead one backward pass over a
//!   window computes, for every bit, how many symbols decode from there
//!   (a symbol's successor is always later in the input, so each bit's
//!   count is one plus a count already known). That is a constant few
//!   table lookups per bit whatever the bytes.
//!
//! The caller checks every position given in full (`resync::candidate`):
//! the sieve may give a position the full checks turn down, never the
//! other way round, which `resync`'s tests check at every bit.

use super::codes::{DIST_EXTRA, LEN_EXTRA};

/// Fixed-Huffman symbols that count as one piece of evidence: random bits
/// get that far with a chance of about e^-20.
pub(super) const FIXED_PROOF: u64 = 1024;

/// Bits of a fixed-Huffman window whose counts [`Sieve::word`] gives, and
/// the bits after it that the backward pass starts from. A run that gets
/// past the margin is let through (the full check then decides): random
/// bits end a run within about 45 symbols, real fixed-Huffman data is
/// let through anyway.
const WINDOW_BITS: u64 = 1 << 16;
const MARGIN_BITS: u64 = 1 << 13;

/// Symbols decode no closer than this to the end of the bytes: the full
/// check (`resync::MAX_SYMBOL_BITS`) lets a run through there, so the
/// pass does too.
const END_BITS: u64 = 48;

/// A count that stands for "the run went past what was looked at".
const THROUGH: u32 = 1 << 24;

/// What a fixed-Huffman code does, by its next 10 input bits: the bits
/// it takes before a distance code (0–31), whether a distance code
/// follows ([`THEN_DISTANCE`]), or that the run stops there ([`STOPS`]).
/// The end-of-block code counts as a symbol that takes the next block's
/// header with it when that header is a fixed-Huffman one, and stops the
/// run otherwise; a last block's end does not stop it. Both make the
/// counts larger than the full check's, never smaller, which is all a
/// sieve may do.
const THEN_DISTANCE: u8 = 1 << 5;
const STOPS: u8 = 1 << 6;

const fn reverse(x: usize, bits: u32) -> usize {
    let mut r = 0;
    let mut i = 0;
    while i < bits {
        r = (r << 1) | ((x >> i) & 1);
        i += 1;
    }
    r
}

/// Fixed literal/length codes (RFC 1951 §3.2.6) by their next 10 input
/// bits, least significant first (codes are sent most significant bit
/// first, so the index is read reversed).
static FIXED_CODE: [u8; 1024] = {
    let mut t = [0u8; 1024];
    let mut i = 0;
    while i < 1024 {
        let c7 = reverse(i & 127, 7);
        let c8 = reverse(i & 255, 8);
        t[i] = if c7 == 0 {
            // End of block: a fixed-Huffman header (BTYPE = 01) must follow.
            if (i >> 8) & 3 == 1 { 10 } else { STOPS }
        } else if c7 < 24 {
            // 257..=279: lengths 3..=258 with their extra bits.
            (7 + LEN_EXTRA[c7 - 1]) | THEN_DISTANCE
        } else if c8 >= 48 && c8 < 192 {
            8
        } else if c8 >= 192 && c8 < 200 {
            // 280..=287, of which 286 and 287 are invalid.
            let li = c8 - 192 + 23;
            if li >= 29 {
                STOPS
            } else {
                (8 + LEN_EXTRA[li]) | THEN_DISTANCE
            }
        } else {
            // 144..=255: nine bits.
            9
        };
        i += 1;
    }
    t
};

/// Fixed distance codes by their next 5 input bits: the bits they take
/// with their extra bits, or [`STOPS`] for the two invalid ones (30, 31).
static FIXED_DIST: [u8; 32] = {
    let mut t = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        let c = reverse(i, 5);
        t[i] = if c < 30 { 5 + DIST_EXTRA[c] } else { STOPS };
        i += 1;
    }
    t
};

/// Eight bytes from `i`, little-endian, zeros past the end of `b` (as
/// `resync::Bits` reads them).
#[inline]
fn load64(b: &[u8], i: usize) -> u64 {
    match b.get(i..i + 8) {
        Some(w) => u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]),
        None => {
            let mut w = [0u8; 8];
            let have = b.len().saturating_sub(i).min(8);
            if have > 0 {
                w[..have].copy_from_slice(&b[i..i + have]);
            }
            u64::from_le_bytes(w)
        }
    }
}

/// The cheap checks over a buffer, with the fixed-Huffman counts of the
/// window last asked for.
pub(super) struct Sieve {
    /// Whether fixed-Huffman blocks are looked for.
    fixed: bool,
    /// For the window's bits, one per bit: a fixed-Huffman header whose
    /// run holds.
    pass: Vec<u64>,
    /// The window: its first bit in the buffer, and which buffer
    /// (`None`: no window yet).
    window: Option<(u64, u64, usize)>,
}

impl Sieve {
    pub(super) fn new(fixed: bool) -> Sieve {
        Sieve {
            fixed,
            pass: Vec::new(),
            window: None,
        }
    }

    /// The positions among bits `q..q + 64` of `b` (`q` a multiple of 64)
    /// where a block may start or, for a stored block, where its `LEN` may
    /// be (as `resync::candidate` reads them): bit `j` for bit `q + j`.
    /// `key` names the bytes `b` holds (their offset in the input); a new
    /// key drops the window.
    pub(super) fn word(&mut self, b: &[u8], key: u64, q: u64) -> u64 {
        debug_assert!(q.is_multiple_of(64));
        let i = (q / 8) as usize;
        let v = load64(b, i) as u128 | (load64(b, i + 8) as u128) << 64;
        let not = !v;
        // BTYPE = 2, HLIT <= 29, HDIST <= 29.
        let dynamic = (not >> 1)
            & (v >> 2)
            & !((v >> 4) & (v >> 5) & (v >> 6) & (v >> 7))
            & !((v >> 9) & (v >> 10) & (v >> 11) & (v >> 12));
        // Of those, the ones whose code-length code is complete: most
        // are not, and this is cheaper than a call to the full checks.
        let mut m = 0u64;
        let mut d = dynamic as u64;
        while d != 0 {
            let j = d.trailing_zeros() as u64;
            d &= d - 1;
            if precode_complete(b, q + j) {
                m |= 1 << j;
            }
        }
        if self.fixed {
            let fixed = ((v >> 1) & (not >> 2)) as u64;
            if fixed != 0 {
                m |= fixed & self.fixed_word(b, key, q);
            }
        }
        for k in 0..8 {
            let at = i + k;
            if at >= 1
                && let Some(w) = b.get(at..at + 4)
                && u16::from_le_bytes([w[0], w[1]]) == !u16::from_le_bytes([w[2], w[3]])
                && stored_header_bits(b[at - 1]).is_some()
            {
                m |= 1 << (8 * k);
            }
        }
        m
    }

    /// The fixed-Huffman pass bits of `q..q + 64`, from the window that
    /// holds them (made if it is not the one held).
    fn fixed_word(&mut self, b: &[u8], key: u64, q: u64) -> u64 {
        let fresh = match self.window {
            Some((k, from, len)) => {
                k != key || len != b.len() || q < from || q >= from + WINDOW_BITS
            }
            None => true,
        };
        if fresh {
            self.pass.resize((WINDOW_BITS / 64) as usize, 0);
            fixed_pass(b, q, &mut self.pass);
            self.window = Some((key, q, b.len()));
        }
        let from = self.window.map_or(0, |(_, f, _)| f);
        self.pass[((q - from) / 64) as usize]
    }
}

/// For each bit `p` of `from..from + WINDOW_BITS` of `b`: whether
/// fixed-Huffman blocks from a header at `p` may decode [`FIXED_PROOF`]
/// symbols before an invalid code or a header of another type (or get
/// past what is looked at); one bit each in `pass`.
///
/// One pass from the end: `run[p % 64]` holds the symbols that decode
/// from a symbol at `p`, one more than from where the symbol ends. Codes
/// take 7 to 31 bits, so that is among the 63 bits after `p`, whose
/// counts are still in the ring. A run that stops reads the count at
/// `run[64..]`, one less than zero. No branch depends on the bits: which
/// way a random bit goes is not predictable, and a mispredicted branch
/// costs more than both ways.
fn fixed_pass(b: &[u8], from: u64, pass: &mut [u64]) {
    pass.fill(0);
    let nbits = b.len() as u64 * 8;
    // A multiple of 8, as `from` is of 64.
    let end = (from + WINDOW_BITS + MARGIN_BITS).min(nbits.saturating_sub(END_BITS) & !7);
    if end <= from {
        // Every run gets to the end of the bytes: let them all through.
        pass.fill(u64::MAX);
        return;
    }
    let mut run = [u32::MAX; 128];
    run[..64].fill(THROUGH);
    let proof = FIXED_PROOF as u32;
    let mut byte = end / 8;
    // Bit i: the run from bit `byte * 8 + i` decodes the proof (runs
    // from `end` on get past what is looked at).
    let mut proved = u64::MAX;
    while byte > from / 8 {
        byte -= 1;
        let x = load64(b, byte as usize);
        proved <<= 8;
        for k in (0..8u64).rev() {
            let p = byte * 8 + k;
            let w = x >> k;
            let e = FIXED_CODE[(w & 1023) as usize];
            let pre = (e & 31) as u64;
            let then = 0u8.wrapping_sub((e & THEN_DISTANCE) >> 5);
            let d = FIXED_DIST[((w >> pre) & 31) as usize] & then;
            let at = ((p + pre + (d & 31) as u64) & 63) as usize | ((e | d) & STOPS) as usize;
            let n = run[at].wrapping_add(1);
            run[(p & 63) as usize] = n;
            proved |= ((n >= proof) as u64) << k;
        }
        // Fixed-Huffman headers (BTYPE = 01) whose symbols after their 3
        // bits decode the proof.
        let heads = (x >> 1) & !(x >> 2) & (proved >> 3) & 0xff;
        let r = byte * 8;
        if r < from + WINDOW_BITS && heads != 0 {
            let r = r - from;
            pass[(r / 64) as usize] |= heads << (r % 64);
        }
    }
    // Headers past `end` (and inside the window) are let through.
    for r in end.saturating_sub(from)..WINDOW_BITS {
        pass[(r / 64) as usize] |= 1 << (r % 64);
    }
}

/// Whether the dynamic block header at bit `rel` of `b` has a complete
/// code-length code (its lengths' Kraft sum is exactly 1), as
/// `resync::dynamic_header` requires, read from one 128-bit load; `true`
/// when `b` ends too soon to tell (the full check then decides).
#[inline]
pub(super) fn precode_complete(b: &[u8], rel: u64) -> bool {
    let i = (rel / 8) as usize;
    let Some(bytes) = b.get(i..i + 16) else {
        return true;
    };
    let mut w = [0u8; 16];
    w.copy_from_slice(bytes);
    // 17 header bits, then up to 19 lengths of 3 bits: 74 of the 121
    // bits left after the shift.
    let w = u128::from_le_bytes(w) >> (rel % 8);
    let hclen = ((w >> 13) & 15) as u32 + 4;
    // The lengths' 12 to 57 bits, summed four lengths at a time.
    let lens = (w >> 17) as u64 & ((1u64 << (3 * hclen)) - 1);
    let t = &KRAFT4;
    let sum = t[(lens & 0xfff) as usize]
        + t[(lens >> 12 & 0xfff) as usize]
        + t[(lens >> 24 & 0xfff) as usize]
        + t[(lens >> 36 & 0xfff) as usize]
        + t[(lens >> 48 & 0xfff) as usize];
    sum == 128
}

/// The Kraft sum, in 128ths, of four 3-bit code lengths by their 12 bits
/// (a length of 0 is no code).
static KRAFT4: [u16; 4096] = {
    let mut t = [0u16; 4096];
    let mut i = 0;
    while i < 4096 {
        let mut k = 0;
        while k < 4 {
            let l = (i >> (3 * k)) & 7;
            if l != 0 {
                t[i] += 128 >> l;
            }
            k += 1;
        }
        i += 1;
    }
    t
};

/// Whether the byte before a stored block's LEN can hold its header: three
/// bits `x00` somewhere, then zero padding (as every writer pads).
pub(super) fn stored_header_bits(prev: u8) -> Option<u32> {
    (0..6).find(|&k| {
        let hdr = (prev >> k) & 0b111;
        hdr & 0b110 == 0 && (prev as u32) >> (k + 3) == 0
    })
}
