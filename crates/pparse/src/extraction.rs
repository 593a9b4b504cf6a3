//! Extractions: named byte ranges that parsers parse, forming a tree.
//!
//! The file is the root extraction. A parser that finds embedded data (the
//! decoded stream of a gzip file, a tar member, a zip entry) makes it a child
//! extraction, which is then sniffed and parsed in turn, to any depth.

pub(crate) mod dirs;

use thin_vec::ThinVec;

use crate::data::{Data, Range};
use crate::name::Name;
use crate::node::Node;
use crate::status::{Damage, Status, worst};

/// Index of an extraction in its [`Tree`].
pub type ExtId = usize;

/// Pushes onto a list that most records keep short (a stream's one child,
/// a gzip file's one member node): one slot at a time up to four, then by
/// doubling. A first push would otherwise reserve four slots, and a tar of
/// a million small `.gz` members would pay for three empty ones each.
pub(crate) fn push_tight<T>(v: &mut ThinVec<T>, x: T) {
    if v.len() == v.capacity() && v.len() < 4 {
        v.reserve_exact(1);
    }
    v.push(x);
}

/// What an extraction is in its container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// The file pparse was asked to open.
    Root,
    /// Bytes decoded from the parent (a gzip stream).
    Stream,
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link, with its target.
    Symlink(Label),
    /// A hard link, with the member it links to.
    HardLink(Label),
    /// A character or block device.
    Device,
    /// A named pipe.
    Fifo,
    /// A container entry type pparse does not interpret (tar typeflag ...).
    Other(Label),
}

/// The text an [`EntryKind`] carries (a link's target, what an unusual
/// entry is), behind one thin pointer: every record's kind then takes 16
/// bytes, not 24, and only the few entries with a text pay for it.
#[derive(Clone, PartialEq, Eq)]
pub struct Label(Box<Box<str>>);

impl std::ops::Deref for Label {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl std::fmt::Debug for Label {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

impl From<String> for Label {
    fn from(s: String) -> Label {
        Label(Box::new(s.into_boxed_str()))
    }
}

impl From<&str> for Label {
    fn from(s: &str) -> Label {
        Label(Box::new(s.into()))
    }
}

impl From<Box<str>> for Label {
    fn from(s: Box<str>) -> Label {
        Label(Box::new(s))
    }
}

impl EntryKind {
    /// A short word for listings (`file`, `dir`, `symlink`, ...).
    pub fn as_str(&self) -> &str {
        match self {
            EntryKind::Root => "file",
            EntryKind::Stream => "stream",
            EntryKind::File => "file",
            EntryKind::Dir => "dir",
            EntryKind::Symlink(_) => "symlink",
            EntryKind::HardLink(_) => "hardlink",
            EntryKind::Device => "device",
            EntryKind::Fifo => "fifo",
            EntryKind::Other(_) => "other",
        }
    }
    /// Whether the entry's bytes are file contents worth sniffing and writing.
    pub fn has_content(&self) -> bool {
        matches!(self, EntryKind::Root | EntryKind::Stream | EntryKind::File)
    }
}

/// The modification time and permissions a container records for a
/// member (tar headers, zip's DOS times), kept in 10 bytes: ten million
/// members pay for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The time's four quarters, low first: kept 2-aligned, the 10 bytes
    /// pack beside the extraction's smaller fields.
    mtime: [u16; 4],
    /// The permission bits, `u16::MAX` when none is recorded.
    mode: u16,
}

impl Default for Meta {
    fn default() -> Self {
        Meta::new(None, None)
    }
}

impl Meta {
    /// What the container says: seconds since the Unix epoch, and the
    /// permission bits (`0o7777`), each when it says it.
    pub fn new(mtime: Option<i64>, mode: Option<u32>) -> Meta {
        let t = mtime.filter(|&t| t != i64::MIN).unwrap_or(i64::MIN) as u64;
        Meta {
            mtime: [
                t as u16,
                (t >> 16) as u16,
                (t >> 32) as u16,
                (t >> 48) as u16,
            ],
            // 0o7777 is below `u16::MAX`.
            mode: mode.map_or(u16::MAX, |m| (m & 0o7777) as u16),
        }
    }
    /// Modification time, seconds since the Unix epoch.
    pub fn mtime(&self) -> Option<i64> {
        let t = self
            .mtime
            .iter()
            .rev()
            .fold(0u64, |t, &q| t << 16 | u64::from(q)) as i64;
        (t != i64::MIN).then_some(t)
    }
    /// Permission bits.
    pub fn mode(&self) -> Option<u32> {
        (self.mode != u16::MAX).then_some(u32::from(self.mode))
    }
}

/// The rarely set parts of an [`Extraction`].
#[derive(Default)]
pub struct Extra {
    /// The file on disk these bytes are, when they are a whole file (the
    /// opened file, or a file in an opened folder): parsers use it to find
    /// sibling files (shards, external data).
    pub file: Option<std::path::PathBuf>,
    /// Which of `damage` were found by the layer outside (a gzip layer's
    /// CRC failure in the stream a tar parser reads): those, when corrupt,
    /// pass down to the members cut from these bytes.
    pub outer_damage: Vec<u32>,
    /// What a user should know that is not damage: a member taken for a
    /// format by its name only that does not read as one, a budget that
    /// stopped work. Notes never change the status.
    pub notes: Vec<Box<str>>,
    /// How far the parse of this extraction has got (only parsed
    /// extractions have one).
    pub progress: Progress,
    /// The sibling whose format it is parsed as (see
    /// [`crate::parsers::ChildSpec::like`]).
    pub like: Option<ExtId>,
}

/// Where an extraction is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for enough bytes to be sniffed.
    Waiting,
    /// A parser is working on it.
    Parsing,
    /// Parsed to the end.
    Done,
    /// No parser recognised it (or none applies): raw bytes.
    Leaf,
}

