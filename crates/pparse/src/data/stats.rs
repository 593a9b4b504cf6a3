//! What this process read and decoded, for `--io-stats` (as PFIO traces
//! its I/O): counters that every byte source adds to as it works, read at
//! the end of a command.
//!
//! "Read from the file" counts the bytes handed out by mapped files (reads
//! and borrowed views); bytes read through a window are counted once, at
//! the file. "Decoded" is the first pass of every deflate stream;
//! "re-decoded" what reads decoded again from checkpoints after the cache
//! had dropped it; "from the cache" what reads found already decoded.
//! Remote sources count their own requests (`remote_stats`).
//!
//! The `pparse` binary also counts its heap ([`CountingAlloc`]): its peak
//! is what a test can hold to a bound per entry, where peak RSS also holds
//! the pages of mapped files.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

static FILE_READ: AtomicU64 = AtomicU64::new(0);
static DECODED: AtomicU64 = AtomicU64::new(0);
static REDECODED: AtomicU64 = AtomicU64::new(0);
static FROM_CACHE: AtomicU64 = AtomicU64::new(0);
static DECODE_NS: AtomicU64 = AtomicU64::new(0);
static WAIT_NS: AtomicU64 = AtomicU64::new(0);

static HEAP_NOW: AtomicU64 = AtomicU64::new(0);
static HEAP_PEAK: AtomicU64 = AtomicU64::new(0);

/// The system allocator, counting the bytes allocated and their peak. The
/// `pparse` binary installs it (`#[global_allocator]`); a program using the
/// library may, or reads a peak of 0.
pub struct CountingAlloc;

// SAFETY: every call is passed to the system allocator unchanged; the
// counters are only arithmetic beside it.
unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { std::alloc::System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        HEAP_NOW.fetch_sub(layout.size() as u64, Relaxed);
        // SAFETY: the caller's contract, passed on.
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { std::alloc::System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let p = unsafe { std::alloc::System.realloc(ptr, layout, new) };
        if !p.is_null() {
            HEAP_NOW.fetch_sub(layout.size() as u64, Relaxed);
            grew(new);
        }
        p
    }
}

fn grew(n: usize) {
    let now = HEAP_NOW.fetch_add(n as u64, Relaxed) + n as u64;
    HEAP_PEAK.fetch_max(now, Relaxed);
}

/// The counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoStats {
    /// Bytes read from files (mapped reads and views).
    pub file_read: u64,
    /// Bytes decoded by first passes over deflate streams.
    pub decoded: u64,
    /// Bytes decoded again from checkpoints.
    pub redecoded: u64,
    /// Bytes that reads of decoded streams found in the cache.
    pub from_cache: u64,
    /// Time spent decoding (both kinds).
    pub decoding: Duration,
    /// Time readers spent waiting for the background parse.
    pub waiting: Duration,
    /// The most bytes the heap held at once, when [`CountingAlloc`] counts
    /// it (0 otherwise).
    pub heap_peak: u64,
}

/// The counters now.
pub fn io_stats() -> IoStats {
    IoStats {
        file_read: FILE_READ.load(Relaxed),
        decoded: DECODED.load(Relaxed),
        redecoded: REDECODED.load(Relaxed),
        from_cache: FROM_CACHE.load(Relaxed),
        decoding: Duration::from_nanos(DECODE_NS.load(Relaxed)),
        waiting: Duration::from_nanos(WAIT_NS.load(Relaxed)),
        heap_peak: HEAP_PEAK.load(Relaxed),
    }
}

/// `n` bytes read from a file.
pub fn file_read(n: u64) {
    FILE_READ.fetch_add(n, Relaxed);
}

/// `n` bytes decoded in `took`; `again`: from a checkpoint, not the first pass.
pub fn decoded(n: u64, took: Duration, again: bool) {
    if again { &REDECODED } else { &DECODED }.fetch_add(n, Relaxed);
    DECODE_NS.fetch_add(took.as_nanos() as u64, Relaxed);
}

/// `n` bytes served from the cache of decoded chunks.
pub fn from_cache(n: u64) {
    FROM_CACHE.fetch_add(n, Relaxed);
}

/// A reader waited `took` for the background parse.
pub fn waited(took: Duration) {
    WAIT_NS.fetch_add(took.as_nanos() as u64, Relaxed);
}
