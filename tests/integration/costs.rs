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
    // The last line, or the one before a last message (`no tensors found`).
    let line = err
        .lines()
        .rev()
        .find(|l| l.contains("peak heap") || l.contains("heap_peak"))
        .unwrap_or_default();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
        return v["io"]["heap_peak"].as_u64().expect("heap_peak");
    }
    let n = line
        .split("peak heap ")
        .nth(1)
        .and_then(|n| n.split(" B").next())
        .unwrap_or_else(|| panic!("no heap peak in {err}"));
    n.replace(',', "").parse().unwrap()
}

/// Runs `pparse CMD FILE ARGS --io-stats --cache-size 8M` and checks the
/// heap peak stays under `per_byte` times the file's size plus 32 MiB.
fn bounded(cmd: &str, file: &Path, args: &[&str], per_byte: u64) -> Run {
    let mut all: Vec<&std::ffi::OsStr> = vec![cmd.as_ref(), file.as_os_str()];
    all.extend(args.iter().map(std::ffi::OsStr::new));
    // The chunk cache is a fixed allowance of its own (16 MiB by
    // default): kept small, it stays inside the one checked here.
    all.extend(["--io-stats", "--cache-size", "8M"].map(std::ffi::OsStr::new));
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

/// An `.npz` member whose v2 header is megabytes of `0,` (a 65 KB
/// deflated member): the header is refused past 4 MiB, and below that the
/// literal stops at a count of values, instead of one value object per
/// item (2 GB).
#[test]
fn an_npy_header_of_millions_of_values_is_bounded() {
    use crate::bounds::{Member, zip_of};
    let npy = |hlen: usize| {
        let mut text = b"{'descr': '<f4', 'fortran_order': False, 'shape': (".to_vec();
        while text.len() + 3 < hlen {
            text.extend(b"0,");
        }
        text.extend(b")}\n");
        text.resize(hlen, b' ');
        let mut b = b"\x93NUMPY\x02\x00".to_vec();
        b.extend((hlen as u32).to_le_bytes());
        b.extend(text);
        b
    };
    let tmp = tempfile::tempdir().unwrap();
    for (hlen, why) in [
        (64 << 20, "more than pparse reads"),
        ((4 << 20) - 64, "values in the header"),
    ] {
        let npz = zip_of(
            &[Member {
                name: "a.npy".into(),
                data: npy(hlen),
                deflate: true,
            }],
            0,
        );
        let file = write(tmp.path(), "a.npz", &npz);
        for (cmd, args) in [
            ("tree", &[][..]),
            ("tensors", &[][..]),
            ("nodes", &["a.npy", "--depth", "3"][..]),
        ] {
            // The member is deflated 1000:1; what bounds memory is the
            // header's limit, so the allowance is the fixed part.
            let run = bounded(cmd, &file, args, 0);
            let err = run.stderr_text();
            // `tensors` finds none, which is not an error of its own.
            if cmd != "tensors" {
                assert_eq!(run.code, 1, "{hlen} {cmd}: {err}");
            }
            if cmd == "tree" {
                assert!(err.contains(why), "{hlen} {cmd}: {err}");
            }
        }
    }
}

/// MessagePack nested 30,000 deep (30 KB): `nodes` prints at most 256
/// levels, says so, and costs neither stack nor memory nor indentation by
/// the depth asked for (it was 1.1 GB and 900 MB of text).
#[test]
fn a_deep_msgpack_prints_a_bounded_depth() {
    const DEPTH: usize = 30_000;
    let mut b = vec![0x91u8; DEPTH]; // fixarray of one element, nested
    b.push(0x01);
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "deep.msgpack", &b);
    for args in [
        &["--depth", "30000"][..],
        &["--depth", "100000", "--json"][..],
    ] {
        let run = bounded("nodes", &file, args, 64);
        let err = run.stderr_text();
        assert_eq!(run.code, 0, "{args:?}: {err}");
        assert!(err.contains("256 levels"), "{args:?}: {err}");
        assert!(
            run.stdout.len() < 1 << 20,
            "{args:?}: {} bytes of output",
            run.stdout.len()
        );
        // The extraction, then one node per level printed.
        let out = run.stdout_text();
        let nodes = if args.contains(&"--json") {
            out.matches("{\"name\":").count()
        } else {
            out.lines().count()
        };
        assert_eq!(nodes, 1 + 256, "{args:?}");
    }
}

