//! Random reads through `pparse::fs`, timed: how long one read of SIZE
//! bytes at a random place in a random member takes (members weighted by
//! size, so "anywhere in the archive"). The benchmark of random access
//! through an index (peers/index.sh).
//!
//! ```text
//! cargo run --release --example random_reads -- FILE [READS] [SIZE] [INDEX|--no-index]
//! ```
//!
//! Prints the time to open (read back the index, or parse), then the mean,
//! median, 90th and 99th percentile and slowest read in milliseconds.

use std::process::ExitCode;
use std::time::Instant;

use pparse::Options;
use pparse::fs::{Fs, Kind};
use pparse::parsers::IndexMode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(file) = args.first() else {
        eprintln!("usage: random_reads FILE [READS] [SIZE] [INDEX|--no-index]");
        return ExitCode::from(2);
    };
    let reads: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200);
    let size: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(64 << 10);
    let index = match args.get(3).map(String::as_str) {
        None => IndexMode::Cache,
        Some("--no-index") => IndexMode::Off,
        Some(p) => IndexMode::At(p.into()),
    };
    let options = Options {
        index,
        ..Options::default()
    };
    let t0 = Instant::now();
    let fs = match Fs::with_options(file, options) {
        Ok(fs) => fs,
        Err(e) => {
            eprintln!("random_reads: {e}");
            return ExitCode::from(2);
        }
    };
    fs.session().wait();
    let opened = t0.elapsed();
    let files: Vec<(String, u64)> = match fs.list("", true) {
        Ok(v) => v
            .into_iter()
            .filter(|e| e.kind == Kind::File && !e.container && e.size > 0)
            .map(|e| (e.path, e.size))
            .collect(),
        Err(e) => {
            eprintln!("random_reads: {e}");
            return ExitCode::from(2);
        }
    };
    if files.is_empty() {
        eprintln!("random_reads: no files with bytes in {file}");
        return ExitCode::from(2);
    }
    let mut ends = Vec::with_capacity(files.len());
    let mut total = 0u64;
    for (_, s) in &files {
        total += s;
        ends.push(total);
    }
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut times = Vec::with_capacity(reads);
    let mut bytes = 0u64;
    for _ in 0..reads {
        let at = next() % total;
        let i = ends.partition_point(|&e| e <= at);
        let (path, len) = &files[i];
        let off = at - (ends[i] - len);
        let t = Instant::now();
        let got = fs
            .open(path)
            .map_err(std::io::Error::from)
            .and_then(|f| f.read_range(pparse::data::Range::new(off, off + size)));
        times.push(t.elapsed().as_secs_f64() * 1e3);
        match got {
            Ok(b) => bytes += b.len() as u64,
            Err(e) => {
                eprintln!("random_reads: {path} at {off}: {e}");
                return ExitCode::from(1);
            }
        }
    }
    times.sort_by(f64::total_cmp);
    let pct = |p: f64| times[((times.len() - 1) as f64 * p).round() as usize];
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    println!(
        "open {:.3} s (index: {}); {} reads of {} B ({} B read) in {} files: mean {:.2} ms, p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        opened.as_secs_f64(),
        fs.session().from_index(),
        reads,
        size,
        bytes,
        files.len(),
        mean,
        pct(0.5),
        pct(0.9),
        pct(0.99),
        pct(1.0)
    );
    ExitCode::SUCCESS
}
