//! Persistent indexes: a second command reads the tree and the gzip
//! checkpoints from the index the first one wrote, and gives the same
//! answers; a changed file, a damaged or foreign index is never trusted.
//!
//! The archives are made by GNU tar and gzip (the big one at test time);
//! the bytes read through an index are compared with the files they were
//! made from and with a parse that uses no index.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use pparse::Options;
use pparse::data::Range;
use pparse::fs::{Fs, Kind};
use pparse::parsers::IndexMode;

use crate::util::*;

fn at(index: &Path) -> Options {
    Options {
        index: IndexMode::At(index.to_path_buf()),
        ..Options::default()
    }
}

/// What one file below the root is: PATH, status, time, mode, bytes.
type Content = (String, pparse::Status, Option<i64>, Option<u32>, Vec<u8>);

/// Every file below the root, read through `fs`.
fn contents(fs: &Fs) -> Vec<Content> {
    let mut out = Vec::new();
    for e in fs.list("", true).unwrap() {
        if e.kind != Kind::File || e.container {
            continue;
        }
        let mut bytes = Vec::new();
        fs.open(&e.path).unwrap().read_to_end(&mut bytes).unwrap();
        out.push((e.path, e.status, e.mtime, e.mode, bytes));
    }
    out
}

/// A tar.gz of `files` text-like and random files made by GNU tar and
/// gzip, big enough for several checkpoints; returns it and its sources.
fn big_archive(dir: &Path, files: usize, size: usize) -> (PathBuf, PathBuf) {
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let mut rng = Rng::new(7);
    let words = [
        "tensor ",
        "layer ",
        "weight ",
        "gradient ",
        "epoch ",
        "batch ",
        "loss\n",
        "0.125 ",
        "attention ",
        "bias ",
    ];
    for i in 0..files {
        let mut body = Vec::with_capacity(size);
        if i % 5 == 4 {
            body.resize(size / 4, 0);
            rng.fill(&mut body);
        } else {
            while body.len() < size {
                body.extend_from_slice(words[rng.below(words.len() as u64) as usize].as_bytes());
            }
        }
        let name = if i % 3 == 0 {
            format!("sub/f{i:03}.txt")
        } else {
            format!("f{i:03}.txt")
        };
        std::fs::write(src.join(name), &body).unwrap();
    }
    let tar = dir.join("big.tar.gz");
    tar_gz(&src, &tar);
    (tar, src)
}

/// `src`'s files as a tar.gz made by GNU tar and gzip -6.
fn tar_gz(src: &Path, tar: &Path) {
    assert!(
        tar_with(src, tar, "gzip -6"),
        "GNU tar and gzip are needed to make the archive"
    );
}

/// `src`'s files as a tar made by GNU tar, piped through `compress`;
/// false when that fails (the compressor is missing).
fn tar_with(src: &Path, tar: &Path, compress: &str) -> bool {
    Command::new("bash")
        .arg("-c")
        .arg(format!(
            "set -o pipefail; tar -C {} --sort=name -cf - . | {compress} > {}",
            src.display(),
            tar.display()
        ))
        .status()
        .is_ok_and(|s| s.success())
}

/// Text and noise, 8 files of 2–3 MB: deflate's stored blocks and
/// dynamic ones, and blocks of every compressor.
fn mixed_files(src: &Path) {
    std::fs::create_dir_all(src).unwrap();
    let mut rng = Rng::new(37);
    for i in 0..8 {
        let mut body = Vec::new();
        if i % 2 == 0 {
            body.resize(3_000_000, 0);
            rng.fill(&mut body);
        } else {
            while body.len() < 2_000_000 {
                let w = rng.below(5000);
                body.extend_from_slice(format!("w{w} ").as_bytes());
            }
        }
        std::fs::write(src.join(format!("f{i}")), &body).unwrap();
    }
}

/// Decoding with `--threads 1` and `--threads 2` gives the same tree, the
/// same index file byte for byte and the same bytes of the last member;
/// and with two, the workers decoded more than a third of it.
fn same_with_threads(tmp: &Path, tar: &Path, src: &Path) {
    let t = tar.to_str().unwrap();
    let name = tar.file_name().unwrap().to_str().unwrap();
    let run = |threads: &str| {
        let i = tmp.join(format!("{name}.{threads}.pidx"));
        let r = pparse([
            "tree",
            "--threads",
            threads,
            t,
            "--index",
            i.to_str().unwrap(),
            "--io-stats",
            "--json",
        ]);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr_text());
        (r.stdout.clone(), io_json(&r), std::fs::read(i).unwrap())
    };
    let (tree1, io1, index1) = run("1");
    let (tree2, io2, index2) = run("2");
    assert!(tree1 == tree2, "{name}: the trees differ");
    assert!(index1 == index2, "{name}: the index files differ");
    assert_eq!(io1["decoded_ahead"], 0, "{name}: {io1}");
    let (decoded, ahead) = (
        io2["decoded"].as_u64().unwrap(),
        io2["decoded_ahead"].as_u64().unwrap(),
    );
    assert_eq!(decoded, io1["decoded"].as_u64().unwrap(), "{name}");
    // The first piece or block is the first pass's own, and it decodes
    // others itself when it gets there first: the workers' part is still
    // most of the rest.
    assert!(ahead > decoded / 3, "{name}: {io2}");
    let want = std::fs::read(src.join("f7")).unwrap();
    let stem = name.rsplit_once('.').unwrap().0;
    for threads in ["1", "2"] {
        let member = format!("{stem}/./f7");
        let r = pparse(["cat", "--threads", threads, "--no-index", t, &member]);
        assert_eq!(r.code, 0, "{name}: {}", r.stderr_text());
        assert!(r.stdout == want, "{name}: cat with {threads} threads");
    }
}

