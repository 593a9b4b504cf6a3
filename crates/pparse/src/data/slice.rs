use std::io;

use super::source::{Data, Range, Recipe, Source};

/// A window `[start, end)` of another source: a tar member, a stored zip
/// entry. The parent may still be growing; the window then grows with it and
/// is final once the parent has reached `end` or is final itself.
pub struct SliceSource {
    parent: Data,
    range: Range,
}

impl SliceSource {
    /// The window `range` of `parent`.
    pub fn new(parent: Data, range: Range) -> SliceSource {
        SliceSource { parent, range }
    }
}

impl Source for SliceSource {
    fn available(&self) -> u64 {
        let parent = self.parent.available();
        parent.min(self.range.end).saturating_sub(self.range.start)
    }
    fn is_final(&self) -> bool {
        self.parent.is_final() || self.parent.available() >= self.range.end
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let avail = self.available();
        if offset >= avail {
            return Ok(0);
        }
        let n = (buf.len() as u64).min(avail - offset) as usize;
        self.parent
            .read_at(self.range.start + offset, &mut buf[..n])
    }
    fn as_slice(&self) -> Option<&[u8]> {
        let all = self.parent.as_slice()?;
        let start = (self.range.start as usize).min(all.len());
        let end = (self.range.end.min(all.len() as u64) as usize).max(start);
        Some(&all[start..end])
    }
    fn release(&self, start: u64, end: u64) {
        self.parent
            .release(self.range.start + start, self.range.start + end);
    }
    fn describe(&self) -> &'static str {
        self.parent.describe()
    }
    fn origin(&self, offset: u64) -> Option<(Data, u64, bool)> {
        Some((self.parent.clone(), self.range.start + offset, true))
    }
    fn is_window(&self) -> bool {
        true
    }
    fn counters(&self) -> Option<&std::sync::Arc<super::stats::Counters>> {
        self.parent.counters()
    }
    fn final_len(&self) -> Option<u64> {
        (self.range.end != u64::MAX).then(|| self.range.len())
    }
    fn recipe(&self) -> Recipe<'_> {
        Recipe::Slice {
            of: &self.parent,
            range: self.range,
        }
    }
}
