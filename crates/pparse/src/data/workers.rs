//! Threads that decode ahead of the first pass: how many, and over which
//! inputs it pays.
//!
//! Two kinds of work use them: one deflate stream cut into pieces
//! (`inflate::parallel`) and the independent blocks of bzip2, xz and zstd
//! (`blocks::ahead`). Both only ever save time: what a worker made is taken
//! where the first pass, decoding in order, would have made the very same
//! bytes, and is otherwise dropped.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::source::{Data, Recipe};

/// Threads that decode one stream: 1 until set. A library in the
/// processes of a data loader's pool must not start a thread per core in
/// each; the command line sets the cores available.
static THREADS: AtomicUsize = AtomicUsize::new(1);

/// Sets how many threads decode one stream; 1 decodes on the thread that
/// asks for the bytes only (`--threads`).
pub fn set_threads(n: usize) {
    THREADS.store(n.max(1), Ordering::Relaxed);
}

/// How many threads decode one stream (see [`set_threads`]).
pub fn threads() -> usize {
    THREADS.load(Ordering::Relaxed).max(1)
}

/// Whether reading `d` at random costs no more than reading the file: the
/// file itself, memory, or a window of them; not decoded bytes, which
/// workers would decode again.
pub(crate) fn cheap_to_read(d: &Data) -> bool {
    match d.recipe() {
        Recipe::File => true,
        Recipe::Opaque => d.as_slice().is_some(),
        Recipe::Slice { of, .. } => cheap_to_read(of),
        Recipe::Inflate { .. } | Recipe::Blocks { .. } => false,
    }
}

/// Starts `threads` threads named `name`, each running `work` on
/// `shared`; how many started (a thread that cannot be started is one
/// fewer worker, not an error).
pub(crate) fn spawn<T: Send + Sync + 'static>(
    threads: usize,
    name: &str,
    shared: &Arc<T>,
    work: fn(&T),
) -> usize {
    (0..threads)
        .filter(|_| {
            let s = shared.clone();
            std::thread::Builder::new()
                .name(name.into())
                .spawn(move || work(&s))
                .is_ok()
        })
        .count()
}
