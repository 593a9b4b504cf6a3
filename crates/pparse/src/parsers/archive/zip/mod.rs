//! zip: entries from the central directory when it is intact, and from a scan
//! of local headers when it is not.
//!
//! * **Central mode** (the whole file is there and its central directory
//!   parses): entries are listed from the directory at once, each checked
//!   against its local header, then verified one by one (CRC of stored data,
//!   full decode of deflated data).
//! * **Scan mode** (truncated, damaged or missing directory, or bytes still
//!   arriving from a decoder above): local headers are found by signature and
//!   validated field by field and by decoding, as libarchive's streaming
//!   reader does. An entry's extent comes from its sizes, from the end of its
//!   deflate stream, or — stored with a data descriptor — from the first
//!   `PK\7\8` whose CRC and size match the bytes before it. A validated
//!   entry's bytes are skipped as a whole, so a zip stored inside an entry is
//!   parsed as that entry's child, never as the outer archive's entries.
//!   When the bytes are complete, whatever of the central directory survives
//!   is merged in: entries whose local header was destroyed come back from it.
//!
//! Methods other than stored and deflate are listed, not decoded.
//!
//! One file per mode, so each reads on its own: `central.rs` lists entries
//! from the directory, `scan.rs` finds them by their local headers and
//! merges what survives of the directory, `verify.rs` checks an entry's
//! bytes (CRC, decoding) for both. This file holds what they share: the
//! parser's state and the step that dispatches on it. `records.rs` reads
//! the fixed records, `load.rs` rebuilds lazy nodes.

mod central;
mod load;
mod records;
mod scan;
mod verify;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use memchr::memmem;

use crate::data::{
    BlockReader, BlockSource, ChunkCache, Data, InflateSource, Inflater, Range, ReadAhead,
    SliceSource,
};
use crate::extraction::{EntryKind, ExtId};
use crate::name::Name;
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{ChildSpec, Format, Parser, Sniff, Step, StepCx};
use crate::status::Damage;
use records::{Central, Descriptor, End, Local, descriptor_len, entry_node};

/// zip, zip64, and everything built on it (torch checkpoints, wheels).
pub(crate) static FORMAT: Format = Format {
    name: "zip",
    extent: Some(found_extent),
    sniff,
    parse: |data, _| Box::new(ZipParser::new(data.clone())),
    load: load::load,
    offers: Offers {
        // A PyTorch checkpoint is a zip.
        tensors: Some(TensorOffer::Prepare(crate::parsers::ml::torch::tensor_job)),
        settled: Some(crate::parsers::ml::torch::zip_settled),
        ..Offers::NONE
    },
};

/// Where a zip found by carving ends: at the end of its span, once its
/// first local header is proved as the scan proves one (its fields
/// validate and deflated data starts to decode); `None` when it is not,
/// which is most `PK\x03\x04` in other bytes (a program that handles zips
/// holds the signature as a constant).
fn found_extent(data: &Data) -> Option<u64> {
    let mut p = ZipParser::new(data.clone());
    matches!(p.try_local(0), Probe::Valid(_)).then(|| data.available())
}

/// Whether `data`, a range of `zip`, holds an entry's own bytes as the
/// zip itself says: a local header that names `name` (as
/// [`crate::name::member_path`] makes it) ends where `data` starts and
/// declares `data`'s length as the entry's compressed size (in its fixed
/// part, its zip64 field, or the data descriptor right after `data`) and,
/// when given, `size` as its size. An index reader checks an entry's range
/// with it before serving a byte, as [`crate::parsers::archive::tar::header_vouches`]
/// does for a tar member: a range moved onto another entry, stretched or
/// shrunk in a forged index, checksums recomputed, does not follow such a
/// header. Reads its header and 64 bytes more, a few KiB when the extra
/// field is longer, and 128 KiB at most.
pub(crate) fn local_header_vouches(
    zip: &dyn crate::data::Source,
    data: Range,
    name: &[u8],
    size: Option<u64>,
) -> bool {
    let most = (records::lfh_len_most()) as u64;
    // Most extra fields are a few dozen bytes: read that much back first,
    // so opening every entry reads about its header, not KiBs more.
    let base = 30 + name.len() as u64;
    let mut tried = 0;
    [base + 64, base + 4096, most].into_iter().any(|back| {
        let back = back.min(most).min(data.start);
        let fresh = back > tried;
        tried = tried.max(back);
        fresh && header_before(zip, data, name, size, back)
    })
}

