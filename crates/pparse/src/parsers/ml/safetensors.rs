//! safetensors: an 8-byte header length `N`, `N` bytes of JSON naming each
//! tensor's dtype, shape and `data_offsets`, then the tensors' bytes.
//!
//! The reference reader (the `safetensors` crate) rejects a file at the first
//! problem. pparse never does: every problem is reported on the extraction,
//! naming the tensors involved, and everything else is kept —
//!
//! * the header is split into members by [`crate::parsers::serial::json`]'s scanner, which
//!   gives each member's exact byte range and survives a broken or cut-off
//!   header; each member is then decoded with serde_json into [`RawTensor`];
//! * checks follow the crate (`Metadata::validate`): unknown dtype, shape
//!   overflow, sizes that are not whole bytes (F4, F6), `data_offsets` that
//!   end before they begin or do not match dtype × shape, tensors that overlap
//!   or leave holes, and bytes after the last tensor; plus what the crate does
//!   not check: duplicate names and cut-off data (each tensor intact, partial
//!   or missing);
//! * a damaged length field is recovered from where the JSON really ends.
//!
//! The tensor table ([`tensors`]) is computed again from the bytes when asked
//! for, so the parse keeps nothing but its nodes.

use std::collections::HashMap;

use serde::Deserialize;

use crate::data::{Data, Range, Source, read_exact_at, view};
use crate::extraction::{ExtId, Tree};
use crate::name::escape_str;
use crate::node::Node;
use crate::offer::tensor::{Dtype, Tensor};
use crate::offer::{Offers, TensorOffer};
use crate::parsers::api::{Format, Parser, Sniff, Step, StepCx};
use crate::parsers::serial::json::{self, Config, Event, Kind};
use crate::status::{Damage, Status};

/// safetensors: an 8-byte header length, a JSON header, then the tensors' data.
pub(crate) static FORMAT: Format = Format {
    name: "safetensors",
    extent: Some(|d: &Data| file_end(&**d)),
    sniff,
    parse: |data, _| Box::new(StParser::new(data.clone())),
    load,
    offers: Offers {
        tensors: Some(TensorOffer::List(tensors)),
        ..Offers::NONE
    },
};

/// The crate's `MAX_HEADER_SIZE`.
pub(crate) const MAX_HEADER: u64 = 100_000_000;
/// Longest tensor name kept whole.
const MAX_NAME: usize = 64 * 1024;
/// Problems of one kind reported one by one before they are summed up.
const MAX_REPORTS: usize = 200;

/// A plausible header length with a JSON object after it, or a
/// `.safetensors` name (a damaged header is then reported).
fn sniff(s: &Sniff) -> bool {
    if !s.kind.has_content() {
        return false;
    }
    if s.name.to_ascii_lowercase().ends_with(".safetensors") {
        return true;
    }
    if s.head.len() < 10 {
        return false;
    }
    let n = u64::from_le_bytes(s.head[..8].try_into().expect("8 bytes"));
    let fits = n.checked_add(8).is_some_and(|e| e <= s.data.available()) || !s.data.is_final();
    (2..=MAX_HEADER).contains(&n)
        && fits
        && s.head[8..]
            .iter()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
            == Some(&b'{')
}

/// Whether `s` names a dtype of the safetensors format (the torch-only
/// names of [`Dtype`] are not).
pub(crate) fn st_dtype(s: &str) -> Option<Dtype> {
    Dtype::parse(s).filter(|d| {
        !matches!(
            d,
            Dtype::C128
                | Dtype::C32
                | Dtype::QI8
                | Dtype::QU8
                | Dtype::QI32
                | Dtype::QU4X2
                | Dtype::QU2X4
        )
    })
}

/// A tensor entry as the header spells it.
#[derive(Deserialize)]
pub(crate) struct RawTensor {
    dtype: String,
    shape: Vec<u64>,
    data_offsets: [u64; 2],
}

/// One tensor of the header, checked.
#[derive(Clone, Debug)]
pub(crate) struct Info {
    /// The name, decoded (not escaped).
    pub name: String,
    /// `"name": {...}` in the file.
    pub member: Range,
    dtype: Option<Dtype>,
    dtype_text: String,
    shape: Vec<u64>,
    /// `data_offsets`, relative to the data section.
    pub begin: u64,
    end: u64,
    /// What is wrong with the entry or its place (corrupt).
    pub problems: Vec<String>,
    /// Its begin follows a hole in the data (so offsets past the end of the
    /// file are damage, not a cut-off file).
    pub after_gap: bool,
}

