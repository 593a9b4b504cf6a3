//! An I/O trace: every read from a file, decode, cache hit and wait for
//! the parse, with its bytes, time and thread, written as Chrome's trace
//! event JSON (`{"traceEvents": [...]}`), which Perfetto and
//! `chrome://tracing` open. `pparse --trace-io FILE`; Python's
//! `pparse.trace_io(path)`.
//!
//! Events are written as they happen through a buffer, never held: a
//! trace of a long run costs disk, not memory. Reads and cache hits are
//! instants (`"ph": "i"`, their bytes in `args`); decodes and waits are
//! complete events (`"ph": "X"`) with their duration. Each thread is named
//! once (`"ph": "M"`, `thread_name`). When tracing is off, an event costs
//! one atomic load.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Whether a trace is being written (checked before taking the lock).
static ON: AtomicBool = AtomicBool::new(false);

/// The trace being written.
static TRACE: Mutex<Option<Trace>> = parking_lot::const_mutex(None);

/// Threads numbered as they first trace something.
static NEXT_TID: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// This thread's number in traces (0: not numbered yet).
    static TID: Cell<u64> = const { Cell::new(0) };
}

/// Events written at the most: past it the trace ends (said in its last
/// event), so a runaway run cannot fill the disk.
const MAX_EVENTS: u64 = 20_000_000;

struct Trace {
    out: BufWriter<File>,
    start: Instant,
    events: u64,
    /// Threads named in this trace.
    named: Vec<u64>,
    pid: u32,
    /// Whether an entry is written (the next one needs a comma).
    written: bool,
}

/// What an event records.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Event {
    /// Bytes read from a file.
    Read(u64),
    /// Bytes decoded for the first time, in a duration.
    Decode(u64, Duration),
    /// Bytes decoded again from a checkpoint.
    Redecode(u64, Duration),
    /// Bytes served from the cache of decoded chunks.
    CacheHit(u64),
    /// A reader waited for the parse.
    Wait(Duration),
}

/// Starts writing a trace to `path` (one at a time: a trace already being
/// written ends first).
pub fn start(path: &Path) -> io::Result<()> {
    stop()?;
    let mut out = BufWriter::with_capacity(1 << 16, File::create(path)?);
    out.write_all(b"{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n")?;
    *TRACE.lock() = Some(Trace {
        out,
        start: Instant::now(),
        events: 0,
        named: Vec::new(),
        pid: std::process::id(),
        written: false,
    });
    ON.store(true, Ordering::Release);
    Ok(())
}

/// Ends the trace being written, if any, and closes its file.
pub fn stop() -> io::Result<()> {
    ON.store(false, Ordering::Release);
    match TRACE.lock().take() {
        Some(mut t) => {
            t.out.write_all(b"\n]}\n")?;
            t.out.flush()
        }
        None => Ok(()),
    }
}

/// In a forked child: the parent's trace is the parent's (its lock may be
/// held by a thread the child does not have).
pub(crate) fn off_in_child() {
    ON.store(false, Ordering::Release);
}

/// Records `e`, if a trace is being written.
pub(crate) fn event(e: Event) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    let tid = TID.with(|t| {
        if t.get() == 0 {
            t.set(NEXT_TID.fetch_add(1, Ordering::Relaxed));
        }
        t.get()
    });
    let mut g = TRACE.lock();
    let Some(t) = g.as_mut() else { return };
    if t.pid != std::process::id() {
        return;
    }
    let _ = t.write(tid, e);
}

impl Trace {
    fn write(&mut self, tid: u64, e: Event) -> io::Result<()> {
        if self.events >= MAX_EVENTS {
            return Ok(());
        }
        let now = self.start.elapsed();
        let pid = self.pid;
        if !self.named.contains(&tid) {
            self.named.push(tid);
            let name = std::thread::current()
                .name()
                .map_or_else(|| format!("thread {tid}"), str::to_string);
            self.sep()?;
            write!(
                self.out,
                "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":{}}}}}",
                serde_json::to_string(&name).map_err(io::Error::other)?
            )?;
        }
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let (name, bytes, took) = match e {
            Event::Read(n) => ("read", Some(n), None),
            Event::Decode(n, d) => ("decode", Some(n), Some(d)),
            Event::Redecode(n, d) => ("redecode", Some(n), Some(d)),
            Event::CacheHit(n) => ("cache hit", Some(n), None),
            Event::Wait(d) => ("wait", None, Some(d)),
        };
        self.sep()?;
        match took {
            Some(d) => write!(
                self.out,
                "{{\"ph\":\"X\",\"name\":\"{name}\",\"cat\":\"io\",\"pid\":{pid},\"tid\":{tid},\"ts\":{:.3},\"dur\":{:.3}",
                us(now.saturating_sub(d)),
                us(d)
            )?,
            None => write!(
                self.out,
                "{{\"ph\":\"i\",\"s\":\"t\",\"name\":\"{name}\",\"cat\":\"io\",\"pid\":{pid},\"tid\":{tid},\"ts\":{:.3}",
                us(now)
            )?,
        }
        match bytes {
            Some(n) => write!(self.out, ",\"args\":{{\"bytes\":{n}}}}}")?,
            None => write!(self.out, "}}")?,
        }
        self.events += 1;
        if self.events == MAX_EVENTS {
            self.sep()?;
            write!(
                self.out,
                "{{\"ph\":\"i\",\"s\":\"g\",\"name\":\"trace full: {MAX_EVENTS} events, the rest not traced\",\"pid\":{pid},\"tid\":{tid},\"ts\":{:.3}}}",
                us(now)
            )?;
        }
        Ok(())
    }

    /// Writes the separator before an entry (none before the first).
    fn sep(&mut self) -> io::Result<()> {
        if self.written {
            self.out.write_all(b",\n")?;
        }
        self.written = true;
        Ok(())
    }
}
