//! Central-directory mode: finding and reading the directory, listing its
//! entries (each checked against its local header), and spotting entries
//! whose bytes overlap. Scan mode uses the same reading to merge what
//! survives of a damaged directory.

use std::collections::HashMap;

use memchr::memmem;

use super::records::{self, Central, Local, RecordError};
use super::{
    Directory, GROUP_FROM, GROUP_LEN, Group, Pending, Plan, Probe, State, ZipParser,
    descriptor_len, entry_node, shifted, slice,
};
use crate::data::{Range, ReadAhead, view};
use crate::extraction::EntryKind;
use crate::name::escape_bytes;
use crate::node::Node;
use crate::parsers::api::{Step, StepCx};
use crate::status::Damage;

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
    // A record that overlaps nothing when every record takes part takes
    // part in no overlap either way: only the records of a first sweep's
    // overlaps have their local headers read (none, in most archives).
    let all = sweep(records, shift, |_| true);
    let involved: std::collections::HashSet<u32> = all
        .iter()
        .enumerate()
        .filter_map(|(i, o)| o.map(|owner| [i as u32, owner]))
        .flatten()
        .collect();
    if involved.is_empty() {
        return all;
    }
    sweep(records, shift, |i| {
        !involved.contains(&i) || valid(&records[i as usize])
    })
}