/// How far the parse of one extraction has got.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes parsed so far.
    pub done: u64,
    /// Bytes to parse in all, when known.
    pub total: Option<u64>,
}

/// How an extraction's bytes are made from the source it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    /// The source is its bytes.
    Own,
    /// The source is the parent's; its bytes are the parent's over
    /// `origin`, verbatim (a tar member, a stored zip entry).
    Window,
    /// The source is the parent's; its bytes are the raw deflate data over
    /// `origin`, decoded, and `declared_size` long: a zip entry that was
    /// decoded and checked once, decoded again when read.
    Deflate,
}

/// One node of the extraction tree.
///
/// Ten million members each pay for one, so it is kept small (136 bytes):
/// ids are 4 bytes, its depth 2, its position among its parent's children
/// is not kept ([`Tree::position`] finds it), and the optional offsets, size and format are kept
/// without their `Option` tags, behind accessors ([`Extraction::parent`],
/// [`Extraction::origin`], [`Extraction::declared_size`],
/// [`Extraction::parser`]).
pub struct Extraction {
    /// Its index in [`Tree::exts`] (see [`Extraction::id`]).
    id: u32,
    /// The extraction it was found in, [`NO_PARENT`] for the root.
    parent: u32,
    /// Containers above it (the root is at 0; see [`Extraction::depth`]).
    depth: u16,
    /// Its time and permissions, where its container records them.
    pub meta: Meta,
    /// Extractions found in it, in the order found.
    pub children: ThinVec<ExtId>,
    /// Its name as its container gives it (raw bytes).
    pub name: Name,
    /// What its container says it is.
    pub kind: EntryKind,
    /// Its own source, or the parent's source as `form` says: see
    /// [`Extraction::data`].
    pub(crate) bytes: Data,
    /// See [`Extraction::origin`]; [`NO_RANGE`] when it has none.
    origin: Range,
    /// See [`Extraction::declared_size`], when `declares` says so.
    declared_size: u64,
    /// See [`Extraction::parser`]: the registry entry's name, by a thin
    /// reference to it (8 bytes where the name itself takes 16).
    parser: Option<&'static &'static str>,
    /// What is truncated or corrupt in it, in its own offsets.
    pub damage: ThinVec<Damage>,
    /// What few extractions have, kept out of line: a tar of ten million
    /// members pays 8 bytes per member for it, not 72.
    pub extra: Option<Box<Extra>>,
    /// Its parsed structure's top-level nodes.
    pub nodes: ThinVec<Node>,
    /// How its bytes are made from `bytes`.
    pub(crate) form: Form,
    /// How far its parse has got.
    pub phase: Phase,
    /// Its own checks cover every one of its bytes and hold (a gzip file
    /// whose every member's CRC-32 and size match, a zip entry decoded to
    /// its CRC): an unverified span of its container does not reach it
    /// ([`Tree::prove`]).
    pub proved: bool,
    /// Whether `declared_size` holds a size (every `u64` is one a file can
    /// declare, so none can mean "none").
    declares: bool,
}

/// The parent field of the root.
const NO_PARENT: u32 = u32::MAX;
/// The origin field of an extraction that has none: no range has its start
/// past its end.
const NO_RANGE: Range = Range {
    start: u64::MAX,
    end: 0,
};

/// What an extraction is made of, as a parser or an index gives it; the
/// engine places it in its tree ([`Extraction::new`]).
pub(crate) struct Parts {
    pub name: Name,
    pub kind: EntryKind,
    pub bytes: Data,
    pub form: Form,
    pub origin: Option<Range>,
    pub declared_size: Option<u64>,
    pub damage: ThinVec<Damage>,
    pub extra: Option<Box<Extra>>,
    pub phase: Phase,
    pub meta: Meta,
}

/// An id in the 4 bytes a record keeps it in. Each extraction costs over a
/// hundred bytes of memory, so a tree runs out of memory long before it
/// holds four billion of them.
fn id32(id: ExtId) -> u32 {
    u32::try_from(id)
        .ok()
        .filter(|&i| i != NO_PARENT)
        .expect("fewer than 4 billion extractions")
}

