//! A read error anywhere is said, never swallowed.
//!
//! Parsers treat a failed read in many ways (a sniff sees no bytes, a
//! header read that fails is tried again), and none of them can tell a
//! file that ends from one that cannot be read. A [`ReadGuard`] wraps the
//! opened file (or URL): the first error any read of it meets is recorded
//! with its offset, every later read fails at once with the same error
//! (a server that broke its protocol is not asked again), and the engine
//! that sees the record stops the parse and marks the tree damaged.

use std::io;
use std::sync::{Arc, Mutex, OnceLock};

use super::per_process::PerProcess;

use super::stats::Counters;

use super::source::{Data, Recipe, Source};

/// The first read error of a guarded source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadFailure {
    /// Where the read that failed started, in the guarded source.
    pub offset: u64,
    /// Why (the source's error, which names the file or URL).
    pub reason: String,
}

impl std::fmt::Display for ReadFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "read error at offset {} ({:#x}): {}",
            self.offset, self.offset, self.reason
        )
    }
}

/// Failures of every guard of this process not yet taken, for a command's
/// exit status (at most [`KEPT`]).
static FAILURES: PerProcess<Mutex<Vec<ReadFailure>>> = PerProcess::new(|| Mutex::new(Vec::new()));

/// In a forked child: the child keeps a failure list of its own.
pub(super) fn forget_in_child() {
    FAILURES.forget_in_child();
}
const KEPT: usize = 16;

/// The read failures recorded since the last call, removed.
pub fn take_read_failures() -> Vec<ReadFailure> {
    std::mem::take(&mut *FAILURES.get().lock().unwrap_or_else(|e| e.into_inner()))
}

/// A source that records its first read error. See the module docs.
pub struct ReadGuard {
    inner: Data,
    counters: Arc<Counters>,
    failed: OnceLock<ReadFailure>,
}

impl ReadGuard {
    /// Guards `inner`. The guard holds the I/O counters of the session
    /// over it: `inner`'s, or new ones.
    pub fn new(inner: Data) -> ReadGuard {
        ReadGuard {
            counters: inner.counters().cloned().unwrap_or_default(),
            inner,
            failed: OnceLock::new(),
        }
    }

    /// The counters of the session over these bytes.
    pub fn io_counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// The first read error, once there was one.
    pub fn failure(&self) -> Option<&ReadFailure> {
        self.failed.get()
    }
}

impl Source for ReadGuard {
    fn available(&self) -> u64 {
        self.inner.available()
    }
    fn is_final(&self) -> bool {
        self.inner.is_final()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        if let Some(f) = self.failed.get() {
            return Err(io::Error::other(f.reason.clone()));
        }
        self.inner.read_at(offset, buf).inspect_err(|e| {
            let failure = ReadFailure {
                offset,
                reason: e.to_string(),
            };
            if self.failed.set(failure.clone()).is_ok() {
                let mut all = FAILURES.get().lock().unwrap_or_else(|e| e.into_inner());
                if all.len() < KEPT {
                    all.push(failure);
                }
            }
        })
    }
    fn as_slice(&self) -> Option<&[u8]> {
        self.inner.as_slice()
    }
    fn counters(&self) -> Option<&std::sync::Arc<super::stats::Counters>> {
        Some(&self.counters)
    }
    fn release(&self, start: u64, end: u64) {
        self.inner.release(start, end);
    }
    fn describe(&self) -> &'static str {
        self.inner.describe()
    }
    fn origin(&self, offset: u64) -> Option<(Data, u64, bool)> {
        self.inner.origin(offset)
    }
    fn is_window(&self) -> bool {
        self.inner.is_window()
    }
    fn final_len(&self) -> Option<u64> {
        self.inner.final_len()
    }
    fn recipe(&self) -> Recipe<'_> {
        self.inner.recipe()
    }
}
