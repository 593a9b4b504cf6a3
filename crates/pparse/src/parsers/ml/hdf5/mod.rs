//! HDF5 files (h5py's datasets, Keras weights): the superblock, groups and
//! datasets, read where they lie.
//!
//! A file starts with a superblock (at 0, or at 512 times a power of two
//! after a user block) that names the root group's object header. An
//! object header is a list of messages: a group's say where its members
//! are (a symbol table: a v1 B-tree over symbol-table nodes whose names
//! are in a local heap; link messages in the header; or, for a new-style
//! group of many members, link messages in a fractal heap indexed by a v2
//! B-tree), a dataset's give its dataspace
//! (shape), datatype, layout (compact in the header, contiguous in one
//! range, or chunked) and filters. See `read` for the structures.
//!
//! The parse reads the superblock and walks every object once to judge
//! the file: a file shorter than the end the superblock records is
//! truncated there; an object header that cannot be read, a checksum that
//! does not match and a dataset whose bytes run past the end are damage at
//! their offsets, and everything else is kept. Nodes are lazy: a group's
//! members are read when it is expanded.
//!
//! Every dataset is a child extraction named by its path (as h5py names
//! it): a window on its bytes when it is stored compact or contiguous, or
//! its chunks decoded in C order (`chunks`). After the walk, the parse
//! decodes every chunk once, a budget's worth per step, and marks the
//! span of the values of each that fails. Datasets are tensors over those
//! bytes.
//!
//! Not read yet: huge and tiny fractal-heap objects, and finding
//! structures by their signatures when the path from the root is broken.

mod chunks;
mod dataset;
mod keras;
mod orphans;
mod read;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::data::{Data, Range, Source};
use crate::extraction::{EntryKind, ExtId, Tree};
use crate::name::{Name, escape_bytes, escape_str};
use crate::node::{Node, Value};
use crate::offer::tensor::{Tensor, shape_text};
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{ChildSpec, Format, Parser, Sniff, Step, StepCx};
use crate::status::{Damage, Status};

use chunks::{Array, Grid, Pipeline};
use dataset::Dataset;
use read::{Bad, Header, Layout, ObjectKind, Space, Superblock, msg};

/// HDF5 files.
pub(crate) static FORMAT: Format = Format {
    name: "hdf5",
    // A superblock at 0 records where the file ends.
    extent: Some(|d| {
        let sb = Superblock::find(&**d).ok().filter(|sb| sb.at == 0)?;
        sb.base.checked_add(sb.eof)
    }),
    sniff,
    parse: |data, _| {
        Box::new(Hdf5Parser {
            data: data.clone(),
            checks: Vec::new(),
            started: false,
            count: 0,
        })
    },
    load,
    offers: Offers {
        tensors: Some(TensorOffer::List(tensors)),
        ..Offers::NONE
    },
};

/// Objects visited by one walk at most.
const MAX_OBJECTS: usize = 1_000_000;
/// Groups nested at most.
const MAX_DEPTH: usize = 64;
/// Damage recorded by one parse at most.
const MAX_DAMAGE: usize = 1000;

fn sniff(s: &Sniff) -> bool {
    // A user block moves the superblock to 512, 1024, …: those in the
    // first bytes are seen here.
    read::superblock_places(s.head.len() as u64).any(|at| {
        s.head
            .get(at as usize..)
            .is_some_and(|h| h.starts_with(read::MAGIC))
    })
}

struct Hdf5Parser {
    data: Data,
    /// Chunked datasets whose chunks are still to be checked, after the
    /// first step: (child, its values, the next chunk).
    checks: Vec<(ExtId, Arc<Array>, usize)>,
    started: bool,
    /// Problems recorded as damage so far.
    count: usize,
}

impl Parser for Hdf5Parser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        if !self.started {
            let (avail, fin) = self.data.extent();
            if !fin {
                // Its structures point anywhere in the file.
                cx.progress(avail, None);
                return Step::Blocked;
            }
            self.started = true;
            self.start(cx);
            self.checks.reverse();
            return Step::Yield;
        }
        self.check(cx)
    }
}

