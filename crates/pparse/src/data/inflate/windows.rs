//! Storage for checkpoint windows (32 KiB each) outside RAM.
//!
//! A 600 GB decoded stream with a checkpoint every 4 MiB has 150,000 windows:
//! 4.8 GB. They go to one unlinked temporary file and are read back with
//! `pread` when a read must resume from a checkpoint; only a 16-byte handle
//! per window stays in memory. When no temporary file can be created the
//! windows stay in memory instead (correct, just not bounded).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::data::per_process::PerProcess;

use crate::data::checkpoints::WindowSlot;

type WindowRef = WindowSlot;

enum Store {
    File { file: File, end: AtomicU64 },
    Memory(Mutex<Vec<u8>>),
}

/// This process's store; a forked child makes its own, as appending to
/// the parent's file would write over its windows (see `data::fork`).
static STORE: PerProcess<Store> = PerProcess::new(|| match tempfile::tempfile() {
    Ok(file) => Store::File {
        file,
        end: AtomicU64::new(0),
    },
    Err(_) => Store::Memory(Mutex::new(Vec::new())),
});

fn store() -> &'static Store {
    STORE.get()
}

/// In a forked child: the next window goes to a store of the child's own.
pub(crate) fn forget_in_child() {
    STORE.forget_in_child();
}

/// Saves a window and returns its handle.
pub(super) fn put(window: &[u8]) -> io::Result<WindowRef> {
    let len = window.len() as u32;
    match store() {
        Store::File { file, end } => {
            let off = end.fetch_add(len as u64, Ordering::Relaxed);
            file.write_all_at(window, off)?;
            Ok(WindowRef { off, len })
        }
        Store::Memory(v) => {
            let mut v = v.lock();
            let off = v.len() as u64;
            v.extend_from_slice(window);
            Ok(WindowRef { off, len })
        }
    }
}

/// Reads a window back into `out`.
pub(super) fn get(r: WindowRef, out: &mut Vec<u8>) -> io::Result<()> {
    out.resize(r.len as usize, 0);
    match store() {
        Store::File { file, .. } => file.read_exact_at(out, r.off),
        Store::Memory(v) => {
            let v = v.lock();
            let s = r.off as usize;
            out.copy_from_slice(&v[s..s + r.len as usize]);
            Ok(())
        }
    }
}