impl Info {
    /// The offsets make a range (end >= begin).
    pub(crate) fn placed(&self) -> bool {
        self.end >= self.begin
    }
    pub(super) fn len(&self) -> u64 {
        self.end.saturating_sub(self.begin)
    }
    /// `F32 [768, 3072] 9437184 bytes`.
    pub(crate) fn summary(&self) -> String {
        let shape: Vec<String> = self.shape.iter().take(16).map(|d| d.to_string()).collect();
        let more = if self.shape.len() > 16 { ", ..." } else { "" };
        format!(
            "{} [{}{more}] {} bytes",
            escape_str(&json::shorten(&self.dtype_text, 40)),
            shape.join(", "),
            self.len()
        )
    }
}

/// A header member that is not a usable tensor.
#[derive(Clone, Debug)]
pub(crate) struct Broken {
    name: String,
    member: Range,
    damage: Damage,
}

/// What the header says, checked, without looking at the data bytes.
#[derive(Clone, Debug, Default)]
pub(crate) struct SafetensorsHeader {
    /// The length field (None when fewer than 8 bytes exist).
    pub n: Option<u64>,
    /// The JSON header in the file (ends where the data section starts).
    pub header: Range,
    /// The header length field was damaged and the header's end was found
    /// from its JSON.
    pub recovered: bool,
    pub(super) tensors: Vec<Info>,
    broken: Vec<Broken>,
    /// The `__metadata__` member.
    pub metadata: Option<Range>,
    metadata_count: u64,
    /// Problems of the header (JSON, names, layout), in file offsets.
    pub damage: Vec<Damage>,
    /// End of the last tensor, relative to the data section.
    pub data_end: u64,
    /// End of the tensors that follow each other from 0 without a hole.
    pub chain_end: u64,
}

impl SafetensorsHeader {
    fn data_start(&self) -> u64 {
        self.header.end
    }
    /// A tensor's bytes in the file.
    pub(crate) fn range_of(&self, t: &Info) -> Range {
        let s = self.data_start();
        if t.placed() {
            Range::new(s.saturating_add(t.begin), s.saturating_add(t.end))
        } else {
            Range::new(s, s)
        }
    }
}

/// Where a safetensors file that starts at 0 of `src` ends (its header,
/// then its tensors' bytes), when its header reads without damage: how
/// far a file found by carving reaches.
pub(crate) fn file_end(src: &dyn Source) -> Option<u64> {
    let lay = read_layout(src);
    lay.damage
        .is_empty()
        .then(|| lay.data_start().checked_add(lay.data_end))
        .flatten()
}

/// Reads and checks the header from the bytes available now.
pub(crate) fn read_layout(src: &dyn Source) -> SafetensorsHeader {
    let mut lay = SafetensorsHeader::default();
    let avail = src.available();
    let mut b8 = [0u8; 8];
    if !matches!(read_exact_at(src, 0, &mut b8), Ok(true)) {
        lay.header = Range::new(avail, avail);
        lay.damage.push(Damage::truncated(
            Range::new(avail, avail),
            format!("the file ends inside the 8-byte header length ({avail} bytes)"),
        ));
        return lay;
    }
    let n = u64::from_le_bytes(b8);
    lay.n = Some(n);
    let sane = (2..=MAX_HEADER).contains(&n);
    let declared_end = n.saturating_add(8);
    if sane && declared_end <= avail {
        lay.header = Range::new(8, declared_end);
    } else if sane && src.is_final() && !looks_wrong(src, n) {
        // The header itself is cut off: keep what is there. The data section
        // still starts where the length says.
        lay.header = Range::new(8, declared_end);
        lay.damage.push(Damage::truncated(
            Range::new(avail, avail),
            format!(
                "the file ends inside the {n}-byte header ({} bytes of it present)",
                avail - 8
            ),
        ));
    } else {
        let why = if n > MAX_HEADER {
            format!("header length {n} is larger than the {MAX_HEADER}-byte limit")
        } else if n < 2 {
            format!("header length {n} is too small for a JSON object")
        } else {
            format!("header length {n} does not fit the file's {avail} bytes")
        };
        match find_header_end(src) {
            Some(end) => {
                lay.recovered = true;
                lay.header = Range::new(8, end);
                lay.damage.push(Damage::corrupt(
                    Range::new(0, 8),
                    format!(
                        "{why}; the JSON header ends at {end:#x}, so it is read as {} bytes",
                        end - 8
                    ),
                ));
            }
            None => {
                let end = avail.min(8 + MAX_HEADER);
                lay.header = Range::new(8, end);
                lay.damage.push(Damage::corrupt(
                    Range::new(0, 8),
                    format!("{why}, and no complete JSON header follows it"),
                ));
            }
        }
    }
    read_members(src, &mut lay);
    check_layout(&mut lay);
    lay
}

