//! A short decoded stream once its first pass is over, kept small.
//!
//! A tar of man pages holds hundreds of thousands of small `.gz` files.
//! While one is decoded, its [`InflateSource`] carries a producer's state
//! (the unfinished chunk, the chunks kept ahead, its counters, a replay
//! slot) and its checkpoints: about 400 bytes with their allocations. Once
//! final, a stream with one checkpoint, at its start, is told by its input,
//! where its deflate data starts, its length and its chunks' CRC-32s. The
//! tree then keeps a [`SettledStream`] of 72 bytes (88 with its reference
//! counts) in its place; a read rebuilds the
//! full source as an index would ([`InflateSource::restore`]), and checks
//! each chunk it decodes again against the first pass's CRCs.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use thin_vec::ThinVec;

use super::{CHUNK, InflateSource, StreamLayout, WindowSlot, WindowStore};
use crate::data::cache::ChunkCache;
use crate::data::source::{Data, Recipe, Source};

/// A final stream of one checkpoint (see the module docs).
pub(crate) struct SettledStream {
    /// The first pass's cache key: what it left in the cache is read here.
    key: u64,
    input: Data,
    len: u64,
    /// The full source, rebuilt by the first read.
    full: OnceLock<Arc<InflateSource>>,
    /// The CRC-32s of its chunks after the first: most settled streams
    /// are one chunk long, and keep theirs in `first_crc` (empty, a
    /// `ThinVec` allocates nothing).
    more_crcs: ThinVec<u32>,
    /// Where the deflate data starts in `input` (after a gzip header):
    /// a stream whose header is 4 GiB long is not settled.
    start: u32,
    /// Its checkpoint span (4 MiB unless a test asks for another).
    span: u32,
    first_crc: u32,
    /// Its label's place in `LABELS`.
    label: u8,
    ends_exactly: bool,
}

impl InflateSource {
    /// The same bytes in a [`SettledStream`], when this stream is final,
    /// was decoded by a first pass that recorded every chunk's CRC, and
    /// has one checkpoint, at its start: a decoder resumes nowhere else,
    /// so nothing more than the input is needed to decode it again.
    pub(super) fn compact(&self) -> Option<Data> {
        if !self.done.load(Ordering::Acquire)
            || self.staged.load(Ordering::Acquire)
            || self.recovered.load(Ordering::Acquire)
        {
            return None;
        }
        let len = self.available();
        let segs = self.segments.read();
        let [seg] = segs.as_slice() else {
            return None;
        };
        let [p] = seg.points.as_slice() else {
            return None;
        };
        let start = (seg.out_start, seg.out_end, p.out, p.bits);
        if start != (0, len, 0, 0) || p.window.is_some() || !self.ahead.lock().is_empty() {
            return None;
        }
        let crcs = self.chunk_crcs.lock();
        let label = super::LABELS.iter().position(|l| *l == self.label)?;
        if crcs.len() as u64 != len.div_ceil(CHUNK) {
            return None;
        }
        let (first_crc, more) = match crcs.split_first() {
            Some((first, more)) => (*first, more),
            None => (0, &[][..]),
        };
        Some(Arc::new(SettledStream {
            key: self.key,
            input: self.input.clone(),
            start: u32::try_from(p.input).ok()?,
            len,
            label: label as u8,
            span: u32::try_from(self.span).ok()?,
            first_crc,
            more_crcs: more.iter().copied().collect(),
            ends_exactly: self.ends_exactly,
            full: OnceLock::new(),
        }))
    }
}

impl SettledStream {
    fn label(&self) -> &'static str {
        super::LABELS[usize::from(self.label)]
    }

    fn layout(&self) -> StreamLayout {
        let crcs = if self.len == 0 {
            Vec::new()
        } else {
            std::iter::once(self.first_crc)
                .chain(self.more_crcs.iter().copied())
                .collect()
        };
        super::from_start(
            self.label(),
            u64::from(self.span),
            self.len,
            u64::from(self.start),
            crcs,
        )
    }

    fn full(&self) -> &Arc<InflateSource> {
        self.full.get_or_init(|| {
            let mut s =
                InflateSource::restored_as(self.key, self.input.clone(), self.layout(), None);
            if let Some(s) = Arc::get_mut(&mut s) {
                s.ends_exactly = self.ends_exactly;
            }
            s
        })
    }
}

impl WindowStore for SettledStream {
    /// It has no window: its one checkpoint is the stream's start.
    fn read(&self, _slot: WindowSlot, _out: &mut Vec<u8>) -> io::Result<()> {
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a stream checkpointed at its start only has no windows",
        ))
    }
}

impl Drop for SettledStream {
    fn drop(&mut self) {
        ChunkCache::global().forget(self.key);
    }
}

