//! Recovery through damage inside one deflate stream: a single-member
//! tar.gz of real files (this repository's sources, docs and fixtures,
//! made at test time by GNU tar and GNU gzip) with 4 KiB of random bytes
//! written over it where they stop the decoder. Expectations come from
//! the undamaged tar read by Python's tarfile, never from pparse.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use pparse::{Status, Tree};

use crate::util::*;

/// One regular file of the tar, as tarfile lists it.
struct Member {
    /// Offset of its data in the tar.
    data: u64,
    size: u64,
}

struct Sample {
    tar: Vec<u8>,
    gz: Vec<u8>,
    members: HashMap<String, Member>,
}

impl Sample {
    /// Where the data of the member holding tar offset `at` starts: the
    /// last member whose data starts at or before it.
    fn data_holding(&self, at: u64) -> u64 {
        let starts = self.members.values().map(|m| m.data);
        starts.filter(|&d| d <= at).max().expect("a member before")
    }

    /// The block after the last header at or before tar offset `at`, of
    /// any kind (a folder's, a long name's): where a walk along the header
    /// chain stops vouching when damage begins at `at`.
    fn after_header_before(&self, at: u64) -> u64 {
        let mut h = 0u64;
        let mut after = 0;
        while h + 512 <= at.min(self.tar.len() as u64) {
            let b = &self.tar[h as usize..h as usize + 512];
            if b.iter().all(|&c| c == 0) {
                break;
            }
            let size = std::str::from_utf8(&b[124..136])
                .ok()
                .and_then(|t| {
                    u64::from_str_radix(t.trim_matches(|c| c == '\0' || c == ' '), 8).ok()
                })
                .unwrap_or(0);
            let size = if matches!(b[156], b'1'..=b'6') {
                0
            } else {
                size
            };
            after = h + 512;
            h = after + size.div_ceil(512) * 512;
        }
        after
    }
}

fn sample() -> &'static Sample {
    static S: OnceLock<Sample> = OnceLock::new();
    S.get_or_init(|| make_sample("recovery", &["crates", "docs", "fixtures", "tests"], GZIP_6))
}

/// A smaller one (the sources and docs) for sweeps of many damaged copies.
fn small_sample() -> &'static Sample {
    static S: OnceLock<Sample> = OnceLock::new();
    S.get_or_init(|| make_sample("recovery-small", &["crates", "docs"], GZIP_6))
}

/// The small sample compressed into fixed-Huffman blocks only (zlib's
/// `Z_FIXED` strategy, through Python's zlib).
fn fixed_sample() -> &'static Sample {
    static S: OnceLock<Sample> = OnceLock::new();
    S.get_or_init(|| {
        // The sources last of all would leave nothing but sources after
        // damage late in the stream: the share that comes back would move
        // with every commit that grows them. With the fixtures last, what
        // follows the damage is a mix wherever it falls.
        make_sample(
            "recovery-fixed",
            &["crates", "docs", "tests", "fixtures"],
            ZLIB_FIXED,
        )
    })
}

/// How a sample's tar is compressed: a command that reads the tar named
/// last and writes a single-member gzip file with a 10-byte header.
type Compressor = &'static [&'static str];
const GZIP_6: Compressor = &["gzip", "-6", "-n", "-c"];
const ZLIB_FIXED: Compressor = &[
    "python3",
    "-c",
    "import sys,zlib\n\
     c = zlib.compressobj(6, zlib.DEFLATED, 31, 8, zlib.Z_FIXED)\n\
     d = open(sys.argv[1], 'rb').read()\n\
     sys.stdout.buffer.write(c.compress(d) + c.flush())",
];

fn make_sample(dir: &str, what: &[&str], compressor: Compressor) -> Sample {
    {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(dir);
        std::fs::create_dir_all(&dir).unwrap();
        let tar = dir.join("real.tar");
        let root = env!("CARGO_MANIFEST_DIR");
        let ok = Command::new("tar")
            .args(["--format=gnu", "--sort=name", "--mtime=@0", "--owner=0"])
            .args(["--group=0", "--numeric-owner", "-cf"])
            .arg(&tar)
            .args(["-C", root])
            .args(what)
            .status()
            .expect("GNU tar runs");
        assert!(ok.success());
        let gz = Command::new(compressor[0])
            .args(&compressor[1..])
            .arg(&tar)
            .output()
            .expect("the compressor runs");
        assert!(gz.status.success());
        let list = Command::new("python3")
            .arg("-c")
            .arg(
                "import sys,tarfile\n\
                 for m in tarfile.open(sys.argv[1]):\n\
                 \x20   if m.isfile(): print(m.offset_data, m.size, m.name)",
            )
            .arg(&tar)
            .output()
            .expect("python3 runs");
        assert!(list.status.success());
        let members = String::from_utf8(list.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let mut f = l.splitn(3, ' ');
                let data = f.next().unwrap().parse().unwrap();
                let size = f.next().unwrap().parse().unwrap();
                (f.next().unwrap().to_string(), Member { data, size })
            })
            .collect();
        Sample {
            tar: std::fs::read(&tar).unwrap(),
            gz: gz.stdout,
            members,
        }
    }
}

/// Length of the gzip header GNU gzip -n writes (no name, no extras).
const GZ_HEADER: usize = 10;

/// Whether the raw deflate data stops with an error before its end.
fn hard_error(gz: &[u8]) -> bool {
    let body = &gz[GZ_HEADER..gz.len() - 8];
    let mut z = flate2::Decompress::new(false);
    let mut out = vec![0u8; 1 << 20];
    loop {
        let before = (z.total_in(), z.total_out());
        let at = z.total_in() as usize;
        match z.decompress(&body[at..], &mut out, flate2::FlushDecompress::None) {
            Ok(flate2::Status::StreamEnd) => return false,
            Err(_) => return true,
            Ok(_) if (z.total_in(), z.total_out()) == before => return true,
            Ok(_) => {}
        }
    }
}

/// Unknown-byte ranges of an extraction, from its damage list.
fn unknown_ranges(t: &Tree, id: pparse::ExtId) -> Vec<(u64, u64)> {
    t.exts[id]
        .damage
        .iter()
        .filter(|d| d.reason.starts_with("unknown bytes"))
        .map(|d| (d.range.start, d.range.end))
        .collect()
}

#[test]
fn members_after_a_hard_deflate_error_come_back_whole() {
    hard_damage(sample(), 15, 12, 93);
}

/// The same when every block is a fixed-Huffman one: no block header to
/// check, so the finder must prove candidates by decoding on, and bytes
/// are unknown until decoding is surely in step with the real symbols
/// (a check that an error-free run alone missed: it let through 9,487
/// wrong bytes in one of these copies). Fewer members come back whole
/// where the damage hits the sources: source files copy each other's
/// words, so bytes copied from the lost window are copied on and on (the
/// same holds for dynamic blocks; these copies fall there).
#[test]
fn fixed_huffman_streams_resync_too() {
    hard_damage(fixed_sample(), 16, 8, 60);
}

