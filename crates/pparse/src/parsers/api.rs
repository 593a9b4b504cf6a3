//! The interface between the engine and a format: how a format is
//! described ([`Format`]), how it parses ([`Parser`], stepped with a
//! [`StepCx`]) and what it reports (nodes, damage, [`ChildSpec`] children).
//!
//! A parser is a resumable state machine: the engine calls [`Parser::step`]
//! again and again, each call doing a bounded amount of work and recording
//! what it found through the [`StepCx`]. A parser never waits: when it needs
//! bytes its source does not have yet it returns [`Step::Blocked`], and when
//! the source is final and the bytes never came it records the damage and
//! carries on or finishes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::data::{Data, InflateSource, Range, Source};
use crate::extraction::{EntryKind, ExtId, Form, Progress, Tree};
use crate::name::Name;
use crate::node::Node;
use crate::offer::Offers;
use crate::parsers::serial::protobuf::schema::Schemas;
use crate::status::Damage;

/// Tunables of a session.
#[derive(Clone, Debug)]
pub struct Options {
    /// Extractions nested deeper than this are not parsed (zip quines, bombs).
    pub max_depth: u32,
    /// Bytes a parser processes per step before yielding.
    pub step_bytes: u64,
    /// Most bytes all decoders of a session produce together: this many
    /// times the file's size, or [`Options::decode_floor`] if that is more.
    /// One deflate layer expands at most 1032 times, so no ordinary file
    /// reaches it; nested bombs (a zip of zips of zips) stop there with a note.
    pub decode_ratio: u64,
    /// See [`Options::decode_ratio`].
    pub decode_floor: u64,
    /// The protobuf message type the opened file is read as (`--message`),
    /// checked with [`Schemas::check_message`].
    pub message: Option<String>,
    /// The message types known to this session: the builtin schemas and
    /// the user's `.proto` files (`--proto`).
    pub schemas: Schemas,
    /// Whether the session reads and writes a persistent index of the
    /// file (the `index` module): off unless asked for.
    pub index: IndexMode,
    /// A PATH (see docs/contract.md) the session is opened for (`cat`):
    /// only the containers on the way to it are parsed, not the members
    /// beside it nor what it holds, and no index is written (the tree is not
    /// whole).
    pub focus: Option<String>,
}

/// Where a session keeps the index of its file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum IndexMode {
    /// No index is read or written.
    #[default]
    Off,
    /// In the user's cache folder (`$XDG_CACHE_HOME/pparse/index`).
    Cache,
    /// At this path, for this machine's copy of the file (its key holds
    /// the inode and change time).
    At(std::path::PathBuf),
    /// In this folder, shared by every process and machine that reads the
    /// same bytes: named by a hash of the file's size and ends, keyed
    /// without what differs between machines (see `index::key`).
    In(std::path::PathBuf),
    /// On an object store or web server: the object at this URL, or in the
    /// prefix when the URL ends with `/` (named as in a folder). Shared as
    /// [`IndexMode::In`]; written only to `s3://`.
    Url(String),
}

impl IndexMode {
    /// Where a user's `--index` (or Python's `index=`) puts the index: a
    /// URL (`s3://`, `http://`, `https://`), a folder (one that exists, or
    /// a path ending with `/`), else a file.
    pub fn place(arg: std::path::PathBuf) -> IndexMode {
        if let Some(s) = arg.to_str()
            && crate::data::is_remote_url(s)
        {
            return IndexMode::Url(s.to_string());
        }
        let folder = arg.as_os_str().as_encoded_bytes().ends_with(b"/") || arg.is_dir();
        if folder {
            IndexMode::In(arg)
        } else {
            IndexMode::At(arg)
        }
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_depth: 32,
            step_bytes: 4 << 20,
            decode_ratio: 1100,
            decode_floor: 4 << 30,
            message: None,
            schemas: Schemas::default(),
            index: IndexMode::Off,
            focus: None,
        }
    }
}

impl Options {
    /// What in these options changes what a parse finds, the `--proto`
    /// schemas included: an index made with other settings is not used.
    pub fn fingerprint(&self) -> String {
        format!(
            "max_depth={} decode_ratio={} decode_floor={} message={:?} window={} schemas={}",
            self.max_depth,
            self.decode_ratio,
            self.decode_floor,
            self.message,
            crate::data::decoder_window_limit(),
            self.schemas.user_digest()
        )
    }

