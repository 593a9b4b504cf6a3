use std::io;

use super::source::{Data, Recipe, Source};

/// Bytes held in memory: small inputs and tests.
pub struct MemSource {
    bytes: Vec<u8>,
}

impl MemSource {
    /// A source over bytes held in memory.
    pub fn new(bytes: Vec<u8>) -> MemSource {
        MemSource { bytes }
    }
}

impl Source for MemSource {
    fn available(&self) -> u64 {
        self.bytes.len() as u64
    }
    fn is_final(&self) -> bool {
        true
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        copy_from(&self.bytes, offset, buf)
    }
    fn as_slice(&self) -> Option<&[u8]> {
        Some(&self.bytes)
    }
    fn describe(&self) -> &'static str {
        "memory"
    }
}

/// A source whose first bytes are in memory already (handed over by the
/// parser that decoded them): reads within them are copied from there, and
/// only others reach `rest`, the source itself, which may have to decode
/// for them. Sniffing a child reads its first few KiB; a zip entry checked
/// where it was listed would otherwise be decoded again for that.
pub struct HeadSource {
    head: Box<[u8]>,
    rest: Data,
}

impl HeadSource {
    /// `rest`, whose first bytes are `head`.
    pub fn new(head: Box<[u8]>, rest: Data) -> HeadSource {
        HeadSource { head, rest }
    }
}

impl Source for HeadSource {
    fn available(&self) -> u64 {
        self.rest.available()
    }
    fn is_final(&self) -> bool {
        self.rest.is_final()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let avail = self.rest.available();
        let want = (buf.len() as u64).min(avail.saturating_sub(offset));
        if offset.saturating_add(want) <= self.head.len() as u64 {
            return copy_from(&self.head, offset, &mut buf[..want as usize]);
        }
        self.rest.read_at(offset, buf)
    }
    fn describe(&self) -> &'static str {
        self.rest.describe()
    }
    fn origin(&self, offset: u64) -> Option<(Data, u64, bool)> {
        self.rest.origin(offset)
    }
    fn is_window(&self) -> bool {
        self.rest.is_window()
    }
    fn final_len(&self) -> Option<u64> {
        self.rest.final_len()
    }
    fn recipe(&self) -> Recipe<'_> {
        self.rest.recipe()
    }
    fn counters(&self) -> Option<&std::sync::Arc<super::stats::Counters>> {
        self.rest.counters()
    }
}

/// `pread` semantics over a slice.
pub(super) fn copy_from(all: &[u8], offset: u64, buf: &mut [u8]) -> io::Result<usize> {
    if offset >= all.len() as u64 {
        return Ok(0);
    }
    let start = offset as usize;
    let n = buf.len().min(all.len() - start);
    buf[..n].copy_from_slice(&all[start..start + n]);
    Ok(n)
}
