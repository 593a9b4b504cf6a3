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

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::trace::{self, Event};

static HEAP_NOW: AtomicU64 = AtomicU64::new(0);
static HEAP_PEAK: AtomicU64 = AtomicU64::new(0);

/// The counters of one session (see [`crate::Session::io_stats`]), and the
/// process's, which every session's also add to ([`io_stats`]).
///
/// A session's sources carry its counters ([`crate::data::Source::counters`]):
/// the file it maps holds them, and every source decoded from it takes them
/// from its input, so two sessions in one process count apart.
#[derive(Debug, Default)]
pub struct Counters {
    file_read: AtomicU64,
    decoded: AtomicU64,
    redecoded: AtomicU64,
    ahead: AtomicU64,
    from_cache: AtomicU64,
    decode_ns: AtomicU64,
    wait_ns: AtomicU64,
}

/// What every session of this process counted together.
static PROCESS: Counters = Counters::new();

impl Counters {
    /// Counters at zero.
    pub const fn new() -> Counters {
        Counters {
            file_read: AtomicU64::new(0),
            decoded: AtomicU64::new(0),
            redecoded: AtomicU64::new(0),
            ahead: AtomicU64::new(0),
            from_cache: AtomicU64::new(0),
            decode_ns: AtomicU64::new(0),
            wait_ns: AtomicU64::new(0),
        }
    }

    /// What they hold now (the heap's peak is the process's).
    pub fn snapshot(&self) -> IoStats {
        IoStats {
            file_read: self.file_read.load(Relaxed),
            decoded: self.decoded.load(Relaxed),
            redecoded: self.redecoded.load(Relaxed),
            ahead: self.ahead.load(Relaxed),
            from_cache: self.from_cache.load(Relaxed),
            decoding: Duration::from_nanos(self.decode_ns.load(Relaxed)),
            waiting: Duration::from_nanos(self.wait_ns.load(Relaxed)),
            heap_peak: HEAP_PEAK.load(Relaxed),
        }
    }

    /// Adds to these counters and the process's.
    fn add(to: Option<&Counters>, pick: impl Fn(&Counters) -> &AtomicU64, n: u64) {
        pick(&PROCESS).fetch_add(n, Relaxed);
        if let Some(c) = to {
            pick(c).fetch_add(n, Relaxed);
        }
    }
}

/// The counters a source carries, if any (a source made outside a session,
/// such as bytes in memory, counts for the process alone).
pub type Counted = Option<Arc<Counters>>;

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
    /// Bytes of `decoded` that worker threads decoded ahead (`--threads`).
    pub ahead: u64,
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

impl IoStats {
    /// Both counts together (the heap's peak is the larger).
    pub fn plus(self, o: IoStats) -> IoStats {
        IoStats {
            file_read: self.file_read + o.file_read,
            decoded: self.decoded + o.decoded,
            redecoded: self.redecoded + o.redecoded,
            ahead: self.ahead + o.ahead,
            from_cache: self.from_cache + o.from_cache,
            decoding: self.decoding + o.decoding,
            waiting: self.waiting + o.waiting,
            heap_peak: self.heap_peak.max(o.heap_peak),
        }
    }
}

/// What every session of this process counted together, as
/// `--io-stats` prints it for a session.
pub fn io_stats() -> IoStats {
    PROCESS.snapshot()
}

/// `n` bytes read from a file.
pub fn file_read(to: Option<&Counters>, n: u64) {
    Counters::add(to, |c| &c.file_read, n);
    trace::event(Event::Read(n));
}

/// `n` bytes decoded in `took`; `again`: from a checkpoint, not the first pass.
pub fn decoded(to: Option<&Counters>, n: u64, took: Duration, again: bool) {
    Counters::add(to, |c| if again { &c.redecoded } else { &c.decoded }, n);
    Counters::add(to, |c| &c.decode_ns, took.as_nanos() as u64);
    trace::event(if again {
        Event::Redecode(n, took)
    } else {
        Event::Decode(n, took)
    });
}

/// `n` of the bytes decoded (counted by [`decoded`]) came from a piece
/// that a worker thread decoded ahead.
pub fn decoded_ahead(to: Option<&Counters>, n: u64) {
    Counters::add(to, |c| &c.ahead, n);
}

/// `n` bytes served from the cache of decoded chunks.
pub fn from_cache(to: Option<&Counters>, n: u64) {
    Counters::add(to, |c| &c.from_cache, n);
    trace::event(Event::CacheHit(n));
}

/// A reader waited `took` for the background parse.
pub fn waited(to: Option<&Counters>, took: Duration) {
    Counters::add(to, |c| &c.wait_ns, took.as_nanos() as u64);
    trace::event(Event::Wait(took));
}