/// [`local_header_vouches`] over the `back` bytes before `data`.
fn header_before(
    zip: &dyn crate::data::Source,
    data: Range,
    name: &[u8],
    size: Option<u64>,
    back: u64,
) -> bool {
    let mut b = vec![0u8; back as usize];
    if !crate::data::read_exact_at(zip, data.start - back, &mut b).unwrap_or(false) {
        return false;
    }
    let len = data.len();
    let descriptor = |l: &Local| {
        let mut d = [0u8; 24];
        let n = zip.read_at(data.end, &mut d).unwrap_or(0);
        records::descriptor_candidates(&d[..n], l.zip64)
            .iter()
            .any(|d| d.csize == len && size.is_none_or(|s| s == d.usize))
    };
    memchr::memmem::find_iter(&b, records::LFH).any(|p| {
        let Ok(l) = records::parse_local(&b[p..]) else {
            return false;
        };
        let path = crate::name::member_path(&l.name);
        let shown: &[u8] = if path.is_empty() { &l.name } else { &path };
        p as u64 + l.len == back
            && shown == name
            && ((l.csize == len && size.is_none_or(|s| s == l.usize))
                || (l.has_descriptor() && descriptor(&l)))
    })
}

/// A directory offset moved by the archive's prefix; offsets come from the
/// file and may be anything, so this saturates instead of wrapping.
fn shifted(offset: u64, shift: i64) -> u64 {
    offset.saturating_add_signed(shift)
}

/// A local header signature at the start (even if the header is damaged:
/// the parser resynchronises), an empty archive, or a zip-like name with an
/// end record or a local header near the start.
fn sniff(s: &Sniff) -> bool {
    if s.head.starts_with(records::LFH) || s.head.starts_with(records::EOCD) {
        return true;
    }
    let lower = s.name.to_ascii_lowercase();
    let named = [
        ".zip", ".jar", ".whl", ".apk", ".pt", ".pth", ".docx", ".xlsx", ".odt", ".nupkg",
    ]
    .iter()
    .any(|ext| lower.ends_with(ext));
    named
        && (memmem::find(s.head, records::LFH).is_some()
            || (s.data.is_final() && records::find_end(s.data, false).is_some()))
}

/// Entries per node of a grouped directory (see [`GROUP_FROM`]).
const GROUP_LEN: usize = 1024;
/// Directories of more records than this list their checked entries in
/// nodes of [`GROUP_LEN`] (`entries 0–1023`, loaded on demand), not one
/// node each: a node per entry cost a zip of a million entries more than
/// its entries.
const GROUP_FROM: usize = 10_000;

/// A run of checked entries listed under one node.
struct Group {
    first: usize,
    count: usize,
    /// Where the first one's directory record is.
    record: u64,
    range: Range,
}

/// One entry found, kept for merging and for coverage.
struct Entry {
    lfh: u64,
    /// End of the entry's bytes (after any descriptor); `None` while unknown.
    end: Option<u64>,
    name: Vec<u8>,
    node: usize,
    child: Option<ExtId>,
    from_central: bool,
    /// The directory disagrees with this entry's local header.
    suspect: bool,
}

/// A central directory as read, with everything found wrong with it.
struct Directory {
    end: Option<End>,
    range: Range,
    records: Vec<Central>,
    /// Records read (`records` is emptied in central mode, which reads
    /// them again one by one).
    count: usize,
    problems: Vec<Damage>,
}

/// How an entry's bytes will be checked; cheap to hold for every entry.
enum Plan {
    /// Nothing to decode (directories, other methods, encrypted).
    None,
    /// Stored bytes up to `end`.
    Stored { end: u64 },
    /// Stored with a data descriptor: find the end by CRC.
    StoredScan,
    /// Deflate data, with the declared size as a limit when it is known.
    Deflate(Arc<InflateSource>, Option<u64>),
    /// bzip2, LZMA, zstd or xz data of a known compressed size, decoded as
    /// one block of a [`BlockSource`] (`aux` for its codec), with the
    /// declared size as a limit.
    Blocks(Arc<BlockSource>, [u64; 2], u64),
}

