//! Persistent indexes: what one pass over a file learned, kept for the
//! next command.
//!
//! Decoding a 10 GB `.tar.gz` from the start for every `cat` is what makes
//! gzip archives slow to use. After one full pass, everything needed to
//! start again without decoding is small: the extraction tree (names,
//! kinds, ranges, sizes, status, notes) and the checkpoints of every
//! decoded stream with their 32 KiB windows, compressed. Saved to a file,
//! it lets the next `tree`, `cat`, `extract`, `mount` or library open start
//! at once and read any member by decoding at most one checkpoint span.
//!
//! An index lives in the user's cache folder (`key.rs`), never beside the
//! file unless asked: the file may be on a failing disk or a read-only
//! rescue mount. It is keyed by the file's size, mtime and a hash of its
//! ends, so a changed file is never read through a stale index; an index
//! that is stale, damaged, or from another pparse is ignored with a note,
//! and the parse that replaces it writes a new one. A restored tree has no
//! nodes (the structure inside each extraction): commands that show nodes
//! parse the file as before.
//!
//! The extractions are kept as fixed-size records read in place
//! ([`Catalog`], `catalog.rs`): a process that only opens members (a
//! DataLoader worker) maps the index and builds no tree, so N processes
//! reading one index share one copy of it in the page cache.
//!
//! `codec.rs` is the file layout, `save.rs` writes one, `load.rs` reads one.

mod catalog;
mod codec;
mod key;
mod load;
mod save;

use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::data::Data;
use crate::extraction::Tree;
use crate::name::Name;
use crate::parsers::IndexMode;
use crate::parsers::api::Options;
use key::{FileKey, Place, check_kind};

/// What happened to a session's index that a user should hear about (a
/// stale index ignored, one that could not be written). A front end takes
/// and shows them ([`crate::Session::take_notes`]); a library user may
/// ignore them. Shared by the session and its engine thread, which saves
/// the index.
#[derive(Clone, Debug, Default)]
pub struct Notes(Arc<Mutex<Vec<String>>>);

impl Notes {
    pub(crate) fn note(&self, text: String) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(text);
    }

    /// The notes recorded so far, removed.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

pub use catalog::Catalog;

/// Reads a fuzz input (an index's body inflated, then its catalog: see
/// [`fuzz_seed`]) as an index is read, for the fuzz target
/// (`fuzz/fuzz_targets/index.rs`).
#[doc(hidden)]
pub fn fuzz_body(data: &[u8]) {
    load::fuzz_body(data);
}

/// The fuzz input of an index file's bytes: its body inflated (after 4
/// bytes of its length), then its catalog. `None` if it is not an index.
#[doc(hidden)]
pub fn fuzz_seed(index: &[u8]) -> Option<Vec<u8>> {
    load::fuzz_seed(index)
}

/// Reads a fuzz input over `root`, the bytes of the file it claims to
/// describe, with every check [`Plan::open`] makes, for the fuzz target
/// that forges indexes (`fuzz/fuzz_targets/index_forged.rs`).
#[doc(hidden)]
pub fn fuzz_catalog(data: &[u8], root: Data, name: Name) -> Option<Catalog> {
    load::fuzz_catalog(data, root, name)
}

/// The identity of this version of the file at `file`: its size, mtime
/// and the hash of its ends, as 32 hex digits, the same on every machine
/// with a copy of the same bytes and mtime (what a shared index is keyed
/// by). For caches outside pparse that keep a file's members.
pub fn fingerprint_file(file: &Path) -> std::io::Result<String> {
    FileKey::of(file, true).map(|k| k.fingerprint())
}

/// The identity of this version of a remote object: its size, the
/// server's version of it (`ETag`) and the hash of its ends.
pub fn fingerprint_remote(src: &crate::data::RemoteSource) -> std::io::Result<String> {
    FileKey::of_remote(src).map(|k| k.fingerprint())
}

/// The index of one file: where it is and which version of the file it is
/// valid for.
pub struct Plan {
    place: Place,
    key: FileKey,
    settings: String,
    /// The deepest an extraction can be in a parse with these settings
    /// (the engine parses nothing below `Options::max_depth`): an index
    /// holding a deeper one was not written by such a parse.
    max_depth: u32,
    notes: Notes,
}

impl Plan {
    /// The index of `file` for a parse with `opts` (where it is:
    /// `opts.index`; what it must have been written with:
    /// `Options::fingerprint`); `None` when indexes are off or no place
    /// can be found for one.
    pub fn new(file: &Path, opts: &Options, notes: &Notes) -> Option<Plan> {
        if opts.index == IndexMode::Off {
            return None;
        }
        let shared = matches!(opts.index, IndexMode::In(_) | IndexMode::Url(_));
        let key = match FileKey::of(file, shared) {
            Ok(key) => key,
            Err(e) => {
                notes.note(format!("no index: cannot read {}: {e}", file.display()));
                return None;
            }
        };
        let place = match &opts.index {
            IndexMode::Off => return None,
            IndexMode::Cache => Place::File(key::default_place(file)?),
            _ => Self::chosen(&opts.index, &key)?,
        };
        Self::with(place, key, opts, notes)
    }

