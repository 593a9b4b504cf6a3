use std::fs::File;
use std::io;
use std::path::Path;

use memmap2::{Advice, Mmap, UncheckedAdvice};

use std::sync::Arc;

use super::mem::copy_from;
use super::source::{Recipe, Source};
use super::stats::{Counted, Counters};

/// A read-only memory map of a file: the kernel's page cache serves the bytes,
/// so a 200 GB file costs address space, not RAM.
///
/// Only regular files are opened ([`super::regular::open_regular`]): a pipe or a
/// device is refused, never copied (`/dev/zero` would fill the disk).
pub struct MmapSource {
    map: Option<Mmap>,
    counters: Counted,
}

impl MmapSource {
    /// Maps `path`. The file must not change while it is mapped (pparse's
    /// documented assumption): a file truncated under a live mapping raises
    /// SIGBUS on access, as with every mmap-based reader.
    pub fn open(path: &Path) -> io::Result<MmapSource> {
        Self::from_file(&super::regular::open_regular(path)?)
    }

    /// Maps `path` and counts its reads in `counters` (a session's, or
    /// those of the source a parser found this file beside).
    pub fn open_counted(path: &Path, counters: Option<&Arc<Counters>>) -> io::Result<MmapSource> {
        let mut s = Self::open(path)?;
        s.counters = counters.cloned();
        Ok(s)
    }

    fn from_file(file: &File) -> io::Result<MmapSource> {
        if file.metadata()?.len() == 0 {
            return Ok(MmapSource {
                map: None,
                counters: None,
            });
        }
        // SAFETY: the mapping is read-only and pparse never writes the file;
        // the caller contract above covers writes by other processes.
        let map = unsafe { Mmap::map(file)? };
        let _ = map.advise(Advice::Sequential);
        Ok(MmapSource {
            map: Some(map),
            counters: None,
        })
    }

    fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}

impl Source for MmapSource {
    fn available(&self) -> u64 {
        self.bytes().len() as u64
    }
    fn is_final(&self) -> bool {
        true
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let n = copy_from(self.bytes(), offset, buf)?;
        super::stats::file_read(self.counters.as_deref(), n as u64);
        Ok(n)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(self.bytes())
    }
    fn counters(&self) -> Option<&Arc<Counters>> {
        self.counters.as_ref()
    }
    fn release(&self, start: u64, end: u64) {
        let Some(map) = &self.map else { return };
        const PAGE: u64 = 4096;
        let start = start.div_ceil(PAGE) * PAGE;
        let end = (end / PAGE * PAGE).min(map.len() as u64);
        if end > start {
            // SAFETY: DontNeed on a read-only shared file mapping only drops
            // this process's page-table entries; later reads fault the same
            // bytes back in from the page cache. No slice into these pages is
            // held across this call by pparse's readers (they copy or re-borrow).
            unsafe {
                let _ = map.unchecked_advise_range(
                    UncheckedAdvice::DontNeed,
                    start as usize,
                    (end - start) as usize,
                );
            }
        }
    }
    fn describe(&self) -> &'static str {
        "file"
    }
    fn recipe(&self) -> Recipe<'_> {
        Recipe::File
    }
}