/// For a plausible length that runs past the end of the file: whether the
/// length is wrong rather than the header cut off. It is wrong when a whole
/// JSON object follows it and is followed by more than padding.
fn looks_wrong(src: &dyn Source, _n: u64) -> bool {
    let Some(end) = find_header_end(src) else {
        return false;
    };
    let avail = src.available();
    let mut buf = Vec::new();
    match view(
        src,
        end,
        (avail - end.min(avail)).min(4096) as usize,
        &mut buf,
    ) {
        Ok(rest) => rest.iter().any(|&c| c != b' '),
        Err(_) => true,
    }
}

/// Where a JSON object that starts at offset 8 ends, with the writer's space
/// padding to a multiple of 8 bytes.
fn find_header_end(src: &dyn Source) -> Option<u64> {
    let end = src.available().min(8 + MAX_HEADER);
    let mut sc = json::Scanner::new(
        Config {
            key_cap: 0,
            value_cap: 0,
            ..Config::json(8)
        },
        8,
    );
    let mut buf = Vec::new();
    while sc.pos() < end && !sc.stopped() && sc.root_end().is_none() {
        let want = ((end - sc.pos()) as usize).min(64 * 1024);
        let chunk = view(src, sc.pos(), want, &mut buf).ok()?;
        if chunk.is_empty() {
            break;
        }
        sc.feed(src, chunk, u64::MAX, &mut |_| {});
    }
    let pos = sc.root_end()?;
    let json_end = pos;
    let padded = json_end.div_ceil(8) * 8;
    let mut pad = vec![0u8; (padded - json_end) as usize];
    if padded <= src.available()
        && read_exact_at(src, json_end, &mut pad).unwrap_or(false)
        && pad.iter().all(|&c| c == b' ')
    {
        Some(padded)
    } else {
        Some(json_end)
    }
}

/// Splits the header into members and decodes each.
fn read_members(src: &dyn Source, lay: &mut SafetensorsHeader) {
    let header = Range::new(lay.header.start, lay.header.end.min(src.available()));
    let cfg = Config {
        key_cap: MAX_NAME,
        value_cap: 0,
        ..Config::json(8)
    };
    let mut first = [0u8; 1];
    let mut p = header.start;
    while p < header.end && read_exact_at(src, p, &mut first).unwrap_or(false) {
        if !matches!(first[0], b' ' | b'\t' | b'\r' | b'\n') {
            break;
        }
        p += 1;
    }
    if p < header.end && first[0] != b'{' {
        lay.damage.push(Damage::corrupt(
            Range::new(p, p + 1),
            format!(
                "the header does not start with '{{' (found byte 0x{:02x})",
                first[0]
            ),
        ));
    }
    let mut entries = Vec::new();
    let mut not_object = false;
    json::scan_range(src, header, cfg, &mut |ev| match ev {
        Event::Entry(e) => {
            if e.key.is_none() {
                not_object = true;
            } else {
                entries.push(e);
            }
        }
        Event::Problem(d) => lay.damage.push(Damage {
            reason: format!("header: {}", d.reason),
            ..d
        }),
    });
    if not_object {
        lay.damage.push(Damage::corrupt(
            header,
            "the header is not a JSON object: no tensors can be read from it",
        ));
        return;
    }
    let mut buf = Vec::new();
    let mut seen: HashMap<String, Range> = HashMap::new();
    let mut dup_reports = 0;
    for e in entries {
        let name = json::unescape(e.key.as_deref().unwrap_or_default());
        let shown = escape_str(&json::shorten(&name, 200));
        if e.key_cut {
            lay.broken.push(Broken {
                name: name.clone(),
                member: e.range,
                damage: Damage::corrupt(
                    e.range,
                    format!("a tensor name longer than {MAX_NAME} bytes ('{shown}')"),
                ),
            });
            lay.damage.push(Damage::corrupt(
                e.range,
                format!("tensor name longer than {MAX_NAME} bytes: '{shown}'"),
            ));
            continue;
        }
        if let Some(d) = &e.damage {
            // The member is cut off or broken; the scanner has reported why.
            lay.broken.push(Broken {
                name,
                member: e.range,
                damage: d.clone(),
            });
            continue;
        }
        if name == "__metadata__" {
            check_metadata(src, &e, lay, &mut buf);
            continue;
        }
        if let Some(prev) = seen.insert(name.clone(), e.range) {
            if dup_reports < MAX_REPORTS {
                lay.damage.push(Damage::corrupt(
                    e.range,
                    format!(
                        "duplicate tensor name '{shown}' (entries at {:#x} and {:#x}; the safetensors crate keeps the last)",
                        prev.start, e.range.start
                    ),
                ));
            }
            dup_reports += 1;
        }
        let vr = Range::new(e.value_start, e.range.end);
        let bytes = match view(src, vr.start, vr.len() as usize, &mut buf) {
            Ok(b) if b.len() as u64 == vr.len() => b,
            _ => continue,
        };
        match serde_json::from_slice::<RawTensor>(bytes) {
            Ok(raw) => {
                let mut info = Info {
                    name,
                    member: e.range,
                    dtype: st_dtype(&raw.dtype),
                    dtype_text: raw.dtype,
                    shape: raw.shape,
                    begin: raw.data_offsets[0],
                    end: raw.data_offsets[1],
                    problems: Vec::new(),
                    after_gap: false,
                };
                check_entry(&mut info);
                for p in &info.problems {
                    if !p.starts_with("duplicate") {
                        lay.damage
                            .push(Damage::corrupt(e.range, format!("tensor '{shown}': {p}")));
                    }
                }
                lay.tensors.push(info);
            }
            Err(err) => {
                let d = Damage::corrupt(
                    e.range,
                    format!("tensor '{shown}': invalid entry: {}", serde_text(&err)),
                );
                lay.damage.push(d.clone());
                lay.broken.push(Broken {
                    name,
                    member: e.range,
                    damage: d,
                });
            }
        }
    }
    if dup_reports > 0 {
        let mut count: HashMap<&str, usize> = HashMap::new();
        for t in &lay.tensors {
            *count.entry(&t.name).or_default() += 1;
        }
        let dups: std::collections::HashSet<String> = count
            .into_iter()
            .filter(|&(_, c)| c > 1)
            .map(|(n, _)| n.to_string())
            .collect();
        for t in lay.tensors.iter_mut().filter(|t| dups.contains(&t.name)) {
            t.problems.push("duplicate name in the header".into());
        }
    }
    if dup_reports > MAX_REPORTS {
        lay.damage.push(Damage::corrupt(
            header,
            format!("{} more duplicate names", dup_reports - MAX_REPORTS),
        ));
    }
}

