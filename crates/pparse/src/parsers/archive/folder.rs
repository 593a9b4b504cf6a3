//! Folders on disk: a model is often a folder (shards, an index, a config),
//! so `pparse FOLDER` opens the folder as the root and its entries as child
//! extractions, sorted by name.
//!
//! Files are memory-mapped like an opened file and sniffed in turn;
//! subfolders become folder extractions themselves. Bounds: at most
//! [`MAX_ENTRIES`] entries per folder and [`MAX_DEPTH`] levels. Symlinks are
//! followed only to regular files inside the folder itself, never to folders
//! (no cycles) and never out of the folder. Files that a
//! `*.index.json` in the same folder names as shards, or that are later
//! shards of a split GGUF model whose first shard is there, are listed
//! under that index or first shard instead of twice.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::data::{Data, MemSource, MmapSource, Range};
use crate::extraction::EntryKind;
use crate::name::{Name, escape_bytes};
use crate::node::Node;
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{ChildSpec, Format, Parser, Sniff, Step, StepCx};
use crate::parsers::ml::gguf;
use crate::parsers::ml::safetensors_index::read_index;
use crate::status::Damage;

/// A folder opened as a whole (shards of a model).
pub(crate) static FORMAT: Format = Format {
    name: "folder",
    extent: None,
    sniff,
    parse: |_, _| Box::new(FolderParser),
    load: |_, _, _| Vec::new(),
    offers: Offers {
        tensors: Some(TensorOffer::OfChildren),
        ..Offers::NONE
    },
};

/// Entries listed per folder.
pub(crate) const MAX_ENTRIES: usize = 10_000;
/// Names read before sorting (the rest are counted, unsorted).
const MAX_SCAN: usize = 100_000;
/// Folder levels below the opened one.
pub(crate) const MAX_DEPTH: u32 = 16;
/// Largest index file read to find its shards.
const MAX_INDEX: u64 = 64 << 20;

fn sniff(s: &Sniff) -> bool {
    *s.kind == EntryKind::Dir && s.file.is_some()
}

fn empty() -> Data {
    Arc::new(MemSource::new(Vec::new()))
}

/// Shard names that the `*.index.json` files of a folder claim, and the
/// later shards of split GGUF models whose first shard is there (it opens
/// them).
fn claimed(dir: &Path, names: &[(OsString, fs::FileType)], cx: &StepCx) -> HashSet<OsString> {
    let mut out = HashSet::new();
    for (name, ft) in names {
        let lossy = name.to_string_lossy();
        if ft.is_file()
            && let Some(shards) = gguf::shard_names(&lossy)
            && cx
                .open_beside(&dir.join(name))
                .is_ok_and(|s| gguf::opens_shards(&s))
        {
            out.extend(shards.into_iter().skip(1).map(OsString::from));
            continue;
        }
        if !ft.is_file() || !lossy.ends_with(".index.json") {
            continue;
        }
        let path = dir.join(name);
        if fs::metadata(&path).map_or(true, |m| m.len() > MAX_INDEX) {
            continue;
        }
        let Ok(src) = cx.open_beside(&path) else {
            continue;
        };
        for e in read_index(&src).map {
            if !e.shard.contains('/') && !e.shard.contains('\\') {
                out.insert(OsString::from(e.shard));
            }
        }
    }
    out
}

struct FolderParser;

