//! Reading an index back into an extraction tree whose decoded streams
//! resume at the saved checkpoints. Nothing in it is trusted: the header
//! must name this file as it is now, the body must match its CRC, and every
//! reference and range is checked before it is used.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use thin_vec::ThinVec;

use super::codec::{Bad, END, FORMAT, In, MAGIC, TRAILER};
use super::key::FileKey;
use super::save::STATUSES;
use crate::data::inflate::{Checkpoint, Segment, StreamLayout, WindowSlot, WindowStore};
use crate::data::{BlockSource, Data, InflateSource, Range, SliceSource};
use crate::extraction::{EntryKind, Extra, Extraction, Form, Meta, Phase, Progress, Tree};
use crate::name::Name;
use crate::status::Damage;

/// Largest window record: a 32 KiB window that did not compress, and more.
const MAX_WINDOW_RECORD: u32 = 64 * 1024;
/// Largest window once inflated.
const MAX_WINDOW: u32 = 32 * 1024;

/// The checkpoint windows of an index file, read with `pread` on demand.
struct IndexWindows {
    file: File,
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

/// The tree saved at `place`, if there is an index there for this version
/// of the file. `Ok(None)`: there is none. `Err`: there is one that cannot
/// be used (another file, damaged, another pparse), and why.
pub(super) fn load(
    place: &Path,
    key: &FileKey,
    settings: &str,
    root: Data,
    name: Name,
    file: &Path,
) -> Result<Option<Tree>, Bad> {
    let f = match crate::data::open_regular(place) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Bad(format!("cannot be read: {e}"))),
    };
    let len = f.metadata().map_err(|e| Bad(e.to_string()))?.len();
    if len < (MAGIC.len() + TRAILER) as u64 {
        return Err(Bad("is too short".into()));
    }
    let mut trailer = [0u8; TRAILER];
    f.read_exact_at(&mut trailer, len - TRAILER as u64)
        .map_err(|e| Bad(e.to_string()))?;
    let mut t = In::new(&trailer);
    let body_start = t.u64()?;
    let body_len = t.u64()?;
    let raw_len = t.u64()?;
    let crc = t.u32()?;
    if t.raw(8)? != END {
        return Err(Bad("is incomplete (no end mark)".into()));
    }
    if body_start.checked_add(body_len) != Some(len - TRAILER as u64) {
        return Err(Bad("has a bad trailer".into()));
    }
    let mut head = vec![0u8; body_start.min(4096) as usize];
    f.read_exact_at(&mut head, 0)
        .map_err(|e| Bad(e.to_string()))?;
    check_header(&mut In::new(&head), key, settings)?;
    let body = read_body(&f, body_start, body_len, raw_len)?;
    if crc32fast::hash(&body) != crc {
        return Err(Bad("is damaged (its checksum does not match)".into()));
    }
    let store = Arc::new(IndexWindows {
        file: f,
        end: body_start,
    });
    let mut r = In::new(&body);
    let sources = read_sources(&mut r, root, store)?;
    let tree = read_tree(&mut r, &sources, name, file)?;
    if r.left() != 0 {
        return Err(Bad(format!("has {} bytes after its records", r.left())));
    }
    Ok(Some(tree))
}

/// The body, inflated. Its raw length comes from the trailer, which may be
/// damaged: the buffer grows with what inflates, up to what deflate can
/// expand to, and must end at exactly that length.
fn read_body(f: &File, start: u64, len: u64, raw_len: u64) -> Result<Vec<u8>, Bad> {
    let len = usize::try_from(len).map_err(|_| Bad("is too large".into()))?;
    if raw_len > (len as u64).saturating_mul(1032) {
        return Err(Bad("has a bad trailer".into()));
    }
    let mut packed = vec![0u8; len];
    f.read_exact_at(&mut packed, start)
        .map_err(|e| Bad(e.to_string()))?;
    let mut body = Vec::with_capacity((len * 4).min(raw_len as usize));
    let mut z = flate2::Decompress::new(false);
    loop {
        let before = (z.total_in(), z.total_out());
        let at = z.total_in() as usize;
        let status = z
            .decompress_vec(&packed[at..], &mut body, flate2::FlushDecompress::Finish)
            .map_err(|_| Bad("is damaged (its body does not inflate)".into()))?;
        if body.len() as u64 > raw_len {
            return Err(Bad("is damaged (its body is too long)".into()));
        }
        match status {
            flate2::Status::StreamEnd => break,
            _ if (z.total_in(), z.total_out()) == before && body.len() < body.capacity() => {
                return Err(Bad("is damaged (its body ends early)".into()));
            }
            _ => body.reserve((body.capacity()).max(1 << 16).min(raw_len as usize + 1)),
        }
    }
    if body.len() as u64 != raw_len || z.total_in() as usize != len {
        return Err(Bad("is damaged (its body has the wrong length)".into()));
    }
    Ok(body)
}