/// [`overlaps`] among the records that `takes_part`.
fn sweep(
    records: &[Central],
    shift: i64,
    mut takes_part: impl FnMut(u32) -> bool,
) -> Vec<Option<u32>> {
    let extent = |c: &Central| {
        let start = shifted(c.offset, shift);
        let end = start
            .saturating_add(records::lfh::LEN as u64)
            .saturating_add(c.name.len() as u64)
            .saturating_add(c.csize);
        (start, end)
    };
    let mut order: Vec<u32> = (0..records.len() as u32)
        .filter(|&i| takes_part(i))
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

impl ZipParser {
    /// Central mode: lists a batch of directory entries, the records read
    /// again from `pos` as they come: the records read to choose the mode
    /// are dropped once their overlaps are known, so that a directory of a
    /// million records is not held beside the entries made of it.
    pub(super) fn list(&mut self, cx: &mut StepCx, next: usize, mut pos: u64) -> Option<Step> {
        let mut dir = self.directory.take()?;
        if next == 0 {
            let mut ahead = ReadAhead::new();
            let data = &self.data;
            let found = overlaps(&dir.records, self.shift, |c| {
                records::local_at(&mut ahead, &**data, shifted(c.offset, self.shift)).is_ok()
            });
            self.overlaps = found
                .iter()
                .enumerate()
                .filter_map(|(i, o)| o.map(|j| (i as u32, j)))
                .collect();
            self.overlapped = self.overlaps.values().copied().collect();
            self.owners = self
                .overlapped
                .iter()
                .map(|&j| (j, dir.records[j as usize].clone()))
                .collect();
            dir.records = Vec::new();
            pos = dir.range.start;
            // One entry, node and child per record, and the directory's
            // own nodes after them.
            self.checked.reserve_exact(dir.count);
            self.grouping = dir.count > GROUP_FROM;
            let nodes = if self.grouping {
                dir.count / GROUP_LEN
            } else {
                dir.count
            };
            cx.reserve(nodes + 4, dir.count);
        }
        // A batch of records, fewer when small entries checked where they
        // are listed have taken this step's budget.
        let last = (next + 1024).min(dir.count);
        let left = cx.decode_left;
        let mut stop = next;
        let mut at = None;
        while stop < last && left - cx.decode_left.min(left) <= cx.budget {
            // Read when the mode was chosen: it reads the same again.
            let Ok(c) = records::central_at(&mut self.cd_ahead, &*self.data, pos) else {
                dir.count = stop;
                break;
            };
            self.record = (stop, pos);
            pos += c.len;
            let owner = self.overlaps.get(&(stop as u32)).copied();
            let overlap = owner.and_then(|j| self.owners.get(&j)).cloned();
            self.entry_from_central(cx, &c, overlap.as_ref());
            at = Some(c.offset);
            stop += 1;
        }
        // One pass over the file: the entries and records listed are not
        // read again soon, and a mapped file need not keep their pages (a
        // zip of a million entries would hold all of it).
        if let Some(o) = at {
            let (entries, records) = &mut self.released;
            let lfh = shifted(o, self.shift);
            if lfh > *entries {
                self.data.release(*entries, lfh);
                *entries = lfh;
            }
            let from = (*records).max(dir.range.start);
            if pos > from {
                self.data.release(from, pos);
                *records = pos;
            }
        }
        // Progress as far as every entry is checked (entries queued for
        // checking later report theirs then).
        if let Some(o) = at
            && self.queue.is_empty()
        {
            let avail = self.data.available();
            cx.progress(shifted(o, self.shift).min(avail), Some(avail));
        }
        if stop < dir.count {
            self.directory = Some(dir);
            self.state = State::List { next: stop, pos };
            return Some(Step::Yield);
        }
        // The directory's own nodes go after the entries, in file order.
        self.close_group(cx);
        self.push_directory_nodes(cx, &dir);
        self.state = State::Verify;
        None
    }

    /// Finds the end record and reads the directory it points to (or, from
    /// `seen`, where the scan ran into it), checking every field it can.
    pub(super) fn read_directory(&mut self, seen: Option<u64>, exact: bool) -> Option<Directory> {
        let avail = self.data.available();
        let found = records::find_end(&self.data, exact);
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
                        Range::new(e.pos, e.pos + records::eocd::LEN as u64),
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
        let mut ahead = ReadAhead::new();
        while (records.len() as u64) < count && pos - start < size {
            match records::central_at(&mut ahead, &*self.data, pos) {
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
                    Range::new(
                        e.pos + records::eocd::CD_OFFSET as u64,
                        e.pos + records::eocd::CD_OFFSET as u64 + 4,
                    ),
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
                    Range::new(e.pos, e.pos + records::eocd::LEN as u64),
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
                let mut buf = Vec::new();
                let rest = view(&*self.data, pos, 64, &mut buf)
                    .map(|b| b.to_vec())
                    .unwrap_or_default();
                rest.len() < 4
                    || matches!(records::parse_central(&rest), Err(RecordError::Short(_)))
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
            count: records.len(),
            records,
            problems,
        })
    }

    /// The archive offset that makes the first directory records point at
    /// matching local headers: the end record's (an archive prefix), or none
    /// (a damaged directory offset field).
    fn best_shift(&self, computed: i64, records: &[Central]) -> i64 {
        let score = |shift: i64| {
            let mut ahead = ReadAhead::new();
            records
                .iter()
                .take(8)
                .filter(|c| {
                    let lfh = shifted(c.offset, shift);
                    records::local_at(&mut ahead, &*self.data, lfh).is_ok_and(|l| l.name == c.name)
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

    pub(super) fn push_directory_nodes(&mut self, cx: &mut StepCx, dir: &Directory) {
        if !dir.range.is_empty() {
            cx.push_node(
                Node::new("central directory", "central directory", dir.range)
                    .text(format!("{} entries", dir.count))
                    .lazy(),
            );
        }
        for d in &dir.problems {
            cx.damage(d.clone());
        }
        let Some(end) = &dir.end else { return };
        if let Some((z, loc)) = end.zip64 {
            let z_end = z + records::z64_eocd::LEN as u64;
            let loc_end = loc + records::z64_loc::LEN as u64;
            cx.push_node(
                Node::new(
                    "zip64 end",
                    "zip64 end of central directory",
                    Range::new(z, z_end),
                )
                .lazy(),
            );
            cx.push_node(
                Node::new(
                    "zip64 locator",
                    "zip64 end locator",
                    Range::new(loc, loc_end),
                )
                .lazy(),
            );
            self.structures.push(Range::new(z, z_end));
            self.structures.push(Range::new(loc, loc_end));
        }
        let eocd = Range::new(
            end.pos,
            end.pos + records::eocd::LEN as u64 + end.comment_len,
        );
        cx.push_node(Node::new("end", "end of central directory", eocd).lazy());
        self.structures.push(eocd);
    }

    /// An entry listed by the directory: check its local header, list it,
    /// and queue it for verification.
    pub(super) fn entry_from_central(
        &mut self,
        cx: &mut StepCx,
        c: &Central,
        overlap: Option<&Central>,
    ) {
        let mut lfh = shifted(c.offset, self.shift);
        let mut local = records::local_at(&mut self.ahead, &*self.data, lfh).ok();
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
                local = records::local_at(&mut self.ahead, &*self.data, lfh).ok();
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
            end += descriptor_len(&mut self.ahead, &*self.data, end, c, zip64);
        }
        let as_local = Local {
            flags: c.flags,
            method: c.method,
            crc: c.crc,
            csize: c.csize,
            usize: c.usize,
            name: c.name.clone(),
            zip64,
            len: header_len,
            time: c.time,
            mode: c.unix_mode(),
        };
        let repeat = overlap.filter(|o| {
            o.offset == c.offset
                && (o.method, o.csize, o.usize, o.crc) == (c.method, c.csize, c.usize, c.crc)
        });
        let shared = repeat.and_then(|_| self.shared.get(&lfh).cloned());
        let plain = overlap.is_none()
            && problem.is_none()
            && moved.is_none()
            && overrun.is_none()
            && !(c.is_symlink() && c.method == 0);
        if plain && self.quick_check(cx, (lfh, Some(end)), &as_local, data) {
            // Checked already: nothing is left to verify, and nothing is
            // kept of the entry but its extent.
            self.checked.push(Range::new(lfh, end));
            if !self.by_offset.is_empty() {
                self.by_offset.entry(lfh).or_insert(usize::MAX);
            }
            self.group_or_push(cx, c, Range::new(lfh, end));
            return;
        }
        self.close_group(cx);
        let node = cx.push_node(entry_node(c, Range::new(lfh, end)));
        let idx = self.push_entry(lfh, Some(end), &c.name, node, true);
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

    /// Lists a checked entry: in the open group when the directory is
    /// grouped, else as a node of its own.
    fn group_or_push(&mut self, cx: &mut StepCx, c: &Central, range: Range) {
        if !self.grouping {
            cx.push_node(entry_node(c, range));
            return;
        }
        let (index, record) = self.record;
        match &mut self.group {
            Some(g) if g.count < GROUP_LEN && g.first + g.count == index => {
                g.count += 1;
                g.range = Range::new(g.range.start.min(range.start), g.range.end.max(range.end));
            }
            _ => {
                self.close_group(cx);
                self.group = Some(Group {
                    first: index,
                    count: 1,
                    record,
                    range,
                });
            }
        }
    }

    /// Ends the open group: its node goes where its entries were listed.
    pub(super) fn close_group(&mut self, cx: &mut StepCx) {
        let Some(g) = self.group.take() else {
            return;
        };
        let last = g.first + g.count - 1;
        cx.push_node(
            Node::new("entries", format!("entries {}–{last}", g.first), g.range)
                .text(format!(
                    "{} entries, directory records from {:#x}",
                    g.count, g.record
                ))
                .lazy(),
        );
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
            let mut ahead = ReadAhead::new();
            while pos < avail {
                let w = view(&*self.data, pos, 1 << 20, &mut window)
                    .map(|w| w.to_vec())
                    .unwrap_or_default();
                if w.len() < 4 {
                    break;
                }
                for i in memmem::find_iter(&w, records::LFH) {
                    let at = pos + i as u64;
                    if let Ok(l) = records::local_at(&mut ahead, &*self.data, at) {
                        index.entry(l.name).or_default().push(at);
                    }
                }
                pos += (w.len() as u64 - 3).max(1);
            }
            self.local_index = Some(index);
        }
        if self.by_offset.is_empty() {
            // Central mode lists entries without indexing their offsets.
            for (i, e) in self.entries.iter().enumerate() {
                self.by_offset.entry(e.lfh).or_insert(i);
            }
            for r in &self.checked {
                self.by_offset.entry(r.start).or_insert(usize::MAX);
            }
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
    fn guess_header_len(&mut self, lfh: u64, c: &Central) -> u64 {
        let mut h = [0u8; records::lfh::LEN];
        let n = self.data.read_at(lfh, &mut h).unwrap_or(0);
        let (nl, xl) = if n == h.len() {
            (
                crate::data::le::u16(&h, records::lfh::NAME_LEN) as u64,
                crate::data::le::u16(&h, records::lfh::EXTRA_LEN) as u64,
            )
        } else {
            (0, 0)
        };
        let fixed = records::lfh::LEN as u64;
        let cn = c.name.len() as u64;
        let mut cands = vec![
            fixed + nl + xl,
            fixed + cn + xl,
            fixed + nl + c.extra_len,
            fixed + cn + c.extra_len,
            fixed + cn,
        ];
        cands.dedup();
        let mut good = |len: u64| {
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
                        time: 0,
                        mode: None,
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
            .unwrap_or(fixed + cn + xl)
    }
}
