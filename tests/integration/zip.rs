//! zip: intact fixtures, nested stored zips, truncation at many offsets, and
//! flipped bytes in local headers, the central directory and the end record.
//! Expectations come from fixtures/manifest.json; what a deflated prefix
//! decodes to is computed here with zlib (flate2), as Python's zlib would.

use std::collections::{BTreeMap, BTreeSet};

use pparse::{Status, Tree};

use crate::util::*;

fn sources_of(members: &[ZipMember]) -> BTreeMap<String, Vec<u8>> {
    members
        .iter()
        .filter_map(|m| Some((m.name.clone(), source_bytes(m.source.as_ref()?))))
        .collect()
}

/// A nested zip of a zip fixture: its PATH prefix, offset in the file and
/// members (only zips stored verbatim in the file, which is all of them).
struct Layer {
    prefix: String,
    offset: u64,
    size: u64,
    members: Vec<ZipMember>,
}

fn layers(name: &str) -> Vec<Layer> {
    archive(name)["layers"]
        .as_object()
        .expect("layers")
        .iter()
        .map(|(path, l)| {
            assert_eq!(l["kind"], "zip", "{name}: layer {path}");
            Layer {
                prefix: format!("{path}/"),
                offset: u(&l["absolute_offset"]),
                size: u(&l["size"]),
                members: zip_members_of(l),
            }
        })
        .collect()
}

/// Every entry of every zip fixture resolves by its name with the bytes of
/// its source and status Complete; the root lists exactly the entries of the
/// central directory, in order; the archive is Complete.
#[test]
fn zip_fixtures_intact() {
    let mut f = Failures::default();
    for name in ZIPS {
        let session = parse(name, fixture(name));
        let t = session.tree();
        let what = name.to_string();
        if t.exts[0].parser() != Some("zip") {
            f.push(format!(
                "{what}: parsed by {:?}, not zip",
                t.exts[0].parser()
            ));
            continue;
        }
        if t.status_of(0) != Status::Complete {
            f.push(format!(
                "{what}: status {:?}: {}",
                t.status_of(0),
                damage_text(&t, 0)
            ));
        }
        let members = zip_members(name);
        let names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
        if child_names(&t, 0) != names {
            f.push(format!(
                "{what}: entries {:?}, expected {names:?}",
                child_names(&t, 0)
            ));
        }
        check_entries(&t, &what, "", &members, &mut f);
        for layer in layers(name) {
            check_entries(&t, &what, &layer.prefix, &layer.members, &mut f);
        }
        for leaf in leaves(name) {
            let want = source_bytes(&leaf.source);
            match t.resolve(&leaf.path) {
                Some(id) if read_all(&t, id) == want => {}
                Some(id) => f.push(format!(
                    "{what}: leaf {:?} has {} bytes, not its {} source bytes",
                    leaf.path,
                    t.exts[id].size(),
                    want.len()
                )),
                None => f.push(format!("{what}: leaf {:?} does not resolve", leaf.path)),
            }
        }
    }
    f.check("intact zips");
}

/// Entries of one (possibly nested) zip: files byte-exact and Complete,
/// directories as directories.
fn check_entries(t: &Tree, what: &str, prefix: &str, members: &[ZipMember], f: &mut Failures) {
    let sources = sources_of(members);
    for m in members {
        let path = format!("{prefix}{}", m.name);
        let Some(id) = t.resolve(&path) else {
            f.push(format!("{what}: {path:?} does not resolve"));
            continue;
        };
        let kind = t.exts[id].kind.as_str();
        if kind != m.kind {
            f.push(format!(
                "{what}: {path:?} is a {}, pparse says {kind}",
                m.kind
            ));
            continue;
        }
        if !m.is_file() {
            continue;
        }
        let got = read_all(t, id);
        if got != sources[&m.name] {
            f.push(format!(
                "{what}: {path:?} has {} bytes, expected its {} source bytes (same length: {})",
                got.len(),
                m.size,
                got.len() as u64 == m.size
            ));
        } else if t.status_of(id) != Status::Complete {
            f.push(format!(
                "{what}: {path:?} is byte-exact but {:?}: {}",
                t.status_of(id),
                damage_text(t, id)
            ));
        }
    }
}

