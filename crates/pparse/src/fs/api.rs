//! The file-system API: [`Fs`], its [`Entry`]s, [`File`]s and [`Error`]s
//! (see the module docs of [`crate::fs`]).

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::data::{Data, Range};
use crate::engine::{Options, Session};
use crate::extraction::dirs::{Dirs, Item};
use crate::extraction::{EntryKind, ExtId, Extraction, Phase, Tree, match_name};
use crate::status::{Damage, Status};

/// What went wrong, with the PATH it concerns.
#[derive(Debug)]
pub enum Error {
    /// The source itself could not be opened.
    Open {
        /// The file.
        file: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Nothing is named `path`; `hint` says what is there instead.
    NotFound {
        /// The PATH asked for.
        path: String,
        /// What the closest container holds.
        hint: String,
    },
    /// `path` holds no entries to list or descend into.
    NotAContainer {
        /// The PATH asked for.
        path: String,
    },
    /// `path` has no bytes of its own (a directory, a link).
    NoContent {
        /// The PATH asked for.
        path: String,
        /// What it is (`dir`, `symlink`, …).
        kind: String,
    },
    /// `path`'s bytes are damaged (asked for with [`Fs::open_complete`]).
    Damaged {
        /// The PATH asked for.
        path: String,
        /// Where, in the member's own offsets.
        offset: u64,
        /// Why.
        reason: String,
        /// Truncated or corrupt.
        status: Status,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // A remote source's errors already start with its URL.
            Error::Open { file, source }
                if source.to_string().starts_with(&*file.to_string_lossy()) =>
            {
                write!(f, "cannot read {source}")
            }
            Error::Open { file, source } => write!(f, "cannot read {}: {source}", file.display()),
            Error::NotFound { path, hint } => write!(f, "no entry named {path:?} ({hint})"),
            Error::NotAContainer { path } => write!(f, "{path:?} holds no entries"),
            Error::NoContent { path, kind } => write!(f, "{path:?} is a {kind} and has no bytes"),
            Error::Damaged {
                path,
                offset,
                reason,
                status,
            } => write!(f, "{path:?} is {status} at offset {offset:#x}: {reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Open { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        let kind = match &e {
            Error::Open { source, .. } => source.kind(),
            Error::NotFound { .. } => io::ErrorKind::NotFound,
            Error::NotAContainer { .. } => io::ErrorKind::NotADirectory,
            Error::NoContent { .. } => io::ErrorKind::IsADirectory,
            Error::Damaged { .. } => io::ErrorKind::InvalidData,
        };
        io::Error::new(kind, e)
    }
}

/// What an entry is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// Bytes: a regular member, a decoded stream, the opened file.
    File,
    /// A directory entry of its container.
    Dir,
    /// A symbolic link, with its target.
    Symlink(String),
    /// A hard link, with the member it links to.
    HardLink(String),
    /// Anything else a container holds (a device, a FIFO, an unknown type).
    Other(String),
}

/// An entry: a member, a decoded stream, or the opened file itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its PATH, relative to the [`Fs`] it came from.
    pub path: String,
    /// Its own name (escaped for display).
    pub name: String,
    /// What it is.
    pub kind: Kind,
    /// Bytes present (for a cut member, what was recovered).
    pub size: u64,
    /// The size its container declares, when it does.
    pub declared_size: Option<u64>,
    /// Complete, truncated or corrupt.
    pub status: Status,
    /// Why, when it is not complete.
    pub reason: Option<String>,
    /// Whether it holds entries (an archive, a compressed stream, a
    /// directory of a folder): [`Fs::list`] and [`Fs::sub`] go into it.
    pub container: bool,
    /// Whether its container holds it as a file of its own (a member), not
    /// the opened file or a decoded stream: what `tar x` would write.
    pub member: bool,
    /// The format it was parsed as (`tar`, `zip`, `gzip`, …).
    pub format: Option<&'static str>,
    /// Modification time in seconds since the Unix epoch, where its
    /// container records one (tar, zip; a zip's DOS time is read as UTC).
    pub mtime: Option<i64>,
    /// Permission bits (`0o7777`), where its container records them (tar,
    /// zip made on Unix).
    pub mode: Option<u32>,
    /// A handle on it: [`Fs::list_node`] and [`Fs::open_node`] go to it
    /// again without resolving its PATH (a mount's folders and files).
    pub node: EntryHandle,
}

/// A handle on an entry of an [`Fs`] (see [`Entry::node`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EntryHandle(At);

/// Nested containers as a file system: see the module docs.
#[derive(Clone)]
pub struct Fs {
    session: Arc<Session>,
    /// The PATH this view is rooted at ("" for the top).
    root: String,
    /// The directories of each parsed container, made on first use and
    /// shared by the views of one session.
    dirs: Arc<Mutex<HashMap<ExtId, Arc<Dirs>>>>,
    /// PATHs resolved by walking a container's members, per container: a
    /// container's directories are made for PATH lookups only once a few
    /// were asked for (one `cat` is quicker with one walk).
    walks: Arc<Mutex<HashMap<ExtId, u32>>>,
}