impl Extraction {
    /// A record placed as `id` below `parent` at `depth`, with no
    /// children, nodes or format yet.
    pub(crate) fn new(id: ExtId, parent: Option<ExtId>, depth: u32, p: Parts) -> Self {
        let mut e = Extraction {
            id: id32(id),
            parent: parent.map_or(NO_PARENT, id32),
            depth: u16::try_from(depth).unwrap_or(u16::MAX),
            meta: p.meta,
            children: ThinVec::new(),
            name: p.name,
            kind: p.kind,
            bytes: p.bytes,
            origin: NO_RANGE,
            declared_size: 0,
            parser: None,
            damage: p.damage,
            extra: p.extra,
            nodes: ThinVec::new(),
            form: p.form,
            phase: p.phase,
            proved: false,
            declares: false,
        };
        e.set_origin(p.origin);
        e.set_declared_size(p.declared_size);
        e
    }
    /// Its index in [`Tree::exts`].
    pub fn id(&self) -> ExtId {
        self.id as ExtId
    }
    /// The extraction it was found in (`None` for the root).
    pub fn parent(&self) -> Option<ExtId> {
        (self.parent != NO_PARENT).then_some(self.parent as ExtId)
    }
    /// The parent's bytes this extraction comes from (a member's data, or
    /// the compressed bytes a stream was decoded from).
    pub fn origin(&self) -> Option<Range> {
        (self.origin.start <= self.origin.end).then_some(self.origin)
    }
    /// Sets [`Extraction::origin`].
    pub fn set_origin(&mut self, origin: Option<Range>) {
        // `Range::new` keeps a range's start at or before its end, which
        // [`NO_RANGE`] is not.
        self.origin = origin.map_or(NO_RANGE, |r| Range::new(r.start, r.end));
    }
    /// Size the container declares, when it does (tar size, zip size).
    pub fn declared_size(&self) -> Option<u64> {
        self.declares.then_some(self.declared_size)
    }
    /// Sets [`Extraction::declared_size`].
    pub fn set_declared_size(&mut self, size: Option<u64>) {
        self.declares = size.is_some();
        self.declared_size = size.unwrap_or(0);
    }
    /// The format it was parsed as (a registry name).
    pub fn parser(&self) -> Option<&'static str> {
        self.parser.copied()
    }
    /// Sets [`Extraction::parser`] to a registry entry's name.
    pub fn set_parser(&mut self, name: &'static &'static str) {
        self.parser = Some(name);
    }
    /// Containers above it: the root is at 0. Kept in 2 bytes (the engine
    /// parses nothing below [`crate::Options::max_depth`], 32 by
    /// default); deeper than 65,535 it reads 65,535.
    pub fn depth(&self) -> u32 {
        u32::from(self.depth)
    }
    /// The extraction's bytes. A member stored verbatim keeps only its
    /// parent's source and `origin`, and its window is made here when asked
    /// for: ten million members then hold no window object each.
    ///
    /// A zip entry checked once keeps only its parent's source too, and is
    /// decoded again from it when asked for ([`Form::Deflate`]).
    pub fn data(&self) -> Data {
        let slice = |r: Range| -> Data {
            std::sync::Arc::new(crate::data::SliceSource::new(self.bytes.clone(), r))
        };
        match (self.form, self.origin()) {
            (Form::Window, Some(r)) => slice(r),
            (Form::Deflate, Some(r)) => {
                crate::data::InflateSource::checked(slice(r), self.declared_size().unwrap_or(0))
            }
            _ => self.bytes.clone(),
        }
    }
    /// Bytes available so far (see [`crate::data::Source::available`]),
    /// without making a window.
    pub fn available(&self) -> u64 {
        match (self.form, self.origin()) {
            (Form::Window, Some(r)) => self.bytes.available().min(r.end).saturating_sub(r.start),
            (Form::Deflate, Some(_)) => self.declared_size().unwrap_or(0),
            _ => self.bytes.available(),
        }
    }
    /// Whether no more bytes will come (see [`crate::data::Source::is_final`]).
    pub fn is_final(&self) -> bool {
        match (self.form, self.origin()) {
            (Form::Window, Some(r)) => self.bytes.is_final() || self.bytes.available() >= r.end,
            (Form::Deflate, Some(_)) => true,
            _ => self.bytes.is_final(),
        }
    }
    /// Whether the bytes are the parent's, verbatim (a tar member, a stored
    /// zip entry): damage to the parent's bytes there is damage to these.
    pub fn is_window(&self) -> bool {
        match self.form {
            Form::Own => self.bytes.is_window(),
            Form::Window => true,
            Form::Deflate => false,
        }
    }
    /// See [`Extra::file`].
    pub fn file(&self) -> Option<&std::path::Path> {
        self.extra.as_ref()?.file.as_deref()
    }
    /// See [`Extra::notes`].
    pub fn notes(&self) -> &[Box<str>] {
        self.extra.as_ref().map_or(&[], |x| &x.notes)
    }
    /// See [`Extra::progress`].
    pub fn progress(&self) -> Progress {
        self.extra
            .as_ref()
            .map_or_else(Progress::default, |x| x.progress)
    }
    /// See [`Extra::outer_damage`].
    pub fn outer_damage(&self) -> &[u32] {
        self.extra.as_ref().map_or(&[], |x| &x.outer_damage)
    }
    /// Drops what only a parse in progress needs (its progress), and the
    /// out-of-line part when nothing else is in it: a nested stream done
    /// parsing then holds no 112-byte box for a counter nobody reads. The
    /// root keeps its progress, which front ends show.
    pub(crate) fn settle_extra(&mut self) {
        if self.id() == 0 {
            return;
        }
        if let Some(x) = &mut self.extra {
            x.progress = Progress::default();
            if x.file.is_none()
                && x.outer_damage.is_empty()
                && x.notes.is_empty()
                && x.like.is_none()
            {
                self.extra = None;
            }
        }
    }
    /// The rarely set parts, created on first use.
    pub fn extra_mut(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Default::default)
    }
    /// Its own status: the worst of its damage.
    pub fn status(&self) -> Status {
        worst(&self.damage)
    }
    /// Its status, also counting bytes missing from its declared size
    /// (see [`Tree::status_of`]).
    pub fn status_counting_size(&self) -> Status {
        let mut st = self.status();
        if let Some(declared) = self.declared_size()
            && self.is_final()
            && self.size() < declared
        {
            st = st.max(Status::Truncated);
        }
        st
    }
    /// Bytes available now.
    pub fn size(&self) -> u64 {
        self.available()
    }
    /// Display name (escaped).
    pub fn display_name(&self) -> String {
        self.name.display()
    }
    /// A one-line summary of what went wrong, if anything.
    pub fn detail(&self) -> Option<String> {
        let first = self
            .damage
            .iter()
            .max_by_key(|d| d.status)
            .map(|d| d.to_string())?;
        if self.damage.len() > 1 {
            Some(format!("{first} (+{} more)", self.damage.len() - 1))
        } else {
            Some(first)
        }
    }
    /// Whether it holds no child extraction.
    pub fn is_leaf(&self) -> bool {
        self.children.is_empty()
    }
    /// A copy of the record with no children, no nodes and no extras,
    /// placed as `id` below `parent`: for tests that forge trees (an
    /// index's records are untrusted input), not for parsing.
    #[doc(hidden)]
    pub fn twin(&self, id: ExtId, parent: Option<ExtId>, depth: u32) -> Extraction {
        let mut e = Extraction::new(
            id,
            parent,
            depth,
            Parts {
                name: self.name.clone(),
                kind: self.kind.clone(),
                bytes: self.bytes.clone(),
                form: self.form,
                origin: self.origin(),
                declared_size: self.declared_size(),
                damage: self.damage.clone(),
                extra: None,
                phase: self.phase,
                meta: self.meta,
            },
        );
        e.parser = self.parser;
        e
    }
}

