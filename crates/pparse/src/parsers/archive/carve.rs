//! Carving: looking for the formats pparse reads inside bytes no parser
//! claims, as binwalk does for firmware, but with each candidate proved by
//! its format's own sniffer before it becomes a child.
//!
//! What is scanned: the spans a parser marks as unclaimed (nodes of kind
//! [`UNCLAIMED`]: the bytes a damaged tar or gzip skipped, a zip's gap or
//! what follows its end), and the opened file when no format takes it. The
//! engine runs the [`Carver`] as the extraction's parser once the real one
//! is done, so it works in the background with progress like any parse.
//!
//! Bounds: at most [`BUDGET`] bytes scanned per extraction, at most
//! [`TRIES_PER_MB`] candidates tried per MiB scanned (a file of `PK`s does
//! not make a million trials), at most [`MAX_FOUND`] children, found files
//! nested in found files at most [`MAX_FOUND_DEPTH`] deep. A candidate
//! becomes `found@0xOFFSET.EXT`, a window over the bytes from its offset to
//! the end of its span (a gzip member: to its own end, so several found in
//! one span stay apart), with a note saying it was found by a scan.
//!
//! A carver never finds what it scans again ([`Seen`]): a zip whose first
//! local header is damaged leaves its start unclaimed, and the zip
//! signature there is the zip itself, not a zip inside it; found again, it
//! would be scanned again and found again, a level deeper each time.

use std::sync::Arc;

use crate::data::{Data, Range, SliceSource, view};
use crate::extraction::{EntryKind, ExtId, Extraction, Tree};
use crate::name::Name;
use crate::node::Node;
use crate::parsers::api::{ChildSpec, Options, Parser, SNIFF_LEN, Sniff, Step, StepCx};

/// Node kinds that hold bytes no structure claims.
pub(crate) const UNCLAIMED: [&str; 3] = ["skipped", "gap", "trailing"];

/// Most bytes scanned per extraction.
pub(crate) const BUDGET: u64 = 1 << 30;
/// Most candidates tried per MiB scanned.
pub(crate) const TRIES_PER_MB: u64 = 64;
/// Most children found per extraction.
pub(crate) const MAX_FOUND: usize = 1024;
/// Spans shorter than this hold nothing worth finding.
const MIN_SPAN: u64 = 32;
/// Most found files on the way from the opened file to a found file: one
/// found in a found file is not scanned again past this.
pub(crate) const MAX_FOUND_DEPTH: usize = 4;
/// How the note on a found file begins.
const FOUND_NOTE: &str = "found by scan at ";

/// Whether `e` was found by a scan (it carries the note a carver gives).
fn is_found(e: &Extraction) -> bool {
    e.notes().iter().any(|n| n.starts_with(FOUND_NOTE))
}

/// What a carver over one extraction must not report: what it is itself.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// The formats of the extraction and of the containers it starts at
    /// the first byte of, verbatim (a found file at offset 0 of a found
    /// file, a stored entry at the start of its member…): a candidate of
    /// one of these at offset 0 starts where they start, in the same
    /// bytes, so it is one of them.
    formats: Vec<&'static str>,
    /// The extraction was found by a scan: a candidate at its offset 0
    /// that spans all of it is the found file itself.
    found: bool,
}

/// What a carver over extraction `id` must not find again, or, when `id`
/// is a found file nested in [`MAX_FOUND_DEPTH`] found files already,
/// `Err` with the note that says it is not scanned.
pub(crate) fn seen(t: &Tree, id: ExtId) -> Result<Seen, String> {
    let mut seen = Seen {
        formats: Vec::new(),
        found: is_found(&t.exts[id]),
    };
    // Up through the containers whose first byte is this extraction's
    // first byte (`origin` of a verbatim window starting at 0).
    let mut at = id;
    loop {
        let e = &t.exts[at];
        seen.formats.extend(e.parser());
        match e.parent() {
            Some(p) if e.is_window() && e.origin().is_some_and(|o| o.start == 0) => at = p,
            _ => break,
        }
    }
    let mut depth = 0;
    let mut at = Some(id);
    while let Some(x) = at {
        depth += usize::from(is_found(&t.exts[x]));
        at = t.exts[x].parent();
    }
    if depth >= MAX_FOUND_DEPTH {
        return Err(format!(
            "not scanned for other formats: found by scan {depth} levels deep already"
        ));
    }
    Ok(seen)
}

