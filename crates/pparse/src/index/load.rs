//! Reading an index back into an extraction tree whose decoded streams
//! resume at the saved checkpoints. Nothing in it is trusted: the header
//! must name this file as it is now, the body must match its CRC, and every
//! reference and range is checked before it is used.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use super::catalog::{Bytes, Catalog, Src};
use super::codec::{END, FORMAT, In, Invalid, MAGIC, TRAILER};
use super::key::{FileKey, Place};
use crate::data::inflate::{Checkpoint, Segment, StreamLayout, WindowSlot, WindowStore};
use crate::data::{BlockSource, Data, InflateSource, Range, SliceSource};
use crate::name::Name;

/// Largest window record: a 32 KiB window that did not compress, and more.
const MAX_WINDOW_RECORD: u32 = 64 * 1024;
/// Largest window once inflated.
const MAX_WINDOW: u32 = 32 * 1024;

/// An index's bytes: a file on this machine, read with `pread` (an index
/// replaced or cut while it is read fails the read, where a mapping would
/// fault; every process reads it through the one page cache), or an
/// object read with range requests.
pub(super) enum IndexBytes {
    File(File),
    Remote(Box<crate::data::RemoteSource>),
}

impl IndexBytes {
    /// The index at `place`; `Ok(None)` when there is none.
    pub(super) fn open(place: &Place) -> Result<Option<IndexBytes>, Invalid> {
        let opened = match place {
            Place::File(p) => crate::data::open_regular(p).map(IndexBytes::File),
            Place::Url(u) => {
                crate::data::RemoteSource::open(u).map(|r| IndexBytes::Remote(Box::new(r)))
            }
        };
        match opened {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Invalid(format!("cannot be read: {e}"))),
        }
    }

    fn len(&self) -> io::Result<u64> {
        use crate::data::Source;
        match self {
            IndexBytes::File(f) => Ok(f.metadata()?.len()),
            IndexBytes::Remote(r) => Ok(r.available()),
        }
    }

    fn read_exact_at(&self, buf: &mut [u8], at: u64) -> io::Result<()> {
        match self {
            IndexBytes::File(f) => f.read_exact_at(buf, at),
            IndexBytes::Remote(r) => match crate::data::read_exact_at(&**r, at, buf)? {
                true => Ok(()),
                false => Err(io::ErrorKind::UnexpectedEof.into()),
            },
        }
    }
}

/// The checkpoint windows of an index, read on demand.
struct IndexWindows {
    file: IndexBytes,
    /// Windows lie before this offset (the body follows them).
    end: u64,
}

impl WindowStore for IndexWindows {
    fn read(&self, slot: WindowSlot, out: &mut Vec<u8>) -> io::Result<()> {
        let bad = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("index window at {:#x}: {why}", slot.off),
            )
        };
        if slot.len < 8
            || slot.len > MAX_WINDOW_RECORD
            || slot.off.saturating_add(slot.len.into()) > self.end
        {
            return Err(bad("out of bounds"));
        }
        let mut rec = vec![0u8; slot.len as usize];
        self.file.read_exact_at(&mut rec, slot.off)?;
        let crc = u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]);
        let len = u32::from_le_bytes([rec[4], rec[5], rec[6], rec[7]]);
        if len > MAX_WINDOW {
            return Err(bad("too long"));
        }
        out.clear();
        out.reserve(len as usize);
        let mut z = flate2::Decompress::new(false);
        z.decompress_vec(&rec[8..], out, flate2::FlushDecompress::Finish)
            .map_err(|e| bad(&e.to_string()))?;
        if out.len() != len as usize || crc32fast::hash(out) != crc {
            return Err(bad("does not match its checksum"));
        }
        Ok(())
    }
}

/// What an index must have been written for.
pub(super) struct Expect<'a> {
    /// This version of the file.
    pub(super) key: &'a FileKey,
    /// A parse with these settings (`Options::fingerprint`).
    pub(super) settings: &'a str,
    /// The deepest extraction such a parse makes.
    pub(super) max_depth: u32,
}