/// A stored zip inside a stored zip: the inner entries are children of the
/// inner zip's extraction, never entries of the outer zip.
#[test]
fn nested_stored_zip_keeps_layers_apart() {
    let session = parse("nested_stored.zip", fixture("nested_stored.zip"));
    let t = session.tree();
    assert_eq!(
        child_names(&t, 0),
        ["alpha.txt", "deep.zip", "gamma.txt"],
        "outer entries\n{}",
        tree_text(&t)
    );
    let deep = t.resolve("deep.zip").expect("deep.zip resolves");
    assert_eq!(
        t.exts[deep].parser(),
        Some("zip"),
        "deep.zip is parsed as a zip"
    );
    assert_eq!(
        child_names(&t, deep),
        ["x.txt", "y.txt"],
        "deep.zip's entries"
    );
    assert_exact(
        &t,
        "deep.zip",
        &fixture("src/inner/deep.zip"),
        "nested_stored.zip",
    );
    assert_exact(
        &t,
        "deep.zip/x.txt",
        &fixture("src/deep/x.txt"),
        "nested_stored.zip",
    );
    assert_exact(
        &t,
        "deep.zip/y.txt",
        &fixture("src/deep/y.txt"),
        "nested_stored.zip",
    );
    assert_eq!(t.status_of(0), Status::Complete, "{}", damage_text(&t, 0));
}

/// Checks the entries of a zip of which `avail` bytes are present (`zip` is
/// the whole zip, for computing what those bytes give).
#[allow(clippy::too_many_arguments)]
fn check_zip_prefix(
    t: &Tree,
    what: &str,
    prefix: &str,
    zip: &[u8],
    avail: u64,
    members: &[ZipMember],
    sources: &BTreeMap<String, Vec<u8>>,
    f: &mut Failures,
) {
    for m in members {
        let path = format!("{prefix}{}", m.name);
        // An entry is there iff its whole local header is.
        if avail < m.data_offset {
            crate::truncation::check_absent(t, what, &path, f);
            continue;
        }
        let Some(id) = t.resolve(&path) else {
            f.push(format!(
                "{what}: {path:?} has its whole local header but does not resolve"
            ));
            continue;
        };
        if !m.is_file() {
            if t.exts[id].kind.as_str() != m.kind {
                f.push(format!(
                    "{what}: {path:?} is a {}, pparse says {}",
                    m.kind,
                    t.exts[id].kind.as_str()
                ));
            }
            continue;
        }
        let got = read_all(t, id);
        let st = t.status_of(id);
        let lo = m.data_offset as usize;
        let hi = avail.min(m.data_end()) as usize;
        // A stored entry with a data descriptor whose descriptor is cut
        // off: nothing tells where its data ends, so the bytes up to the
        // cut may be kept (all of them the file's own bytes).
        if m.stored() && m.descriptor.is_some() && avail >= m.data_end() && avail < m.end() {
            let max = (avail - m.data_offset) as usize;
            if got.len() < m.size as usize || got.len() > max || got[..] != zip[lo..lo + got.len()]
            {
                f.push(format!(
                    "{what}: {path:?} (stored, descriptor cut off) has {} bytes, expected its {} bytes plus at most {} of the descriptor",
                    got.len(),
                    m.size,
                    max - m.size as usize
                ));
            }
            continue;
        }
        let expected = if m.stored() {
            zip[lo..hi].to_vec()
        } else {
            inflate_prefix(&zip[lo..hi])
        };
        let source = &sources[&m.name];
        assert!(
            source.starts_with(&expected),
            "test bug: {what}: {path:?} expectation is not a source prefix"
        );
        if got != expected {
            f.push(format!(
                "{what}: {path:?} has {} bytes, expected exactly {} (of {}; prefix of source: {}); status {st:?}: {}",
                got.len(),
                expected.len(),
                m.size,
                source.starts_with(&got),
                damage_text(t, id)
            ));
            continue;
        }
        if (expected.len() as u64) < m.size && st == Status::Complete {
            f.push(format!(
                "{what}: {path:?} holds {} of {} bytes but is Complete",
                expected.len(),
                m.size
            ));
        }
        if avail >= m.end() && st != Status::Complete {
            f.push(format!(
                "{what}: {path:?} is whole (record ends at {}) but {st:?}: {}",
                m.end(),
                damage_text(t, id)
            ));
        }
    }
}