/// Damaged copies of `tar` (a flipped byte, 4 KiB of zeros, a cut, in
/// a middle block) give the same tree, damage reports and exit code with
/// one thread and two: blocks planned across the damage are never taken.
fn damaged_same_with_threads(tmp: &Path, tar: &Path) {
    let whole = std::fs::read(tar).unwrap();
    let n = whole.len();
    let name = tar.file_name().unwrap().to_str().unwrap();
    let mut flip = whole.clone();
    flip[n * 2 / 5] ^= 0x10;
    let mut zeros = whole.clone();
    zeros[n * 3 / 5..n * 3 / 5 + 4096].fill(0);
    let cut = whole[..n * 7 / 10].to_vec();
    for (how, bytes) in [("flip", flip), ("zeros", zeros), ("cut", cut)] {
        let f = tmp.join(format!("{how}-{name}"));
        std::fs::write(&f, bytes).unwrap();
        let tree = |threads: &str| {
            let r = pparse([
                "tree",
                "--threads",
                threads,
                "--no-index",
                f.to_str().unwrap(),
            ]);
            (r.code, r.stdout.clone(), r.stderr_text())
        };
        let (one, two) = (tree("1"), tree("2"));
        assert!(
            one == two,
            "{how} {name}: 1 thread {one:?}\n2 threads {two:?}"
        );
        assert_ne!(one.0, 0, "{how} {name}: the damage is reported");
    }
}

/// Decoding on several threads (`--threads`) changes nothing but the
/// time: one gzip stream cut into pieces.
#[test]
fn threads_give_the_tree_index_and_bytes_of_one_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    mixed_files(&src);
    // 15 MB of gzip: the three pieces of 4 MiB that workers need.
    let tar = tmp.path().join("t.tar.gz");
    tar_gz(&src, &tar);
    assert!(std::fs::metadata(&tar).unwrap().len() > 13 << 20);
    same_with_threads(tmp.path(), &tar, &src);
}

/// The same for the formats of independent blocks, decoded a block per
/// worker: bzip2 blocks (bzip2's and lbzip2's, and pbzip2's stream per
/// block), xz blocks (xz -T2), zstd frames (pzstd) and BGZF's gzip
/// members (bgzip).
#[test]
fn threads_decode_blocks_frames_and_streams_as_one_thread_does() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    mixed_files(&src);
    let writers = [
        ("bzip2.tar.bz2", "bzip2 -9", true),
        ("lbzip2.tar.bz2", "lbzip2 -n 2", false),
        ("pbzip2.tar.bz2", "pbzip2 -p2 -c", false),
        ("xz.tar.xz", "xz -T2 --block-size=1MiB -3", true),
        ("pzstd.tar.zst", "pzstd -p 2 -3 -c", false),
        ("bgzip.tar.gz", "bgzip -c", false),
    ];
    let mut missing = Vec::new();
    for (name, compress, required) in writers {
        let tar = tmp.path().join(name);
        if !tar_with(&src, &tar, compress) {
            assert!(!required, "{compress} is needed");
            missing.push(compress);
            continue;
        }
        same_with_threads(tmp.path(), &tar, &src);
        damaged_same_with_threads(tmp.path(), &tar);
    }
    if !missing.is_empty() {
        eprintln!("not installed, not checked: {missing:?}");
    }
}

/// The files the index tests index: archives and compressed streams of
/// every kind, and damaged copies (written into `tmp`).
fn indexed_files(tmp: &Path) -> Vec<PathBuf> {
    let cut = tmp.join("cut.tar.gz");
    let whole = fixture("nested.tar.gz");
    std::fs::write(&cut, &whole[..whole.len() * 3 / 5]).unwrap();
    let mut files: Vec<PathBuf> = [
        "nested.tar.gz",
        "many-gnu.tar.gz",
        "multi.gz",
        "dd.zip",
        "nested_stored.zip",
        "named.tar.gz",
        "methods.zip",
        "zip64.zip",
        "compress/nested.tar.bz2",
        "compress/nested.tar.xz",
        "compress/nested.tar.zst",
        "compress/zip-zstd-xz.zip",
    ]
    .iter()
    .map(|f| fixture_path(f))
    .collect();
    files.push(cut);
    // A cut .tar.xz and a .tar.bz2 with a block lost: their partial
    // streams are indexed too.
    let cut_xz = tmp.join("cut.tar.xz");
    let xz = fixture("compress/nested.tar.xz");
    std::fs::write(&cut_xz, &xz[..xz.len() * 3 / 5]).unwrap();
    files.push(cut_xz);
    let hole_bz2 = tmp.join("hole.tar.bz2");
    let mut bz2 = fixture("compress/nested.tar.bz2");
    bz2[60_000..64_096].fill(0x55);
    std::fs::write(&hole_bz2, &bz2).unwrap();
    files.push(hole_bz2);
    files
}

