//! The index file's bytes: a header that names the file it indexes, a
//! window section, a body of records, and a trailer with the body's CRC.
//!
//! ```text
//! header   magic "PPARSEIX", format version u32, pparse version, settings,
//!          file key (size, mtime, sample hash)
//! windows  one record per checkpoint window: crc32, raw length, deflate
//! catalog  the extractions, fixed-size records read in place (catalog.rs)
//! body     the sources (see save.rs) and the formats the records name,
//!          deflated
//! trailer  catalog offset u64, its length u64, its crc32 u32,
//!          body offset u64, deflated length u64, raw length u64,
//!          raw body's crc32 u32, "PPIXEND\0"
//! ```
//!
//! Integers in the body are LEB128 varints; every length read back is
//! checked against the bytes that remain, so a damaged index can make the
//! reader fail but never allocate or read out of bounds.

use std::io::{self, Write};

/// First bytes of every index file.
pub(super) const MAGIC: &[u8; 8] = b"PPARSEIX";
/// Last bytes of every complete index file.
pub(super) const END: &[u8; 8] = b"PPIXEND\0";
/// Bumped whenever the layout below changes: an older index is foreign.
pub(super) const FORMAT: u32 = 7;
/// Size of the trailer.
pub(super) const TRAILER: usize = 8 + 8 + 4 + 8 + 8 + 8 + 4 + 8;

/// A writer that counts its position and the CRC of what it wrote.
pub(super) struct Out<W: Write> {
    w: W,
    pos: u64,
    crc: crc32fast::Hasher,
}

impl<W: Write> Out<W> {
    pub(super) fn new(w: W) -> Out<W> {
        Out {
            w,
            pos: 0,
            crc: crc32fast::Hasher::new(),
        }
    }
    pub(super) fn pos(&self) -> u64 {
        self.pos
    }
    pub(super) fn crc(&self) -> u32 {
        self.crc.clone().finalize()
    }
    pub(super) fn raw(&mut self, b: &[u8]) -> io::Result<()> {
        self.w.write_all(b)?;
        self.crc.update(b);
        self.pos += b.len() as u64;
        Ok(())
    }
    pub(super) fn u8(&mut self, v: u8) -> io::Result<()> {
        self.raw(&[v])
    }
    pub(super) fn u32(&mut self, v: u32) -> io::Result<()> {
        self.raw(&v.to_le_bytes())
    }
    pub(super) fn u64(&mut self, v: u64) -> io::Result<()> {
        self.raw(&v.to_le_bytes())
    }
    pub(super) fn var(&mut self, mut v: u64) -> io::Result<()> {
        let mut buf = [0u8; 10];
        let mut n = 0;
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                buf[n] = b;
                n += 1;
                break;
            }
            buf[n] = b | 0x80;
            n += 1;
        }
        self.raw(&buf[..n])
    }
    pub(super) fn bytes(&mut self, b: &[u8]) -> io::Result<()> {
        self.var(b.len() as u64)?;
        self.raw(b)
    }
    pub(super) fn str(&mut self, s: &str) -> io::Result<()> {
        self.bytes(s.as_bytes())
    }
    pub(super) fn opt(&mut self, v: Option<u64>) -> io::Result<()> {
        match v {
            None => self.u8(0),
            Some(v) => {
                self.u8(1)?;
                self.var(v)
            }
        }
    }
    pub(super) fn into_inner(self) -> W {
        self.w
    }
}

/// Why an index could not be read: where, and what was wrong.
#[derive(Debug)]
pub(super) struct Invalid(pub(super) String);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A reader over index bytes that checks every length against what is left.
pub(super) struct In<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> In<'a> {
    pub(super) fn new(b: &'a [u8]) -> In<'a> {
        In { b, pos: 0 }
    }
    pub(super) fn pos(&self) -> usize {
        self.pos
    }
    pub(super) fn left(&self) -> usize {
        self.b.len() - self.pos
    }
    fn short(&self) -> Invalid {
        Invalid(format!("ends early at byte {}", self.pos))
    }
    pub(super) fn raw(&mut self, n: usize) -> Result<&'a [u8], Invalid> {
        if n > self.left() {
            return Err(self.short());
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub(super) fn u8(&mut self) -> Result<u8, Invalid> {
        Ok(self.raw(1)?[0])
    }
    pub(super) fn u32(&mut self) -> Result<u32, Invalid> {
        let b = self.raw(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(super) fn u64(&mut self) -> Result<u64, Invalid> {
        let mut x = [0u8; 8];
        x.copy_from_slice(self.raw(8)?);
        Ok(u64::from_le_bytes(x))
    }
    pub(super) fn var(&mut self) -> Result<u64, Invalid> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Invalid(format!("varint too long at byte {}", self.pos)))
    }
    /// A count of items that each take at least one byte: never more than
    /// the bytes left, so a bad count cannot make a huge allocation.
    pub(super) fn count(&mut self) -> Result<usize, Invalid> {
        let n = self.var()?;
        if n > self.left() as u64 {
            return Err(Invalid(format!(
                "count {n} at byte {} exceeds the index",
                self.pos
            )));
        }
        Ok(n as usize)
    }
    pub(super) fn bytes(&mut self) -> Result<&'a [u8], Invalid> {
        let n = self.count()?;
        self.raw(n)
    }
    pub(super) fn str(&mut self) -> Result<&'a str, Invalid> {
        let at = self.pos;
        std::str::from_utf8(self.bytes()?).map_err(|_| Invalid(format!("bad text at byte {at}")))
    }
    pub(super) fn opt(&mut self) -> Result<Option<u64>, Invalid> {
        match self.u8()? {
            0 => Ok(None),
            1 => Ok(Some(self.var()?)),
            t => Err(Invalid(format!(
                "bad option tag {t} at byte {}",
                self.pos - 1
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_and_bad_lengths_fail() {
        let mut o = Out::new(Vec::new());
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            o.var(v).unwrap();
        }
        o.str("héllo").unwrap();
        o.opt(None).unwrap();
        o.opt(Some(1 << 40)).unwrap();
        let crc = o.crc();
        let b = o.into_inner();
        assert_eq!(crc, crc32fast::hash(&b));
        let mut i = In::new(&b);
        for v in [0u64, 1, 127, 128, 300, u64::MAX] {
            assert_eq!(i.var().unwrap(), v);
        }
        assert_eq!(i.str().unwrap(), "héllo");
        assert_eq!(i.opt().unwrap(), None);
        assert_eq!(i.opt().unwrap(), Some(1 << 40));
        assert_eq!(i.left(), 0);
        // A length beyond the end fails instead of allocating.
        let mut o = Out::new(Vec::new());
        o.var(1 << 50).unwrap();
        let b = o.into_inner();
        assert!(In::new(&b).bytes().is_err());
        assert!(In::new(&b).count().is_err());
    }
}