/// How many of an extraction's newest children a new damage is checked
/// against (more only while they reach into it), and how many of its
/// newest damages a new child is: bounded, so a file with a million
/// members and a million damages stays linear.
const INHERIT_SCAN: usize = 4096;
/// How many damages before a new child's start (in offset order) it is
/// checked against besides the newest ones and those inside it.
const NEAR_SCAN: usize = 256;

/// The damage `child` inherits from `d`, damage of its parent: when the
/// child's bytes are the parent's verbatim (a tar member, a stored zip
/// entry) and the corrupt or unverified span overlaps them, or a point
/// where bytes were lost lies strictly inside them. Unverified stays
/// unverified.
fn inherited(parent: &Extraction, child: &Extraction, d: &Damage) -> Option<Damage> {
    use crate::status::Status;
    if !matches!(d.status, Status::Corrupt | Status::Unverified) {
        return None;
    }
    let o = child.origin()?;
    if !child.is_window() {
        return decoded_inherits(parent, o, d);
    }
    let hit = if d.range.is_empty() {
        o.start < d.range.start && d.range.start < o.end
    } else {
        d.range.overlaps(&o)
    };
    if !hit {
        return None;
    }
    let start = d.range.start.max(o.start) - o.start;
    let end = d.range.end.min(o.end).max(d.range.start.max(o.start)) - o.start;
    Some(Damage {
        unknown: d.unknown,
        status: d.status,
        ..Damage::corrupt(
            crate::data::Range::new(start, end),
            format!(
                "{}{}",
                window_cause(crate::data::Range::new(start, end), &parent.display_name()),
                d.reason
            ),
        )
    })
}