fn zip_cuts(name: &str) -> Vec<u64> {
    let a = archive(name);
    let size = u(&a["size"]);
    let mut cuts: BTreeSet<u64> = (0..=size).step_by(53).collect();
    let mut marks = vec![size, u(&a["cd_offset"]), u(&a["eocd_offset"])];
    if let Some(z) = a["zip64_eocd_offset"].as_u64() {
        marks.push(z);
    }
    let mut groups = vec![(0, zip_members(name))];
    for l in layers(name) {
        marks.push(l.offset + l.size);
        groups.push((l.offset, l.members));
    }
    for (base, ms) in groups {
        for m in ms {
            marks.extend([
                base + m.header_offset,
                base + m.data_offset,
                base + m.data_end(),
                base + m.end(),
            ]);
        }
    }
    for b in marks {
        for c in [b.saturating_sub(1), b, b + 1] {
            if c <= size {
                cuts.insert(c);
            }
        }
    }
    cuts.into_iter().collect()
}

/// Every 53rd prefix and every entry boundary ±1 of every zip fixture:
/// entries with their whole local header are listed, stored entries hold
/// min(size, cut - data_offset) bytes, deflated ones exactly what zlib
/// decodes from the compressed bytes present, cut-off entries are not
/// Complete, whole ones are (inner zips' entries too).
#[test]
fn zip_truncation_every_cut() {
    let mut f = Failures::default();
    for name in ZIPS {
        let data = fixture(name);
        let members = zip_members(name);
        let sources = sources_of(&members);
        let layers = layers(name);
        for cut in zip_cuts(name) {
            let what = format!("{name}[..{cut}]");
            let session = parse_named(name, truncated(&data, cut), &what);
            let t = session.tree();
            check_zip_prefix(&t, &what, "", &data, cut, &members, &sources, &mut f);
            for l in &layers {
                let zip = &data[l.offset as usize..(l.offset + l.size) as usize];
                let lsources = sources_of(&l.members);
                if cut < l.offset {
                    for m in &l.members {
                        let path = format!("{}{}", l.prefix, m.name);
                        crate::truncation::check_absent(&t, &what, &path, &mut f);
                    }
                    continue;
                }
                let avail = (cut - l.offset).min(l.size);
                check_zip_prefix(
                    &t, &what, &l.prefix, zip, avail, &l.members, &lsources, &mut f,
                );
            }
        }
    }
    f.check("zip truncation");
}

/// The archive's own status for the same prefixes: Truncated for every
/// prefix shorter than the file (a zip whose central directory or end
/// record is cut off is truncated even when every entry is whole; a cut-off
/// data descriptor is missing bytes, not a CRC mismatch), Complete for the
/// whole file.
#[test]
fn zip_truncation_root_status() {
    let mut f = Failures::default();
    for name in ZIPS {
        let data = fixture(name);
        let size = data.len() as u64;
        for cut in zip_cuts(name) {
            let what = format!("{name}[..{cut}]");
            let session = parse_named(name, truncated(&data, cut), &what);
            let t = session.tree();
            // Too few bytes to recognise a zip: no parser is fine.
            let unrecognised = cut < 30 && t.exts[0].parser().is_none() && t.len() == 1;
            let want = if cut < size {
                Status::Truncated
            } else {
                Status::Complete
            };
            if t.status_of(0) != want && !unrecognised {
                f.push(format!(
                    "{what}: root status {:?}, expected {want:?}: {}",
                    t.status_of(0),
                    damage_text(&t, 0)
                ));
            }
        }
    }
    f.check("zip truncation, archive status");
}

