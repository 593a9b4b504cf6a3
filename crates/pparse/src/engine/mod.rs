//! The background engine: one thread that steps every parser incrementally.
//!
//! [`Session::open`] maps a file, makes it the root extraction and starts the
//! engine thread. The engine keeps a list of jobs (extractions waiting to be
//! sniffed, parsers in progress) and repeatedly steps the deepest job that can
//! make progress. Deepest first means a nested parser consumes decoded bytes
//! right behind the decoder above it, while they are still in the cache, and
//! the decoder only runs ahead when everything below it is waiting for bytes:
//! a pipeline whose memory is bounded by the cache, not by the file.
//!
//! Each step's results are committed to the shared [`Tree`] under one short
//! write lock, so readers (the CLI, the TUI) can look at the partial trees at
//! any time while the parse goes on, and [`Session::cancel`] stops it between
//! two steps.
//!
//! This file is the session API that readers use; `scheduler.rs` is the
//! engine thread's loop, `shared.rs` what the two share, and `memory.rs`
//! hands freed memory back to the system.

mod memory;
mod scheduler;
mod shared;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, bounded};
use parking_lot::RwLockReadGuard;

use thin_vec::ThinVec;

use crate::data::stats::{Counters, IoStats};
use crate::data::{Data, MmapSource, ReadFailure, ReadGuard};
use crate::extraction::{EntryKind, ExtId, Extraction, Meta, Parts, Phase, Tree};
use crate::index::Notes;
use crate::name::Name;
use crate::node::{Children, Node};
use crate::parsers;
pub use crate::parsers::api::Options;
pub use crate::parsers::serial::protobuf::schema::Schemas;
pub use memory::release_free_memory;
use scheduler::Engine;
pub use shared::Event;
use shared::Shared;

/// An opened file: the shared extraction tree and the engine filling it.
pub struct Session {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    events: Receiver<Event>,
    from_index: bool,
    /// See [`Session::free_at_exit`].
    free_at_exit: bool,
    /// The opened bytes, which record their first read error (and hold
    /// the session's I/O counters).
    guard: Arc<ReadGuard>,
    /// What happened to its index.
    notes: Notes,
    /// What it was opened with: lazily loaded nodes are read with them.
    options: Options,
    /// The process that opened it (see [`Session::is_forked`]).
    pid: u32,
    /// The file or object it was opened from, for
    /// [`Session::fingerprint`].
    origin: Origin,
    /// The extractions of the index it was opened from, read in place:
    /// `pparse::fs` opens members through it without a tree.
    catalog: Option<Arc<crate::index::Catalog>>,
    /// Whether `shared.tree` holds the tree (a session opened from an
    /// index builds it from `catalog` when it is first asked for).
    built: std::sync::atomic::AtomicBool,
    /// Held while the tree is built, so that it is built once.
    building: parking_lot::Mutex<()>,
}

/// What a session's bytes were opened from.
#[derive(Clone, Default)]
enum Origin {
    /// Bytes handed over (memory, a test source).
    #[default]
    Bytes,
    File(std::path::PathBuf),
    Remote(Arc<crate::data::RemoteSource>),
}

/// What a session counted and noted, kept by a front end that reports it
/// once the session is gone ([`Session::ledger`]); or a reader's own,
/// for bytes it reads outside a session ([`Ledger::counters`]).
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    counters: Arc<Counters>,
    notes: Notes,
}

impl Ledger {
    /// See [`Session::io_stats`].
    pub fn io_stats(&self) -> IoStats {
        self.counters.snapshot()
    }

    /// The counters to give a source read outside a session
    /// ([`MmapSource::open_counted`]), so its reads count here.
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// See [`Session::take_notes`].
    pub fn take_notes(&self) -> Vec<String> {
        self.notes.take()
    }
}