/// serde_json's message without its position in the member's bytes.
fn serde_text(e: &serde_json::Error) -> String {
    let s = e.to_string();
    match s.find(" at line ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// `__metadata__` must map strings to strings.
fn check_metadata(
    src: &dyn Source,
    e: &json::Entry,
    lay: &mut SafetensorsHeader,
    buf: &mut Vec<u8>,
) {
    lay.metadata = Some(e.range);
    lay.metadata_count = e.count;
    if e.kind != Kind::Object {
        lay.damage.push(Damage::corrupt(
            e.range,
            format!("__metadata__ is a JSON {}, not an object", e.kind.as_str()),
        ));
        return;
    }
    let vr = Range::new(e.value_start, e.range.end);
    let Ok(bytes) = view(src, vr.start, vr.len() as usize, buf) else {
        return;
    };
    match serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(bytes) {
        Ok(map) => {
            for (k, v) in map.iter().filter(|(_, v)| !v.is_string()).take(MAX_REPORTS) {
                lay.damage.push(Damage::corrupt(
                    e.range,
                    format!(
                        "__metadata__ value of '{}' is not a string but {}",
                        escape_str(&json::shorten(k, 200)),
                        json_type(v)
                    ),
                ));
            }
        }
        Err(err) => lay.damage.push(Damage::corrupt(
            e.range,
            format!("__metadata__ is invalid: {}", serde_text(&err)),
        )),
    }
}

fn json_type(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// The checks of one entry that need nothing else.
fn check_entry(t: &mut Info) {
    let shape = || format!("{:?}", t.shape);
    if t.end < t.begin {
        t.problems.push(format!(
            "data_offsets [{}, {}] end before they begin",
            t.begin, t.end
        ));
    }
    let Some(dtype) = t.dtype else {
        t.problems.push(format!(
            "unknown dtype '{}'",
            escape_str(&json::shorten(&t.dtype_text, 40))
        ));
        return;
    };
    let Some(numel) = t.shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)) else {
        t.problems
            .push(format!("the element count of shape {} overflows", shape()));
        return;
    };
    let Some(bits) = numel.checked_mul(dtype.bits()) else {
        t.problems.push(format!(
            "the size of {} {} overflows",
            dtype.name(),
            shape()
        ));
        return;
    };
    if bits % 8 != 0 {
        t.problems.push(format!(
            "{} {} is {bits} bits, not a whole number of bytes",
            dtype.name(),
            shape()
        ));
        return;
    }
    let want = bits / 8;
    if t.placed() && t.end - t.begin != want {
        t.problems.push(format!(
            "size mismatch: {} {} needs {want} bytes, data_offsets [{}, {}] hold {}",
            dtype.name(),
            shape(),
            t.begin,
            t.end,
            t.end - t.begin
        ));
    }
}

/// Holes and overlaps between tensors (sorted by offsets, each must start
/// where the one before ended, the first at 0).
fn check_layout(lay: &mut SafetensorsHeader) {
    let start = lay.data_start();
    let mut order: Vec<usize> = (0..lay.tensors.len())
        .filter(|&i| lay.tensors[i].placed())
        .collect();
    order.sort_by_key(|&i| (lay.tensors[i].begin, lay.tensors[i].end));
    let mut cursor = 0u64;
    let mut last: Option<usize> = None;
    let mut chain_end: Option<u64> = None;
    let mut reports = 0usize;
    let mut report = |lay: &mut SafetensorsHeader, d: Damage| {
        if reports < MAX_REPORTS {
            lay.damage.push(d);
        }
        reports += 1;
    };
    for &i in &order {
        let (b, e) = (lay.tensors[i].begin, lay.tensors[i].end);
        let name = escape_str(&json::shorten(&lay.tensors[i].name, 200));
        if b > cursor {
            chain_end.get_or_insert(cursor);
            let r = Range::new(start.saturating_add(cursor), start.saturating_add(b));
            let what = match last {
                Some(p) => format!(
                    "{} bytes between tensors '{}' and '{name}' belong to no tensor",
                    b - cursor,
                    escape_str(&json::shorten(&lay.tensors[p].name, 200))
                ),
                None => format!("{b} bytes before the first tensor '{name}' belong to no tensor"),
            };
            report(lay, Damage::corrupt(r, format!("hole in the data: {what}")));
            lay.tensors[i].after_gap = true;
        } else if b < cursor {
            let p = last.expect("a tensor ended at the cursor");
            let pname = escape_str(&json::shorten(&lay.tensors[p].name, 200));
            let r = Range::new(
                start.saturating_add(b),
                start.saturating_add(e.min(cursor).max(b)),
            );
            report(
                lay,
                Damage::corrupt(
                    r,
                    format!(
                        "tensors '{pname}' and '{name}' overlap ('{pname}' ends at {cursor}, '{name}' begins at {b})"
                    ),
                ),
            );
            let msg = format!("overlaps tensor '{pname}'");
            lay.tensors[i].problems.push(msg);
            let msg = format!("overlaps tensor '{name}'");
            if !lay.tensors[p].problems.contains(&msg) {
                lay.tensors[p].problems.push(msg);
            }
        }
        if e >= cursor {
            cursor = e;
            last = Some(i);
        }
    }
    if reports > MAX_REPORTS {
        lay.damage.push(Damage::corrupt(
            lay.header,
            format!("{} more holes or overlaps", reports - MAX_REPORTS),
        ));
    }
    lay.data_end = cursor;
    lay.chain_end = chain_end.unwrap_or(cursor);
}

/// How much of a tensor's data is in the bytes available.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Presence {
    Intact,
    /// This many bytes present.
    Partial(u64),
    Missing,
}