    /// The decode budget for a file of `size` bytes.
    pub fn decode_budget(&self, size: u64) -> u64 {
        size.saturating_mul(self.decode_ratio)
            .max(self.decode_floor)
    }
}

/// Bytes from the start of an extraction that sniffers get to see.
pub const SNIFF_LEN: usize = 1024;
/// The most first bytes a parser hands over with a child it decoded
/// ([`ChildSpec::deflated`]): sniffers that look past [`Sniff::head`] (a
/// tar header further in) read no further than this.
pub const HEAD_LEN: usize = 8 * 1024;

/// One format: how to recognise it, parse it and re-load its nodes.
pub struct Format {
    /// Its name in the registry, `tree` output and JSON (`tar`, `zip`, ...).
    pub name: &'static str,
    /// Cheap recognition from the first bytes and the name.
    pub sniff: fn(&Sniff) -> bool,
    /// Starts a parser over an extraction's bytes.
    pub parse: fn(&Data, &Options) -> Box<dyn Parser>,
    /// Rebuilds the children of an unloaded node from its range, with the
    /// options of the session that parsed it (a `--proto` schema names the
    /// types of a message's fields).
    pub load: fn(&dyn Source, &Node, &Options) -> Vec<Node>,
    /// What it offers beyond nodes and children: tensors, pickles, records.
    pub offers: Offers,
    /// How far a file of this format that starts at 0 of the bytes given
    /// reaches, when its own structure says so (`None` from the function:
    /// it does not start there after all). Carving bounds what it finds
    /// with it; formats without one are taken to the end of the span.
    pub extent: Option<fn(&Data) -> Option<u64>>,
}

/// What a sniffer sees.
pub struct Sniff<'a> {
    /// Up to [`SNIFF_LEN`] first bytes (fewer if the extraction is shorter).
    pub head: &'a [u8],
    /// The extraction's display name.
    pub name: &'a str,
    /// All of the extraction's bytes.
    pub data: &'a Data,
    /// What its container says it is.
    pub kind: &'a EntryKind,
    /// The file on disk, for a whole file (see [`crate::Extraction::file`]).
    pub file: Option<&'a std::path::Path>,
    /// The session's options.
    pub options: &'a Options,
}

/// What a step achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Work was done and more remains: step again.
    Yield,
    /// Nothing more can be done until the source grows.
    Blocked,
    /// The parse is over.
    Done,
}

/// A resumable parser. See the module docs.
pub trait Parser: Send {
    /// Does a bounded amount of work; see [`Step`].
    fn step(&mut self, cx: &mut StepCx) -> Step;
}

/// A child extraction a parser found.
pub struct ChildSpec {
    /// Its name in its container (raw bytes).
    pub name: Name,
    /// What the container says it is.
    pub kind: EntryKind,
    /// Its bytes (or, see `form`, its parent's).
    pub data: Data,
    /// How the child's bytes are made from `data` (see
    /// [`ChildSpec::window`], [`ChildSpec::deflated`]).
    form: Form,
    /// Its first bytes (up to [`HEAD_LEN`]), when the parser has them in
    /// hand: the child is sniffed from them, not from its source.
    head: Option<Box<[u8]>>,
    /// The parent's bytes it comes from (a member's data, compressed bytes).
    pub origin: Option<Range>,
    /// The size its container declares.
    pub declared_size: Option<u64>,
    /// What is already known to be wrong with it.
    pub damage: Vec<Damage>,
    /// Set when the child is a whole file on disk.
    pub file: Option<std::path::PathBuf>,
    /// Whether the child is sniffed and parsed (false: its bytes are listed
    /// only, as for entries that overlap other entries).
    pub parse: bool,
    /// Its time and permissions, where the container records them.
    pub meta: crate::extraction::Meta,
    /// Parse it as this sibling was parsed, whatever its first bytes: a
    /// stream recovered after damage starts in the middle of what the
    /// stream before the damage held.
    pub like: Option<ExtId>,
}

