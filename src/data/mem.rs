use std::io;

use super::source::Source;

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