fn check_header(h: &mut In, key: &FileKey, settings: &str) -> Result<(), Bad> {
    if h.raw(8)? != MAGIC {
        return Err(Bad("is not a pparse index".into()));
    }
    if h.u32()? != FORMAT {
        return Err(Bad("has another index format".into()));
    }
    let build = h.str()?;
    if build != super::key::build_id() {
        let version = build.split(' ').next().unwrap_or_default();
        return Err(Bad(format!(
            "was written by another build of pparse ({version})"
        )));
    }
    if h.str()? != settings {
        return Err(Bad("was written with other settings".into()));
    }
    let found = FileKey {
        size: h.u64()?,
        mtime_secs: h.u64()? as i64,
        mtime_nanos: h.u32()?,
        change: h.u64()?,
        sample: h.raw(32)?.try_into().map_err(|_| Bad("bad key".into()))?,
    };
    if &found != key {
        return Err(Bad(
            "is stale: the file has changed since it was written".into()
        ));
    }
    Ok(())
}

fn read_sources(r: &mut In, root: Data, store: Arc<IndexWindows>) -> Result<Vec<Data>, Bad> {
    let n = r.count()?;
    let mut out: Vec<Data> = Vec::with_capacity(n);
    for i in 0..n {
        let at = r.pos();
        let input = |r: &mut In, out: &[Data]| -> Result<Data, Bad> {
            let of = r.var()?;
            out.get(of as usize)
                .cloned()
                .ok_or_else(|| Bad(format!("source {i} refers to a later one")))
        };
        let d: Data = match r.u8()? {
            0 => root.clone(),
            1 => {
                let of = input(r, &out)?;
                let range = range(r)?;
                Arc::new(SliceSource::new(of, range))
            }
            2 => {
                let of = input(r, &out)?;
                let layout = read_stream(r)?;
                InflateSource::restore(of, layout, store.clone())
                    .map_err(|e| Bad(format!("source {i} at byte {at}: {e}")))?
            }
            3 => {
                let of = input(r, &out)?;
                let name = r.str()?;
                let codec = crate::parsers::block_codec(name)
                    .ok_or_else(|| Bad(format!("unknown block codec {name:?}")))?;
                let label = r.str()?.to_string();
                let n = r.count()?;
                let mut blocks = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    let input = range(r)?;
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
                BlockSource::restore(of, codec, &label, blocks)
                    .map_err(|e| Bad(format!("source {i} at byte {at}: {e}")))?
            }
            t => return Err(Bad(format!("unknown source kind {t} at byte {at}"))),
        };
        out.push(d);
    }
    Ok(out)
}

fn range(r: &mut In) -> Result<Range, Bad> {
    let start = r.var()?;
    let end = r.var()?;
    if end < start {
        return Err(Bad(format!("backward range before byte {}", r.pos())));
    }
    Ok(Range::new(start, end))
}

fn read_stream(r: &mut In) -> Result<StreamLayout, Bad> {
    let label = r.str()?;
    let label = InflateSource::known_label(label)
        .ok_or_else(|| Bad(format!("unknown stream {label:?}")))?;
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
                    let len = u32::try_from(r.var()?).map_err(|_| Bad("bad window".into()))?;
                    Some(WindowSlot { off, len })
                }
                t => return Err(Bad(format!("bad window tag {t}"))),
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
    Ok(StreamLayout {
        label,
        span,
        len,
        segments,
    })
}

