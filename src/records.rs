//! `pparse records`: the records of a log (a W&B `.wandb`), damage and all.
//! The listing is the format's own (see [`pparse::offer::RecordsList`]); this
//! finds the log, runs it on stdout and reports damage on stderr.

use std::io::{self, Write};
use std::sync::Arc;

use super::common::{Fatal, Input, finish_output, map_file, open, report, resolve_final, wait};
use pparse::data::{Data, Source};
use pparse::extraction::EntryKind;
use pparse::offer::{RecordQuery, RecordsList, RecordsOffer};
use pparse::parsers::{self, Sniff};
use pparse::status::Status;

pub(super) fn records(input: &Input, path: &str, show: &RecordQuery) -> Result<Status, Fatal> {
    let file = input.file.as_path();
    // A log file itself is read straight from its mapping: no parse of the
    // tree runs beside the listing.
    if path.is_empty()
        && input.url().is_none()
        && let Ok(src) = map_file(input)
    {
        let data: Data = Arc::new(src);
        let head = parsers::api::head(&*data)
            .map_err(|e| Fatal::Error(format!("cannot read {}: {e}", file.display())))?;
        let name = file.to_string_lossy();
        let sniff = Sniff {
            head: &head,
            name: &name,
            data: &data,
            kind: &EntryKind::Root,
            file: Some(file),
            options: &input.options,
        };
        let offer = parsers::sniff(&sniff).and_then(|f| f.offers.records);
        if let Some(offer) = offer {
            check_types(&offer, show)?;
            let label = file.display().to_string();
            return write_listing(offer.list, &*data, show, &label);
        }
    }
    let session = open(input)?;
    let id = resolve_final(&session, path)?;
    // Wait until the extraction (or one below it) is known to be a log.
    wait(&session, |t| pparse::view::records::ready(t, id));
    let (target, list, data, label) = {
        let t = session.tree();
        let Some((x, offer)) = pparse::view::records::log_target(&t, id) else {
            return Err(Fatal::Absent(format!(
                "{} is not a W&B log (.wandb): no records to list",
                if path.is_empty() {
                    file.display().to_string()
                } else {
                    path.to_string()
                }
            )));
        };
        check_types(&offer, show)?;
        let label = if x == 0 {
            t.exts[0].display_name()
        } else {
            t.path_of(x)
        };
        (x, offer.list, t.exts[x].data(), label)
    };
    // The records are read here; the tree's own parse is not needed.
    session.cancel();
    let worst = write_listing(list, &*data, show, &label)?;
    let t = session.tree();
    // The container's own damage (a truncated tar holding the log) counts too.
    let above = if id == target {
        Status::Complete
    } else {
        report(&t, &[id])
    };
    Ok(worst.max(above))
}

/// A `--type` the log's format cannot have is a usage error that names
/// the ones it can.
fn check_types(offer: &RecordsOffer, show: &RecordQuery) -> Result<(), Fatal> {
    let unknown: Vec<&str> = show
        .types
        .iter()
        .map(String::as_str)
        .filter(|t| !(offer.types.known)(t))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(Fatal::Error(format!(
        "--type {}: no such record type; the types are {} (and #N for a type newer than the schema)",
        unknown
            .iter()
            .map(|t| pparse::name::escape_str(t))
            .collect::<Vec<_>>()
            .join(", "),
        (offer.types.named)().join(", ")
    )))
}

/// Lists the log in `src` on stdout, its damage on stderr.
fn write_listing(
    list: RecordsList,
    src: &dyn Source,
    show: &RecordQuery,
    label: &str,
) -> Result<Status, Fatal> {
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut damage = 0usize;
    let mut worst = Status::Complete;
    let r = list(src, show, &mut out, &mut |status, what| {
        damage += 1;
        worst = worst.max(status);
        if damage <= 50 {
            say!("pparse: {label}: {what}");
        }
    });
    finish_output(r.and_then(|_| out.flush()))?;
    if damage > 50 {
        say!("pparse: ... and {} more problems", damage - 50);
    }
    Ok(worst)
}