/// Walks through a container before its directories are made for lookups.
const WALKS_BEFORE_DIRS: u32 = 3;

/// How often a waiting call looks at the tree again: resolving a PATH
/// walks members under the tree's read lock, which the parse waits for.
const POLL: Duration = Duration::from_millis(100);

impl Fs {
    /// A file system over a file (or a folder), parsed in the background,
    /// or read back at once from its index in the user's cache folder when
    /// an earlier open saved one (see [`crate::index`]); the parse saves
    /// one when it ends. Use [`Fs::with_options`] to choose the index's
    /// place or turn it off. `file` may also be an `http://`, `https://`
    /// or `s3://bucket/key` URL, read with range requests
    /// ([`crate::data::RemoteSource`]; no index).
    pub fn new(file: impl AsRef<Path>) -> Result<Fs, Error> {
        let options = Options {
            index: crate::parsers::IndexMode::Cache,
            ..Options::default()
        };
        Fs::with_options(file, options)
    }

    /// [`Fs::new`] with options (memory budget, protobuf schemas, …).
    pub fn with_options(file: impl AsRef<Path>, options: Options) -> Result<Fs, Error> {
        let file = file.as_ref();
        let session = match file.to_str().filter(|f| crate::data::is_remote_url(f)) {
            Some(url) => Session::open_url(url, options),
            None => Session::open(file, options),
        };
        let session = session.map_err(|source| Error::Open {
            file: file.to_path_buf(),
            source,
        })?;
        Ok(Fs::from_session(Arc::new(session)))
    }

    /// A file system over a session already open (the explorer's, the
    /// CLI's).
    pub fn from_session(session: Arc<Session>) -> Fs {
        Fs {
            session,
            root: String::new(),
            dirs: Arc::default(),
            walks: Arc::default(),
        }
    }

    /// The session behind it: the tree, its nodes, its progress.
    pub fn session(&self) -> &Arc<Session> {
        &self.session
    }

    /// The full PATH of `path`, relative to this view's root.
    fn full(&self, path: &str) -> String {
        // `./a//x` is `a/x`, as members' names are (see `Tree::resolve`).
        let path = crate::name::normal_path(path);
        let path = path.trim_matches('/');
        match (self.root.is_empty(), path.is_empty()) {
            (true, _) => path.to_string(),
            (false, true) => self.root.clone(),
            (false, false) => format!("{}/{path}", self.root),
        }
    }