/// How an inherited damage's reason begins, before its parent's reason:
/// [`Tree::inherited_from`] reads it back.
fn window_cause(range: crate::data::Range, parent: &str) -> String {
    format!("its bytes {range} lie in a damaged span of {parent}: ")
}

/// As [`window_cause`], for a member decoded from its parent's bytes `o`.
fn decoded_cause(o: crate::data::Range, parent: &str) -> String {
    format!("its compressed bytes {o} lie in a damaged span of {parent}: ")
}

/// Parent damages [`Tree::inherited_from`] compares with at most: a
/// stream with thousands of unknown-byte ranges is not scanned for every
/// member.
const CAUSE_SCAN: usize = 4096;

/// The damage a zip entry decoded from its parent's bytes over `o`
/// inherits from `d`: its compressed bytes lie in a damaged span, so what
/// they decode to is not proved, unless its own CRC and size prove it
/// ([`Tree::prove`]; a proved child takes no unverified damage). All of
/// it is unverified, from its first byte on: it may hold wrong bytes where
/// a cut alone would promise exact ones.
fn decoded_inherits(parent: &Extraction, o: crate::data::Range, d: &Damage) -> Option<Damage> {
    let hit = if d.range.is_empty() {
        o.start < d.range.start && d.range.start < o.end
    } else {
        d.range.overlaps(&o)
    };
    // Only a zip entry is proved by its own CRC once decoded (a format
    // named here, not imported: this layer sits below the parsers).
    if !hit || parent.parser() != Some("zip") {
        return None;
    }
    // From its first byte on (a point: its length is not known yet).
    Some(Damage::unverified(
        crate::data::Range::new(0, 0),
        format!("{}{}", decoded_cause(o, &parent.display_name()), d.reason),
    ))
}

/// How a member named `name` matches `rest`, a PATH below its container
/// (docs/contract.md): `rest.len()` when `rest` names the member (with or
/// without its trailing `/`), the offset where the rest of the PATH inside
/// the member begins when `rest` goes on past its name and a `/`, `None`
/// otherwise. [`Tree::resolve`] and `pparse::fs` both match names here.
/// `rest` is in its normal form ([`crate::name::normal_path`]), and so is
/// `name` when it is matched: a member named `./a//x` by a format that
/// keeps such names is found as `a/x`; one named `./` alone is not found.
pub fn match_name(name: &str, rest: &str) -> Option<usize> {
    let name = crate::name::normal_path(name);
    if name.is_empty() {
        return None;
    }
    let name = name.as_ref();
    let bare = name.trim_end_matches('/');
    if rest == name || (!bare.is_empty() && rest == bare) {
        return Some(rest.len());
    }
    let after = if name.ends_with('/') {
        rest.strip_prefix(name)
    } else {
        rest.strip_prefix(name).and_then(|r| r.strip_prefix('/'))
    };
    after.map(|r| rest.len() - r.len())
}

/// All extractions of one opened file; index 0 is the root.
#[derive(Default)]
pub struct Tree {
    /// Every extraction, indexed by [`ExtId`]; the root is 0.
    pub exts: crate::chunked::Chunked<Extraction>,
    /// Damage records anywhere in the tree (kept up to date by the engine,
    /// so a status line does not have to walk a million extractions).
    pub damage_count: usize,
    /// The CRC-32 of each extraction's first bytes (up to
    /// [`crate::parsers::SNIFF_LEN`]) as the parse sniffed them, by
    /// [`ExtId`] (0: none recorded; a CRC of 0 is kept as 1). An index
    /// saves them, and a tree read back from one checks a member's first
    /// bytes against them before serving it ([`Tree::check_head`]).
    pub head_crcs: crate::chunked::Chunked<u32>,
    /// Whether the tree was read back from an index, whose ranges are
    /// then checked as they are read ([`Tree::check_head`]).
    pub restored: bool,
}

/// Whether `data` starts with the bytes whose CRC-32 an index recorded
/// (`want`, `None`: nothing to check): see [`Tree::check_head`]. `path`
/// names the extraction in the error.
pub(crate) fn check_head_crc(
    want: Option<u32>,
    data: &dyn crate::data::Source,
    sniffed: usize,
    path: impl FnOnce() -> String,
) -> std::io::Result<()> {
    let Some(want) = want else {
        return Ok(());
    };
    let differs = |why: String| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "{}: the index does not match the file ({why}); parse without it (--no-index)",
                path()
            ),
        )
    };
    let n = usize::try_from(data.available()).map_or(sniffed, |a| a.min(sniffed));
    let mut head = vec![0u8; n];
    let mut got = 0;
    while got < n {
        match data.read_at(got as u64, &mut head[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) => return Err(differs(format!("its first bytes cannot be read: {e}"))),
        }
    }
    if kept_crc(crc32fast::hash(&head[..got])) != want {
        return Err(differs(format!(
            "its first {got} bytes are not the ones the index was made from"
        )));
    }
    Ok(())
}

/// How a head CRC is kept in [`Tree::head_crcs`]: 0 means none.
fn kept_crc(crc: u32) -> u32 {
    crc.max(1)
}