    /// The index of the remote object `src` (opened from `url`): in the
    /// user's cache by default (named by a hash of the URL), else where
    /// `opts.index` says; keyed by the object's size, version and ends.
    pub fn for_remote(
        src: &crate::data::RemoteSource,
        opts: &Options,
        notes: &Notes,
    ) -> Option<Plan> {
        if opts.index == IndexMode::Off {
            return None;
        }
        let key = match FileKey::of_remote(src) {
            Ok(key) => key,
            Err(e) => {
                notes.note(format!("no index: cannot read {}: {e}", src.url()));
                return None;
            }
        };
        let place = match &opts.index {
            IndexMode::Cache => Place::File(key::default_place_of_url(src.url())?),
            _ => Self::chosen(&opts.index, &key)?,
        };
        Self::with(place, key, opts, notes)
    }

    fn chosen(mode: &IndexMode, key: &FileKey) -> Option<Place> {
        Some(match mode {
            IndexMode::Off | IndexMode::Cache => return None,
            IndexMode::At(p) => Place::File(p.clone()),
            IndexMode::In(dir) => Place::File(dir.join(key.shared_name())),
            IndexMode::Url(u) if u.ends_with('/') => {
                Place::Url(format!("{u}{}", key.shared_name()))
            }
            IndexMode::Url(u) => Place::Url(u.clone()),
        })
    }

    fn with(place: Place, key: FileKey, opts: &Options, notes: &Notes) -> Option<Plan> {
        // A device, a FIFO or a folder there is neither read (a FIFO
        // would hang the open) nor written over.
        if let Place::File(p) = &place
            && let Err(why) = check_kind(p)
        {
            notes.note(format!(
                "the index {}: {why}: it is neither read nor written",
                crate::data::shown(p)
            ));
            return None;
        }
        Some(Plan {
            place,
            key,
            settings: opts.fingerprint(),
            max_depth: opts.max_depth.saturating_add(1),
            notes: notes.clone(),
        })
    }

    /// Where the index is: a path, or a URL.
    pub fn place(&self) -> String {
        match &self.place {
            Place::File(p) => p.display().to_string(),
            Place::Url(u) => u.clone(),
        }
    }

    /// The catalog the index holds for this version of the file, over
    /// `root` (the file's bytes; `file`: its path, `None` for a remote
    /// object), every record checked. An index that cannot be used is
    /// noted and left to be rewritten.
    pub fn open(&self, root: Data, name: Name, file: Option<&Path>) -> Option<Catalog> {
        let expect = load::Expect {
            key: &self.key,
            settings: &self.settings,
            max_depth: self.max_depth,
        };
        let ignored = |why: codec::Invalid| {
            self.notes.note(format!(
                "the index {} {why}; it is ignored and rebuilt",
                self.place
            ));
        };
        let bytes = match load::IndexBytes::open(&self.place) {
            Ok(Some(b)) => b,
            Ok(None) => return None,
            Err(why) => {
                ignored(why);
                return None;
            }
        };
        load::load(bytes, &expect, root, name, file)
            .map_err(ignored)
            .ok()
    }

    /// The tree the index holds for this version of the file (see
    /// [`Plan::open`]), built whole.
    pub fn restore(&self, root: Data, name: Name, file: Option<&Path>) -> Option<Tree> {
        let cat = self.open(root, name, file)?;
        match cat.tree() {
            Ok(tree) => Some(tree),
            Err(why) => {
                self.notes.note(format!(
                    "the index {} {why}; it is ignored and rebuilt",
                    self.place
                ));
                None
            }
        }
    }

    /// Saves `tree`, the result of a finished parse. A file or object at
    /// the place that is not a pparse index is never overwritten.
    pub fn save(&self, tree: &Tree) {
        let done = match &self.place {
            Place::File(p) => self
                .check_place(p)
                .and_then(|()| save::save(p, &self.key, &self.settings, tree)),
            Place::Url(u) => save::save_url(u, &self.key, &self.settings, tree),
        };
        if let Err(why) = done {
            self.notes
                .note(format!("no index written to {}: {why}", self.place));
        }
    }

    fn check_place(&self, place: &Path) -> Result<(), String> {
        use std::io::Read;
        check_kind(place)?;
        let mut f = match crate::data::open_regular(place) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        let mut head = [0u8; 8];
        match f.read_exact(&mut head) {
            Ok(()) if &head == codec::MAGIC => Ok(()),
            _ if f.metadata().is_ok_and(|m| m.len() == 0) => Ok(()),
            _ => Err("a file that is not a pparse index is there".into()),
        }
    }
}