/// A session opened from an index opens members from the index's records
/// in place, without building its tree (what keeps N DataLoader workers
/// at one copy of the index in the page cache), and `stat` and `open`
/// answer for every extraction what they answer over a parse: the same
/// entry, bytes, status and damage.
#[test]
fn members_are_served_from_the_index_records_as_from_a_parse() {
    let tmp = tempfile::tempdir().unwrap();
    let mut files = indexed_files(tmp.path());
    files.extend(
        [
            "hostile.tar",
            "hostile.zip",
            "gnu.tar",
            "pax.tar",
            "base256.tar",
        ]
        .map(fixture_path),
    );
    // Members of one name, listed as `lnk2~1`, `link~1/x`.
    let (_links, dup, under) = link_tars();
    files.extend([dup, under]);
    for (i, file) in files.iter().enumerate() {
        let f = file.display();
        let index = tmp.path().join(format!("{i}.pidx"));
        let parsed = Fs::with_options(file, Options::default()).unwrap();
        parsed.session().wait();
        Fs::with_options(file, at(&index)).unwrap().session().wait();
        let fs = Fs::with_options(file, at(&index)).unwrap();
        assert!(fs.session().from_index(), "{f}: not opened from its index");
        let (paths, contents): (Vec<String>, Vec<String>) = {
            let t = parsed.session().tree();
            let all: Vec<String> = (1..t.len()).map(|id| t.path_of(id)).collect();
            let files = (1..t.len())
                .filter(|&id| {
                    t.exts[id].kind.has_content() && t.resolve(&t.path_of(id)) == Some(id)
                })
                .map(|id| t.path_of(id))
                .collect();
            (all, files)
        };
        let same = |p: &str| match (parsed.open(p), fs.open(p)) {
            (Ok(a), Ok(b)) => {
                assert_eq!(
                    (a.len(), a.status(), a.damage()),
                    (b.len(), b.status(), b.damage()),
                    "{f}: {p}"
                );
                let whole = Range::new(0, a.len().min(8 << 20));
                assert_eq!(
                    a.read_range(whole).ok(),
                    b.read_range(whole).ok(),
                    "{f}: {p}"
                );
            }
            (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{f}: {p}"),
            (a, b) => panic!("{f}: {p}: {:?} against {:?}", a.err(), b.err()),
        };
        // Members with bytes open without a tree.
        for p in &contents {
            same(p);
        }
        assert!(
            !fs.session().tree_is_built() || contents.is_empty(),
            "{f}: opening members built the tree"
        );
        for p in &paths {
            assert_eq!(
                format!("{:?}", parsed.stat(p)),
                format!("{:?}", fs.stat(p)),
                "{f}: stat {p}"
            );
            same(p);
        }
    }
}

#[test]
fn an_index_gives_the_same_tree_and_bytes_as_a_parse() {
    let tmp = tempfile::tempdir().unwrap();
    let files = indexed_files(tmp.path());
    for (i, file) in files.iter().enumerate() {
        let index = tmp.path().join(format!("{i}.pidx"));
        let idx = index.to_str().unwrap();
        let f = file.to_str().unwrap();
        let plain = pparse(["tree", "--json", f, "--no-index"]);
        let first = pparse(["tree", "--json", f, "--index", idx]);
        assert!(index.exists(), "{f}: no index written");
        let second = pparse(["tree", "--json", f, "--index", idx]);
        for run in [&first, &second] {
            assert_eq!(run.stdout_text(), plain.stdout_text(), "{f}");
            assert_eq!(run.stderr_text(), plain.stderr_text(), "{f}");
            assert_eq!(run.code, plain.code, "{f}");
        }
        let text = pparse(["tree", f, "--index", idx]);
        assert_eq!(text.stdout, pparse(["tree", f, "--no-index"]).stdout);
        // The library reads the index the command wrote (same sources,
        // same parsers): every file's bytes and status.
        let reference = contents(&Fs::with_options(file, Options::default()).unwrap());
        let fs = Fs::with_options(file, at(&index)).unwrap();
        assert!(fs.session().from_index(), "{f}: not opened from its index");
        assert_eq!(contents(&fs), reference, "{f}");
    }
}

#[test]
fn cat_and_extract_read_through_the_index() {
    let tmp = tempfile::tempdir().unwrap();
    let (tar, src) = big_archive(tmp.path(), 40, 300_000);
    let t = tar.to_str().unwrap();
    let index = tmp.path().join("big.pidx");
    let idx = index.to_str().unwrap();
    let listing = pparse(["tree", t, "--index", idx]);
    assert_eq!(listing.code, 0, "{}", listing.stderr_text());
    for name in ["f038.txt", "sub/f039.txt", "f001.txt", "sub/f000.txt"] {
        let run = pparse(["cat", t, &format!("big.tar/./{name}"), "--index", idx]);
        assert_eq!(run.code, 0, "{name}: {}", run.stderr_text());
        assert!(
            run.stdout == std::fs::read(src.join(name)).unwrap(),
            "{name}"
        );
    }
    let out = tmp.path().join("out");
    let run = pparse(["extract", t, "--out", out.to_str().unwrap(), "--index", idx]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let mut n = 0;
    for e in walk(&src) {
        let rel = e.strip_prefix(&src).unwrap();
        let got = std::fs::read(out.join("big.tar").join(rel)).unwrap();
        assert!(got == std::fs::read(&e).unwrap(), "{}", rel.display());
        n += 1;
    }
    assert_eq!(n, 40);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn random_reads_resume_at_saved_checkpoints() {
    let tmp = tempfile::tempdir().unwrap();
    let (tar, src) = big_archive(tmp.path(), 60, 400_000);
    let index = tmp.path().join("big.pidx");
    let decoded = {
        let fs = Fs::with_options(&tar, at(&index)).unwrap();
        assert!(!fs.session().from_index());
        fs.session().wait();
        fs.stat("big.tar").unwrap().size
    };
    let size = std::fs::metadata(&index).unwrap().len();
    assert!(
        size * 100 <= decoded,
        "index of {size} bytes for {decoded} decoded bytes is over 1%"
    );
    let fs = Fs::with_options(&tar, at(&index)).unwrap();
    assert!(fs.session().from_index());
    let files = walk(&src);
    let mut rng = Rng::new(11);
    for _ in 0..200 {
        let file = &files[rng.below(files.len() as u64) as usize];
        let want = std::fs::read(file).unwrap();
        let rel = file.strip_prefix(&src).unwrap().to_str().unwrap();
        let f = fs.open(&format!("big.tar/./{rel}")).unwrap();
        let off = rng.below(want.len() as u64);
        let len = rng.range(1, 64 << 10) as usize;
        let got = f
            .read_range(pparse::data::Range::new(off, off + len as u64))
            .unwrap();
        let end = (off as usize + len).min(want.len());
        assert!(got == want[off as usize..end], "{rel} at {off}");
    }
}

#[test]
fn a_changed_file_is_never_read_through_its_old_index() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a.tar.gz");
    let index = tmp.path().join("a.pidx");
    let (f, idx) = (file.to_str().unwrap(), index.to_str().unwrap());
    let whole = fixture("nested.tar.gz");
    std::fs::write(&file, &whole).unwrap();
    assert_eq!(pparse(["tree", f, "--index", idx]).code, 0);
    // Same size, same mtime, other bytes: the key still changes.
    let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
    let mut other = whole.clone();
    let n = other.len();
    other[n - 5] ^= 0x40; // the gzip trailer's size field
    std::fs::write(&file, &other).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&file)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let run = pparse(["tree", f, "--index", idx]);
    let plain = pparse(["tree", f, "--no-index"]);
    assert_eq!(run.stdout_text(), plain.stdout_text());
    assert_eq!(run.code, 1, "a wrong size in the trailer is damage");
    assert!(
        run.stderr_text().contains("is stale: the file has changed"),
        "{}",
        run.stderr_text()
    );
    // The rebuilt index is used next time, without a note.
    let again = pparse(["tree", f, "--index", idx]);
    assert_eq!(again.stdout_text(), plain.stdout_text());
    assert_eq!(again.stderr_text(), plain.stderr_text());
}

#[test]
fn a_damaged_index_is_ignored_never_trusted() {
    let tmp = tempfile::tempdir().unwrap();
    let (tar, _) = big_archive(tmp.path(), 30, 400_000);
    let index = tmp.path().join("big.pidx");
    let reference = contents(&Fs::with_options(&tar, Options::default()).unwrap());
    {
        let fs = Fs::with_options(&tar, at(&index)).unwrap();
        fs.session().wait();
    }
    let good = std::fs::read(&index).unwrap();
    let mut rng = Rng::new(3);
    let mut positions: Vec<usize> = (0..200)
        .map(|_| rng.below(good.len() as u64) as usize)
        .collect();
    // The header and the trailer, byte for byte.
    positions.extend(0..120.min(good.len()));
    positions.extend(good.len().saturating_sub(40)..good.len());
    let mut used = 0;
    for (k, &at_byte) in positions.iter().enumerate() {
        let mut bad = good.clone();
        match k % 3 {
            0 => bad[at_byte] ^= 1 << (k % 8),
            1 => bad[at_byte] = 0,
            _ => bad.truncate(at_byte),
        }
        std::fs::write(&index, &bad).unwrap();
        let fs = Fs::with_options(&tar, at(&index)).unwrap();
        if fs.session().from_index() {
            // Only damage inside a window passes the body's checksum; the
            // window's own checksum then sends decoding to an earlier
            // checkpoint: slower, never wrong.
            used += 1;
            assert_eq!(contents(&fs), reference, "damage at {at_byte}");
        } else {
            assert_eq!(contents(&fs), reference, "damage at {at_byte}");
        }
    }
    assert!(used < positions.len() / 2, "most damage must be caught");
}

#[test]
fn a_file_that_is_not_an_index_is_not_overwritten() {
    let tmp = tempfile::tempdir().unwrap();
    let precious = tmp.path().join("notes.txt");
    std::fs::write(&precious, b"my notes, not an index\n").unwrap();
    let f = fixture_path("nested.tar.gz");
    let run = pparse([
        "tree",
        f.to_str().unwrap(),
        "--index",
        precious.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0);
    assert_eq!(
        std::fs::read(&precious).unwrap(),
        b"my notes, not an index\n"
    );
    let err = run.stderr_text();
    assert!(err.contains("is not a pparse index"), "{err}");
    assert!(err.contains("no index written"), "{err}");
}

#[test]
fn no_index_reads_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let f = fixture_path("nested.tar.gz");
    let f = f.to_str().unwrap();
    let env = [("XDG_CACHE_HOME", cache.to_str().unwrap())];
    assert_eq!(pparse_env(["tree", f, "--no-index"], &env).code, 0);
    assert!(!cache.exists(), "--no-index wrote something");
    assert_eq!(pparse_env(["tree", f], &env).code, 0);
    let written: Vec<_> = std::fs::read_dir(cache.join("pparse/index"))
        .unwrap()
        .collect();
    assert_eq!(written.len(), 1, "one index in the cache folder by default");
    // Commands that show nodes do not use it (they need the parse).
    let nodes = pparse_env(["nodes", f, "nested.tar"], &env);
    assert_eq!(nodes.code, 0);
    assert!(nodes.stdout_text().lines().count() > 5);
}

#[test]
fn io_stats_show_what_an_index_spares() {
    let tmp = tempfile::tempdir().unwrap();
    let (tar, src) = big_archive(tmp.path(), 30, 400_000);
    let t = tar.to_str().unwrap();
    let index = tmp.path().join("big.pidx");
    let idx = index.to_str().unwrap();
    let gz_size = std::fs::metadata(&tar).unwrap().len();
    // A full parse: every compressed byte read, the whole tar decoded.
    let first = pparse(["tree", t, "--json", "--index", idx, "--io-stats"]);
    assert_eq!(first.code, 0, "{}", first.stderr_text());
    let io = io_json(&first);
    let tar_size = serde_json::from_slice::<serde_json::Value>(&first.stdout).unwrap()["children"]
        [0]["size"]
        .as_u64()
        .unwrap();
    assert!(io["file_read"].as_u64().unwrap() >= gz_size, "{io}");
    assert_eq!(io["decoded"].as_u64().unwrap(), tar_size, "{io}");
    assert_eq!(io["cache_budget"].as_u64().unwrap(), 16 << 20);
    // Through the index: nothing decoded from the start; one member's
    // bytes re-decoded from the checkpoint before it (at most 4 MiB away).
    let name = "sub/f027.txt";
    let want = std::fs::read(src.join(name)).unwrap();
    let run = pparse([
        "cat",
        t,
        &format!("big.tar/./{name}"),
        "--index",
        idx,
        "--io-stats",
        "--cache-size",
        "64M",
    ]);
    assert!(run.stdout == want);
    let text = run.stderr_text();
    let line = text.lines().last().unwrap();
    assert!(line.starts_with("pparse: io: read "), "{text}");
    assert!(line.contains("decoded 0 B, re-decoded "), "{line}");
    assert!(line.contains("(budget 64.0 MiB)"), "{line}");
    let redecoded: u64 = line
        .split("re-decoded ")
        .nth(1)
        .and_then(|r| r.split(" B").next())
        .map(|n| n.replace(',', "").parse().unwrap())
        .unwrap();
    assert!(redecoded >= want.len() as u64, "{line}");
    assert!(
        redecoded <= want.len() as u64 + (4 << 20) + (128 << 10),
        "{line}"
    );
    // A size too small to be a cache is refused.
    let bad = pparse(["tree", t, "--cache-size", "10"]);
    assert_eq!(bad.code, 2);
    assert!(
        bad.stderr_text().contains("at least 1M"),
        "{}",
        bad.stderr_text()
    );
}

/// Reads the index of `file` at `index` back as a tree, lets `edit`
/// change it, and writes it back through the crate's own writer: the key
/// stays valid (the file has not changed) and the checksums of the index
/// itself hold; only the records lie. Returns the forged index's bytes.
fn forge(file: &Path, index: &Path, edit: impl FnOnce(&mut pparse::Tree)) -> Vec<u8> {
    let plan = pparse::index::Plan::new(file, &at(index), &Default::default()).expect("a plan");
    let root: pparse::data::Data =
        std::sync::Arc::new(pparse::data::MmapSource::open(file).unwrap());
    let name = pparse::name::Name::new(file.file_name().unwrap().as_encoded_bytes().to_vec());
    let mut tree = plan
        .restore(root, name, Some(file))
        .expect("the first pass's index is read back");
    edit(&mut tree);
    let before = std::fs::read(index).unwrap();
    plan.save(&tree);
    let forged = std::fs::read(index).unwrap();
    assert_ne!(forged, before, "the forged index was not written");
    forged
}

/// `cat PATH` through a forged index either gives what a parse gives (the
/// index ignored with a note, or its lie not reaching PATH) or fails with
/// an error naming the mismatch: it never prints bytes the member does
/// not hold.
fn cat_never_lies(file: &Path, index: &Path, forged: &[u8], path: &str, what: &str) {
    std::fs::write(index, forged).unwrap();
    let f = file.to_str().unwrap();
    let reference = pparse(["cat", f, path, "--no-index"]);
    let run = pparse(["cat", f, path, "--index", index.to_str().unwrap()]);
    let err = run.stderr_text();
    assert!(
        reference.stdout.starts_with(&run.stdout),
        "{what}: {path}: other bytes printed ({} of them; {err})",
        run.stdout.len()
    );
    if run.stdout != reference.stdout || run.code != reference.code {
        assert_eq!(run.code, 2, "{what}: {path}: {err}");
        assert!(
            err.contains("index does not match the file") || err.contains("ignored"),
            "{what}: {path}: {err}"
        );
    }
}

#[test]
fn a_forged_index_never_serves_other_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    // Made by GNU tar and gzip (fixtures/make_fixtures.sh).
    let file = tmp.path().join("nested.tar.gz");
    std::fs::write(&file, fixture("nested.tar.gz")).unwrap();
    let cut = tmp.path().join("cut.tar.gz");
    let whole = fixture("nested.tar.gz");
    std::fs::write(&cut, &whole[..whole.len() * 3 / 5]).unwrap();
    let index = tmp.path().join("nested.pidx");
    let cut_index = tmp.path().join("cut.pidx");
    for (f, i) in [(&file, &index), (&cut, &cut_index)] {
        let run = pparse(["tree", f.to_str().unwrap(), "--index", i.to_str().unwrap()]);
        assert!(i.exists() && run.code <= 1, "{}", run.stderr_text());
    }
    let good = std::fs::read(&index).unwrap();
    let good_cut = std::fs::read(&cut_index).unwrap();
    let readme = "nested.tar/README.md";
    let guide = "nested.tar/docs/guide.txt";
    let paths = [
        readme,
        guide,
        "nested.tar/src/main.c",
        "nested.tar/docs/inner.zip/chapter1.txt",
    ];
    type Edit = Box<dyn Fn(&mut pparse::Tree)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "README.md's range moved onto guide.txt's",
            Box::new(|t: &mut pparse::Tree| {
                let (r, g) = (t.resolve(readme).unwrap(), t.resolve(guide).unwrap());
                let (o, d) = (t.exts[g].origin(), t.exts[g].declared_size());
                let e = t.exts.get_mut(r).unwrap();
                e.set_origin(o);
                e.set_declared_size(d);
            }),
        ),
        (
            "README.md's range and size stretched by a block",
            Box::new(|t: &mut pparse::Tree| {
                let e = t.exts.get_mut(t.resolve(readme).unwrap()).unwrap();
                let o = e.origin().unwrap();
                e.set_origin(Some(pparse::data::Range::new(o.start, o.end + 512)));
                e.set_declared_size(e.declared_size().map(|d| d + 512));
            }),
        ),
        (
            "README.md's range and size shrunk",
            Box::new(|t: &mut pparse::Tree| {
                let e = t.exts.get_mut(t.resolve(readme).unwrap()).unwrap();
                let o = e.origin().unwrap();
                e.set_origin(Some(pparse::data::Range::new(o.start, o.end - 100)));
                e.set_declared_size(e.declared_size().map(|d| d - 100));
            }),
        ),
        (
            "a zip entry's deflate range moved onto its sibling's",
            Box::new(|t: &mut pparse::Tree| {
                let a = t.resolve("nested.tar/docs/inner.zip/chapter1.txt").unwrap();
                let b = t.resolve("nested.tar/docs/inner.zip/chapter2.txt").unwrap();
                let (o, d) = (t.exts[b].origin(), t.exts[b].declared_size());
                let e = t.exts.get_mut(a).unwrap();
                e.set_origin(o);
                e.set_declared_size(d);
            }),
        ),
        (
            "a zip entry's decoded size cut short",
            Box::new(|t: &mut pparse::Tree| {
                let a = t.resolve("nested.tar/docs/inner.zip/chapter1.txt").unwrap();
                let e = t.exts.get_mut(a).unwrap();
                e.set_declared_size(e.declared_size().map(|d| d - 1000));
            }),
        ),
        (
            "a zip entry's decoded size stretched",
            Box::new(|t: &mut pparse::Tree| {
                let a = t.resolve("nested.tar/docs/inner.zip/chapter1.txt").unwrap();
                let e = t.exts.get_mut(a).unwrap();
                e.set_declared_size(e.declared_size().map(|d| d + 1000));
            }),
        ),
        (
            "the decoded stream's range past the end of the file",
            Box::new(|t: &mut pparse::Tree| {
                let e = t.exts.get_mut(t.resolve("nested.tar").unwrap()).unwrap();
                let o = e.origin().unwrap();
                e.set_origin(Some(pparse::data::Range::new(
                    o.start + (1 << 20),
                    o.end + (1 << 20),
                )));
            }),
        ),
    ];
    for (what, edit) in &cases {
        std::fs::write(&index, &good).unwrap();
        let forged = forge(&file, &index, edit);
        for path in paths {
            cat_never_lies(&file, &index, &forged, path, what);
        }
        // extract writes no member that is not the member's bytes.
        std::fs::write(&index, &forged).unwrap();
        let out = tmp.path().join("out");
        let _ = std::fs::remove_dir_all(&out);
        let run = pparse([
            "extract",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--index",
            index.to_str().unwrap(),
        ]);
        for e in walk(&out) {
            let rel = e.strip_prefix(&out).unwrap().to_str().unwrap().to_string();
            let want = pparse(["cat", file.to_str().unwrap(), &rel, "--no-index"]).stdout;
            let got = std::fs::read(&e).unwrap();
            assert!(
                want.starts_with(&got) && (got == want || run.code == 2),
                "{what}: extract wrote other bytes to {rel}: {}",
                run.stderr_text()
            );
        }
    }
    // Damage removed from a cut archive: the bytes served are still the
    // ones the file holds (its statuses are the index's word).
    let forged = forge(&cut, &cut_index, |t| {
        for id in 0..t.len() {
            let e = t.exts.get_mut(id).unwrap();
            e.damage.clear();
            if let Some(x) = e.extra.as_mut() {
                x.outer_damage.clear();
            }
        }
    });
    for path in ["nested.tar/docs/inner.zip", readme, guide] {
        cat_never_lies(&cut, &cut_index, &forged, path, "damage removed");
    }
    std::fs::write(&cut_index, good_cut).unwrap();
}