    /// `full` relative to this view's root.
    fn relative<'p>(&self, full: &'p str) -> &'p str {
        if self.root.is_empty() {
            return full;
        }
        full.strip_prefix(self.root.as_str())
            .map_or(full, |r| r.trim_start_matches('/'))
    }

    /// The entry at `path` (a directory that only the names of its
    /// members make, as in most tars, is an entry too).
    pub fn stat(&self, path: &str) -> Result<Entry, Error> {
        let full = self.full(path);
        if let Some(found) = self.cataloged(&full, true) {
            let (chain, id) = found?;
            let e = chain.last().expect("a chain ends at its member");
            let path = chain[1..]
                .iter()
                .map(Extraction::display_name)
                .collect::<Vec<_>>()
                .join("/");
            let kids = self.session.catalog().map_or(0, |c| c.children(id));
            return Ok(self.entry_from(e, kids > 0, &path));
        }
        let at = self.wait_for(&full, |t, at| match at {
            At::Entry(id) => settled(t, id),
            At::Under(c, _) => settled(t, c),
        })?;
        let t = self.session.tree();
        Ok(match at {
            At::Entry(id) => self.entry(&t, id),
            // A directory with an entry of its own is that entry.
            At::Under(c, prefix) => match t
                .resolve(&full)
                .or_else(|| self.dirs_of(&t, c).dir_member(&prefix))
            {
                Some(id) => self.entry(&t, id),
                None => self.dir_entry(&t, c, prefix.trim_end_matches('/')),
            },
        })
    }

    /// The entries in `path` ("" for the top), in the order their
    /// container holds them, as `ls` shows a directory: members in
    /// subdirectories appear as their first directory (named by a member
    /// of its own, or only by its members' names). With `recursive`, every
    /// entry below `path` instead, containers' contents included, depth
    /// first.
    pub fn list(&self, path: &str, recursive: bool) -> Result<Vec<Entry>, Error> {
        let full = self.full(path);
        let at = self.wait_for(&full, |t, at| {
            let c = match at {
                At::Entry(id) => id,
                At::Under(c, _) => c,
            };
            if recursive {
                t.subtree(c).into_iter().all(|x| settled(t, x))
            } else {
                settled(t, c)
            }
        })?;
        let t = self.session.tree();
        let (c, prefix) = match at {
            At::Entry(id) if !t.exts[id].children.is_empty() => (id, String::new()),
            At::Entry(_) => {
                return Err(Error::NotAContainer {
                    path: path.to_string(),
                });
            }
            At::Under(c, prefix) => (c, prefix),
        };
        Ok(self.under(&t, c, &prefix, recursive))
    }

    /// The directories of container `c`, made once it is parsed (until
    /// then, made again at each call).
    fn dirs_of(&self, t: &Tree, c: ExtId) -> Arc<Dirs> {
        let mut cache = self.dirs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = cache.get(&c) {
            return d.clone();
        }
        let d = Arc::new(Dirs::build(t, c));
        if settled(t, c) {
            cache.insert(c, d.clone());
        }
        d
    }

    /// The entries of container `c` under directory `prefix` ("" for all):
    /// as `ls` shows them, or with `recursive` every entry below, the
    /// contents of containers included.
    fn under(&self, t: &Tree, c: ExtId, prefix: &str, recursive: bool) -> Vec<Entry> {
        if recursive {
            let mut out = Vec::new();
            for &x in &t.exts[c].children {
                let name = t.exts[x].name.path_form();
                match name.strip_prefix(prefix) {
                    Some(rest) if !rest.trim_end_matches('/').is_empty() => {}
                    _ => continue,
                }
                out.extend(t.subtree(x).into_iter().map(|y| self.entry(t, y)));
            }
            return out;
        }
        self.listed(t, c, prefix)
            .into_iter()
            .map(|(_, e)| e)
            .collect()
    }

    /// The entries of container `c` in folder `prefix`, as `ls` shows
    /// them, each with the name the folder lists it under.
    fn listed(&self, t: &Tree, c: ExtId, prefix: &str) -> Vec<(String, Entry)> {
        let dirs = self.dirs_of(t, c);
        let items = dirs.items(prefix).unwrap_or_default();
        items
            .iter()
            .map(|item| {
                let entry = match item {
                    Item::Member(x) => self.entry(t, *x),
                    Item::Dir(p) => self.dir_entry(t, c, p.trim_end_matches('/')),
                };
                (dirs.listed_name(t, item), entry)
            })
            .collect()
    }

    /// The PATH of extraction `id` as folders list it: [`Tree::path_of`],
    /// except where a parsed container lists a member on the way under
    /// another name than its own (`lnk2~1`, `link~1/x`, see `dirs.rs`), so
    /// that every entry has a PATH that leads to it and to nothing else.
    fn listing_path(&self, t: &Tree, id: ExtId) -> String {
        let mut parts = Vec::new();
        let mut at = id;
        while let Some(p) = t.exts[at].parent() {
            parts.push(self.listed_component(t, p, at));
            at = p;
        }
        parts.reverse();
        parts.join("/")
    }

    /// The name `x`, a child of `p`, is listed under in its folder.
    fn listed_component(&self, t: &Tree, p: ExtId, x: ExtId) -> String {
        let dirs = settled(t, p).then(|| self.dirs_of(t, p));
        match dirs.filter(|d| d.renames()) {
            Some(d) => {
                let name = t.exts[x].name.path_form();
                let bare = name.trim_end_matches('/');
                let mut s = d.spell(bare, Some(x));
                if bare.len() < name.len() {
                    s.push('/');
                }
                s
            }
            None => t.exts[x].display_name(),
        }
    }

    /// The raw name of member `x` of container `c`, or where `c` lists it
    /// (or a folder on its way) under another name, that spelling
    /// (`lnk2~1`, `link~1/x`): what [`Fs::walk`] hands out to make file
    /// names of.
    fn raw_listed(&self, t: &Tree, c: ExtId, x: ExtId) -> Vec<u8> {
        let raw = t.exts[x].name.raw();
        let dirs = settled(t, c).then(|| self.dirs_of(t, c));
        if let Some(d) = dirs.filter(|d| d.renames()) {
            let name = t.exts[x].name.path_form();
            let bare = name.trim_end_matches('/');
            let spelled = d.spell(bare, Some(x));
            if spelled != bare {
                return spelled.into_bytes();
            }
        }
        raw.to_vec()
    }

    /// Where `full` leads when read as folders list their entries, one
    /// component at a time: the spelling of a member listed under another
    /// name than its own (`lnk2~1`, `link~1/x`), which [`Tree::resolve`]
    /// does not know.
    fn locate_listed(&self, t: &Tree, full: &str) -> Option<At> {
        let mut at = At::Entry(0);
        for comp in full.split('/').filter(|c| !c.is_empty()) {
            let (c, prefix) = match &at {
                At::Entry(id) if t.exts[*id].children.is_empty() => return None,
                At::Entry(id) => (*id, String::new()),
                At::Under(c, p) => (*c, p.clone()),
            };
            let dirs = self.dirs_of(t, c);
            at = match dirs.listed(t, &prefix, comp)? {
                Item::Member(x) => locate_id(t, *x)?,
                Item::Dir(p) => At::Under(c, p.to_string()),
            };
        }
        Some(at)
    }

    /// A directory of container `c` that no member stands for: `name` is
    /// its path within the container.
    fn dir_entry(&self, t: &Tree, c: ExtId, name: &str) -> Entry {
        let at = self.listing_path(t, c);
        let dirs = settled(t, c).then(|| self.dirs_of(t, c));
        let spelled = match dirs.filter(|d| d.renames()) {
            Some(d) => d.spell(name, None),
            None => name.to_string(),
        };
        let full = if at.is_empty() {
            spelled.clone()
        } else {
            format!("{at}/{spelled}")
        };
        Entry {
            path: self.relative(&full).to_string(),
            name: spelled.rsplit('/').next().unwrap_or(&spelled).to_string(),
            kind: Kind::Dir,
            size: 0,
            declared_size: None,
            status: Status::Complete,
            reason: None,
            container: true,
            member: false,
            format: None,
            mtime: None,
            mode: None,
            node: EntryHandle(At::Under(c, format!("{name}/"))),
        }
    }

    /// Waits until `full` is located and `ready` holds for it, or the parse
    /// is over.
    fn wait_for(&self, full: &str, ready: impl Fn(&Tree, At) -> bool) -> Result<At, Error> {
        {
            let t = self.session.tree();
            if let Some(id) = self.find(&t, 0, full.trim_start_matches('/'), 0)
                && let Some(at) = locate_id(&t, id)
                && ready(&t, at.clone())
            {
                return Ok(at);
            }
            // A member listed under a name of its own (`lnk2~1`).
            if locate(&t, full).is_none()
                && let Some(at) = self.locate_listed(&t, full)
                && ready(&t, at.clone())
            {
                return Ok(at);
            }
        }
        // `Instant - POLL` can underflow on a clock just started: none yet.
        let mut last: Option<Instant> = None;
        self.session.wait_until(|t| {
            if last.is_some_and(|l| l.elapsed() < POLL) {
                return false;
            }
            last = Some(Instant::now());
            locate(t, full).is_some_and(|at| ready(t, at))
        });
        let t = self.session.tree();
        locate(&t, full)
            .or_else(|| self.locate_listed(&t, full))
            .ok_or_else(|| Error::NotFound {
                hint: t.hint(full),
                path: self.relative(full).to_string(),
            })
    }

    /// The handle of this view's root (what [`Fs::list`] of "" lists).
    pub fn root_node(&self) -> Result<EntryHandle, Error> {
        let full = self.full("");
        self.wait_for(&full, |_, _| true).map(EntryHandle)
    }

    /// [`Fs::list`] (one level) of the entry `node` stands for.
    pub fn list_node(&self, node: &EntryHandle) -> Result<Vec<Entry>, Error> {
        Ok(self
            .list_node_named(node)?
            .into_iter()
            .map(|(_, e)| e)
            .collect())
    }

    /// [`Fs::list_node`], each entry with the name its folder lists it
    /// under: its last component, or `NAME~N` when another entry of the
    /// folder took that name first (see `dirs.rs`).
    pub(super) fn list_node_named(
        &self,
        node: &EntryHandle,
    ) -> Result<Vec<(String, Entry)>, Error> {
        let c = match &node.0 {
            At::Entry(id) | At::Under(id, _) => *id,
        };
        self.session.wait_until(|t| settled(t, c));
        let t = self.session.tree();
        match &node.0 {
            At::Entry(id) if t.exts[*id].children.is_empty() => Err(Error::NotAContainer {
                path: self.relative(&t.path_of(*id)).to_string(),
            }),
            At::Entry(id) => Ok(self.listed(&t, *id, "")),
            At::Under(c, prefix) => Ok(self.listed(&t, *c, prefix)),
        }
    }

    /// [`Fs::open`] of the entry `node` stands for.
    pub fn open_node(&self, node: &EntryHandle) -> Result<File, Error> {
        let At::Entry(id) = node.0 else {
            return Err(Error::NoContent {
                path: String::new(),
                kind: "dir".into(),
            });
        };
        self.session.wait_until(|t| t.exts[id].is_final());
        let t = self.session.tree();
        let e = &t.exts[id];
        if !e.kind.has_content() {
            return Err(Error::NoContent {
                path: self.relative(&t.path_of(id)).to_string(),
                kind: e.kind.as_str().to_string(),
            });
        }
        Ok(file_of(&t, id))
    }

    /// A view rooted at `path`: its paths are relative to it (PFIO's
    /// `subfs`).
    pub fn sub(&self, path: &str) -> Result<Fs, Error> {
        let full = self.full(path);
        let at = self.wait_for(&full, |t, at| match at {
            At::Entry(id) => !t.exts[id].children.is_empty() || settled(t, id),
            At::Under(..) => true,
        })?;
        let t = self.session.tree();
        let root = match at {
            At::Entry(id) if t.exts[id].children.is_empty() => {
                return Err(Error::NotAContainer {
                    path: path.to_string(),
                });
            }
            At::Entry(id) => self.listing_path(&t, id),
            At::Under(..) => full.trim_end_matches('/').to_string(),
        };
        Ok(Fs {
            session: self.session.clone(),
            root,
            dirs: self.dirs.clone(),
            walks: self.walks.clone(),
        })
    }

    /// Opens the bytes at `path` for reading, once they are all there (or
    /// the parse is over): what was recovered of a damaged member is
    /// readable, and [`File::status`] says what it is.
    pub fn open(&self, path: &str) -> Result<File, Error> {
        let full = self.full(path);
        if let Some(found) = self.cataloged(&full, false) {
            let (chain, id) = found?;
            let e = chain.last().expect("a chain ends at its member");
            if !e.kind.has_content() {
                return Err(Error::NoContent {
                    path: path.to_string(),
                    kind: e.kind.as_str().to_string(),
                });
            }
            let parent = chain.len().checked_sub(2).map(|i| &chain[i]);
            let head = self.session.catalog().and_then(|c| c.head_crc(id));
            let listed = || {
                chain[1..]
                    .iter()
                    .map(Extraction::display_name)
                    .collect::<Vec<_>>()
                    .join("/")
            };
            return Ok(file_from(e, parent, head, true, listed));
        }
        let at = self.wait_for(&full, |t, at| match at {
            At::Entry(id) => t.exts[id].is_final(),
            At::Under(..) => true,
        })?;
        let At::Entry(id) = at else {
            return Err(Error::NoContent {
                path: path.to_string(),
                kind: "dir".into(),
            });
        };
        let t = self.session.tree();
        let e = &t.exts[id];
        if !e.kind.has_content() {
            return Err(Error::NoContent {
                path: path.to_string(),
                kind: e.kind.as_str().to_string(),
            });
        }
        Ok(file_of(&t, id))
    }

    /// Calls `f` with every entry at or below `path`, depth first in the
    /// order their containers hold them, once they are all parsed: its
    /// [`Entry`], the raw names from the top down to it (to make file
    /// names of, as `pparse extract` does; a member its folder lists under
    /// a name of its own, as a second member of one name, is given that
    /// name, `lnk2~1`), and its bytes opened if it has any. The tree is not locked while `f` runs. Stops at `f`'s first
    /// error and returns it.
    pub fn walk(
        &self,
        path: &str,
        f: impl FnMut(&Entry, &[Vec<u8>], Option<File>) -> io::Result<()>,
    ) -> Result<io::Result<()>, Error> {
        self.walk_opening(path, true, f)
    }

    /// [`Fs::walk`] without opening anything: the entries and their names
    /// only (opening a member through an index checks its first bytes,
    /// which a walk that only looks at names has no use for).
    pub fn walk_names(
        &self,
        path: &str,
        mut f: impl FnMut(&Entry, &[Vec<u8>]) -> io::Result<()>,
    ) -> Result<io::Result<()>, Error> {
        self.walk_opening(path, false, |e, names, _| f(e, names))
    }

    fn walk_opening(
        &self,
        path: &str,
        open: bool,
        mut f: impl FnMut(&Entry, &[Vec<u8>], Option<File>) -> io::Result<()>,
    ) -> Result<io::Result<()>, Error> {
        let full = self.full(path);
        let at = self.wait_for(&full, |t, at| match at {
            At::Entry(id) => t.subtree(id).into_iter().all(|x| settled(t, x)),
            At::Under(c, _) => t.subtree(c).into_iter().all(|x| settled(t, x)),
        })?;
        let ids = {
            let t = self.session.tree();
            match at {
                At::Entry(id) => t.subtree(id),
                At::Under(c, prefix) => t.exts[c]
                    .children
                    .iter()
                    .filter(|&&x| t.exts[x].name.path_form().starts_with(&prefix))
                    .flat_map(|&x| t.subtree(x))
                    .collect(),
            }
        };
        // The names from the root down, kept along the depth-first walk
        // (one push and one pop per entry), not rebuilt from each entry's
        // ancestors: an extraction tree of any depth is walked in linear
        // time.
        let mut stack: Vec<(ExtId, usize, usize)> = Vec::new();
        let mut path = String::new();
        let mut chain: Vec<Vec<u8>> = Vec::new();
        for id in ids {
            let (entry, root_name, file) = {
                let t = self.session.tree();
                let e = &t.exts[id];
                while let Some(&(top, len, depth)) = stack.last() {
                    if Some(top) == e.parent() {
                        break;
                    }
                    stack.pop();
                    path.truncate(len);
                    chain.truncate(depth);
                }
                if stack.is_empty() {
                    // The top of a subtree: its ancestors' names, once.
                    path.clear();
                    chain.clear();
                    if let Some(p) = e.parent() {
                        path = self.listing_path(&t, p);
                        let mut x = p;
                        while let Some(up) = t.exts[x].parent() {
                            chain.push(self.raw_listed(&t, up, x));
                            x = up;
                        }
                        chain.reverse();
                    }
                }
                stack.push((id, path.len(), chain.len()));
                if let Some(p) = e.parent() {
                    if !path.is_empty() {
                        path.push('/');
                    }
                    path.push_str(&self.listed_component(&t, p, id));
                    chain.push(self.raw_listed(&t, p, id));
                }
                let file = (open && e.kind.has_content()).then(|| file_of(&t, id));
                let root_name = e.parent().is_none().then(|| vec![e.name.raw().to_vec()]);
                (self.entry_at(&t, id, &path), root_name, file)
            };
            let names = root_name.as_deref().unwrap_or(&chain);
            if let Err(err) = f(&entry, names, file) {
                return Ok(Err(err));
            }
        }
        Ok(Ok(()))
    }

    /// The extraction `path` names, once its bytes are all there: for the
    /// views that work on extractions (tensors, records, pickles).
    pub fn extraction(&self, path: &str) -> Result<ExtId, Error> {
        let full = self.full(path);
        match self.wait_for(&full, |t, at| match at {
            At::Entry(id) => t.exts[id].is_final(),
            At::Under(..) => true,
        })? {
            At::Entry(id) => Ok(id),
            At::Under(..) => Err(Error::NoContent {
                path: path.to_string(),
                kind: "dir".into(),
            }),
        }
    }

    /// [`Fs::open`], refusing a member that is not complete: for readers
    /// that must never take a damaged byte for a good one.
    pub fn open_complete(&self, path: &str) -> Result<File, Error> {
        let f = self.open(path)?;
        if f.status == Status::Complete {
            return Ok(f);
        }
        let worst = f.damage.iter().max_by_key(|d| d.status);
        Err(Error::Damaged {
            path: path.to_string(),
            offset: worst.map_or(f.len, |d| d.range.start),
            reason: worst.map_or_else(
                || format!("{} of its declared bytes present", f.len),
                |d| d.reason.clone(),
            ),
            status: f.status,
        })
    }

    /// The extraction PATH `rest` names below container `c`, as
    /// [`Tree::resolve`] finds it (children in container order, a member's
    /// own `/`s part of its name), but through the names of settled
    /// containers' [`Dirs`]: a few hash lookups per level instead of a
    /// comparison with every member. `None`: not found this way (not yet
    /// parsed, or names the hash cannot tell apart); the caller then asks
    /// [`locate`].
    fn find(&self, t: &Tree, c: ExtId, rest: &str, depth: usize) -> Option<ExtId> {
        if rest.is_empty() {
            return Some(c);
        }
        let kids = &t.exts[c].children;
        if depth > 256 || kids.is_empty() || !settled(t, c) {
            return None;
        }
        // Members whose name is `rest` up to a `/` or the end, with where
        // the PATH inside them begins (see `match_name`), in container
        // order: the order `Tree::resolve` tries them in.
        let mut hits: Vec<(ExtId, usize)> = Vec::new();
        match self.lookup_dirs(t, c) {
            Some(dirs) => {
                let ends = rest.match_indices('/').map(|(i, _)| i).chain([rest.len()]);
                for i in ends.filter(|&i| i > 0) {
                    match dirs.named(t, &rest[..i]) {
                        Ok(Some(x)) => {
                            let name = t.exts[x].name.path_form();
                            hits.extend(match_name(&name, rest).map(|at| (x, at)));
                        }
                        Ok(None) => {}
                        Err(()) => return None,
                    }
                }
                hits.sort_unstable();
            }
            None => {
                for &x in kids {
                    let name = t.exts[x].name.path_form();
                    hits.extend(match_name(&name, rest).map(|at| (x, at)));
                }
            }
        }
        for (x, at) in hits {
            if at == rest.len() {
                return Some(x);
            }
            if let Some(found) = self.find(t, x, &rest[at..], depth + 1) {
                return Some(found);
            }
        }
        None
    }

    /// The directories of container `c` for PATH lookups, once a few
    /// lookups have walked it (one `cat` is quicker with one walk than
    /// with the directories of a million members); none for a small one.
    fn lookup_dirs(&self, t: &Tree, c: ExtId) -> Option<Arc<Dirs>> {
        if let Some(d) = self.dirs.lock().unwrap_or_else(|e| e.into_inner()).get(&c) {
            return Some(d.clone());
        }
        if t.exts[c].children.len() < 256 {
            return None;
        }
        let mut walks = self.walks.lock().unwrap_or_else(|e| e.into_inner());
        let n = walks.entry(c).or_default();
        *n += 1;
        if *n <= WALKS_BEFORE_DIRS {
            return None;
        }
        drop(walks);
        Some(self.dirs_of(t, c))
    }

    /// The member `full` names, with its ancestors from the root down,
    /// read from the catalog of the index the session was opened from,
    /// without its tree (a DataLoader worker opening members builds none).
    /// `None`: the catalog cannot answer (no catalog, a PATH it does not
    /// find, such as a directory that only names make, or with `listed`,
    /// an entry whose folders spell it otherwise): the tree answers.
    fn cataloged(
        &self,
        full: &str,
        listed: bool,
    ) -> Option<Result<(Vec<Extraction>, ExtId), Error>> {
        let cat = self.session.catalog()?;
        let id = cat.resolve(full)?;
        let chain = match cat.chain(id) {
            Ok(c) => c,
            Err(why) => {
                return Some(Err(Error::Open {
                    file: PathBuf::from(full),
                    source: io::Error::new(io::ErrorKind::InvalidData, why),
                }));
            }
        };
        if listed && chain[..chain.len() - 1].iter().any(|a| cat.renames(a.id())) {
            return None;
        }
        Some(Ok((chain, id)))
    }

    fn entry(&self, t: &Tree, id: ExtId) -> Entry {
        self.entry_at(t, id, &self.listing_path(t, id))
    }

    /// [`Fs::entry`] of `id`, whose PATH is `full`.
    fn entry_at(&self, t: &Tree, id: ExtId, full: &str) -> Entry {
        let e = &t.exts[id];
        self.entry_from(e, !e.children.is_empty(), full)
    }

    /// The entry of `e`, which holds entries when `container`, at `full`.
    fn entry_from(&self, e: &Extraction, container: bool, full: &str) -> Entry {
        let kind = match &e.kind {
            EntryKind::Root | EntryKind::Stream | EntryKind::File => Kind::File,
            EntryKind::Dir => Kind::Dir,
            EntryKind::Symlink(to) => Kind::Symlink(to.to_string()),
            EntryKind::HardLink(to) => Kind::HardLink(to.to_string()),
            other => Kind::Other(other.as_str().to_string()),
        };
        let status = e.status_counting_size();
        Entry {
            path: self.relative(full).to_string(),
            name: e.display_name(),
            kind,
            size: e.size(),
            declared_size: e.declared_size(),
            reason: (status != Status::Complete).then(|| {
                e.detail().unwrap_or_else(|| {
                    format!(
                        "{} of {} bytes present",
                        e.size(),
                        e.declared_size().unwrap_or(0)
                    )
                })
            }),
            status,
            container,
            member: e.kind == EntryKind::File,
            format: e.parser(),
            mtime: e.meta.mtime(),
            mode: e.meta.mode(),
            // A directory entry of its container leads to what its
            // container holds under its name.
            node: EntryHandle(match e.parent() {
                Some(p) if e.kind == EntryKind::Dir && !container => {
                    let name = e.name.path_form();
                    At::Under(p, format!("{}/", name.trim_end_matches('/')))
                }
                _ => At::Entry(e.id()),
            }),
        }
    }
}

