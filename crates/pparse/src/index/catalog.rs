//! The extractions of an index, laid out to be read in place: fixed-size
//! records, a hash table of member names, the names, and a blob of what
//! few extractions have (damage, notes, link targets).
//!
//! A process that opens a file through its index maps this section and
//! reads a member's record, and its ancestors', when a PATH is looked up:
//! it builds no extraction tree until something asks for the whole tree
//! (a listing, the explorer). Every process reading one index shares one
//! copy of it in the page cache, where each used to build its own tree
//! (about 250 bytes a member: 238 MiB per DataLoader worker for a million
//! members). The whole tree, when it is asked for, is built from the same
//! records, with the same checks.
//!
//! ```text
//! head     n, slots, names length, extras length, children (u64 each)
//! records  n × 80 bytes, by ExtId (see `Rec`)
//! kids     every extraction's children, in order, as u32 ExtIds
//! table    slots × u32: ExtId + 1 of a member, by the hash of its parent
//!          and its name in PATH form without a trailing `/` (0: empty);
//!          open addressing, linear probing
//! names    raw names, back to back
//! extras   per extraction that has any: kind text, damage, outer damage,
//!          notes, progress (varints, as the body)
//! ```
//!
//! The section is untrusted like the rest of an index: its CRC is checked
//! when it is opened, every record is checked against its parent and the
//! source it reads ([`Catalog::check_all`], before anything is served), and
//! a lookup compares the names it finds with the PATH it was asked for.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thin_vec::ThinVec;

use super::codec::{In, Invalid, Out};
use crate::data::{Data, Range};
use crate::extraction::{
    EntryKind, ExtId, Extra, Extraction, Form, Meta, Parts, Phase, Progress, Tree, match_name,
};
use crate::name::Name;
use crate::status::Damage;

/// The statuses in the order of their tags.
const STATUSES: [crate::status::Status; 4] = [
    crate::status::Status::Complete,
    crate::status::Status::Truncated,
    crate::status::Status::Corrupt,
    crate::status::Status::Unverified,
];

/// Bytes of one record.
pub(super) const REC: usize = 80;
/// Bytes of the head.
const HEAD: usize = 40;
/// `parent` of the root.
const NO_PARENT: u32 = u32::MAX;
/// `extra` of an extraction without extras.
const NO_EXTRA: u64 = u64::MAX;

const HAS_ORIGIN: u8 = 1;
const HAS_DECLARED: u8 = 2;
const HAS_MTIME: u8 = 4;
const HAS_MODE: u8 = 8;
/// Its folders list some entry under another name than its own
/// (`lnk2~1`, see `extraction/dirs.rs`): a PATH's listed form is then not
/// its plain one, and only the whole tree can spell it.
const RENAMES: u8 = 16;
const LEAF: u8 = 32;