fn presence(lay: &SafetensorsHeader, t: &Info, avail: u64) -> Presence {
    let r = lay.range_of(t);
    if r.end <= avail {
        Presence::Intact
    } else if r.start >= avail {
        Presence::Missing
    } else {
        Presence::Partial(avail - r.start)
    }
}

/// A tensor's status and what to say about it, with the bytes available now.
pub(crate) fn tensor_status(
    lay: &SafetensorsHeader,
    t: &Info,
    avail: u64,
    fin: bool,
) -> (Status, Option<String>) {
    let mut words: Vec<String> = t.problems.clone();
    let past = fin && t.after_gap && t.end > avail.saturating_sub(lay.data_start());
    if past {
        words.push(format!(
            "data_offsets [{}, {}] point past the end of the file's data section",
            t.begin, t.end
        ));
    }
    let missing = match presence(lay, t, avail) {
        Presence::Intact => None,
        Presence::Partial(k) => Some(format!("partial: {k} of {} bytes present", t.len())),
        Presence::Missing => Some(format!("missing: none of its {} bytes present", t.len())),
    };
    let status = if !words.is_empty() {
        Status::Corrupt
    } else if missing.is_some() {
        Status::Truncated
    } else {
        Status::Complete
    };
    if let Some(m) = missing {
        words.push(if fin { m } else { format!("{m} so far") });
    }
    (status, (!words.is_empty()).then(|| words.join("; ")))
}

