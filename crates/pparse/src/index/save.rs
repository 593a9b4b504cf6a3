//! Writing an index: what one pass over a file learned, so that the next
//! command starts from it instead of decoding the file again.

use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Arc;

use super::codec::{END, FORMAT, MAGIC, Out};
use super::key::FileKey;
use crate::data::inflate::{Segment, StreamLayout};
use crate::data::{Data, Range, Recipe};
use crate::extraction::{Phase, Tree};

/// How a source is made, with its inputs as indexes into the table. A
/// decoded stream keeps only its source: its layout (checkpoints, CRCs)
/// is asked for again when it is written, so that an index of a million
/// small `.gz` members never holds a million layouts at once.
enum Rec {
    File,
    Slice { of: usize, range: Range },
    Inflate { of: usize, data: Data },
    Blocks { of: usize, data: Data },
}

/// The sources under a tree, inputs before what is made of them, each once.
struct Sources {
    recs: Vec<Rec>,
    seen: HashMap<usize, usize>,
    root: usize,
}

fn addr(d: &Data) -> usize {
    Arc::as_ptr(d) as *const u8 as usize
}

impl Sources {
    fn add(&mut self, d: &Data, depth: u32) -> Result<usize, String> {
        if let Some(&i) = self.seen.get(&addr(d)) {
            return Ok(i);
        }
        if depth > 512 {
            return Err("sources nested too deep".into());
        }
        let rec = match d.recipe() {
            Recipe::File if addr(d) == self.root => Rec::File,
            Recipe::File => return Err("it reads other files (shards, external data)".into()),
            Recipe::Opaque => return Err(format!("a {} cannot be indexed", d.describe())),
            Recipe::Slice { of, range } => Rec::Slice {
                of: self.add(of, depth + 1)?,
                range,
            },
            Recipe::Blocks { input, blocks, .. } => {
                if blocks.is_none() {
                    return Err("a decoded stream was not decoded to its end".into());
                }
                Rec::Blocks {
                    of: self.add(input, depth + 1)?,
                    data: d.clone(),
                }
            }
            Recipe::Inflate { input, stream, .. } => {
                if stream.is_none() {
                    return Err("a decoded stream was not decoded to its end".into());
                }
                Rec::Inflate {
                    of: self.add(input, depth + 1)?,
                    data: d.clone(),
                }
            }
        };
        self.recs.push(rec);
        let i = self.recs.len() - 1;
        self.seen.insert(addr(d), i);
        Ok(i)
    }
}

/// Writes the index of `tree` (a finished parse of the file its root maps)
/// to `place`, atomically: a reader sees the old index or the new one.
pub(super) fn save(place: &Path, key: &FileKey, settings: &str, tree: &Tree) -> Result<(), String> {
    let dir = place.parent().ok_or("no folder for the index")?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let tmp = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
    write_to(tmp.as_file(), key, settings, tree)?;
    // Checked again just before: what is there now must still be a
    // regular file (a device renamed over would be replaced).
    super::key::check_kind(place)?;
    tmp.persist(place)
        .map_err(|e| format!("cannot write {}: {e}", place.display()))?;
    Ok(())
}