impl Source for SettledStream {
    fn available(&self) -> u64 {
        self.len
    }
    fn is_final(&self) -> bool {
        true
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        self.full().read_at(offset, buf)
    }
    fn describe(&self) -> &'static str {
        self.label()
    }
    fn counters(&self) -> Option<&Arc<crate::data::stats::Counters>> {
        self.input.counters()
    }
    fn origin(&self, offset: u64) -> Option<(Data, u64, bool)> {
        Some((self.input.clone(), u64::from(self.start), offset == 0))
    }
    fn recipe(&self) -> Recipe<'_> {
        Recipe::Inflate {
            input: &self.input,
            stream: Some(self.layout()),
            windows: self,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;
    use crate::data::inflate::{InflateEvent, Inflater};

    /// A gzip file made by Python's gzip module (no FNAME: its deflate data
    /// starts at byte 10).
    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let out = std::process::Command::new("python3")
            .args([
                "-c",
                "import gzip, sys; sys.stdout.buffer.write(gzip.compress(sys.stdin.buffer.read(), mtime=0))",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin.take().expect("stdin").write_all(bytes)?;
                c.wait_with_output()
            })
            .expect("python3");
        assert!(out.status.success());
        out.stdout
    }

    /// Decodes the one member of `gz` as the first pass does.
    fn first_pass(gz: &[u8], span: u64) -> Arc<InflateSource> {
        let input: Data = Arc::new(MemSource::new(gz.to_vec()));
        let src = InflateSource::with_span(input, "gzip stream", span);
        let mut inf = Inflater::new(src.clone(), 10);
        loop {
            match inf.run(1 << 20) {
                InflateEvent::Progress => {}
                InflateEvent::End { .. } => break,
                e => panic!("unexpected {e:?}"),
            }
        }
        src.finish();
        src
    }

    /// A final stream of one checkpoint settles into a source a third the
    /// size that reads the same bytes, in one read or in pieces, tells an
    /// index the same layout, and still checks each chunk it decodes
    /// again; a stream with more checkpoints stays as it is.
    #[test]
    fn a_settled_stream_reads_and_indexes_as_the_first_pass() {
        // Random letters, 200 KB: four chunks, and a dozen deflate blocks.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let plain: Vec<u8> = (0..200_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b'a' + (x % 26) as u8
            })
            .collect();
        let gz = gzip(&plain);
        let src = first_pass(&gz, super::super::SPAN);
        let small = src.settled().expect("one checkpoint, final");
        assert!(std::mem::size_of_val(&*small) * 2 < std::mem::size_of_val(&*src));
        // Ten million small `.gz` files pay for each of these bytes.
        assert!(std::mem::size_of::<SettledStream>() <= 72);
        // The first pass is dropped, and with it what it left in the
        // cache: what follows is decoded again.
        let layout = src.layout().expect("final");
        drop(src);
        assert_eq!(small.available(), plain.len() as u64);
        assert!(small.is_final());
        let mut all = vec![0; plain.len() + 10];
        assert_eq!(small.read_at(0, &mut all).unwrap(), plain.len());
        assert!(all[..plain.len()] == plain[..]);
        for at in [0, 1, 65_535, 65_536, 131_000, 199_999] {
            let mut b = vec![0; 3000];
            let n = small.read_at(at, &mut b).unwrap();
            assert!(b[..n] == plain[at as usize..(at as usize + 3000).min(plain.len())]);
        }
        let Recipe::Inflate {
            stream: Some(again),
            input,
            ..
        } = small.recipe()
        else {
            panic!("not an indexable stream");
        };
        assert!(Arc::ptr_eq(input, &small_input(&small)));
        assert_eq!(
            (
                again.label,
                again.span,
                again.len,
                &again.segments,
                &again.chunk_crcs
            ),
            (
                layout.label,
                layout.span,
                layout.len,
                &layout.segments,
                &layout.chunk_crcs
            )
        );
        assert_eq!(small.origin(0).map(|o| (o.1, o.2)), Some((10, true)));

        // A changed CRC is caught when the chunk is decoded again.
        let forged = {
            let first = first_pass(&gz, super::super::SPAN);
            first.chunk_crcs.lock()[2] ^= 1;
            first.settled().expect("settles")
        };
        let err = forged.read_at(2 * CHUNK, &mut all).unwrap_err();
        assert!(err.to_string().contains("does not match"), "{err}");

        // Checkpoints every 1 KiB: more than one, nothing to settle.
        assert!(first_pass(&gz, 1024).settled().is_none());
    }

    fn small_input(d: &Data) -> Data {
        match d.recipe() {
            Recipe::Inflate { input, .. } => input.clone(),
            _ => unreachable!(),
        }
    }
}