impl Hdf5Parser {
    /// Records a problem as damage, the first [`MAX_DAMAGE`] of them.
    fn report(&mut self, e: &Bad, cx: &mut StepCx) {
        self.count += 1;
        if self.count <= MAX_DAMAGE {
            cx.damage(damage(e, self.data.available()));
        }
    }

    /// Reads the superblock and walks every object: nodes, damage, and a
    /// child per dataset with values.
    fn start(&mut self, cx: &mut StepCx) {
        let data = self.data.clone();
        let src = &*data;
        let avail = src.available();
        let sb = match Superblock::find(src) {
            Ok(sb) => sb,
            Err(e) => {
                cx.damage(damage(&e, avail));
                return;
            }
        };
        cx.push_node(superblock_node(&sb));
        if sb.checksum == Some(false) {
            let e = Bad::wrong(sb.at, "the superblock's checksum does not match");
            self.report(&e, cx);
        }
        let eof = sb.base.saturating_add(sb.eof);
        if eof > avail {
            cx.damage(Damage::truncated(
                Range::new(avail, eof),
                format!("the superblock records {eof} bytes; the file has {avail}"),
            ));
        }
        match Header::read(src, &sb, sb.root) {
            Ok(h) => {
                cx.push_node(object_node(src, &sb, b"/", &h));
                if let Some(k) = keras::layout(src, &sb, &h) {
                    cx.push_node(
                        Node::new("keras", "keras layers", h.range)
                            .text(keras::summary(src, &sb, k))
                            .lazy(),
                    );
                }
            }
            // The walk reports it, and looks for what it hides.
            Err(e) => {
                cx.push_node(
                    Node::new("group", "/", Range::new(sb.root, sb.root))
                        .damaged(damage(&e, avail)),
                );
            }
        }
        let mut problems = Vec::new();
        let mut checks = Vec::new();
        let recovered = walk(src, &sb, &mut problems, |path, h, kind| {
            let mut out = Vec::new();
            if kind == ObjectKind::Dataset {
                let d = Dataset::of(&sb, h);
                if let Some(c) = dataset_child(&data, &sb, path, &d, &mut out, cx) {
                    checks.push(c);
                }
            }
            out
        });
        for e in &problems {
            self.report(e, cx);
        }
        if recovered > 0 {
            cx.note(format!(
                "{recovered} objects the groups no longer reach were found by their signatures: `recovered/`"
            ));
        }
        self.checks = checks;
        cx.progress(0, Some(avail));
    }

    /// Checks chunks of chunked datasets, a budget's worth per step.
    fn check(&mut self, cx: &mut StepCx) -> Step {
        let avail = self.data.available();
        let mut work = 0u64;
        while let Some((child, array, next)) = self.checks.last_mut() {
            let (child, k) = (*child, *next);
            let Some(c) = array.chunks().get(k).copied() else {
                self.checks.pop();
                continue;
            };
            *next += 1;
            if cx.decode_left == 0 {
                let d = cx.budget_damage(0);
                cx.child_damage(child, d);
                self.checks.pop();
                continue;
            }
            work = work.saturating_add(c.size.max(64));
            let grid = array.grid();
            let bad = if array.is_filtered(&c) {
                let r = array.decode(k);
                cx.decoded(grid.chunk_bytes);
                r.err()
            } else {
                array.check_bounds(&c, avail)
            };
            if bad.is_none()
                && let Some(why) = array.doubtful_mask(&c)
            {
                let coords = grid.coords_text(c.index);
                cx.child_damage(
                    child,
                    Damage::unverified(
                        grid.span(c.index),
                        format!("chunk {coords} at {}: {why}", c.at),
                    ),
                );
            }
            if let Some((r, why, cut)) = bad {
                let coords = grid.coords_text(c.index);
                let why = format!("chunk {coords} at {}: {why}", r.start);
                let span = grid.span(c.index);
                let (inner, outer) = if cut {
                    (
                        Damage::truncated(span, why.clone()),
                        Damage::truncated(Range::new(r.start.min(avail), avail), why),
                    )
                } else {
                    (Damage::corrupt(span, why.clone()), Damage::corrupt(r, why))
                };
                cx.child_damage(child, inner);
                self.count += 1;
                if self.count <= MAX_DAMAGE {
                    cx.damage(outer);
                }
            }
            if work >= cx.budget {
                return Step::Yield;
            }
        }
        if self.count > MAX_DAMAGE {
            cx.note(format!(
                "{} more problems not recorded",
                self.count - MAX_DAMAGE
            ));
        }
        cx.progress(avail, Some(avail));
        Step::Done
    }
}