impl Tree {
    /// Keeps a smaller source of the same bytes ([`Source::settled`]) for
    /// `id` and each of its children whose parse is over, who hold their
    /// own bytes and contain nothing: called when `id`'s parse ends or
    /// finds no format, after which no parser holds those bytes.
    /// Extractions with children are left alone, as theirs hold the same
    /// source.
    ///
    /// [`Source::settled`]: crate::data::Source::settled
    pub(crate) fn settle_sources(&mut self, id: ExtId) {
        let n = self.exts[id].children.len();
        for k in 0..=n {
            let x = if k < n { self.exts[id].children[k] } else { id };
            let e = &mut self.exts[x];
            if x == 0
                || e.form != Form::Own
                || !matches!(e.phase, Phase::Done | Phase::Leaf)
                || !e.children.is_empty()
            {
                continue;
            }
            if let Some(small) = e.bytes.settled() {
                e.bytes = small;
            }
        }
    }

    /// The extraction of the opened file.
    pub fn root(&self) -> &Extraction {
        &self.exts[0]
    }
    /// Extraction `id`, if it exists.
    pub fn get(&self, id: ExtId) -> Option<&Extraction> {
        self.exts.get(id)
    }
    /// The position of `id` among its parent's children (0 for the root):
    /// a binary search, since children are added in the order of their
    /// ids, which ten million members then do not each keep.
    pub fn position(&self, id: ExtId) -> usize {
        let parent = self.exts.get(id).and_then(Extraction::parent);
        parent
            .and_then(|p| self.exts.get(p))
            .and_then(|p| p.children.binary_search(&id).ok())
            .unwrap_or(0)
    }
    /// Extractions in the tree.
    pub fn len(&self) -> usize {
        self.exts.len()
    }
    /// Whether the tree holds no extraction (never, once opened).
    pub fn is_empty(&self) -> bool {
        self.exts.is_empty()
    }

    /// Records the CRC-32 of the first bytes of `id` sniffed.
    pub fn set_head_crc(&mut self, id: ExtId, crc: u32) {
        while self.head_crcs.len() <= id {
            self.head_crcs.push(0);
        }
        if let Some(x) = self.head_crcs.get_mut(id) {
            *x = kept_crc(crc);
        }
    }

    /// The CRC-32 recorded for the first bytes of `id`, if any.
    pub fn head_crc(&self, id: ExtId) -> Option<u32> {
        self.head_crcs.get(id).copied().filter(|&c| c != 0)
    }

    /// In a tree read back from an index: whether `data`, the bytes the
    /// index gives extraction `id`, start with the bytes the parse that
    /// wrote it sniffed (their CRC-32). An index whose ranges were moved,
    /// or whose decoded streams resume at the wrong place, fails here
    /// before a byte is served: `Err` says what differs, with the PATH.
    /// Always `Ok` for a tree that was parsed, and for an extraction whose
    /// first bytes were never sniffed (see docs/contract.md). `sniffed` is
    /// how many first bytes a sniff reads ([`crate::parsers::SNIFF_LEN`]).
    pub fn check_head(
        &self,
        id: ExtId,
        data: &dyn crate::data::Source,
        sniffed: usize,
    ) -> std::io::Result<()> {
        let want = self.head_crc(id).filter(|_| self.restored);
        check_head_crc(want, data, sniffed, || self.path_of(id))
    }

    /// The PATH of an extraction: its ancestors' names below the root, joined by `/`.
    pub fn path_of(&self, id: ExtId) -> String {
        let mut parts = Vec::new();
        let mut at = id;
        while let Some(p) = self.exts[at].parent() {
            parts.push(self.exts[at].display_name());
            at = p;
        }
        parts.reverse();
        parts.join("/")
    }

    /// Finds the extraction named by PATH (see docs/contract.md). A member's own `/`s
    /// are part of its name, so each step tries every child whose name is a
    /// prefix of what is left, in archive order, and backtracks. `.` and
    /// empty components are dropped first, as they are from members' names
    /// (`backup.tar/./a/x` is `backup.tar/a/x`).
    pub fn resolve(&self, path: &str) -> Option<ExtId> {
        let path = crate::name::normal_path(path);
        if path.is_empty() {
            return Some(0);
        }
        self.walk(0, &path, 0)
    }

    fn walk(&self, at: ExtId, rest: &str, depth: usize) -> Option<ExtId> {
        if rest.is_empty() {
            return Some(at);
        }
        if depth > 256 {
            return None;
        }
        for &c in &self.exts[at].children {
            match match_name(&self.exts[c].name.display_cow(), rest) {
                Some(i) if i == rest.len() => return Some(c),
                Some(i) => {
                    if let Some(found) = self.walk(c, &rest[i..], depth + 1) {
                        return Some(found);
                    }
                }
                None => {}
            }
        }
        None
    }