/// Writes the index of `tree` to the object at `url` (`s3://`), through a
/// temporary file: an object there that is not a pparse index is left
/// alone, and a reader sees the old object or the new one (S3 replaces an
/// object whole).
pub(super) fn save_url(
    url: &str,
    key: &FileKey,
    settings: &str,
    tree: &Tree,
) -> Result<(), String> {
    match crate::data::RemoteSource::open(url) {
        Ok(old) => {
            let mut head = [0u8; 8];
            let n = crate::data::Source::read_at(&old, 0, &mut head).map_err(|e| e.to_string())?;
            if n > 0 && (n < head.len() || &head != MAGIC) {
                return Err("an object that is not a pparse index is there".into());
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.to_string()),
    }
    let tmp = tempfile::tempfile().map_err(|e| format!("cannot write a temporary file: {e}"))?;
    write_to(&tmp, key, settings, tree)?;
    crate::data::put_file(url, &tmp).map_err(|e| e.to_string())
}

/// Writes the index of `tree` into `file`, from its start.
fn write_to(
    file: &std::fs::File,
    key: &FileKey,
    settings: &str,
    tree: &Tree,
) -> Result<(), String> {
    let mut sources = Sources {
        recs: Vec::new(),
        seen: HashMap::new(),
        root: addr(&tree.root().bytes),
    };
    let mut ext_src = Vec::with_capacity(tree.len());
    for e in &tree.exts {
        if e.parent().is_some() && e.file().is_some() {
            return Err("it reads other files (a folder, shards)".into());
        }
        if matches!(e.phase, Phase::Waiting | Phase::Parsing) {
            return Err("its parse did not finish".into());
        }
        ext_src.push(sources.add(&e.bytes, 0)?);
    }
    let file = file.try_clone().map_err(|e| e.to_string())?;
    let mut out = Out::new(BufWriter::with_capacity(1 << 20, file));
    write_all(&mut out, key, settings, tree, &sources, &ext_src)
        .map_err(|e| format!("cannot write the index: {e}"))?;
    let mut w = out.into_inner();
    w.flush().map_err(|e| e.to_string())?;
    Ok(())
}

fn write_all<W: Write>(
    out: &mut Out<W>,
    key: &FileKey,
    settings: &str,
    tree: &Tree,
    sources: &Sources,
    ext_src: &[usize],
) -> io::Result<()> {
    out.raw(MAGIC)?;
    out.u32(FORMAT)?;
    out.str(&super::key::build_id())?;
    out.str(settings)?;
    out.u64(key.size)?;
    out.u64(key.mtime_secs as u64)?;
    out.u32(key.mtime_nanos)?;
    out.u64(key.change)?;
    out.raw(&key.sample)?;
    // Windows first: the body records where each one went, in the order
    // the streams' points come (see `write_body`).
    let mut slots = Vec::new();
    let mut raw = Vec::new();
    let mut packed = Vec::new();
    for rec in &sources.recs {
        let Rec::Inflate { data, .. } = rec else {
            continue;
        };
        let Recipe::Inflate {
            stream: Some(layout),
            windows,
            ..
        } = data.recipe()
        else {
            continue;
        };
        for p in layout.segments.iter().flat_map(|s| &s.points) {
            if let Some(slot) = p.window {
                windows.read(slot, &mut raw)?;
                slots.push(put_window(out, &raw, &mut packed)?);
            }
        }
    }
    // The extractions, read in place by every process that opens the
    // file through this index (catalog.rs).
    let cat_start = out.pos();
    let mut parsers = Vec::new();
    let cat_crc = {
        let mut cat = Out::new(Counted::new(out));
        super::catalog::write(&mut cat, tree, ext_src, &mut parsers)?;
        cat.crc()
    };
    let cat_len = out.pos() - cat_start;
    let body_start = out.pos();
    let (raw_len, crc, body_len) = {
        let enc =
            flate2::write::DeflateEncoder::new(Counted::new(out), flate2::Compression::new(6));
        let mut body = Out::new(enc);
        write_body(&mut body, sources, &slots, &parsers)?;
        let (raw_len, crc) = (body.pos(), body.crc());
        let counted = body.into_inner().finish()?;
        (raw_len, crc, counted.n)
    };
    out.u64(cat_start)?;
    out.u64(cat_len)?;
    out.u32(cat_crc)?;
    out.u64(body_start)?;
    out.u64(body_len)?;
    out.u64(raw_len)?;
    out.u32(crc)?;
    out.raw(END)
}

/// Counts what goes through it to the writer below (the deflated body's
/// length).
struct Counted<'a, W: Write> {
    out: &'a mut Out<W>,
    n: u64,
}