/// The catalog of extractions saved in `f`, an index of this version of
/// the file, every record checked. `Err`: one that cannot be used (another
/// file, damaged, another pparse, or records that cannot describe this
/// file), and why.
pub(super) fn load(
    f: IndexBytes,
    expect: &Expect,
    root: Data,
    name: Name,
    file: Option<&Path>,
) -> Result<Catalog, Invalid> {
    let len = f.len().map_err(|e| Invalid(e.to_string()))?;
    if len < (MAGIC.len() + TRAILER) as u64 {
        return Err(Invalid("is too short".into()));
    }
    let mut trailer = [0u8; TRAILER];
    f.read_exact_at(&mut trailer, len - TRAILER as u64)
        .map_err(|e| Invalid(e.to_string()))?;
    let mut t = In::new(&trailer);
    let (cat_start, cat_len, cat_crc) = (t.u64()?, t.u64()?, t.u32()?);
    let body_start = t.u64()?;
    let body_len = t.u64()?;
    let raw_len = t.u64()?;
    let crc = t.u32()?;
    if t.raw(8)? != END {
        return Err(Invalid("is incomplete (no end mark)".into()));
    }
    if body_start.checked_add(body_len) != Some(len - TRAILER as u64)
        || cat_start.checked_add(cat_len) != Some(body_start)
    {
        return Err(Invalid("has a bad trailer".into()));
    }
    let mut head = vec![0u8; cat_start.min(4096) as usize];
    f.read_exact_at(&mut head, 0)
        .map_err(|e| Invalid(e.to_string()))?;
    check_header(&mut In::new(&head), expect.key, expect.settings)?;
    let body = read_body(&f, body_start, body_len, raw_len)?;
    if crc32fast::hash(&body) != crc {
        return Err(Invalid("is damaged (its checksum does not match)".into()));
    }
    let cat_len = usize::try_from(cat_len).map_err(|_| Invalid("is too large".into()))?;
    let (bytes, at) = match &f {
        // Mapped: every process reading this index shares its pages. An
        // index is only ever replaced whole (a rename), never rewritten in
        // place, so the mapped bytes stay what was checked.
        IndexBytes::File(file) => {
            // SAFETY: read-only mapping of a file pparse never writes in
            // place (see above); its CRC is checked before any use.
            let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| Invalid(e.to_string()))?;
            let _ = map.advise(memmap2::Advice::Random);
            (Bytes::Map(map), cat_start as usize)
        }
        IndexBytes::Remote(_) => {
            let mut v = vec![0u8; cat_len];
            f.read_exact_at(&mut v, cat_start)
                .map_err(|e| Invalid(e.to_string()))?;
            (Bytes::Owned(v), 0)
        }
    };
    let section = bytes_of(&bytes, at, cat_len)?;
    if crc32fast::hash(section) != cat_crc {
        return Err(Invalid(
            "is damaged (its catalog's checksum does not match)".into(),
        ));
    }
    let store = Arc::new(IndexWindows {
        file: f,
        end: cat_start,
    });
    let mut r = In::new(&body);
    let sources = read_sources(&mut r, root, store)?;
    let parsers = read_parsers(&mut r)?;
    if r.left() != 0 {
        return Err(Invalid(format!("has {} bytes after its records", r.left())));
    }
    let cat = Catalog::new(
        bytes,
        at,
        cat_start,
        cat_len,
        sources,
        parsers,
        name,
        file,
        expect.max_depth,
    )?;
    cat.check_all()?;
    Ok(cat)
}

fn bytes_of(b: &Bytes, at: usize, len: usize) -> Result<&[u8], Invalid> {
    let all: &[u8] = match b {
        Bytes::Map(m) => m,
        Bytes::Owned(v) => v,
    };
    at.checked_add(len)
        .and_then(|end| all.get(at..end))
        .ok_or_else(|| Invalid("has a catalog past its end".into()))
}

/// The formats the catalog's records name.
fn read_parsers(r: &mut In) -> Result<Vec<&'static &'static str>, Invalid> {
    let n = r.count()?;
    let mut out = Vec::with_capacity(n.min(256));
    for _ in 0..n {
        let p = r.str()?;
        out.push(
            &crate::parsers::by_name(p)
                .ok_or_else(|| Invalid(format!("names an unknown format {p:?}")))?
                .name,
        );
    }
    Ok(out)
}

