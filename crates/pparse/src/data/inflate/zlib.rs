//! A small safe wrapper over zlib-rs's C API (`libz-rs-sys`), for the few
//! calls that flate2 does not expose and random access needs: stopping at
//! deflate block boundaries (`Z_BLOCK` + `data_type`), `inflatePrime` to start
//! at a bit position, and getting/setting the 32 KiB window.
//!
//! Only raw deflate (no zlib/gzip wrapper): pparse parses gzip and zip headers
//! itself so it can report and recover from damage in them.

use std::ffi::CStr;
use std::mem::size_of;

use libz_rs_sys as z;

/// Size of the deflate history window.
pub const WINDOW: usize = 32 * 1024;

/// Where decoding at input bit `bit` starts: the input byte, and the bits
/// of the byte before it that are still to be read (a checkpoint's form,
/// and what [`RawInflate::prime`] takes).
pub fn split_bit(bit: u64) -> (u64, u8) {
    match (bit % 8) as u8 {
        0 => (bit / 8, 0),
        k => (bit / 8 + 1, 8 - k),
    }
}

/// Result of one [`RawInflate::inflate`] call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Progress was made; call again.
    Ok,
    /// The final block ended: the deflate stream is complete.
    StreamEnd,
    /// No progress possible: more input (or output space) is needed.
    BufError,
    /// The input is not valid deflate data.
    DataError,
}

/// Outcome of one call: bytes consumed and produced, and the code.
#[derive(Debug, Clone, Copy)]
pub struct Step {
    /// Input bytes consumed.
    pub consumed: usize,
    /// Output bytes produced.
    pub produced: usize,
    /// zlib's return code.
    pub code: Code,
}

/// A raw-deflate decoder (zlib `inflateInit2(-15)`).
pub struct RawInflate {
    // Boxed: zlib keeps a pointer back to the stream, so it must not move.
    strm: std::mem::ManuallyDrop<Box<z::z_stream>>,
}

// SAFETY: the stream is owned exclusively; zlib-rs keeps no thread-local state.
unsafe impl Send for RawInflate {}

impl RawInflate {
    /// A raw deflate decoder (no zlib or gzip header): one this thread
    /// used before and dropped, reset, when there is one (see `POOL`).
    pub fn new() -> RawInflate {
        if let Some(mut z) = POOL.try_with(|p| p.borrow_mut().pop()).ok().flatten() {
            z.reset();
            return z;
        }
        let mut strm = Box::new(z::z_stream::default());
        // SAFETY: strm is a valid, default-initialised stream with the
        // library's allocator; version and size match the linked library.
        let ret = unsafe {
            z::inflateInit2_(
                &mut *strm,
                -15,
                z::zlibVersion(),
                size_of::<z::z_stream>() as i32,
            )
        };
        assert_eq!(ret, z::Z_OK, "zlib-rs inflateInit2 failed");
        RawInflate {
            strm: std::mem::ManuallyDrop::new(strm),
        }
    }

    /// Forgets all state, ready for a new raw deflate stream.
    pub fn reset(&mut self) {
        // SAFETY: the stream was initialised in new().
        unsafe {
            z::inflateReset(&mut **self.strm);
        }
    }

    /// Feeds `bits` (0..=16) low bits of `value` before the next input byte:
    /// how decoding starts at a block boundary in the middle of a byte.
    pub fn prime(&mut self, bits: u8, value: u8) {
        if bits == 0 {
            return;
        }
        // SAFETY: initialised stream; bits <= 8 is within zlib's limit.
        unsafe {
            z::inflatePrime(&mut **self.strm, bits as i32, value as i32);
        }
    }

    /// Sets the history window (the 32 KiB of output before a checkpoint).
    pub fn set_dictionary(&mut self, dict: &[u8]) -> bool {
        let dict = &dict[dict.len().saturating_sub(WINDOW)..];
        // SAFETY: dict is a valid slice of the given length.
        let ret =
            unsafe { z::inflateSetDictionary(&mut **self.strm, dict.as_ptr(), dict.len() as u32) };
        ret == z::Z_OK
    }

    /// Copies the current history window (up to 32 KiB) into `out`.
    pub fn dictionary(&self, out: &mut Vec<u8>) {
        out.resize(WINDOW, 0);
        let mut len: u32 = 0;
        // SAFETY: out has room for the maximum window size.
        unsafe {
            z::inflateGetDictionary(&**self.strm, out.as_mut_ptr(), &mut len);
        }
        out.truncate(len as usize);
    }

    /// zlib's `data_type` after the last call: unused bits in the last input
    /// byte (low 3 bits), +64 in the last block, +128 right after a block end.
    pub fn data_type(&self) -> i32 {
        self.strm.data_type
    }

