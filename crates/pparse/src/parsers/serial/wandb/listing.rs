//! `pparse records` for W&B logs: the records of a `.wandb` log, damage and
//! all, as text or JSON Lines, or counted per type. Declared as this
//! format's [`crate::offer::RecordsOffer`].
//!
//! The log is read straight from its bytes, record by record, and written
//! as it is read: a listing of a multi-GB log starts at once and needs no
//! more memory than its largest record.

use std::borrow::Cow;
use std::io::{self, Write};

use super::log;
use super::record::decode_with;
use super::view as records;
use crate::data::{Range, Source};
use crate::offer::{LogEntry, RecordQuery as Show};
use crate::parsers::serial::protobuf::json;
use crate::status::Status;

/// Payload bytes handed to a worker at once.
const BATCH_BYTES: u64 = 1 << 20;
/// Records or damages handed to a worker at once.
const BATCH_ITEMS: usize = 4096;

/// What one stretch of the log adds to the listing and to the damage report.
#[derive(Default)]
struct Piece {
    text: String,
    bad: Vec<(Status, String)>,
    /// Records per type (with `--count`).
    counts: Counts,
    /// The records and damage one by one (for [`each`]).
    entries: Vec<LogEntry>,
}

/// What the listing is made into.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    /// `pparse records`: text, JSON Lines or counts, as the query says.
    Listing,
    /// [`LogEntry`] values.
    Entries,
}

/// Records per type, in the order the types were first seen.
#[derive(Default)]
struct Counts(Vec<(Cow<'static, str>, u64)>);

impl Counts {
    fn add(&mut self, kind: Cow<'static, str>, n: u64) {
        match self.0.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, c)) => *c += n,
            None => self.0.push((kind, n)),
        }
    }

    /// `--count`'s output: most frequent type first.
    fn write(mut self, damage: usize, json: bool, out: &mut dyn Write) -> io::Result<()> {
        self.0
            .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let total: u64 = self.0.iter().map(|(_, n)| n).sum();
        if json {
            let types: serde_json::Map<String, serde_json::Value> = self
                .0
                .iter()
                .map(|(k, n)| (k.to_string(), (*n).into()))
                .collect();
            let v = serde_json::json!({"records": total, "types": types, "damage": damage});
            return writeln!(out, "{v}");
        }
        for (k, n) in &self.0 {
            writeln!(out, "{n:>10}  {k}")?;
        }
        writeln!(out, "{total:>10}  records")?;
        writeln!(out, "{damage:>10}  damaged spans")
    }
}

/// Writes the listing of the log in `src`; `bad` hears of each damage.
///
/// The chunk layer (CRCs, reassembly, resync) is read here, in order; the
/// records are decoded and formatted in batches by one worker per core,
/// and their text is written in file order.
pub fn list(
    src: &dyn Source,
    show: &Show,
    out: &mut dyn Write,
    bad: &mut dyn FnMut(Status, String),
) -> io::Result<()> {
    let mut counts = Counts::default();
    let mut damage = 0;
    drive(src, show, Form::Listing, &mut |p: Piece| {
        // The JSON of a record (`--json`, `--verbose`) holds its strings'
        // C1 controls as they are; they are escaped as the text's are.
        out.write_all(&crate::name::c1_escaped(p.text.as_bytes()))?;
        damage += p.bad.len();
        for (status, what) in p.bad {
            bad(status, what);
        }
        for (k, n) in p.counts.0 {
            counts.add(k, n);
        }
        Ok(())
    })?;
    if show.count {
        counts.write(damage, show.json, out)?;
    }
    Ok(())
}

