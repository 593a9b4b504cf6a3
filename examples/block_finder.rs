//! The deflate block finder's rate on bytes with no block start (random
//! bytes, as the damaged middle of a stream reads to it), in MB/s: the
//! figure issue 37 asks to bring near rapidgzip's (50 MB/s a core).
//!
//! ```text
//! cargo run --release --example block_finder -- [BYTES]
//! ```

use pparse::data::inflate::resync::{self, Found};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(8_000_000);
    // xorshift: the same bytes on every run.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let bytes: Vec<u8> = (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let src: pparse::data::Data = std::sync::Arc::new(pparse::data::MemSource::new(bytes));
    let started = std::time::Instant::now();
    let (mut bit, mut found) = (0u64, 0u32);
    loop {
        match resync::find_block(&src, bit, n as u64, 1 << 40, &|_| false) {
            Ok(Found::Block(b)) => {
                found += 1;
                bit = b + 1;
            }
            Ok(Found::Scanned(b)) => bit = b,
            Ok(Found::NeedInput(_) | Found::Nothing) => break,
            Err(e) => panic!("{e}"),
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{n} bytes in {secs:.3} s: {:.1} MB/s, {found} blocks found",
        n as f64 / secs / 1e6
    );
}
