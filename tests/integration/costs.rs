//! Small hostile inputs that ask for much time or memory (issue 32's
//! classes), made here by script: each run ends within the deadline every
//! run has ([`pparse`] fails a test past 60 s, in debug builds), with a heap
//! peak (`--io-stats`) bounded by the input's size plus a fixed allowance,
//! and with the exit status and message the damage calls for.

use std::path::{Path, PathBuf};

use crate::util::*;

/// The heap peak `--io-stats` printed at the end of `run`'s stderr.
fn heap_peak(run: &Run) -> u64 {
    let err = run.stderr_text();
    let line = err.lines().last().unwrap_or_default();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
        return v["io"]["heap_peak"].as_u64().expect("heap_peak");
    }
    let n = line
        .split("peak heap ")
        .nth(1)
        .unwrap_or_else(|| panic!("no heap peak in {err}"));
    n.trim_end_matches(" B").replace(',', "").parse().unwrap()
}

/// Runs `pparse CMD FILE ARGS --io-stats` and checks the heap peak stays
/// under `per_byte` times the file's size plus 32 MiB.
fn bounded(cmd: &str, file: &Path, args: &[&str], per_byte: u64) -> Run {
    let mut all: Vec<&std::ffi::OsStr> = vec![cmd.as_ref(), file.as_os_str()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    all.push("--io-stats".as_ref());
    let run = pparse(&all);
    let size = std::fs::metadata(file).unwrap().len();
    let peak = heap_peak(&run);
    assert!(
        peak <= per_byte * size + (32 << 20),
        "{cmd} {args:?} on {} ({size} B): heap peak {peak} B",
        file.display()
    );
    run
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A printed program whose one op has 240k operands or 240k results: names
/// are placed on their line from where the last one was, so the work is
/// linear (it was quadratic: 56 s on 960 KB).
#[test]
fn a_program_line_of_240k_names_costs_a_pass() {
    const N: usize = 240_000;
    let tmp = tempfile::tempdir().unwrap();
    let list = |f: &dyn Fn(usize) -> String| (0..N).map(f).collect::<Vec<_>>().join(", ");
    let op = |results: &str, name: &str, operands: &str| {
        format!("    ({results}) = \"{name}\" ({operands}) {{}} : () -> builtin.tensor<f32>\n")
    };
    let cases = [
        // One defined value used 240k times.
        (
            "uses.txt",
            format!(
                "{{\n{}{}}}\n",
                op("%0", "pd_op.full", ""),
                op("%1", "pd_op.concat", &list(&|_| "%0".into()))
            ),
            0,
        ),
        // 240k values used and never defined.
        (
            "undefined.txt",
            format!(
                "{{\n{}}}\n",
                op("%1", "pd_op.concat", &list(&|i| format!("%{}", i + 5)))
            ),
            N,
        ),
        // One value defined 240k times in one result list.
        (
            "redefined.txt",
            format!("{{\n{}}}\n", op(&list(&|_| "%0".into()), "pd_op.split", "")),
            N - 1,
        ),
    ];
    for (name, text, errors) in cases {
        let file = write(tmp.path(), name, text.as_bytes());
        for (cmd, args) in [
            ("ir", &[][..]),
            ("ir", &["--json"][..]),
            ("tree", &[][..]),
            ("nodes", &["--depth", "3"][..]),
        ] {
            let run = bounded(cmd, &file, args, 48);
            let err = run.stderr_text();
            if cmd == "ir" {
                let code = if errors > 0 { 1 } else { 0 };
                assert_eq!(run.code, code, "{name} {cmd} {args:?}: {err}");
            }
            if cmd == "ir" && args.is_empty() && errors > 0 {
                // The first errors are shown with their place, the rest
                // counted.
                let shown = parse_problem_count(&err);
                assert!(err.contains(&format!("{name}:2:")), "{name}: {err}");
                assert_eq!(shown, errors - 100, "{name}: {err}");
            }
        }
    }
}

/// The count in "N more errors not shown".
fn parse_problem_count(err: &str) -> usize {
    let at = err
        .find(" more errors not shown")
        .expect("a count of the rest");
    let digits: String = err[..at]
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.chars().rev().collect::<String>().parse().unwrap()
}

/// Bytes that decode as fixed-Huffman literals from every other bit
/// (alternating bits), ended by zeros so that every trial decode fails at
/// their end, written over deflate data in a gzip member and in a zip
/// entry. Every bit passes the finder's first test, and each was trial
/// decoded to the end of the run: 64 KB never ended. Now a trial decode
/// that fails marks the symbols it walked, candidates that fall into step
/// with it fail at once, and trial decoding has a budget per byte scanned.
#[test]
fn resync_bait_costs_a_scan() {
    use crate::bounds::{Member, zip_of};
    const BAIT: usize = 256 << 10;
    let mut rng = Rng::new(32);
    let mut data = vec![0u8; 400 << 10];
    rng.fill(&mut data);
    let bait = |body: &mut [u8], from: usize| {
        body[from..from + BAIT].fill(0x55);
        body[from + BAIT..from + BAIT + 64].fill(0);
    };
    let tmp = tempfile::tempdir().unwrap();
    // gzip: header, deflate, trailer.
    let mut gz = {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&data).unwrap();
        e.finish().unwrap()
    };
    bait(&mut gz, 4096);
    // zip: the one entry's data starts after its 30-byte header and name.
    let mut zip = zip_of(
        &[Member {
            name: "data.bin".into(),
            data: data.clone(),
            deflate: true,
        }],
        0,
    );
    bait(&mut zip, 30 + 8 + 4096);
    for (name, bytes) in [("bait.gz", gz), ("bait.zip", zip)] {
        let file = write(tmp.path(), name, &bytes);
        let run = bounded("tree", &file, &[], 8);
        let err = run.stderr_text();
        assert_eq!(run.code, 1, "{name}: {err}");
        assert!(err.contains("invalid deflate data"), "{name}: {err}");
    }
}

/// bzip2's classes: many tiny streams (each block opened a decoder sized
/// for 900 kB, 3.6 MB zeroed: 208 µs a stream), and block magics with
/// nothing after them (each one opened such a decoder, failed, and was a
/// lost range of its own: 200k of them took 41 s and 204 MB). A block is
/// now walked by hand before a decoder is opened: a fake fails there, and
/// a real small one is decoded there; fakes in a row are one lost range,
/// and clean streams in a row are grouped into lazy nodes.
#[test]
fn bzip2_tiny_streams_and_fake_blocks_cost_a_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let one = {
        let mut v = Vec::new();
        std::io::Read::read_to_end(
            &mut bzip2::read::BzEncoder::new(&b"x"[..], bzip2::Compression::best()),
            &mut v,
        )
        .unwrap();
        v
    };
    assert_eq!(one.len(), 37);
    let file = write(tmp.path(), "streams.bz2", &one.repeat(20_000));
    let run = bounded("tree", &file, &[], 16);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    // Clean streams are grouped 1,024 to a lazy node, rebuilt when opened.
    let run = pparse([
        "nodes".as_ref(),
        file.as_os_str(),
        "--depth".as_ref(),
        "1".as_ref(),
    ]);
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(out.contains("streams #1–#1024"), "{out}");
    assert_eq!(out.lines().filter(|l| l.contains("streams #")).count(), 19);
    let run = pparse([
        "nodes".as_ref(),
        file.as_os_str(),
        "--depth".as_ref(),
        "2".as_ref(),
    ]);
    let out = String::from_utf8_lossy(&run.stdout);
    assert!(out.contains("end of stream #1024 "), "{out}");
    let run = pparse(["cat".as_ref(), file.as_os_str(), "streams".as_ref()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert_eq!(run.stdout, vec![b'x'; 20_000]);

    let mut fake = b"BZh9".to_vec();
    for _ in 0..100_000 {
        fake.extend_from_slice(&[0x31, 0x41, 0x59, 0x26, 0x53, 0x59, 0, 0, 0, 0, 0]);
    }
    let file = write(tmp.path(), "fake.bz2", &fake);
    let run = bounded("tree", &file, &[], 16);
    let err = run.stderr_text();
    assert_eq!(run.code, 1, "{err}");
    assert!(
        err.contains("bzip2 blocks #1 to #99999 (99999 block magics from bit 32) do not decode"),
        "{err}"
    );
}