/// Problems that depend on the file's length: cut-off data, trailing bytes.
pub(crate) fn data_damage(lay: &SafetensorsHeader, avail: u64, fin: bool) -> Vec<Damage> {
    let mut out = Vec::new();
    if !fin || lay.n.is_none() || lay.header.end > avail {
        return out;
    }
    let have = avail - lay.data_start();
    if have < lay.chain_end {
        out.push(Damage::truncated(
            Range::new(avail, avail),
            format!(
                "the file ends {} bytes before the end of the data section ({} of {} bytes present)",
                lay.chain_end - have,
                have,
                lay.chain_end
            ),
        ));
    }
    if have > lay.data_end {
        out.push(Damage::corrupt(
            Range::new(lay.data_start() + lay.data_end, avail),
            format!(
                "{} bytes after the last tensor belong to no tensor",
                have - lay.data_end
            ),
        ));
    }
    let mut n = 0;
    for t in &lay.tensors {
        let (st, detail) = tensor_status(lay, t, avail, fin);
        let name = escape_str(&json::shorten(&t.name, 200));
        let r = lay.range_of(t);
        let present = presence(lay, t, avail);
        if present != Presence::Intact && t.placed() {
            if n < MAX_REPORTS {
                let at = avail.clamp(r.start, r.end);
                let what = match present {
                    Presence::Partial(k) => format!(
                        "tensor '{name}' is partial: {k} of {} bytes present",
                        t.len()
                    ),
                    _ => format!(
                        "tensor '{name}' is missing: none of its {} bytes present",
                        t.len()
                    ),
                };
                let d = if st == Status::Corrupt {
                    Damage::corrupt(
                        Range::new(at, at),
                        format!("tensor '{name}': {}", detail.unwrap_or_default()),
                    )
                } else {
                    Damage::truncated(Range::new(at, at), what)
                };
                out.push(d);
            }
            n += 1;
        }
    }
    if n > MAX_REPORTS {
        out.push(Damage::truncated(
            Range::new(avail, avail),
            format!("{} more tensors partial or missing", n - MAX_REPORTS),
        ));
    }
    out
}

/// The node of a tensor.
fn tensor_node(lay: &SafetensorsHeader, t: &Info, avail: u64, fin: bool) -> Node {
    let r = lay.range_of(t);
    let mut node = Node::new("tensor", escape_str(&json::shorten(&t.name, 1000)), r)
        .text(t.summary())
        .lazy();
    let (st, detail) = tensor_status(lay, t, avail, fin);
    if let Some(detail) = detail
        && st != Status::Complete
    {
        let at = avail.clamp(r.start, r.end);
        node = node.damaged(Damage {
            status: st,
            range: if st == Status::Truncated {
                Range::new(at, at)
            } else {
                r
            },
            reason: detail,
            unknown: false,
        });
    }
    node
}

// ---------------------------------------------------------------------------
// the parser
// ---------------------------------------------------------------------------

enum State {
    /// Waiting for the header.
    Header,
    /// Listing tensors in data order; `next` is the next one in `order`.
    Tensors {
        lay: Box<SafetensorsHeader>,
        order: Vec<usize>,
        next: usize,
    },
    Done,
}

struct StParser {
    data: Data,
    state: State,
}

impl StParser {
    fn new(data: Data) -> StParser {
        StParser {
            data,
            state: State::Header,
        }
    }

    /// Whether the whole header can be read now.
    fn header_ready(&self) -> bool {
        let src = &*self.data;
        if src.is_final() {
            return true;
        }
        let mut b8 = [0u8; 8];
        if !matches!(read_exact_at(src, 0, &mut b8), Ok(true)) {
            return false;
        }
        let n = u64::from_le_bytes(b8);
        (2..=MAX_HEADER).contains(&n) && n + 8 <= src.available()
    }

    fn start(&mut self, cx: &mut StepCx) {
        let lay = read_layout(&*self.data);
        if let Some(n) = lay.n {
            let mut node = Node::new("u64", "header length", Range::new(0, 8)).uint(n);
            if let Some(d) = lay.damage.iter().find(|d| d.range == Range::new(0, 8)) {
                node = node.damaged(d.clone());
            }
            cx.push_node(node);
            let h = lay.header;
            let mut hn = Node::new("header", "header", h)
                .text(format!(
                    "{} bytes of JSON, {} tensors",
                    h.len(),
                    lay.tensors.len()
                ))
                .lazy();
            if let Some(d) = lay
                .damage
                .iter()
                .filter(|d| d.range != Range::new(0, 8) && !d.reason.starts_with("hole"))
                .max_by_key(|d| d.status)
            {
                hn = hn.damaged(d.clone());
            }
            cx.push_node(hn);
        }
        if let Some(m) = lay.metadata {
            cx.push_node(
                Node::new("metadata", "__metadata__", m)
                    .text(format!("{{{} entries}}", lay.metadata_count))
                    .lazy(),
            );
        }
        for b in &lay.broken {
            cx.push_node(
                Node::new("entry", escape_str(&json::shorten(&b.name, 1000)), b.member)
                    .text("unusable header entry")
                    .lazy()
                    .damaged(b.damage.clone()),
            );
        }
        for d in &lay.damage {
            cx.damage(d.clone());
        }
        let mut order: Vec<usize> = (0..lay.tensors.len()).collect();
        order.sort_by_key(|&i| {
            let t = &lay.tensors[i];
            (!t.placed(), t.begin, t.end)
        });
        self.state = State::Tensors {
            lay: Box::new(lay),
            order,
            next: 0,
        };
    }
}