/// MessagePack nested 2 MiB deep, gzipped (so every byte the walks read
/// is counted, as bytes served from the decoded stream's cache): printing
/// its 256 levels reads it a few times over when each level holds one
/// value, whose end is its container's (a chain of one-element arrays read
/// the input once per level: 28 s on 16 MiB). Two values a level (the
/// first one deep) still cost a walk of what is below each printed level,
/// at most 256 walks of the input.
#[test]
fn a_deep_msgpack_is_walked_once_per_printed_level_at_most() {
    const DEPTH: usize = 2 << 20;
    let tmp = tempfile::tempdir().unwrap();
    let chain = [vec![0x91u8; DEPTH], vec![0xc0]].concat();
    let pairs = [vec![0x92u8; DEPTH / 2], vec![0xc0], vec![0x00; DEPTH / 2]].concat();
    for (name, bytes, passes) in [("chain", &chain, 16), ("pairs", &pairs, 300)] {
        let file = write(tmp.path(), &format!("{name}.msgpack"), bytes);
        let gz = std::process::Command::new("gzip")
            .arg("-k")
            .arg(&file)
            .status()
            .unwrap();
        assert!(gz.success());
        let gz = file.with_extension("msgpack.gz");
        let inner = format!("{name}.msgpack");
        let run = pparse([
            "nodes".as_ref(),
            gz.as_os_str(),
            inner.as_ref(),
            "--json".as_ref(),
            "--depth".as_ref(),
            "300".as_ref(),
            "--io-stats".as_ref(),
        ]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr_text());
        let err = run.stderr_text();
        let io: serde_json::Value =
            serde_json::from_str(err.lines().last().unwrap()).unwrap_or_else(|_| panic!("{err}"));
        let served =
            io["io"]["from_cache"].as_u64().unwrap() + io["io"]["decoded"].as_u64().unwrap();
        let size = bytes.len() as u64;
        assert!(
            served <= passes * size,
            "{name}: {served} bytes read to print 256 levels of {size}"
        );
        assert!(err.contains("256 levels"), "{name}: {err}");
    }
}

/// A MessagePack str 16 of `s`.
fn str8(out: &mut Vec<u8>, s: &[u8]) {
    out.push(0xda);
    out.extend((s.len() as u16).to_be_bytes());
    out.extend(s);
}

/// A flax array (ext 1: shape, dtype name, data) of 8 bytes of float32.
fn array(out: &mut Vec<u8>, shape: &[u64]) {
    let mut p = vec![0x93, 0x90 + shape.len() as u8];
    for d in shape {
        p.push(0xcf);
        p.extend(d.to_be_bytes());
    }
    p.push(0xa7);
    p.extend(b"float32");
    p.extend([0xc4, 8]);
    p.extend([0u8; 8]);
    out.push(0xc7);
    out.push(p.len() as u8);
    out.push(1);
    out.extend(p);
}

/// Many tiny arrays under one path just short of the longest name kept
/// whole: each name would be 3.5 KiB for 40 bytes of array (100 MB of
/// names from 1 MB); past a budget of 8 bytes of names per byte of the
/// file, names keep 64 bytes at each end, so the names and the JSON stay a
/// bounded multiple of the file.
#[test]
fn flax_names_in_all_are_bounded_by_the_file() {
    const ARRAYS: usize = 30_000;
    // Three maps of one pair, each keyed by 1,000 bytes (keys are kept
    // whole to 1 KiB).
    let mut b = Vec::new();
    for _ in 0..3 {
        b.push(0x81);
        str8(&mut b, &[b'k'; 1000]);
    }
    b.push(0xdf);
    b.extend((ARRAYS as u32).to_be_bytes());
    for i in 0..ARRAYS {
        str8(&mut b, format!("a{i}").as_bytes());
        array(&mut b, &[2]);
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "many.msgpack", &b);
    let run = bounded("tensors", &file, &["--json"], 64);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).expect("JSON");
    let list = v
        .as_array()
        .or_else(|| v["tensors"].as_array())
        .expect("tensors");
    assert_eq!(list.len(), ARRAYS);
    let names: Vec<&str> = list.iter().map(|t| t["name"].as_str().unwrap()).collect();
    let total: usize = names.iter().map(|n| n.len()).sum();
    assert!(
        total as u64 <= 8 * b.len() as u64 + (1 << 20) + 200 * ARRAYS as u64,
        "{total} bytes of names from {} bytes",
        b.len()
    );
    // The first names are whole; every name stays unique and ends with
    // its own key.
    let k = "k".repeat(1000);
    assert_eq!(names[0], format!("{k}/{k}/{k}/a0"));
    assert!(names[ARRAYS - 1].len() < 300 && names[ARRAYS - 1].ends_with("/a29999"));
    let unique: std::collections::HashSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), ARRAYS);
    assert!(
        run.stdout.len() < 24 * b.len(),
        "{} bytes of JSON from {} bytes",
        run.stdout.len(),
        b.len()
    );
}