/// Adds the child that holds a dataset's values, as the file names it:
/// its bytes in the file (compact or contiguous), or its chunks decoded
/// in C order. Returns a chunked dataset's values, whose chunks are to be
/// checked. Problems in the file go to `out`.
fn dataset_child(
    data: &Data,
    sb: &Superblock,
    path: &str,
    d: &Dataset,
    out: &mut Vec<Bad>,
    cx: &mut StepCx,
) -> Option<(ExtId, Arc<Array>, usize)> {
    let avail = data.available();
    let name = Name::new(path.as_bytes().to_vec());
    if let Some(r) = d.range() {
        if r.end > avail {
            out.push(Bad {
                at: r.start,
                why: format!("a dataset's {} bytes run past the end", r.len()),
                cut: true,
            });
        }
        let kept = Range::new(r.start.min(avail), r.end.min(avail));
        let mut spec = ChildSpec::window(name, EntryKind::File, data, kept);
        spec.declared_size = Some(r.len());
        spec.parse = d.may_hold_a_file();
        if r.end > avail {
            spec.damage.push(Damage::truncated(
                Range::new(kept.len(), kept.len()),
                format!(
                    "its values end at {}, past the end of the file ({avail})",
                    r.end
                ),
            ));
        }
        if let Some(want) = d.nbytes().filter(|&n| n != r.len()) {
            spec.damage.push(Damage::corrupt(
                Range::new(0, kept.len()),
                format!("{} bytes stored for {want} by its shape", r.len()),
            ));
        }
        cx.add_child(spec);
        return None;
    }
    let Some(Layout::Chunked(ch)) = &d.layout else {
        return None;
    };
    let mut problems = Vec::new();
    let (grid, list) = match chunk_list(data.as_ref(), sb, d, &mut problems)? {
        Ok(g) => g,
        Err(why) => {
            cx.note(format!(
                "{}: {why}; its values are not read",
                escape_str(path)
            ));
            return None;
        }
    };
    let pipe = Pipeline {
        filters: d.filters.clone(),
        elem: grid.elem as usize,
        edge_unfiltered: ch.edge_unfiltered,
    };
    let unknown = pipe.unknown();
    if !unknown.is_empty() {
        // Each chunk as it is stored, named as zarr names chunks (`0.3`).
        cx.note(format!(
            "{}: its chunks are stored with {}, which is not decoded; each is listed as its stored bytes",
            escape_str(path),
            unknown.join("+")
        ));
        out.extend(problems);
        for c in list.iter().take(MAX_CHUNK_FILES) {
            let r = Range::new(c.at, c.at.saturating_add(c.size));
            let kept = Range::new(r.start.min(avail), r.end.min(avail));
            let key = grid.coords_text(c.index);
            let key = key.trim_matches(['(', ')']).replace(", ", ".");
            let mut spec = ChildSpec::window(
                Name::new(format!("{path}/{key}").into_bytes()),
                EntryKind::File,
                data,
                kept,
            );
            spec.parse = false;
            spec.declared_size = Some(r.len());
            if r.end > avail {
                spec.damage.push(Damage::truncated(
                    Range::new(kept.len(), kept.len()),
                    "the chunk runs past the end of the file",
                ));
            }
            cx.add_child(spec);
        }
        return None;
    }
    let nbytes = grid.nbytes;
    let unchecked = ch.kind == read::IndexKind::BTree1;
    let array = Arc::new(Array::new(
        data.clone(),
        grid,
        list,
        pipe,
        d.fill.clone(),
        unchecked,
    ));
    let mut spec = ChildSpec::new(name, EntryKind::File, array.clone() as Data);
    spec.declared_size = Some(nbytes);
    spec.parse = d.may_hold_a_file();
    if let Some(e) = problems.first() {
        spec.damage.push(Damage::corrupt(
            Range::new(0, nbytes),
            format!(
                "its chunk index is damaged at {} ({}): the chunks it lists there are missing",
                e.at, e.why
            ),
        ));
    }
    out.extend(problems);
    let child = cx.add_child(spec);
    Some((child, array, 0))
}