fn read_tree(r: &mut In, sources: &[Data], name: Name, file: &Path) -> Result<Tree, Bad> {
    let n = r.count()?;
    if n == 0 {
        return Err(Bad("has no root".into()));
    }
    let mut tree = Tree::default();
    for id in 0..n {
        let at = r.pos();
        let bad = |why: &str| Bad(format!("extraction {id} at byte {at}: {why}"));
        let parent = match r.var()? {
            0 => None,
            p => Some((p - 1) as usize),
        };
        if (id == 0) != parent.is_none() || parent.is_some_and(|p| p >= id) {
            return Err(bad("bad parent"));
        }
        let raw_name = r.bytes()?;
        let kind = match r.u8()? {
            0 => EntryKind::Root,
            1 => EntryKind::Stream,
            2 => EntryKind::File,
            3 => EntryKind::Dir,
            4 => EntryKind::Symlink(r.str()?.into()),
            5 => EntryKind::HardLink(r.str()?.into()),
            6 => EntryKind::Device,
            7 => EntryKind::Fifo,
            8 => EntryKind::Other(r.str()?.into()),
            _ => return Err(bad("unknown kind")),
        };
        let bytes = sources
            .get(r.var()? as usize)
            .cloned()
            .ok_or_else(|| bad("unknown source"))?;
        let form = match r.u8()? {
            0 => Form::Own,
            1 => Form::Window,
            2 => Form::Deflate,
            _ => return Err(bad("bad flag")),
        };
        let origin = match r.u8()? {
            0 => None,
            1 => Some(range(r)?),
            _ => return Err(bad("bad origin")),
        };
        if form != Form::Own && origin.is_none() {
            return Err(bad("a window without a range"));
        }
        let declared_size = r.opt()?;
        // Deflate makes at most 1,032 bytes of each byte (258 of 2 bits).
        let most = |r: Range| r.len().saturating_mul(1032).saturating_add(1024);
        if form == Form::Deflate && declared_size.zip(origin).is_none_or(|(d, r)| d > most(r)) {
            return Err(bad("a decoded entry without a size its data can make"));
        }
        let parser = match r.u8()? {
            0 => None,
            1 => {
                let p = r.str()?;
                Some(
                    crate::parsers::by_name(p)
                        .ok_or_else(|| bad("unknown format"))?
                        .name,
                )
            }
            _ => return Err(bad("bad format tag")),
        };
        let nd = r.count()?;
        let mut damage = ThinVec::with_capacity(nd);
        for _ in 0..nd {
            let status = *STATUSES
                .get(r.u8()? as usize)
                .ok_or_else(|| bad("bad status"))?;
            let range = range(r)?;
            let reason = r.str()?.to_string();
            damage.push(Damage {
                status,
                range,
                reason,
                // Streams with unknown bytes are never indexed.
                unknown: false,
            });
        }
        let no = r.count()?;
        let mut outer_damage = Vec::with_capacity(no);
        for _ in 0..no {
            let i = r.var()?;
            if i >= nd as u64 {
                return Err(bad("bad damage reference"));
            }
            outer_damage.push(i as u32);
        }
        let nn = r.count()?;
        let mut notes = Vec::with_capacity(nn);
        for _ in 0..nn {
            notes.push(Box::<str>::from(r.str()?));
        }
        let progress = Progress {
            done: r.var()?,
            total: r.opt()?,
        };
        let mtime = r.opt()?.map(|z| ((z >> 1) as i64) ^ -((z & 1) as i64));
        let mode = r.opt()?.map(|m| m as u32);
        let meta = Meta::new(mtime, mode);
        let phase = match r.u8()? {
            2 => Phase::Done,
            3 => Phase::Leaf,
            _ => return Err(bad("saved before its parse ended")),
        };
        let root_file = (id == 0).then(|| file.to_path_buf());
        let extra = (root_file.is_some()
            || !outer_damage.is_empty()
            || !notes.is_empty()
            || progress != Progress::default())
        .then(|| {
            Box::new(Extra {
                file: root_file,
                outer_damage,
                notes,
                progress,
                like: None,
            })
        });
        let (index, depth) = match parent {
            None => (0, 0),
            Some(p) => {
                let pe = &mut tree.exts[p];
                pe.children.push(id);
                (pe.children.len() - 1, pe.depth + 1)
            }
        };
        tree.damage_count += damage.len();
        tree.exts.push(Extraction {
            id,
            parent,
            index: u32::try_from(index).unwrap_or(u32::MAX),
            children: ThinVec::new(),
            name: if id == 0 {
                name.clone()
            } else {
                Name::new(raw_name.to_vec())
            },
            kind,
            bytes,
            form,
            origin,
            declared_size,
            parser,
            damage,
            extra,
            nodes: ThinVec::new(),
            phase,
            depth,
            meta,
        });
    }
    Ok(tree)
}

/// Reads `body` (an index body, inflated) as [`load`] does, then reads the
/// first bytes of the first extractions: for the fuzz target. Whatever the
/// body holds, it must end in an error or a tree, never a panic.
pub(super) fn fuzz_body(body: &[u8]) {
    let root: Data = Arc::new(crate::data::MemSource::new(body.to_vec()));
    let Ok(file) = tempfile::tempfile() else {
        return;
    };
    let store = Arc::new(IndexWindows { file, end: 0 });
    let mut r = In::new(body);
    let Ok(sources) = read_sources(&mut r, root, store) else {
        return;
    };
    let Ok(tree) = read_tree(&mut r, &sources, Name::from("fuzz"), Path::new("fuzz")) else {
        return;
    };
    let mut buf = vec![0u8; 4096];
    for e in tree.exts.iter().take(64) {
        let _ = e.data().read_at(0, &mut buf);
        let _ = tree.path_of(e.id);
    }
}