/// A flax checkpoint of deep maps keyed by long control-character names,
/// holding many tiny arrays: tensor names are shortened past 4 KiB (a
/// tensor owns its name; full names made `tensors --json` abort at a 4 GB
/// limit), and arrays whose element count overflows are corrupt, not
/// complete.
#[test]
fn flax_names_and_sizes_from_the_file_are_bounded() {
    const LEVELS: usize = 200;
    const ARRAYS: usize = 400;
    let key = vec![0x1bu8; 1000]; // ESC, escaped to 4 bytes each
    let mut b = Vec::new();
    for _ in 0..LEVELS {
        b.push(0x81); // map of one pair
        str8(&mut b, &key);
    }
    b.push(0xde);
    b.extend((ARRAYS as u16 + 1).to_be_bytes());
    for i in 0..ARRAYS {
        str8(&mut b, format!("a{i}").as_bytes());
        array(&mut b, &[2]);
    }
    str8(&mut b, b"huge");
    array(&mut b, &[1 << 63, 1 << 63, 4]);
    let tmp = tempfile::tempdir().unwrap();
    let file = write(tmp.path(), "deep.msgpack", &b);
    let run = bounded("tensors", &file, &["--json"], 64);
    let v: serde_json::Value = serde_json::from_slice(&run.stdout).expect("JSON");
    let list = v
        .as_array()
        .or_else(|| v["tensors"].as_array())
        .expect("tensors");
    assert_eq!(list.len(), ARRAYS + 1);
    for t in list {
        let name = t["name"].as_str().unwrap();
        assert!(name.len() < 5000, "a name of {} bytes", name.len());
    }
    let huge = list.last().unwrap();
    assert!(huge["name"].as_str().unwrap().ends_with("/huge"));
    assert_eq!(huge["status"], "corrupt", "{huge}");
    assert!(
        run.stdout.len() < 16 * b.len(),
        "{} bytes of JSON from {} bytes",
        run.stdout.len(),
        b.len()
    );
    assert_ne!(run.code, 0, "{}", run.stderr_text());
}

/// The peak resident memory `--io-stats --json` printed (it counts what
/// C decoders allocate, which the heap count does not).
fn rss_peak(run: &Run) -> u64 {
    let err = run.stderr_text();
    // The last line, or the one before a last message (`no tensors found`).
    let line = err
        .lines()
        .rev()
        .find(|l| l.contains("peak heap") || l.contains("heap_peak"))
        .unwrap_or_default();
    let v: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|_| panic!("{err}"));
    v["io"]["rss_peak"].as_u64().expect("rss_peak")
}