/// The hash a member is found by: its parent and its name in PATH form
/// without a trailing `/` (FNV-1a: stable across processes and machines).
fn key_hash(parent: u32, bare: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in parent.to_le_bytes().iter().chain(bare) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A member's name as a lookup compares it: PATH form, without a trailing
/// `/`; `None` for a name no PATH can name (`./`).
fn bare_key(name: &Name) -> Option<String> {
    let p = name.path_form();
    let bare = p.trim_end_matches('/');
    (!bare.is_empty()).then(|| bare.to_string())
}

fn kind_tag(k: &EntryKind) -> (u8, Option<&str>) {
    match k {
        EntryKind::Root => (0, None),
        EntryKind::Stream => (1, None),
        EntryKind::File => (2, None),
        EntryKind::Dir => (3, None),
        EntryKind::Symlink(t) => (4, Some(t)),
        EntryKind::HardLink(t) => (5, Some(t)),
        EntryKind::Device => (6, None),
        EntryKind::Fifo => (7, None),
        EntryKind::Other(t) => (8, Some(t)),
    }
}

fn status_tag(s: crate::status::Status) -> u8 {
    STATUSES.iter().position(|&x| x == s).unwrap_or(0) as u8
}

/// Writes the catalog of `tree`, whose extraction `id` reads source
/// `ext_src[id]`; `parsers` collects the format names the records refer
/// to (by their position + 1), for the body.
pub(super) fn write<W: Write>(
    out: &mut Out<W>,
    tree: &Tree,
    ext_src: &[usize],
    parsers: &mut Vec<&'static str>,
) -> io::Result<()> {
    let n = tree.len();
    let too_many = || io::Error::other("too many extractions for an index");
    u32::try_from(n).map_err(|_| too_many())?;
    let slots = (n.saturating_mul(2)).next_power_of_two().max(16);
    let mut table = vec![0u32; slots];
    let mask = slots - 1;
    let mut names_len = 0u64;
    let mut extras: Vec<u8> = Vec::new();
    for e in &tree.exts {
        names_len += e.name.raw().len() as u64;
        let (Some(p), Some(bare)) = (e.parent(), bare_key(&e.name)) else {
            continue;
        };
        let mut at = key_hash(p as u32, bare.as_bytes()) as usize & mask;
        while table[at] != 0 {
            at = (at + 1) & mask;
        }
        table[at] = e.id() as u32 + 1;
    }
    out.u64(n as u64)?;
    out.u64(slots as u64)?;
    out.u64(names_len)?;
    // The extras are made in memory first (damage and notes are few), so
    // that each record can say where its own are.
    let mut blob = Out::new(&mut extras);
    let mut name_off = 0u64;
    let mut extra_offs: Vec<(u32, u64)> = Vec::new();
    for e in &tree.exts {
        let (_, text) = kind_tag(&e.kind);
        let has = text.is_some()
            || !e.damage.is_empty()
            || !e.outer_damage().is_empty()
            || !e.notes().is_empty()
            || e.progress() != Progress::default();
        if !has {
            continue;
        }
        extra_offs.push((e.id() as u32, blob.pos()));
        blob.str(text.unwrap_or(""))?;
        blob.var(e.damage.len() as u64)?;
        for d in &e.damage {
            blob.u8(status_tag(d.status))?;
            blob.var(d.range.start)?;
            blob.var(d.range.end)?;
            blob.str(&d.reason)?;
        }
        blob.var(e.outer_damage().len() as u64)?;
        for &i in e.outer_damage() {
            blob.var(u64::from(i))?;
        }
        blob.var(e.notes().len() as u64)?;
        for note in e.notes() {
            blob.str(note)?;
        }
        let p = e.progress();
        blob.var(p.done)?;
        blob.opt(p.total)?;
    }
    out.u64(extras.len() as u64)?;
    let kids_len: usize = tree.exts.iter().map(|e| e.children.len()).sum();
    out.u64(kids_len as u64)?;
    let mut kids_at = 0u32;
    let mut next_extra = extra_offs.iter().peekable();
    for (e, &src) in tree.exts.iter().zip(ext_src) {
        let mut r = [0u8; REC];
        let put32 = |r: &mut [u8; REC], at: usize, v: u32| {
            r[at..at + 4].copy_from_slice(&v.to_le_bytes());
        };
        let put64 = |r: &mut [u8; REC], at: usize, v: u64| {
            r[at..at + 8].copy_from_slice(&v.to_le_bytes());
        };
        put32(&mut r, 0, e.parent().map_or(NO_PARENT, |p| p as u32));
        put32(&mut r, 4, u32::try_from(src).map_err(|_| too_many())?);
        put32(
            &mut r,
            8,
            u32::try_from(e.children.len()).map_err(|_| too_many())?,
        );
        put32(&mut r, 12, tree.head_crc(e.id()).unwrap_or(0));
        put64(&mut r, 16, name_off);
        put32(
            &mut r,
            24,
            u32::try_from(e.name.raw().len()).map_err(|_| too_many())?,
        );
        name_off += e.name.raw().len() as u64;
        let mut flags = 0u8;
        if let Some(o) = e.origin() {
            flags |= HAS_ORIGIN;
            put64(&mut r, 32, o.start);
            put64(&mut r, 40, o.end);
        }
        if let Some(d) = e.declared_size() {
            flags |= HAS_DECLARED;
            put64(&mut r, 48, d);
        }
        if let Some(t) = e.meta.mtime() {
            flags |= HAS_MTIME;
            put64(&mut r, 56, t as u64);
        }
        if let Some(m) = e.meta.mode() {
            flags |= HAS_MODE;
            put32(&mut r, 28, m);
        }
        let extra = match next_extra.peek() {
            Some(&&(id, off)) if id as usize == e.id() => {
                next_extra.next();
                off
            }
            _ => NO_EXTRA,
        };
        put64(&mut r, 64, extra);
        if !e.children.is_empty() && crate::extraction::dirs::Dirs::renames_in(tree, e.id()) {
            flags |= RENAMES;
        }
        if e.phase == Phase::Leaf {
            flags |= LEAF;
        }
        put32(&mut r, 76, kids_at);
        kids_at += e.children.len() as u32;
        r[72] = kind_tag(&e.kind).0;
        r[73] = match e.form {
            Form::Own => 0,
            Form::Window => 1,
            Form::Deflate => 2,
        };
        r[74] = flags;
        r[75] = match e.parser() {
            None => 0,
            Some(p) => match parsers.iter().position(|&q| q == p) {
                Some(i) => i as u8 + 1,
                None if parsers.len() < 255 => {
                    parsers.push(p);
                    parsers.len() as u8
                }
                None => return Err(io::Error::other("too many formats for an index")),
            },
        };
        out.raw(&r)?;
    }
    for e in &tree.exts {
        for &c in &e.children {
            out.u32(c as u32)?;
        }
    }
    for &slot in &table {
        out.u32(slot)?;
    }
    for e in &tree.exts {
        out.raw(e.name.raw())?;
    }
    out.raw(&extras)
}

/// The bytes a catalog is read from: the index file mapped, or (an index
/// read from a URL) the section read into memory.
pub(super) enum Bytes {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Bytes {
    fn all(&self) -> &[u8] {
        match self {
            Bytes::Map(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

/// What a record's checks learned that its children's checks need.
#[derive(Clone, Copy)]
struct Facts {
    size: u64,
    depth: u32,
}

/// One record, decoded (nothing checked yet).
struct Rec {
    parent: Option<ExtId>,
    src: usize,
    kids: u32,
    head_crc: u32,
    name: Range,
    origin: Option<Range>,
    declared: Option<u64>,
    mtime: Option<i64>,
    mode: Option<u32>,
    extra: Option<u64>,
    kind: u8,
    form: u8,
    flags: u8,
    parser: u8,
}

/// What an extraction's extras hold.
#[derive(Default)]
struct Extras {
    kind_text: Box<str>,
    damage: ThinVec<Damage>,
    outer: Vec<u32>,
    notes: Vec<Box<str>>,
    progress: Progress,
}

/// A source an index describes, read back, with its length: every range
/// an index gives in it is checked against that length before it is used.
pub(super) struct Src {
    pub(super) data: Data,
    pub(super) len: u64,
}

/// The extractions of one index, read in place (see the module docs).
pub struct Catalog {
    bytes: Bytes,
    /// Where the section starts in `bytes`.
    at: usize,
    /// Where it starts in the index file (errors name bytes of the file).
    file_at: u64,
    n: usize,
    slots: usize,
    kids_at: usize,
    kids_len: usize,
    table_at: usize,
    names_at: usize,
    extras_at: usize,
    extras_len: usize,
    sources: Vec<Src>,
    parsers: Vec<&'static &'static str>,
    root_name: Name,
    file: Option<PathBuf>,
    max_depth: u32,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Catalog({} extractions)", self.n)
    }
}

impl Catalog {
    /// The catalog at `bytes[at..at + len]` over `sources`, its layout
    /// checked (not yet its records: [`Catalog::check_all`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        bytes: Bytes,
        at: usize,
        file_at: u64,
        len: usize,
        sources: Vec<Src>,
        parsers: Vec<&'static &'static str>,
        root_name: Name,
        file: Option<&Path>,
        max_depth: u32,
    ) -> Result<Catalog, Invalid> {
        let all = bytes.all();
        let sec = at
            .checked_add(len)
            .and_then(|end| all.get(at..end))
            .ok_or_else(|| Invalid("has a catalog past its end".into()))?;
        let mut h = In::new(sec);
        let (n, slots, names_len, extras_len) = (h.u64()?, h.u64()?, h.u64()?, h.u64()?);
        let kids_len = h.u64()?;
        let bad = || Invalid("has a catalog whose parts do not add up".into());
        let size = |x: u64, k: u64| x.checked_mul(k).ok_or_else(bad);
        let total = [
            HEAD as u64,
            size(n, REC as u64)?,
            size(kids_len, 4)?,
            size(slots, 4)?,
            names_len,
            extras_len,
        ]
        .iter()
        .try_fold(0u64, |a, &b| a.checked_add(b))
        .ok_or_else(bad)?;
        if total != len as u64 || n == 0 || n > u64::from(u32::MAX) || !slots.is_power_of_two() {
            return Err(bad());
        }
        let (n, slots) = (n as usize, slots as usize);
        let kids_at = at + HEAD + n * REC;
        let table_at = kids_at + kids_len as usize * 4;
        let names_at = table_at + slots * 4;
        let extras_at = names_at + names_len as usize;
        Ok(Catalog {
            bytes,
            at,
            file_at,
            n,
            slots,
            kids_at,
            kids_len: kids_len as usize,
            table_at,
            names_at,
            extras_at,
            extras_len: extras_len as usize,
            sources,
            parsers,
            root_name,
            file: file.map(Path::to_path_buf),
            max_depth,
        })
    }

    /// Extractions it holds.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether it holds none (never: a checked catalog has a root).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn u32_at(&self, at: usize) -> u32 {
        let b = self.bytes.all();
        u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    fn u64_at(&self, at: usize) -> u64 {
        let b = &self.bytes.all()[at..at + 8];
        u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }

    fn rec(&self, id: ExtId) -> Rec {
        let r = self.at + HEAD + id * REC;
        let flags = self.bytes.all()[r + 74];
        let parent = self.u32_at(r);
        let extra = self.u64_at(r + 64);
        Rec {
            parent: (parent != NO_PARENT).then_some(parent as usize),
            src: self.u32_at(r + 4) as usize,
            kids: self.u32_at(r + 8),
            head_crc: self.u32_at(r + 12),
            name: Range::new(
                self.u64_at(r + 16),
                self.u64_at(r + 16)
                    .saturating_add(u64::from(self.u32_at(r + 24))),
            ),
            origin: (flags & HAS_ORIGIN != 0)
                .then(|| Range::new(self.u64_at(r + 32), self.u64_at(r + 40))),
            declared: (flags & HAS_DECLARED != 0).then(|| self.u64_at(r + 48)),
            mtime: (flags & HAS_MTIME != 0).then(|| self.u64_at(r + 56) as i64),
            mode: (flags & HAS_MODE != 0).then(|| self.u32_at(r + 28)),
            extra: (extra != NO_EXTRA).then_some(extra),
            kind: self.bytes.all()[r + 72],
            form: self.bytes.all()[r + 73],
            flags,
            parser: self.bytes.all()[r + 75],
        }
    }

    /// The raw name of `id`; empty when its range is out of bounds (found
    /// by [`Catalog::check_all`] first).
    fn name_bytes(&self, rec: &Rec) -> &[u8] {
        let len = (self.extras_at - self.names_at) as u64;
        if rec.name.end > len || rec.name.start > rec.name.end {
            return &[];
        }
        &self.bytes.all()
            [self.names_at + rec.name.start as usize..self.names_at + rec.name.end as usize]
    }

    fn extras(&self, off: u64) -> Result<Extras, Invalid> {
        let blob = &self.bytes.all()[self.extras_at..self.extras_at + self.extras_len];
        let start = usize::try_from(off)
            .ok()
            .filter(|&o| o <= blob.len())
            .ok_or_else(|| Invalid("extras past the end".into()))?;
        let mut r = In::new(&blob[start..]);
        let kind_text = r.str()?.into();
        let nd = r.count()?;
        let mut damage = ThinVec::with_capacity(nd);
        for _ in 0..nd {
            let status = *STATUSES
                .get(r.u8()? as usize)
                .ok_or_else(|| Invalid("bad status".into()))?;
            let start = r.var()?;
            let end = r.var()?;
            if end < start {
                return Err(Invalid("a backward damage range".into()));
            }
            damage.push(Damage {
                status,
                range: Range::new(start, end),
                reason: r.str()?.to_string(),
                // Streams with unknown bytes are never indexed.
                unknown: false,
            });
        }
        let no = r.count()?;
        let mut outer = Vec::with_capacity(no);
        for _ in 0..no {
            let i = r.var()?;
            if i >= nd as u64 {
                return Err(Invalid("bad damage reference".into()));
            }
            outer.push(i as u32);
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
        Ok(Extras {
            kind_text,
            damage,
            outer,
            notes,
            progress,
        })
    }

    /// Extraction `id` made from its record, checked against its parent
    /// (`parent`: what that one's checks learned) and the source it reads,
    /// as `read_tree` always checked the records of an index.
    fn extraction(&self, id: ExtId, parent: Option<Facts>) -> Result<(Extraction, Facts), Invalid> {
        let rec = self.rec(id);
        let byte = self.file_at + (HEAD + id * REC) as u64;
        let bad = |why: &str| Invalid(format!("extraction {id} at byte {byte}: {why}"));
        if (id == 0) != rec.parent.is_none()
            || rec.parent.is_some_and(|p| p >= id)
            || rec.parent.is_some() != parent.is_some()
        {
            return Err(bad("bad parent"));
        }
        let depth = parent.map_or(0, |p| p.depth + 1);
        if depth > self.max_depth {
            return Err(bad(&format!(
                "nested {depth} deep, deeper than a parse goes ({})",
                self.max_depth
            )));
        }
        let names_len = (self.extras_at - self.names_at) as u64;
        if rec.name.end > names_len {
            return Err(bad("a name past the end"));
        }
        let extras = match rec.extra {
            None => Extras::default(),
            Some(off) => self.extras(off).map_err(|e| bad(&e.0))?,
        };
        let kind = match (rec.kind, extras.kind_text) {
            (0, _) => EntryKind::Root,
            (1, _) => EntryKind::Stream,
            (2, _) => EntryKind::File,
            (3, _) => EntryKind::Dir,
            (4, t) => EntryKind::Symlink(t.into()),
            (5, t) => EntryKind::HardLink(t.into()),
            (6, _) => EntryKind::Device,
            (7, _) => EntryKind::Fifo,
            (8, t) => EntryKind::Other(t.into()),
            _ => return Err(bad("unknown kind")),
        };
        let src = self
            .sources
            .get(rec.src)
            .ok_or_else(|| bad("unknown source"))?;
        let form = match rec.form {
            0 => Form::Own,
            1 => Form::Window,
            2 => Form::Deflate,
            _ => return Err(bad("bad flag")),
        };
        let (origin, declared_size) = (rec.origin, rec.declared);
        if origin.is_some_and(|o| o.end < o.start) {
            return Err(bad("a backward range"));
        }
        if form != Form::Own && origin.is_none() {
            return Err(bad("a window without a range"));
        }
        // Deflate makes at most 1,032 bytes of each byte (258 of 2 bits).
        let most = |r: Range| r.len().saturating_mul(1032).saturating_add(1024);
        if form == Form::Deflate && declared_size.zip(origin).is_none_or(|(d, r)| d > most(r)) {
            return Err(bad("a decoded entry without a size its data can make"));
        }
        let parent_size = parent.map_or(src.len, |p| p.size);
        if let Some(o) = origin {
            // A member's bytes are its parent's (or were decoded from
            // them): they start inside the parent, and inside the source
            // read. A cut member's range may end past the end: what it
            // serves stops there.
            let end = if form == Form::Own {
                parent_size
            } else {
                parent_size.min(src.len)
            };
            if o.start > end || (form == Form::Deflate && o.end > end) {
                return Err(bad(&format!(
                    "its range {o} is past the end of its parent ({end} bytes)"
                )));
            }
        }
        let size = match (form, origin) {
            (Form::Window, Some(o)) => src.len.min(o.end).saturating_sub(o.start),
            (Form::Deflate, _) => declared_size.unwrap_or(0),
            _ => src.len,
        };
        if id == 0 && (form != Form::Own || size != src.len) {
            return Err(bad("the root is not the file"));
        }
        if let Some(d) = declared_size
            && form == Form::Window
            && size > d
        {
            return Err(bad(&format!(
                "{size} bytes where its container declares {d}"
            )));
        }
        // Damage lies in the bytes, or where the container says bytes
        // should have been.
        let room = size
            .max(declared_size.unwrap_or(0))
            .max(origin.map_or(0, |o| o.len()));
        if let Some(d) = extras.damage.iter().find(|d| d.range.end > room) {
            return Err(bad(&format!(
                "damage at {} past its end ({room} bytes)",
                d.range
            )));
        }
        let parser = match rec.parser {
            0 => None,
            k => Some(
                *self
                    .parsers
                    .get(k as usize - 1)
                    .ok_or_else(|| bad("unknown format"))?,
            ),
        };
        let root_file = self.file.clone().filter(|_| id == 0);
        let extra = (root_file.is_some()
            || !extras.outer.is_empty()
            || !extras.notes.is_empty()
            || extras.progress != Progress::default())
        .then(|| {
            Box::new(Extra {
                file: root_file,
                outer_damage: extras.outer,
                notes: extras.notes,
                progress: extras.progress,
                like: None,
            })
        });
        let mut e = Extraction::new(
            id,
            rec.parent,
            depth,
            Parts {
                name: if id == 0 {
                    self.root_name.clone()
                } else {
                    Name::new(self.name_bytes(&rec).to_vec())
                },
                kind,
                bytes: src.data.clone(),
                form,
                origin,
                declared_size,
                damage: extras.damage,
                extra,
                phase: if rec.flags & LEAF != 0 {
                    Phase::Leaf
                } else {
                    Phase::Done
                },
                meta: Meta::new(rec.mtime, rec.mode),
            },
        );
        if let Some(p) = parser {
            e.set_parser(p);
        }
        Ok((e, Facts { size, depth }))
    }

    /// Checks every record, in order, as building the tree would: before a
    /// session serves anything from the catalog, so that the tree it may
    /// build later cannot fail. Keeps 12 bytes a record while it runs.
    pub(super) fn check_all(&self) -> Result<(), Invalid> {
        let mut facts: Vec<Facts> = Vec::with_capacity(self.n.min(1 << 20));
        for id in 0..self.n {
            let parent = self.rec(id).parent.and_then(|p| facts.get(p).copied());
            let (_, f) = self.extraction(id, parent)?;
            facts.push(f);
        }
        Ok(())
    }

    /// The whole extraction tree, read back from the records.
    pub fn tree(&self) -> Result<Tree, String> {
        self.build().map_err(|e| e.0)
    }

    fn build(&self) -> Result<Tree, Invalid> {
        let mut tree = Tree {
            restored: true,
            ..Tree::default()
        };
        let mut facts: Vec<Facts> = Vec::with_capacity(self.n.min(1 << 20));
        for id in 0..self.n {
            let rec = self.rec(id);
            let parent = rec.parent.and_then(|p| facts.get(p).copied());
            let (e, f) = self.extraction(id, parent)?;
            if let Some(p) = e.parent() {
                tree.exts[p].children.push(id);
            }
            if rec.head_crc != 0 {
                tree.set_head_crc(id, rec.head_crc);
            }
            tree.damage_count += e.damage.len();
            tree.exts.push(e);
            facts.push(f);
        }
        Ok(tree)
    }

    /// Extraction `id` and its ancestors, from the root down: what a
    /// member's bytes and status are made of.
    pub(crate) fn chain(&self, id: ExtId) -> Result<Vec<Extraction>, String> {
        if id >= self.n {
            return Err(format!("no extraction {id}"));
        }
        let mut ids = vec![id];
        let mut at = id;
        while let Some(p) = self.rec(at).parent {
            if p >= at || ids.len() as u32 > self.max_depth {
                return Err(format!("extraction {at}: bad parent"));
            }
            ids.push(p);
            at = p;
        }
        let mut out: Vec<Extraction> = Vec::with_capacity(ids.len());
        let mut facts: Option<Facts> = None;
        for &x in ids.iter().rev() {
            let (e, f) = self.extraction(x, facts).map_err(|e| e.0)?;
            out.push(e);
            facts = Some(f);
        }
        Ok(out)
    }

    /// The CRC-32 of `id`'s first bytes as the parse sniffed them (see
    /// [`Tree::head_crc`]).
    pub(crate) fn head_crc(&self, id: ExtId) -> Option<u32> {
        (id < self.n)
            .then(|| self.rec(id).head_crc)
            .filter(|&c| c != 0)
    }

    /// How many children `id` has.
    pub(crate) fn children(&self, id: ExtId) -> usize {
        if id < self.n {
            self.rec(id).kids as usize
        } else {
            0
        }
    }

    /// The children of `id`, in container order: those of the kids array
    /// that name `id` as their parent (a forged array names others, which
    /// are left out).
    pub(crate) fn children_of(&self, id: ExtId) -> Vec<ExtId> {
        if id >= self.n {
            return Vec::new();
        }
        let r = self.at + HEAD + id * REC;
        let start = self.u32_at(r + 76) as usize;
        let count = self.rec(id).kids as usize;
        let end = start.saturating_add(count).min(self.kids_len);
        (start.min(end)..end)
            .map(|k| self.u32_at(self.kids_at + k * 4) as usize)
            .filter(|&c| c < self.n && c > id && self.rec(c).parent == Some(id))
            .collect()
    }

    /// Whether `id`'s folders list an entry under a name of its own (see
    /// `RENAMES`).
    pub(crate) fn renames(&self, id: ExtId) -> bool {
        id < self.n && self.rec(id).flags & RENAMES != 0
    }

    /// The members of `c` whose name in PATH form, without a trailing `/`,
    /// is `bare`, in container order.
    fn named(&self, c: ExtId, bare: &str) -> Vec<ExtId> {
        let mask = self.slots - 1;
        let mut at = key_hash(c as u32, bare.as_bytes()) as usize & mask;
        let mut out = Vec::new();
        // Every slot is looked at once at most, even in a forged table
        // without an empty one.
        for _ in 0..self.slots {
            let v = self.u32_at(self.table_at + at * 4);
            if v == 0 {
                break;
            }
            let x = v as usize - 1;
            if x < self.n {
                let rec = self.rec(x);
                if rec.parent == Some(c)
                    && bare_key(&Name::new(self.name_bytes(&rec).to_vec())).as_deref() == Some(bare)
                {
                    out.push(x);
                }
            }
            at = (at + 1) & mask;
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The extraction `path` (in normal form, see
    /// [`crate::name::normal_path`]) names, found as `pparse::fs` finds it
    /// through a container's folders: the members whose names are `path`
    /// up to a `/` or its end, in container order, each tried in turn.
    /// `None`: not found this way (a PATH that only a listing's spelling,
    /// or a directory made by names, leads to).
    pub(crate) fn resolve(&self, path: &str) -> Option<ExtId> {
        self.find(0, path.trim_start_matches('/'), 0)
    }

    fn find(&self, c: ExtId, rest: &str, depth: usize) -> Option<ExtId> {
        if rest.is_empty() {
            return Some(c);
        }
        if depth > 256 || self.children(c) == 0 {
            return None;
        }
        let mut hits: Vec<(ExtId, usize)> = Vec::new();
        let ends = rest.match_indices('/').map(|(i, _)| i).chain([rest.len()]);
        for i in ends.filter(|&i| i > 0) {
            for x in self.named(c, &rest[..i]) {
                let name = Name::new(self.name_bytes(&self.rec(x)).to_vec());
                hits.extend(match_name(&name.path_form(), rest).map(|at| (x, at)));
            }
        }
        hits.sort_unstable();
        hits.dedup();
        for (x, at) in hits {
            if at == rest.len() {
                return Some(x);
            }
            if let Some(found) = self.find(x, &rest[at..], depth + 1) {
                return Some(found);
            }
        }
        None
    }
}