/// Writes 4 KiB of random bytes over `want` copies of `s` where they stop
/// the decoder; asserts that no member is complete with wrong bytes, that
/// every recovered stream's known bytes are the tar's, and that `pct`%
/// of the members that start 64 KiB past the damage come back whole.
fn hard_damage(s: &Sample, seed: u64, want: usize, pct: usize) {
    let mut rng = Rng::new(seed);
    let (mut cases, mut tries) = (0, 0);
    let (mut past, mut back) = (0usize, 0usize);
    let mut failures = Vec::new();
    while cases < want && tries < 50 * want {
        tries += 1;
        let len = s.gz.len() as u64;
        let at = rng.range(len / 20, len * 9 / 10);
        let mut gz = s.gz.clone();
        overwrite(&mut gz, at, 4096, &mut rng);
        if !hard_error(&gz) {
            continue;
        }
        cases += 1;
        let what = format!("real.tar.gz with 4 KiB random at {at:#x}");
        // Decoded offset where the damage begins.
        let dmg_out = inflated_len_from(&s.gz[GZ_HEADER..], at as usize - GZ_HEADER) as u64;
        if std::env::var_os("PPARSE_KEEP_CASES").is_some() {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("recovery");
            std::fs::write(dir.join(format!("case{seed}-{cases}.tar.gz")), &gz).unwrap();
        }
        let (p0, b0) = (past, back);
        let session = parse_named("real.tar.gz", gz, &what);
        let t = session.tree();
        let mut whole: HashMap<String, bool> = HashMap::new();
        let mut recovered_streams = 0;
        for id in 0..t.exts.len() {
            let e = &t.exts[id];
            let path = t.path_of(id);
            if path.contains("~recovered@") && e.parent() == Some(0) {
                recovered_streams += 1;
                check_aligned(&t, id, s, &what, &mut failures);
            }
            let Some((_, name)) = path.split_once('/') else {
                continue;
            };
            let Some(m) = s.members.get(name) else {
                continue;
            };
            if e.parent().is_none_or(|p| t.exts[p].parent() != Some(0)) {
                continue; // a member of a member
            }
            let st = t.status_of(id);
            if st == Status::Corrupt {
                continue;
            }
            let got = read_all(&t, id);
            let want = &s.tar[m.data as usize..(m.data + m.size) as usize];
            let exact = got == want;
            if st == Status::Complete && !exact {
                failures.push(format!(
                    "{what}: {path} is complete but its bytes are wrong"
                ));
            }
            if st == Status::Complete && exact {
                whole.insert(name.to_string(), true);
            }
        }
        if recovered_streams == 0 {
            failures.push(format!("{what}: no stream recovered after the damage"));
        }
        for (name, m) in &s.members {
            if m.data >= dmg_out + 64 * 1024 {
                past += 1;
                if whole.contains_key(name) {
                    back += 1;
                }
            }
        }
        eprintln!("{what}: {} of {} back", back - b0, past - p0);
    }
    eprintln!(
        "{cases} damaged copies ({tries} tried): {back} of {past} members past the damage whole"
    );
    assert!(
        cases * 3 >= want * 2,
        "only {cases} damaged copies stop the decoder"
    );
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(
        back * 100 >= past * pct,
        "{back} of {past} members that start 64 KiB past the damage came back whole"
    );
}

/// Every byte of a recovered stream that is not listed as unknown equals
/// the tar at the place it comes from (found by its first member).
fn check_aligned(t: &Tree, id: pparse::ExtId, s: &Sample, what: &str, failures: &mut Vec<String>) {
    let e = &t.exts[id];
    let bytes = read_all(t, id);
    let first = e.children.iter().find_map(|&c| {
        let name = t.exts[c].name.display();
        let m = s.members.get(&name)?;
        Some((t.exts[c].origin()?.start, m.data))
    });
    let shift = match first {
        Some((at, data)) => data.checked_sub(at),
        // No member whose header is known (tar headers copy each other,
        // so their bytes may stay unknown to the end): the last recovered
        // stream of a single-member gzip ends where the tar does.
        None if t.exts[0].children.last() == Some(&id) => {
            (s.tar.len() as u64).checked_sub(bytes.len() as u64)
        }
        None => return,
    };
    let Some(shift) = shift else {
        failures.push(format!("{what}: {} is misaligned", t.path_of(id)));
        return;
    };
    let unknown = unknown_ranges(t, id);
    let is_unknown = |i: u64| unknown.iter().any(|&(a, b)| a <= i && i < b);
    let mut wrong = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let j = i as u64 + shift;
        if s.tar.get(j as usize) != Some(&b) && !is_unknown(i as u64) {
            wrong += 1;
        }
    }
    if wrong > 0 {
        failures.push(format!(
            "{what}: {} has {wrong} bytes that differ from the tar and are not listed as unknown",
            t.path_of(id)
        ));
    }
}

/// A zip entry (Info-ZIP, deflated) damaged in the middle: its tail after
/// the damage is a child of its own whose known bytes are the file's.
#[test]
fn a_zip_entry_damaged_in_the_middle_keeps_its_tail() {
    let s = sample();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("recovery");
    let zip = dir.join("real.zip");
    let _ = std::fs::remove_file(&zip);
    let ok = Command::new("zip")
        .args(["-X", "-q", "-6", "-j"])
        .arg(&zip)
        .arg(dir.join("real.tar"))
        .status()
        .expect("Info-ZIP zip runs");
    assert!(ok.success());
    let bytes = std::fs::read(&zip).unwrap();
    // The entry's data: after the 30-byte local header and its name/extra.
    let nlen = u16::from_le_bytes([bytes[26], bytes[27]]) as usize;
    let xlen = u16::from_le_bytes([bytes[28], bytes[29]]) as usize;
    let data = 30 + nlen + xlen;
    let csize = u32::from_le_bytes(bytes[18..22].try_into().unwrap()) as usize;
    let mut rng = Rng::new(1515);
    let mut cases = 0;
    for _ in 0..200 {
        if cases == 4 {
            break;
        }
        let at = rng.range((data + csize / 4) as u64, (data + csize * 3 / 4) as u64);
        let mut z = bytes.clone();
        overwrite(&mut z, at, 4096, &mut rng);
        // Only copies where the decoder stops are of interest here.
        let mut d = flate2::Decompress::new(false);
        let mut sink = vec![0u8; 1 << 20];
        let mut stopped = false;
        loop {
            let pos = d.total_in() as usize;
            let before = (d.total_in(), d.total_out());
            match d.decompress(
                &z[data + pos..data + csize],
                &mut sink,
                flate2::FlushDecompress::None,
            ) {
                Ok(flate2::Status::StreamEnd) => break,
                Err(_) => {
                    stopped = true;
                    break;
                }
                Ok(_) if (d.total_in(), d.total_out()) == before => break,
                Ok(_) => {}
            }
        }
        if !stopped {
            continue;
        }
        cases += 1;
        let what = format!("real.zip with 4 KiB random at {at:#x}");
        let session = parse_named("real.zip", z, &what);
        let t = session.tree();
        let rec: Vec<_> = (0..t.exts.len())
            .filter(|&i| t.path_of(i).contains("real.tar~recovered@"))
            .collect();
        assert_eq!(rec.len(), 1, "{what}: {}", tree_text(&t));
        let id = rec[0];
        assert_eq!(t.status_of(id), Status::Corrupt, "{what}");
        let got = read_all(&t, id);
        assert!(
            got.len() > 64 * 1024,
            "{what}: only {} bytes recovered",
            got.len()
        );
        // Align by the last 64 bytes, which are exact (the stream ends clean).
        let tail = &got[got.len() - 64..];
        assert!(
            unknown_ranges(&t, id)
                .iter()
                .all(|&(_, e)| e <= got.len() as u64 - 64)
        );
        let shift = s.tar.len() - got.len();
        assert_eq!(
            &s.tar[shift + got.len() - 64..],
            tail,
            "{what}: not the file's tail"
        );
        let unknown = unknown_ranges(&t, id);
        let wrong = got
            .iter()
            .enumerate()
            .filter(|&(i, &b)| {
                s.tar[shift + i] != b
                    && !unknown
                        .iter()
                        .any(|&(a, e)| a <= i as u64 && (i as u64) < e)
            })
            .count();
        assert_eq!(
            wrong, 0,
            "{what}: bytes differ and are not listed as unknown"
        );
    }
    assert_eq!(cases, 4, "too few damaged copies stop the decoder");
}