/// Where a PATH leads.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum At {
    /// An extraction.
    Entry(ExtId),
    /// A directory of a container: its members whose names start with
    /// this (ending in `/`). A directory entry of a tar leads here too,
    /// so that listing it lists its files.
    Under(ExtId, String),
}

/// Where extraction `id` leads: itself, or for a directory entry of a
/// container, what the container holds under its name.
fn locate_id(t: &Tree, id: ExtId) -> Option<At> {
    let e = &t.exts[id];
    if e.kind == EntryKind::Dir && e.children.is_empty() {
        let name = e.name.path_form();
        let prefix = format!("{}/", name.trim_end_matches('/'));
        return Some(At::Under(e.parent()?, prefix));
    }
    Some(At::Entry(id))
}

/// Where `full` leads: an extraction, or a directory of a container that
/// its members' names make (`train` in a tar of `train/0001.jpg`).
fn locate(t: &Tree, full: &str) -> Option<At> {
    if let Some(id) = t.resolve(full) {
        return locate_id(t, id);
    }
    let full = full.trim_end_matches('/');
    let mut cut = full.len();
    loop {
        let (head, tail) = match full[..cut].rfind('/') {
            Some(i) => (&full[..i], &full[i + 1..]),
            None => ("", full),
        };
        if let Some(c) = t.resolve(head).filter(|&c| !t.exts[c].children.is_empty()) {
            let prefix = format!("{tail}/");
            let named = t.exts[c]
                .children
                .iter()
                .any(|&x| t.exts[x].name.path_form().starts_with(&prefix));
            if named {
                return Some(At::Under(c, prefix));
            }
        }
        match full[..cut].rfind('/') {
            Some(i) => cut = i,
            None => return None,
        }
    }
}