impl Session {
    /// Maps `path` and starts parsing it in the background.
    /// A folder opens as a root whose members are its files.
    pub fn open(path: &Path, opts: Options) -> std::io::Result<Session> {
        let meta = std::fs::metadata(path)?;
        let is_dir = meta.is_dir();
        // A device or a FIFO has no end to map or to wait for: /dev/zero
        // would be read forever.
        if !is_dir && !meta.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "not a regular file or a folder (a device, FIFO or socket)",
            ));
        }
        let (data, kind): (Data, EntryKind) = if is_dir {
            (
                Arc::new(crate::data::MemSource::new(Vec::new())),
                EntryKind::Dir,
            )
        } else {
            (
                Arc::new(MmapSource::open_counted(path, Some(&Default::default()))?),
                EntryKind::Root,
            )
        };
        let guard = Arc::new(ReadGuard::new(data));
        let data: Data = guard.clone();
        let name = Name::new(
            path.file_name()
                .map(|n| n.as_encoded_bytes().to_vec())
                .unwrap_or_else(|| path.as_os_str().as_encoded_bytes().to_vec()),
        );
        let notes = Notes::default();
        let plan = if is_dir {
            None
        } else {
            crate::index::Plan::new(path, &opts, &notes)
        };
        if let Some(cat) = plan
            .as_ref()
            .and_then(|p| p.open(data.clone(), name.clone(), Some(path)))
        {
            let mut s = Session::from_catalog(Arc::new(cat), guard);
            s.notes = notes;
            s.options = opts;
            s.origin = Origin::File(path.to_path_buf());
            return Ok(s);
        }
        let mut s = Session::start_file(
            name,
            guard,
            kind,
            Some(path.to_path_buf()),
            opts,
            plan,
            notes,
        );
        if !is_dir {
            s.origin = Origin::File(path.to_path_buf());
        }
        Ok(s)
    }

    /// The identity of this version of the file or object the session
    /// reads (size, mtime or the server's version, and a hash of its
    /// ends; see [`crate::index::fingerprint_file`]): what a cache of its
    /// members outside pparse can key them by. `None` for bytes handed
    /// over or a folder; an error when the file cannot be read.
    pub fn fingerprint(&self) -> std::io::Result<Option<String>> {
        match &self.origin {
            Origin::Bytes => Ok(None),
            Origin::File(p) => crate::index::fingerprint_file(p).map(Some),
            Origin::Remote(r) => crate::index::fingerprint_remote(r).map(Some),
        }
    }

    /// A session over a tree read back from an index: nothing to parse.
    /// Public for the fuzz target that forges indexes
    /// (`fuzz/fuzz_targets/index_forged.rs`).
    #[doc(hidden)]
    pub fn restored(tree: Tree, guard: Arc<ReadGuard>) -> Session {
        let (tx, rx) = bounded(1);
        let _ = tx.try_send(Event::Finished);
        Session {
            shared: Arc::new(Shared::new(tree, tx, true)),
            thread: None,
            events: rx,
            from_index: true,
            free_at_exit: false,
            guard,
            notes: Notes::default(),
            options: Options::default(),
            pid: std::process::id(),
            origin: Origin::Bytes,
            catalog: None,
            built: std::sync::atomic::AtomicBool::new(true),
            building: parking_lot::Mutex::new(()),
        }
    }

    /// A session over the catalog of an index (every record checked):
    /// nothing to parse, and no tree until one is asked for
    /// ([`Session::tree`]); members open through the catalog alone.
    /// Public for the fuzz target that forges indexes.
    #[doc(hidden)]
    pub fn from_catalog(catalog: Arc<crate::index::Catalog>, guard: Arc<ReadGuard>) -> Session {
        let mut s = Session::restored(Tree::default(), guard);
        s.catalog = Some(catalog);
        s.built = std::sync::atomic::AtomicBool::new(false);
        s
    }

    /// The catalog of the index the session was opened from, if any.
    pub(crate) fn catalog(&self) -> Option<&crate::index::Catalog> {
        self.catalog.as_deref()
    }

    /// Whether the session holds its extraction tree: always, except a
    /// session opened from an index that nothing has asked for the whole
    /// tree yet (its members are opened through the index's records).
    pub fn tree_is_built(&self) -> bool {
        self.built.load(Ordering::Acquire)
    }

    /// Builds the tree from the catalog, once.
    fn ensure_tree(&self) {
        if self.built.load(Ordering::Acquire) {
            return;
        }
        let _once = self.building.lock();
        if self.built.load(Ordering::Acquire) {
            return;
        }
        if let Some(cat) = &self.catalog {
            // Every record was checked when the index was opened, with the
            // checks that building makes: this fails only on a bug.
            let tree = cat.tree().unwrap_or_else(|why| {
                self.notes.note(format!(
                    "the index cannot be read ({why}); parse without it (--no-index)"
                ));
                let mut root = root_extraction(
                    self.tree_root_name(),
                    EntryKind::Root,
                    self.guard.clone(),
                    None,
                );
                root.phase = Phase::Leaf;
                Tree {
                    exts: std::iter::once(root).collect(),
                    ..Tree::default()
                }
            });
            *self.shared.tree.write() = tree;
        }
        self.built.store(true, Ordering::Release);
    }

    fn tree_root_name(&self) -> Name {
        self.catalog
            .as_ref()
            .and_then(|c| c.chain(0).ok())
            .and_then(|mut c| c.pop())
            .map_or_else(|| Name::from("?"), |e| e.name)
    }

    /// Whether this is a process forked from the one that opened the
    /// session (a `multiprocessing` or DataLoader worker). Its engine
    /// thread is not here, and its tree may stay locked by a thread that
    /// was working on it at the fork: the session can only be dropped
    /// (nothing waits: [`Session::wait_until`] returns `false`). Open the
    /// file again in the child; see `data::fork`.
    pub fn is_forked(&self) -> bool {
        std::process::id() != self.pid
    }

    /// Whether the tree was read back from an index (it then has no nodes).
    pub fn from_index(&self) -> bool {
        self.from_index
    }

    /// Opens the object at `url` (`http://`, `https://`, `s3://bucket/key`,
    /// see [`crate::data::RemoteSource`]) and starts parsing it; the root is
    /// named after the URL's last segment.
    ///
    /// With an index (`opts.index`: the user's cache, a file, a shared
    /// folder or a URL), a tree saved for this version of the object is
    /// read back instead of parsing, and a finished parse saves one.
    pub fn open_url(url: &str, opts: Options) -> std::io::Result<Session> {
        let src = Arc::new(crate::data::RemoteSource::open(url)?);
        let name = Name::new(src.name().to_vec());
        let data: Data = src.clone();
        let guard = Arc::new(ReadGuard::new(data));
        let notes = Notes::default();
        let plan = crate::index::Plan::for_remote(&src, &opts, &notes);
        let origin = Origin::Remote(src);
        if let Some(cat) = plan
            .as_ref()
            .and_then(|p| p.open(guard.clone(), name.clone(), None))
        {
            let mut s = Session::from_catalog(Arc::new(cat), guard);
            s.notes = notes;
            s.options = opts;
            s.origin = origin;
            return Ok(s);
        }
        let mut s = Session::start_file(name, guard, EntryKind::Root, None, opts, plan, notes);
        s.origin = origin;
        Ok(s)
    }

    /// Starts parsing bytes held in memory (tests, small inputs).
    pub fn from_bytes(name: &str, bytes: Vec<u8>, opts: Options) -> Session {
        let data: Data = Arc::new(crate::data::MemSource::new(bytes));
        Session::start(Name::from(name), data, opts)
    }

    /// Starts parsing `data` under the root name `name`.
    pub fn start(name: Name, data: Data, opts: Options) -> Session {
        Session::start_file(
            name,
            Arc::new(ReadGuard::new(data)),
            EntryKind::Root,
            None,
            opts,
            None,
            Notes::default(),
        )
    }

    /// Starts the engine on `guard`, the opened bytes: a read error it
    /// records stops the parse (see [`ReadGuard`]).
    fn start_file(
        name: Name,
        guard: Arc<ReadGuard>,
        kind: EntryKind,
        file: Option<std::path::PathBuf>,
        opts: Options,
        index: Option<crate::index::Plan>,
        notes: Notes,
    ) -> Session {
        let root = root_extraction(name, kind, guard.clone(), file.clone());
        crate::data::fork::protect();
        let (tx, rx) = bounded(1);
        let tree = Tree {
            exts: std::iter::once(root).collect(),
            ..Tree::default()
        };
        let shared = Arc::new(Shared::new(tree, tx, false));
        let engine_shared = shared.clone();
        let engine_guard = guard.clone();
        // A parse for one PATH leaves most of the tree unparsed: no index.
        let whole = opts.focus.is_none();
        let options = opts.clone();
        let thread = std::thread::Builder::new()
            .name("pparse-engine".into())
            .spawn(move || {
                let run = std::panic::AssertUnwindSafe(|| {
                    Engine::new(engine_shared.clone(), opts, engine_guard.clone()).run();
                });
                if let Err(panic) = std::panic::catch_unwind(run) {
                    *engine_shared.failure.lock() = Some(panic_message(&*panic));
                } else if let Some(plan) = index
                    && whole
                    && !engine_shared.cancel.load(Ordering::Acquire)
                    // A parse a read error stopped is not what the file holds.
                    && engine_guard.failure().is_none()
                {
                    // Before `finished`: a command that exits once the
                    // parse is over must not exit before its index is on disk.
                    plan.save(&engine_shared.tree.read());
                }
                {
                    let _g = engine_shared.over.lock();
                    engine_shared.finished.store(true, Ordering::Release);
                    engine_shared.over_cv.notify_all();
                }
                let _ = engine_shared.events.try_send(Event::Finished);
            })
            .expect("spawn engine thread");
        Session {
            shared,
            thread: Some(thread),
            events: rx,
            from_index: false,
            free_at_exit: false,
            guard,
            notes,
            options,
            pid: std::process::id(),
            origin: Origin::Bytes,
            catalog: None,
            built: std::sync::atomic::AtomicBool::new(true),
            building: parking_lot::Mutex::new(()),
        }
    }

    /// The extraction tree as it is now (partial while parsing goes on).
    /// Hold the guard briefly: the engine waits for it to commit results.
    pub fn tree(&self) -> RwLockReadGuard<'_, Tree> {
        self.ensure_tree();
        self.shared.tree.read()
    }

    /// Change notifications for a UI (coalesced: at most one is pending).
    pub fn events(&self) -> &Receiver<Event> {
        &self.events
    }

    /// Why the engine stopped early, if it failed (a bug: a panic in a
    /// parser). The tree holds what was committed before.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure.lock().clone()
    }

    /// The first error met reading the opened file or URL, if any: the
    /// parse stopped there, and the tree says so (see [`ReadGuard`]).
    pub fn read_failure(&self) -> Option<ReadFailure> {
        self.guard.failure().cloned()
    }

    /// Whether the parse is over (or was cancelled).
    pub fn is_finished(&self) -> bool {
        self.shared.finished.load(Ordering::Acquire)
    }

    /// Steps run so far (a cheap progress counter).
    pub fn steps(&self) -> u64 {
        self.shared.steps.load(Ordering::Relaxed)
    }

    /// Stops the engine at its next step boundary.
    pub fn cancel(&self) {
        self.shared.cancel.store(true, Ordering::Release);
    }

    /// Blocks until the parse is over.
    pub fn wait(&self) {
        self.wait_until(|_| false);
    }

    /// Blocks until `done(tree)` holds or the parse is over; returns whether
    /// `done` held. `done` is checked every 20 ms, so a waiting reader costs
    /// the engine nothing. The time it blocks counts as waiting in
    /// [`Session::io_stats`].
    pub fn wait_until(&self, mut done: impl FnMut(&Tree) -> bool) -> bool {
        if self.is_forked() {
            // No engine runs here, and its tree may be locked for good.
            return false;
        }
        self.ensure_tree();
        if done(&self.shared.tree.read()) {
            return true;
        }
        let started = std::time::Instant::now();
        let held = loop {
            let mut g = self.shared.over.lock();
            if self.is_finished() {
                drop(g);
                break done(&self.shared.tree.read());
            }
            self.shared
                .over_cv
                .wait_for(&mut g, Duration::from_millis(20));
            drop(g);
            if done(&self.shared.tree.read()) {
                break true;
            }
        };
        crate::data::stats::waited(Some(self.guard.io_counters()), started.elapsed());
        held
    }

    /// What happened to this session's index that a user should hear
    /// about (see [`Notes`]), removed.
    pub fn take_notes(&self) -> Vec<String> {
        self.notes.take()
    }

    /// This session's counters and notes, which outlive it.
    pub fn ledger(&self) -> Ledger {
        Ledger {
            counters: self.guard.io_counters().clone(),
            notes: self.notes.clone(),
        }
    }

    /// What this session read and decoded so far, for `--io-stats`: the
    /// bytes of its file, what its decoders made, and the time its readers
    /// waited (the heap's peak is the process's).
    pub fn io_stats(&self) -> IoStats {
        self.guard.io_counters().snapshot()
    }

    /// Loads the children of the node at `path` (top-level index first) of
    /// extraction `ext`, by re-parsing the node's range. Returns false if there
    /// is no such node or it has nothing to load. Runs on the caller's thread.
    pub fn load(&self, ext: ExtId, path: &[usize]) -> bool {
        let (node, data, parser) = {
            let t = self.tree();
            let Some(e) = t.get(ext) else { return false };
            let Some(n) = node_at(&e.nodes, path) else {
                return false;
            };
            if !matches!(n.children, Children::Unloaded) {
                return matches!(n.children, Children::Loaded(_));
            }
            let shallow = Node {
                children: Children::Unloaded,
                ..n.clone_shallow()
            };
            (shallow, e.data(), e.parser())
        };
        let Some(format) = parser.and_then(parsers::by_name) else {
            return false;
        };
        let children = (format.load)(&*data, &node, &self.options);
        let mut t = self.shared.tree.write();
        if let Some(n) = t
            .exts
            .get_mut(ext)
            .and_then(|e| node_at_mut(&mut e.nodes, path))
            && matches!(n.children, Children::Unloaded)
        {
            n.children = Children::Loaded(children.into());
        }
        true
    }

    /// Drops the loaded children of a node (they can be loaded again).
    pub fn unload(&self, ext: ExtId, path: &[usize]) {
        self.ensure_tree();
        let mut t = self.shared.tree.write();
        if let Some(n) = t
            .exts
            .get_mut(ext)
            .and_then(|e| node_at_mut(&mut e.nodes, path))
        {
            n.unload();
        }
    }
}