/// Chunks of one dataset listed as files at most (those of a filter not
/// decoded).
const MAX_CHUNK_FILES: usize = 100_000;

/// A chunked dataset's grid and its chunks, read from its index (`None`:
/// it is not chunked or has no shape or type; an error: its grid is not
/// read). Problems in the index go to `problems`.
fn chunk_list(
    src: &dyn Source,
    sb: &Superblock,
    d: &Dataset,
    problems: &mut Vec<Bad>,
) -> Option<Result<(Grid, Vec<chunks::Chunk>), String>> {
    let Some(Layout::Chunked(ch)) = &d.layout else {
        return None;
    };
    let (shape, t) = (d.shape()?, d.dtype.as_ref()?);
    let grid = match Grid::new(&shape, &ch.dims, u64::from(t.size), ch.index.unwrap_or(0)) {
        Ok(g) => g,
        Err(e) => return Some(Err(e.why)),
    };
    let list = chunks::chunks(
        src,
        sb,
        ch,
        &grid,
        d.max.as_deref(),
        !d.filters.is_empty(),
        problems,
    );
    Some(Ok((grid, list)))
}

/// The damage a problem makes: truncated from it to the end when the
/// bytes ran out, corrupt at it otherwise.
fn damage(e: &Bad, avail: u64) -> Damage {
    if e.cut {
        Damage::truncated(Range::new(e.at.min(avail), avail), e.why.clone())
    } else {
        Damage::corrupt(Range::new(e.at, e.at.saturating_add(1)), e.why.clone())
    }
}

fn superblock_node(sb: &Superblock) -> Node {
    let r = Range::new(sb.at, sb.at + sb.len);
    let field = |name: &str, v: u64| Node::new("field", name.to_string(), r).uint(v);
    let mut kids = vec![
        field("size of offsets", u64::from(sb.offsets)),
        field("size of lengths", u64::from(sb.lengths)),
        field("base address", sb.base),
        field("end of file", sb.eof),
        field("root group header", sb.root),
    ];
    if let Some(ok) = sb.checksum {
        kids.push(Node::new("field", "checksum holds", r).value(Value::Bool(ok)));
    }
    Node::new("superblock", "superblock", r)
        .text(format!("version {}", sb.version))
        .with_children(kids)
}

/// The node of an object named `name` whose header is `h`.
fn object_node(src: &dyn Source, sb: &Superblock, name: &[u8], h: &Header) -> Node {
    let name = escape_bytes(name);
    let node = match h.kind() {
        ObjectKind::Group => Node::new("group", name, h.range).text("group").lazy(),
        ObjectKind::Dataset => {
            let d = Dataset::of(sb, h);
            Node::new("dataset", name, h.range).text(d.summary()).lazy()
        }
        ObjectKind::Datatype => Node::new("object", name, h.range)
            .text("named datatype")
            .lazy(),
        ObjectKind::Other => Node::new("object", name, h.range).text("object").lazy(),
    };
    match h.problems.first() {
        Some(e) => node.damaged(damage(e, src.available())),
        None => node,
    }
}