/// A damaged copy of a zip of `real.tar` whose recovered tail holds
/// unknown bytes: the bytes, the tail's name, its bytes with the listed
/// unknown ranges zeroed, the first unknown.
fn zip_with_unknown_tail(dir: &std::path::Path) -> (Vec<u8>, String, Vec<u8>, u64) {
    std::fs::create_dir_all(dir).unwrap();
    let zip = dir.join("x.zip");
    let _ = std::fs::remove_file(&zip);
    let ok = Command::new("zip")
        .args(["-X", "-q", "-6", "-j"])
        .arg(&zip)
        .arg(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("recovery/real.tar"))
        .status()
        .expect("Info-ZIP zip runs");
    assert!(ok.success());
    let bytes = std::fs::read(&zip).unwrap();
    let data = 30
        + u16::from_le_bytes([bytes[26], bytes[27]]) as usize
        + u16::from_le_bytes([bytes[28], bytes[29]]) as usize;
    let csize = u32::from_le_bytes(bytes[18..22].try_into().unwrap()) as usize;
    let mut rng = Rng::new(99);
    for _ in 0..300 {
        let at = rng.range((data + csize / 4) as u64, (data + csize * 3 / 4) as u64);
        let mut z = bytes.clone();
        overwrite(&mut z, at, 4096, &mut rng);
        let session = parse_named("x.zip", z.clone(), "x.zip");
        let t = session.tree();
        let Some(id) = (0..t.exts.len()).find(|&i| t.path_of(i).contains("~recovered@")) else {
            continue;
        };
        let unknown = unknown_ranges(&t, id);
        // One whose first unknown byte has known bytes before it.
        let first = unknown.iter().filter(|r| r.1 > r.0).map(|r| r.0).min();
        let Some(first) = first.filter(|&a| a > 0) else {
            continue;
        };
        let mut whole = read_all(&t, id);
        let n = whole.len();
        for (a, b) in unknown {
            whole[a as usize..(b as usize).min(n)].fill(0);
        }
        return (z, t.exts[id].name.display(), whole, first);
    }
    panic!("no damaged copy gave a tail with unknown bytes");
}

/// The hex view shows an unknown byte as `??`, not as the zero it reads as.
#[test]
fn unknown_bytes_show_as_question_marks() {
    sample();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("recovery-hex");
    let (z, name, _, first) = zip_with_unknown_tail(&dir);
    let mut h = crate::tui::Harness::open("x.zip", z);
    h.keys(&format!("/{name}<Enter>"));
    assert!(h.selected_ext_path().ends_with(&name), "{}", h.screen());
    h.keys(&format!("<Tab><Tab>g{first}<Enter>"));
    assert!(h.screen().contains("??"), "{}", h.screen());
}

/// `extract` writes a recovered tail up to its first unknown byte, and
/// whole with `--with-unknown` (the unknown ranges it lists as zeros).
#[test]
fn extract_writes_known_bytes_and_with_unknown_writes_all() {
    let s = sample();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("recovery-extract");
    let _ = std::fs::remove_dir_all(&dir);
    let (z, name, whole, first) = zip_with_unknown_tail(&dir);
    let zip = dir.join("x.zip");
    std::fs::write(&zip, &z).unwrap();
    let out = dir.join("out");
    let r = pparse([
        "extract".as_ref(),
        zip.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr_text());
    let got = std::fs::read(out.join(&name)).unwrap();
    assert_eq!(got.len() as u64, first, "{}", r.stderr_text());
    assert_eq!(&got[..], &whole[..first as usize]);
    assert!(
        r.stderr_text().contains("could not know"),
        "{}",
        r.stderr_text()
    );
    let out2 = dir.join("out2");
    let r = pparse([
        "extract".as_ref(),
        zip.as_os_str(),
        "--out".as_ref(),
        out2.as_os_str(),
        "--with-unknown".as_ref(),
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr_text());
    assert_eq!(std::fs::read(out2.join(&name)).unwrap(), whole);
    assert!(
        r.stderr_text()
            .contains("unknown bytes written as zeros at"),
        "{}",
        r.stderr_text()
    );
    // The file's own bytes where they are known.
    let shift = s.tar.len() - whole.len();
    assert_eq!(&s.tar[shift..shift + first as usize], &got[..]);
}

/// gzip members written by GNU gzip, named by their source file.
fn gzipped(file: &str) -> (Vec<u8>, Vec<u8>) {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(file);
    let out = Command::new("gzip")
        .args(["-9", "-c"])
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success());
    (out.stdout, std::fs::read(&src).unwrap())
}

/// The decoded bytes of every `found@…` child of the root, in order.
fn found(t: &Tree) -> Vec<(String, Vec<u8>)> {
    t.exts[0]
        .children
        .iter()
        .filter(|&&c| t.exts[c].name.display().starts_with("found@"))
        .map(|&c| {
            let inner = t.exts[c].children.first().copied();
            let bytes = inner.map(|i| read_all(t, i)).unwrap_or_default();
            (t.exts[c].name.display(), bytes)
        })
        .collect()
}

#[test]
fn carving_finds_gzip_members_in_an_unknown_file() {
    let (g1, s1) = gzipped("crates/pparse/src/parsers/archive/tar.rs");
    let (g2, s2) = gzipped("README.md");
    let mut rng = Rng::new(3);
    let mut noise = |n: usize| {
        let mut v = vec![0u8; n];
        rng.fill(&mut v);
        v
    };
    let mut file = noise(70_000);
    let at1 = file.len();
    file.extend_from_slice(&g1);
    file.extend(noise(5_000));
    let at2 = file.len();
    file.extend_from_slice(&g2);
    file.extend(noise(999));
    let session = parse("blob.bin", file);
    let t = session.tree();
    let f = found(&t);
    assert_eq!(f.len(), 2, "{}", tree_text(&t));
    assert_eq!(f[0].0, format!("found@{at1:#x}.gz"));
    assert_eq!(f[0].1, s1);
    assert_eq!(f[1].0, format!("found@{at2:#x}.gz"));
    assert_eq!(f[1].1, s2);
    let notes = &t.exts[t.exts[0].children[0]].notes();
    assert!(
        notes.iter().any(|n| n.contains("found by scan at")),
        "{notes:?}"
    );
}

/// A safetensors file in random bytes, its header's length field just
/// across the carver's first chunk boundary (64 KiB).
#[test]
fn carving_finds_a_safetensors_file() {
    let st = std::fs::read(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/safetensors/numpy_dtypes.safetensors"),
    )
    .unwrap();
    let mut rng = Rng::new(4);
    let mut file = vec![0u8; (1 << 16) - 3];
    rng.fill(&mut file);
    let at = file.len();
    file.extend_from_slice(&st);
    let mut tail = vec![0u8; 777];
    rng.fill(&mut tail);
    file.extend(tail);
    let session = parse("blob.bin", file);
    let t = session.tree();
    let f = found(&t);
    assert_eq!(f.len(), 1, "{}", tree_text(&t));
    assert_eq!(f[0].0, format!("found@{at:#x}.safetensors"));
    let id = t.exts[0].children[0];
    assert_eq!(read_all(&t, id), st, "{}", tree_text(&t));
    assert_eq!(
        t.exts[id].parser(),
        Some("safetensors"),
        "{}",
        tree_text(&t)
    );
    assert_eq!(t.status_of(id), Status::Complete, "{}", tree_text(&t));
}

#[test]
fn carving_finds_what_follows_a_zip_and_what_a_damaged_tar_skipped() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("carve");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("d")).unwrap();
    // After a zip's end.
    let (g, s) = gzipped("crates/pparse/src/parsers/compress/gzip/mod.rs");
    let zip = dir.join("a.zip");
    let ok = Command::new("zip")
        .args(["-X", "-q", "-j"])
        .arg(&zip)
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
        .status()
        .unwrap();
    assert!(ok.success());
    let mut z = std::fs::read(&zip).unwrap();
    let at = z.len();
    z.extend_from_slice(&g);
    let session = parse("a.zip", z);
    let t = session.tree();
    let f = found(&t);
    assert_eq!(f.len(), 1, "{}", tree_text(&t));
    assert_eq!(f[0].0, format!("found@{at:#x}.gz"));
    assert_eq!(f[0].1, s);
    drop(t);
    // A tar whose member header before a .gz member is destroyed.
    std::fs::write(dir.join("d/first.txt"), vec![b'x'; 3000]).unwrap();
    std::fs::write(dir.join("d/notes.gz"), &g).unwrap();
    std::fs::write(dir.join("d/last.txt"), vec![b'y'; 700]).unwrap();
    let ok = Command::new("tar")
        .args(["--format=gnu", "-cf"])
        .arg(dir.join("t.tar"))
        .args([
            "-C",
            dir.join("d").to_str().unwrap(),
            "first.txt",
            "notes.gz",
            "last.txt",
        ])
        .status()
        .unwrap();
    assert!(ok.success());
    let mut tar = std::fs::read(dir.join("t.tar")).unwrap();
    // first.txt: header 0, data 512..3512 (to 3584); notes.gz's header at 3584.
    let mut rng = Rng::new(7);
    overwrite(&mut tar, 3584, 512, &mut rng);
    let session = parse("t.tar", tar);
    let t = session.tree();
    let f = found(&t);
    assert_eq!(f.len(), 1, "{}", tree_text(&t));
    assert_eq!(f[0].0, format!("found@{:#x}.gz", 3584 + 512));
    assert_eq!(f[0].1, s);
    assert!(t.resolve("last.txt").is_some(), "{}", tree_text(&t));
}