impl Session {
    /// Marks the session as the last thing its process needs: when it is
    /// dropped, parsing stops as always, but its tree is left for the
    /// process's exit to free. Freeing a million extractions one at a time
    /// (their sources, names, cached chunks) took a sixth of a command's
    /// time on a zip of small entries; the command-line tool asks for this.
    pub fn free_at_exit(&mut self) {
        self.free_at_exit = true;
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.cancel();
        if self.is_forked() {
            // The engine thread is the parent's: nothing to join here.
            std::mem::forget(self.thread.take());
        } else if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if self.free_at_exit {
            // One more owner that never lets go: the tree is never freed.
            std::mem::forget(Arc::clone(&self.shared));
        }
    }
}

fn node_at<'a>(nodes: &'a [Node], path: &[usize]) -> Option<&'a Node> {
    let (first, rest) = path.split_first()?;
    nodes.get(*first)?.descend(rest)
}

fn node_at_mut<'a>(nodes: &'a mut [Node], path: &[usize]) -> Option<&'a mut Node> {
    let (first, rest) = path.split_first()?;
    nodes.get_mut(*first)?.descend_mut(rest)
}

impl Node {
    /// A copy without the children (cheap, for handing to `load`).
    pub fn clone_shallow(&self) -> Node {
        Node {
            kind: self.kind,
            name: self.name.clone(),
            range: self.range,
            value: self.value.clone(),
            damage: self.damage.clone(),
            children: Children::Leaf,
        }
    }
}