/// Hands the records of the log in `src` (of the `types` asked, all when
/// none) and its damage to `take`, in file order and in batches of at most
/// a few thousand, until `take` returns `false`. Memory stays bounded by a
/// few batches however long the log.
pub fn each(src: &dyn Source, types: &[String], take: &mut dyn FnMut(Vec<LogEntry>) -> bool) {
    let show = Show {
        types,
        verbose: false,
        json: true,
        count: false,
    };
    let _ = drive(src, &show, Form::Entries, &mut |p: Piece| {
        if p.entries.is_empty() || take(p.entries) {
            Ok(())
        } else {
            Err(io::ErrorKind::BrokenPipe.into())
        }
    });
}

/// Reads the log in `src` and hands what it makes of each stretch to
/// `write`, in file order; stops at `write`'s first error.
fn drive(
    src: &dyn Source,
    show: &Show,
    form: Form,
    write: &mut dyn FnMut(Piece) -> io::Result<()>,
) -> io::Result<()> {
    let mut head = [0u8; 7];
    let n = crate::parsers::serial::protobuf::wire::Bytes::read(src, 0, &mut head);
    let mut first = Piece::default();
    if let Err(e) = log::check_header(&head[..n]) {
        let range = Range::new(0, 7);
        first
            .bad
            .push((Status::Corrupt, format!("corrupt at {range}: {e}")));
        if form == Form::Entries {
            first.entries.push(LogEntry::Damage {
                status: Status::Corrupt,
                range,
                reason: e,
            });
        }
    }
    let layout = log::detect(src);
    if layout == log::Framing::Shifted && !show.json && form == Form::Listing {
        first.text = format!("# layout: {}\n", layout.describe());
    }
    write(first)?;
    let mut records = log::Records::new(src, layout);
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    // The next batch of the log and where reading stopped after it.
    let mut next_batch = || {
        let mut items = Vec::new();
        let mut bytes = 0;
        while bytes < BATCH_BYTES && items.len() < BATCH_ITEMS {
            let Some(item) = records.next() else { break };
            bytes += item.range().len();
            items.push(item);
        }
        (items, records.reader.chunks.pos)
    };
    if workers == 1 {
        let mut released = 0;
        loop {
            let (items, pos) = next_batch();
            if items.is_empty() {
                return Ok(());
            }
            let mut p = Piece::default();
            for item in items {
                render(src, item, show, form, &mut p);
            }
            write(p)?;
            release(src, &mut released, pos);
        }
    }
    parallel(src, show, form, workers, &mut next_batch, write)
}