/// Offsets of the central directory entries, read from the bytes (46-byte
/// fixed part, then name, extra and comment).
fn cd_entries(data: &[u8], cd_offset: u64, count: usize) -> Vec<u64> {
    let mut out = Vec::new();
    let mut p = cd_offset as usize;
    for _ in 0..count {
        assert_eq!(&data[p..p + 4], b"PK\x01\x02", "central entry at {p}");
        let le16 = |at: usize| u16::from_le_bytes([data[at], data[at + 1]]) as usize;
        out.push(p as u64);
        p += 46 + le16(p + 28) + le16(p + 30) + le16(p + 32);
    }
    out
}

/// One damage case: what, the damaged bytes, and which top-level entry's
/// local header (if any) was hit.
struct Case {
    what: String,
    bytes: Vec<u8>,
    hit: Option<usize>,
}

/// Which structure a damage case hits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Where {
    Local,
    Central,
    End,
}

fn zip_damage_cases(name: &str, place: Where) -> Vec<Case> {
    let a = archive(name);
    let data = fixture(name);
    let members = zip_members(name);
    let mut cases = Vec::new();
    let mut add = |wh: Where, what: String, at: u64, hit: Option<usize>| {
        if wh != place {
            return;
        }
        let mut d = data.clone();
        flip(&mut d, at, 0xff);
        cases.push(Case {
            what: format!("{name}: {what} (byte {at} flipped)"),
            bytes: d,
            hit,
        });
    };
    for (i, m) in members.iter().enumerate() {
        let (h, n) = (m.header_offset, &m.name);
        for (what, off) in [("signature", 1), ("method", 8), ("name length", 26)] {
            let what = format!("local header {what} of {n:?}");
            add(Where::Local, what, h + off, Some(i));
        }
    }
    let cd = cd_entries(&data, u(&a["cd_offset"]), members.len());
    for (i, &c) in cd.iter().enumerate() {
        let n = &members[i].name;
        for (what, off) in [("signature", 1), ("local-header offset", 42)] {
            let what = format!("central entry {what} of {n:?}");
            add(Where::Central, what, c + off, None);
        }
    }
    let e = u(&a["eocd_offset"]);
    for (what, off) in [
        ("signature", 1),
        ("entry count", 10),
        ("directory offset", 16),
    ] {
        add(Where::End, format!("end record {what}"), e + off, None);
    }
    cases
}

/// Flipped bytes in local headers (signature, method, name length), in
/// central directory entries (signature, local-header offset) and in the
/// end record (signature, entry count, directory offset): every entry whose
/// own local header was not hit is recovered byte-exact and Complete (inner
/// zips' entries too), nothing is invented when only the directory or end
/// record is hit, and the damage is noticed.
fn zip_damage(place: Where, what: &str) {
    let mut f = Failures::default();
    for name in ZIPS {
        let members = zip_members(name);
        let sources = sources_of(&members);
        let layers = layers(name);
        for case in zip_damage_cases(name, place) {
            let session = parse_named(name, case.bytes, &case.what);
            let t = session.tree();
            let what = &case.what;
            if t.status_of(0) == Status::Complete {
                f.push(format!(
                    "{what}: the damage went unnoticed (status Complete)"
                ));
            }
            for (i, m) in members.iter().enumerate() {
                if Some(i) == case.hit {
                    continue;
                }
                check_whole_entry(&t, what, &m.name, m, &sources, &mut f);
            }
            for l in &layers {
                let lsources = sources_of(&l.members);
                for m in &l.members {
                    let path = format!("{}{}", l.prefix, m.name);
                    check_whole_entry(&t, what, &path, m, &lsources, &mut f);
                }
            }
            if case.hit.is_none() {
                let names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
                if child_names(&t, 0) != names {
                    f.push(format!(
                        "{what}: entries {:?}, expected {names:?}",
                        child_names(&t, 0)
                    ));
                }
            }
        }
    }
    f.check(what);
}