/// The body, inflated. Its raw length comes from the trailer, which may be
/// damaged: the buffer grows with what inflates, up to what deflate can
/// expand to, and must end at exactly that length.
fn read_body(f: &IndexBytes, start: u64, len: u64, raw_len: u64) -> Result<Vec<u8>, Invalid> {
    let len = usize::try_from(len).map_err(|_| Invalid("is too large".into()))?;
    if raw_len > (len as u64).saturating_mul(1032) {
        return Err(Invalid("has a bad trailer".into()));
    }
    let mut packed = vec![0u8; len];
    f.read_exact_at(&mut packed, start)
        .map_err(|e| Invalid(e.to_string()))?;
    let mut body = Vec::with_capacity((len * 4).min(raw_len as usize));
    let mut z = flate2::Decompress::new(false);
    loop {
        let before = (z.total_in(), z.total_out());
        let at = z.total_in() as usize;
        let status = z
            .decompress_vec(&packed[at..], &mut body, flate2::FlushDecompress::Finish)
            .map_err(|_| Invalid("is damaged (its body does not inflate)".into()))?;
        if body.len() as u64 > raw_len {
            return Err(Invalid("is damaged (its body is too long)".into()));
        }
        match status {
            flate2::Status::StreamEnd => break,
            _ if (z.total_in(), z.total_out()) == before && body.len() < body.capacity() => {
                return Err(Invalid("is damaged (its body ends early)".into()));
            }
            _ => body.reserve((body.capacity()).max(1 << 16).min(raw_len as usize + 1)),
        }
    }
    if body.len() as u64 != raw_len || z.total_in() as usize != len {
        return Err(Invalid("is damaged (its body has the wrong length)".into()));
    }
    Ok(body)
}

fn check_header(h: &mut In, key: &FileKey, settings: &str) -> Result<(), Invalid> {
    if h.raw(8)? != MAGIC {
        return Err(Invalid("is not a pparse index".into()));
    }
    if h.u32()? != FORMAT {
        return Err(Invalid("has another index format".into()));
    }
    let build = h.str()?;
    if build != super::key::build_id() {
        let version = build.split(' ').next().unwrap_or_default();
        return Err(Invalid(format!(
            "was written by another build of pparse ({version})"
        )));
    }
    if h.str()? != settings {
        return Err(Invalid("was written with other settings".into()));
    }
    let found = FileKey {
        size: h.u64()?,
        mtime_secs: h.u64()? as i64,
        mtime_nanos: h.u32()?,
        change: h.u64()?,
        sample: h
            .raw(32)?
            .try_into()
            .map_err(|_| Invalid("bad key".into()))?,
    };
    if &found != key {
        return Err(Invalid(
            "is stale: the file has changed since it was written".into(),
        ));
    }
    Ok(())
}

fn read_sources(r: &mut In, root: Data, store: Arc<IndexWindows>) -> Result<Vec<Src>, Invalid> {
    let n = r.count()?;
    let mut out: Vec<Src> = Vec::with_capacity(n);
    for i in 0..n {
        let at = r.pos();
        let bad = |why: &str| Invalid(format!("source {i} at byte {at}: {why}"));
        let input = |r: &mut In, out: &[Src]| -> Result<(Data, u64), Invalid> {
            let of = r.var()?;
            out.get(of as usize)
                .map(|s| (s.data.clone(), s.len))
                .ok_or_else(|| bad("refers to a later source"))
        };
        let (data, len): (Data, u64) = match r.u8()? {
            0 => (root.clone(), root.available()),
            1 => {
                let (of, of_len) = input(r, &out)?;
                let range = range(r)?;
                // A cut member's slice may end past the end of its input:
                // what it serves stops there.
                if range.start > of_len {
                    return Err(bad(&format!(
                        "a slice {range} past the end of its input ({of_len} bytes)"
                    )));
                }
                let len = of_len.min(range.end) - range.start;
                (Arc::new(SliceSource::new(of, range)), len)
            }
            2 => {
                let (of, of_len) = input(r, &out)?;
                let layout = read_stream(r)?;
                check_stream(&layout, of_len).map_err(|why| bad(&why))?;
                let len = layout.len;
                let d = InflateSource::restore(of, layout, store.clone())
                    .map_err(|e| bad(&e.to_string()))?;
                (d, len)
            }
            3 => {
                let (of, of_len) = input(r, &out)?;
                let name = r.str()?;
                let codec = crate::parsers::block_codec(name)
                    .ok_or_else(|| bad(&format!("unknown block codec {name:?}")))?;
                let label = r.str()?.to_string();
                let n = r.count()?;
                let mut blocks = Vec::with_capacity(n.min(1 << 16));
                // Blocks follow each other; a bzip2 block starts in the
                // byte the one before it ends in.
                let mut in_start = 0u64;
                for _ in 0..n {
                    let input = range(r)?;
                    if input.start < in_start || input.end > of_len {
                        return Err(bad(&format!(
                            "block input {input} out of order or past the end of its input ({of_len} bytes)"
                        )));
                    }
                    in_start = input.start;
                    let out_start = r.var()?;
                    let out_len = r.var()?;
                    let aux = [r.var()?, r.var()?];
                    blocks.push(crate::data::Block {
                        input,
                        out_start,
                        out_len,
                        aux,
                    });
                }
                let nc = r.count()?;
                let mut chunk_crcs = Vec::with_capacity(nc.min(1 << 16));
                for _ in 0..nc {
                    chunk_crcs.push(r.u32()?);
                }
                let d = BlockSource::restore(of, codec, &label, blocks, chunk_crcs)
                    .map_err(|e| bad(&e.to_string()))?;
                let len = crate::data::Source::available(&*d);
                (d, len)
            }
            t => return Err(bad(&format!("unknown source kind {t}"))),
        };
        out.push(Src { data, len });
    }
    Ok(out)
}

