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

mod load;
mod records;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use memchr::memmem;

use crate::data::{Data, InflateEvent, InflateSource, Inflater, Range, SliceSource, view};
use crate::extraction::{EntryKind, ExtId};
use crate::name::{Name, escape_bytes};
use crate::node::{Node, Value};
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{ChildSpec, Format, Parser, Sniff, Step, StepCx};
use crate::status::Damage;
use records::{Bad, Central, Descriptor, End, Local};

pub static FORMAT: Format = Format {
    name: "zip",
    sniff,
    parse: |data, _| Box::new(ZipParser::new(data.clone())),
    load: load::load,
    offers: Offers {
        // A PyTorch checkpoint is a zip.
        tensors: Some(TensorOffer::Prepare(crate::parsers::torch::tensor_job)),
        settled: Some(crate::parsers::torch::zip_settled),
        ..Offers::NONE
    },
};

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
            || (s.data.is_final() && find_end(s.data, false).is_some()))
}

/// Longest local header: 30 + 64 KiB name + 64 KiB extra.
const LOCAL_MAX: usize = 30 + 2 * 65535;
/// Output a deflated candidate must decode cleanly before it is believed.
const PROOF_BYTES: u64 = 16 * 1024;

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
    problems: Vec<Damage>,
}

/// For each directory record, an earlier-starting record whose bytes it
/// overlaps (a zip bomb's entries all point at one kernel of data). Extents
/// are estimated from the directory without the local extra field, which
/// can only make them shorter: an overlap found here is real.
/// Only records with a local header where they say (`valid`) take part: an
/// offset that points at no header is damage of another kind, found and
/// reported per entry. (A bomb's records name their one header differently.)
fn overlaps(
    records: &[Central],
    shift: i64,
    mut valid: impl FnMut(&Central) -> bool,
) -> Vec<Option<u32>> {
    let extent = |c: &Central| {
        let start = shifted(c.offset, shift);
        let end = start
            .saturating_add(30)
            .saturating_add(c.name.len() as u64)
            .saturating_add(c.csize);
        (start, end)
    };
    let mut order: Vec<u32> = (0..records.len() as u32)
        .filter(|&i| valid(&records[i as usize]))
        .collect();
    order.sort_by_key(|&i| (extent(&records[i as usize]).0, i));
    let mut out = vec![None; records.len()];
    let mut reach: Option<(u64, u32)> = None;
    for i in order {
        let (start, end) = extent(&records[i as usize]);
        if let Some((far, owner)) = reach
            && start < far
        {
            out[i as usize] = Some(owner);
        }
        if reach.is_none_or(|(far, _)| end > far) {
            reach = Some((end, i));
        }
    }
    out
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
    /// Central mode: see [`overlaps`].
    overlaps: Vec<Option<u32>>,
    /// Children of entries whose bytes later entries repeat exactly, by
    /// local header offset: the repeats share them instead of decoding again.
    shared: HashMap<u64, Data>,
    /// Whether the next child is parsed as a container (overlapping bytes
    /// are not, or a bomb's tree grows exponentially with its depth).
    parse_child: bool,
    scratch: Vec<u8>,
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
            overlaps: Vec::new(),
            shared: HashMap::new(),
            parse_child: true,
            scratch: Vec::new(),
        }
    }

    fn start(&mut self) -> Option<Step> {
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
                    self.state = State::List { next: 0 };
                    return None;
                }
            }
            self.structures.clear();
            self.shift = 0;
        }
        self.state = State::Scan;
        None
    }

    /// Central mode: lists a batch of directory entries.
    fn list(&mut self, cx: &mut StepCx, next: usize) -> Option<Step> {
        let dir = self.directory.take()?;
        if next == 0 {
            let mut buf = Vec::new();
            let data = &self.data;
            self.overlaps = overlaps(&dir.records, self.shift, |c| {
                view(&**data, shifted(c.offset, self.shift), LOCAL_MAX, &mut buf)
                    .is_ok_and(|b| records::parse_local(b).is_ok())
            });
        }
        let stop = (next + 1024).min(dir.records.len());
        for (i, c) in dir.records.iter().enumerate().take(stop).skip(next) {
            let overlap = self.overlaps[i].map(|j| &dir.records[j as usize]);
            self.entry_from_central(cx, c, overlap);
        }
        if stop < dir.records.len() {
            self.directory = Some(dir);
            self.state = State::List { next: stop };
            return Some(Step::Yield);
        }
        // The directory's own nodes go after the entries, in file order.
        self.push_directory_nodes(cx, &dir);
        self.state = State::Verify;
        None
    }

    // ----- scan mode -------------------------------------------------------

    fn scan(&mut self, cx: &mut StepCx) -> Option<Step> {
        let fin = self.data.is_final();
        let avail = self.data.available();
        let data = self.data.clone();
        let mut scanned = 0u64;
        while self.scan_pos < avail && scanned < cx.budget {
            let pos = self.scan_pos;
            let window = match view(&*data, pos, 1 << 20, &mut self.scratch) {
                Ok(w) => w.to_vec(),
                Err(_) => break,
            };
            if window.len() < 4 && !fin {
                return Some(Step::Blocked);
            }
            if window.starts_with(records::CDH)
                || window.starts_with(records::EOCD)
                || window.starts_with(records::Z64_EOCD)
            {
                if window.starts_with(records::CDH) {
                    self.cd_seen = Some(pos);
                }
                self.state = State::Final;
                return None;
            }
            for i in memmem::find_iter(&window, records::LFH) {
                let cand = pos + i as u64;
                match self.try_local(cand) {
                    Probe::Valid(local) => {
                        self.begin_scanned(cx, cand, local);
                        self.state = State::Entry;
                        return None;
                    }
                    Probe::NeedMore => {
                        self.scan_pos = cand;
                        return Some(Step::Blocked);
                    }
                    Probe::Invalid => {}
                }
            }
            // Keep the last 3 bytes: a signature may straddle windows.
            let step = (window.len() as u64).saturating_sub(3).max(1);
            self.scan_pos = pos + step;
            scanned += step;
        }
        if self.scan_pos < avail.saturating_sub(3) {
            cx.progress(self.scan_pos, fin.then_some(avail));
            return Some(Step::Yield);
        }
        if !fin {
            return Some(Step::Blocked);
        }
        self.state = State::Final;
        None
    }

    /// Whether a local header at `at` is real: its fields validate and, for
    /// deflate, its data starts to decode.
    fn try_local(&mut self, at: u64) -> Probe {
        let fin = self.data.is_final();
        let mut buf = Vec::new();
        let Ok(b) = view(&*self.data, at, LOCAL_MAX, &mut buf) else {
            return Probe::Invalid;
        };
        let local = match records::parse_local(b) {
            Ok(l) => l,
            Err(Bad::Short(_)) if !fin => return Probe::NeedMore,
            Err(_) => return Probe::Invalid,
        };
        if local.method == 8 && local.flags & records::FLAG_ENCRYPTED == 0 {
            match self.proves_deflate(at + local.len, &local) {
                Probe::Valid(()) => {}
                Probe::NeedMore => return Probe::NeedMore,
                Probe::Invalid => return Probe::Invalid,
            }
        }
        Probe::Valid(local)
    }

    fn proves_deflate(&self, start: u64, local: &Local) -> Probe<()> {
        use crate::data::inflate::zlib::{Code, RawInflate};
        let fin = self.data.is_final();
        let mut z = RawInflate::new();
        let mut inbuf = vec![0u8; 16 * 1024];
        let mut out = vec![0u8; 32 * 1024];
        let mut pos = start;
        let mut made = 0u64;
        let limit = if local.has_descriptor() {
            u64::MAX
        } else {
            start.saturating_add(local.csize)
        };
        loop {
            let want = (limit.saturating_sub(pos) as usize).min(inbuf.len());
            let n = self.data.read_at(pos, &mut inbuf[..want]).unwrap_or(0);
            let s = z.inflate(&inbuf[..n], &mut out, false);
            pos += s.consumed as u64;
            made += s.produced as u64;
            match s.code {
                Code::StreamEnd => return Probe::Valid(()),
                Code::DataError => return Probe::Invalid,
                _ if made >= PROOF_BYTES => return Probe::Valid(()),
                _ if s.consumed == 0 && s.produced == 0 => {
                    return if n > 0 {
                        Probe::Invalid
                    } else if pos >= limit || fin {
                        // Decodes cleanly to the end of what exists.
                        Probe::Valid(())
                    } else {
                        Probe::NeedMore
                    };
                }
                _ => {}
            }
        }
    }

    /// Records an entry found by the scan and starts its work.
    fn begin_scanned(&mut self, cx: &mut StepCx, lfh: u64, local: Local) {
        let data = lfh + local.len;
        let dd = local.has_descriptor();
        let known = (!dd).then_some(local.csize);
        let expect = (!dd).then_some((local.crc, local.csize, local.usize));
        let node = cx.push_node(
            Node::new("entry", escape_bytes(&local.name), Range::new(lfh, data))
                .text(method_text(&local))
                .lazy(),
        );
        let end = known.map(|c| data.saturating_add(c));
        let idx = self.push_entry(lfh, end, &local.name, node, false);
        let usize = local.usize;
        let plan = self.plan(cx, idx, &local, data, known, usize);
        self.current = Some(Current {
            idx,
            work: work(plan, data),
            local,
            data,
            expect,
            stored_end: None,
        });
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
        self.entries.push(Entry {
            lfh,
            end,
            name: name.to_vec(),
            node,
            child: None,
            from_central,
            suspect: false,
        });
        self.by_offset.entry(lfh).or_insert(idx);
        idx
    }

    /// Creates the entry's child (when its extent allows) and decides how
    /// its bytes will be checked.
    fn plan(
        &mut self,
        cx: &mut StepCx,
        idx: usize,
        local: &Local,
        data: u64,
        csize: Option<u64>,
        usize: u64,
    ) -> Plan {
        if local.name.ends_with(b"/") && csize.unwrap_or(0) == 0 && usize == 0 {
            let d = slice(&self.data, data, data);
            self.add_entry_child(cx, idx, local, EntryKind::Dir, d, Some(0));
            return Plan::None;
        }
        let unsupported = if local.flags & records::FLAG_ENCRYPTED != 0 {
            Some("encrypted: bytes not decoded".to_string())
        } else if local.method != 0 && local.method != 8 {
            Some(format!(
                "compressed with {} (method {}): bytes not decoded",
                records::method_name(local.method).unwrap_or("?"),
                local.method
            ))
        } else {
            None
        };
        if let Some(what) = unsupported {
            let raw = slice(&self.data, data, data.saturating_add(csize.unwrap_or(0)));
            self.add_entry_child(cx, idx, local, EntryKind::Other(what.into()), raw, csize);
            return Plan::None;
        }
        match (local.method, csize) {
            (0, Some(c)) => {
                let end = data.saturating_add(c);
                let d = slice(&self.data, data, end);
                self.add_entry_child(cx, idx, local, EntryKind::File, d, Some(c));
                Plan::Stored { end }
            }
            (0, None) => Plan::StoredScan,
            _ => {
                let end = csize.map_or(u64::MAX, |c| data.saturating_add(c));
                let src = InflateSource::new(slice(&self.data, data, end), "deflate");
                let declared = (csize.is_some() || usize > 0).then_some(usize);
                self.add_entry_child(
                    cx,
                    idx,
                    local,
                    EntryKind::File,
                    src.clone() as Data,
                    declared,
                );
                Plan::Deflate(src, declared)
            }
        }
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
        if self.overlaps.contains(&Some(idx as u32)) {
            self.shared.insert(self.entries[idx].lfh, data.clone());
        }
        let mut spec = ChildSpec::new(Name::new(local.name.clone()), kind, data);
        spec.parse = self.parse_child;
        let start = self.entries[idx].lfh + local.len;
        spec.origin = Some(Range::new(start, self.entries[idx].end.unwrap_or(start)));
        spec.declared_size = declared;
        self.entries[idx].child = Some(cx.add_child(spec));
    }

    /// Runs the current entry's work for one budget.
    fn entry(&mut self, cx: &mut StepCx) -> Option<Step> {
        let mut cur = self.current.take()?;
        let before = match &cur.work {
            Work::Deflate { inflater, src } if cx.decode_left == 0 => {
                src.finish();
                let d = cx.budget_damage(inflater.produced());
                self.finish_entry(cx, cur, Err(d));
                return None;
            }
            Work::Deflate { inflater, .. } => Some(inflater.produced()),
            _ => None,
        };
        let budget = match before {
            Some(_) => cx.budget.min(cx.decode_left),
            None => cx.budget,
        };
        let outcome = self.run_work(&mut cur, budget);
        if let (Some(before), Work::Deflate { inflater, .. }) = (before, &cur.work) {
            cx.decoded(inflater.produced() - before);
        }
        match outcome {
            Outcome::Yield => {
                self.current = Some(cur);
                Some(Step::Yield)
            }
            Outcome::Blocked => {
                self.current = Some(cur);
                Some(Step::Blocked)
            }
            Outcome::Again => {
                self.current = Some(cur);
                None
            }
            Outcome::Done(result) => {
                self.finish_entry(cx, cur, result);
                None
            }
        }
    }

    fn run_work(&mut self, cur: &mut Current, budget: u64) -> Outcome {
        let fin = self.data.is_final();
        let avail = self.data.available();
        match &mut cur.work {
            Work::None => Outcome::Done(Ok(())),
            Work::Stored { pos, end, hasher } => {
                let stop = (*end).min(avail);
                let mut done = 0;
                while *pos < stop && done < budget {
                    let n = ((stop - *pos) as usize).min(1 << 20);
                    match view(&*self.data, *pos, n, &mut self.scratch) {
                        Ok(b) if !b.is_empty() => {
                            hasher.update(b);
                            *pos += b.len() as u64;
                            done += b.len() as u64;
                        }
                        _ => break,
                    }
                }
                if *pos >= *end {
                    let crc = hasher.clone().finalize();
                    Outcome::Done(check_crc(cur.expect, crc, *end - cur.data))
                } else if *pos < stop {
                    Outcome::Yield
                } else if !fin {
                    Outcome::Blocked
                } else {
                    let have = *pos - cur.data;
                    Outcome::Done(Err(Damage::truncated(
                        Range::new(have, have),
                        format!("entry cut off: {have} of {} bytes present", *end - cur.data),
                    )))
                }
            }
            Work::StoredScan(_) => self.stored_scan(cur, budget),
            Work::Deflate { inflater, src } => match inflater.run(budget) {
                InflateEvent::Progress => Outcome::Yield,
                InflateEvent::NeedInput => Outcome::Blocked,
                InflateEvent::End { in_end } => {
                    let crc = inflater.crc();
                    let usize = inflater.produced();
                    src.finish();
                    let at = cur.data + in_end;
                    if cur.local.has_descriptor() && !self.entries[cur.idx].from_central {
                        cur.work = Work::Descriptor { at, crc, usize };
                        return Outcome::Again;
                    }
                    let mut r = check_crc(cur.expect, crc, usize);
                    if r.is_ok() && in_end != cur.local.csize {
                        r = Err(Damage::corrupt(
                            Range::new(0, 0),
                            format!(
                                "deflate data is {in_end} bytes but the header says {}",
                                cur.local.csize
                            ),
                        ));
                    }
                    Outcome::Done(r)
                }
                InflateEvent::Truncated { in_end } => {
                    src.finish();
                    let have = inflater.produced();
                    let e = &mut self.entries[cur.idx];
                    e.end = Some(e.end.unwrap_or(cur.data + in_end).min(avail));
                    Outcome::Done(Err(Damage::truncated(
                        Range::new(have, have),
                        format!("deflate data cut off after {have} decoded bytes"),
                    )))
                }
                InflateEvent::Overflow { at, .. } => {
                    src.finish();
                    let have = inflater.produced();
                    // Extent unknown: scanning resumes where decoding stopped.
                    self.entries[cur.idx].end.get_or_insert(cur.data + at);
                    Outcome::Done(Err(Damage::corrupt(
                        Range::new(have, have),
                        format!(
                            "deflate data decodes to more than the declared {have} bytes; decoding stopped there"
                        ),
                    )))
                }
                InflateEvent::Error { at, message } => {
                    src.finish();
                    let have = inflater.produced();
                    let e = &mut self.entries[cur.idx];
                    // Extent unknown: scanning resumes after the error.
                    e.end.get_or_insert(cur.data + at);
                    Outcome::Done(Err(Damage::corrupt(
                        Range::new(have, have),
                        format!("invalid deflate data ({message}); bytes after this are lost"),
                    )))
                }
            },
            Work::Descriptor { at, crc, usize } => {
                let (at, crc, usize) = (*at, *crc, *usize);
                self.deflate_descriptor(cur, at, crc, usize)
            }
        }
    }

    fn deflate_descriptor(&mut self, cur: &mut Current, at: u64, crc: u32, usize: u64) -> Outcome {
        let fin = self.data.is_final();
        let mut b = [0u8; 24];
        let n = self.data.read_at(at, &mut b).unwrap_or(0);
        if n < 24 && !fin {
            return Outcome::Blocked;
        }
        let csize = at - cur.data;
        let cands = descriptor_candidates(&b[..n], cur.local.zip64);
        // A layout whose every field matches what was decoded (a 32-bit
        // layout read from a 64-bit descriptor can match CRC and size but
        // not the second size field).
        let matches = |d: &&Descriptor| {
            let size = if d.len >= 20 {
                usize
            } else {
                usize & 0xffff_ffff
            };
            d.crc == crc && d.csize == csize && d.usize == size
        };
        let signed = n >= 4 && &b[..4] == records::DD;
        let need = if signed { 4 } else { 0 } + if cur.local.zip64 { 20 } else { 12 };
        let found = match cands.iter().find(matches) {
            Some(d) => Some(*d),
            // Judge a descriptor that disagrees only once all of it is there.
            None if n < need => None,
            None => cands
                .iter()
                .find(|d| d.len == need as u64)
                .or(cands.first())
                .copied(),
        };
        let Some(d) = found else {
            self.entries[cur.idx].end = Some(at + n as u64);
            return Outcome::Done(Err(Damage::truncated(
                Range::new(usize, usize),
                format!("data descriptor cut off ({n} of {need} bytes): the CRC cannot be checked"),
            )));
        };
        self.entries[cur.idx].end = Some(at + d.len);
        cur.expect = Some((d.crc, d.csize, d.usize));
        let mut r = check_crc(cur.expect, crc, usize);
        if r.is_ok() && d.csize != csize {
            r = Err(Damage::corrupt(
                Range::new(0, 0),
                format!(
                    "data descriptor says {} compressed bytes, found {csize}",
                    d.csize
                ),
            ));
        }
        Outcome::Done(r)
    }

    /// Stored data with a descriptor: the end is the first `PK\7\8` whose
    /// CRC and size match the bytes before it (libarchive's rule), or a
    /// descriptor without signature right before the next local header.
    fn stored_scan(&mut self, cur: &mut Current, budget: u64) -> Outcome {
        let Work::StoredScan(s) = &mut cur.work else {
            return Outcome::Done(Ok(()));
        };
        let fin = self.data.is_final();
        let avail = self.data.available();
        let data = self.data.clone();
        let start = cur.data;
        let zip64 = cur.local.zip64;
        let mut done = 0u64;
        while s.pos < avail && done < budget {
            let window = match view(&*data, s.pos, 1 << 20, &mut self.scratch) {
                Ok(w) => w.to_vec(),
                Err(_) => break,
            };
            if window.len() < 4 && !fin {
                return Outcome::Blocked;
            }
            let mut cands: Vec<u64> = Vec::new();
            for sig in [&records::DD[..], &records::LFH[..], &records::CDH[..]] {
                cands.extend(memmem::find_iter(&window, sig).map(|i| s.pos + i as u64));
            }
            cands.sort_unstable();
            for c in cands {
                let mut b = [0u8; 24];
                let n = data.read_at(c, &mut b).unwrap_or(0);
                if n < 24 && !fin {
                    // Judge this candidate once its descriptor bytes exist.
                    s.pos = c;
                    return Outcome::Blocked;
                }
                if let Some((dpos, d, exact)) =
                    descriptor_before(&data, s, start, c, &b[..n], zip64)
                {
                    if exact {
                        cur.stored_end = Some(dpos);
                        cur.expect = Some((d.crc, d.csize, d.usize));
                        self.entries[cur.idx].end = Some(dpos + d.len);
                        return Outcome::Done(Ok(()));
                    }
                    s.fallback.get_or_insert((dpos, d));
                }
                // Candidates come in order: hash up to the earliest byte a
                // later candidate can ask about.
                advance_hash(&data, s, c.saturating_sub(24));
            }
            let step = (window.len() as u64).saturating_sub(3).max(1);
            s.pos += step;
            done += step;
        }
        if s.pos < avail.saturating_sub(3) {
            return Outcome::Yield;
        }
        if !fin {
            return Outcome::Blocked;
        }
        if let Some((dpos, d)) = s.fallback {
            let crc = crc_upto(&data, s, dpos);
            cur.stored_end = Some(dpos);
            cur.expect = Some((d.crc, d.csize, d.usize));
            self.entries[cur.idx].end = Some(dpos + d.len);
            return Outcome::Done(check_crc(cur.expect, crc, d.csize));
        }
        // No descriptor: the entry runs to the end of the bytes.
        let have = avail - start;
        cur.stored_end = Some(avail);
        self.entries[cur.idx].end = Some(avail);
        Outcome::Done(Err(Damage::truncated(
            Range::new(have, have),
            format!("no data descriptor found: entry cut off after {have} bytes"),
        )))
    }

    fn finish_entry(&mut self, cx: &mut StepCx, cur: Current, result: Result<(), Damage>) {
        let idx = cur.idx;
        if let Some(dend) = cur.stored_end
            && self.entries[idx].child.is_none()
        {
            let d = slice(&self.data, cur.data, dend);
            let declared = cur.expect.map(|e| e.2);
            self.add_entry_child(cx, idx, &cur.local, EntryKind::File, d, declared);
        }
        let entry = &self.entries[idx];
        let end = entry.end.unwrap_or(u64::MAX).min(self.data.available());
        let (lfh, node, child) = (entry.lfh, entry.node, entry.child);
        let kind = if cur.local.has_descriptor() {
            "entry+dd"
        } else {
            "entry"
        };
        let damage = result.err();
        if let (Some(c), Some(d)) = (child, &damage) {
            cx.child_damage(c, d.clone());
        }
        if let Some(d) = &damage {
            cx.damage(Damage {
                status: d.status,
                range: Range::new(lfh, end),
                reason: format!("entry {}: {}", escape_bytes(&cur.local.name), d.reason),
            });
        }
        let node_damage = damage.map(|d| Damage {
            range: Range::new(lfh, end),
            ..d
        });
        let text = match cur.expect {
            Some((_, c, u)) => format!(
                "{}, {c} → {u} bytes",
                records::method_name(cur.local.method).unwrap_or("?")
            ),
            None => method_text(&cur.local),
        };
        cx.edit_node(node, move |n| {
            n.kind = kind;
            n.range = Range::new(lfh, end);
            n.value = Some(Value::Str(text.into()));
            n.damage = node_damage.map(Box::new);
        });
        if self.entries[idx].from_central {
            self.state = State::Verify;
        } else {
            self.scan_pos = end.max(lfh + 1);
            self.state = State::Scan;
        }
        let avail = self.data.available();
        cx.progress(end.min(avail), self.data.is_final().then_some(avail));
    }

    // ----- the central directory ------------------------------------------

    /// Finds the end record and reads the directory it points to (or, from
    /// `seen`, where the scan ran into it), checking every field it can.
    fn read_directory(&mut self, seen: Option<u64>, exact: bool) -> Option<Directory> {
        let avail = self.data.available();
        let found = find_end(&self.data, exact);
        let mut problems = Vec::new();
        let (start, count, size) = match &found {
            Some(e) => {
                problems.extend(e.problems.iter().cloned());
                let cd_end = e.zip64.map_or(e.pos, |z| z.0);
                let actual = cd_end
                    .checked_sub(e.cd_size)
                    .filter(|&a| e.entries == 0 || self.sig_at(a, records::CDH));
                let declared =
                    Some(e.cd_offset).filter(|&o| o < avail && self.sig_at(o, records::CDH));
                let start = actual.or(declared).or(seen)?;
                if actual.is_none() {
                    problems.push(Damage::corrupt(
                        Range::new(e.pos, e.pos + 22),
                        format!(
                            "end record's directory size {} does not lead to the directory",
                            e.cd_size
                        ),
                    ));
                }
                (start, e.entries, e.cd_size)
            }
            None => (seen?, u64::MAX, u64::MAX),
        };
        let mut records = Vec::new();
        let mut pos = start;
        let mut buf = Vec::new();
        while (records.len() as u64) < count && pos - start < size {
            let Ok(b) = view(&*self.data, pos, 46 + 3 * 65535, &mut buf) else {
                break;
            };
            match records::parse_central(b) {
                Ok(c) => {
                    pos += c.len;
                    records.push(c);
                }
                Err(_) => break,
            }
        }
        let dir_range = Range::new(start, pos);
        if let Some(e) = &found {
            // Offsets are from the file: a difference that does not fit
            // is no prefix at all.
            let computed = i64::try_from(i128::from(start) - i128::from(e.cd_offset)).unwrap_or(0);
            self.shift = self.best_shift(computed, &records);
            if self.shift != computed {
                problems.push(Damage::corrupt(
                    Range::new(e.pos + 16, e.pos + 20),
                    format!(
                        "end record says the directory is at {:#x}; it is at {start:#x}",
                        e.cd_offset
                    ),
                ));
            }
            if (records.len() as u64) < e.entries {
                let what = format!(
                    "central directory damaged: {} of {} records readable",
                    records.len(),
                    e.entries
                );
                problems.push(Damage::corrupt(
                    Range::new(pos, pos.max(start + e.cd_size).min(avail)),
                    what,
                ));
            } else if pos - start != e.cd_size {
                problems.push(Damage::corrupt(
                    Range::new(e.pos, e.pos + 22),
                    format!(
                        "end record says the directory is {} bytes; its records take {}",
                        e.cd_size,
                        pos - start
                    ),
                ));
            }
        } else {
            // No end record: cut off inside the directory or its end, or
            // the end record is damaged.
            let cut = {
                let rest = view(&*self.data, pos, 64, &mut buf)
                    .map(|b| b.to_vec())
                    .unwrap_or_default();
                rest.len() < 4
                    || matches!(records::parse_central(&rest), Err(Bad::Short(_)))
                    || [records::EOCD, records::Z64_EOCD, records::Z64_LOC]
                        .iter()
                        .any(|sig| rest.starts_with(&sig[..]))
            };
            let what = if cut {
                "archive cut off: the end of central directory record is missing"
            } else {
                "the end of central directory record is damaged or missing"
            };
            let at = Range::new(pos.min(avail), avail);
            problems.push(if cut {
                Damage::truncated(at, what)
            } else {
                Damage::corrupt(at, what)
            });
        }
        if pos > start {
            self.structures.push(dir_range);
        }
        Some(Directory {
            end: found,
            range: dir_range,
            records,
            problems,
        })
    }

    /// The archive offset that makes the first directory records point at
    /// matching local headers: the end record's (an archive prefix), or none
    /// (a damaged directory offset field).
    fn best_shift(&self, computed: i64, records: &[Central]) -> i64 {
        let score = |shift: i64| {
            let mut buf = Vec::new();
            records
                .iter()
                .take(8)
                .filter(|c| {
                    let lfh = shifted(c.offset, shift);
                    view(&*self.data, lfh, LOCAL_MAX, &mut buf)
                        .ok()
                        .and_then(|b| records::parse_local(b).ok())
                        .is_some_and(|l| l.name == c.name)
                })
                .count()
        };
        if computed == 0 || score(computed) >= score(0) {
            computed
        } else {
            0
        }
    }

    fn sig_at(&self, at: u64, sig: &[u8; 4]) -> bool {
        let mut b = [0u8; 4];
        matches!(
            crate::data::read_exact_at(&*self.data, at, &mut b),
            Ok(true)
        ) && &b == sig
    }

    fn push_directory_nodes(&mut self, cx: &mut StepCx, dir: &Directory) {
        if !dir.range.is_empty() {
            cx.push_node(
                Node::new("central directory", "central directory", dir.range)
                    .text(format!("{} entries", dir.records.len()))
                    .lazy(),
            );
        }
        for d in &dir.problems {
            cx.damage(d.clone());
        }
        let Some(end) = &dir.end else { return };
        if let Some((z, loc)) = end.zip64 {
            cx.push_node(
                Node::new(
                    "zip64 end",
                    "zip64 end of central directory",
                    Range::new(z, z + 56),
                )
                .lazy(),
            );
            cx.push_node(
                Node::new(
                    "zip64 locator",
                    "zip64 end locator",
                    Range::new(loc, loc + 20),
                )
                .lazy(),
            );
            self.structures.push(Range::new(z, z + 56));
            self.structures.push(Range::new(loc, loc + 20));
        }
        let eocd = Range::new(end.pos, end.pos + 22 + end.comment_len);
        cx.push_node(Node::new("end", "end of central directory", eocd).lazy());
        self.structures.push(eocd);
    }

    /// An entry listed by the directory: check its local header, list it,
    /// and queue it for verification.
    fn entry_from_central(&mut self, cx: &mut StepCx, c: &Central, overlap: Option<&Central>) {
        let mut lfh = shifted(c.offset, self.shift);
        let mut buf = Vec::new();
        let mut local = view(&*self.data, lfh, LOCAL_MAX, &mut buf)
            .ok()
            .and_then(|b| records::parse_local(b).ok());
        let mut problem = None;
        let mut moved = None;
        if local.as_ref().is_none_or(|l| l.name != c.name) {
            // The directory's offset may be the damaged part: look for a
            // local header with this name elsewhere.
            if let Some(real) = self.find_local(&c.name) {
                moved = Some(Damage::corrupt(
                    self.structures.first().copied().unwrap_or_default(),
                    format!(
                        "central directory gives offset {lfh:#x} for {}; its local header is at {real:#x}",
                        escape_bytes(&c.name)
                    ),
                ));
                lfh = real;
                local = view(&*self.data, lfh, LOCAL_MAX, &mut buf)
                    .ok()
                    .and_then(|b| records::parse_local(b).ok());
            }
        }
        let header_len = match &local {
            Some(l) if l.name == c.name => l.len,
            _ => {
                problem = Some(
                    "local header is damaged; entry read using the central directory".to_string(),
                );
                self.guess_header_len(lfh, c)
            }
        };
        let data = lfh.saturating_add(header_len);
        let zip64 = local.as_ref().is_some_and(|l| l.zip64);
        let avail = self.data.available();
        let mut overrun = None;
        let mut end = match data.checked_add(c.csize) {
            Some(end) if end <= avail => end,
            _ => {
                // The bytes are all here (central mode): sizes past the end
                // are wrong, not cut off.
                overrun = Some(format!(
                    "central directory gives {} compressed bytes from {data:#x}, past the end of the archive at {avail:#x}",
                    c.csize
                ));
                avail.max(data)
            }
        };
        if c.flags & records::FLAG_DESCRIPTOR != 0 {
            let mut b = [0u8; 24];
            let n = self.data.read_at(end, &mut b).unwrap_or(0);
            if let Some(d) = descriptor_candidates(&b[..n], zip64)
                .into_iter()
                .find(|d| d.crc == c.crc && d.csize == c.csize)
            {
                end += d.len;
            }
        }
        let node = cx.push_node(
            Node::new(
                if c.flags & records::FLAG_DESCRIPTOR != 0 {
                    "entry+dd"
                } else {
                    "entry"
                },
                escape_bytes(&c.name),
                Range::new(lfh, end),
            )
            .text(format!(
                "{}, {} → {} bytes",
                records::method_name(c.method).unwrap_or("?"),
                c.csize,
                c.usize
            ))
            .lazy(),
        );
        let idx = self.push_entry(lfh, Some(end), &c.name, node, true);
        let as_local = Local {
            flags: c.flags,
            method: c.method,
            crc: c.crc,
            csize: c.csize,
            usize: c.usize,
            name: c.name.clone(),
            zip64,
            len: header_len,
        };
        let repeat = overlap.filter(|o| {
            o.offset == c.offset
                && (o.method, o.csize, o.usize, o.crc) == (c.method, c.csize, c.usize, c.crc)
        });
        let shared = repeat.and_then(|_| self.shared.get(&lfh).cloned());
        if let Some(o) = overlap {
            let other = escape_bytes(&o.name);
            cx.damage(Damage::corrupt(
                Range::new(lfh, end),
                format!(
                    "entry {} overlaps the bytes of entry {other} (local header at {:#x}): its bytes are listed, not parsed again",
                    escape_bytes(&c.name),
                    shifted(o.offset, self.shift)
                ),
            ));
        }
        self.parse_child = overlap.is_none();
        let plan = if let Some(d) = shared {
            // The same bytes as an entry before it: share that entry's
            // bytes (and its checks) instead of decoding them again.
            let kind = EntryKind::File;
            self.add_entry_child(cx, idx, &as_local, kind, d, Some(c.usize));
            Plan::None
        } else if c.is_symlink() && c.method == 0 && c.csize <= 4096 {
            let mut target = vec![0u8; c.csize as usize];
            let n = self.data.read_at(data, &mut target).unwrap_or(0);
            target.truncate(n);
            let kind = EntryKind::Symlink(escape_bytes(&target).into());
            let d = slice(&self.data, data, data.saturating_add(c.csize));
            self.add_entry_child(cx, idx, &as_local, kind, d, Some(c.csize));
            Plan::Stored {
                end: data.saturating_add(c.csize),
            }
        } else {
            self.plan(cx, idx, &as_local, data, Some(c.csize), c.usize)
        };
        self.parse_child = true;
        if let Some(o) = overlap
            && let Some(child) = self.entries[idx].child
        {
            cx.child_damage(
                child,
                Damage::corrupt(
                    Range::new(0, 0),
                    format!("its bytes overlap those of entry {}", escape_bytes(&o.name)),
                ),
            );
        }
        if let Some(d) = moved {
            cx.damage(d);
        }
        if let Some(why) = overrun {
            if let Some(child) = self.entries[idx].child {
                cx.child_damage(child, Damage::corrupt(Range::new(0, 0), why.clone()));
            }
            cx.damage(Damage::corrupt(Range::new(lfh, end), why));
        }
        if let Some(p) = problem {
            let d = Damage::corrupt(Range::new(lfh, lfh + header_len), p);
            if let Some(child) = self.entries[idx].child {
                cx.child_damage(child, Damage::corrupt(Range::new(0, 0), d.reason.clone()));
            }
            cx.damage(d);
        }
        self.queue.push_back(Pending {
            idx,
            local: as_local,
            data,
            expect: Some((c.crc, c.csize, c.usize)),
            plan,
        });
    }

    /// Where a valid local header named `name` is that no entry uses yet.
    /// The first call indexes every local header in the bytes (once, and only
    /// when a directory record and its local header disagree).
    fn find_local(&mut self, name: &[u8]) -> Option<u64> {
        if self.local_index.is_none() {
            let mut index: HashMap<Vec<u8>, Vec<u64>> = HashMap::new();
            let avail = self.data.available();
            let mut pos = 0;
            let mut window = Vec::new();
            let mut buf = Vec::new();
            while pos < avail {
                let w = view(&*self.data, pos, 1 << 20, &mut window)
                    .map(|w| w.to_vec())
                    .unwrap_or_default();
                if w.len() < 4 {
                    break;
                }
                for i in memmem::find_iter(&w, records::LFH) {
                    let at = pos + i as u64;
                    if let Some(l) = view(&*self.data, at, LOCAL_MAX, &mut buf)
                        .ok()
                        .and_then(|b| records::parse_local(b).ok())
                    {
                        index.entry(l.name).or_default().push(at);
                    }
                }
                pos += (w.len() as u64 - 3).max(1);
            }
            self.local_index = Some(index);
        }
        let offsets = self.local_index.as_ref()?.get(name)?;
        offsets
            .iter()
            .copied()
            .find(|o| !self.by_offset.contains_key(o))
    }

    /// The length of a damaged local header: its own length fields if they
    /// lead to data that checks out against the directory (CRC of stored
    /// bytes, a clean start of deflate data), else the directory's.
    fn guess_header_len(&self, lfh: u64, c: &Central) -> u64 {
        let mut h = [0u8; 30];
        let n = self.data.read_at(lfh, &mut h).unwrap_or(0);
        let (nl, xl) = if n == 30 {
            (
                crate::data::le::u16(&h, 26) as u64,
                crate::data::le::u16(&h, 28) as u64,
            )
        } else {
            (0, 0)
        };
        let cn = c.name.len() as u64;
        let mut cands = vec![
            30 + nl + xl,
            30 + cn + xl,
            30 + nl + c.extra_len,
            30 + cn + c.extra_len,
            30 + cn,
        ];
        cands.dedup();
        let good = |len: u64| {
            let start = lfh + len;
            match c.method {
                0 => {
                    let d = slice(&self.data, start, start.saturating_add(c.csize));
                    d.available() == c.csize && {
                        let mut h = crc32fast::Hasher::new();
                        let mut buf = vec![0u8; 64 * 1024];
                        let mut p = 0;
                        while p < c.csize {
                            let k = d.read_at(p, &mut buf).unwrap_or(0);
                            if k == 0 {
                                break;
                            }
                            h.update(&buf[..k]);
                            p += k as u64;
                        }
                        h.finalize() == c.crc
                    }
                }
                8 => {
                    let probe = Local {
                        flags: 0,
                        method: 8,
                        crc: c.crc,
                        csize: c.csize,
                        usize: c.usize,
                        name: Vec::new(),
                        zip64: false,
                        len,
                    };
                    matches!(self.proves_deflate(start, &probe), Probe::Valid(()))
                }
                _ => false,
            }
        };
        cands
            .iter()
            .copied()
            .find(|&l| good(l))
            .unwrap_or(30 + cn + xl)
    }

    /// Scan mode at the end of the bytes: merge the directory, then verify.
    fn finalize(&mut self, cx: &mut StepCx) -> Option<Step> {
        if !self.data.is_final() {
            return Some(Step::Blocked);
        }
        let avail = self.data.available();
        let dir = self
            .read_directory(self.cd_seen, false)
            // The directory of a zip stored inside one of our entries is not ours.
            .filter(|d| !self.inside_entry(d.range.start));
        let Some(dir) = dir else {
            let what = if self.entries.is_empty() {
                "no zip entries or central directory found"
            } else {
                "no central directory: entries recovered from their local headers"
            };
            cx.damage(Damage::truncated(Range::new(avail, avail), what));
            self.state = State::Verify;
            return None;
        };
        self.push_directory_nodes(cx, &dir);
        // Entries the scan found, by name, for directory records whose
        // offset field is damaged.
        let mut by_name: HashMap<Vec<u8>, usize> = HashMap::new();
        for (i, e) in self.entries.iter().enumerate() {
            by_name.entry(e.name.clone()).or_insert(i);
        }
        // A scanned entry where the directory lists another name has a
        // damaged local header: its extent cannot be trusted, and the
        // directory's entries it seems to swallow are read from the directory.
        // Several records at one offset are not that: they are entries that
        // overlap (a zip bomb's shape), listed without being parsed again.
        let mut listed: HashMap<u64, (&[u8], bool)> = HashMap::new();
        for c in &dir.records {
            listed
                .entry(shifted(c.offset, self.shift))
                .and_modify(|(_, many)| *many = true)
                .or_insert((&c.name, false));
        }
        for e in &mut self.entries {
            if listed
                .get(&e.lfh)
                .is_some_and(|(n, many)| !many && *n != e.name.as_slice())
            {
                e.suspect = true;
            }
        }
        for c in dir.records {
            let lfh = shifted(c.offset, self.shift);
            if let Some(&i) = self.by_offset.get(&lfh) {
                if self.entries[i].suspect {
                    let child = self.entries[i].child;
                    let why = format!(
                        "local header is damaged: the central directory names this entry {}; it is listed again from there",
                        escape_bytes(&c.name)
                    );
                    if let Some(ch) = child {
                        cx.child_damage(ch, Damage::corrupt(Range::new(0, 0), why.clone()));
                    }
                    cx.damage(Damage::corrupt(Range::new(lfh, lfh + 30), why));
                    self.entry_from_central(cx, &c, None);
                } else if c.name != self.entries[i].name {
                    // Another record for the scanned entry's bytes.
                    let mut other = c.clone();
                    other.name = self.entries[i].name.clone();
                    self.entry_from_central(cx, &c, Some(&other));
                }
                continue;
            }
            if let Some(&i) = by_name.get(&c.name) {
                cx.damage(Damage::corrupt(
                    dir.range,
                    format!(
                        "directory record of {} gives offset {lfh:#x}; its local header is at {:#x}",
                        escape_bytes(&c.name),
                        self.entries[i].lfh
                    ),
                ));
                continue;
            }
            if lfh >= avail {
                cx.damage(Damage::truncated(
                    Range::new(avail, avail),
                    format!(
                        "entry {} is listed at {lfh:#x}, past the end of the bytes",
                        escape_bytes(&c.name)
                    ),
                ));
                continue;
            }
            if self.inside_entry(lfh) {
                continue;
            }
            self.entry_from_central(cx, &c, None);
        }
        self.state = State::Verify;
        None
    }

    /// Whether `at` lies within the bytes of a (trusted) entry already found.
    fn inside_entry(&self, at: u64) -> bool {
        self.entries
            .iter()
            .any(|e| !e.suspect && e.lfh < at && e.end.is_some_and(|end| at < end))
    }

    fn verify(&mut self, cx: &mut StepCx) -> Option<Step> {
        let Some(p) = self.queue.pop_front() else {
            self.coverage(cx);
            let avail = self.data.available();
            cx.progress(avail, Some(avail));
            self.state = State::Done;
            return Some(Step::Done);
        };
        self.current = Some(Current {
            idx: p.idx,
            work: work(p.plan, p.data),
            local: p.local,
            data: p.data,
            expect: p.expect,
            stored_end: None,
        });
        self.state = State::Entry;
        None
    }

    /// Reports bytes that belong to no entry or directory record.
    fn coverage(&mut self, cx: &mut StepCx) {
        let avail = self.data.available();
        let mut spans: Vec<Range> = self
            .entries
            .iter()
            .map(|e| Range::new(e.lfh, e.end.unwrap_or(e.lfh).min(avail)))
            .chain(self.structures.iter().copied())
            .collect();
        spans.sort_by_key(|r| r.start);
        let first = spans.first().map_or(avail, |r| r.start);
        let mut at = 0;
        for r in spans {
            if r.start > at {
                let gap = Range::new(at, r.start);
                if at == 0 && first == r.start && self.shift > 0 && gap.end == self.shift as u64 {
                    cx.push_node(
                        Node::new("prefix", "data before the archive", gap).uint(gap.len()),
                    );
                } else {
                    cx.push_node(
                        Node::new("gap", "unaccounted bytes", gap)
                            .uint(gap.len())
                            .damaged(Damage::corrupt(gap, "bytes that belong to no entry")),
                    );
                    cx.damage(Damage::corrupt(
                        gap,
                        format!(
                            "{} bytes belong to no entry (damaged header or garbage)",
                            gap.len()
                        ),
                    ));
                }
            }
            at = at.max(r.end);
        }
        if at < avail {
            let gap = Range::new(at, avail);
            cx.push_node(Node::new("trailing", "bytes after the archive", gap).uint(gap.len()));
        }
    }
}

