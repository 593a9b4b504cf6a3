//! Process-wide values that a forked child makes afresh (see `data::fork`).

use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

/// A process-wide value made on first use, and made again in a forked
/// child, which leaves the parent's copy (and whatever lock in it a thread
/// of the parent held) alone. Values are never freed: they live as long
/// as their process.
pub(crate) struct PerProcess<T> {
    ptr: AtomicPtr<T>,
    make: fn() -> T,
}

impl<T: Send + Sync> PerProcess<T> {
    /// A value `make` makes when first asked for.
    pub(crate) const fn new(make: fn() -> T) -> PerProcess<T> {
        PerProcess {
            ptr: AtomicPtr::new(ptr::null_mut()),
            make,
        }
    }

    /// This process's value.
    pub(crate) fn get(&self) -> &T {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            // SAFETY: a non-null pointer here came from `Box::into_raw`
            // below and is never freed.
            return unsafe { &*p };
        }
        let new = Box::into_raw(Box::new((self.make)()));
        match self
            .ptr
            .compare_exchange(ptr::null_mut(), new, Ordering::AcqRel, Ordering::Acquire)
        {
            // SAFETY: as above; `new` is now the value.
            Ok(_) => unsafe { &*new },
            Err(won) => {
                // SAFETY: `new` was never shared; `won` is as above.
                unsafe {
                    drop(Box::from_raw(new));
                    &*won
                }
            }
        }
    }

    /// In a forked child: leaves the parent's value alone (leaked), so the
    /// next use makes the child's own.
    pub(crate) fn forget_in_child(&self) {
        self.ptr.store(ptr::null_mut(), Ordering::Release);
    }
}
