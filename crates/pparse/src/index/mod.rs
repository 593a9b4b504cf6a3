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
//! `codec.rs` is the file layout, `save.rs` writes one, `load.rs` reads one.

mod codec;
mod key;
mod load;
mod save;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::data::Data;
use crate::extraction::Tree;
use crate::name::Name;
use crate::parsers::IndexMode;
use crate::parsers::api::Options;
use key::{FileKey, check_kind};

/// What happened to a session's index that a user should hear about (a
/// stale index ignored, one that could not be written). A front end takes
/// and shows them ([`crate::Session::take_notes`]); a library user may
/// ignore them. Shared by the session and its engine thread, which saves
/// the index.
#[derive(Clone, Debug, Default)]
pub struct Notes(Arc<Mutex<Vec<String>>>);

impl Notes {
    fn note(&self, text: String) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(text);
    }

    /// The notes recorded so far, removed.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Reads an inflated index body as an index is read, for the fuzz target
/// (`fuzz/fuzz_targets/index.rs`).
#[doc(hidden)]
pub fn fuzz_body(body: &[u8]) {
    load::fuzz_body(body);
}

/// Reads an inflated index body over `root`, the bytes of the file it
/// claims to describe, with every check [`Plan::restore`] makes, for the
/// fuzz target that forges indexes (`fuzz/fuzz_targets/index_forged.rs`).
#[doc(hidden)]
pub fn fuzz_restore(body: &[u8], root: Data, name: Name) -> Option<Tree> {
    load::fuzz_restore(body, root, name)
}

/// The index of one file: where it is and which version of the file it is
/// valid for.
pub struct Plan {
    place: PathBuf,
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
        let settings = opts.fingerprint();
        let place = match &opts.index {
            IndexMode::Off => return None,
            IndexMode::At(p) => p.clone(),
            IndexMode::Cache => key::default_place(file)?,
        };
        // A device, a FIFO or a folder there is neither read (a FIFO
        // would hang the open) nor written over.
        if let Err(why) = check_kind(&place) {
            notes.note(format!(
                "the index {}: {why}: it is neither read nor written",
                crate::data::shown(&place)
            ));
            return None;
        }
        match FileKey::of(file) {
            Ok(key) => Some(Plan {
                place,
                key,
                settings,
                max_depth: opts.max_depth.saturating_add(1),
                notes: notes.clone(),
            }),
            Err(e) => {
                notes.note(format!("no index: cannot read {}: {e}", file.display()));
                None
            }
        }
    }

    /// Where the index is.
    pub fn place(&self) -> &Path {
        &self.place
    }

    /// The tree the index holds for this version of the file, over `root`
    /// (the file's bytes). An index that cannot be used is noted and left
    /// to be rewritten.
    pub fn restore(&self, root: Data, name: Name, file: &Path) -> Option<Tree> {
        let expect = load::Expect {
            key: &self.key,
            settings: &self.settings,
            max_depth: self.max_depth,
        };
        match load::load(&self.place, &expect, root, name, file) {
            Ok(tree) => tree,
            Err(why) => {
                self.notes.note(format!(
                    "the index {} {why}; it is ignored and rebuilt",
                    self.place.display()
                ));
                None
            }
        }
    }

    /// Saves `tree`, the result of a finished parse. A file at the place
    /// that is not a pparse index is never overwritten.
    pub fn save(&self, tree: &Tree) {
        if let Err(why) = self
            .check_place()
            .and_then(|()| save::save(&self.place, &self.key, &self.settings, tree))
        {
            self.notes.note(format!(
                "no index written to {}: {why}",
                self.place.display()
            ));
        }
    }

    fn check_place(&self) -> Result<(), String> {
        use std::io::Read;
        check_kind(&self.place)?;
        let mut f = match crate::data::open_regular(&self.place) {
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