enum Probe<T = Local> {
    Valid(T),
    NeedMore,
    Invalid,
}

enum Outcome {
    Yield,
    Blocked,
    Again,
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

fn check_crc(expect: Option<(u32, u64, u64)>, crc: u32, size: u64) -> Result<(), Damage> {
    let Some((want, _, usize)) = expect else {
        return Ok(());
    };
    if want != crc {
        return Err(Damage::corrupt(
            Range::new(0, size),
            format!("CRC-32 mismatch: stored {want:#010x}, computed {crc:#010x}"),
        ));
    }
    if usize != size {
        return Err(Damage::corrupt(
            Range::new(0, size),
            format!("size mismatch: header says {usize}, found {size}"),
        ));
    }
    Ok(())
}

fn descriptor_candidates(b: &[u8], zip64: bool) -> Vec<Descriptor> {
    let mut v = Vec::new();
    for wide in [zip64, !zip64] {
        for signed in [true, false] {
            if let Some(d) = records::parse_descriptor(b, signed, wide) {
                v.push(d);
            }
        }
    }
    v
}

/// For a stored entry starting at `start`, judges a signature at `c`:
/// a signed descriptor at `c`, or an unsigned or signed one ending at `c`
/// (before a local or central header). Returns the descriptor's position,
/// the descriptor, and whether its CRC matches (else it is only consistent).
fn descriptor_before(
    data: &Data,
    s: &StoredScan,
    start: u64,
    c: u64,
    at_c: &[u8],
    zip64: bool,
) -> Option<(u64, Descriptor, bool)> {
    let mut consistent = None;
    let mut judge = |dpos: u64, d: Descriptor| -> Option<(u64, Descriptor, bool)> {
        if d.csize != dpos - start || d.usize != d.csize {
            return None;
        }
        if crc_upto(data, s, dpos) == d.crc {
            return Some((dpos, d, true));
        }
        consistent.get_or_insert((dpos, d, false));
        None
    };
    if at_c.starts_with(records::DD) {
        for wide in [zip64, !zip64] {
            if let Some(d) = records::parse_descriptor(at_c, true, wide)
                && let Some(hit) = judge(c, d)
            {
                return Some(hit);
            }
        }
        return consistent;
    }
    for (signed, wide) in [
        (false, zip64),
        (false, !zip64),
        (true, zip64),
        (true, !zip64),
    ] {
        let len = if signed { 4 } else { 0 } + if wide { 20 } else { 12 };
        let Some(dpos) = c.checked_sub(len).filter(|&p| p >= start) else {
            continue;
        };
        let mut b = [0u8; 24];
        if data.read_at(dpos, &mut b[..len as usize]).unwrap_or(0) < len as usize {
            continue;
        }
        if let Some(d) = records::parse_descriptor(&b[..len as usize], signed, wide)
            && let Some(hit) = judge(dpos, d)
        {
            return Some(hit);
        }
    }
    consistent
}

/// CRC of the bytes `[start, at)` of a stored scan, without moving it.
fn crc_upto(data: &Data, s: &StoredScan, at: u64) -> u32 {
    let mut h = s.hasher.clone();
    let mut pos = s.hashed;
    let mut buf = vec![0u8; 64 * 1024];
    while pos < at {
        let n = ((at - pos) as usize).min(buf.len());
        let k = data.read_at(pos, &mut buf[..n]).unwrap_or(0);
        if k == 0 {
            break;
        }
        h.update(&buf[..k]);
        pos += k as u64;
    }
    h.finalize()
}

fn advance_hash(data: &Data, s: &mut StoredScan, to: u64) {
    let mut buf = vec![0u8; 64 * 1024];
    while s.hashed < to {
        let n = ((to - s.hashed) as usize).min(buf.len());
        let k = data.read_at(s.hashed, &mut buf[..n]).unwrap_or(0);
        if k == 0 {
            break;
        }
        s.hasher.update(&buf[..k]);
        s.hashed += k as u64;
    }
}

/// Finds the end of central directory record in the last 64 KiB; with
/// `exact`, only one whose comment ends exactly at the end of the bytes.
fn find_end(data: &Data, exact: bool) -> Option<End> {
    let len = data.available();
    if len < 22 {
        return None;
    }
    let from = len.saturating_sub(22 + 65535);
    let mut buf = Vec::new();
    let tail = view(&**data, from, (len - from) as usize, &mut buf)
        .ok()?
        .to_vec();
    for i in memmem::rfind_iter(&tail, records::EOCD) {
        let pos = from + i as u64;
        let Some(mut e) = records::parse_end(&tail[i..], pos) else {
            continue;
        };
        if pos + 22 + e.comment_len > len || (exact && pos + 22 + e.comment_len != len) {
            continue;
        }
        if i >= 20 && &tail[i - 20..i - 16] == records::Z64_LOC {
            let declared = crate::data::le::u64(&tail, i - 12);
            let loc = pos - 20;
            // The zip64 end record sits right before its locator unless
            // something is in between; try there first, then where it says.
            let mut zb = [0u8; 56];
            for c in [loc.checked_sub(56), Some(declared)].into_iter().flatten() {
                if matches!(crate::data::read_exact_at(&**data, c, &mut zb), Ok(true))
                    && let Some((n, size, off)) = records::parse_end64(&zb)
                {
                    // Classic fields either overflow (all ones) or must agree.
                    let fields = [
                        (e.entries, 0xffff, n, "entry count"),
                        (e.cd_size, 0xffff_ffff, size, "directory size"),
                        (e.cd_offset, 0xffff_ffff, off, "directory offset"),
                    ];
                    for (classic, ones, wide, what) in fields {
                        if classic != ones && classic != wide {
                            e.problems.push(Damage::corrupt(
                                Range::new(pos, pos + 22),
                                format!("end record's {what} {classic} contradicts the zip64 record's {wide}"),
                            ));
                        }
                    }
                    e.entries = n;
                    e.cd_size = size;
                    e.cd_offset = off;
                    e.zip64 = Some((c, loc));
                    break;
                }
            }
        }
        return Some(e);
    }
    None
}

impl Parser for ZipParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        for _ in 0..4096 {
            let r = match self.state {
                State::Start => self.start(),
                State::List { next } => self.list(cx, next),
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