/// Most bytes raw deflate data of `input` bytes decodes to: 258 bytes of
/// each 2 bits, and the last few bytes of a stream.
fn deflate_most(input: u64) -> u64 {
    input.saturating_mul(1032).saturating_add(1024)
}

/// The checks of a decoded stream's layout against the input it claims to
/// be decoded from (its order is checked by `InflateSource::restore`):
/// every checkpoint is inside the input, the checkpoints of a segment do
/// not go back, and the length is one the input can decode to.
fn check_stream(l: &StreamLayout, input_len: u64) -> Result<(), String> {
    let mut last_in = 0u64;
    for (k, s) in l.segments.iter().enumerate() {
        for p in &s.points {
            if p.input > input_len {
                return Err(format!(
                    "segment {k}: a checkpoint at input byte {} past the end of the input ({input_len} bytes)",
                    p.input
                ));
            }
            if p.input < last_in {
                return Err(format!(
                    "segment {k}: a checkpoint at input byte {} before the one before it ({last_in})",
                    p.input
                ));
            }
            last_in = p.input;
        }
        let from = s.points.first().map_or(0, |p| p.input);
        if s.out_end.saturating_sub(s.out_start) > deflate_most(input_len - from.min(input_len)) {
            return Err(format!(
                "segment {k}: {} decoded bytes are more than its input can make",
                s.out_end.saturating_sub(s.out_start)
            ));
        }
    }
    let chunks = l.len.div_ceil(crate::data::inflate::CHUNK);
    if l.chunk_crcs.len() as u64 != chunks {
        return Err(format!(
            "{} chunk checksums for {chunks} chunks of decoded bytes",
            l.chunk_crcs.len()
        ));
    }
    if l.len > deflate_most(input_len) {
        return Err(format!(
            "{} decoded bytes are more than {input_len} input bytes can make",
            l.len
        ));
    }
    Ok(())
}

fn range(r: &mut In) -> Result<Range, Invalid> {
    let start = r.var()?;
    let end = r.var()?;
    if end < start {
        return Err(Invalid(format!("backward range before byte {}", r.pos())));
    }
    Ok(Range::new(start, end))
}

fn read_stream(r: &mut In) -> Result<StreamLayout, Invalid> {
    let label = r.str()?;
    let label = InflateSource::known_label(label)
        .ok_or_else(|| Invalid(format!("unknown stream {label:?}")))?;
    let span = r.var()?;
    let len = r.var()?;
    let nseg = r.count()?;
    let mut segments = Vec::with_capacity(nseg);
    for _ in 0..nseg {
        let out_start = r.var()?;
        let out_end = r.var()?;
        let np = r.count()?;
        let mut points = Vec::with_capacity(np);
        for _ in 0..np {
            let out = r.var()?;
            let input = r.var()?;
            let bits = r.u8()?;
            let window = match r.u8()? {
                0 => None,
                1 => {
                    let off = r.var()?;
                    let len = u32::try_from(r.var()?).map_err(|_| Invalid("bad window".into()))?;
                    Some(WindowSlot { off, len })
                }
                t => return Err(Invalid(format!("bad window tag {t}"))),
            };
            points.push(Checkpoint {
                out,
                input,
                bits,
                window,
            });
        }
        segments.push(Segment {
            out_start,
            out_end,
            points,
        });
    }
    let nc = r.count()?;
    let mut chunk_crcs = Vec::with_capacity(nc);
    for _ in 0..nc {
        chunk_crcs.push(r.u32()?);
    }
    Ok(StreamLayout {
        label,
        span,
        len,
        segments,
        chunk_crcs,
    })
}