/// An index that moves, stretches or shrinks a zip entry, with the
/// checksum of its first bytes recomputed to match (so only the zip's own
/// local headers can tell): `cat` never prints bytes the entry does not
/// hold, and fails naming the mismatch. Stored entries (their bytes served
/// as a window of the zip) and deflated ones (decoded again) alike.
#[test]
fn a_forged_index_cannot_move_a_zip_entry_even_with_its_checksums_redone() {
    let tmp = tempfile::tempdir().unwrap();
    type Edit = Box<dyn Fn(&mut pparse::Tree)>;
    /// Gives `a` the range and sizes of `b`, and `b`'s first bytes' CRC.
    fn onto(t: &mut pparse::Tree, a: &str, b: &str) {
        let (a, b) = (t.resolve(a).unwrap(), t.resolve(b).unwrap());
        let (o, d) = (t.exts[b].origin(), t.exts[b].declared_size());
        let crc = t.head_crc(b).unwrap();
        let e = t.exts.get_mut(a).unwrap();
        e.set_origin(o);
        e.set_declared_size(d);
        t.set_head_crc(a, crc);
    }
    fn resize(t: &mut pparse::Tree, a: &str, by: i64) {
        let e = t.exts.get_mut(t.resolve(a).unwrap()).unwrap();
        let o = e.origin().unwrap();
        e.set_origin(Some(pparse::data::Range::new(
            o.start,
            o.end.saturating_add_signed(by),
        )));
        e.set_declared_size(e.declared_size().map(|d| d.saturating_add_signed(by)));
    }
    // Made by Python's zipfile (stored) and Info-ZIP inside GNU tar
    // (deflated): fixtures/make_fixtures.sh.
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, Edit)>);
    let cases: Vec<Case> = vec![
        (
            "nested_stored.zip",
            vec!["alpha.txt", "gamma.txt"],
            vec![
                (
                    "a stored entry onto another",
                    Box::new(|t| onto(t, "alpha.txt", "gamma.txt")),
                ),
                (
                    "a stored entry stretched",
                    Box::new(|t| resize(t, "alpha.txt", 100)),
                ),
                (
                    "a stored entry shrunk",
                    Box::new(|t| resize(t, "alpha.txt", -100)),
                ),
            ],
        ),
        (
            "nested.tar.gz",
            vec!["nested.tar/docs/inner.zip/chapter1.txt"],
            vec![(
                "a deflated entry onto its sibling",
                Box::new(|t| {
                    onto(
                        t,
                        "nested.tar/docs/inner.zip/chapter1.txt",
                        "nested.tar/docs/inner.zip/chapter2.txt",
                    );
                }),
            )],
        ),
    ];
    for (name, paths, edits) in cases {
        let file = tmp.path().join(name);
        std::fs::write(&file, fixture(name)).unwrap();
        let index = tmp.path().join(format!("{name}.pidx"));
        let f = file.to_str().unwrap();
        let run = pparse(["tree", f, "--index", index.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{}", run.stderr_text());
        let good = std::fs::read(&index).unwrap();
        // The index as written serves every entry whole.
        for path in &paths {
            let through = pparse(["cat", f, path, "--index", index.to_str().unwrap()]);
            assert_eq!(
                through.stdout,
                pparse(["cat", f, path, "--no-index"]).stdout
            );
            assert_eq!(through.code, 0, "{}", through.stderr_text());
        }
        for (what, edit) in &edits {
            std::fs::write(&index, &good).unwrap();
            let forged = forge(&file, &index, edit);
            let first = paths[0];
            let run = {
                std::fs::write(&index, &forged).unwrap();
                pparse(["cat", f, first, "--index", index.to_str().unwrap()])
            };
            assert_eq!(run.code, 2, "{what}: {}", run.stderr_text());
            assert!(
                run.stdout.is_empty()
                    && run
                        .stderr_text()
                        .contains("the index does not match the file"),
                "{what}: {} bytes printed; {}",
                run.stdout.len(),
                run.stderr_text()
            );
            for path in &paths {
                cat_never_lies(&file, &index, &forged, path, what);
            }
        }
    }
}

#[test]
fn an_index_of_a_deep_chain_is_refused_in_time() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("nested.tar.gz");
    std::fs::write(&file, fixture("nested.tar.gz")).unwrap();
    let index = tmp.path().join("nested.pidx");
    let f = file.to_str().unwrap();
    let idx = index.to_str().unwrap();
    assert_eq!(pparse(["tree", f, "--index", idx]).code, 0);
    // 200,000 copies of a member, each inside the one before.
    let forged = forge(&file, &index, |t| {
        let src = t.resolve("nested.tar/README.md").unwrap();
        let mut parent = src;
        for _ in 0..200_000 {
            let id = t.len();
            let depth = t.exts[parent].depth() + 1;
            let e = t.exts[src].twin(id, Some(parent), depth);
            t.exts.get_mut(parent).unwrap().children.push(id);
            t.exts.push(e);
            parent = id;
        }
    });
    let plain_tree = pparse(["tree", "--json", f, "--no-index"]);
    let out = tmp.path().join("out");
    for args in [
        vec!["tree", "--json", f, "--index", idx],
        vec!["extract", f, "--out", out.to_str().unwrap(), "--index", idx],
    ] {
        std::fs::write(&index, &forged).unwrap();
        let started = std::time::Instant::now();
        let run = pparse(&args);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{args:?} took {:?}",
            started.elapsed()
        );
        assert_eq!(run.code, 0, "{args:?}: {}", run.stderr_text());
        let err = run.stderr_text();
        assert!(
            err.contains("deeper than a parse goes") && err.contains("ignored"),
            "{args:?}: {err}"
        );
        if args[0] == "tree" {
            assert_eq!(run.stdout, plain_tree.stdout);
        }
    }
}