    /// True right after a block that is not the last one ended: a place where
    /// decoding can later resume from (the byte offset, the unused bits and
    /// the window).
    pub fn at_block_boundary(&self) -> bool {
        self.strm.data_type & 0xc0 == 0x80
    }

    /// Decodes from `input` into `output`. With `block` set, stops at the end
    /// of each deflate block so the caller can take checkpoints.
    pub fn inflate(&mut self, input: &[u8], output: &mut [u8], block: bool) -> Step {
        let in_len = input.len().min(u32::MAX as usize);
        let out_len = output.len().min(u32::MAX as usize);
        self.strm.next_in = input.as_ptr();
        self.strm.avail_in = in_len as u32;
        self.strm.next_out = output.as_mut_ptr();
        self.strm.avail_out = out_len as u32;
        let flush = if block { z::Z_BLOCK } else { z::Z_NO_FLUSH };
        // SAFETY: next_in/next_out point into live slices of the given lengths;
        // the pointers are cleared below before the slices go out of scope.
        let ret = unsafe { z::inflate(&mut **self.strm, flush) };
        let consumed = in_len - self.strm.avail_in as usize;
        let produced = out_len - self.strm.avail_out as usize;
        self.strm.next_in = std::ptr::null();
        self.strm.avail_in = 0;
        self.strm.next_out = std::ptr::null_mut();
        self.strm.avail_out = 0;
        let code = match ret {
            z::Z_OK => Code::Ok,
            z::Z_STREAM_END => Code::StreamEnd,
            z::Z_BUF_ERROR => Code::BufError,
            _ => Code::DataError,
        };
        Step {
            consumed,
            produced,
            code,
        }
    }

    /// zlib's message for the last error ("invalid block type", ...).
    pub fn message(&self) -> String {
        if self.strm.msg.is_null() {
            return "invalid deflate data".to_string();
        }
        // SAFETY: zlib sets msg to a static NUL-terminated string.
        let msg = unsafe { CStr::from_ptr(self.strm.msg) }.to_string_lossy();
        // zlib-rs 0.6 reports some invalid codes from its fast path under this
        // message, which would mislead users: say what it means.
        if msg.contains("repeated call with bad state") {
            return "invalid code or distance in deflate data".to_string();
        }
        msg.into_owned()
    }
}

impl Default for RawInflate {
    fn default() -> Self {
        Self::new()
    }
}

/// Decoders kept per thread for reuse: starting one allocates its state
/// and, on first output, its 32 KiB window; a zip of a million small
/// entries starts a million, one after another.
const POOL_MAX: usize = 4;

thread_local! {
    /// Decoders dropped on this thread, at most [`POOL_MAX`]; ended when
    /// the thread ends (the pool is gone then, and a drop ends them).
    static POOL: std::cell::RefCell<Vec<RawInflate>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Drop for RawInflate {
    fn drop(&mut self) {
        // SAFETY: taken exactly once, here; the field is not used after.
        let strm = unsafe { std::mem::ManuallyDrop::take(&mut self.strm) };
        let mut left = Some(strm);
        let _ = POOL.try_with(|p| {
            if let Ok(mut p) = p.try_borrow_mut()
                && p.len() < POOL_MAX
                && let Some(strm) = left.take()
            {
                p.push(RawInflate {
                    strm: std::mem::ManuallyDrop::new(strm),
                });
            }
        });
        if let Some(mut strm) = left {
            // SAFETY: initialised in new(), ended exactly once here.
            unsafe {
                z::inflateEnd(&mut *strm);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A tiny deflate stream of "hello hello hello\n" made by zlib (raw, level 6).
    const HELLO: &[u8] = &[
        0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x57, 0xc8, 0x40, 0x90, 0x5c, 0x00,
    ];

    #[test]
    fn decodes_a_small_stream() {
        let mut z = RawInflate::new();
        let mut out = [0u8; 64];
        let s = z.inflate(HELLO, &mut out, false);
        assert_eq!(s.code, Code::StreamEnd);
        assert_eq!(&out[..s.produced], b"hello hello hello\n");
        assert_eq!(s.consumed, HELLO.len());
    }

    #[test]
    fn truncated_stream_needs_input() {
        let mut z = RawInflate::new();
        let mut out = [0u8; 64];
        let s = z.inflate(&HELLO[..5], &mut out, false);
        assert_ne!(s.code, Code::StreamEnd);
        let s2 = z.inflate(&[], &mut out, false);
        assert_eq!(s2.code, Code::BufError);
    }
}
