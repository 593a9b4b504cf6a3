//! Real data at scale: the work per entry is constant. These tests count
//! what a command read and decoded (`--io-stats`, in a process of its own
//! so that no other test adds to the counters), never how long it took.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::*;

/// A zip of `n` small deflated entries in 100 folders, written by Python's
/// zipfile (the writer of most wheels and datasets).
fn python_zip(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join(format!("many{n}.zip"));
    let script = format!(
        "import zipfile\n\
         with zipfile.ZipFile({p:?}, 'w', zipfile.ZIP_DEFLATED) as z:\n    \
             for i in range({n}):\n        \
                 z.writestr(f'dir{{i % 100}}/file{{i}}.txt', f'entry {{i}}\\n' * (1 + i % 7))\n",
        p = path.display().to_string()
    );
    python(&script);
    path
}

/// `tar czf` of one file, with GNU tar and gzip.
fn tar_gz(file: &Path) -> PathBuf {
    let dir = file.parent().unwrap();
    let name = file.file_name().unwrap().to_str().unwrap();
    let out = dir.join(format!("{name}.tar.gz"));
    let st = Command::new("tar")
        .arg("czf")
        .arg(&out)
        .arg("-C")
        .arg(dir)
        .arg(name)
        .status()
        .unwrap();
    assert!(st.success());
    out
}