/// The bytes of extraction `id`, opened.
fn file_of(t: &Tree, id: ExtId) -> File {
    let e = &t.exts[id];
    let parent = e.parent().map(|p| &t.exts[p]);
    let head = t.head_crc(id).filter(|_| t.restored);
    file_from(e, parent, head, t.restored, || t.path_of(id))
}

/// The bytes of `e`, child of `parent`, opened. Read through an index
/// (`restored`), its first bytes must be the ones the parse that wrote the
/// index sniffed (`head`: their CRC-32) and its range the one its
/// container's header gives, or the index is not believed and no byte of
/// it is served. `path` names it in the error.
fn file_from(
    e: &Extraction,
    parent: Option<&Extraction>,
    head: Option<u32>,
    restored: bool,
    path: impl Fn() -> String,
) -> File {
    let mut data = e.data();
    let checked = crate::extraction::check_head_crc(head, &*data, crate::parsers::SNIFF_LEN, &path)
        .and_then(|()| match parent {
            Some(p) if restored => check_member_header(e, p, &path),
            _ => Ok(()),
        });
    if let Err(err) = checked {
        data = std::sync::Arc::new(Refused {
            len: data.available(),
            why: err.to_string(),
        });
    }
    File {
        len: data.available(),
        data,
        pos: 0,
        status: e.status_counting_size(),
        damage: e.damage.to_vec(),
    }
}

