//! `--io-stats`: what a run read, decoded and held.

use crate::util::thousands;

/// The most memory the process held at once (resident, from the kernel's
/// `VmHWM`): unlike the heap count it includes what C libraries (liblzma,
/// zstd, libbz2) allocate, and touched pages of mapped files. (`getrusage`
/// would also count the process that started this one, before `exec`.)
fn peak_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// `--io-stats`: one line of text, or one JSON object (docs/contract.md).
pub fn io_stats(s: &crate::data::stats::IoStats, json: bool) -> String {
    let budget = crate::data::ChunkCache::global().budget() as u64;
    let remote = crate::data::remote_stats();
    if json {
        let mut o = serde_json::json!({
            "file_read": s.file_read,
            "decoded": s.decoded,
            "redecoded": s.redecoded,
            "decoded_ahead": s.ahead,
            "from_cache": s.from_cache,
            "cache_budget": budget,
            "decode_seconds": s.decoding.as_secs_f64(),
            "wait_seconds": s.waiting.as_secs_f64(),
        });
        if s.heap_peak > 0 {
            o["heap_peak"] = s.heap_peak.into();
        }
        if let Some(rss) = peak_rss() {
            o["rss_peak"] = rss.into();
        }
        if remote.requests > 0 {
            o["remote_fetched"] = remote.bytes_fetched.into();
            o["remote_requests"] = remote.requests.into();
        }
        return serde_json::json!({ "io": o }).to_string();
    }
    let mut line = format!(
        "pparse: io: read {} B from the file; decoded {} B{}, re-decoded {} B from checkpoints; {} B from the cache (budget {}); decoding {:.3} s, waiting {:.3} s",
        thousands(s.file_read),
        thousands(s.decoded),
        match s.ahead {
            0 => String::new(),
            n => format!(" ({} B of it ahead, on other threads)", thousands(n)),
        },
        thousands(s.redecoded),
        thousands(s.from_cache),
        crate::util::human(budget),
        s.decoding.as_secs_f64(),
        s.waiting.as_secs_f64()
    );
    if s.heap_peak > 0 {
        line.push_str(&format!("; peak heap {} B", thousands(s.heap_peak)));
    }
    if let Some(rss) = peak_rss() {
        line.push_str(&format!("; peak RSS {} B", thousands(rss)));
    }
    if remote.requests > 0 {
        line.push_str(&format!(
            "; fetched {} B in {} requests",
            thousands(remote.bytes_fetched),
            thousands(remote.requests)
        ));
    }
    line
}