/// The spans of `nodes` (top level) that no structure claims.
pub(crate) fn unclaimed(nodes: &[Node]) -> Vec<Range> {
    nodes
        .iter()
        .filter(|n| UNCLAIMED.contains(&n.kind) && n.range.len() >= MIN_SPAN)
        .map(|n| n.range)
        .collect()
}

/// Scans spans of an extraction's bytes for known formats.
pub(crate) struct Carver {
    data: Data,
    spans: Vec<Range>,
    span: usize,
    pos: u64,
    scanned: u64,
    tries: u64,
    found: usize,
    seen: Seen,
    opts: Options,
    scratch: Vec<u8>,
}

impl Carver {
    /// A carver over `spans` of `data`, the bytes of an extraction that
    /// is what `seen` says ([`seen`]).
    pub(crate) fn new(data: Data, mut spans: Vec<Range>, seen: Seen, opts: &Options) -> Carver {
        spans.sort_by_key(|r| r.start);
        let pos = spans.first().map_or(0, |r| r.start);
        Carver {
            data,
            spans,
            span: 0,
            pos,
            scanned: 0,
            tries: 0,
            found: 0,
            seen,
            opts: opts.clone(),
            scratch: Vec::new(),
        }
    }

    /// The format that takes the bytes at `at` (up to `end`), judged by
    /// its sniffer from its magic alone (no name).
    fn probe(&mut self, at: u64, end: u64) -> Option<(&'static crate::parsers::Format, Data)> {
        self.tries += 1;
        let window: Data = Arc::new(SliceSource::new(self.data.clone(), Range::new(at, end)));
        let mut head = vec![0u8; SNIFF_LEN.min((end - at) as usize)];
        let n = window.read_at(0, &mut head).ok()?;
        head.truncate(n);
        let kind = EntryKind::File;
        let sniff = Sniff {
            head: &head,
            name: "",
            data: &window,
            kind: &kind,
            file: None,
            options: &self.opts,
        };
        let f = crate::parsers::sniff(&sniff)?;
        Some((f, window))
    }
}

/// How far before its signature a start can be (a tar header's `ustar`).
const LOOKBACK: u64 = 257;

/// Offsets in `b` where a known signature could put a format's start,
/// relative to `b` (a tar header starts 257 bytes before its `ustar`):
/// gzip, zip local headers, tar headers, bzip2 blocks, xz and zstd
/// frames, safetensors headers, pickles of protocol 4 and 5, HDF5
/// superblocks. Each is then
/// proved by its format's sniffer (a tar header's checksum, a zip
/// header's fields).
fn candidates(b: &[u8], mut f: impl FnMut(usize) -> bool) {
    for i in 0..b.len() {
        let hit = match b[i] {
            0x1f => b[i..].starts_with(&[0x1f, 0x8b, 0x08]),
            b'P' => b[i..].starts_with(b"PK\x03\x04"),
            b'B' => b[i..].starts_with(b"BZh") && b.get(i + 4..i + 10) == Some(b"1AY&SY"),
            0xfd => b[i..].starts_with(b"\xfd7zXZ\x00"),
            0x28 => b[i..].starts_with(&[0x28, 0xb5, 0x2f, 0xfd]),
            0x89 => b[i..].starts_with(b"\x89HDF\r\n\x1a\n"),
            // A safetensors header: a length up to 100 MB, then `{"`.
            b'{' if i >= 8 && b.get(i + 1) == Some(&b'"') => {
                let n = u64::from_le_bytes(b[i - 8..i].try_into().expect("8 bytes"));
                if (2..=100_000_000).contains(&n) && !f(i - 8) {
                    return;
                }
                false
            }
            // Protocol 4 or 5 and a first frame that fits: random bytes
            // pass that about once in 2^58.
            0x80 => {
                matches!(b.get(i + 1), Some(4 | 5))
                    && b.get(i + 2) == Some(&0x95)
                    && b.get(i + 7..i + 11) == Some(&[0, 0, 0, 0])
            }
            _ => false,
        };
        if hit && !f(i) {
            return;
        }
        if b[i] == b'u' && i >= 257 && b[i..].starts_with(b"ustar") && !f(i - 257) {
            return;
        }
    }
}