/// Reads batches with `next_batch`, has `workers` threads render them and
/// hands the pieces to `write` in file order.
fn parallel(
    src: &dyn Source,
    show: &Show,
    form: Form,
    workers: usize,
    next_batch: &mut dyn FnMut() -> (Vec<log::Item>, u64),
    write: &mut dyn FnMut(Piece) -> io::Result<()>,
) -> io::Result<()> {
    std::thread::scope(|s| {
        let (job_tx, job_rx) = crossbeam_channel::unbounded::<(u64, Vec<log::Item>)>();
        let (done_tx, done_rx) = crossbeam_channel::unbounded::<(u64, Piece)>();
        for _ in 0..workers {
            let (job_rx, done_tx) = (job_rx.clone(), done_tx.clone());
            s.spawn(move || {
                for (seq, items) in job_rx {
                    let mut p = Piece::default();
                    for item in items {
                        render(src, item, show, form, &mut p);
                    }
                    if done_tx.send((seq, p)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        // Batches sent and not yet written stay few: memory is bounded by
        // a few batches whatever the size of the log.
        let limit = 2 * workers as u64;
        let (mut sent, mut written) = (0u64, 0u64);
        let mut ends = std::collections::VecDeque::new();
        let mut waiting = std::collections::BTreeMap::new();
        let mut released = 0;
        let mut eof = false;
        loop {
            while !eof && sent - written < limit {
                let (items, pos) = next_batch();
                if items.is_empty() {
                    eof = true;
                    break;
                }
                ends.push_back(pos);
                let _ = job_tx.send((sent, items));
                sent += 1;
            }
            if written == sent {
                return Ok(());
            }
            let Ok((seq, p)) = done_rx.recv() else {
                return Ok(());
            };
            waiting.insert(seq, p);
            while let Some(p) = waiting.remove(&written) {
                write(p)?;
                written += 1;
                if let Some(pos) = ends.pop_front() {
                    release(src, &mut released, pos);
                }
            }
        }
        // Leaving the scope drops `job_tx`: the workers end.
    })
}

/// Gives back the pages read up to `pos` once enough of them pile up: the
/// resident set stays small however long the log.
fn release(src: &dyn Source, released: &mut u64, pos: u64) {
    if pos - *released >= crate::data::RELEASE_STEP {
        src.release(*released, pos);
        *released = pos;
    }
}

/// Formats one record or damage into `p`.
fn render(src: &dyn Source, item: log::Item, show: &Show, form: Form, p: &mut Piece) {
    let chunks = match item {
        log::Item::Record(chunks) => chunks,
        log::Item::Damaged(b) if form == Form::Entries => {
            p.entries.push(LogEntry::Damage {
                status: b.status,
                range: b.range,
                reason: b.reason,
            });
            return;
        }
        log::Item::Damaged(b) => {
            let what = format!("{} at {}: {}", b.status, b.range, b.reason);
            if !show.json && !show.count {
                p.text.push_str("      !  ");
                pad(&mut p.text, b.status.as_str(), 12);
                p.text.push(' ');
                p.text.push_str(&what);
                p.text.push('\n');
            }
            p.bad.push((b.status, what));
            return;
        }
    };
    let range = Range::new(chunks[0].range.start, chunks[chunks.len() - 1].range.end);
    let rec = decode_with(log::payload(src, &chunks), show.json);
    if let Err(e) = &rec.msg {
        let reason = format!("record does not decode as wandb_internal.Record: {e}");
        p.bad
            .push((Status::Corrupt, format!("corrupt at {range}: {reason}")));
        if form == Form::Entries {
            p.entries.push(LogEntry::Damage {
                status: Status::Corrupt,
                range,
                reason,
            });
            return;
        }
    }
    if !show.types.is_empty() && !show.types.iter().any(|t| *t == rec.kind) {
        return;
    }
    if form == Form::Entries {
        p.entries.push(LogEntry::Record {
            number: rec.number,
            kind: rec.kind.into_owned(),
            offset: range.start,
            data: rec.data,
        });
        return;
    }
    if show.count {
        p.counts.add(rec.kind.clone(), 1);
        return;
    }
    let mut num = itoa::Buffer::new();
    let t = &mut p.text;
    if show.json {
        // Written by hand to keep the documented key order.
        t.push_str("{\"number\":");
        t.push_str(num.format(rec.number));
        t.push_str(",\"type\":");
        json::string_lit(t, &rec.kind);
        t.push_str(",\"offset\":");
        t.push_str(num.format(range.start));
        t.push_str(",\"data\":");
        t.push_str(if rec.msg.is_ok() { &rec.data } else { "null" });
        t.push_str("}\n");
        return;
    }
    let n = num.format(rec.number);
    for _ in n.len()..7 {
        t.push(' ');
    }
    t.push_str(n);
    t.push_str("  ");
    pad(t, &rec.kind, 12);
    t.push(' ');
    rec.summary_into(t);
    t.push('\n');
    if show.verbose {
        let full = records::full(&rec);
        let text = serde_json::to_string_pretty(&full).unwrap_or_default();
        for l in text.lines() {
            t.push_str("         ");
            t.push_str(l);
            t.push('\n');
        }
        let s = if chunks.len() == 1 { "" } else { "s" };
        t.push_str(&format!(
            "         (bytes {range}, {} chunk{s})\n",
            chunks.len()
        ));
    }
}

/// `s` left-aligned in `width` columns.
fn pad(t: &mut String, s: &str, width: usize) {
    t.push_str(s);
    for _ in s.chars().count()..width {
        t.push(' ');
    }
}