/// The seed of the `index_forged` fuzz target is the body of a real index
/// of its file, read back whole: the fuzzer starts from an index that is
/// believed, and mutates the ranges, sizes and depths in it. (Rewrite it
/// after a change of what an index holds: `PPARSE_WRITE_FUZZ_SEED=1 cargo
/// test the_forged_index_fuzz_seed`, see fuzz/README.md.)
#[test]
fn the_forged_index_fuzz_seed_is_a_real_index() {
    let seed_path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fuzz/corpus/index_forged/nested_tar_gz"
    );
    // The index a parse writes now.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("nested.tar.gz");
    std::fs::write(&file, fixture("nested.tar.gz")).unwrap();
    let index = tmp.path().join("nested.pidx");
    let run = pparse([
        "tree",
        file.to_str().unwrap(),
        "--index",
        index.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0);
    let seed = pparse::index::fuzz_seed(&std::fs::read(&index).unwrap()).unwrap();
    if std::env::var_os("PPARSE_WRITE_FUZZ_SEED").is_some() {
        std::fs::write(seed_path, &seed).unwrap();
    }
    let body = std::fs::read(seed_path).unwrap();
    let root: pparse::data::Data =
        std::sync::Arc::new(pparse::data::MemSource::new(fixture("nested.tar.gz")));
    let cat = pparse::index::fuzz_catalog(&body, root, pparse::name::Name::from("nested.tar.gz"))
        .expect("the seed is read back");
    let tree = cat.tree().unwrap();
    assert!(tree.len() > 20 && tree.head_crc(1).is_some());
    // It is the index a parse writes now.
    assert_eq!(
        seed.len(),
        body.len(),
        "write the seed again (fuzz/README.md)"
    );
}