/// An entry waiting to be verified (central mode, merged entries).
struct Pending {
    idx: usize,
    local: Local,
    data: u64,
    expect: Option<(u32, u64, u64)>,
    plan: Plan,
}

/// The work of the entry being processed; holds buffers, so only one exists.
enum Work {
    None,
    Stored {
        pos: u64,
        end: u64,
        hasher: crc32fast::Hasher,
    },
    StoredScan(Box<StoredScan>),
    Deflate {
        inflater: Box<Inflater>,
        src: Arc<InflateSource>,
    },
    /// Deflate data was invalid (`err`): looking, from input bit `bit` of
    /// the entry's data `input`, for a deflate block to resume at.
    Resync {
        input: Data,
        bit: u64,
        err: Damage,
    },
    /// Decoding the rest of the entry after the damage into its own child
    /// (`NAME~recovered@0xOFFSET`).
    Recovered {
        inflater: Box<Inflater>,
        src: Arc<InflateSource>,
        child: crate::extraction::ExtId,
        err: Damage,
    },
    /// Decoding a bzip2, LZMA, zstd or xz entry (`reader` is the error
    /// when its decoder could not start).
    Blocks {
        src: Arc<BlockSource>,
        reader: Result<Box<dyn BlockReader>, String>,
        hasher: crc32fast::Hasher,
        limit: u64,
        scratch: Vec<u8>,
    },
    /// The deflate stream ended at `at`; its descriptor follows.
    Descriptor {
        at: u64,
        crc: u32,
        usize: u64,
    },
}

struct StoredScan {
    /// Next byte to search for a descriptor.
    pos: u64,
    /// Bytes `[data, hashed)` are in `hasher`.
    hashed: u64,
    hasher: crc32fast::Hasher,
    /// A structurally consistent descriptor whose CRC did not match.
    fallback: Option<(u64, Descriptor)>,
}

/// The entry being processed.
struct Current {
    idx: usize,
    local: Local,
    data: u64,
    /// Expected CRC and sizes (local header, directory or descriptor).
    expect: Option<(u32, u64, u64)>,
    work: Work,
    /// For stored entries whose end was searched: where the data ends.
    stored_end: Option<u64>,
}

enum State {
    Start,
    /// Central mode: list directory entries from this index on.
    List {
        next: usize,
        /// Where record `next` is.
        pos: u64,
    },
    Scan,
    Entry,
    /// The bytes are complete: read the directory and merge.
    Final,
    /// Verify queued entries.
    Verify,
    Done,
}

struct ZipParser {
    data: Data,
    state: State,
    scan_pos: u64,
    entries: Vec<Entry>,
    by_offset: HashMap<u64, usize>,
    current: Option<Current>,
    /// Central mode: the directory being listed.
    directory: Option<Directory>,
    queue: VecDeque<Pending>,
    /// Where the scan ran into a central directory header.
    cd_seen: Option<u64>,
    /// Spans covered by directory records (for the coverage pass).
    structures: Vec<Range>,
    /// How far the real bytes sit after where the directory says (archive prefix).
    shift: i64,
    /// Every valid local header by name, built only when needed.
    local_index: Option<HashMap<Vec<u8>, Vec<u64>>>,
    /// Central mode: the records (by index) whose bytes overlap an
    /// earlier-starting record's, and that record (see
    /// `central::overlaps`); none in most archives.
    overlaps: HashMap<u32, u32>,
    /// The entries (by index) whose bytes later entries overlap.
    overlapped: std::collections::HashSet<u32>,
    /// Central mode: the records of `overlapped`.
    owners: HashMap<u32, Central>,
    /// Central mode: reads the directory's records, apart from `ahead`
    /// reading local headers and data elsewhere in the file.
    cd_ahead: ReadAhead,
    /// Central mode: the record being listed (its index, and where it is).
    record: (usize, u64),
    /// Central mode: the extents of entries checked where they were
    /// listed, which keep no [`Entry`].
    checked: Vec<Range>,
    /// Central mode: checked entries are listed in groups
    /// ([`GROUP_FROM`]), and the group being filled.
    grouping: bool,
    group: Option<Group>,
    /// Central mode: how far the entries and the directory records have
    /// been listed, and their pages released (see
    /// [`crate::data::Source::release`]).
    released: (u64, u64),
    /// Children of entries whose bytes later entries repeat exactly, by
    /// local header offset: the repeats share them instead of decoding again.
    shared: HashMap<u64, Data>,
    /// Whether the next child is parsed as a container (overlapping bytes
    /// are not, or a bomb's tree grows exponentially with its depth).
    parse_child: bool,
    /// Whether an entry's leading `/` was dropped (and said so, once).
    rooted: bool,
    scratch: Vec<u8>,
    /// Reads of headers and scanned bytes, so that records close together
    /// are read from a decoded source once.
    ahead: ReadAhead,
}