/// Local headers: signature, method, name length of each entry.
#[test]
fn zip_local_header_damage() {
    zip_damage(Where::Local, "zip local header damage");
}

/// Central directory entries: signature and local-header offset.
#[test]
fn zip_central_directory_damage() {
    zip_damage(Where::Central, "zip central directory damage");
}

/// End of central directory record: signature, entry count, directory offset.
#[test]
fn zip_end_record_damage() {
    zip_damage(Where::End, "zip end record damage");
}

fn check_whole_entry(
    t: &Tree,
    what: &str,
    path: &str,
    m: &ZipMember,
    sources: &BTreeMap<String, Vec<u8>>,
    f: &mut Failures,
) {
    let Some(id) = t.resolve(path) else {
        f.push(format!("{what}: undamaged {path:?} is lost"));
        return;
    };
    if t.exts[id].kind.as_str() != m.kind {
        f.push(format!(
            "{what}: {path:?} is a {}, pparse says {}",
            m.kind,
            t.exts[id].kind.as_str()
        ));
        return;
    }
    if !m.is_file() {
        return;
    }
    let got = read_all(t, id);
    if got != sources[&m.name] {
        f.push(format!(
            "{what}: undamaged {path:?} has {} bytes, expected its {} source bytes",
            got.len(),
            m.size
        ));
    } else if t.status_of(id) != Status::Complete {
        f.push(format!(
            "{what}: undamaged {path:?} is byte-exact but {:?}: {}",
            t.status_of(id),
            damage_text(t, id)
        ));
    }
}

/// dd_stored.zip's `trap.bin` is stored with a data descriptor and holds a
/// fake `PK\x07\x08` descriptor and a fake `PK\x03\x04` local header. In
/// every mode — intact, central directory cut off, directory overwritten,
/// end record broken — it comes out whole and exact, and the fake header
/// never becomes an entry.
#[test]
fn dd_stored_trap_entry_survives_scanning() {
    let name = "dd_stored.zip";
    let a = archive(name);
    let data = fixture(name);
    let cd = u(&a["cd_offset"]);
    let cd_size = u(&a["cd_size"]);
    let eocd = u(&a["eocd_offset"]);
    let trap = fixture("src/zipsrc/trap.bin");
    let members = zip_members(name);
    assert_eq!(members[0].name, "trap.bin");
    let trap_end = members[0].end();
    let names: Vec<String> = members.into_iter().map(|m| m.name).collect();
    let mut rng = Rng::new(0x7a9b_0001);
    let mut cases: Vec<(String, Vec<u8>)> = vec![
        ("intact".into(), data.clone()),
        ("cut at the central directory".into(), truncated(&data, cd)),
        (
            "cut right after trap.bin's descriptor".into(),
            truncated(&data, trap_end),
        ),
    ];
    let mut d = data.clone();
    overwrite(&mut d, cd, cd_size, &mut rng);
    cases.push(("central directory overwritten".into(), d));
    let mut d = data.clone();
    flip(&mut d, eocd, 0xff);
    cases.push(("end record signature flipped".into(), d));
    let mut f = Failures::default();
    for (how, bytes) in cases {
        let what = format!("{name}: {how}");
        let session = parse_named(name, bytes, &what);
        let t = session.tree();
        match t.resolve("trap.bin") {
            None => f.push(format!("{what}: trap.bin is lost")),
            Some(id) => {
                let got = read_all(&t, id);
                if got != trap {
                    f.push(format!(
                        "{what}: trap.bin has {} bytes, expected {} (exact prefix: {})",
                        got.len(),
                        trap.len(),
                        trap.starts_with(&got)
                    ));
                } else if t.status_of(id) != Status::Complete {
                    f.push(format!(
                        "{what}: trap.bin is exact but {:?}: {}",
                        t.status_of(id),
                        damage_text(&t, id)
                    ));
                }
                if !t.exts[id].children.is_empty() {
                    f.push(format!(
                        "{what}: trap.bin was parsed into {:?}",
                        child_names(&t, id)
                    ));
                }
            }
        }
        for n in child_names(&t, 0) {
            if !names.contains(&n) {
                f.push(format!("{what}: invented entry {n:?}"));
            }
        }
    }
    f.check("dd_stored.zip trap");
}