/// I/O counters and index notes are a session's: two sessions in one
/// process each count their own file's bytes (a parse beside them adds
/// nothing to theirs), and each hears only of its own index.
#[test]
fn two_sessions_count_and_note_apart() {
    let open = |name: &str, options: Options| {
        let path = fixture_path(name);
        let s = pparse::Session::open(&path, options).unwrap();
        s.wait();
        (s, std::fs::metadata(&path).unwrap().len())
    };
    let (a, size_a) = open("nested.tar.gz", Options::default());
    let before = a.io_stats();
    assert!(
        before.file_read >= size_a && before.decoded > 0,
        "{before:?}"
    );
    // An index at a place that cannot hold one: noted by its session alone.
    let tmp = tempfile::tempdir().unwrap();
    let (b, size_b) = open(
        "many-gnu.tar.gz",
        Options {
            index: IndexMode::At(tmp.path().to_path_buf()),
            ..Options::default()
        },
    );
    let io_b = b.io_stats();
    assert!(
        (size_b..=3 * size_b).contains(&io_b.file_read) && io_b.decoded > 0,
        "{io_b:?}"
    );
    assert_eq!(a.io_stats(), before, "b's parse counted in a's session");
    assert!(a.take_notes().is_empty());
    let notes = b.take_notes();
    assert!(
        notes.iter().any(|n| n.contains("neither read nor written")),
        "{notes:?}"
    );
    // What a ledger keeps outlives the session.
    let ledger = b.ledger();
    drop(b);
    assert_eq!(ledger.io_stats(), io_b);
}