/// In a tree read back from an index: whether an intact member's range
/// is the one its container's own header gives it: a tar member's follows
/// a tar header that declares its size (see
/// [`crate::parsers::archive::tar::header_vouches`]), a zip entry's follows a local
/// header with its name and sizes (see
/// [`crate::parsers::archive::zip::local_header_vouches`]). So an index cannot
/// stretch, shrink or move a member whose first bytes happen to match, or
/// whose first bytes' checksum was recomputed.
fn check_member_header(
    e: &Extraction,
    parent: &Extraction,
    path: impl Fn() -> String,
) -> io::Result<()> {
    use crate::extraction::Form;
    let Some(o) = e.origin() else {
        return Ok(());
    };
    if e.status() != Status::Complete {
        return Ok(());
    }
    let parser = parent.parser();
    let (vouched, what) = if parser == Some(crate::parsers::archive::tar::FORMAT.name)
        && e.form == Form::Window
    {
        let mut b = [0u8; 512];
        let read = o
            .start
            .checked_sub(512)
            .is_some_and(|at| crate::data::read_exact_at(&*e.bytes, at, &mut b).unwrap_or(false));
        let size = e.declared_size().unwrap_or(o.len());
        (
            read && o.len() == size && crate::parsers::archive::tar::header_vouches(&b, size),
            format!("no tar header of a {size}-byte member precedes its range {o}"),
        )
    } else if parser == Some(crate::parsers::archive::zip::FORMAT.name)
        && matches!(e.form, Form::Window | Form::Deflate)
    {
        let size = (e.form == Form::Deflate)
            .then_some(e.declared_size())
            .flatten();
        (
            crate::parsers::archive::zip::local_header_vouches(&*e.bytes, o, e.name.raw(), size),
            format!("no local header of this entry with its sizes precedes its range {o}"),
        )
    } else {
        return Ok(());
    };
    if vouched {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{}: the index does not match the file ({what}); parse without it (--no-index)",
            path()
        ),
    ))
}

