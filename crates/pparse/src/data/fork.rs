//! A process forked while pparse runs (Python's `multiprocessing` with
//! the `fork` start method, a DataLoader's workers).
//!
//! The child is a copy of the parent with one thread, the one that
//! forked: every engine thread is gone, and a lock one of them held at
//! that moment stays locked for good in the child (a lock with threads
//! waiting on it cannot even be let go: they are not there to take it).
//! So the child never touches what the parent's threads shared:
//!
//! * the process-wide state (the cache of decoded chunks, the store of
//!   checkpoint windows, the list of read failures) is `PerProcess`
//!   (`data/per_process.rs`): a
//!   forked child makes its own on first use, and the parent's copy is
//!   left alone. The window store must be the child's own in any case:
//!   the parent's is one temporary file that both would otherwise append
//!   to at the same offsets;
//! * a session opened before the fork knows it is in a child
//!   ([`crate::Session::is_forked`]): it waits for nothing and does not
//!   join its engine thread when dropped. A front end opens the file again
//!   in the child (the Python package does, on its first call there).

use std::sync::Once;

/// Registers the fork handler, once per process. Opening a session does
/// it; a front end that forks before opening one need not.
pub fn protect() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: `child` only stores null pointers in atomics (it runs in
        // the child right after the fork, where no other thread exists).
        // Registering fails only for lack of memory, which leaves forks as
        // unprotected as before.
        unsafe {
            libc::pthread_atfork(None, None, Some(child));
        }
    });
}

extern "C" fn child() {
    super::cache::forget_in_child();
    super::inflate::windows_forget_in_child();
    super::guard::forget_in_child();
    super::trace::off_in_child();
}