/// The root extraction of a parse of `guard`'s bytes, not yet sniffed.
fn root_extraction(
    name: Name,
    kind: EntryKind,
    guard: Arc<ReadGuard>,
    file: Option<std::path::PathBuf>,
) -> Extraction {
    let data: Data = guard;
    Extraction::new(
        0,
        None,
        0,
        Parts {
            name,
            kind,
            bytes: data,
            form: crate::extraction::Form::Own,
            origin: None,
            declared_size: None,
            damage: ThinVec::new(),
            extra: file.clone().map(|file| {
                Box::new(crate::extraction::Extra {
                    file: Some(file),
                    ..Default::default()
                })
            }),
            phase: Phase::Waiting,
            meta: file.as_deref().map_or_else(Meta::default, file_meta),
        },
    )
}

/// The time and permissions of the file opened.
fn file_meta(path: &Path) -> Meta {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).map_or_else(
        |_| Meta::default(),
        |m| Meta::new(Some(m.mtime()), Some(m.mode())),
    )
}

/// The message of a caught panic.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Source;
    use crate::status::Status;
    use std::sync::atomic::AtomicBool;

    fn fixture(name: &str) -> Vec<u8> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/");
        std::fs::read(format!("{dir}{name}")).expect("fixture")
    }

    /// A source the test appends to, like a file still being written.
    struct Growing {
        bytes: parking_lot::Mutex<Vec<u8>>,
        done: AtomicBool,
    }

    impl Source for Growing {
        fn available(&self) -> u64 {
            self.bytes.lock().len() as u64
        }
        fn is_final(&self) -> bool {
            self.done.load(Ordering::Acquire)
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
            let b = self.bytes.lock();
            if offset >= b.len() as u64 {
                return Ok(0);
            }
            let n = buf.len().min(b.len() - offset as usize);
            buf[..n].copy_from_slice(&b[offset as usize..offset as usize + n]);
            Ok(n)
        }
        fn describe(&self) -> &'static str {
            "growing"
        }
    }

    /// A file whose last bytes arrive, and which is then complete, right
    /// after a read that stopped short at or past byte `at`: the moment a
    /// parser that reads and then asks whether the file is final must not
    /// take for its end.
    struct ArrivesAfterShortRead {
        all: Vec<u8>,
        shown: std::sync::atomic::AtomicUsize,
        at: u64,
    }

    impl Source for ArrivesAfterShortRead {
        fn available(&self) -> u64 {
            self.shown.load(Ordering::Acquire) as u64
        }
        fn is_final(&self) -> bool {
            self.shown.load(Ordering::Acquire) == self.all.len()
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
            let shown = self.shown.load(Ordering::Acquire);
            let n = buf.len().min(shown.saturating_sub(offset as usize));
            buf[..n].copy_from_slice(&self.all[offset as usize..offset as usize + n]);
            if n < buf.len() && offset >= self.at {
                self.shown.store(self.all.len(), Ordering::Release);
            }
            Ok(n)
        }
        fn describe(&self) -> &'static str {
            "arriving"
        }
    }

    /// The gzip trailer's last bytes arrive just after a read missed
    /// them: the member is complete, not cut off (a race a busy machine
    /// hit in `readers_see_partial_trees_while_bytes_arrive`).
    #[test]
    fn a_trailer_that_arrives_after_a_short_read_is_not_cut_off() {
        let gz = fixture("nested.tar.gz");
        let n = gz.len();
        let src = Arc::new(ArrivesAfterShortRead {
            all: gz,
            shown: std::sync::atomic::AtomicUsize::new(n - 4),
            at: n as u64 - 8,
        });
        let s = Session::start(Name::from("nested.tar.gz"), src as Data, Options::default());
        s.wait();
        let t = s.tree();
        assert_eq!(t.status_of(0), Status::Complete);
    }

    /// A file whose last bytes arrive, and which is then complete, at the
    /// `k`-th time something looks how far it goes: the `k`-th call of
    /// `available()`, just after it answered, or the `k`-th read that
    /// stopped short. A parser that learns the length (or reads short) and
    /// then asks whether the file is final takes a complete file for a cut
    /// one at some `k`.
    struct ArrivesAtLook {
        all: Vec<u8>,
        shown: std::sync::atomic::AtomicUsize,
        looks: std::sync::atomic::AtomicUsize,
        k: usize,
    }

    impl ArrivesAtLook {
        fn look(&self) {
            if self.looks.fetch_add(1, Ordering::SeqCst) + 1 == self.k {
                self.reveal();
            }
        }
        fn reveal(&self) {
            self.shown.store(self.all.len(), Ordering::SeqCst);
        }
    }

    impl Source for ArrivesAtLook {
        fn available(&self) -> u64 {
            let n = self.shown.load(Ordering::SeqCst) as u64;
            self.look();
            n
        }
        fn is_final(&self) -> bool {
            self.shown.load(Ordering::SeqCst) == self.all.len()
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
            let shown = self.shown.load(Ordering::SeqCst);
            let n = buf.len().min(shown.saturating_sub(offset as usize));
            buf[..n].copy_from_slice(&self.all[offset as usize..offset as usize + n]);
            if n < buf.len() {
                self.look();
            }
            Ok(n)
        }
        fn describe(&self) -> &'static str {
            "arriving"
        }
    }

    /// Whatever moment a file's last bytes arrive at, once it is complete
    /// every parser gives what it gives on the whole file at once.
    #[test]
    fn the_moment_the_last_bytes_arrive_changes_nothing() {
        let files = [
            "nested.tar.gz",
            "ustar.tar",
            "json/nested.json",
            "safetensors/metadata.safetensors",
            "gguf/model.gguf",
            "compress/small.xz",
            "npy/c8_le.npy",
            "msgpack/types.msgpack",
            "onnx/attrs.onnx",
            "wandb/current-core.wandb",
            "paddle/b2-cnn.txt",
            "plain.zip",
            "multi.gz",
            "pax.tar",
            "compress/nested.tar.bz2",
            "compress/nested.tar.xz",
            "compress/nested.tar.zst",
            "npy/compressed.npz",
            "torch/dtypes.pt",
            "pickle/hand_inst_obj.pkl",
            "jar/sym.jar",
        ];
        let mut wrong = Vec::new();
        for file in files {
            let all = fixture(file);
            let name = file.rsplit('/').next().unwrap();
            let reference = {
                let s = Session::from_bytes(name, all.clone(), Options::default());
                s.wait();
                listing(&s.tree())
            };
            let n = all.len();
            for cut in [n - 1, n / 2] {
                for k in 1..=16 {
                    let src = Arc::new(ArrivesAtLook {
                        all: all.clone(),
                        shown: std::sync::atomic::AtomicUsize::new(cut),
                        looks: Default::default(),
                        k,
                    });
                    let s =
                        Session::start(Name::from(name), src.clone() as Data, Options::default());
                    // Nobody looked for a while: the parsers wait for bytes
                    // they will not ask about again; they come.
                    let mut last = usize::MAX;
                    s.wait_until(|_| {
                        let now = src.looks.load(Ordering::SeqCst);
                        if now == last {
                            src.reveal();
                        }
                        last = now;
                        false
                    });
                    if listing(&s.tree()) != reference {
                        wrong.push(format!("{file}: cut at {cut}, arrived at look {k}"));
                    }
                }
            }
        }
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    /// Every extraction's path, size and status, in path order (the order
    /// in which extractions are found depends on how the bytes arrive).
    fn listing(t: &Tree) -> Vec<(String, u64, Status)> {
        let mut v: Vec<_> = (0..t.len())
            .map(|i| (t.path_of(i), t.exts[i].size(), t.status_of(i)))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn readers_see_partial_trees_while_bytes_arrive() {
        let gz = fixture("nested.tar.gz");
        let reference = {
            let s = Session::from_bytes("nested.tar.gz", gz.clone(), Options::default());
            s.wait();
            listing(&s.tree())
        };
        let src = Arc::new(Growing {
            bytes: parking_lot::Mutex::new(Vec::new()),
            done: AtomicBool::new(false),
        });
        let s = Session::start(
            Name::from("nested.tar.gz"),
            src.clone() as Data,
            Options::default(),
        );
        let mut counts = Vec::new();
        for chunk in gz.chunks(4096) {
            src.bytes.lock().extend_from_slice(chunk);
            // Wait for the engine to take the new bytes in (an event, with
            // a generous deadline on a busy machine), reading the tree
            // meanwhile: it must stay readable.
            let len = src.bytes.lock().len() as u64;
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            s.wait_until(|t| {
                t.root().progress().done + 64 >= len || std::time::Instant::now() > deadline
            });
            let t = s.tree();
            for e in &t.exts {
                for &c in &e.children {
                    assert_eq!(t.exts[c].parent(), Some(e.id()));
                }
            }
            counts.push(t.len());
        }
        assert!(
            !s.is_finished(),
            "the parse must wait for more bytes, not stop"
        );
        src.done.store(true, Ordering::Release);
        s.wait();
        assert!(counts.windows(2).all(|w| w[0] <= w[1]));
        assert!(
            counts[counts.len() / 2] > 1,
            "members appear before the end"
        );
        assert!(counts[counts.len() / 2] < reference.len());
        assert_eq!(listing(&s.tree()), reference);
        let t = s.tree();
        let n = gz.len() as u64;
        assert_eq!(
            t.root().progress(),
            crate::extraction::Progress {
                done: n,
                total: Some(n)
            }
        );
    }

    #[test]
    fn nodes_load_unload_and_load_again() {
        let s = Session::from_bytes("ustar.tar", fixture("ustar.tar"), Options::default());
        s.wait();
        let id = 0;
        assert!(matches!(
            s.tree().exts[id].nodes[0].children,
            Children::Unloaded
        ));
        let children = || -> Vec<String> {
            s.tree().exts[id].nodes[0]
                .loaded_children()
                .iter()
                .map(|n| format!("{} {:?} {:?}", n.name, n.range, n.value))
                .collect()
        };
        assert!(s.load(id, &[0]));
        let first = children();
        assert!(first.iter().any(|l| l.starts_with("header")));
        s.unload(id, &[0]);
        assert!(matches!(
            s.tree().exts[id].nodes[0].children,
            Children::Unloaded
        ));
        assert!(s.load(id, &[0]));
        assert_eq!(first, children());
    }

    #[test]
    fn cancel_stops_a_long_parse() {
        // 12,000 gzip members (4,000 copies of a 3-member file) to decode.
        let gz = fixture("multi.gz");
        let mut big = Vec::new();
        for _ in 0..4000 {
            big.extend_from_slice(&gz);
        }
        let s = Session::from_bytes("big.gz", big, Options::default());
        std::thread::sleep(Duration::from_millis(20));
        s.cancel();
        let t0 = std::time::Instant::now();
        while !s.is_finished() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "cancel did not stop the engine"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Bytes whose reads fail from `from` on, as a disk with a bad
    /// sector (or a server that broke off) answers.
    struct Failing {
        bytes: Vec<u8>,
        from: u64,
        reads: std::sync::atomic::AtomicU64,
    }

    impl Source for Failing {
        fn available(&self) -> u64 {
            self.bytes.len() as u64
        }
        fn is_final(&self) -> bool {
            true
        }
        fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
            self.reads.fetch_add(1, Ordering::Relaxed);
            let end = offset.saturating_add(buf.len() as u64);
            if end > self.from && offset < self.bytes.len() as u64 {
                return Err(std::io::Error::other("input/output error"));
            }
            let b = self.bytes.get(offset as usize..).unwrap_or(&[]);
            let n = buf.len().min(b.len());
            buf[..n].copy_from_slice(&b[..n]);
            Ok(n)
        }
        fn describe(&self) -> &'static str {
            "failing"
        }
    }

    #[test]
    fn a_read_error_stops_the_parse_and_is_damage_never_an_end() {
        let tar = fixture("ustar.tar");
        // In a header past the first (a parser that read it again would
        // loop), and at the very first byte (the sniff).
        for from in [1024, 0] {
            let src = Arc::new(Failing {
                bytes: tar.clone(),
                from,
                reads: Default::default(),
            });
            let s = Session::start(Name::from("ustar.tar"), src.clone(), Options::default());
            s.wait();
            let failure = s.read_failure().expect("the failure is kept");
            assert!(failure.reason.contains("input/output error"), "{failure}");
            let t = s.tree();
            assert_eq!(t.worst_status(), Status::Corrupt, "from {from}");
            let said = t.root().damage.iter().any(|d| {
                d.reason.contains(&format!("offset {}", failure.offset))
                    && d.reason.contains("input/output error")
            });
            assert!(said, "from {from}: {:?}", t.root().damage);
            // The failed read is not tried again and again.
            let reads = src.reads.load(Ordering::Relaxed);
            assert!(reads < 100, "from {from}: {reads} reads");
        }
    }
}