/// The bytes of a member an index describes wrongly: every read fails
/// with why (see [`Tree::check_head`]).
struct Refused {
    len: u64,
    why: String,
}

impl crate::data::Source for Refused {
    fn available(&self) -> u64 {
        self.len
    }
    fn is_final(&self) -> bool {
        true
    }
    fn read_at(&self, _offset: u64, _buf: &mut [u8]) -> io::Result<usize> {
        Err(io::Error::new(io::ErrorKind::InvalidData, self.why.clone()))
    }
    fn describe(&self) -> &'static str {
        "bytes an index describes wrongly"
    }
}

/// Whether `id` will change no more: its bytes are all there and its
/// parse (if any) is over.
fn settled(t: &Tree, id: ExtId) -> bool {
    let e = &t.exts[id];
    e.is_final() && matches!(e.phase, Phase::Done | Phase::Leaf)
}

/// An entry's bytes, opened for reading: [`Read`] and [`Seek`], and
/// positional reads ([`File::read_at`]) that many threads can make on one
/// handle.
pub struct File {
    data: Data,
    pos: u64,
    len: u64,
    status: Status,
    damage: Vec<Damage>,
}

impl File {
    /// Its length: the bytes present.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Complete, truncated or corrupt.
    pub fn status(&self) -> Status {
        self.status
    }