impl ZipParser {
    fn new(data: Data) -> ZipParser {
        ZipParser {
            data,
            state: State::Start,
            scan_pos: 0,
            entries: Vec::new(),
            by_offset: HashMap::new(),
            current: None,
            directory: None,
            queue: VecDeque::new(),
            cd_seen: None,
            structures: Vec::new(),
            shift: 0,
            local_index: None,
            overlaps: HashMap::new(),
            overlapped: Default::default(),
            owners: HashMap::new(),
            cd_ahead: ReadAhead::new(),
            record: (0, 0),
            checked: Vec::new(),
            grouping: false,
            group: None,
            released: (0, 0),
            shared: HashMap::new(),
            parse_child: true,
            rooted: false,
            scratch: Vec::new(),
            ahead: ReadAhead::new(),
        }
    }

    /// Chooses the mode: central for a complete archive whose directory
    /// reads without a problem, scan for anything else.
    fn start(&mut self) -> Option<Step> {
        // A zip whose bytes are still arriving (a jar in a tar.gz) is read
        // from its directory once they are all there, when they fit the
        // cache with room to spare: reading it as it comes must prove each
        // local header by decoding, and a header's verdict could differ
        // from the directory's (it did, for ct.sym's directories).
        let wait = ChunkCache::global().budget() as u64 / 2;
        if !self.data.is_final() && self.data.final_len().is_some_and(|n| n <= wait) {
            return Some(Step::Blocked);
        }
        if self.data.is_final() {
            if let Some(dir) = self.read_directory(None, true) {
                // Central mode only for a directory with no problem (a
                // damaged local header is handled per entry); anything else
                // is read by scanning, which copes with damage, and merged.
                // A zip stored in a zip and cut right after the inner zip
                // ends with the inner zip's end record: its "prefix" then
                // starts with the outer zip's local header.
                let inner = self.shift > 0 && matches!(self.try_local(0), Probe::Valid(_));
                if dir.problems.is_empty() && !inner {
                    self.directory = Some(dir);
                    self.state = State::List { next: 0, pos: 0 };
                    return None;
                }
            }
            self.structures.clear();
            self.shift = 0;
        }
        self.state = State::Scan;
        None
    }

    fn push_entry(
        &mut self,
        lfh: u64,
        end: Option<u64>,
        name: &[u8],
        node: usize,
        from_central: bool,
    ) -> usize {
        let idx = self.entries.len();
        // Central mode: names serve only the merging of scan mode, and
        // offsets only `find_local`, which indexes them when first needed.
        let lean = matches!(self.state, State::List { .. });
        self.entries.push(Entry {
            lfh,
            end,
            name: if lean { Vec::new() } else { name.to_vec() },
            node,
            child: None,
            from_central,
            suspect: false,
        });
        if !lean || !self.by_offset.is_empty() {
            self.by_offset.entry(lfh).or_insert(idx);
        }
        idx
    }