/// The listing below the root line (the root is named after the file).
fn below_root(run: &Run) -> String {
    run.stdout_text().split_once('\n').unwrap().1.to_string()
}

#[test]
fn a_shared_folder_index_serves_every_copy_of_the_same_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    std::fs::create_dir_all(&one).unwrap();
    std::fs::create_dir_all(&two).unwrap();
    let (a, b) = (one.join("data.tar.gz"), two.join("copy.tar.gz"));
    std::fs::copy(fixture_path("nested.tar.gz"), &a).unwrap();
    std::fs::copy(&a, &b).unwrap();
    // Two copies as two machines see one file: other inodes and change
    // times, the same size, mtime and bytes.
    let when = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    for f in [&a, &b] {
        std::fs::File::options()
            .write(true)
            .open(f)
            .unwrap()
            .set_modified(when)
            .unwrap();
    }
    // A folder yet to be made is named with a trailing slash.
    let shared = format!("{}/", tmp.path().join("indexes").display());
    let tree = |file: &Path| {
        pparse([
            "tree",
            "--io-stats",
            "--index",
            &shared,
            file.to_str().unwrap(),
        ])
    };
    let first = tree(&a);
    assert_eq!(first.code, 0, "{}", first.stderr_text());
    assert!(io_decoded(&first) > 0, "the first run parses");
    let written: Vec<_> = std::fs::read_dir(tmp.path().join("indexes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(written.len(), 1, "one index in the folder: {written:?}");
    assert!(
        written[0].ends_with(".pidx") && written[0].len() == 32 + 5,
        "{written:?}"
    );

    let second = tree(&b);
    assert_eq!(second.code, 0, "{}", second.stderr_text());
    assert_eq!(
        io_decoded(&second),
        0,
        "the copy starts from the index: {}",
        second.stderr_text()
    );
    assert!(
        !second.stderr_text().contains("note:"),
        "{}",
        second.stderr_text()
    );
    assert_eq!(below_root(&second), below_root(&first));
    let leaf = &leaves("nested.tar.gz")[0];
    let cat = pparse(["cat", "--index", &shared, b.to_str().unwrap(), &leaf.path]);
    let want = pparse(["cat", "--no-index", a.to_str().unwrap(), &leaf.path]);
    assert_eq!(cat.code, 0, "{}", cat.stderr_text());
    assert!(
        !want.stdout.is_empty() && cat.stdout == want.stdout,
        "cat {} through the shared index",
        leaf.path
    );

    // Another mtime is another version: the index is stale, ignored and
    // replaced under the same name.
    std::fs::File::options()
        .write(true)
        .open(&b)
        .unwrap()
        .set_modified(when + std::time::Duration::from_secs(1))
        .unwrap();
    let third = tree(&b);
    assert_eq!(third.code, 0, "{}", third.stderr_text());
    assert!(
        third.stderr_text().contains("is stale"),
        "{}",
        third.stderr_text()
    );
    assert!(io_decoded(&third) > 0, "a changed file is parsed");
    assert_eq!(below_root(&third), below_root(&first));
    assert_eq!(
        std::fs::read_dir(tmp.path().join("indexes"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn an_index_argument_is_a_file_a_folder_or_a_url() {
    let tmp = tempfile::tempdir().unwrap();
    let place = |s: &str| IndexMode::place(PathBuf::from(s));
    let existing = tmp.path().to_str().unwrap();
    assert_eq!(place(existing), IndexMode::In(existing.into()));
    assert_eq!(
        place("/no/such/dir/"),
        IndexMode::In("/no/such/dir/".into())
    );
    assert_eq!(
        place("/no/such/file.pidx"),
        IndexMode::At("/no/such/file.pidx".into())
    );
    assert_eq!(
        place("s3://b/indexes/"),
        IndexMode::Url("s3://b/indexes/".into())
    );
    assert_eq!(
        place("HTTPS://h/x.pidx"),
        IndexMode::Url("HTTPS://h/x.pidx".into())
    );
}