    /// What is damaged in it, in its own offsets, and why.
    pub fn damage(&self) -> &[Damage] {
        &self.damage
    }

    /// Reads at `offset` into `buf`; returns how many bytes were read
    /// (fewer than asked only at the end).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        if offset >= self.len {
            return Ok(0);
        }
        let n = buf
            .len()
            .min(usize::try_from(self.len - offset).unwrap_or(usize::MAX));
        let mut done = 0;
        while done < n {
            let got = self.data.read_at(offset + done as u64, &mut buf[done..n])?;
            if got == 0 {
                break;
            }
            done += got;
        }
        Ok(done)
    }

    /// The bytes `range` covers (clamped to the file).
    pub fn read_range(&self, range: Range) -> io::Result<Vec<u8>> {
        let end = range.end.min(self.len);
        let start = range.start.min(end);
        let mut buf = vec![0u8; usize::try_from(end - start).map_err(io::Error::other)?];
        let n = self.read_at(start, &mut buf)?;
        buf.truncate(n);
        Ok(buf)
    }
}

impl Read for File {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.read_at(self.pos, buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for File {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let at = match to {
            SeekFrom::Start(o) => Some(o),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        match at {
            Some(o) => {
                self.pos = o;
                Ok(o)
            }
            None => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "seek to a negative or overflowing offset",
            )),
        }
    }
}