/// Where the values of the dataset whose header is `h` are in the file,
/// when they are in one range.
fn data_range(sb: &Superblock, h: &Header) -> Option<Range> {
    (h.kind() == ObjectKind::Dataset).then(|| Dataset::of(sb, h).range())?
}

/// Visits every object reachable from the root once, groups before their
/// members, with its path (`a/b`, as h5py names it); `visit` returns the
/// problems it finds. Problems met reading are added to `problems`. When
/// there are any, the objects the walk did not reach are looked for by
/// their signatures (see `orphans`) and visited as `recovered/NAME@0xAT`
/// (`recovered/0xAT` when nothing names them), a group with its members
/// below it. Returns how many were found.
fn walk(
    src: &dyn Source,
    sb: &Superblock,
    problems: &mut Vec<Bad>,
    mut visit: impl FnMut(&str, &Header, ObjectKind) -> Vec<Bad>,
) -> usize {
    let mut seen = HashSet::new();
    walk_from(src, sb, sb.root, "", &mut seen, problems, &mut visit);
    if problems.is_empty() {
        return 0;
    }
    let found = orphans::find(src, sb, &seen);
    let label = |o: &orphans::Orphan| match &o.name {
        Some(n) => format!("recovered/{}@{:#x}", String::from_utf8_lossy(n), o.at),
        None => format!("recovered/{:#x}", o.at),
    };
    let mut count = 0;
    // Groups first: what they still reach is named below them.
    for o in found
        .iter()
        .filter(|o| o.header.kind() == ObjectKind::Group)
    {
        if !seen.contains(&o.at) {
            count += 1;
            walk_from(src, sb, o.at, &label(o), &mut seen, problems, &mut visit);
        }
    }
    for o in found
        .iter()
        .filter(|o| o.header.kind() != ObjectKind::Group)
    {
        if seen.insert(o.at) {
            count += 1;
            problems.extend(visit(&label(o), &o.header, o.header.kind()));
        }
    }
    count
}

