//! `pparse records`: the records of a `.wandb` log, damage and all.
//!
//! The log is read straight from its bytes, record by record, and written
//! as it is read: a listing of a multi-GB log starts at once and needs no
//! more memory than its largest record.

use std::io::{self, Write};
use std::path::Path;

use super::{Fatal, finish_output, open, report, resolve_final, wait};
use crate::data::{MmapSource, Source};
use crate::extraction::{ExtId, Phase, Tree};
use crate::parsers::wandb::{self, log};
use crate::status::Status;
use crate::view::records;

/// Bytes read between two releases of the pages read.
const RELEASE_EVERY: u64 = 16 << 20;

/// What to print.
pub struct Show<'a> {
    /// Record types to keep (none: all).
    pub types: &'a [String],
    pub verbose: bool,
    pub json: bool,
}

/// The `.wandb` extraction named by PATH, or the first below it.
fn log_target(t: &Tree, id: ExtId) -> Option<ExtId> {
    t.subtree(id)
        .into_iter()
        .find(|&x| t.exts[x].parser == Some("wandb"))
}

pub fn records(file: &Path, path: &str, show: &Show) -> Result<Status, Fatal> {
    // A log file itself is read straight from its mapping: no parse of the
    // tree runs beside the listing.
    if path.is_empty()
        && let Ok(src) = MmapSource::open(file)
    {
        let mut head = [0u8; 4];
        let n = crate::parsers::protobuf::wire::Bytes::read(&src as &dyn Source, 0, &mut head);
        let named = file
            .to_string_lossy()
            .to_ascii_lowercase()
            .ends_with(".wandb");
        if head[..n] == log::MAGIC[..4] || named {
            let label = file.display().to_string();
            return write_listing(&src, show, &label);
        }
    }
    let session = open(file)?;
    let id = resolve_final(&session, path)?;
    // Wait until the extraction (or one below it) is known to be a log.
    wait(&session, |t| {
        log_target(t, id).is_some_and(|x| t.exts[x].data.is_final())
            || t.subtree(id)
                .iter()
                .all(|&x| !matches!(t.exts[x].phase, Phase::Waiting | Phase::Parsing))
    });
    let (target, data, label) = {
        let t = session.tree();
        let Some(x) = log_target(&t, id) else {
            return Err(Fatal(format!(
                "{} is not a W&B log (.wandb): no records to list",
                if path.is_empty() {
                    file.display().to_string()
                } else {
                    path.to_string()
                }
            )));
        };
        let label = if x == 0 {
            t.exts[0].display_name()
        } else {
            t.path_of(x)
        };
        (x, t.exts[x].data.clone(), label)
    };
    // The records are read here; the tree's own parse is not needed.
    session.cancel();
    let worst = write_listing(&*data, show, &label)?;
    let t = session.tree();
    // The container's own damage (a truncated tar holding the log) counts too.
    let above = if id == target {
        Status::Complete
    } else {
        report(&t, &[id])
    };
    Ok(worst.max(above))
}

/// Lists the log in `src` on stdout, its damage on stderr.
fn write_listing(src: &dyn Source, show: &Show, label: &str) -> Result<Status, Fatal> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut damage = 0usize;
    let mut worst = Status::Complete;
    let r = list(src, show, &mut out, &mut |status, what| {
        damage += 1;
        worst = worst.max(status);
        if damage <= 50 {
            eprintln!("pparse: {label}: {what}");
        }
    });
    finish_output(r.and_then(|_| out.flush()))?;
    if damage > 50 {
        eprintln!("pparse: ... and {} more problems", damage - 50);
    }
    Ok(worst)
}

/// Writes the listing of the log in `src`; `bad` hears of each damage.
pub fn list(
    src: &dyn Source,
    show: &Show,
    out: &mut impl Write,
    bad: &mut dyn FnMut(Status, String),
) -> io::Result<()> {
    let mut head = [0u8; 7];
    let n = crate::parsers::protobuf::wire::Bytes::read(src, 0, &mut head);
    if let Err(e) = log::check_header(&head[..n]) {
        bad(Status::Corrupt, format!("corrupt at 0x0..0x7: {e}"));
    }
    let layout = log::detect(src);
    if layout == log::Layout::Shifted && !show.json {
        writeln!(out, "# layout: {}", layout.describe())?;
    }
    let desc = wandb::record_type();
    let mut buf = String::new();
    let mut records = log::Records::new(src, layout);
    let mut released = 0u64;
    while let Some(item) = records.next() {
        // Pages read are given back as the reading goes on: the resident
        // set stays small however long the log.
        let pos = records.reader.chunks.pos;
        if pos - released >= RELEASE_EVERY {
            src.release(released, pos);
            released = pos;
        }
        match item {
            log::Item::Record(chunks) => {
                let range = log::Item::Record(chunks.clone()).range();
                let payload = log::payload(src, &chunks);
                let rec = wandb::decode_with(&desc, payload, show.json);
                if let Err(e) = &rec.msg {
                    bad(
                        Status::Corrupt,
                        format!(
                            "corrupt at {range}: record does not decode as wandb_internal.Record: {e}"
                        ),
                    );
                }
                if !show.types.is_empty() && !show.types.contains(&rec.kind) {
                    continue;
                }
                if show.json {
                    // Written by hand to keep the documented key order.
                    buf.clear();
                    buf.push_str(&format!(
                        "{{\"number\":{},\"type\":{},\"offset\":{},\"data\":",
                        rec.number,
                        serde_json::Value::String(rec.kind.clone()),
                        range.start
                    ));
                    buf.push_str(if rec.msg.is_ok() { &rec.data } else { "null" });
                    buf.push('}');
                    writeln!(out, "{buf}")?;
                } else {
                    writeln!(out, "{:>7}  {:<12} {}", rec.number, rec.kind, rec.summary())?;
                    if show.verbose {
                        let full = records::full(&rec);
                        let text = serde_json::to_string_pretty(&full).unwrap_or_default();
                        for l in text.lines() {
                            writeln!(out, "         {l}")?;
                        }
                        writeln!(
                            out,
                            "         (bytes {range}, {} chunk{})",
                            chunks.len(),
                            if chunks.len() == 1 { "" } else { "s" }
                        )?;
                    }
                }
            }
            log::Item::Bad(b) => {
                let what = format!("{} at {}: {}", b.status, b.range, b.reason);
                if !show.json {
                    writeln!(out, "      !  {:<12} {what}", b.status.as_str())?;
                }
                bad(b.status, what);
            }
        }
    }
    Ok(())
}