#[test]
fn carving_is_bounded() {
    // A megabyte of zip signatures: one child at most per span, no hang.
    let file: Vec<u8> = b"PK\x03\x04".repeat(1 << 18);
    let session = parse("sigs.bin", file);
    let t = session.tree();
    assert!(found(&t).len() <= 1, "{}", tree_text(&t));
}

/// A gzip member whose CRC fails (damage that decoded without an error)
/// makes every tar member in it corrupt, however many there are: the
/// failure is found at the member's end, after thousands of members.
#[test]
fn a_failed_crc_reaches_every_member() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("crc-many");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("m")).unwrap();
    for i in 0..6000 {
        std::fs::write(
            dir.join(format!("m/f{i:05}.txt")),
            format!("member {i}\n").repeat(3),
        )
        .unwrap();
    }
    let ok = Command::new("tar")
        .args(["--format=gnu", "--sort=name", "--mtime=@0", "-cf"])
        .arg(dir.join("m.tar"))
        .args(["-C", dir.to_str().unwrap(), "m"])
        .status()
        .unwrap();
    assert!(ok.success());
    let gz = Command::new("gzip")
        .args(["-6", "-n", "-c"])
        .arg(dir.join("m.tar"))
        .output()
        .unwrap();
    let mut gz = gz.stdout;
    // A byte flipped early in the deflate data: zlib decodes on (checked)
    // to the same length, so only the CRC says so and nothing can narrow
    // where (see `soft_damage_is_located_by_the_tar_headers_around_it`).
    let len = inflate_whole(&gz, GZ_HEADER).unwrap().0.len();
    let mut at = GZ_HEADER + 2000;
    loop {
        let mut g = gz.clone();
        g[at] ^= 0x10;
        if inflate_whole(&g, GZ_HEADER).is_some_and(|(o, _)| o.len() == len) {
            gz = g;
            break;
        }
        at += 1;
    }
    let session = parse("m.tar.gz", gz);
    let t = session.tree();
    let stream = t.exts[0].children[0];
    let members = &t.exts[stream].children;
    // More than the newest 4096 a damage is always checked against.
    assert!(members.len() > 5000, "{}", members.len());
    let complete: Vec<String> = members
        .iter()
        .filter(|&&c| t.exts[c].kind.as_str() == "file" && t.status_of(c) == Status::Complete)
        .map(|&c| t.path_of(c))
        .collect();
    assert!(
        complete.is_empty(),
        "{} members called complete, e.g. {:?}",
        complete.len(),
        &complete[..complete.len().min(3)]
    );
}

/// Soft damage (4 KiB of random bytes that zlib decodes through, so only
/// the CRC and size fail) in a tar.gz of real files: the tar headers before
/// it, each where the last one says, and the first one after it where the
/// length change puts it, locate it. Every member before the one it falls
/// in is complete and exact; that one is not complete; no member anywhere
/// is complete with a wrong byte; and the stream's unverified bytes begin
/// at that member's data.
#[test]
fn soft_damage_is_located_by_the_tar_headers_around_it() {
    let s = sample();
    let original = inflate_whole(&s.gz, GZ_HEADER).unwrap().0.len() as i64;
    let mut rng = Rng::new(33);
    let (mut cases, mut tries, mut after) = (0, 0, 0);
    let mut failures = Vec::new();
    while cases < 4 && tries < 400 {
        tries += 1;
        let len = s.gz.len() as u64;
        let at = rng.range(len / 10, len * 8 / 10);
        let mut gz = s.gz.clone();
        overwrite(&mut gz, at, 4096, &mut rng);
        // Soft, and off by other than whole blocks (what a chain can see).
        let Some((out, _)) = inflate_whole(&gz, GZ_HEADER) else {
            continue;
        };
        if (out.len() as i64 - original).rem_euclid(512) == 0 {
            continue;
        }
        cases += 1;
        let what = format!("real.tar.gz with 4 KiB random at {at:#x} (soft)");
        let dmg_out = inflated_len_from(&s.gz[GZ_HEADER..], at as usize - GZ_HEADER) as u64;
        let session = parse_named("real.tar.gz", gz, &what);
        let t = session.tree();
        let stream = t.exts[0].children[0];
        // The member the damage begins in: the last whose data starts at
        // or before it.
        let hit = s.data_holding(dmg_out);
        let unverified_from = t.exts[stream]
            .damage
            .iter()
            .filter(|d| d.status == Status::Unverified)
            .map(|d| d.range.start)
            .min();
        if unverified_from.is_none_or(|u| u > dmg_out || u + 512 < hit.min(dmg_out)) {
            failures.push(format!(
                "{what}: unverified from {unverified_from:?}, damage at {dmg_out}, in the member with data at {hit}"
            ));
        }
        for (name, m) in &s.members {
            let path = format!("real.tar/{name}");
            let Some(id) = t.resolve(&path) else {
                if m.data + m.size < hit {
                    failures.push(format!("{what}: {path} is missing"));
                }
                continue;
            };
            let st = t.status_of(id);
            let exact = read_all(&t, id) == s.tar[m.data as usize..(m.data + m.size) as usize];
            // A fixture may be damaged on purpose: what counts is whether
            // the stream's damage reached it.
            let unverified = t.exts[id]
                .damage
                .iter()
                .any(|d| d.status == Status::Unverified);
            if st == Status::Complete && !exact {
                failures.push(format!("{what}: {path} is complete but wrong"));
            }
            if m.data < hit && (unverified || !exact) {
                failures.push(format!(
                    "{what}: {path}, before the damage, is {st:?} (exact: {exact}): {}",
                    damage_text(&t, id)
                ));
            }
            if m.data == hit && !unverified {
                failures.push(format!("{what}: {path}, holding the damage, is {st:?}"));
            }
            after += usize::from(m.data > dmg_out && st == Status::Complete);
        }
    }
    eprintln!("{cases} soft copies ({tries} tried): {after} members after the damage complete");
    assert!(cases >= 3, "only {cases} soft copies");
    assert!(failures.is_empty(), "{failures:#?}");
}