impl Parser for Carver {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        let data = self.data.clone();
        let avail = data.available();
        while let Some(&span) = self.spans.get(self.span) {
            let end = span.end.min(avail);
            if self.pos >= end || self.scanned >= BUDGET || self.found >= MAX_FOUND {
                self.span += 1;
                if let Some(next) = self.spans.get(self.span) {
                    self.pos = next.start;
                }
                continue;
            }
            let want = ((end - self.pos) as usize).min(cx.budget.max(1 << 16) as usize);
            // Read a little before `pos` again: a signature found there
            // may put its start before the chunk.
            let lead = (self.pos - span.start).min(LOOKBACK);
            let mut scratch = std::mem::take(&mut self.scratch);
            let Ok(bytes) = view(&*data, self.pos - lead, want + lead as usize, &mut scratch)
            else {
                self.scratch = scratch;
                self.pos = end; // unreadable: on to the next span
                continue;
            };
            let bytes = bytes.to_vec();
            self.scratch = scratch;
            let (start, base) = (self.pos, self.pos - lead);
            if bytes.len() as u64 <= lead {
                self.pos = end; // nothing new could be read
                continue;
            }
            let mut next = base + bytes.len() as u64;
            let mut hits = Vec::new();
            candidates(&bytes, |i| {
                hits.push(base + i as u64);
                true
            });
            let allowed = TRIES_PER_MB * (1 + (self.scanned + bytes.len() as u64) / (1 << 20));
            for at in hits {
                if at < self.pos || self.tries >= allowed || self.found >= MAX_FOUND {
                    continue;
                }
                let Some((format, window)) = self.probe(at, end) else {
                    continue;
                };
                // A gzip start must decode, to its end or the span's; a
                // safetensors header that reads whole says where it ends.
                let stop = match format.extent {
                    Some(extent) => match extent(&window) {
                        Some(e) => Some(at.saturating_add(e).min(end)),
                        None => continue,
                    },
                    None => None,
                };
                let child_end = stop.unwrap_or(end);
                drop(window);
                // What is scanned, or a container it starts at: no find.
                if at == 0
                    && (self.seen.formats.contains(&format.name)
                        || (self.seen.found && child_end >= avail))
                {
                    continue;
                }
                let name = format!("found@{at:#x}{}", extension(format.name));
                let range = Range::new(at, child_end);
                let spec = ChildSpec::window(Name::new(name), EntryKind::File, &self.data, range);
                let id = cx.add_child(spec);
                cx.child_note(
                    id,
                    format!(
                        "{FOUND_NOTE}{at:#x}: bytes no parser claimed hold a {} start",
                        format.name
                    ),
                );
                cx.push_node(
                    Node::new("found", format.name, Range::new(at, child_end))
                        .text(format!("found by scan at {at:#x}")),
                );
                self.found += 1;
                self.pos = child_end;
                if child_end >= end {
                    next = end;
                    break;
                }
            }
            let done = next.max(self.pos).min(end);
            self.scanned += done - start;
            self.pos = done;
            cx.progress(self.pos, Some(avail));
            return Step::Yield;
        }
        Step::Done
    }
}

/// A file name extension for a found format, so the name says what it is.
fn extension(format: &str) -> &'static str {
    match format {
        "gzip" => ".gz",
        "zip" => ".zip",
        "tar" => ".tar",
        "bzip2" => ".bz2",
        "xz" => ".xz",
        "zstd" => ".zst",
        "pickle" => ".pkl",
        "safetensors" => ".safetensors",
        "torch" => ".pt",
        "hdf5" => ".h5",
        _ => "",
    }
}
