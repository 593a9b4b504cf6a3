//! The history of a W&B run log as metric series: the scan behind the
//! explorer's metrics panel, declared as this format's
//! [`crate::offer::MetricsScan`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::log;
use super::record::record_type;
use super::view as records;
use crate::data::{Range, Source};
use crate::offer::metrics::{MAX_NAMES, Scan, Series};
use crate::parsers::serial::protobuf::wire::Scanner;

/// Shortest time between two progress reports.
const REPORT_EVERY: Duration = Duration::from_millis(100);

/// Whether a record's payload has the `history` field (without decoding it).
fn has_field(payload: &[u8], number: u32) -> bool {
    let all = Range::new(0, payload.len() as u64);
    Scanner::new(payload, all)
        .map_while(Result::ok)
        .any(|f| f.number == number)
}

/// Reads the history of the log in `src`: the names, and the series of
/// `only`, or of every name while they hold at most `budget` buckets.
/// `None` when stopped.
pub fn scan(
    src: &dyn Source,
    only: Option<&str>,
    budget: usize,
    stop: &AtomicBool,
    progress: &dyn Fn(u64, u64),
) -> Option<Scan> {
    let layout = log::detect(src);
    let desc = record_type();
    let history_no = desc.get_field_by_name("history").map_or(2, |f| f.number());
    let total = src.available();
    let mut out = Scan::default();
    let mut counts: HashMap<String, u64> = HashMap::new();
    let mut every = only.is_none();
    let mut held = 0usize;
    let mut one = Series::default();
    let mut reported = Instant::now();
    for item in log::Records::new(src, layout) {
        if stop.load(Ordering::Acquire) {
            return None;
        }
        let chunks = match item {
            log::Item::Record(c) => c,
            log::Item::Damaged(_) => {
                out.damaged += 1;
                continue;
            }
        };
        out.records += 1;
        if reported.elapsed() >= REPORT_EVERY {
            reported = Instant::now();
            progress(chunks[chunks.len() - 1].range.end, total);
        }
        let payload = log::payload(src, &chunks);
        if !has_field(&payload, history_no) {
            continue;
        }
        let rec = super::record::decode(&payload);
        if rec.msg.is_err() {
            out.damaged += 1;
            continue;
        }
        if rec.kind != "history" {
            continue;
        }
        let index = out.history;
        out.history += 1;
        let data = records::data(&rec);
        let step = records::history_step(&data, index);
        for (name, v) in records::history_metrics(&data) {
            if let Some(c) = counts.get_mut(name) {
                *c += 1;
            } else if counts.len() < MAX_NAMES {
                counts.insert(name.to_string(), 1);
            } else {
                out.unlisted += 1;
                continue;
            }
            if only == Some(name) {
                one.push(step, v);
            } else if every {
                let s = out.series.entry(name.to_string()).or_default();
                let before = s.held();
                s.push(step, v);
                held = held - before + s.held();
                if held > budget {
                    every = false;
                    out.series = HashMap::new();
                }
            }
        }
    }
    progress(total, total);
    if let Some(name) = only {
        out.series.insert(name.to_string(), one);
    }
    for s in out.series.values_mut() {
        s.finish();
    }
    out.every_series = every;
    out.names = counts.into_iter().collect();
    out.names
        .sort_by(|a, b| (a.0.starts_with('_'), &a.0).cmp(&(b.0.starts_with('_'), &b.0)));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offer::metrics::SERIES_BUDGET;
    use std::sync::Arc;

    #[test]
    fn one_metric_or_all_of_them() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/wandb/v0175-legacy.wandb"
        );
        let bytes = std::fs::read(path).unwrap();
        let data: crate::data::Data = Arc::new(crate::data::MemSource::new(bytes));
        let stop = AtomicBool::new(false);
        let all = scan(&*data, None, SERIES_BUDGET, &stop, &|_, _| {}).unwrap();
        assert!(all.every_series);
        let names: Vec<&str> = all.names.iter().map(|n| n.0.as_str()).collect();
        assert_eq!(&names[..5], ["acc", "epoch", "grad/norm", "loss", "lr"]);
        assert_eq!(all.history, 121);
        let loss = &all.series["loss"];
        assert_eq!((loss.count, loss.steps), (120, Some((0.0, 119.0))));
        // Over the budget: names only; then one series at a time.
        let none = scan(&*data, None, 10, &stop, &|_, _| {}).unwrap();
        assert!(!none.every_series && none.series.is_empty());
        assert_eq!(none.names, all.names);
        let one = scan(&*data, Some("acc"), 0, &stop, &|_, _| {}).unwrap();
        assert_eq!(one.series.len(), 1);
        assert!((one.series["acc"].max - 119.0 / 120.0).abs() < 1e-12);
        // Stopped: nothing.
        stop.store(true, Ordering::Release);
        assert!(scan(&*data, None, SERIES_BUDGET, &stop, &|_, _| {}).is_none());
    }
}