impl ChildSpec {
    /// A child with its own bytes `data`.
    pub fn new(name: Name, kind: EntryKind, data: Data) -> ChildSpec {
        ChildSpec {
            name,
            kind,
            data,
            form: Form::Own,
            head: None,
            origin: None,
            declared_size: None,
            damage: Vec::new(),
            file: None,
            parse: true,
            meta: crate::extraction::Meta::default(),
            like: None,
        }
    }
    /// A child whose bytes are `parent`'s over `range`, verbatim (a tar
    /// member). No window object is kept per child; see
    /// [`crate::extraction::Extraction::data`].
    pub fn window(name: Name, kind: EntryKind, parent: &Data, range: Range) -> ChildSpec {
        let mut spec = ChildSpec::new(name, kind, parent.clone());
        spec.form = Form::Window;
        spec.origin = Some(range);
        spec
    }
    /// With its first bytes (up to [`HEAD_LEN`]), which the parser has in
    /// hand: it is sniffed from them.
    pub fn with_head(mut self, head: Box<[u8]>) -> ChildSpec {
        self.head = Some(head);
        self
    }
    /// A child whose bytes are the raw deflate data of `parent` over
    /// `range`, which the parser decoded and checked: it makes exactly
    /// `len` bytes, which start with `head`. No decoder is kept per child
    /// (see [`Form::Deflate`]).
    pub fn deflated(
        name: Name,
        kind: EntryKind,
        parent: &Data,
        range: Range,
        len: u64,
        head: Box<[u8]>,
    ) -> ChildSpec {
        let mut spec = ChildSpec::new(name, kind, parent.clone());
        spec.form = Form::Deflate;
        spec.origin = Some(range);
        spec.declared_size = Some(len);
        spec.head = Some(head);
        spec
    }
}

type Edit = Box<dyn FnOnce(&mut Tree) + Send>;

/// A child to sniff, with its first bytes when its parser gave them.
pub(crate) type NewChild = (ExtId, Option<Box<[u8]>>);

/// A parser's window on the engine during one step: its bytes, its budget,
/// and an outbox of results the engine commits to the shared tree in one
/// short write lock after the step.
pub struct StepCx<'a> {
    /// The bytes being parsed.
    pub data: &'a Data,
    /// Display name of the extraction being parsed.
    pub name: &'a str,
    /// Roughly how many bytes this step should process before yielding.
    pub budget: u64,
    /// The file on disk being parsed, when the bytes are a whole file.
    pub file: Option<&'a std::path::Path>,
    /// Bytes that decoders may still produce in this session (see
    /// [`crate::Options::decode_budget`]); decoders take from it with
    /// [`StepCx::decoded`] and stop with [`StepCx::budget_damage`] at zero.
    pub decode_left: u64,
    pub(crate) me: ExtId,
    pub(crate) next_ext: ExtId,
    pub(crate) node_count: usize,
    pub(crate) edits: Vec<Edit>,
    /// Children to sniff, with their first bytes when the parser gave them.
    pub(crate) new_children: Vec<NewChild>,
    pub(crate) depth: u32,
    /// The format was chosen by the extraction's name alone (a member named
    /// `x.json`): what does not parse is a note on the member, not damage.
    pub(crate) by_name: bool,
    /// Work handed to the engine's helper thread by this step.
    pub(crate) background: Vec<BackgroundWork>,
}

/// Work a step hands to the engine's helper thread, and the stream it
/// appends to (staged while it runs, published by the engine between steps).
pub(crate) struct BackgroundWork {
    pub(crate) feeds: Arc<InflateSource>,
    pub(crate) work: Box<dyn FnOnce(&Control) + Send>,
    /// Set when the parser drops its [`Background`].
    pub(crate) stop: Arc<AtomicBool>,
}

/// What handed-off work can ask of the engine while it runs.
pub struct Control {
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) ping: Box<dyn Fn() + Send>,
}

impl Control {
    /// Whether the work should stop now (its parser is gone: the session
    /// was closed or cancelled).
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Tells the engine that the stream has new bytes to publish.
    pub fn ping(&self) {
        (self.ping)();
    }
}

/// The result of work handed off with [`StepCx::background`]; dropping it
/// asks the work to stop.
pub struct Background<T> {
    rx: crossbeam_channel::Receiver<T>,
    stop: Arc<AtomicBool>,
}

impl<T> Drop for Background<T> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// How handed-off work stands.
pub enum Ready<T> {
    /// Done, with its result.
    Done(T),
    /// Still running (or waiting for the helper thread).
    Running,
    /// It panicked: no result will come.
    Lost,
}