/// Walks from the object at `start`, named `prefix` (the root: empty, and
/// not visited itself), once per address in `seen`.
fn walk_from(
    src: &dyn Source,
    sb: &Superblock,
    start: u64,
    prefix: &str,
    seen: &mut HashSet<u64>,
    problems: &mut Vec<Bad>,
    visit: &mut impl FnMut(&str, &Header, ObjectKind) -> Vec<Bad>,
) {
    // (path, header address, depth)
    let mut todo = vec![(prefix.to_string(), start, 0usize)];
    while let Some((path, at, depth)) = todo.pop() {
        if seen.len() >= MAX_OBJECTS {
            problems.push(Bad {
                at,
                why: format!("more than {MAX_OBJECTS} objects"),
                cut: false,
            });
            return;
        }
        if !seen.insert(at) {
            continue;
        }
        let h = match Header::read(src, sb, at) {
            Ok(h) => h,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        problems.extend(h.problems.iter().cloned());
        let kind = h.kind();
        if !path.is_empty() {
            problems.extend(visit(&path, &h, kind));
        }
        if kind != ObjectKind::Group {
            continue;
        }
        if depth >= MAX_DEPTH {
            problems.push(Bad {
                at,
                why: format!("groups nested deeper than {MAX_DEPTH}"),
                cut: false,
            });
            continue;
        }
        let mut ms = read::members(src, sb, &h, problems);
        // h5py visits members by name.
        ms.sort_by(|a, b| a.name.cmp(&b.name));
        for m in ms.into_iter().rev() {
            let Some(header) = m.header else { continue };
            let name = String::from_utf8_lossy(&m.name);
            let p = if path.is_empty() {
                name.into_owned()
            } else {
                format!("{path}/{name}")
            };
            todo.push((p, header, depth + 1));
        }
    }
}

fn load(data: &dyn Source, node: &Node, _: &crate::Options) -> Vec<Node> {
    let Ok(sb) = Superblock::find(data) else {
        return Vec::new();
    };
    let Ok(h) = Header::read(data, &sb, node.range.start) else {
        return Vec::new();
    };
    match node.kind {
        "group" => group_members(data, &sb, &h),
        "keras" => {
            keras::layout(data, &sb, &h).map_or_else(Vec::new, |k| keras::layers(data, &sb, k))
        }
        _ => messages(data, &sb, &h),
    }
}

/// A group's members, by name, each with its object's kind.
fn group_members(src: &dyn Source, sb: &Superblock, h: &Header) -> Vec<Node> {
    let mut problems = Vec::new();
    let mut out = Vec::new();
    {
        {
            let mut ms = read::members(src, sb, h, &mut problems);
            ms.sort_by(|a, b| a.name.cmp(&b.name));
            for m in ms {
                let node = match (m.header, &m.target) {
                    (Some(at), _) => match Header::read(src, sb, at) {
                        Ok(mh) => object_node(src, sb, &m.name, &mh),
                        Err(e) => Node::new("object", escape_bytes(&m.name), Range::new(at, at))
                            .damaged(damage(&e, src.available())),
                    },
                    (None, Some(t)) => Node::new("link", escape_bytes(&m.name), h.range)
                        .text(format!("→ {}", crate::name::escape_str(t))),
                    (None, None) => {
                        Node::new("link", escape_bytes(&m.name), h.range).text("no address")
                    }
                };
                out.push(node);
            }
        }
    }
    for m in h.messages.iter().filter(|m| m.kind == msg::ATTRIBUTE) {
        out.push(attribute_node(src, sb, m));
    }
    for e in problems.iter().take(100) {
        out.push(
            Node::new("problem", "problem", Range::new(e.at, e.at))
                .damaged(damage(e, src.available())),
        );
    }
    out
}

/// An object header's messages, and a dataset's values.
fn messages(src: &dyn Source, sb: &Superblock, h: &Header) -> Vec<Node> {
    let mut out = Vec::new();
    if let Some(r) = data_range(sb, h) {
        let mut n = Node::new("data", "values", r).uint(r.len());
        if r.end > src.available() {
            n = n.damaged(Damage::truncated(
                Range::new(src.available().max(r.start), r.end),
                "the values run past the end of the file",
            ));
        }
        out.push(n);
    }
    let d = Dataset::of(sb, h);
    let mut problems = Vec::new();
    if let Some(Ok((grid, list))) = chunk_list(src, sb, &d, &mut problems) {
        const SHOWN: usize = 1000;
        let mut kids: Vec<Node> = list
            .iter()
            .take(SHOWN)
            .map(|c| {
                let r = Range::new(c.at, c.at.saturating_add(c.size));
                let mut n = Node::new("chunk", grid.coords_text(c.index), r).uint(c.size);
                if r.end > src.available() {
                    n = n.damaged(Damage::truncated(
                        Range::new(src.available().max(r.start), r.end),
                        "the chunk runs past the end of the file",
                    ));
                }
                n
            })
            .collect();
        if list.len() > SHOWN {
            kids.push(Node::new(
                "note",
                format!("{} more chunks", list.len() - SHOWN),
                h.range,
            ));
        }
        for e in problems.iter().take(100) {
            kids.push(
                Node::new("problem", "problem", Range::new(e.at, e.at))
                    .damaged(damage(e, src.available())),
            );
        }
        out.push(
            Node::new("chunks", "chunks", h.range)
                .text(format!("{} of {} written", list.len(), grid.total))
                .with_children(kids),
        );
    }
    for m in &h.messages {
        let r = Range::new(m.at, m.at + m.data.len() as u64);
        let node = Node::new("message", read::msg::name(m.kind), r);
        let node = match m.kind {
            msg::DATASPACE => match read::dataspace(m, sb) {
                Ok(Space::Simple(d)) => node.text(shape_text(&d)),
                Ok(Space::Scalar) => node.text("scalar"),
                Ok(Space::Null) => node.text("null"),
                Err(e) => node.damaged(damage(&e, src.available())),
            },
            msg::DATATYPE => match read::datatype(m) {
                Ok(t) => node.text(t.text()),
                Err(e) => node.damaged(damage(&e, src.available())),
            },
            msg::FILTERS => match read::filters(m) {
                Ok(f) => node.text(
                    f.iter()
                        .map(|&f| read::filter_name(f))
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
                Err(e) => node.damaged(damage(&e, src.available())),
            },
            msg::ATTRIBUTE => attribute_node(src, sb, m),
            _ => node.uint(m.data.len() as u64),
        };
        out.push(node);
    }
    out
}

/// An attribute message, by its name, with its value when it is numbers
/// or strings.
fn attribute_node(src: &dyn Source, sb: &Superblock, m: &read::Message) -> Node {
    let r = Range::new(m.at, m.at + m.data.len() as u64);
    match read::attribute(m, sb) {
        Ok(a) => {
            let n = Node::new("attribute", escape_bytes(&a.name), r);
            match a.text(src, sb) {
                Some(v) => n.text(v),
                None => n.text(a.dtype.text()),
            }
        }
        Err(e) => Node::new("attribute", "attribute", r).damaged(damage(&e, src.available())),
    }
}

/// The datasets, as tensors named by path: those stored compact or
/// contiguous over their bytes in the file, chunked ones over the child
/// that decodes them.
fn tensors(tree: &Tree, ext: ExtId) -> Vec<Tensor> {
    let Some(e) = tree.get(ext) else {
        return Vec::new();
    };
    let children: HashMap<&[u8], ExtId> = e
        .children
        .iter()
        .filter_map(|&c| Some((tree.get(c)?.name.raw(), c)))
        .collect();
    let data = e.data();
    let src = &*data;
    let Ok(sb) = Superblock::find(src) else {
        return Vec::new();
    };
    let avail = src.available();
    let mut out = Vec::new();
    let mut problems = Vec::new();
    walk(src, &sb, &mut problems, |path, h, kind| {
        if kind != ObjectKind::Dataset {
            return Vec::new();
        }
        let d = Dataset::of(&sb, h);
        let (Some(t), Some(shape)) = (d.dtype.as_ref(), d.shape()) else {
            return Vec::new();
        };
        let Some(dtype) = t.dtype() else {
            return Vec::new();
        };
        // Where its values are: its bytes in the file, or the child
        // that decodes its chunks.
        let (source, r, status, detail) = match d.range() {
            Some(r) => {
                let want = d.nbytes();
                let (status, detail) = if r.end > avail {
                    let why = format!(
                        "its bytes end at {}, past the end of the file ({avail})",
                        r.end
                    );
                    (Status::Truncated, Some(why))
                } else if want != Some(r.len()) {
                    let why = format!(
                        "{} bytes stored for {} by its shape",
                        r.len(),
                        want.unwrap_or(0)
                    );
                    (Status::Corrupt, Some(why))
                } else {
                    (Status::Complete, None)
                };
                (ext, r, status, detail)
            }
            None => {
                let (Some(Layout::Chunked(_)), Some(&child)) =
                    (&d.layout, children.get(path.as_bytes()))
                else {
                    return Vec::new();
                };
                let Some(c) = tree.get(child) else {
                    return Vec::new();
                };
                let status = tree.status_of(child);
                let detail = (status != Status::Complete).then(|| c.detail()).flatten();
                (
                    child,
                    Range::new(0, c.declared_size().unwrap_or(0)),
                    status,
                    detail,
                )
            }
        };
        out.push(Tensor {
            name: path.to_string(),
            dtype,
            shape,
            stride: None,
            storage_offset: None,
            source,
            offset: r.start,
            length: r.len(),
            status,
            detail,
            big_endian: t.big_endian,
            encoding: Default::default(),
        });
        Vec::new()
    });
    out
}
