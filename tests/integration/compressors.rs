//! bzip2, xz and zstd on files made by the real tools
//! (fixtures/make_compressors.sh): the tar inside lists the members
//! Python's tarfile lists, member bytes are exact, and damage sweeps show
//! that damage loses only its block or frame: every byte of a block or
//! frame reported intact is the original, damage is reported, and the
//! blocks after it come back.

use std::collections::BTreeMap;

use pparse::{Status, Tree};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::util::*;

const FILES: &[(&str, &str)] = &[
    ("compress/nested.tar.bz2", "bzip2"),
    ("compress/nested.tar.xz", "xz"),
    ("compress/nested.txz", "xz"),
    ("compress/nested.tar.zst", "zstd"),
];

fn cmanifest() -> Value {
    let text = std::fs::read_to_string(fixture_path("compress/manifest.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The original tar (decoded by the real tool at fixture time: its hash is
/// in the manifest) as pparse decodes an intact file, checked against it.
fn original_tar() -> Vec<u8> {
    let m = cmanifest();
    let s = parse("nested.tar.zst", fixture("compress/nested.tar.zst"));
    let t = s.tree();
    let tar = read_all(&t, t.exts[0].children[0]);
    assert_eq!(hex(&Sha256::digest(&tar)), s_(&m["tar"]["sha256"]));
    tar
}

fn s_(v: &Value) -> &str {
    v.as_str().unwrap()
}

/// One block or frame of a parse, from the root's nodes.
#[derive(Debug, Clone)]
struct Unit {
    input: (u64, u64),
    out: (u64, u64),
    clean: bool,
}

fn units(t: &Tree) -> Vec<Unit> {
    let mut v = Vec::new();
    for n in &t.exts[0].nodes {
        if !matches!(
            n.kind,
            "block" | "frame" | "partial block" | "partial frame"
        ) {
            continue;
        }
        let Some(pparse::node::Value::Str(s)) = &n.value else {
            continue;
        };
        let Some(rest) = s.split("decoded 0x").nth(1) else {
            continue;
        };
        let a = rest.split("..").next().unwrap();
        let b = rest.split("..0x").nth(1).unwrap();
        let b: String = b.chars().take_while(|c| c.is_ascii_hexdigit()).collect();
        v.push(Unit {
            input: (n.range.start, n.range.end),
            out: (
                u64::from_str_radix(a, 16).unwrap(),
                u64::from_str_radix(&b, 16).unwrap(),
            ),
            clean: n.damage.is_none() && matches!(n.kind, "block" | "frame"),
        });
    }
    v
}

#[test]
fn trees_list_what_tarfile_lists_and_cat_is_exact() {
    let m = cmanifest();
    let members = m["tar"]["members"].as_array().unwrap();
    for (file, parser) in FILES {
        let s = parse(file, fixture(file));
        let t = s.tree();
        assert_eq!(t.exts[0].parser(), Some(*parser), "{file}");
        assert_eq!(
            t.status_of(0),
            Status::Complete,
            "{file}\n{}",
            tree_text(&t)
        );
        let tar = t.exts[0].children[0];
        let name = t.exts[tar].display_name();
        assert!(name.ends_with(".tar"), "{file}: stream named {name}");
        assert_eq!(t.exts[tar].parser(), Some("tar"), "{file}");
        assert_eq!(t.exts[tar].size(), u(&m["tar"]["size"]), "{file}");
        let mut got: BTreeMap<String, ExtIdOf> = BTreeMap::new();
        for &c in &t.exts[tar].children {
            got.insert(t.exts[c].display_name(), c);
        }
        for mem in members {
            let n = s_(&mem["name"]);
            let n = n.strip_prefix("./").unwrap_or(n);
            if s_(&mem["type"]) != "0" {
                continue;
            }
            let id = got
                .iter()
                .find(|(k, _)| k.trim_start_matches("./") == n)
                .map(|(_, v)| *v)
                .unwrap_or_else(|| panic!("{file}: no member {n}: {:?}", got.keys()));
            let bytes = read_all(&t, id);
            assert_eq!(bytes.len() as u64, u(&mem["size"]), "{file}: {n}");
            assert_eq!(
                hex(&Sha256::digest(&bytes)),
                s_(&mem["sha256"]),
                "{file}: {n}"
            );
        }
        let files = members.iter().filter(|m| s_(&m["type"]) == "0").count();
        let listed = t.exts[tar]
            .children
            .iter()
            .filter(|&&c| t.exts[c].kind.as_str() == "file")
            .count();
        assert_eq!(listed, files, "{file}: {}", tree_text(&t));
    }
}

type ExtIdOf = pparse::ExtId;

#[test]
fn structure_shows_blocks_and_frames() {
    let s = parse("nested.tar.bz2", fixture("compress/nested.tar.bz2"));
    let u = units(&s.tree());
    assert!(u.len() >= 5, "bzip2 -1 of 480 kB makes 5 blocks: {u:?}");
    let s = parse("nested.tar.xz", fixture("compress/nested.tar.xz"));
    let t = s.tree();
    let kinds: Vec<&str> = t.exts[0].nodes.iter().map(|n| n.kind).collect();
    assert_eq!(kinds.first(), Some(&"stream header"));
    assert!(
        kinds.contains(&"index") && kinds.contains(&"stream footer"),
        "{kinds:?}"
    );
    assert!(units(&t).len() >= 7, "{kinds:?}");
    let s = parse("nested.tar.zst", fixture("compress/nested.tar.zst"));
    let t = s.tree();
    let kinds: Vec<&str> = t.exts[0].nodes.iter().map(|n| n.kind).collect();
    assert_eq!(
        kinds,
        ["frame", "frame", "skippable frame", "frame", "frame"],
        "{}",
        tree_text(&t)
    );
    for (f, want) in [
        ("small.bz2", "small"),
        ("small.xz", "small"),
        ("small.zst", "small"),
    ] {
        let s = parse(f, fixture(&format!("compress/{f}")));
        let t = s.tree();
        assert_eq!(t.status_of(0), Status::Complete, "{}", tree_text(&t));
        let c = t.exts[0].children[0];
        assert_eq!(t.exts[c].display_name(), want);
        let b = read_all(&t, c);
        assert_eq!(
            hex(&Sha256::digest(&b)),
            s_(&cmanifest()["small"]["sha256"])
        );
    }
}

/// Checks one damaged parse against the intact one: every clean unit's
/// bytes are the original's; damage is reported when a unit's bytes were
/// changed; every unit whose compressed bytes the damage did not touch
/// comes back clean (except after a truncation, for units past the cut).
/// The intact file: its bytes, its units, the tar they decode to.
struct Intact<'a> {
    original: &'a [u8],
    units: &'a [Unit],
    tar: &'a [u8],
}

fn check(
    file: &str,
    damaged: Vec<u8>,
    r: &Intact,
    hit: (u64, u64),
    truncated_at: Option<u64>,
    f: &mut Failures,
) {
    let (original, intact, tar) = (r.original, r.units, r.tar);
    let what = format!("{file}: {}", describe(hit, truncated_at));
    let changed = truncated_at.is_some() || damaged != original;
    let s = parse_named(file, damaged, &what);
    let t = s.tree();
    if t.exts[0].children.is_empty() {
        // No block decoded at all (damage at the very start).
        if changed && t.status_of(0) == Status::Complete {
            f.push(format!("{what}: nothing decoded yet complete"));
        }
        return;
    }
    let stream = t.exts[0].children[0];
    let data = t.exts[stream].data();
    let got = units(&t);
    for u in &got {
        if !u.clean {
            continue;
        }
        let Some(o) = intact.iter().find(|o| o.input.0 == u.input.0) else {
            f.push(format!(
                "{what}: clean unit at {:?} not in the intact file",
                u.input
            ));
            continue;
        };
        let len = u.out.1 - u.out.0;
        if len != o.out.1 - o.out.0 {
            f.push(format!(
                "{what}: unit at {:#x} decoded {len} bytes, not {}",
                u.input.0,
                o.out.1 - o.out.0
            ));
            continue;
        }
        let mut buf = vec![0u8; len as usize];
        let n = data.read_at(u.out.0, &mut buf).unwrap_or(0);
        if n as u64 != len || buf[..] != tar[o.out.0 as usize..o.out.1 as usize] {
            f.push(format!(
                "{what}: unit at {:#x} is clean but its bytes are wrong",
                u.input.0
            ));
        }
    }
    // Damage touching a unit's compressed bytes is reported.
    let touched = intact
        .iter()
        .any(|o| o.input.0 < hit.1 && hit.0 < o.input.1);
    if changed && touched && t.status_of(0) == Status::Complete {
        f.push(format!("{what}: damage not reported\n{}", tree_text(&t)));
    }
    // Units the damage did not touch come back whole.
    for o in intact {
        let untouched = o.input.1 <= hit.0 || hit.1 <= o.input.0;
        let before_cut = truncated_at.is_none_or(|c| o.input.1 <= c);
        if untouched && before_cut && !got.iter().any(|u| u.clean && u.input.0 == o.input.0) {
            f.push(format!(
                "{what}: unit at {:#x}..{:#x} not recovered\n{}",
                o.input.0,
                o.input.1,
                tree_text(&t)
            ));
        }
    }
    // A truncated file keeps a prefix of the original, exactly, and at
    // least every unit before the cut.
    if let Some(c) = truncated_at {
        let all = read_all(&t, stream);
        if all[..] != tar[..all.len().min(tar.len())] {
            f.push(format!("{what}: decoded prefix differs"));
        }
        let need = intact
            .iter()
            .filter(|o| o.input.1 <= c)
            .map(|o| o.out.1)
            .max()
            .unwrap_or(0);
        if (all.len() as u64) < need {
            f.push(format!(
                "{what}: only {} decoded bytes, {need} expected",
                all.len()
            ));
        }
        if t.status_of(0) == Status::Complete && c < original.len() as u64 {
            f.push(format!("{what}: cut file is complete"));
        }
    }
}

fn describe(hit: (u64, u64), cut: Option<u64>) -> String {
    match cut {
        Some(c) => format!("truncated at {c}"),
        None => format!("{}..{} overwritten", hit.0, hit.1),
    }
}

fn sweep(file: &str) {
    let original = fixture(file);
    let tar = original_tar();
    let s = parse(file, original.clone());
    let intact = units(&s.tree());
    drop(s);
    assert!(intact.len() >= 4, "{file}: {intact:?}");
    let r = Intact {
        original: &original,
        units: &intact,
        tar: &tar,
    };
    let mut f = Failures::default();
    let mut rng = Rng::new(file.len() as u64 * 7919);
    let len = original.len() as u64;
    for (n, zeros) in [
        (1u64, false),
        (16, false),
        (4096, false),
        (1, true),
        (16, true),
        (4096, true),
    ] {
        for i in 0..22u64 {
            // Spread over the file, with a seeded jitter.
            let start = (len * i / 22 + rng.below(len / 44 + 1)).min(len - n);
            let mut d = original.clone();
            if zeros {
                d[start as usize..(start + n) as usize].fill(0);
            } else {
                overwrite(&mut d, start, n, &mut rng);
            }
            check(file, d, &r, (start, start + n), None, &mut f);
        }
    }
    for i in 0..40u64 {
        let cut = len * i / 40 + rng.below(len / 80 + 1);
        let cut = cut.min(len - 1);
        check(
            file,
            truncated(&original, cut),
            &r,
            (cut, len),
            Some(cut),
            &mut f,
        );
    }
    f.check(file);
}

#[test]
fn bzip2_damage_sweep() {
    sweep("compress/nested.tar.bz2");
}

#[test]
fn xz_damage_sweep() {
    sweep("compress/nested.tar.xz");
}

#[test]
fn zstd_damage_sweep() {
    sweep("compress/nested.tar.zst");
}

/// Damage in block 2 of a 5-block bzip2 file: blocks 3 to 5 come back byte
/// for byte, and the members they hold are found by the tar parser.
#[test]
fn bzip2_block_two_lost_later_blocks_back() {
    let file = "compress/nested.tar.bz2";
    let original = fixture(file);
    let tar = original_tar();
    let s = parse(file, original.clone());
    let intact = units(&s.tree());
    drop(s);
    assert_eq!(intact.len(), 5, "{intact:?}");
    let b2 = &intact[1];
    let mid = (b2.input.0 + b2.input.1) / 2;
    let mut d = original.clone();
    d[mid as usize..mid as usize + 4096].fill(0x55);
    let s = parse("nested.tar.bz2", d);
    let t = s.tree();
    assert_eq!(t.status_of(0), Status::Corrupt);
    let got = units(&t);
    let stream = t.exts[0].children[0];
    let data = t.exts[stream].data();
    for o in &intact[2..] {
        let u = got
            .iter()
            .find(|u| u.input.0 == o.input.0 && u.clean)
            .unwrap_or_else(|| panic!("block at {:#x} lost\n{}", o.input.0, tree_text(&t)));
        let mut buf = vec![0; (u.out.1 - u.out.0) as usize];
        data.read_at(u.out.0, &mut buf).unwrap();
        assert_eq!(buf[..], tar[o.out.0 as usize..o.out.1 as usize]);
    }
    let dt = damage_text(&t, stream);
    assert!(
        dt.contains("decoded length of what they held is unknown"),
        "{dt}"
    );
}

/// A damaged block magic: the block it began is lost (and reported), the
/// block before it and the blocks after it come back.
#[test]
fn bzip2_block_magic_damaged() {
    let file = "compress/nested.tar.bz2";
    let original = fixture(file);
    let tar = original_tar();
    let s = parse(file, original.clone());
    let intact = units(&s.tree());
    drop(s);
    // Block 3's magic starts in the byte its input range starts at.
    let at = intact[2].input.0 as usize;
    for fill in [0x00u8, 0xff, 0x5a] {
        let mut d = original.clone();
        d[at + 1..at + 5].fill(fill);
        let s = parse("nested.tar.bz2", d);
        let t = s.tree();
        assert_eq!(t.status_of(0), Status::Corrupt, "{}", tree_text(&t));
        let got = units(&t);
        let stream = t.exts[0].children[0];
        let data = t.exts[stream].data();
        for o in [&intact[0], &intact[1], &intact[3], &intact[4]] {
            let u = got
                .iter()
                .find(|u| u.input.0 == o.input.0 && u.clean)
                .unwrap_or_else(|| panic!("block at {:#x} lost\n{}", o.input.0, tree_text(&t)));
            let mut buf = vec![0; (u.out.1 - u.out.0) as usize];
            data.read_at(u.out.0, &mut buf).unwrap();
            assert_eq!(buf[..], tar[o.out.0 as usize..o.out.1 as usize]);
        }
        assert!(
            damage_text(&t, 0).contains("not a block magic"),
            "{}",
            damage_text(&t, 0)
        );
    }
}

/// `pparse cat` of a member inside each compressed tar is byte-exact, and
/// `tree --json` names the parsers.
#[test]
fn cat_and_tree_json() {
    let m = cmanifest();
    let readme = m["tar"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| s_(&e["name"]).ends_with("README.md"))
        .unwrap();
    for (file, parser) in FILES {
        let path = fixture_path(file);
        // `.tar.xz` and `.txz` alike decode to `nested.tar`.
        let stem = "nested.tar";
        let out = std::process::Command::new(BIN)
            .args(["cat", "--no-index"])
            .arg(&path)
            .arg(format!("{stem}/{}", s_(&readme["name"])))
            .output()
            .unwrap();
        assert!(out.status.success(), "{file}: {out:?}");
        assert_eq!(
            hex(&Sha256::digest(&out.stdout)),
            s_(&readme["sha256"]),
            "{file}"
        );
        let out = std::process::Command::new(BIN)
            .args(["tree", "--json", "--no-index"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(out.status.success(), "{file}: {out:?}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["parser"], *parser);
        assert_eq!(v["children"][0]["parser"], "tar");
        assert_eq!(v["children"][0]["kind"], "stream");
    }
}

/// Zip entries compressed with LZMA (7-Zip, Python), zstd (methods 93 and
/// 20) and xz (95) decode byte for byte; damage inside one is reported on
/// that entry and the others stay exact.
#[test]
fn zip_entries_of_other_methods() {
    let src = |n: &str| fixture(&format!("src/zipsrc/{n}"));
    for (file, names) in [
        ("compress/zip-lzma-7z.zip", &["alpha.txt", "beta.c"][..]),
        ("compress/zip-lzma-py.zip", &["alpha.txt", "beta.c"]),
        (
            "compress/zip-zstd-xz.zip",
            &["alpha.txt", "beta.c", "noise.bin"],
        ),
    ] {
        let s = parse(file, fixture(file));
        let t = s.tree();
        assert_eq!(t.status_of(0), Status::Complete, "{}", tree_text(&t));
        for n in names {
            let id = t.resolve(n).unwrap_or_else(|| panic!("{file}: {n}"));
            assert_eq!(read_all(&t, id), src(n), "{file}: {n}");
        }
        // 16 bytes of each entry's data overwritten: that entry is damaged
        // and says so; every entry still complete is exact.
        for n in names {
            let mut d = fixture(file);
            let at = d.windows(n.len()).position(|w| w == n.as_bytes()).unwrap() + n.len() + 40;
            d[at..at + 16].fill(0xa5);
            let what = format!("{file}: {n} data overwritten");
            let s = parse_named(file, d, &what);
            let t = s.tree();
            let id = t.resolve(n).unwrap_or_else(|| panic!("{what}: {n}"));
            assert_ne!(
                t.status_of(id),
                Status::Complete,
                "{what}\n{}",
                tree_text(&t)
            );
            for m in names {
                if let Some(j) = t.resolve(m)
                    && t.status_of(j) == Status::Complete
                {
                    assert_eq!(read_all(&t, j), src(m), "{what}: {m}");
                }
            }
        }
    }
}

/// Concatenated streams (and xz stream padding) decode into one stream,
/// as `bunzip2`, `unxz` and `unzstd` write one file.
#[test]
fn concatenated_streams() {
    let small = {
        let s = parse("small.zst", fixture("compress/small.zst"));
        let t = s.tree();
        read_all(&t, t.exts[0].children[0])
    };
    for (name, pad) in [("small.bz2", 0usize), ("small.xz", 8), ("small.zst", 0)] {
        let one = fixture(&format!("compress/{name}"));
        let mut two = one.clone();
        two.extend(std::iter::repeat_n(0u8, pad));
        two.extend_from_slice(&one);
        let s = parse(name, two);
        let t = s.tree();
        assert_eq!(
            t.status_of(0),
            Status::Complete,
            "{name}\n{}",
            tree_text(&t)
        );
        let got = read_all(&t, t.exts[0].children[0]);
        assert_eq!(got, [&small[..], &small[..]].concat(), "{name}");
        // Padding that is not a multiple of 4 bytes is damage in xz.
        if pad > 0 {
            let mut bad = one.clone();
            bad.extend([0u8; 3]);
            let s = parse(name, bad);
            assert_eq!(s.tree().status_of(0), Status::Corrupt, "{name}");
        }
    }
}

/// The session's decode budget stops a decoder that produces too much (a
/// decompression bomb): the stream is truncated, with a note.
#[test]
fn decode_budget_stops_the_decoders() {
    for file in [
        "compress/nested.tar.bz2",
        "compress/nested.tar.xz",
        "compress/nested.tar.zst",
    ] {
        let options = pparse::Options {
            decode_ratio: 1,
            decode_floor: 100_000,
            ..Default::default()
        };
        let session = pparse::Session::from_bytes(file, fixture(file), options);
        let start = std::time::Instant::now();
        while !session.is_finished() {
            assert!(start.elapsed() < DEADLINE, "{file}: hang");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let t = session.tree();
        let stream = t.exts[0].children[0];
        assert_eq!(
            t.status_of(stream),
            Status::Truncated,
            "{file}\n{}",
            tree_text(&t)
        );
        assert!(t.exts[stream].size() < 491_520, "{file}");
        let notes = format!("{:?}", t.exts[0].notes());
        assert!(notes.contains("decompression bomb"), "{file}: {notes}");
    }
}

/// An xz stream whose header is destroyed: its blocks are found, and their
/// check type (SHA-256 in nested.txz, CRC64 in nested.tar.xz) is taken from
/// where the next block starts, so every block checks out.
#[test]
fn xz_stream_header_lost() {
    for file in ["compress/nested.txz", "compress/nested.tar.xz"] {
        let original = fixture(file);
        let intact = units(&parse(file, original.clone()).tree());
        let mut d = original.clone();
        d[0..12].fill(0x33);
        let s = parse(file, d);
        let t = s.tree();
        assert_eq!(t.status_of(0), Status::Corrupt);
        let got = units(&t);
        for o in &intact {
            assert!(
                got.iter().any(|u| u.clean && u.input.0 == o.input.0),
                "{file}: block at {:#x} not back\n{}",
                o.input.0,
                tree_text(&t)
            );
        }
    }
}

/// Damage at the very start (the bzip2 header and first block magic, the
/// first bytes of the first zstd frame): the file is still taken for what
/// its name says, the damage is reported, and the later blocks or frames
/// come back.
#[test]
fn start_destroyed() {
    for file in ["compress/nested.tar.bz2", "compress/nested.tar.zst"] {
        let original = fixture(file);
        let intact = units(&parse(file, original.clone()).tree());
        let mut d = original.clone();
        d[0..12].fill(0x33);
        let s = parse(file, d);
        let t = s.tree();
        assert_eq!(t.status_of(0), Status::Corrupt, "{file}\n{}", tree_text(&t));
        let got = units(&t);
        for o in &intact[1..] {
            assert!(
                got.iter().any(|u| u.clean && u.input.0 == o.input.0),
                "{file}: unit at {:#x} not back\n{}",
                o.input.0,
                tree_text(&t)
            );
        }
    }
}