/// A fuzz input split as [`fuzz_seed`] joins it: the body (inflated),
/// then the catalog.
fn fuzz_parts(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let n = u32::from_le_bytes(data.get(..4)?.try_into().ok()?) as usize;
    let rest = &data[4..];
    (n <= rest.len()).then(|| rest.split_at(n))
}

/// The fuzz input an index file's bytes make: its body inflated (4 bytes
/// of length first), then its catalog; `None` if it is not an index.
pub(super) fn fuzz_seed(index: &[u8]) -> Option<Vec<u8>> {
    let t = index.len().checked_sub(TRAILER)?;
    let mut r = In::new(&index[t..]);
    let (cat_start, cat_len, _) = (r.u64().ok()?, r.u64().ok()?, r.u32().ok()?);
    let (body_start, body_len) = (r.u64().ok()? as usize, r.u64().ok()? as usize);
    let packed = index.get(body_start..body_start.checked_add(body_len)?)?;
    let mut body = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::DeflateDecoder::new(packed), &mut body).ok()?;
    let cat = index.get(cat_start as usize..(cat_start.checked_add(cat_len)?) as usize)?;
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    out.extend_from_slice(cat);
    Some(out)
}

/// Reads a fuzz input (see [`fuzz_seed`]) over `root` with every check
/// [`load`] makes: the catalog, ready to serve.
pub(super) fn fuzz_catalog(data: &[u8], root: Data, name: Name) -> Option<Catalog> {
    let (body, cat) = fuzz_parts(data)?;
    let file = IndexBytes::File(tempfile::tempfile().ok()?);
    let store = Arc::new(IndexWindows { file, end: 0 });
    let mut r = In::new(body);
    let sources = read_sources(&mut r, root, store).ok()?;
    let parsers = read_parsers(&mut r).ok()?;
    if r.left() != 0 {
        return None;
    }
    let bytes = Bytes::Owned(cat.to_vec());
    let cat = Catalog::new(bytes, 0, 0, cat.len(), sources, parsers, name, None, 33).ok()?;
    cat.check_all().ok()?;
    Some(cat)
}

/// Reads a fuzz input as [`load`] does, then the first bytes of the first
/// extractions: whatever it holds, it must end in an error or a tree,
/// never a panic.
pub(super) fn fuzz_body(data: &[u8]) {
    let root: Data = Arc::new(crate::data::MemSource::new(data.to_vec()));
    let Some(cat) = fuzz_catalog(data, root, Name::from("fuzz")) else {
        return;
    };
    let _ = cat.resolve("a/b");
    let Ok(tree) = cat.tree() else {
        return;
    };
    let mut buf = vec![0u8; 4096];
    for e in tree.exts.iter().take(64) {
        let _ = e.data().read_at(0, &mut buf);
        let _ = tree.path_of(e.id());
        let _ = cat.chain(e.id());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(input: u64, len: u64) -> StreamLayout {
        let point = |out, input, window| Checkpoint {
            out,
            input,
            bits: 0,
            window,
        };
        StreamLayout {
            label: "gzip stream",
            span: 1 << 22,
            len,
            segments: vec![Segment {
                out_start: 0,
                out_end: len,
                points: vec![
                    point(0, 10, None),
                    point(len / 2, input, Some(WindowSlot { off: 0, len: 8 })),
                ],
            }],
            chunk_crcs: vec![0; len.div_ceil(crate::data::inflate::CHUNK) as usize],
        }
    }

    /// A stream's checkpoints and length are checked against the input it
    /// claims to be decoded from.
    #[test]
    fn a_stream_layout_is_checked_against_its_input() {
        assert!(check_stream(&layout(500, 100_000), 1000).is_ok());
        let past = check_stream(&layout(5000, 100_000), 1000).unwrap_err();
        assert!(past.contains("past the end of the input"), "{past}");
        let back = check_stream(&layout(5, 100_000), 1000).unwrap_err();
        assert!(back.contains("before the one before it"), "{back}");
        let long = check_stream(&layout(500, 10_000_000), 1000).unwrap_err();
        assert!(long.contains("more than"), "{long}");
        let mut l = layout(500, 100_000);
        l.chunk_crcs.pop();
        assert!(
            check_stream(&l, 1000)
                .unwrap_err()
                .contains("chunk checksums")
        );
    }
}
