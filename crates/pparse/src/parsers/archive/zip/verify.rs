//! Checking an entry's bytes, in both modes: how they will be checked
//! ([`Plan`]), running that work a budget at a time (CRC of stored bytes,
//! full decode of deflate data), reporting the result on the entry, and the
//! final pass over bytes that belong to no entry.

use super::records::{self, Local};
use super::{Current, Outcome, Plan, State, Work, ZipParser, method_text, slice, work};
use crate::data::blocks::{bzip2, xz, zstd};
use crate::data::inflate::resync;
use crate::data::inflate::zlib::{Code, RawInflate};
use crate::data::{
    BlockCodec, BlockSource, Data, InflateEvent, InflateSource, Inflater, Pull, Pumped, Range,
    Source, view,
};
use crate::extraction::EntryKind;
use crate::name::{Name, escape_bytes};
use crate::node::{Node, Value};
use crate::parsers::api::{ChildSpec, HEAD_LEN, Step, StepCx};
use crate::status::Damage;

impl ZipParser {
    /// Creates the entry's child (when its extent allows) and decides how
    /// its bytes will be checked.
    pub(super) fn plan(
        &mut self,
        cx: &mut StepCx,
        idx: usize,
        local: &Local,
        data: u64,
        csize: Option<u64>,
        usize: u64,
    ) -> Plan {
        // A directory has no bytes. One whose sizes are in a descriptor
        // (`csize` unknown) still has its compressed bytes and descriptor
        // to step over (Java's jar tool deflates directories: 2 bytes), so
        // it is decoded like any entry: taking it as empty made a scan skip
        // to whatever bytes had arrived, and call the entries in between
        // bytes of no entry.
        if local.name.ends_with(b"/") && csize == Some(0) && usize == 0 {
            let d = slice(&self.data, data, data);
            self.add_entry_child(cx, idx, local, EntryKind::Dir, d, Some(0));
            return Plan::None;
        }
        // Any other entry named with a trailing `/` is a directory too, as
        // unzip and Python's zipfile take it, but its bytes are still
        // checked: Java's ZipOutputStream deflates directories (ct.sym's).
        let kind = entry_kind(local);
        let encrypted = local.flags & records::FLAG_ENCRYPTED != 0;
        if !encrypted && let Some(c) = csize {
            let codec: Option<(Box<dyn BlockCodec>, &'static str, u64)> = match local.method {
                12 => Some((Box::new(bzip2::StreamCodec), "bzip2 entry", 0)),
                // Bit 1 of the flags: an end marker ends the LZMA data.
                14 if local.flags & 2 != 0 => {
                    Some((Box::new(xz::LzmaZipCodec), "lzma entry", u64::MAX))
                }
                14 => Some((Box::new(xz::LzmaZipCodec), "lzma entry", usize)),
                20 | 93 => Some((Box::new(zstd::Codec), "zstd entry", 0)),
                95 => Some((Box::new(xz::StreamCodec), "xz entry", 0)),
                _ => None,
            };
            if let Some((codec, label, aux0)) = codec {
                let end = data.saturating_add(c);
                let src = BlockSource::new(slice(&self.data, data, end), codec, label);
                let declared = (csize.is_some() || usize > 0).then_some(usize);
                self.add_entry_child(cx, idx, local, kind, src.clone() as Data, declared);
                return Plan::Blocks(src, [aux0, 0], usize);
            }
        }
        let unsupported = if encrypted {
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
                self.add_entry_child(cx, idx, local, kind, d, Some(c));
                Plan::Stored { end }
            }
            (0, None) => Plan::StoredScan,
            _ => {
                let end = csize.map_or(u64::MAX, |c| data.saturating_add(c));
                let src = InflateSource::new(slice(&self.data, data, end), "deflate");
                let declared = (csize.is_some() || usize > 0).then_some(usize);
                self.add_entry_child(cx, idx, local, kind, src.clone() as Data, declared);
                Plan::Deflate(src, declared)
            }
        }
    }

    /// Checks a small stored or deflated entry of the directory where it
    /// is listed, in one go: when its bytes make exactly what the
    /// directory says (size, CRC, and deflate data that ends where its
    /// compressed size does), adds its child, handing over its first bytes
    /// for sniffing, and returns true. A deflated child keeps no decoder:
    /// it is decoded again if read ([`ChildSpec::deflated`]). Anything else
    /// returns false, and the entry takes the full path, which says what
    /// is wrong.
    pub(super) fn quick_check(
        &mut self,
        cx: &mut StepCx,
        at: (u64, Option<u64>),
        local: &Local,
        data: u64,
    ) -> bool {
        let (csize, usize) = (local.csize, local.usize);
        if local.flags & records::FLAG_ENCRYPTED != 0
            || csize > QUICK_MAX
            || usize > QUICK_MAX
            || cx.decode_left < usize
            || !matches!(local.method, 0 | 8)
            || self.overlapped.contains(&(self.record.0 as u32))
        {
            return false;
        }
        let Ok(input) = self.ahead.get(&*self.data, data, csize as usize) else {
            return false;
        };
        if input.len() as u64 != csize {
            return false;
        }
        let head_len = (usize as usize).min(HEAD_LEN);
        let head: Box<[u8]> = if local.method == 0 {
            if csize != usize || crc32fast::hash(input) != local.crc {
                return false;
            }
            input[..head_len].into()
        } else {
            // One byte more than declared, to see a stream that makes more.
            let need = usize as usize + 1;
            if self.scratch.len() < need {
                self.scratch.resize(need, 0);
            }
            let out = &mut self.scratch[..need];
            let started = std::time::Instant::now();
            let mut z = RawInflate::new();
            let (mut used, mut made) = (0, 0);
            let end = loop {
                let step = z.inflate(&input[used..], &mut out[made..], false);
                used += step.consumed;
                made += step.produced;
                if step.code != Code::Ok || step.consumed + step.produced == 0 {
                    break step.code;
                }
            };
            crate::data::stats::decoded(
                self.data.counters().map(|c| &**c),
                made as u64,
                started.elapsed(),
                false,
            );
            if end != Code::StreamEnd
                || used as u64 != csize
                || made as u64 != usize
                || crc32fast::hash(&out[..made]) != local.crc
            {
                return false;
            }
            cx.decoded(usize);
            out[..head_len].into()
        };
        let range = Range::new(data, data + csize);
        let parent = self.data.clone();
        let stored = local.method == 0;
        // A directory too (Java's jar tool deflates them: 2 bytes).
        let kind = entry_kind(local);
        let dir = kind == EntryKind::Dir;
        let child = self.add_entry_spec(cx, at, local, dir, |name| {
            if stored {
                let mut spec = ChildSpec::window(name, kind, &parent, range);
                spec.declared_size = Some(csize);
                spec.with_head(head)
            } else {
                ChildSpec::deflated(name, kind, &parent, range, usize, head)
            }
        });
        // Its CRC and size matched: a decoded entry proves its own bytes.
        if let Some(c) = child
            && !stored
        {
            cx.child_proved(c);
        }
        true
    }

    /// Runs the current entry's work for one budget.
    pub(super) fn entry(&mut self, cx: &mut StepCx) -> Option<Step> {
        let mut cur = self.current.take()?;
        if matches!(cur.work, Work::Recovered { .. }) {
            return self.recovered(cx, cur);
        }
        let before = match &cur.work {
            Work::Deflate { inflater, src } if cx.decode_left == 0 => {
                src.finish();
                let d = cx.budget_damage(inflater.produced());
                self.finish_entry(cx, cur, Err(d));
                return None;
            }
            Work::Deflate { inflater, .. } => Some(inflater.produced()),
            Work::Blocks { src, .. } if cx.decode_left == 0 => {
                let have = src.available();
                src.finish();
                let d = cx.budget_damage(have);
                self.finish_entry(cx, cur, Err(d));
                return None;
            }
            Work::Blocks { src, .. } => Some(src.available()),
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
        if let (Some(before), Work::Blocks { src, .. }) = (before, &cur.work) {
            cx.decoded(src.available() - before);
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
            Outcome::Recover(bit) => {
                let Work::Resync { input, err, .. } = std::mem::replace(&mut cur.work, Work::None)
                else {
                    return None;
                };
                let byte = cur.data + bit / 8;
                let lost = err.range.start;
                let src = InflateSource::new(input, "recovered deflate stream");
                let inflater = Box::new(Inflater::recover(src.clone(), bit));
                let name = format!(
                    "{}~recovered@{byte:#x}",
                    escape_bytes(&crate::name::member_path(&cur.local.name))
                );
                let mut spec =
                    ChildSpec::new(Name::new(name), EntryKind::File, src.clone() as Data);
                spec.parse = self.parse_child;
                spec.origin = Some(Range::new(byte, self.data.available().max(byte)));
                spec.damage.push(Damage::unknown(
                    Range::new(0, 0),
                    format!(
                        "the rest of entry {} after invalid deflate data (its bytes from {lost:#x} on are lost): decoding resumed at bit {} of byte {byte:#x}, and bytes that copy the 32 KiB before this point are unknown",
                        escape_bytes(&cur.local.name),
                        bit % 8
                    ),
                ));
                let child = cx.add_child(spec);
                cur.work = Work::Recovered {
                    inflater,
                    src,
                    child,
                    err,
                };
                self.current = Some(cur);
                None
            }
            Outcome::Done(result) => {
                self.finish_entry(cx, cur, result);
                None
            }
        }
    }

    /// Decodes an entry's tail recovered after damage into its own child.
    fn recovered(&mut self, cx: &mut StepCx, mut cur: Current) -> Option<Step> {
        let Work::Recovered {
            inflater,
            src,
            child,
            err,
        } = &mut cur.work
        else {
            return None;
        };
        let child = *child;
        if cx.decode_left == 0 {
            src.finish();
            let d = cx.budget_damage(inflater.produced());
            cx.child_damage(child, d);
            let err = err.clone();
            self.finish_entry(cx, cur, Err(err));
            return None;
        }
        let before = inflater.produced();
        let event = inflater.run(cx.budget.min(cx.decode_left));
        cx.decoded(inflater.produced() - before);
        for (s, e) in inflater.take_unknown() {
            cx.child_damage(
                child,
                Damage::unknown(
                    Range::new(s, e),
                    "unknown bytes: they copy the 32 KiB of the entry lost before the resync point",
                ),
            );
        }
        let tail = match event {
            InflateEvent::Progress => {
                self.current = Some(cur);
                return Some(Step::Yield);
            }
            InflateEvent::NeedInput => {
                self.current = Some(cur);
                return Some(Step::Blocked);
            }
            InflateEvent::End { in_end } => {
                let e = &mut self.entries[cur.idx];
                e.end = Some(e.end.unwrap_or(0).max(cur.data + in_end));
                None
            }
            InflateEvent::Truncated { .. } => {
                let have = inflater.produced();
                Some(Damage::truncated(
                    Range::new(have, have),
                    "deflate data cut off",
                ))
            }
            InflateEvent::Error { message, .. } | InflateEvent::Overflow { message, .. } => {
                let have = inflater.produced();
                Some(Damage::corrupt(
                    Range::new(have, have),
                    format!("invalid deflate data again ({message}); bytes after this are lost"),
                ))
            }
        };
        src.finish();
        if let Some(d) = tail {
            cx.child_damage(child, d);
        }
        let err = err.clone();
        self.finish_entry(cx, cur, Err(err));
        None
    }

    fn run_work(&mut self, cur: &mut Current, budget: u64) -> Outcome {
        let (avail, fin) = self.data.extent();
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
            Work::Blocks {
                src,
                reader,
                hasher,
                limit,
                scratch,
            } => {
                let method = records::method_name(cur.local.method).unwrap_or("?");
                let r = match reader {
                    Ok(r) => r,
                    Err(e) => {
                        let e = e.clone();
                        src.finish();
                        return Outcome::Done(Err(Damage::corrupt(
                            Range::new(0, 0),
                            format!("{method} data cannot be decoded: {e}"),
                        )));
                    }
                };
                let room = (*limit + 1).saturating_sub(src.available()).max(1);
                let pumped = src.pump(&mut **r, budget.min(room), scratch, &mut |b| {
                    hasher.update(b);
                });
                let have = src.available();
                let in_end = r.input_pos();
                if have > *limit {
                    src.end_block(in_end);
                    src.finish();
                    self.entries[cur.idx].end.get_or_insert(cur.data + in_end);
                    // The stream is not what was written, and the CRC
                    // cannot say where: none of its bytes is vouched for.
                    return Outcome::Done(Err(Damage::corrupt(
                        Range::new(0, have),
                        format!(
                            "{method} data decodes to more than the declared {limit} bytes; decoding stopped there"
                        ),
                    )));
                }
                match pumped {
                    Pumped::Progress => Outcome::Yield,
                    Pumped::Stopped(Pull::Out(_)) => Outcome::Yield,
                    Pumped::Stopped(Pull::NeedInput) => Outcome::Blocked,
                    Pumped::Stopped(Pull::End) => {
                        src.end_block(in_end);
                        src.finish();
                        let crc = hasher.clone().finalize();
                        Outcome::Done(check_crc(cur.expect, crc, have))
                    }
                    Pumped::Stopped(Pull::Truncated) => {
                        src.end_block(in_end);
                        src.finish();
                        let e = &mut self.entries[cur.idx];
                        e.end = Some(e.end.unwrap_or(cur.data + in_end).min(avail));
                        Outcome::Done(Err(ran_out(cur, method, have, fin, avail)))
                    }
                    Pumped::Stopped(Pull::Error(message)) => {
                        src.end_block(in_end);
                        src.finish();
                        self.entries[cur.idx].end.get_or_insert(cur.data + in_end);
                        Outcome::Done(Err(Damage::corrupt(
                            Range::new(have, have),
                            format!("invalid {method} data ({message}); bytes after this are lost"),
                        )))
                    }
                }
            }
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
                    Outcome::Done(Err(ran_out(cur, "deflate", have, fin, avail)))
                }
                InflateEvent::Overflow { at, .. } => {
                    src.finish();
                    let have = inflater.produced();
                    // Extent unknown: scanning resumes where decoding stopped.
                    self.entries[cur.idx].end.get_or_insert(cur.data + at);
                    // As above: nothing the CRC could vouch for.
                    Outcome::Done(Err(Damage::corrupt(
                        Range::new(0, have),
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
                    let err = Damage::corrupt(
                        Range::new(have, have),
                        format!("invalid deflate data ({message}); bytes after this are lost"),
                    );
                    cur.work = Work::Resync {
                        input: src.input().clone(),
                        bit: at.saturating_sub(16) * 8,
                        err,
                    };
                    Outcome::Again
                }
            },
            Work::Resync { input, bit, err } => {
                // A recovered stream may end where the entry's size says,
                // or where a descriptor or the next record begins.
                let csize = (!cur.local.has_descriptor()).then_some(cur.local.csize);
                let (data, base) = (self.data.clone(), cur.data);
                let end_ok = |e: u64| Some(e) == csize || record_at(&data, base + e);
                let end = input.available();
                match resync::find_block(input, *bit, end, SCAN_STEP, &end_ok) {
                    Ok(resync::Found::Block(b)) => Outcome::Recover(b),
                    Ok(resync::Found::Scanned(b)) => {
                        *bit = b;
                        Outcome::Yield
                    }
                    Ok(resync::Found::NeedInput(b)) => {
                        *bit = b;
                        Outcome::Blocked
                    }
                    Ok(resync::Found::Nothing) | Err(_) => Outcome::Done(Err(err.clone())),
                }
            }
            Work::Recovered { .. } => Outcome::Again,
            Work::Descriptor { at, crc, usize } => {
                let (at, crc, usize) = (*at, *crc, *usize);
                self.deflate_descriptor(cur, at, crc, usize)
            }
        }
    }

    fn finish_entry(&mut self, cx: &mut StepCx, cur: Current, result: Result<(), Damage>) {
        let idx = cur.idx;
        if let Some(dend) = cur.stored_end
            && self.entries[idx].child.is_none()
        {
            let d = slice(&self.data, cur.data, dend);
            let declared = cur.expect.map(|e| e.2);
            self.add_entry_child(cx, idx, &cur.local, entry_kind(&cur.local), d, declared);
        }
        let entry = &self.entries[idx];
        let end = entry.end.unwrap_or(u64::MAX).min(self.data.available());
        let (lfh, node, child) = (entry.lfh, entry.node, entry.child);
        let kind = if cur.local.has_descriptor() {
            "entry+dd"
        } else {
            "entry"
        };
        // The size a descriptor declares, as the directory declares it
        // for an entry read from there: the same entry has the same
        // declared size however it is found. Only a descriptor that the
        // bytes match: one that says less than was decoded would make
        // the entry hold more than its declared size (the damage says
        // what it says).
        if let (Some(c), Some((_, _, usize)), Ok(())) = (child, cur.expect, &result)
            && cur.local.has_descriptor()
            && !self.entries[idx].from_central
        {
            cx.child_declared_size(c, usize);
        }
        // A decoded entry whose CRC and size matched proves its own bytes,
        // whatever damage its compressed bytes lie in.
        if let (Some(c), Ok(())) = (child, &result)
            && cur.local.method != 0
        {
            cx.child_proved(c);
        }
        let damage = result.err();
        if let (Some(c), Some(d)) = (child, &damage) {
            cx.child_damage(c, d.clone());
        }
        if let Some(d) = &damage {
            cx.damage(Damage {
                status: d.status,
                range: Range::new(lfh, end),
                reason: format!("entry {}: {}", escape_bytes(&cur.local.name), d.reason),
                unknown: false,
            });
        }
        let node_damage = damage.map(|d| Damage {
            range: Range::new(lfh, end),
            ..d
        });
        let text = match cur.expect {
            Some((_, c, u)) => {
                Value::Coded(records::method_name(cur.local.method).unwrap_or("?"), c, u)
            }
            None => Value::Str(method_text(&cur.local).into()),
        };
        cx.edit_node(node, move |n| {
            n.kind = kind;
            n.range = Range::new(lfh, end);
            n.value = Some(text);
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

    /// Starts the next queued entry, or ends the parse once none is left.
    pub(super) fn verify(&mut self, cx: &mut StepCx) -> Option<Step> {
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
            .chain(self.checked.iter().copied())
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

/// What an entry with bytes to check is: a directory when its name ends
/// with `/`, else a file.
fn entry_kind(local: &Local) -> EntryKind {
    if local.name.ends_with(b"/") {
        EntryKind::Dir
    } else {
        EntryKind::File
    }
}

/// The CRC and size computed from an entry's bytes against what its
/// headers say (nothing to check when they say nothing).
/// The damage of an entry's stream that ran out of input after `have`
/// decoded bytes: cut off when the file ends inside its compressed bytes;
/// corrupt when they are all there, since the zip's sizes say the stream
/// ends inside them and it does not (random bytes decode without an
/// invalid code for a while): what it decoded is then unproved, none of it
/// vouched for.
fn ran_out(cur: &Current, method: &str, have: u64, fin: bool, avail: u64) -> Damage {
    match cur.expect {
        Some((_, csize, _)) if fin && cur.data.saturating_add(csize) <= avail => Damage::corrupt(
            Range::new(0, have),
            format!(
                "{method} data does not end within its {csize} bytes, where the zip's sizes end it; the {have} bytes it decoded are unproved"
            ),
        ),
        _ => Damage::truncated(
            Range::new(have, have),
            format!("{method} data cut off after {have} decoded bytes"),
        ),
    }
}

pub(super) fn check_crc(
    expect: Option<(u32, u64, u64)>,
    crc: u32,
    size: u64,
) -> Result<(), Damage> {
    let Some((want, _, usize)) = expect else {
        return Ok(());
    };
    if want != crc {
        // Bytes that decoded without an error (or were stored) to the
        // size the zip gives: which of them are wrong is not known.
        let d = if usize == size {
            Damage::unverified
        } else {
            Damage::corrupt
        };
        return Err(d(
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

/// Largest entry [`ZipParser::quick_check`] takes: decoded into one
/// buffer within the step that lists it, it costs less than the stream and
/// decoder a checked-later entry needs.
const QUICK_MAX: u64 = 256 * 1024;

/// Input bytes the deflate block finder scans in one step.
const SCAN_STEP: u64 = 256 * 1024;

/// Whether a zip record (local header, descriptor, central header, end
/// record) begins at `at`: where an entry's deflate data may end.
fn record_at(data: &Data, at: u64) -> bool {
    let mut b = [0u8; 4];
    // Final before the read (see `Source::is_final`).
    let fin = data.is_final();
    match data.read_at(at, &mut b) {
        Ok(0) => fin,
        Ok(4) => b[..2] == *b"PK" && matches!([b[2], b[3]], [3, 4] | [7, 8] | [1, 2] | [5 | 6, 6]),
        _ => false,
    }
}