    /// Records damage that extraction `id`'s own parser found.
    pub fn add_damage(&mut self, id: ExtId, d: Damage) {
        self.exts[id].damage.push(d);
        self.damage_count += 1;
    }

    /// Marks extraction `id` as proved by its own checks, which cover every
    /// one of its bytes and hold (see [`Extraction::proved`]): the unverified
    /// spans its container passed down to it are dropped, and later ones
    /// are not passed down. An extraction with damage of its own, or
    /// corrupt damage from outside, is not proved: nothing changes.
    pub fn prove(&mut self, id: ExtId) {
        let e = &self.exts[id];
        let outer = e.outer_damage();
        let only_unverified = e
            .damage
            .iter()
            .enumerate()
            .all(|(i, d)| d.status == Status::Unverified && outer.contains(&(i as u32)));
        if !only_unverified {
            return;
        }
        let e = &mut self.exts[id];
        let dropped = e.damage.len();
        e.damage.clear();
        if let Some(x) = e.extra.as_mut() {
            x.outer_damage.clear();
        }
        e.proved = true;
        self.damage_count = self.damage_count.saturating_sub(dropped);
    }

    /// Records damage that the layer outside found in extraction `id`'s
    /// bytes. Corrupt bytes are corrupt in every member cut verbatim from
    /// them too (a tar member inside a gzip stream whose bytes decoded
    /// wrong): the member gets the damage as well, in its own coordinates,
    /// so no member holding them is called complete.
    pub fn add_outer_damage(&mut self, id: ExtId, d: Damage) {
        self.add_outer_at(id, d, 0);
    }

    fn add_outer_at(&mut self, id: ExtId, d: Damage, depth: u32) {
        if d.status == Status::Unverified && self.exts[id].proved {
            return;
        }
        let inherit: Vec<(ExtId, Damage)> = if depth < 64 {
            // Children come in offset order from a pipelined parse: the
            // ones a new damage can touch are among the newest.
            let e = &self.exts[id];
            let mut found = Vec::new();
            for (k, &c) in e.children.iter().rev().enumerate() {
                let child = &self.exts[c];
                // Past the bound, go on while children still reach into
                // the damage: one found late (a CRC failure at the end of
                // a stream) covers old members too. Walking stops at the
                // first child before it, so this stays linear.
                if k >= INHERIT_SCAN && child.origin().is_none_or(|o| o.end <= d.range.start) {
                    break;
                }
                if let Some(x) = inherited(e, child, &d) {
                    found.push((c, x));
                }
            }
            found
        } else {
            Vec::new()
        };
        let e = &mut self.exts[id];
        let index = e.damage.len() as u32;
        e.extra_mut().outer_damage.push(index);
        e.damage.push(d);
        self.damage_count += 1;
        for (c, x) in inherit {
            self.add_outer_at(c, x, depth + 1);
        }
    }

    /// The damage of `id`'s parent that its damage `k` was inherited from
    /// (its bytes lie in a damaged span of the parent), as (parent, index
    /// in its damage); `None` for damage found in its own bytes.
    pub fn inherited_from(&self, id: ExtId, k: usize) -> Option<(ExtId, usize)> {
        let e = &self.exts[id];
        let d = e.damage.get(k)?;
        let p = e.parent()?;
        let o = e.origin()?;
        let parent = &self.exts[p];
        let name = parent.display_name();
        let rest = d
            .reason
            .strip_prefix(&window_cause(d.range, &name))
            .or_else(|| d.reason.strip_prefix(&decoded_cause(o, &name)))?;
        let j = parent
            .damage
            .iter()
            .take(CAUSE_SCAN)
            .position(|pd| pd.reason == rest)?;
        Some((p, j))
    }

    /// The damage that damage `k` of `id` comes from in the end: followed
    /// up through [`Tree::inherited_from`] to damage found in its own
    /// bytes (itself, when it is).
    pub fn root_cause(&self, mut id: ExtId, mut k: usize) -> (ExtId, usize) {
        // Each step goes to a parent: a tree is no deeper than its ids.
        while let Some((p, j)) = self.inherited_from(id, k) {
            (id, k) = (p, j);
        }
        (id, k)
    }

    /// The damage a new child inherits from what its parent already has.
    pub(crate) fn inherit_into(&mut self, child: ExtId) {
        let Some(parent) = self.exts[child].parent() else {
            return;
        };
        let p = &self.exts[parent];
        let outer = p.outer_damage();
        let mut idx: Vec<u32> = outer.iter().rev().take(INHERIT_SCAN).copied().collect();
        if let Some(o) = self.exts[child].origin() {
            // Damage a decoder reports in stream order, ahead of the parser
            // cutting members (thousands of unknown-byte ranges before this
            // member is found): the ones around the member, by binary search.
            let end = outer.partition_point(|&i| p.damage[i as usize].range.start < o.end);
            let inside = outer[..end]
                .iter()
                .rev()
                .take_while(|&&i| p.damage[i as usize].range.start >= o.start)
                .count();
            let from = end.saturating_sub(inside + NEAR_SCAN);
            idx.extend(outer[from..end].iter().copied());
            idx.sort_unstable();
            idx.dedup();
        }
        let found: Vec<Damage> = idx
            .iter()
            .filter_map(|&i| inherited(p, &self.exts[child], &p.damage[i as usize]))
            .collect();
        for d in found {
            self.add_outer_damage(child, d);
        }
    }