impl Parser for FolderParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        let Some(dir) = cx.file.map(Path::to_path_buf) else {
            return Step::Done;
        };
        if cx.depth > MAX_DEPTH {
            cx.push_node(
                Node::new("limit", "not listed", Range::default()).text(format!(
                    "folders nested deeper than {MAX_DEPTH} levels are not listed"
                )),
            );
            return Step::Done;
        }
        let rd = match fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) => {
                cx.damage(Damage::corrupt(
                    Range::default(),
                    format!("cannot list the folder: {e}"),
                ));
                return Step::Done;
            }
        };
        let mut names: Vec<(OsString, fs::FileType)> = Vec::new();
        let mut unread = 0u64;
        for entry in rd {
            match entry {
                Ok(e) if names.len() < MAX_SCAN => match e.file_type() {
                    Ok(ft) => names.push((e.file_name(), ft)),
                    Err(_) => unread += 1,
                },
                _ => unread += 1,
            }
        }
        names.sort_by(|a, b| a.0.as_encoded_bytes().cmp(b.0.as_encoded_bytes()));
        let claimed = claimed(&dir, &names, cx);
        let canon_dir = fs::canonicalize(&dir).ok();
        let over = names.len().saturating_sub(MAX_ENTRIES) as u64 + unread;
        names.truncate(MAX_ENTRIES);
        for (name, ft) in names {
            let path = dir.join(&name);
            let raw = name.as_encoded_bytes().to_vec();
            let shown = escape_bytes(&raw);
            let spec = if ft.is_symlink() {
                symlink(&path, canon_dir.as_deref(), raw, &shown, cx)
            } else if ft.is_dir() {
                cx.push_node(Node::new("dir", shown, Range::default()).text("folder"));
                let mut s = ChildSpec::new(Name::new(raw), EntryKind::Dir, empty());
                s.file = Some(path);
                Some(s)
            } else if ft.is_file() {
                if claimed.contains(&name) {
                    cx.push_node(
                        Node::new("file", shown, Range::default())
                            .text("a shard: listed under its index"),
                    );
                    None
                } else {
                    Some(file(path, raw, shown, cx))
                }
            } else {
                cx.push_node(
                    Node::new("other", shown, Range::default()).text("not a regular file"),
                );
                Some(ChildSpec::new(
                    Name::new(raw),
                    EntryKind::Other("not a regular file".into()),
                    empty(),
                ))
            };
            if let Some(s) = spec {
                cx.add_child(s);
            }
        }
        if over > 0 {
            cx.push_node(
                Node::new("limit", "not listed", Range::default()).text(format!(
                    "{over} more entries (the first {MAX_ENTRIES} by name are listed)"
                )),
            );
        }
        Step::Done
    }
}

/// A regular file: mapped, to be sniffed in turn.
fn file(path: PathBuf, raw: Vec<u8>, shown: String, cx: &mut StepCx) -> ChildSpec {
    match cx.open_beside(&path) {
        Ok(src) => {
            let size = src_len(&src);
            cx.push_node(Node::new("file", shown, Range::default()).uint(size));
            let mut s = ChildSpec::new(Name::new(raw), EntryKind::File, Arc::new(src));
            s.file = Some(path);
            s
        }
        Err(e) => {
            cx.push_node(
                Node::new("file", shown, Range::default()).text(format!("cannot read: {e}")),
            );
            ChildSpec::new(
                Name::new(raw),
                EntryKind::Other(format!("cannot read: {e}").into()),
                empty(),
            )
        }
    }
}

fn src_len(src: &MmapSource) -> u64 {
    use crate::data::Source;
    src.available()
}

/// A symlink: followed only to a regular file inside the folder.
fn symlink(
    path: &Path,
    canon_dir: Option<&Path>,
    raw: Vec<u8>,
    shown: &str,
    cx: &mut StepCx,
) -> Option<ChildSpec> {
    let target = fs::read_link(path)
        .map(|t| escape_bytes(t.as_os_str().as_encoded_bytes()))
        .unwrap_or_default();
    let inside = match (fs::canonicalize(path), canon_dir) {
        (Ok(real), Some(dir)) => real.starts_with(dir) && real.is_file(),
        _ => false,
    };
    if inside {
        return Some(file(path.to_path_buf(), raw, shown.to_string(), cx));
    }
    cx.push_node(
        Node::new("symlink", shown.to_string(), Range::default())
            .text(format!("-> {target} (not followed)")),
    );
    Some(ChildSpec::new(
        Name::new(raw),
        EntryKind::Symlink(target.into()),
        empty(),
    ))
}