/// An entry compressed with bzip2 (made by Info-ZIP `zip -Z bzip2`) is
/// decoded byte for byte, and the entries around it too — from the central
/// directory and, with the directory cut off, from the local-header scan.
/// A method pparse does not decode (PPMd, made by 7-Zip) is listed as such,
/// not passed off as a file.
#[test]
fn other_methods_are_decoded_or_listed() {
    let data = fixture("methods.zip");
    let cd = data
        .windows(4)
        .position(|w| w == b"PK\x01\x02")
        .expect("central directory") as u64;
    for (bytes, what) in [
        (data.clone(), "methods.zip"),
        (truncated(&data, cd), "methods.zip cut before its directory"),
    ] {
        let session = parse_named("methods.zip", bytes, what);
        let t = session.tree();
        assert_exact(&t, "alpha.txt", &source_bytes("src/zipsrc/alpha.txt"), what);
        assert_exact(&t, "beta.c", &source_bytes("src/zipsrc/beta.c"), what);
        assert_exact(&t, "noise.bin", &source_bytes("src/zipsrc/noise.bin"), what);
    }
    let session = parse("zip-ppmd-7z.zip", fixture("compress/zip-ppmd-7z.zip"));
    let t = session.tree();
    let id = t.resolve("alpha.txt").expect("ppmd entry listed");
    match &t.exts[id].kind {
        pparse::extraction::EntryKind::Other(w) => {
            assert!(w.contains("ppmd") && w.contains("not decoded"), "{w}");
        }
        k => panic!("ppmd entry is a {}", k.as_str()),
    }
    let t = parse("methods.zip", data).tree().exts.len();
    assert_eq!(t, 4, "the archive and its three entries");
}

/// Every file under `dir`, by its path relative to `dir`, with its bytes;
/// folders as `name/` with no bytes.
fn files_under(dir: &std::path::Path) -> BTreeMap<String, Option<Vec<u8>>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let rel = e
                .path()
                .strip_prefix(dir)
                .unwrap()
                .to_str()
                .unwrap()
                .to_string();
            if e.file_type().unwrap().is_dir() {
                out.insert(format!("{rel}/"), None);
                stack.push(e.path());
            } else {
                out.insert(rel, Some(std::fs::read(e.path()).unwrap()));
            }
        }
    }
    out
}

