//! Scan mode: entries found by their local headers when the directory is
//! damaged, missing or not there yet. A candidate header is believed once
//! its fields validate and its data starts to decode; a stored entry with a
//! data descriptor ends at the first descriptor whose CRC and size match the
//! bytes before it. At the end of the bytes, what survives of the central
//! directory is merged in.

use std::collections::HashMap;

use memchr::memmem;

use super::records::{self, Descriptor, Local, RecordError};
use super::verify::check_crc;
use super::{
    Current, Outcome, Probe, State, StoredScan, Work, ZipParser, method_text, shifted, work,
};
use crate::data::{Data, Range, view};
use crate::name::escape_bytes;
use crate::node::Node;
use crate::parsers::api::{Step, StepCx};
use crate::status::Damage;

/// Output a deflated candidate must decode cleanly before it is believed.
const PROOF_BYTES: u64 = 16 * 1024;
/// Input fed to a candidate's proof at a time.
const PROOF_READ: usize = 16 * 1024;
/// Bytes scanned for local headers at a time (the read-ahead reads longer
/// runs while the scan goes on through bytes with no header).
const SCAN_RUN: usize = 4 * 1024;

impl ZipParser {
    /// Looks for the next valid local header from `scan_pos`, for one
    /// budget; a directory record or the end of the bytes ends the scan.
    pub(super) fn scan(&mut self, cx: &mut StepCx) -> Option<Step> {
        let (avail, fin) = self.data.extent();
        let data = self.data.clone();
        let mut scanned = 0u64;
        while self.scan_pos < avail && scanned < cx.budget {
            let pos = self.scan_pos;
            // Candidates of one run of bytes, judged after the run is
            // let go (judging reads through the same read-ahead).
            let (len, head, cands) = match self.ahead.get(&*data, pos, SCAN_RUN) {
                Ok(w) => {
                    let mut head = [0u8; 4];
                    let k = w.len().min(4);
                    head[..k].copy_from_slice(&w[..k]);
                    let cands: Vec<u64> = memmem::find_iter(w, records::LFH)
                        .map(|i| pos + i as u64)
                        .collect();
                    (w.len(), head, cands)
                }
                Err(_) => break,
            };
            if len < 4 && !fin {
                return Some(Step::Blocked);
            }
            if len >= 4 && [records::CDH, records::EOCD, records::Z64_EOCD].contains(&&head) {
                if &head == records::CDH {
                    self.cd_seen = Some(pos);
                }
                self.state = State::Final;
                return None;
            }
            for cand in cands {
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
            // Keep the last 3 bytes: a signature may straddle runs.
            let step = (len as u64).saturating_sub(3).max(1);
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
    pub(super) fn try_local(&mut self, at: u64) -> Probe {
        let fin = self.data.is_final();
        let local = match records::local_at(&mut self.ahead, &*self.data, at) {
            Ok(l) => l,
            Err(RecordError::Short(_)) if !fin => return Probe::NeedMore,
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

    pub(super) fn proves_deflate(&mut self, start: u64, local: &Local) -> Probe<()> {
        use crate::data::inflate::zlib::{Code, RawInflate};
        let fin = self.data.is_final();
        let mut z = RawInflate::new();
        let mut out = vec![0u8; 32 * 1024];
        let mut pos = start;
        let mut made = 0u64;
        let limit = if local.has_descriptor() {
            u64::MAX
        } else {
            start.saturating_add(local.csize)
        };
        loop {
            let want = (limit.saturating_sub(pos) as usize).min(PROOF_READ);
            let input = self.ahead.get(&*self.data, pos, want).unwrap_or(&[]);
            let n = input.len();
            let s = z.inflate(input, &mut out, false);
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

    pub(super) fn deflate_descriptor(
        &mut self,
        cur: &mut Current,
        at: u64,
        crc: u32,
        usize: u64,
    ) -> Outcome {
        let fin = self.data.is_final();
        let mut b = [0u8; records::dd::MAX];
        let n = self.data.read_at(at, &mut b).unwrap_or(0);
        if n < b.len() && !fin {
            return Outcome::Blocked;
        }
        let csize = at - cur.data;
        let cands = records::descriptor_candidates(&b[..n], cur.local.zip64);
        // A layout whose every field matches what was decoded (a 32-bit
        // layout read from a 64-bit descriptor can match CRC and size but
        // not the second size field).
        let matches = |d: &&Descriptor| {
            let size = if d.len >= records::dd::len(false, true) as u64 {
                usize
            } else {
                usize & 0xffff_ffff
            };
            d.crc == crc && d.csize == csize && d.usize == size
        };
        let signed = n >= records::dd::SIG_LEN && &b[..records::dd::SIG_LEN] == records::DD;
        let need = records::dd::len(signed, cur.local.zip64);
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
    pub(super) fn stored_scan(&mut self, cur: &mut Current, budget: u64) -> Outcome {
        let Work::StoredScan(s) = &mut cur.work else {
            return Outcome::Done(Ok(()));
        };
        let (avail, fin) = self.data.extent();
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
                let mut b = [0u8; records::dd::MAX];
                let n = data.read_at(c, &mut b).unwrap_or(0);
                if n < b.len() && !fin {
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
                advance_hash(&data, s, c.saturating_sub(records::dd::MAX as u64));
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

    /// Scan mode at the end of the bytes: merge the directory, then verify.
    pub(super) fn finalize(&mut self, cx: &mut StepCx) -> Option<Step> {
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
        // A record whose name is empty names no entry: a zero-length name
        // is what a record's zeroed fields give (a zip inside a damaged
        // stream, whose lost bytes come back as zeros). It condemns no
        // local header that has a name, and is not listed as an entry.
        let mut nameless = std::collections::HashSet::new();
        for e in &mut self.entries {
            let Some(&(n, false)) = listed.get(&e.lfh) else {
                continue;
            };
            if n == e.name.as_slice() {
                continue;
            }
            if n.is_empty() && !e.name.is_empty() {
                nameless.insert(e.lfh);
                cx.damage(Damage::corrupt(
                    dir.range,
                    format!(
                        "the directory's record for the entry at {:#x} ({}) has an empty name: the record is damaged",
                        e.lfh,
                        escape_bytes(&e.name)
                    ),
                ));
            } else {
                e.suspect = true;
            }
        }
        for c in dir.records {
            let lfh = shifted(c.offset, self.shift);
            if c.name.is_empty() && nameless.contains(&lfh) {
                continue;
            }
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
                    let header = Range::new(lfh, lfh + records::lfh::LEN as u64);
                    cx.damage(Damage::corrupt(header, why));
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
        let len = records::dd::len(signed, wide) as u64;
        let Some(dpos) = c.checked_sub(len).filter(|&p| p >= start) else {
            continue;
        };
        let mut b = [0u8; records::dd::MAX];
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