/// The `--io-stats` counts of a run.
fn io_of(run: &Run) -> Value {
    io_counts(&run.stderr_text())
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Every extraction below a `tree --json` node, with its status.
fn statuses(node: &Value, out: &mut Vec<(String, String)>) {
    for c in node["children"].as_array().into_iter().flatten() {
        out.push((
            c["path"].as_str().unwrap().to_string(),
            c["status"].as_str().unwrap().to_string(),
        ));
        statuses(c, out);
    }
}

/// `pparse tree --json` of a zip of `count` entries: exit 0, the file
/// read at most twice over, and every entry complete; the tree.
fn tree_read_once(zip: &Path, count: usize) -> Value {
    let size = std::fs::metadata(zip).unwrap().len();
    let z = zip.to_str().unwrap();
    let run = pparse(["tree", z, "--json", "--no-index", "--io-stats"]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let io = io_of(&run);
    assert!(
        n(&io["file_read"]) <= 2 * size,
        "{io} for a zip of {size} B"
    );
    // Each entry is decoded once, where it is checked: sniffing it reads
    // the first bytes the check handed over (a tar header looked for in
    // its first 8 KiB decoded every entry again).
    assert_eq!(n(&io["redecoded"]), 0, "{io}");
    // The heap holds about 300 bytes per entry at most (its extraction
    // record and name), beside a fixed 8 MiB.
    let heap = n(&io["heap_peak"]);
    assert!(
        heap <= 300 * count as u64 + (8 << 20),
        "peak heap {heap} B for {count} entries"
    );
    let tree: Value = serde_json::from_slice(&run.stdout).unwrap();
    let mut all = Vec::new();
    statuses(&tree, &mut all);
    assert_eq!(all.len(), count);
    let bad: Vec<_> = all.iter().filter(|(_, s)| s != "complete").collect();
    assert!(
        bad.is_empty(),
        "{} not complete: {:?}",
        bad.len(),
        &bad[..bad.len().min(5)]
    );
    tree
}

#[test]
fn a_zip_of_50k_entries_is_read_about_once_alone_and_in_a_tar_gz() {
    const N: usize = 50_000;
    let tmp = tempfile::tempdir().unwrap();
    let zip = python_zip(tmp.path(), N);
    let size = std::fs::metadata(&zip).unwrap().len();
    let z = zip.to_str().unwrap();

    // Alone: the directory, each local header and each entry's bytes are
    // read about once (reading the longest possible header for each entry
    // read the file's size 300 times over).
    let tree = tree_read_once(&zip, N);
    let mut all = Vec::new();
    statuses(&tree, &mut all);

    // `extract` and `cat` read it the same way.
    let out = tmp.path().join("out");
    let run = pparse([
        "extract",
        "--no-index",
        "--io-stats",
        "--out",
        out.to_str().unwrap(),
        z,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert!(n(&io_of(&run)["file_read"]) <= 2 * size);
    let last = format!("dir{}/file{}.txt", (N - 1) % 100, N - 1);
    assert_eq!(
        std::fs::read(out.join(&last)).unwrap(),
        format!("entry {}\n", N - 1)
            .repeat(1 + (N - 1) % 7)
            .into_bytes()
    );
    let run = pparse(["cat", "--no-index", "--io-stats", z, &last]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert!(n(&io_of(&run)["file_read"]) <= 2 * size);

    // The node tree of every entry and directory record: each record once
    // more.
    let run = pparse(["nodes", z, "--no-index", "--io-stats"]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert!(n(&io_of(&run)["file_read"]) <= 3 * size);

    // Inside a tar.gz the zip arrives while it is parsed (scan mode, then
    // the directory): the cache serves each decoded byte a few times at
    // most (it served the zip's size once per entry).
    let gz = tar_gz(&zip);
    let run = pparse([
        "tree",
        gz.to_str().unwrap(),
        "--json",
        "--no-index",
        "--io-stats",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let io = io_of(&run);
    assert!(n(&io["from_cache"]) <= 3 * n(&io["decoded"]), "{io}");
    let nested: Value = serde_json::from_slice(&run.stdout).unwrap();
    let zip_node = &nested["children"][0]["children"][0];
    let prefix = format!("{}/", zip_node["path"].as_str().unwrap());
    let mut inner = Vec::new();
    statuses(zip_node, &mut inner);
    let inner: Vec<_> = inner
        .into_iter()
        .map(|(p, s)| (p.strip_prefix(&prefix).unwrap_or(&p).to_string(), s))
        .collect();
    let differ = inner.iter().zip(&all).filter(|(a, b)| a != b).count();
    assert!(
        inner.len() == all.len() && differ == 0,
        "the same entries and verdicts as the zip alone: {} entries, {differ} differ",
        inner.len()
    );
}

/// A zip of more than 10,000 entries lists those it checks where it lists
/// them 1,024 to a node (a node each cost more than the entries); loaded,
/// a group gives the very nodes the entries have in a smaller zip.
#[test]
fn a_big_zip_lists_its_checked_entries_in_groups_of_1024() {
    const N: usize = 12_000;
    let tmp = tempfile::tempdir().unwrap();
    let big = python_zip(tmp.path(), N);
    let small = python_zip(tmp.path(), 100);
    let nodes = |zip: &Path, depth: &str| -> Value {
        let run = pparse(["nodes", zip.to_str().unwrap(), "--json", "--depth", depth]);
        // 1: a damaged zip.
        assert!(run.code <= 1, "{}", run.stderr_text());
        serde_json::from_slice(&run.stdout).unwrap()
    };
    // The top-level nodes of one kind.
    let of_kind = |tree: &Value, kind: &str| -> Vec<Value> {
        let top = tree["children"].as_array().unwrap();
        top.iter().filter(|n| n["kind"] == kind).cloned().collect()
    };
    let big = nodes(&big, "2");
    let groups = of_kind(&big, "entries");
    assert_eq!(groups.len(), N.div_ceil(1024));
    let mut at = 0;
    let mut entries = Vec::new();
    for g in &groups {
        let kids = g["children"].as_array().unwrap();
        let last = at + kids.len() - 1;
        assert_eq!(g["name"], format!("entries {at}–{last}"));
        assert_eq!(g["start"], kids[0]["start"]);
        assert_eq!(g["end"], kids[kids.len() - 1]["end"]);
        at = last + 1;
        entries.extend(kids.iter().cloned());
    }
    assert_eq!(entries.len(), N);
    // The first 100 entries are the small zip's, byte for byte.
    let alone = of_kind(&nodes(&small, "1"), "entry");
    assert_eq!(alone.len(), 100);
    for (a, b) in alone.iter().zip(&entries) {
        for k in ["name", "kind", "start", "end", "value"] {
            assert_eq!(a[k], b[k], "{k} of {}", a["name"]);
        }
    }

    // A damaged entry is in no group: its own node says what is wrong.
    let bad = tmp.path().join("bad.zip");
    python(&format!(
        "import zipfile, shutil\n\
         src, dst = {src:?}, {dst:?}\n\
         shutil.copy(src, dst)\n\
         i = zipfile.ZipFile(src).getinfo('dir0/file5000.txt')\n\
         with open(dst, 'r+b') as f:\n    \
             f.seek(i.header_offset + 26)\n    \
             n, x = int.from_bytes(f.read(2), 'little'), int.from_bytes(f.read(2), 'little')\n    \
             f.seek(i.header_offset + 30 + n + x + i.compress_size - 1)\n    \
             b = f.read(1)\n    \
             f.seek(-1, 1)\n    \
             f.write(bytes([b[0] ^ 0x55]))\n",
        src = tmp
            .path()
            .join(format!("many{N}.zip"))
            .display()
            .to_string(),
        dst = bad.display().to_string()
    ));
    let bad = nodes(&bad, "1");
    let own = of_kind(&bad, "entry");
    assert_eq!(own.len(), 1, "{own:?}");
    assert_eq!(own[0]["name"], "dir0/file5000.txt");
    assert_ne!(own[0]["status"], "complete", "{}", own[0]);
    let grouped: usize = of_kind(&bad, "entries")
        .iter()
        .map(|g| {
            g["value"]
                .as_str()
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse::<usize>()
                .unwrap()
        })
        .sum();
    assert_eq!(grouped, N - 1);
}

#[test]
fn cat_parses_only_the_containers_on_the_way_to_its_member() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir_all(src.join("d")).unwrap();
    // A member in a nested container, a big nested container beside it,
    // and a plain member after both.
    let text: String = (0..200_000).map(|i| format!("line {i}\n")).collect();
    std::fs::write(src.join("d/big.txt"), &text).unwrap();
    let st = Command::new("gzip")
        .arg("-k")
        .arg(src.join("d/big.txt"))
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::remove_file(src.join("d/big.txt")).unwrap();
    python_zip(&src, 2_000);
    std::fs::write(src.join("last.txt"), b"the last member\n").unwrap();
    let gz = tmp.path().join("backup.tar.gz");
    let st = Command::new("tar")
        .arg("czf")
        .arg(&gz)
        .arg("-C")
        .arg(&src)
        .args(["d", "many2000.zip", "last.txt"])
        .status()
        .unwrap();
    assert!(st.success());
    let g = gz.to_str().unwrap();

    // The whole tree decodes the tar stream, the .gz and the zip's entries.
    let run = pparse(["tree", g, "--json", "--no-index", "--io-stats"]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let whole = io_of(&run);
    let tree: Value = serde_json::from_slice(&run.stdout).unwrap();
    let tar_size = n(&tree["children"][0]["size"]);
    assert!(n(&whole["decoded"]) > tar_size + text.len() as u64);

    // `cat` of the last member decodes the tar stream and nothing in it.
    let run = pparse(["cat", g, "backup.tar/last.txt", "--no-index", "--io-stats"]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert_eq!(run.stdout, b"the last member\n");
    assert_eq!(n(&io_of(&run)["decoded"]), tar_size);

    // A member inside a nested container: that container is parsed.
    let run = pparse([
        "cat",
        g,
        "backup.tar/many2000.zip/dir7/file1007.txt",
        "--no-index",
        "--io-stats",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert_eq!(run.stdout, "entry 1007\n".repeat(1 + 1007 % 7).into_bytes());
    let decoded = n(&io_of(&run)["decoded"]);
    assert!(decoded > tar_size && decoded < n(&whole["decoded"]));
    let run = pparse(["cat", g, "backup.tar/d/big.txt.gz/big.txt", "--no-index"]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert!(run.stdout == text.as_bytes());
}

/// A jar-shaped zip of 20,000 entries written by Python's zipfile: a
/// stored manifest first, 100 package folders as directory entries, and
/// class-like files, every tenth stored and the rest deflated (the shape
/// of the jars of a JDK or an SDK, which a sweep of /usr lists by the
/// hundred).
#[test]
fn a_jar_of_20k_entries_reads_complete_and_about_once() {
    const N: usize = 20_000;
    const DIRS: usize = 100;
    let tmp = tempfile::tempdir().unwrap();
    let jar = tmp.path().join("many.jar");
    let script = format!(
        "import zipfile\n\
         n, dirs = {N}, {DIRS}\n\
         with zipfile.ZipFile({p:?}, 'w') as z:\n    \
             z.writestr('META-INF/', b'')\n    \
             z.writestr('META-INF/MANIFEST.MF', b'Manifest-Version: 1.0\\r\\n\\r\\n')\n    \
             for d in range(dirs):\n        \
                 z.writestr(f'com/example/p{{d}}/', b'')\n    \
             for i in range(n - 2 - dirs):\n        \
                 body = bytes((i * 7 + j * 13 + (j >> 3)) % 251 for j in range(64 + i % 1000))\n        \
                 how = zipfile.ZIP_STORED if i % 10 == 0 else zipfile.ZIP_DEFLATED\n        \
                 z.writestr(f'com/example/p{{i % dirs}}/C{{i}}.class', body, compress_type=how)\n",
        p = jar.display().to_string()
    );
    python(&script);
    tree_read_once(&jar, N);
}

/// `pparse::fs` over a zip of 30,000 entries written by Python's zipfile:
/// listing it, then opening every file by its PATH and reading it whole,
/// reads the zip from the file about once, and each entry's bytes come
/// from the cache about once, by the session's own counters. Run in a
/// process of its own (this test binary again, told by
/// `PPARSE_SCALE_CHILD` which zip to read), as the cache of decoded chunks
/// is the process's and other tests beside it would evict from it.
#[test]
fn the_library_reads_every_entry_of_a_zip_about_once() {
    if let Ok(zip) = std::env::var("PPARSE_SCALE_CHILD") {
        let fs = pparse::fs::Fs::new(&zip).unwrap();
        let entries = fs.list("", true).unwrap();
        let (mut files, mut bytes) = (0u64, 0u64);
        for e in entries.iter().filter(|e| e.member && !e.container) {
            let f = fs.open(&e.path).unwrap();
            let all = f.read_range(pparse::data::Range::new(0, f.len())).unwrap();
            assert_eq!(all.len() as u64, e.size, "{}", e.path);
            files += 1;
            bytes += all.len() as u64;
        }
        let io = fs.session().io_stats();
        println!(
            "CHILD {files} {bytes} {} {} {}",
            io.file_read,
            io.decoded + io.redecoded,
            io.from_cache
        );
        return;
    }
    const N: usize = 30_000;
    let tmp = tempfile::tempdir().unwrap();
    let zip = python_zip(tmp.path(), N);
    let size = std::fs::metadata(&zip).unwrap().len();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "scale::the_library_reads_every_entry_of_a_zip_about_once",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PPARSE_SCALE_CHILD", &zip)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find_map(|l| l.split("CHILD ").nth(1))
        .unwrap_or_else(|| panic!("no counts from the child: {text}"));
    let v: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
    let (files, bytes, file_read, decoded, from_cache) = (v[0], v[1], v[2], v[3], v[4]);
    assert_eq!(files, N as u64);
    // What Python's zipfile says the entries hold, in all.
    let want: u64 = String::from_utf8(python(&format!(
        "import zipfile; print(sum(i.file_size for i in zipfile.ZipFile({:?}).infolist()))",
        zip.display().to_string()
    )))
    .unwrap()
    .trim()
    .parse()
    .unwrap();
    assert_eq!(bytes, want);
    assert!(
        file_read <= 2 * size,
        "read {file_read} B of a {size} B zip"
    );
    // Every entry is deflated: decoded at least once (where it is listed,
    // and again where it is read: twice at most), and the zip read.
    assert!(file_read >= size, "read {file_read} B of a {size} B zip");
    assert!(
        (want..=2 * want).contains(&decoded),
        "decoded {decoded} B for {want} B"
    );
    assert!(
        from_cache <= 3 * want,
        "served {from_cache} B from the cache for {want} B"
    );
}

/// A tar.gz of `n` small `.gz` files (Python's tarfile and gzip), in 50
/// folders.
fn tar_of_small_gz(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join(format!("small{n}.tar.gz"));
    let script = format!(
        "import gzip, io, tarfile\n\
         with tarfile.open({p:?}, 'w:gz') as t:\n    \
             for i in range({n}):\n        \
                 body = gzip.compress(f'line {{i}}\\n'.encode() * (1 + i % 5), mtime=0)\n        \
                 info = tarfile.TarInfo(f'd{{i % 50}}/f{{i}}.txt.gz')\n        \
                 info.size = len(body)\n        \
                 t.addfile(info, io.BytesIO(body))\n",
        p = path.display().to_string()
    );
    python(&script);
    path
}

/// A small `.gz` inside a tar costs two records (the member, and the
/// stream decoded from it), its settled stream and one node: under 800
/// bytes, measured as what 10,000 more of them add to the peak heap (so
/// the fixed part, the cache and the window, cancels out). It was 1,448
/// bytes when each record's first node or child reserved room for four
/// and a finished parse kept its progress counter in a box of its own,
/// 974 while a finished stream kept its decoder's state, and 687 while
/// each extraction record took 192 bytes and each member's node kept its
/// value as a string; a tar of ten million such members pays for every
/// byte.
#[test]
fn a_small_gz_in_a_tar_costs_under_640_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let heap = |count: usize| {
        let gz = tar_of_small_gz(tmp.path(), count);
        let g = gz.to_str().unwrap();
        let run = pparse([
            "tree",
            g,
            "--json",
            "--no-index",
            "--io-stats",
            "--cache-size",
            "1M",
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr_text());
        let tree: Value = serde_json::from_slice(&run.stdout).unwrap();
        let mut all = Vec::new();
        statuses(&tree, &mut all);
        // The tar, then each member and the stream decoded from it.
        assert_eq!(all.len(), 1 + 2 * count);
        assert!(all.iter().all(|(_, s)| s == "complete"));
        n(&io_of(&run)["heap_peak"])
    };
    let (small, big) = (heap(10_000), heap(20_000));
    let each = big.saturating_sub(small) / 10_000;
    assert!(each <= 640, "{each} B per member ({small} B, then {big} B)");
}

/// Every nested `.gz` of a tar, read back after the whole tree is parsed,
/// when its stream has settled into a small source (one checkpoint) or
/// not (past the 4 MiB between checkpoints): the bytes are those Python's
/// gzip module wrote, whether the chunks are still cached or decoded
/// again, and each is complete.
#[test]
fn nested_streams_read_back_after_they_settle() {
    use std::io::Read;
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("settle.tar.gz");
    let script = format!(
        "import gzip, hashlib, io, json, random, tarfile\n\
         sums = {{}}\n\
         with tarfile.open({p:?}, 'w:gz') as t:\n    \
             for i in range(1200):\n        \
                 if i % 400 == 7:\n            \
                     r = random.Random(i)\n            \
                     n = 6_000_000 if i == 7 else 200_000\n            \
                     body = bytes(r.choice(b'abcdefghijklmnopqrstuvwxyz \\n') for _ in range(n))\n        \
                 else:\n            \
                     body = f'line {{i}}\\n'.encode() * (1 + i % 5)\n        \
                 gz = gzip.compress(body, mtime=0)\n        \
                 info = tarfile.TarInfo(f'd{{i % 20}}/f{{i}}.txt.gz')\n        \
                 info.size = len(gz)\n        \
                 t.addfile(info, io.BytesIO(gz))\n        \
                 sums[f'settle.tar/d{{i % 20}}/f{{i}}.txt.gz/f{{i}}.txt'] = hashlib.sha256(body).hexdigest()\n\
         print(json.dumps(sums))\n",
        p = path.display().to_string()
    );
    let sums: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(&python(&script)).unwrap();
    let fs = pparse::fs::Fs::new(&path).unwrap();
    let listed = fs.list("", true).unwrap();
    let streams: Vec<_> = listed
        .iter()
        .filter(|e| sums.contains_key(&e.path))
        .collect();
    assert_eq!(streams.len(), sums.len());
    // Read in reverse, so that the first reads are of streams whose chunks
    // the cache no longer holds.
    for e in streams.iter().rev() {
        assert_eq!(e.status, pparse::Status::Complete, "{}", e.path);
        let mut got = Vec::new();
        fs.open(&e.path).unwrap().read_to_end(&mut got).unwrap();
        assert_eq!(sha_hex(&got), sums[&e.path], "{}", e.path);
    }
}