/// Java's ZipOutputStream deflates directory entries (2 bytes, sizes in a
/// data descriptor): they are directories all the same, as unzip takes
/// them, alone and inside a gzip stream read 4 KiB at a time. `pparse
/// extract` writes what `unzip` writes (it wrote files named `com`, and
/// the jar's files under `com~1/`).
#[test]
fn a_jars_deflated_directories_are_directories() {
    for jar in ["jar/sym.jar", "jar/tool.jar"] {
        let bytes = fixture(jar);
        let listed = output_of("unzip", &["-Z1".as_ref(), fixture_path(jar).as_os_str()]);
        let names: Vec<String> = String::from_utf8(listed)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        assert!(names.iter().any(|n| n.ends_with('/')), "{jar}: {names:?}");

        let gz = output_of("gzip", &["-c".as_ref(), fixture_path(jar).as_os_str()]);
        let small = pparse::Options {
            step_bytes: 4096,
            ..pparse::Options::default()
        };
        let alone = parse(jar, bytes.clone());
        let inside = parse_with("x.jar.gz", gz, small, &format!("{jar} in a .gz"));
        // gzip keeps the jar's name in its header: the stream is named so.
        let base = format!("{}/", jar.trim_start_matches("jar/"));
        for (s, top) in [(&alone, ""), (&inside, base.as_str())] {
            let t = s.tree();
            for n in &names {
                let id = t
                    .resolve(&format!("{top}{n}"))
                    .unwrap_or_else(|| panic!("{jar}: no {top}{n}\n{}", tree_text(&t)));
                let want = if n.ends_with('/') { "dir" } else { "file" };
                assert_eq!(t.exts[id].kind.as_str(), want, "{jar}: {top}{n}");
                assert_eq!(t.status_of(id), Status::Complete, "{jar}: {top}{n}");
            }
        }

        let tmp = tempfile::tempdir().unwrap();
        let (by_unzip, by_pparse) = (tmp.path().join("unzip"), tmp.path().join("pparse"));
        let ok = std::process::Command::new("unzip")
            .arg("-q")
            .arg(fixture_path(jar))
            .arg("-d")
            .arg(&by_unzip)
            .status()
            .expect("unzip runs");
        assert!(ok.success());
        let run = pparse([
            "extract",
            "--no-index",
            fixture_path(jar).to_str().unwrap(),
            "--out",
            by_pparse.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "{jar}: {}", run.stderr_text());
        let (a, b) = (files_under(&by_unzip), files_under(&by_pparse));
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            b.keys().collect::<Vec<_>>(),
            "{jar}: what unzip and pparse extract write"
        );
        assert!(a == b, "{jar}: the same bytes");
    }
}

/// A directory record of zeros after its signature (what a damaged
/// stream's lost bytes become when a zip inside it is recovered: an empty
/// name, offset 0, no CRC, no size) names no entry: the intact local
/// header at offset 0 is not condemned by it, that entry stays complete
/// and exact (its data checked against its own header's CRC), no entry is
/// made of the record, and the directory's damage is reported. It used to
/// mark the first entry corrupt and list an entry with an empty name.
#[test]
fn a_directory_record_of_zeros_does_not_condemn_the_entry_it_points_at() {
    let made = python(
        "import io, struct, sys, zipfile\n\
         z = io.BytesIO()\n\
         with zipfile.ZipFile(z, 'w', zipfile.ZIP_DEFLATED) as zf:\n\
         \x20   for n in ['first.txt', 'second.txt', 'third.txt']:\n\
         \x20       zf.writestr(n, (n + ' line\\n') * 2000)\n\
         b = bytearray(z.getvalue())\n\
         end = b.rfind(b'PK\\x05\\x06')\n\
         cd = struct.unpack('<I', b[end + 16:end + 20])[0]\n\
         b[cd + 4:cd + 46 + len('first.txt')] = bytes(42 + len('first.txt'))\n\
         sys.stdout.buffer.write(bytes(b))",
    );
    let session = parse_named("zeros.zip", made, "a directory record of zeros");
    let t = session.tree();
    let kids: Vec<String> = t.exts[0]
        .children
        .iter()
        .map(|&k| t.exts[k].name.to_string())
        .collect();
    assert_eq!(kids, ["first.txt", "second.txt", "third.txt"]);
    for name in ["first.txt", "second.txt", "third.txt"] {
        let id = t.resolve(name).unwrap();
        assert_eq!(t.status_of(id), Status::Complete, "{name}");
        assert_eq!(
            read_all(&t, id),
            format!("{name} line\n").repeat(2000).into_bytes()
        );
    }
    assert_eq!(t.status_of(0), Status::Corrupt);
    assert!(
        t.root()
            .damage
            .iter()
            .any(|d| d.reason.contains("has an empty name")),
        "{:?}",
        t.root().damage
    );
}