impl<T> Background<T> {
    /// The result once the work is done (the parser is stepped again then).
    pub fn poll(&self) -> Ready<T> {
        match self.rx.try_recv() {
            Ok(t) => Ready::Done(t),
            Err(crossbeam_channel::TryRecvError::Empty) => Ready::Running,
            Err(crossbeam_channel::TryRecvError::Disconnected) => Ready::Lost,
        }
    }
}

impl<'a> StepCx<'a> {
    /// Maps a file found beside the one parsed (a shard, external data),
    /// counting its reads with this session's.
    pub fn open_beside(&self, path: &std::path::Path) -> std::io::Result<crate::data::MmapSource> {
        crate::data::MmapSource::open_counted(path, self.data.counters())
    }

    /// Appends a top-level node; returns its index for later edits.
    pub fn push_node(&mut self, node: Node) -> usize {
        let me = self.me;
        self.edits.push(Box::new(move |t: &mut Tree| {
            crate::extraction::push_tight(&mut t.exts[me].nodes, node);
        }));
        self.node_count += 1;
        self.node_count - 1
    }

    /// Makes room for `nodes` more top-level nodes and `children` more
    /// children at once, when the parser knows how many will come (a zip's
    /// directory): grown by doubling, a list of a million would hold room
    /// for up to twice as many.
    pub fn reserve(&mut self, nodes: usize, children: usize) {
        let me = self.me;
        self.edits.push(Box::new(move |t: &mut Tree| {
            let e = &mut t.exts[me];
            e.nodes.reserve_exact(nodes);
            e.children.reserve_exact(children);
        }));
    }

    /// Drops the top-level nodes pushed so far: the parser found that its
    /// bytes are better read another way (JSON that turns out to be JSON
    /// Lines) and reads them again.
    pub fn clear_nodes(&mut self) {
        let me = self.me;
        self.edits
            .push(Box::new(move |t: &mut Tree| t.exts[me].nodes.clear()));
        self.node_count = 0;
    }

    /// Changes a top-level node pushed earlier.
    pub fn edit_node(&mut self, index: usize, f: impl FnOnce(&mut Node) + Send + 'static) {
        let me = self.me;
        self.edits.push(Box::new(move |t: &mut Tree| {
            if let Some(n) = t.exts[me].nodes.get_mut(index) {
                f(n);
            }
        }));
    }

    /// Records damage in this extraction's bytes. For a member whose format
    /// was taken from its name alone, the damage becomes a note: the bytes
    /// are what its container holds, they just are not that format.
    pub fn damage(&mut self, d: Damage) {
        if self.by_name {
            self.note(format!("not read as its name suggests: {d}"));
            return;
        }
        let me = self.me;
        self.edits
            .push(Box::new(move |t: &mut Tree| t.add_damage(me, d)));
    }

    /// Says that this extraction's own checks cover every one of its bytes
    /// and held: unverified spans of its container do not reach it (see
    /// [`Tree::prove`]). A member whose format was taken from its name
    /// alone proves nothing.
    pub fn proved(&mut self) {
        if self.by_name {
            return;
        }
        let me = self.me;
        self.edits.push(Box::new(move |t: &mut Tree| t.prove(me)));
    }

    /// Says that child `child`'s own checks cover every one of its bytes
    /// and held (a zip entry decoded to its CRC and size): see
    /// [`Tree::prove`].
    pub fn child_proved(&mut self, child: ExtId) {
        self.edits
            .push(Box::new(move |t: &mut Tree| t.prove(child)));
    }

    /// Takes `n` decoded bytes from the session's decode budget.
    pub fn decoded(&mut self, n: u64) {
        self.decode_left = self.decode_left.saturating_sub(n);
    }

    /// What a decoder stopped by the decode budget reports on its output:
    /// the bytes are not all there, so it is truncated, and a note says why.
    pub fn budget_damage(&mut self, at: u64) -> Damage {
        self.note(
            "decoding stopped: the decoders of this session have produced their budget (by default 1100 times the file's size, at least 4 GiB); this looks like a decompression bomb",
        );
        Damage::truncated(
            Range::new(at, at),
            format!("decoding stopped after {at} bytes: the decode budget is used up"),
        )
    }