impl Parser for StParser {
    fn step(&mut self, cx: &mut StepCx) -> Step {
        loop {
            match &mut self.state {
                State::Header => {
                    if !self.header_ready() {
                        return Step::Blocked;
                    }
                    self.start(cx);
                }
                State::Tensors { lay, order, next } => {
                    let src = &*self.data;
                    let (avail, fin) = src.extent();
                    let mut pushed = 0;
                    while *next < order.len() && pushed < 4096 {
                        let t = &lay.tensors[order[*next]];
                        if !fin && lay.range_of(t).end > avail {
                            cx.progress(avail, None);
                            return Step::Blocked;
                        }
                        cx.push_node(tensor_node(lay, t, avail, fin));
                        *next += 1;
                        pushed += 1;
                    }
                    if *next < order.len() {
                        return Step::Yield;
                    }
                    if !fin && avail < lay.data_start().saturating_add(lay.data_end) {
                        return Step::Blocked;
                    }
                    if !fin {
                        // Trailing bytes can only be judged at the end.
                        cx.progress(avail, None);
                        return Step::Blocked;
                    }
                    let start = lay.data_start();
                    let have = avail.saturating_sub(start);
                    if have > lay.data_end && lay.n.is_some() {
                        let r = Range::new(start + lay.data_end, avail);
                        cx.push_node(
                            Node::new("gap", "trailing bytes", r)
                                .uint(r.len())
                                .damaged(Damage::corrupt(r, "bytes after the last tensor")),
                        );
                    }
                    for d in data_damage(lay, avail, fin) {
                        cx.damage(d);
                    }
                    cx.progress(avail, Some(avail));
                    self.state = State::Done;
                    return Step::Done;
                }
                State::Done => return Step::Done,
            }
        }
    }
}

// ---------------------------------------------------------------------------
// loading and the tensor table
// ---------------------------------------------------------------------------

fn load(data: &dyn Source, node: &Node, opts: &crate::Options) -> Vec<Node> {
    match node.kind {
        "header" => json::children(data, node.range, 8, node.damage.as_deref()),
        "metadata" | "entry" => json::children(data, node.range, 8, node.damage.as_deref()),
        "tensor" => tensor_fields(data, node),
        _ => (json::FORMAT.load)(data, node, opts),
    }
}

/// A tensor's fields, pointing at their JSON in the header, and its data.
fn tensor_fields(data: &dyn Source, node: &Node) -> Vec<Node> {
    let lay = read_layout(data);
    let found = lay
        .tensors
        .iter()
        .filter(|t| escape_str(&json::shorten(&t.name, 1000)) == *node.name)
        .max_by_key(|t| lay.range_of(t) == node.range);
    let mut out = match found {
        Some(t) => json::children(data, t.member, 8, None),
        None => Vec::new(),
    };
    let mut d = Node::new("bytes", "data", node.range).uint(node.range.len());
    if let Some(dm) = &node.damage {
        d = d.damaged((**dm).clone());
    }
    out.push(d);
    out
}

