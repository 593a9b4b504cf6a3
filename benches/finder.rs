//! Speed of the deflate block finder on bytes that hold no block, which is
//! where it looks at every bit (after damage, and between the split
//! points of parallel decoding).
//!
//! Two scans of the same 32 MiB of pseudo-random bytes, in memory:
//! * `Candidates`: dynamic-Huffman headers that pass every check zlib
//!   makes and stored blocks whose `LEN` is `!NLEN` — what parallel
//!   decoding looks for, and what rapidgzip's block finder looks for;
//! * `find_block`: the finder recovery runs after damage, which also
//!   looks for fixed-Huffman blocks (runs of 1,024 valid symbols) and
//!   trial-decodes every candidate.
//!
//! Run with `cargo bench --bench finder` (MIB=N for another size than
//! 32; best of three runs each);
//! `cargo test` skips it.

use std::sync::Arc;
use std::time::Instant;

use pparse::data::inflate::resync::{Candidates, Found, find_block};
use pparse::data::{Data, MemSource};

fn main() {
    // `cargo test --all-targets` runs bench targets too, without `--bench`.
    if !std::env::args().any(|a| a == "--bench") {
        println!("finder: run with `cargo bench --bench finder`");
        return;
    }
    let mib: usize = std::env::var("MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let n = mib << 20;
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let bytes: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    let data: Data = Arc::new(MemSource::new(bytes));
    let mb = n as f64 / 1e6;

    // Best of three: the machine may be busy.
    let best = |f: &dyn Fn() -> u64| {
        (0..3)
            .map(|_| {
                let t = Instant::now();
                let r = f();
                (t.elapsed().as_secs_f64(), r)
            })
            .fold((f64::MAX, 0), |a, b| if b.0 < a.0 { b } else { a })
    };
    let (s, found) = best(&|| {
        let mut c = Candidates::new();
        let (mut at, mut found) = (0, 0);
        while let Some(b) = c.next(&data, at, n as u64 * 8).unwrap() {
            found += 1;
            at = b + 1;
        }
        found
    });
    println!(
        "Candidates (dynamic and stored headers): {mib} MiB in {s:.2} s, {:.1} MB/s, {found} candidates",
        mb / s
    );
    let (s, _) = best(&|| {
        let f = find_block(&data, 0, n as u64, u64::MAX, &|_| false).unwrap();
        assert_eq!(f, Found::Nothing, "random bytes hold no block");
        0
    });
    println!(
        "find_block (also fixed-Huffman runs, trial decodes): {mib} MiB in {s:.2} s, {:.1} MB/s",
        mb / s
    );
}