    /// Records a note on this extraction (see [`crate::Extraction::notes`]).
    pub fn note(&mut self, text: impl Into<Box<str>>) {
        let me = self.me;
        let text = text.into();
        self.edits.push(Box::new(move |t: &mut Tree| {
            t.exts[me].extra_mut().notes.push(text);
        }));
    }

    /// Records a note on a child.
    pub fn child_note(&mut self, child: ExtId, text: impl Into<Box<str>>) {
        let text = text.into();
        self.edits.push(Box::new(move |t: &mut Tree| {
            t.exts[child].extra_mut().notes.push(text);
        }));
    }

    /// Records damage in a child's bytes.
    pub fn child_damage(&mut self, child: ExtId, d: Damage) {
        self.edits
            .push(Box::new(move |t: &mut Tree| t.add_outer_damage(child, d)));
    }

    /// Records the size a child's container declares for it, once known
    /// (a zip entry's data descriptor comes after its bytes).
    pub fn child_declared_size(&mut self, child: ExtId, size: u64) {
        self.edits.push(Box::new(move |t: &mut Tree| {
            t.exts[child].set_declared_size(Some(size));
        }));
    }

    /// Reports how far the parse has got.
    pub fn progress(&mut self, done: u64, total: Option<u64>) {
        let me = self.me;
        self.edits.push(Box::new(move |t: &mut Tree| {
            t.exts[me].extra_mut().progress = Progress { done, total }
        }));
    }

    /// Adds a child extraction; it is sniffed and parsed in its turn.
    pub fn add_child(&mut self, spec: ChildSpec) -> ExtId {
        let id = self.next_ext;
        self.next_ext += 1;
        let me = self.me;
        let depth = self.depth + 1;
        let mut spec = spec;
        let phase = if spec.parse {
            self.new_children.push((id, spec.head.take()));
            crate::extraction::Phase::Waiting
        } else {
            crate::extraction::Phase::Leaf
        };
        self.edits.push(Box::new(move |t: &mut Tree| {
            debug_assert_eq!(t.exts.len(), id);
            t.damage_count += spec.damage.len();
            crate::extraction::push_tight(&mut t.exts[me].children, id);
            let extra = (spec.file.is_some() || spec.like.is_some()).then(|| {
                Box::new(crate::extraction::Extra {
                    file: spec.file,
                    like: spec.like,
                    ..Default::default()
                })
            });
            t.exts.push(crate::extraction::Extraction::new(
                id,
                Some(me),
                depth,
                crate::extraction::Parts {
                    name: spec.name,
                    kind: spec.kind,
                    bytes: spec.data,
                    form: spec.form,
                    origin: spec.origin,
                    declared_size: spec.declared_size,
                    damage: spec.damage.into(),
                    extra,
                    phase,
                    meta: spec.meta,
                },
            ));
            t.inherit_into(id);
        }));
        id
    }

    /// Runs `work` on the engine's helper thread, which appends to `feeds`
    /// while the engine steps the parsers of what it decodes: decoding a long
    /// stream then overlaps with parsing what it holds. The parser is stepped
    /// again as soon as the work is done (until then it answers
    /// [`Step::Blocked`]); the stream's new bytes reach readers between steps
    /// (see [`InflateSource::stage`]).
    pub fn background<T: Send + 'static>(
        &mut self,
        feeds: Arc<InflateSource>,
        work: impl FnOnce(&Control) -> T + Send + 'static,
    ) -> Background<T> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        let stop = Arc::new(AtomicBool::new(false));
        feeds.stage(true);
        self.background.push(BackgroundWork {
            feeds,
            work: Box::new(move |ctl: &Control| {
                let _ = tx.send(work(ctl));
            }),
            stop: stop.clone(),
        });
        Background { rx, stop }
    }

    pub(crate) fn finish(self) -> (Vec<Edit>, Vec<NewChild>, usize, Vec<BackgroundWork>) {
        (
            self.edits,
            self.new_children,
            self.node_count,
            self.background,
        )
    }
}

/// Reads the first bytes of a source for sniffing; a read that fails is
/// an error, never an empty head (which would make the bytes no format,
/// silently).
pub fn head(data: &dyn Source) -> std::io::Result<Vec<u8>> {
    let n = (data.available() as usize).min(SNIFF_LEN);
    let mut buf = vec![0u8; n];
    let k = data.read_at(0, &mut buf)?;
    buf.truncate(k);
    Ok(buf)
}