/// The tensor table of a safetensors extraction.
pub(crate) fn tensors(tree: &Tree, ext: ExtId) -> Vec<Tensor> {
    let Some(e) = tree.get(ext) else {
        return Vec::new();
    };
    let src = &*e.data();
    let lay = read_layout(src);
    let (avail, fin) = src.extent();
    let mut order: Vec<&Info> = lay.tensors.iter().collect();
    order.sort_by_key(|t| (!t.placed(), t.begin, t.end));
    order
        .into_iter()
        .filter_map(|t| {
            let dtype = t.dtype?;
            let r = lay.range_of(t);
            let (status, detail) = tensor_status(&lay, t, avail, fin);
            Some(Tensor {
                name: t.name.clone(),
                dtype,
                shape: t.shape.clone(),
                stride: None,
                storage_offset: None,
                source: ext,
                offset: r.start,
                length: r.len(),
                status,
                detail,
                big_endian: false,
                encoding: crate::offer::tensor::Encoding::Raw,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::MemSource;

    /// (name, dtype, shape, begin, end) of one header entry.
    type Spec<'a> = (&'a str, &'a str, &'a [u64], u64, u64);

    /// A file from header entries and a data length.
    fn file(entries: &[Spec], data_len: usize) -> Vec<u8> {
        let mut h = String::from("{");
        for (i, (n, d, s, b, e)) in entries.iter().enumerate() {
            if i > 0 {
                h.push(',');
            }
            h.push_str(&format!(
                "\"{n}\":{{\"dtype\":\"{d}\",\"shape\":{s:?},\"data_offsets\":[{b},{e}]}}"
            ));
        }
        h.push('}');
        while !h.len().is_multiple_of(8) {
            h.push(' ');
        }
        let mut out = (h.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(h.as_bytes());
        out.extend((0..data_len).map(|i| i as u8));
        out
    }

    fn layout(bytes: Vec<u8>) -> (SafetensorsHeader, Vec<Damage>) {
        let src = MemSource::new(bytes);
        let lay = read_layout(&src);
        let mut d = lay.damage.clone();
        d.extend(data_damage(&lay, src.available(), true));
        (lay, d)
    }

    #[test]
    fn a_valid_file_has_no_damage() {
        let (lay, d) = layout(file(
            &[
                ("a", "F32", &[2, 3], 0, 24),
                ("b", "F4", &[4], 24, 26),
                ("c", "F6_E2M3", &[4], 26, 29),
                ("e", "BF16", &[0], 29, 29),
                ("s", "I64", &[], 29, 37),
            ],
            37,
        ));
        assert!(d.is_empty(), "{d:?}");
        assert_eq!(lay.tensors.len(), 5);
        assert_eq!(lay.data_end, 37);
    }

    #[test]
    fn each_problem_is_named() {
        let cases: &[(&[Spec], usize, &str)] = &[
            (
                &[("a", "F8_E4M3FN", &[1], 0, 1)],
                1,
                "unknown dtype 'F8_E4M3FN'",
            ),
            (
                &[("a", "F32", &[2], 0, 4)],
                4,
                "size mismatch: F32 [2] needs 8 bytes",
            ),
            (&[("a", "F4", &[3], 0, 2)], 2, "12 bits, not a whole number"),
            (&[("a", "U8", &[4], 4, 0)], 4, "end before they begin"),
            (&[("a", "U8", &[u64::MAX, 4], 0, 4)], 4, "overflows"),
            (
                &[("a", "U8", &[4], 0, 4), ("b", "U8", &[4], 2, 6)],
                6,
                "tensors 'a' and 'b' overlap",
            ),
            (
                &[("a", "U8", &[4], 0, 4), ("b", "U8", &[4], 8, 12)],
                12,
                "4 bytes between tensors 'a' and 'b' belong to no tensor",
            ),
            (
                &[("a", "U8", &[4], 0, 4)],
                7,
                "3 bytes after the last tensor",
            ),
            (
                &[("a", "U8", &[4], 0, 4), ("a", "U8", &[4], 4, 8)],
                8,
                "duplicate tensor name 'a'",
            ),
        ];
        for (entries, len, want) in cases {
            let (_, d) = layout(file(entries, *len));
            assert!(
                d.iter()
                    .any(|d| d.status == Status::Corrupt && d.reason.contains(want)),
                "{want}: {d:?}"
            );
        }
    }

    #[test]
    fn truncation_gives_each_tensor_its_status() {
        let bytes = file(
            &[
                ("a", "U8", &[4], 0, 4),
                ("b", "U8", &[4], 4, 8),
                ("c", "U8", &[4], 8, 12),
            ],
            12,
        );
        let cut = bytes.len() - 6;
        let src = MemSource::new(bytes[..cut].to_vec());
        let lay = read_layout(&src);
        let st: Vec<_> = lay
            .tensors
            .iter()
            .map(|t| presence(&lay, t, cut as u64))
            .collect();
        assert_eq!(
            st,
            [Presence::Intact, Presence::Partial(2), Presence::Missing]
        );
        let d = data_damage(&lay, cut as u64, true);
        assert!(
            d.iter()
                .any(|d| d.reason.contains("'b' is partial: 2 of 4"))
        );
        assert!(d.iter().any(|d| d.reason.contains("'c' is missing")));
    }

    #[test]
    fn a_damaged_length_is_recovered_from_the_json() {
        let mut bytes = file(&[("a", "U8", &[4], 0, 4)], 4);
        let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
        bytes[..8].copy_from_slice(&(n + 1_000_000_000).to_le_bytes());
        let (lay, d) = layout(bytes);
        assert!(lay.recovered);
        assert_eq!(lay.header.end, 8 + n);
        assert!(d[0].reason.contains("larger than"), "{d:?}");
        assert_eq!(d.len(), 1, "{d:?}");
    }
}