impl<'a, W: Write> Counted<'a, W> {
    fn new(out: &'a mut Out<W>) -> Self {
        Counted { out, n: 0 }
    }
}

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.raw(buf)?;
        self.n += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn write_body<W: Write>(
    out: &mut Out<W>,
    sources: &Sources,
    slots: &[crate::data::inflate::WindowSlot],
    parsers: &[&'static str],
) -> io::Result<()> {
    let changed = || io::Error::other("a decoded stream changed while its index was written");
    let mut slots = slots.iter();
    out.var(sources.recs.len() as u64)?;
    for rec in &sources.recs {
        match rec {
            Rec::File => out.u8(0)?,
            Rec::Slice { of, range } => {
                out.u8(1)?;
                out.var(*of as u64)?;
                out.var(range.start)?;
                out.var(range.end)?;
            }
            Rec::Inflate { of, data } => {
                let Recipe::Inflate {
                    stream: Some(mut layout),
                    ..
                } = data.recipe()
                else {
                    return Err(changed());
                };
                // Each window's place in this file, from the first pass.
                for p in layout.segments.iter_mut().flat_map(|s| &mut s.points) {
                    if p.window.is_some() {
                        p.window = Some(*slots.next().ok_or_else(changed)?);
                    }
                }
                out.u8(2)?;
                out.var(*of as u64)?;
                write_stream(out, &layout)?;
            }
            Rec::Blocks { of, data } => {
                let Recipe::Blocks {
                    codec,
                    label,
                    blocks: Some((blocks, chunk_crcs)),
                    ..
                } = data.recipe()
                else {
                    return Err(changed());
                };
                out.u8(3)?;
                out.var(*of as u64)?;
                out.str(codec)?;
                out.str(label)?;
                out.var(blocks.len() as u64)?;
                for b in &blocks {
                    for v in [
                        b.input.start,
                        b.input.end,
                        b.out_start,
                        b.out_len,
                        b.aux[0],
                        b.aux[1],
                    ] {
                        out.var(v)?;
                    }
                }
                // Each chunk's CRC-32, checked as a reader decodes it again.
                out.var(chunk_crcs.len() as u64)?;
                for &c in &chunk_crcs {
                    out.u32(c)?;
                }
            }
        }
    }
    // The formats the catalog's records name, by position + 1.
    out.var(parsers.len() as u64)?;
    for p in parsers {
        out.str(p)?;
    }
    Ok(())
}

/// Appends one window, deflated, with its CRC: a damaged window is found
/// when it is read back, never used.
fn put_window<W: Write>(
    out: &mut Out<W>,
    raw: &[u8],
    packed: &mut Vec<u8>,
) -> io::Result<crate::data::inflate::WindowSlot> {
    packed.clear();
    packed.reserve(raw.len() + 64);
    let mut z = flate2::Compress::new(flate2::Compression::default(), false);
    loop {
        let before = z.total_in() as usize;
        let status = z
            .compress_vec(&raw[before..], packed, flate2::FlushCompress::Finish)
            .map_err(io::Error::other)?;
        if status == flate2::Status::StreamEnd {
            break;
        }
        packed.reserve(packed.capacity().max(1024));
    }
    let off = out.pos();
    out.u32(crc32fast::hash(raw))?;
    out.u32(raw.len() as u32)?;
    out.raw(packed)?;
    Ok(crate::data::inflate::WindowSlot {
        off,
        len: (8 + packed.len()) as u32,
    })
}

fn write_stream<W: Write>(out: &mut Out<W>, l: &StreamLayout) -> io::Result<()> {
    out.str(l.label)?;
    out.var(l.span)?;
    out.var(l.len)?;
    out.var(l.segments.len() as u64)?;
    for Segment {
        out_start,
        out_end,
        points,
    } in &l.segments
    {
        out.var(*out_start)?;
        out.var(*out_end)?;
        out.var(points.len() as u64)?;
        for p in points {
            out.var(p.out)?;
            out.var(p.input)?;
            out.u8(p.bits)?;
            match p.window {
                None => out.u8(0)?,
                Some(w) => {
                    out.u8(1)?;
                    out.var(w.off)?;
                    out.var(u64::from(w.len))?;
                }
            }
        }
    }
    // Each chunk's CRC-32, checked as a reader decodes it again.
    out.var(l.chunk_crcs.len() as u64)?;
    for &c in &l.chunk_crcs {
        out.u32(c)?;
    }
    Ok(())
}
