//! `pparse pickle` and `pparse tensors`.

use std::io::{self, Write};

use super::common::{Fatal, Input, finish_output, open, report, resolve_final, wait};
use pparse::data::Range;
use pparse::extraction::Phase;
use pparse::node::Value;
use pparse::offer::pickle::{ListStyle, Verdict};
use pparse::report::pickle as pickle_report;
use pparse::status::Status;
use pparse::view::stepper::pickle_target;
use pparse::view::tensors;

/// `pickle`: the listing, and whether loading would import anything
/// outside the allowed set.
pub(super) fn pickle(
    input: &Input,
    path: &str,
    json: bool,
    style: ListStyle,
) -> Result<(Status, bool), Fatal> {
    let session = open(input)?;
    let id = resolve_final(&session, path)?;
    // The target's parse gives the pickles' ranges.
    wait(&session, |t| {
        pickle_target(t, id)
            .is_some_and(|p| !matches!(t.exts[p].phase, Phase::Parsing | Phase::Waiting))
            || session.is_finished()
    });
    session.cancel();
    let t = session.tree();
    let Some(target) = pickle_target(&t, id) else {
        return Err(Fatal::Absent(format!(
            "{} is not a pickle and holds no data.pkl",
            if path.is_empty() {
                t.root().display_name()
            } else {
                path.to_string()
            }
        )));
    };
    if target != id {
        say!("pparse: listing {}", t.path_of(target));
    }
    let e = &t.exts[target];
    let offer = pickle_report::offer(e)
        .ok_or_else(|| Fatal::Error(format!("{} offers no pickle", t.path_of(target))))?;
    let data = e.data();
    let ranges = pickle_report::ranges(e);
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 20, stdout.lock());
    let r = if json {
        let ranges: Vec<Range> = ranges.iter().map(|r| r.0).collect();
        (offer.list_json)(&*data, &ranges, &mut out)
    } else {
        (offer.list_text)(&*data, &ranges, style, &mut out).map(|_| ())
    };
    finish_output(r.and_then(|_| out.flush()))?;
    // What loading would import: said on stderr, so stdout stays pickletools'.
    let suspicious: Vec<(usize, Range)> = e
        .nodes
        .iter()
        .filter(|n| n.kind == "pickle")
        .enumerate()
        .filter(|(_, n)| matches!(&n.value, Some(Value::Str(s)) if s.contains("imports")))
        .map(|(i, n)| (i, n.range))
        .collect();
    let mut imports = false;
    for (i, r) in suspicious {
        for (name, verdict) in (offer.imports)(&*data, r) {
            if verdict != Verdict::Allowed {
                imports = true;
                say!(
                    "pparse: pickle #{i} imports {}: {}: {}",
                    pparse::name::escape_str(&name),
                    verdict.as_str(),
                    verdict.explain()
                );
            }
        }
    }
    Ok((report(&t, &[target]), imports))
}

pub(super) fn tensors(input: &Input, path: &str, json: bool) -> Result<Status, Fatal> {
    let session = open(input)?;
    let id = resolve_final(&session, path)?;
    wait(&session, |t| tensors::ready(t, id));
    session.cancel();
    let t = session.tree();
    let list = tensors::collect(&t, id);
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let r = if json {
        pparse::report::tensors::json(&t, &list, &mut out)
    } else {
        pparse::report::tensors::text(&t, &list, &mut out)
    };
    finish_output(r.and_then(|_| out.flush()))?;
    let mut worst = report(&t, &[id]);
    for x in &list {
        if x.status != Status::Complete {
            say!(
                "pparse: tensor {}: {}: {}",
                pparse::name::escape_str(&x.name),
                x.status,
                pparse::name::escape_str(x.detail.as_deref().unwrap_or_default())
            );
            worst = worst.max(x.status);
        }
    }
    if list.is_empty() {
        let label = if path.is_empty() {
            input.file.display().to_string()
        } else {
            path.to_string()
        };
        // Damage may be why none were found: then it is what the exit says.
        if worst == Status::Complete {
            return Err(Fatal::Absent(format!("{label}: no tensors found")));
        }
        say!("pparse: {label}: no tensors found");
    }
    Ok(worst)
}