/// An xz file whose LZMA2 block declares a 4 GiB dictionary (its filter
/// properties byte set to 40, the block header's CRC made again): it is
/// decoded with the limit as its dictionary, so a bomb of zeros costs the
/// limit, not its size; the file stays complete. Where a match reaches
/// further back than the limit, the error says so and names the variable.
#[test]
fn an_xz_dictionary_is_decoded_within_the_limit() {
    let make = |data: &str, dict: &str| -> Vec<u8> {
        let script = format!(
            r#"
import lzma, sys, zlib, os
data = {data}
x = bytearray(lzma.compress(data, format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64,
    filters=[{{"id": lzma.FILTER_LZMA2, "preset": 6, "dict_size": {dict}}}]))
# the block header starts after the 12-byte stream header
size = (x[12] + 1) * 4
h = x[12:12 + size]
i = h.index(b"\x21\x01")  # LZMA2 filter id, one byte of properties
h[i + 2] = 40             # a 4 GiB dictionary
h[-4:] = zlib.crc32(bytes(h[:-4])).to_bytes(4, "little")
x[12:12 + size] = h
sys.stdout.buffer.write(bytes(x))
"#
        );
        python(&script)
    };
    let tmp = tempfile::tempdir().unwrap();
    // 256 MiB of zeros: a few KB of xz.
    let bomb = write(
        tmp.path(),
        "zeros.xz",
        &make("bytes(256 << 20)", "64 << 20"),
    );
    let run = pparse_env(
        [
            "tree".as_ref(),
            bomb.as_os_str(),
            "--io-stats".as_ref(),
            "--json".as_ref(),
            "--cache-size".as_ref(),
            "8M".as_ref(),
        ],
        &[("PPARSE_DECODER_MIB", "16")],
    );
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let rss = rss_peak(&run);
    assert!(rss < 160 << 20, "peak RSS {rss} B for a 16 MiB window");
    // Random bytes twice: the second copy matches 3 MiB back.
    let far = write(
        tmp.path(),
        "far.xz",
        &make("(lambda r: r + r)(os.urandom(3 << 20))", "8 << 20"),
    );
    let run = pparse_env(
        ["tree".as_ref(), far.as_os_str()],
        &[("PPARSE_DECODER_MIB", "1")],
    );
    let err = run.stderr_text();
    assert_eq!(run.code, 1, "{err}");
    assert!(err.contains("PPARSE_DECODER_MIB"), "{err}");
    assert!(err.contains("4.0 GiB"), "{err}");
    // With the default limit the same file is whole.
    let run = pparse(["tree".as_ref(), far.as_os_str()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
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

/// Soft damage (random bytes zlib decodes through) in a tar.gz of 20,000
/// small files: locating it walks the header chain once, scans past the
/// break block by block and decodes on from the next deflate block until
/// nothing copies the damage, so the whole parse decodes the stream about
/// twice, not once per member; and it is located (the members before it
/// complete).
#[test]
fn locating_soft_damage_costs_about_a_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let tar = tmp.path().join("many.tar");
    python(&format!(
        "import io, tarfile\n\
         with tarfile.open({:?}, 'w', format=tarfile.GNU_FORMAT) as t:\n\
         \x20   for i in range(20000):\n\
         \x20       b = (f'file {{i}}: ' + 'word%d ' % (i * 7919 % 1000) * (i % 40)).encode()\n\
         \x20       m = tarfile.TarInfo(f'd{{i % 50}}/f{{i}}.txt'); m.size = len(b)\n\
         \x20       t.addfile(m, io.BytesIO(b))\n",
        tar.display().to_string()
    ));
    let tar_len = std::fs::metadata(&tar).unwrap().len();
    let gz = std::process::Command::new("gzip")
        .args(["-6", "-n", "-c"])
        .arg(&tar)
        .output()
        .unwrap()
        .stdout;
    let original = inflate_whole(&gz, 10).unwrap().0.len() as i64;
    let mut rng = Rng::new(5);
    let bad = (0..400)
        .find_map(|_| {
            let mut g = gz.clone();
            let at = rng.range(g.len() as u64 / 3, g.len() as u64 * 2 / 3);
            overwrite(&mut g, at, 4096, &mut rng);
            let (out, _) = inflate_whole(&g, 10)?;
            ((out.len() as i64 - original).rem_euclid(512) != 0).then_some(g)
        })
        .expect("soft damage");
    let file = write(tmp.path(), "many.tar.gz", &bad);
    let run = pparse([
        "tree".as_ref(),
        file.as_os_str(),
        "--json".as_ref(),
        "--no-index".as_ref(),
        "--io-stats".as_ref(),
        "--cache-size".as_ref(),
        "8M".as_ref(),
    ]);
    let io = io_json(&run);
    let decoded = io["decoded"].as_u64().unwrap() + io["redecoded"].as_u64().unwrap();
    assert!(
        decoded <= 3 * tar_len,
        "decoded {decoded} B for a {tar_len} B tar: {io}"
    );
    let tree: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let members = tree["children"][0]["children"].as_array().unwrap();
    let complete = members.iter().filter(|m| m["status"] == "complete").count();
    eprintln!(
        "decoded {decoded} B for a {tar_len} B tar; {complete} of {} complete",
        members.len()
    );
    assert!(
        complete > 5000,
        "{complete} of {} members complete",
        members.len()
    );
}

/// 5,000 gzip members in a row (bgzip writes one per 64 KiB), of 1–2 KB
/// each: each member costs a read of about twice its own bytes (its
/// header, and its decoder's reads, which double from 512 bytes and end
/// past it), not of a megabyte after it (a look for the next member's magic, the longest
/// header a member may have, and 64 KiB of input for its decoder were read
/// at every member: 1.3 MB each).
#[test]
fn many_gzip_members_cost_a_read_of_each() {
    let tmp = tempfile::tempdir().unwrap();
    let mut file = Vec::new();
    let mut want = Vec::new();
    let mut rng = Rng::new(5);
    for i in 0..5_000 {
        let mut text = format!("member {i}:");
        while text.len() < 3_000 + i % 2_000 {
            text.push_str(&format!(" w{}", rng.below(3_000)));
        }
        let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut z, text.as_bytes()).unwrap();
        file.extend_from_slice(&z.finish().unwrap());
        want.extend_from_slice(text.as_bytes());
    }
    let f = write(tmp.path(), "members.gz", &file);
    let run = pparse([
        "tree".as_ref(),
        f.as_os_str(),
        "--no-index".as_ref(),
        "--io-stats".as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let read = io_json(&run)["file_read"].as_u64().unwrap();
    assert!(
        read <= 3 * file.len() as u64,
        "read {read} B of a {} B file",
        file.len()
    );
    let run = pparse(["cat".as_ref(), f.as_os_str(), "members".as_ref()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert!(run.stdout == want);
}