    fn add_entry_child(
        &mut self,
        cx: &mut StepCx,
        idx: usize,
        local: &Local,
        kind: EntryKind,
        data: Data,
        declared: Option<u64>,
    ) {
        // Overlaps are found among the directory's records, listed in
        // central mode only.
        if matches!(self.state, State::List { .. })
            && self.overlapped.contains(&(self.record.0 as u32))
        {
            self.shared.insert(self.entries[idx].lfh, data.clone());
        }
        let dir = kind == EntryKind::Dir;
        let at = (self.entries[idx].lfh, self.entries[idx].end);
        self.entries[idx].child = self.add_entry_spec(cx, at, local, dir, |name| {
            let mut spec = ChildSpec::new(name, kind, data);
            spec.declared_size = declared;
            spec
        });
    }

    /// Adds the child of the entry whose local header is at `at.0` as
    /// `make` makes it from the entry's name (its origin, unless `make`
    /// sets it, is the entry's data up to its end `at.1`); `dir` if it is a
    /// directory. `None` for the archive's own top (`./`).
    fn add_entry_spec(
        &mut self,
        cx: &mut StepCx,
        at: (u64, Option<u64>),
        local: &Local,
        dir: bool,
        make: impl FnOnce(Name) -> ChildSpec,
    ) -> Option<ExtId> {
        // The entry as `unzip` names it (`./x` is `x`, `/x` is `x`); its
        // local header node keeps the name as stored.
        let path = crate::name::member_path(&local.name);
        if path.is_empty() && dir {
            // `./`: the archive's own top, no entry of it.
            return None;
        }
        if local.name.starts_with(b"/") && !path.is_empty() && !self.rooted {
            self.rooted = true;
            cx.note("removed the leading `/` from entry names, as unzip does");
        }
        let name = if path.is_empty() {
            local.name.clone()
        } else {
            path.into_owned()
        };
        let mut spec = make(Name::new(name));
        spec.parse = self.parse_child;
        let start = at.0 + local.len;
        spec.origin
            .get_or_insert(Range::new(start, at.1.unwrap_or(start)));
        spec.meta = crate::extraction::Meta::new(records::dos_time(local.time), local.mode);
        Some(cx.add_child(spec))
    }
}

/// What a candidate local header (or its data) turned out to be.
enum Probe<T = Local> {
    Valid(T),
    NeedMore,
    Invalid,
}

/// How far one budget of an entry's work got.
enum Outcome {
    Yield,
    Blocked,
    Again,
    /// A deflate block to resume at was found at this bit of the entry's data.
    Recover(u64),
    Done(Result<(), Damage>),
}

fn work(plan: Plan, data: u64) -> Work {
    match plan {
        Plan::None => Work::None,
        Plan::Stored { end } => Work::Stored {
            pos: data,
            end,
            hasher: crc32fast::Hasher::new(),
        },
        Plan::StoredScan => Work::StoredScan(Box::new(StoredScan {
            pos: data,
            hashed: data,
            hasher: crc32fast::Hasher::new(),
            fallback: None,
        })),
        Plan::Blocks(src, aux, limit) => {
            let reader = src.open(0, aux).map_err(|e| e.to_string());
            src.begin_block(0, aux);
            Work::Blocks {
                src,
                reader,
                hasher: crc32fast::Hasher::new(),
                limit,
                scratch: Vec::new(),
            }
        }
        Plan::Deflate(src, limit) => {
            let mut inflater = Box::new(Inflater::new(src.clone(), 0));
            if let Some(l) = limit {
                inflater.set_limit(l);
            }
            Work::Deflate { inflater, src }
        }
    }
}

fn slice(data: &Data, start: u64, end: u64) -> Data {
    Arc::new(SliceSource::new(data.clone(), Range::new(start, end)))
}

fn method_text(l: &Local) -> String {
    let m = records::method_name(l.method).unwrap_or("?");
    if l.has_descriptor() {
        format!("{m}, sizes in data descriptor")
    } else {
        format!("{m}, {} → {} bytes", l.csize, l.usize)
    }
}

impl Parser for ZipParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        for _ in 0..4096 {
            let r = match self.state {
                State::Start => self.start(),
                State::List { next, pos } => self.list(cx, next, pos),
                State::Scan => self.scan(cx),
                State::Entry => self.entry(cx),
                State::Final => self.finalize(cx),
                State::Verify => self.verify(cx),
                State::Done => Some(Step::Done),
            };
            if let Some(s) = r {
                return s;
            }
        }
        Step::Yield
    }
}