/// 1, 16 and 4096 bytes of random bytes and of zeros at 20 places, and
/// truncations at 20 places, of a real tar.gz: no panic or hang (a
/// deadline), no member called complete whose bytes are wrong, and every
/// byte of a recovered stream either the tar's or listed as unknown.
#[test]
fn damage_sweep_never_claims_a_wrong_byte() {
    let s = small_sample();
    let mut rng = Rng::new(515);
    let mut failures = Vec::new();
    let len = s.gz.len() as u64;
    let mut copies = Vec::new();
    for i in 0..20u64 {
        let at = GZ_HEADER as u64 + (len - GZ_HEADER as u64 - 4200) * i / 20 + rng.below(997);
        for n in [1u64, 16, 4096] {
            let mut g = s.gz.clone();
            overwrite(&mut g, at, n, &mut rng);
            copies.push((format!("{n} random bytes at {at:#x}"), g));
            let mut g = s.gz.clone();
            g[at as usize..(at + n) as usize].fill(0);
            if g != s.gz {
                copies.push((format!("{n} zeros at {at:#x}"), g));
            }
        }
        let cut = GZ_HEADER as u64 + (len - GZ_HEADER as u64) * (2 * i + 1) / 40;
        copies.push((format!("cut at {cut:#x}"), truncated(&s.gz, cut)));
    }
    for (what, g) in copies {
        let g_dump = g.clone();
        let session = parse_named("real.tar.gz", g, &what);
        let t = session.tree();
        for id in 0..t.exts.len() {
            let e = &t.exts[id];
            let path = t.path_of(id);
            if path.contains("~recovered@") && e.parent() == Some(0) {
                check_aligned(&t, id, s, &what, &mut failures);
            }
            if t.status_of(id) != Status::Complete || e.kind.as_str() != "file" {
                continue;
            }
            let Some((_, name)) = path.split_once('/') else {
                continue;
            };
            let Some(m) = s.members.get(name) else {
                continue;
            };
            if e.parent().is_none_or(|p| t.exts[p].parent() != Some(0)) {
                continue;
            }
            let want = &s.tar[m.data as usize..(m.data + m.size) as usize];
            if read_all(&t, id) != want {
                std::fs::write("/tmp/wrong.tar.gz", &g_dump).unwrap();
                std::fs::write("/tmp/right.tar.gz", &s.gz).unwrap();
                failures.push(format!("{what}: {path} is complete but wrong"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A recovered stream of many small, alike files holds thousands of
/// unknown-byte ranges, reported while the decoder runs far ahead of the
/// tar parser: every member cut from them must still get its own (none
/// may be called complete with a wrong byte).
#[test]
fn unknown_ranges_reach_members_found_long_after() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("unknown-many");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("m")).unwrap();
    let body = |i: usize| {
        format!(
            "/* file {i} */\n#define VALUE_{i} {}\nint f{i}(void);\n",
            i * 7
        )
    };
    for i in 0..6000 {
        std::fs::write(dir.join(format!("m/h{i:05}.h")), body(i).repeat(1 + i % 5)).unwrap();
    }
    let ok = Command::new("tar")
        .args(["--format=gnu", "--sort=name", "--mtime=@0", "-cf"])
        .arg(dir.join("m.tar"))
        .args(["-C", dir.to_str().unwrap(), "m"])
        .status()
        .unwrap();
    assert!(ok.success());
    let gz = Command::new("gzip")
        .args(["-6", "-n", "-c"])
        .arg(dir.join("m.tar"))
        .output()
        .unwrap()
        .stdout;
    let mut rng = Rng::new(42);
    let mut checked = 0;
    for _ in 0..200 {
        if checked == 3 {
            break;
        }
        let len = gz.len() as u64;
        let at = rng.range(len / 10, len / 2);
        let mut g = gz.clone();
        overwrite(&mut g, at, 4096, &mut rng);
        if !hard_error(&g) {
            continue;
        }
        checked += 1;
        let what = format!("m.tar.gz with 4 KiB random at {at:#x}");
        let session = parse_named("m.tar.gz", g, &what);
        let t = session.tree();
        for id in 0..t.exts.len() {
            let path = t.path_of(id);
            let Some(name) = path.rsplit('/').next() else {
                continue;
            };
            let Some(i) = name
                .strip_prefix('h')
                .and_then(|n| n.strip_suffix(".h"))
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            if t.status_of(id) == Status::Complete {
                let want = body(i).repeat(1 + i % 5);
                assert_eq!(
                    read_all(&t, id),
                    want.as_bytes(),
                    "{what}: {path} complete but wrong"
                );
            }
        }
    }
    assert_eq!(checked, 3, "too few damaged copies stop the decoder");
}

/// Every extraction found by a scan that starts where a container of its
/// own format starts, in the same bytes: itself, found again (followed
/// through the `origin`s of verbatim windows up to a common ancestor).
/// Each as (its PATH, the container's PATH).
fn found_at_own_start(t: &Tree) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for id in t.subtree(0) {
        let e = &t.exts[id];
        if !e.name.display().starts_with("found@") {
            continue;
        }
        // `id`'s first byte in the coordinates of each container above it.
        let mut pos = 0u64;
        let mut at = id;
        while let (Some(p), Some(o)) = (t.exts[at].parent(), t.exts[at].origin()) {
            if !t.exts[at].is_window() {
                break;
            }
            pos += o.start;
            at = p;
            if pos == 0 && t.exts[at].parser() == e.parser() {
                out.push((t.path_of(id), t.path_of(at)));
            }
        }
    }
    out
}

/// The most `found@` steps in any PATH of the tree.
fn found_depth(t: &Tree) -> usize {
    t.subtree(0)
        .into_iter()
        .map(|id| {
            t.path_of(id)
                .split('/')
                .filter(|c| c.starts_with("found@"))
                .count()
        })
        .max()
        .unwrap_or(0)
}

/// A zip written by Python's zipfile with its central directory cut off,
/// and the offsets of its local headers.
fn zip_without_directory() -> (Vec<u8>, Vec<u64>) {
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import io, random, sys, zipfile\n\
             r = random.Random(5)\n\
             b = io.BytesIO()\n\
             with zipfile.ZipFile(b, 'w') as z:\n\
             \x20   z.writestr('a.txt', b'first entry\\n' * 400, zipfile.ZIP_DEFLATED)\n\
             \x20   z.writestr('b.bin', r.randbytes(3000), zipfile.ZIP_STORED)\n\
             \x20   z.writestr('c.txt', b'third entry\\n' * 300, zipfile.ZIP_DEFLATED)\n\
             \x20   z.writestr('d.txt', b'fourth\\n' * 90, zipfile.ZIP_STORED)\n\
             z = zipfile.ZipFile(b)\n\
             print(*[i.header_offset for i in z.infolist()])\n\
             sys.stdout.flush()\n\
             sys.stdout.buffer.write(b.getvalue()[: z.start_dir])\n",
        )
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let nl = out.stdout.iter().position(|&b| b == b'\n').unwrap();
    let offsets = String::from_utf8_lossy(&out.stdout[..nl])
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    (out.stdout[nl + 1..].to_vec(), offsets)
}

/// A zip with no central directory and a damaged entry leaves the damaged
/// bytes unclaimed, and they start with a local header's signature. The
/// zip starting there is the archive itself (or a zip already found
/// there), never found inside itself again, level after level.
#[test]
fn carving_never_finds_a_zip_at_its_own_start() {
    let (zip, lfh) = zip_without_directory();
    assert_eq!(lfh.len(), 4);
    let mut rng = Rng::new(11);
    for (what, at) in [
        ("the first local header's fields", lfh[0] + 4),
        ("the second local header's fields", lfh[1] + 4),
        ("the first entry's deflate data", lfh[0] + 40),
    ] {
        let mut z = zip.clone();
        overwrite(&mut z, at, 12, &mut rng);
        let session = parse_named("cut.zip", z, what);
        let t = session.tree();
        assert_ne!(t.status_of(0), Status::Complete, "{what}");
        let again = found_at_own_start(&t);
        assert!(again.is_empty(), "{what}: {again:?}\n{}", tree_text(&t));
        assert!(found_depth(&t) <= 1, "{what}\n{}", tree_text(&t));
        // The entries after the damage are still there.
        assert!(t.resolve("d.txt").is_some(), "{what}\n{}", tree_text(&t));
    }
}

/// Ten zips written by Python's zipfile, one after another behind a few
/// bytes no parser claims: each found zip reads its first entry and the
/// last zip's directory, and leaves the zips between unclaimed, where the
/// next is found. Found files nest in found files a bounded number of
/// levels, never at their own start, and the deepest says it was not
/// scanned.
#[test]
fn found_files_nest_a_bounded_number_of_levels() {
    let file = python(
        "import io, sys, zipfile\n\
             out = b'junk '\n\
             for i in range(10):\n\
             \x20   b = io.BytesIO()\n\
             \x20   with zipfile.ZipFile(b, 'w') as z:\n\
             \x20       z.writestr(f'f{i}.txt', b'entry %d\\n' % i * 20, zipfile.ZIP_DEFLATED)\n\
             \x20   out += b.getvalue()\n\
             sys.stdout.buffer.write(out)\n",
    );
    let session = parse("zips.bin", file);
    let t = session.tree();
    let again = found_at_own_start(&t);
    assert!(again.is_empty(), "{again:?}\n{}", tree_text(&t));
    assert_eq!(found_depth(&t), 4, "{}", tree_text(&t));
    let deepest = t
        .subtree(0)
        .into_iter()
        .filter(|&id| {
            t.path_of(id)
                .rsplit('/')
                .next()
                .unwrap()
                .starts_with("found@")
        })
        .max_by_key(|&id| t.exts[id].depth())
        .unwrap();
    let notes = t.exts[deepest].notes();
    assert!(
        notes.iter().any(|n| n.contains("not scanned")),
        "{notes:?}\n{}",
        tree_text(&t)
    );
}

/// What a sweep of /usr found where carving claimed too much or too little
/// (peers/realworld.sh): an xz stream, zstd frames and a pickle, each made
/// by its real tool, between bytes of no format are found with exactly
/// their own bytes (a library's `.gnu_debugdata` xz stream, zstd-compressed
/// debug sections); a gzip header whose deflate data ends at once with a
/// trailer that does not match, and a protocol 4 frame header followed by
/// no valid opcode, are not found at all. All of it is intact: exit 0.
#[test]
fn found_files_end_where_their_format_ends_and_lookalikes_are_not_found() {
    let tmp = tempfile::tempdir().unwrap();
    let text: Vec<u8> = (0..3000)
        .flat_map(|i| format!("line {i} of the payload\n").into_bytes())
        .collect();
    std::fs::write(tmp.path().join("p.txt"), &text).unwrap();
    let tool = |args: &[&str]| {
        let out = Command::new(args[0])
            .args(&args[1..])
            .current_dir(tmp.path())
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", args[0]));
        assert!(out.status.success(), "{args:?}");
        out.stdout
    };
    let xz = tool(&["xz", "-c", "p.txt"]);
    let zst = tool(&["zstd", "-q", "-c", "p.txt"]);
    let pkl = tool(&[
        "python3",
        "-c",
        "import pickle, sys; sys.stdout.buffer.write(pickle.dumps({'a': list(range(50)), 'b': 'text'}, protocol=4))",
    ]);
    // A gzip member of 24 bytes with its CRC-32 changed: what the scan met
    // in a debug-info file, where a real member's data would not end so.
    let mut fake_gz = tool(&[
        "python3",
        "-c",
        "import gzip, sys; sys.stdout.buffer.write(gzip.compress(b'x' * 24, mtime=0))",
    ]);
    let crc_at = fake_gz.len() - 8;
    fake_gz[crc_at] ^= 0xff;
    let fake_pkl = b"\x80\x04\x95\x10\x00\x00\x00\x00\x00\x00\x00\x00\x01\x02".to_vec();

    let mut rng = Rng::new(11);
    let mut noise = |n: usize| {
        // Bytes of no format: printable noise holds no magic number.
        let mut v = vec![0u8; n];
        rng.fill(&mut v);
        v.iter().map(|b| b'a' + b % 26).collect::<Vec<u8>>()
    };
    let mut file = noise(1000);
    let mut want = Vec::new();
    for (part, ext, real) in [
        (&xz, "xz", true),
        (&fake_gz, "gz", false),
        (&zst, "zst", true),
        (&fake_pkl, "pkl", false),
        (&pkl, "pkl", true),
    ] {
        if real {
            want.push((format!("found@{:#x}.{ext}", file.len()), part.len() as u64));
        }
        file.extend_from_slice(part);
        file.extend(noise(700));
    }
    let session = parse("lib.so", file);
    let t = session.tree();
    let got: Vec<(String, u64)> = t.exts[0]
        .children
        .iter()
        .map(|&c| (t.exts[c].name.display(), t.exts[c].size()))
        .collect();
    assert_eq!(got, want, "{}", tree_text(&t));
    for id in t.subtree(0) {
        assert_eq!(t.status_of(id), Status::Complete, "{}", tree_text(&t));
    }
    for &c in &t.exts[0].children[..2] {
        let inner = t.exts[c].children[0];
        assert!(read_all(&t, inner) == text, "{}", t.exts[c].name.display());
    }
}

/// A stream recovered after damage may end falsely: decoding from a
/// guessed block start reached a final block, and what follows looks like
/// a trailer and zero padding (a tar's zeros, in a stored block of the
/// real member). Here a whole deflate stream, 8 bytes and zeros sit in
/// the member's data, and more deflate data follows. Where no gzip member
/// follows such an end, the rest of the member is looked for by its
/// deflate blocks again, not given up as "not gzip data".
#[test]
fn a_recovered_stream_that_ends_falsely_is_followed_by_another() {
    let script = "import sys, zlib, gzip\n\
        def raw(b, mode):\n    \
            c = zlib.compressobj(6, zlib.DEFLATED, -15)\n    \
            return c.compress(b) + c.flush(mode)\n\
        head = b''.join(b'head line %d\\n' % i for i in range(4000))\n\
        p = b''.join(b'middle part %d\\n' % i for i in range(3000))\n\
        q = b''.join(b'the last part %d\\n' % i for i in range(5000))\n\
        d = gzip.compress(b'')[:10]\n\
        d += raw(head, zlib.Z_FULL_FLUSH) + b'\\x06' * 64 + raw(p, zlib.Z_FINISH) + b'\\x01' * 8 + bytes(64) + raw(q, zlib.Z_FINISH)\n\
        d += (zlib.crc32(head + p + q)).to_bytes(4, 'little') + len(head + p + q).to_bytes(4, 'little')\n\
        sys.stdout.buffer.write(d)\n";
    let gz = python(script);
    let session = parse_named("parts.txt.gz", gz, "false end");
    let t = session.tree();
    let recovered: Vec<Vec<u8>> = (0..t.exts.len())
        .filter(|&id| t.path_of(id).contains("~recovered@") && t.exts[id].parent() == Some(0))
        .map(|id| read_all(&t, id))
        .collect();
    let text = |what: &str, n: usize| -> Vec<u8> {
        (0..n)
            .flat_map(|i| format!("{what} {i}\n").into_bytes())
            .collect()
    };
    assert_eq!(
        recovered,
        vec![text("middle part", 3000), text("the last part", 5000)],
        "{} streams recovered",
        recovered.len()
    );
}

/// A zip of the repository's sources and docs (Info-ZIP `zip -r`), damaged
/// with 4 KiB of random bytes at 4 places in its entries' area, 6 copies:
/// every entry the damage does not touch is complete and byte-exact, as
/// 7-Zip and unzip give it; no entry is complete with a wrong byte, none
/// truncated with more than an exact prefix (a stream that overruns its
/// compressed size is corrupt, not cut off). (An entry the damage touches
/// only in its local header may still be complete: its CRC proves it.)
#[test]
fn a_damaged_zip_of_real_files_keeps_every_other_entry_and_lies_about_none() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("zip-sweep");
    std::fs::create_dir_all(&dir).unwrap();
    let zip = dir.join("real.zip");
    let _ = std::fs::remove_file(&zip);
    let ok = Command::new("zip")
        .args(["-X", "-q", "-6", "-r"])
        .arg(&zip)
        .args(["crates", "docs"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("Info-ZIP zip runs");
    assert!(ok.success());
    let bytes = std::fs::read(&zip).unwrap();
    // name, local header offset, end of its data (its descriptor aside),
    // as Python's zipfile reads the central directory.
    let list = python(&format!(
        "import zipfile\n\
         for i in zipfile.ZipFile({:?}).infolist():\n\
         \x20   if i.is_dir(): continue\n\
         \x20   print(i.header_offset, i.compress_size, i.filename)",
        zip.to_str().unwrap()
    ));
    struct Entry {
        name: String,
        start: u64,
        end: u64,
        bytes: Vec<u8>,
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let entries: Vec<Entry> = String::from_utf8(list)
        .unwrap()
        .lines()
        .map(|l| {
            let mut f = l.splitn(3, ' ');
            let start: u64 = f.next().unwrap().parse().unwrap();
            let csize: u64 = f.next().unwrap().parse().unwrap();
            let name = f.next().unwrap().to_string();
            let h = start as usize;
            let n = u16::from_le_bytes([bytes[h + 26], bytes[h + 27]]) as u64;
            let x = u16::from_le_bytes([bytes[h + 28], bytes[h + 29]]) as u64;
            let end = start + 30 + n + x + csize;
            let data = std::fs::read(root.join(&name)).unwrap();
            Entry {
                name,
                start,
                end,
                bytes: data,
            }
        })
        .collect();
    assert!(entries.len() > 100, "{} entries", entries.len());
    let area = entries.iter().map(|e| e.end).max().unwrap();
    let mut rng = Rng::new(3303);
    let mut failures = Vec::new();
    let (mut untouched, mut whole) = (0, 0);
    for copy in 0..6 {
        let mut z = bytes.clone();
        let mut spans = Vec::new();
        for _ in 0..4 {
            let at = rng.range(64, area - 4096);
            overwrite(&mut z, at, 4096, &mut rng);
            spans.push((at, at + 4096));
        }
        let what = format!("copy {copy} (damage at {spans:?})");
        let session = parse_named("real.zip", z, &what);
        let t = session.tree();
        for e in &entries {
            let touched = spans.iter().any(|&(a, b)| a < e.end && e.start < b);
            untouched += usize::from(!touched);
            let Some(id) = t.resolve(&e.name) else {
                if !touched {
                    failures.push(format!("{what}: untouched {} is lost", e.name));
                }
                continue;
            };
            let got = read_all(&t, id);
            let st = t.status_of(id);
            whole += usize::from(st == Status::Complete && got == e.bytes);
            match st {
                Status::Complete if got != e.bytes => {
                    failures.push(format!("{what}: {} is complete but wrong", e.name));
                }
                Status::Truncated if !e.bytes.starts_with(&got) => failures.push(format!(
                    "{what}: {} is truncated but not an exact prefix",
                    e.name
                )),
                s if s != Status::Complete && !touched => failures.push(format!(
                    "{what}: untouched {} is {s}: {}",
                    e.name,
                    t.exts[id].detail().unwrap_or_default()
                )),
                _ => {}
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(whole >= untouched, "{whole} whole of {untouched} untouched");
}

/// The seed's own example: a tar.gz holding a zip holding text (the
/// repository's docs, deflated by Python's zipfile, between two text files
/// in the tar), damaged in the gzip stream at the middle of the zip with
/// each kind of damage: a cut, 4 KiB of random bytes, 4 KiB of zeros, one
/// flipped bit. Every zip entry wholly decoded before the damage comes
/// back complete and byte-exact (its own CRC proves it, whatever the
/// stream around it); no entry is complete with a wrong byte, none
/// truncated with more than an exact prefix.
#[test]
fn a_zip_in_a_tar_gz_keeps_what_precedes_each_kind_of_damage() {
    let root = env!("CARGO_MANIFEST_DIR");
    let made = python(&format!(
        "import glob, gzip, io, json, os, sys, tarfile, zipfile\n\
         os.chdir({root:?})\n\
         names = sorted(glob.glob('docs/*.md')) + sorted(glob.glob('crates/pparse/src/parsers/*/*.rs'))\n\
         z = io.BytesIO()\n\
         with zipfile.ZipFile(z, 'w', zipfile.ZIP_DEFLATED) as zf:\n\
         \x20   for n in names: zf.write(n)\n\
         infos = [(i.filename, i.header_offset, i.compress_size) for i in zipfile.ZipFile(z).infolist()]\n\
         t = io.BytesIO()\n\
         with tarfile.open(fileobj=t, mode='w', format=tarfile.GNU_FORMAT) as tf:\n\
         \x20   for name, data in [('a.txt', open('README.md', 'rb').read()), ('docs.zip', z.getvalue()), ('z.txt', open('README.md', 'rb').read())]:\n\
         \x20       i = tarfile.TarInfo(name); i.size = len(data); i.mtime = 0\n\
         \x20       tf.addfile(i, io.BytesIO(data))\n\
         off = [m.offset_data for m in tarfile.open(fileobj=io.BytesIO(t.getvalue())) if m.name == 'docs.zip'][0]\n\
         gz = gzip.compress(t.getvalue(), 6, mtime=0)\n\
         sys.stdout.write(json.dumps({{'gz': gz.hex(), 'zip_at': off, 'entries': infos}}))"
    ));
    let v: serde_json::Value = serde_json::from_slice(&made).unwrap();
    let gz = hex_bytes(v["gz"].as_str().unwrap());
    let zip_at = v["zip_at"].as_u64().unwrap();
    let entries: Vec<(String, u64, u64)> = v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e[0].as_str().unwrap().to_string(), u(&e[1]), u(&e[2])))
        .collect();
    let body = &gz[10..gz.len() - 8];
    // The compressed byte that decodes the middle of the zip.
    let zip_len = entries.last().map(|e| e.1 + e.2).unwrap();
    let mid_out = zip_at + zip_len / 2;
    let n: Vec<usize> = (1..body.len()).collect();
    let mid = n[n.partition_point(|&n| (inflate_prefix(&body[..n]).len() as u64) < mid_out)] + 10;
    let mut rng = Rng::new(7070);
    let mut cases: Vec<(&str, Vec<u8>)> = vec![("cut", truncated(&gz, mid as u64))];
    let mut r = gz.clone();
    overwrite(&mut r, mid as u64, 4096, &mut rng);
    cases.push(("random bytes", r));
    let mut z = gz.clone();
    z[mid..mid + 4096].fill(0);
    cases.push(("zeros", z));
    let mut f = gz.clone();
    flip(&mut f, mid as u64, 0x08);
    cases.push(("a flipped bit", f));
    let root = PathBuf::from(root);
    let mut failures = Vec::new();
    for (what, bytes) in cases {
        // Output zlib decodes from the bytes before the damage is exact.
        let exact = inflate_prefix(&body[..mid - 10]).len() as u64;
        let session = parse_named("d.tar.gz", bytes, what);
        let t = session.tree();
        let mut before = 0;
        for (name, start, csize) in &entries {
            let want = std::fs::read(root.join(name)).unwrap();
            let ahead = zip_at + start + 30 + name.len() as u64 + csize + 16 <= exact;
            let Some(id) = t.resolve(&format!("d.tar/docs.zip/{name}")) else {
                if ahead {
                    failures.push(format!("{what}: {name}, before the damage, is lost"));
                }
                continue;
            };
            let got = read_all(&t, id);
            match t.status_of(id) {
                Status::Complete if got != want => {
                    failures.push(format!("{what}: {name} is complete but wrong"));
                }
                Status::Truncated if !want.starts_with(&got) => {
                    failures.push(format!("{what}: {name} is truncated, not a prefix"));
                }
                s if ahead && (s != Status::Complete || got != want) => failures.push(format!(
                    "{what}: {name}, before the damage, is {s}: {}",
                    t.exts[id].detail().unwrap_or_default()
                )),
                _ => {}
            }
            before += usize::from(ahead);
        }
        assert!(before > 5, "{what}: {before} entries before the damage");
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

fn hex_bytes(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A tar.gz in many gzip members (64 KiB of the tar each, as `pigz -i`
/// or bgzip cut it) with soft damage in a member in the middle: the
/// header chain is walked across the members before it (each proved by
/// its own CRC), the damage is located inside its member, and no member
/// is complete with a wrong byte; the members of the tar before the
/// damaged gzip member stay complete and exact.
#[test]
fn soft_damage_in_one_gzip_member_of_many_is_located_inside_it() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("soft-multi");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let tar = &sample().tar;
    std::fs::write(dir.join("real.tar"), tar).unwrap();
    // Python's gzip, member by member; then 4 KiB of random bytes in one
    // member, drawn until zlib decodes that member to its end with a
    // length that is off by other than whole blocks, in a tar member that
    // starts inside that gzip member.
    let out = python(&format!(
        "import gzip, random, tarfile, zlib\n\
         tar = open({0:?}, 'rb').read()\n\
         starts = [m.offset_data for m in tarfile.open({0:?})]\n\
         parts = [tar[i:i + 65536] for i in range(0, len(tar), 65536)]\n\
         members = [gzip.compress(p, 6, mtime=0) for p in parts]\n\
         rng = random.Random(4)\n\
         for _ in range(2000):\n\
         \x20   k = rng.randrange(len(members) // 3, len(members) * 2 // 3)\n\
         \x20   m = bytearray(members[k])\n\
         \x20   if len(m) < 8000: continue\n\
         \x20   at = rng.randrange(10, len(m) - 4200)\n\
         \x20   m[at:at + 4096] = bytes(rng.getrandbits(8) for _ in range(4096))\n\
         \x20   d = zlib.decompressobj(-15)\n\
         \x20   try: o = d.decompress(bytes(m[10:]))\n\
         \x20   except zlib.error: continue\n\
         \x20   if not d.eof or (len(o) - len(parts[k])) % 512 == 0: continue\n\
         \x20   p = k * 65536 + len(zlib.decompressobj(-15).decompress(bytes(m[10:at])))\n\
         \x20   if max(s for s in starts if s <= p) <= k * 65536: continue\n\
         \x20   members[k] = bytes(m)\n\
         \x20   open({1:?}, 'wb').write(b''.join(members))\n\
         \x20   print(k * 65536, len(members), p)\n\
         \x20   break\n",
        dir.join("real.tar").display().to_string(),
        dir.join("multi.tar.gz").display().to_string()
    ));
    let text = String::from_utf8(out).unwrap();
    let mut f = text.split_whitespace().map(|x| x.parse::<u64>().unwrap());
    let (member_start, count) = (f.next().expect("a soft damage"), f.next().unwrap());
    let dmg_out = f.next().unwrap();
    assert!(count > 20, "{count} gzip members");
    let gz = std::fs::read(dir.join("multi.tar.gz")).unwrap();
    let session = parse("multi.tar.gz", gz);
    let t = session.tree();
    let stream = t.exts[0].children[0];
    let unverified: Vec<_> = t.exts[stream]
        .damage
        .iter()
        .filter(|d| d.status == Status::Unverified)
        .map(|d| d.range)
        .collect();
    assert!(!unverified.is_empty());
    // Located: what is doubted begins after the last tar header before the
    // damage, inside the gzip member (the chain was walked through the
    // members before it, each proved by its own CRC).
    let hit = sample().after_header_before(dmg_out);
    let first = unverified.iter().map(|r| r.start).min().unwrap();
    assert!(
        first == hit && hit > member_start && first <= dmg_out,
        "unverified {unverified:?}; damage at {dmg_out} in the tar member with data at {hit}, gzip member from {member_start}"
    );
    eprintln!(
        "located from {first}: damage at {dmg_out}, tar member data at {hit}, gzip member from {member_start}"
    );
    let last_before = hit;
    let mut before = 0;
    for (name, m) in &sample().members {
        let Some(id) = t.resolve(&format!("multi.tar/{name}")) else {
            continue;
        };
        let exact = read_all(&t, id) == tar[m.data as usize..(m.data + m.size) as usize];
        let st = t.status_of(id);
        assert!(
            st != Status::Complete || exact,
            "{name} is complete but wrong"
        );
        if m.data + m.size < last_before {
            let inherited = t.exts[id]
                .damage
                .iter()
                .any(|d| d.status == Status::Unverified);
            assert!(exact && !inherited, "{name}: {}", damage_text(&t, id));
            before += 1;
        }
    }
    assert!(before > 100, "{before} members before the damage");
}