    /// Every extraction below `id`, depth first, `id` included.
    pub fn subtree(&self, id: ExtId) -> Vec<ExtId> {
        let mut out = Vec::new();
        let mut stack = vec![id];
        while let Some(x) = stack.pop() {
            out.push(x);
            stack.extend(self.exts[x].children.iter().rev());
        }
        out
    }

    /// An extraction's status, also counting bytes missing from its declared
    /// size before its parser has reported them (when a parse was stopped early).
    pub fn status_of(&self, id: ExtId) -> Status {
        self.exts[id].status_counting_size()
    }

    /// What the deepest extraction on the way to `path` holds, for a
    /// message about a PATH that names nothing: `"a.tar" has: x, y, …`.
    pub fn hint(&self, path: &str) -> String {
        let path = crate::name::normal_path(path);
        let t = self;
        let mut best = 0;
        let mut best_len = 0;
        for id in 0..t.len() {
            let p = t.path_of(id);
            if !p.is_empty() && path.starts_with(&p) && p.len() > best_len {
                best = id;
                best_len = p.len();
            }
        }
        let e = &t.exts[best];
        let at = if best == 0 {
            "the top level".to_string()
        } else {
            format!("{:?}", t.path_of(best))
        };
        if e.children.is_empty() {
            return format!("{at} has no entries");
        }
        let names: Vec<String> = e
            .children
            .iter()
            .take(8)
            .map(|&c| t.exts[c].display_name())
            .collect();
        let more = if e.children.len() > 8 { ", …" } else { "" };
        format!("{at} has: {}{more}", names.join(", "))
    }

    /// The worst status anywhere in the tree.
    pub fn worst_status(&self) -> Status {
        (0..self.exts.len())
            .map(|id| self.status_of(id))
            .max()
            .unwrap_or(Status::Complete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A container of ten million members holds ten million of these:
    /// growing it is a choice, not an accident.
    #[test]
    fn an_extraction_record_stays_small() {
        let n = std::mem::size_of::<Extraction>();
        assert!(n <= 136, "{n} bytes");
        assert_eq!(std::mem::size_of::<Meta>(), 10);
        assert_eq!(std::mem::size_of::<EntryKind>(), 16);
    }

    /// The fields kept without their `Option` tags give back every value
    /// a file can hold, and `None`.
    #[test]
    fn untagged_fields_keep_every_value() {
        let bytes: Data = std::sync::Arc::new(crate::data::MemSource::new(Vec::new()));
        let parts = |origin, declared_size| Parts {
            name: Name::new("m"),
            kind: EntryKind::File,
            bytes: bytes.clone(),
            form: Form::Window,
            origin,
            declared_size,
            damage: ThinVec::new(),
            extra: None,
            phase: Phase::Leaf,
            meta: Meta::default(),
        };
        for d in [None, Some(0), Some(1), Some(u64::MAX - 1), Some(u64::MAX)] {
            for o in [
                None,
                Some(Range::new(0, 0)),
                Some(Range::new(u64::MAX, u64::MAX)),
                Some(Range::new(0, u64::MAX)),
            ] {
                let mut e = Extraction::new(7, Some(3), 1, parts(o, d));
                assert_eq!(
                    (e.id(), e.parent(), e.origin(), e.declared_size()),
                    (7, Some(3), o, d)
                );
                e.set_declared_size(None);
                e.set_origin(None);
                assert_eq!((e.origin(), e.declared_size()), (None, None));
            }
        }
        let mut root = Extraction::new(0, None, 0, parts(None, None));
        assert_eq!((root.parent(), root.parser()), (None, None));
        static GZIP: &str = "gzip";
        root.set_parser(&GZIP);
        assert_eq!(root.parser(), Some("gzip"));
    }

    #[test]
    fn meta_keeps_any_time() {
        for t in [0, 1, -1, 1_700_000_000, i64::MAX, i64::MIN + 1] {
            assert_eq!(Meta::new(Some(t), None).mtime(), Some(t));
        }
        assert_eq!(Meta::new(None, Some(0o100644)).mtime(), None);
        assert_eq!(Meta::new(Some(i64::MIN), None).mtime(), None);
        assert_eq!(Meta::new(None, Some(0o100644)).mode(), Some(0o644));
        assert_eq!(Meta::new(None, Some(0o7777)).mode(), Some(0o7777));
        assert_eq!(Meta::new(None, Some(0)).mode(), Some(0));
        assert_eq!(Meta::default().mode(), None);
    }
}
