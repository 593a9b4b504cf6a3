//! A run of a source's bytes held for a parser that reads many small
//! records close together (a zip scan, local headers, descriptors), so that
//! it asks the source once per run instead of once per record.

use std::io;

use super::source::{Source, view};
use super::stats;

/// The shortest run read at once.
const MIN_RUN: usize = 512;
/// The longest: runs double while reads keep going past their end.
const MAX_RUN: usize = 1 << 20;

/// Bytes `[start, start + len)` of a source that is read by copying (a
/// decoded stream), read once into `buf`: reads inside the run cost
/// nothing and count nothing in `--io-stats`; a read past it reads a new
/// run from where it starts. A mapped source is borrowed from instead, and
/// only the bytes asked for are counted (each once while reads go on).
#[derive(Default)]
pub struct ReadAhead {
    buf: Vec<u8>,
    start: u64,
    len: usize,
    run: usize,
}

impl ReadAhead {
    /// An empty run.
    pub fn new() -> ReadAhead {
        ReadAhead::default()
    }

    /// Up to `len` bytes at `at`: fewer only where the source's available
    /// bytes end. Bytes once available never change, so a run read while
    /// the source was growing stays valid.
    pub fn get<'a>(&'a mut self, src: &'a dyn Source, at: u64, len: usize) -> io::Result<&'a [u8]> {
        let end = self.start + self.len as u64;
        if let Some(all) = src.as_slice() {
            // Mapped or in memory: borrowing is free. `--io-stats` counts
            // the bytes asked for, once while reads stay within or go on
            // from the last ones (a header's fixed part, then all of it).
            let from = at.min(all.len() as u64) as usize;
            let to = at.saturating_add(len as u64).min(all.len() as u64) as usize;
            let fresh = if at >= self.start && at <= end {
                (to as u64).saturating_sub(end)
            } else {
                self.start = at;
                (to - from) as u64
            };
            stats::file_read(src.counters().map(|c| &**c), fresh);
            self.len = (to as u64).max(end).saturating_sub(self.start) as usize;
            return Ok(&all[from..to]);
        }
        let inside = at >= self.start && at.saturating_add(len as u64) <= end;
        let touches = at >= self.start && at <= end;
        // Nothing to read again when the run already holds every byte
        // there is past `at`.
        let holds_rest = touches && end >= src.available();
        if !(inside || holds_rest) {
            // Reads that go on where the last run ended read longer runs;
            // a jump starts short again (a zip's next header is usually
            // close, and a long run there would be wasted).
            self.run = if touches {
                (self.run * 2).clamp(MIN_RUN, MAX_RUN)
            } else {
                MIN_RUN
            };
            let got = view(src, at, self.run.max(len), &mut self.buf)?.len();
            self.buf.truncate(got);
            self.start = at;
            self.len = got;
        }
        let off = (at.saturating_sub(self.start) as usize).min(self.len);
        let n = len.min(self.len - off);
        Ok(&self.buf[off..off + n])
    }

    /// Forgets the run (the next read reads a new one).
    pub fn clear(&mut self) {
        self.len = 0;
        self.run = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    /// A source that can only be read by copying (a decoded stream's kind).
    struct Copied(MemSource);

    impl Source for Copied {
        fn available(&self) -> u64 {
            self.0.available()
        }
        fn is_final(&self) -> bool {
            true
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
            self.0.read_at(offset, buf)
        }
        fn describe(&self) -> &'static str {
            "test"
        }
    }

    #[test]
    fn serves_reads_inside_a_run_without_reading_again() {
        let bytes: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let mapped = MemSource::new(bytes.clone());
        let copied = Copied(MemSource::new(bytes.clone()));
        let mut r = ReadAhead::new();
        assert_eq!(r.get(&mapped, 10, 5).unwrap(), &bytes[10..15]);
        assert_eq!(r.get(&mapped, 10, 30).unwrap(), &bytes[10..40]);
        assert_eq!(
            (r.start, r.len),
            (10, 30),
            "a mapped source is borrowed from"
        );
        assert_eq!(r.get(&mapped, 99_998, 10).unwrap(), &bytes[99_998..]);
        assert_eq!((r.start, r.len), (99_998, 2));
        {
            let src = &copied;
            let mut r = ReadAhead::new();
            assert_eq!(r.get(src, 10, 5).unwrap(), &bytes[10..15]);
            assert_eq!((r.start, r.len), (10, MIN_RUN));
            assert_eq!(r.get(src, 100, 50).unwrap(), &bytes[100..150]);
            assert_eq!(r.start, 10, "a read inside the run reads nothing");
            // Past the run's end, from inside it: a longer run from there.
            assert_eq!(r.get(src, 300, 500).unwrap(), &bytes[300..800]);
            assert_eq!((r.start, r.len), (300, 2 * MIN_RUN));
            assert_eq!(r.get(src, 500, 10).unwrap(), &bytes[500..510]);
            assert_eq!(r.start, 300);
            assert_eq!(r.get(src, 1320, 20).unwrap(), &bytes[1320..1340]);
            assert_eq!((r.start, r.len), (1320, 4 * MIN_RUN));
            // A jump: a short run again.
            assert_eq!(r.get(src, 90_000, 8).unwrap(), &bytes[90_000..90_008]);
            assert_eq!(r.len, MIN_RUN);
            // At the end of the bytes: what there is.
            assert_eq!(r.get(src, 99_998, 10).unwrap(), &bytes[99_998..]);
            assert_eq!(r.get(src, 100_000, 10).unwrap(), &[] as &[u8]);
            // A read longer than a run.
            assert_eq!(r.get(src, 0, 70_000).unwrap(), &bytes[..70_000]);
        }
    }
}
