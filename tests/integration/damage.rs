//! Damage inside the bytes: flipped bytes, overwritten spans, inserted garbage.
//! What was not damaged must come back byte-exact, and the damage must be
//! reported where it is.

use std::collections::BTreeMap;

use pparse::{Status, Tree};

use crate::util::*;

/// Sources of every file member of a tar fixture, by PATH.
fn tar_sources(members: &[TarMember]) -> BTreeMap<String, Vec<u8>> {
    members
        .iter()
        .filter_map(|m| Some((m.path.clone(), source_bytes(m.source.as_ref()?))))
        .collect()
}

/// Checks that member `m` came through intact: a file byte-exact with status
/// Complete, anything else present with the right kind.
fn check_intact(
    t: &Tree,
    what: &str,
    m: &TarMember,
    sources: &BTreeMap<String, Vec<u8>>,
    f: &mut Failures,
) {
    let Some(id) = t.resolve(&m.path) else {
        f.push(format!("{what}: undamaged {} {:?} is lost", m.kind, m.path));
        return;
    };
    if t.exts[id].kind.as_str() != m.kind {
        f.push(format!(
            "{what}: {:?} is a {}, pparse says {}",
            m.path,
            m.kind,
            t.exts[id].kind.as_str()
        ));
        return;
    }
    if !m.is_file() {
        return;
    }
    let got = read_all(t, id);
    let want = &sources[&m.path];
    if &got != want {
        f.push(format!(
            "{what}: undamaged {:?} has {} bytes, expected {} (byte-exact: {})",
            m.path,
            got.len(),
            want.len(),
            got.len() == want.len()
        ));
        return;
    }
    let st = t.status_of(id);
    if st != Status::Complete {
        f.push(format!(
            "{what}: undamaged {:?} is byte-exact but has status {st:?}: {}",
            m.path,
            damage_text(t, id)
        ));
    }
}

/// Checks the tar's own status and that a Corrupt damage range covers
/// `[start, end)` of the damaged bytes.
fn check_reported(t: &Tree, what: &str, start: u64, end: u64, f: &mut Failures) {
    let st = t.exts[0].status();
    if st != Status::Corrupt {
        f.push(format!(
            "{what}: tar status {st:?}, expected Corrupt; damage: {}",
            damage_text(t, 0)
        ));
    }
    if !damage_covers(t, 0, start, end, &[Status::Corrupt]) {
        f.push(format!(
            "{what}: no Corrupt damage range covers the damaged bytes {start}..{end}; damage: {}",
            damage_text(t, 0)
        ));
    }
}

/// Header field positions that a flip is tried at, relative to the block.
const HEADER_SPOTS: &[(&str, u64)] = &[
    ("name", 3),
    ("size", 124 + 5),
    ("checksum", 148 + 2),
    ("magic", 257 + 1),
];

/// One byte flipped in each header block of each member (name, size,
/// checksum, magic), and each header block overwritten with random bytes:
/// every other member is recovered byte-exact and the damage is reported.
/// `first` selects the first member (whose header is also what identifies
/// the file as a tar) instead of all the others.
fn tar_header_damage(name: &str, first: bool) {
    let data = fixture(name);
    let members = tar_members(name);
    let sources = tar_sources(&members);
    let mut f = Failures::default();
    let mut rng = Rng::new(0x7a12_0001);
    for (i, m) in members.iter().enumerate() {
        if (i == 0) != first {
            continue;
        }
        for (hdr, typeflag) in m.headers.clone() {
            let mut cases: Vec<(String, Vec<u8>, u64, u64)> = Vec::new();
            for &(field, off) in HEADER_SPOTS {
                let mut d = data.clone();
                flip(&mut d, hdr + off, 0xff);
                cases.push((
                    format!("{field} byte flipped at {}", hdr + off),
                    d,
                    hdr + off,
                    hdr + off + 1,
                ));
            }
            let mut d = data.clone();
            overwrite(&mut d, hdr, 512, &mut rng);
            cases.push((format!("header block {hdr} overwritten"), d, hdr, hdr + 512));
            for (how, bytes, start, end) in cases {
                let what = format!(
                    "{name}: header {typeflag:?} of member #{i} {:?}: {how}",
                    m.path
                );
                let session = parse_named(name, bytes, &what);
                let t = session.tree();
                check_reported(&t, &what, start, end, &mut f);
                for (j, other) in members.iter().enumerate() {
                    if j != i {
                        check_intact(&t, &what, other, &sources, &mut f);
                    }
                }
            }
        }
    }
    f.check(&format!(
        "{name} header damage ({})",
        if first {
            "first member"
        } else {
            "members after the first"
        }
    ));
}

#[test]
fn ustar_header_damage() {
    tar_header_damage("ustar.tar", false);
}

#[test]
fn gnu_header_damage() {
    tar_header_damage("gnu.tar", false);
}

#[test]
fn pax_header_damage() {
    tar_header_damage("pax.tar", false);
}

#[test]
fn v7_header_damage() {
    tar_header_damage("v7.tar", false);
}

#[test]
fn base256_header_damage() {
    tar_header_damage("base256.tar", false);
}

/// Damage in the very first header block of each plain tar. GNU tar says
/// "This does not look like a tar archive", "Skipping to next header" and
/// lists every later member; pparse must recover them too.
#[test]
fn first_header_damage() {
    let mut failed = Vec::new();
    for name in TARS {
        let r = std::panic::catch_unwind(|| tar_header_damage(name, true));
        if let Err(e) = r {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "panic".into());
            failed.push(msg);
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// A span from the last 100 data bytes of one member through the first 200
/// bytes of the next member's first header: every member but those two is
/// recovered, and the damaged header is reported.
#[test]
fn tar_span_straddling_two_members() {
    let mut f = Failures::default();
    for name in TARS {
        let data = fixture(name);
        let members = tar_members(name);
        let sources = tar_sources(&members);
        let mut rng = Rng::new(0x57ad_d1e0);
        for k in 0..members.len() - 1 {
            let (a, b) = (&members[k], &members[k + 1]);
            if !a.is_file() || a.size < 100 {
                continue;
            }
            let start = a.data_offset + a.size - 100;
            let end = b.header_offset + 200;
            let mut d = data.clone();
            overwrite(&mut d, start, end - start, &mut rng);
            let what = format!(
                "{name}: {start}..{end} overwritten (end of {:?}, header of {:?})",
                a.path, b.path
            );
            let session = parse_named(name, d, &what);
            let t = session.tree();
            check_reported(&t, &what, b.header_offset, end, &mut f);
            for (j, other) in members.iter().enumerate() {
                if j != k && j != k + 1 {
                    check_intact(&t, &what, other, &sources, &mut f);
                }
            }
        }
    }
    f.check("tar span damage");
}

/// Seven garbage bytes inserted in the middle of a member's data shift every
/// later header off the 512-byte grid (GNU tar, bsdtar and Python's tarfile
/// lose every later member). pparse must find them again: every member after
/// the damaged one is recovered byte-exact, and the lost sync is reported at
/// the next header's old offset. (v7 headers have no magic to find off the
/// grid; pparse documents that it only looks for them on the grid.)
#[test]
fn tar_drift_after_inserted_garbage() {
    let mut f = Failures::default();
    let garbage = b"\x13garbg!";
    for name in ["ustar.tar", "gnu.tar", "pax.tar", "base256.tar"] {
        let data = fixture(name);
        let members = tar_members(name);
        let sources = tar_sources(&members);
        for k in 0..members.len() - 1 {
            let m = &members[k];
            if !m.is_file() || m.size < 2 {
                continue;
            }
            let at = m.data_offset + m.size / 2;
            let d = insert(&data, at, garbage);
            let what = format!("{name}: 7 bytes inserted at {at} (inside {:?})", m.path);
            let session = parse_named(name, d, &what);
            let t = session.tree();
            let next = members[k + 1].header_offset;
            check_reported(&t, &what, next, next + 1, &mut f);
            for (j, other) in members.iter().enumerate() {
                if j != k {
                    // Later members now sit 7 bytes further on; their PATHs
                    // and bytes are what matter.
                    check_intact(&t, &what, other, &sources, &mut f);
                }
            }
        }
    }
    f.check("tar drift");
}

// ---------------------------------------------------------------------------
// gzip
// ---------------------------------------------------------------------------

struct GzMember {
    header_offset: u64,
    data_offset: u64,
    deflate_end: u64,
    source: Vec<u8>,
}

fn gz_members() -> Vec<GzMember> {
    archive("multi.gz")["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| GzMember {
            header_offset: u(&m["header_offset"]),
            data_offset: u(&m["data_offset"]),
            deflate_end: u(&m["deflate_end"]),
            source: source_bytes(s(&m["source"])),
        })
        .collect()
}

/// The decoded stream of a parsed gzip file (the root's only child).
fn decoded(t: &Tree, what: &str) -> Vec<u8> {
    let kids = &t.exts[0].children;
    assert_eq!(
        kids.len(),
        1,
        "{what}: a gzip file has one decoded stream, got {:?}\n{}",
        child_names(t, 0),
        tree_text(t)
    );
    read_all(t, kids[0])
}

/// Member 1's bytes must open the decoded stream and member 3's close it;
/// the root must be Corrupt with a damage range covering `[start, end)`.
fn check_multi_gz(t: &Tree, what: &str, start: u64, end: u64, f: &mut Failures) {
    let ms = gz_members();
    let out = decoded(t, what);
    if !out.starts_with(&ms[0].source) {
        f.push(format!(
            "{what}: decoded stream ({} bytes) does not start with member 1's {} bytes",
            out.len(),
            ms[0].source.len()
        ));
    }
    if !out.ends_with(&ms[2].source) {
        f.push(format!(
            "{what}: decoded stream ({} bytes) does not end with member 3's {} bytes",
            out.len(),
            ms[2].source.len()
        ));
    }
    let st = t.status_of(0);
    if st != Status::Corrupt {
        f.push(format!(
            "{what}: root status {st:?}, expected Corrupt; damage: {}",
            damage_text(t, 0)
        ));
    }
    if !damage_covers(t, 0, start, end, &[Status::Corrupt]) {
        f.push(format!(
            "{what}: no Corrupt damage range covers the damaged bytes {start}..{end}; damage: {}",
            damage_text(t, 0)
        ));
    }
}

/// Spans overwritten inside member 2's deflate data: members 1 and 3 decode
/// whole, the damage is reported over the span.
#[test]
fn multi_gz_member2_deflate_overwritten() {
    let data = fixture("multi.gz");
    let ms = gz_members();
    let m2 = &ms[1];
    let mut f = Failures::default();
    let mut rng = Rng::new(0x6a2d_0002);
    for case in 0..8u64 {
        let len = [1, 4, 16, 64][case as usize % 4];
        let room = m2.deflate_end - m2.data_offset - len;
        let start = m2.data_offset + 32 + rng.below(room - 64);
        let mut d = data.clone();
        overwrite(&mut d, start, len, &mut rng);
        let what = format!(
            "multi.gz: {start}..{} overwritten (member 2 deflate data)",
            start + len
        );
        let session = parse_named("multi.gz", d, &what);
        check_multi_gz(&session.tree(), &what, start, start + len, &mut f);
    }
    f.check("multi.gz member 2 deflate damage");
}

/// Member 2's header overwritten: members 1 and 3 decode whole, the header
/// is reported.
#[test]
fn multi_gz_member2_header_overwritten() {
    let data = fixture("multi.gz");
    let ms = gz_members();
    let m2 = &ms[1];
    let mut f = Failures::default();
    for seed in 0..4 {
        let mut rng = Rng::new(0x6a2d_0100 + seed);
        let mut d = data.clone();
        let len = m2.data_offset - m2.header_offset;
        overwrite(&mut d, m2.header_offset, len, &mut rng);
        let what = format!(
            "multi.gz: member 2 header {}..{} overwritten (seed {seed})",
            m2.header_offset, m2.data_offset
        );
        let session = parse_named("multi.gz", d, &what);
        check_multi_gz(
            &session.tree(),
            &what,
            m2.header_offset,
            m2.data_offset,
            &mut f,
        );
    }
    f.check("multi.gz member 2 header damage");
}

/// A byte of a member's trailer CRC flipped: every decoded byte is still
/// there (a CRC mismatch never discards output), the status is Corrupt and
/// the damage points at the trailer.
#[test]
fn multi_gz_trailer_crc_flipped() {
    let data = fixture("multi.gz");
    let ms = gz_members();
    let all: Vec<u8> = ms.iter().flat_map(|m| m.source.clone()).collect();
    let mut f = Failures::default();
    for (i, m) in ms.iter().enumerate() {
        for k in [0u64, 3] {
            let at = m.deflate_end + k;
            let mut d = data.clone();
            flip(&mut d, at, 0x01);
            let what = format!("multi.gz: member {} trailer CRC byte {at} flipped", i + 1);
            let session = parse_named("multi.gz", d, &what);
            let t = session.tree();
            let out = decoded(&t, &what);
            if out != all {
                f.push(format!(
                    "{what}: decoded {} bytes, expected all {} bytes unchanged",
                    out.len(),
                    all.len()
                ));
            }
            if t.status_of(0) != Status::Corrupt {
                f.push(format!(
                    "{what}: root status {:?}, expected Corrupt",
                    t.status_of(0)
                ));
            }
            if !damage_covers(&t, 0, at, at + 1, &[Status::Corrupt]) {
                f.push(format!(
                    "{what}: no Corrupt damage covers {at}; damage: {}",
                    damage_text(&t, 0)
                ));
            }
        }
    }
    f.check("multi.gz trailer damage");
}

/// Fully decodes a single-member gzip file the way zlib would; `None` when
/// the deflate data is invalid, cut off, or the trailer does not match.
fn gunzip_checked(file: &[u8], data_offset: usize) -> Option<Vec<u8>> {
    let (out, used) = inflate_whole(file, data_offset)?;
    let end = data_offset + used;
    let trailer = file.get(end..end + 8)?;
    let crc = u32::from_le_bytes(trailer[..4].try_into().unwrap());
    let isize = u32::from_le_bytes(trailer[4..].try_into().unwrap());
    (crc == crc32(&out) && isize == out.len() as u32 && end + 8 == file.len()).then_some(out)
}

fn crc32(b: &[u8]) -> u32 {
    let mut h = flate2::Crc::new();
    h.update(b);
    h.sum()
}

/// 50 single-byte flips at seeded offsets in nested.tar.gz's deflate data: no
/// panic or hang; every tar member whose data ends before the decoded offset
/// of the flip is byte-exact; the status is not Complete unless the damaged
/// file really decodes to the same bytes with a matching CRC.
#[test]
fn nested_tar_gz_deflate_flips() {
    let a = archive("nested.tar.gz");
    let data = fixture("nested.tar.gz");
    let start = u(&a["gzip"]["data_offset"]);
    let end = u(&a["gzip"]["deflate_end"]);
    let original = gunzip_checked(&data, start as usize).expect("the fixture decodes");
    let members = tar_members("nested.tar.gz");
    let sources = tar_sources(&members);
    let mut rng = Rng::new(0x0f11_9500);
    let mut f = Failures::default();
    let mut exact_members = 0;
    for _ in 0..50 {
        let at = rng.range(start, end - 1);
        let mask = 1u8 << rng.below(8);
        let mut d = data.clone();
        flip(&mut d, at, mask);
        // Output decodable from the bytes before the flip cannot change.
        let pos = inflate_prefix(&data[start as usize..at as usize]).len() as u64;
        let what = format!("nested.tar.gz: bit {mask:#04x} flipped at {at} (decoded offset {pos})");
        let same = gunzip_checked(&d, start as usize).is_some_and(|o| o == original);
        let session = parse_named("nested.tar.gz", d, &what);
        let t = session.tree();
        for m in &members {
            if m.is_file() && m.data_offset + m.size <= pos {
                exact_members += 1;
                // pparse cannot tell where in the stream a failed CRC or
                // invalid data began: a member before the flip may be
                // called corrupt for its container's damage (the status
                // never claims more than it knows), but its bytes are exact.
                if let Some(id) = t.resolve(&m.path)
                    && matches!(t.status_of(id), Status::Corrupt | Status::Unverified)
                    && t.exts[id]
                        .damage
                        .iter()
                        .all(|d| d.reason.contains("lie in a damaged span"))
                {
                    if Some(&read_all(&t, id)) != sources.get(&m.path) {
                        f.push(format!("{what}: {} is not byte-exact", m.path));
                    }
                    continue;
                }
                check_intact(&t, &what, m, &sources, &mut f);
            }
        }
        let st = t.status_of(0);
        if same && st != Status::Complete {
            f.push(format!(
                "{what}: decodes to the original bytes with a good CRC, yet status {st:?}"
            ));
        }
        if !same && st == Status::Complete {
            f.push(format!(
                "{what}: the damaged file does not decode cleanly, yet the root status is Complete"
            ));
        }
    }
    assert!(exact_members > 50, "flips should leave members before them");
    f.check("nested.tar.gz deflate flips");
}

/// 4 KiB of zeros or of random bytes in the middle of a single-member
/// tar.gz: whatever the decoder makes of them, no member whose bytes are
/// wrong is called complete or truncated. A complete member is byte-exact;
/// a truncated one is a byte-exact prefix; the rest say corrupt.
#[test]
fn status_never_lies_after_a_hole_in_the_deflate_stream() {
    let gz = fixture("nested.tar.gz");
    let members = tar_members("nested.tar.gz");
    let sources = tar_sources(&members);
    let mut rng = Rng::new(11);
    let mut f = Failures::default();
    let mut corrupt_seen = 0;
    for (case, start) in (2048..gz.len() as u64 - 6000).step_by(3001).enumerate() {
        for zeros in [true, false] {
            let mut bad = gz.clone();
            if zeros {
                bad[start as usize..start as usize + 4096].fill(0);
            } else {
                overwrite(&mut bad, start, 4096, &mut rng);
            }
            let what = format!(
                "case {case}: 4 KiB of {} at {start}",
                if zeros { "zeros" } else { "random bytes" }
            );
            let s = parse("nested.tar.gz", bad);
            let t = s.tree();
            for m in &members {
                let (Some(id), Some(want)) = (t.resolve(&m.path), sources.get(&m.path)) else {
                    continue;
                };
                let got = read_all(&t, id);
                let ok = match t.status_of(id) {
                    Status::Complete => got == *want,
                    Status::Truncated => want.starts_with(&got),
                    // Not vouched for either way: never called complete.
                    Status::Corrupt | Status::Unverified => {
                        corrupt_seen += 1;
                        true
                    }
                };
                if !ok {
                    f.push(format!(
                        "{what}: {} is {} but its bytes are wrong: {}",
                        m.path,
                        t.status_of(id),
                        damage_text(&t, id)
                    ));
                }
            }
        }
    }
    assert!(corrupt_seen > 0, "no member was ever called corrupt");
    f.check("status after a hole in the deflate stream");
}

/// `extract` writes nothing wrong as if it were right: after random bytes
/// in the deflate stream, every file it writes is byte-exact, a byte-exact
/// prefix, or `unverified` (decoded before the error was noticed, written
/// as tar writes it, and flagged); stderr names what it held back and what
/// was cut.
#[test]
fn extract_writes_only_what_it_can_vouch_for() {
    let mut gz = fixture("nested.tar.gz");
    overwrite(&mut gz, 2048, 4096, &mut Rng::new(11));
    let members = tar_members("nested.tar.gz");
    let sources = tar_sources(&members);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bad.tar.gz");
    std::fs::write(&file, &gz).unwrap();
    let session = parse("bad.tar.gz", gz.clone());
    let t = session.tree();
    for all in [false, true] {
        let out = tmp.path().join(format!("out-{all}"));
        let mut args = vec![
            "extract".as_ref(),
            file.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
        ];
        if all {
            args.push("--all".as_ref());
        }
        let run = pparse(&args);
        assert_eq!(run.code, 1, "{}", run.stderr_text());
        let err = run.stderr_text();
        let mut wrong = 0;
        for (path, want) in &sources {
            let rel = path.trim_start_matches("nested.tar/");
            let Ok(got) = std::fs::read(out.join("nested.tar").join(rel)) else {
                continue;
            };
            // Wrong bytes only where the status says they are not vouched
            // for (unverified ones are written, as tar writes them).
            let st = t
                .resolve(&format!("bad.tar/{rel}"))
                .map(|id| t.status_of(id));
            if !want.starts_with(&got) && (all || st == Some(Status::Complete) || st.is_none()) {
                wrong += 1;
            }
        }
        if all {
            assert!(wrong > 0, "--all writes the corrupt members too");
        } else {
            assert_eq!(wrong, 0, "a file with wrong bytes was written: {err}");
            assert!(err.contains("were not written"), "{err}");
        }
    }
}

/// A zip (Python's zipfile, deflated) whose middle entry's deflate data
/// does not end within its compressed size (the final-block bit of its one
/// block cleared, so the decoder wants more blocks than the entry has),
/// in a file that is not cut: the entry is corrupt and none of its decoded
/// bytes is vouched for, though they decoded without an invalid code and
/// match its CRC so far; its neighbours stay complete. The same entry in a
/// copy cut inside its data is truncated.
#[test]
fn a_zip_stream_that_overruns_its_size_is_corrupt_not_truncated() {
    let zip = python(
        "import io, sys, zipfile\n\
         b = io.BytesIO()\n\
         with zipfile.ZipFile(b, 'w', zipfile.ZIP_DEFLATED) as z:\n\
         \x20   for n in 'abc':\n\
         \x20       z.writestr(n + '.txt', ('line of %s\\n' % n) * 40)\n\
         sys.stdout.buffer.write(b.getvalue())",
    );
    let lfh = |name: &[u8]| {
        let p = zip
            .windows(4)
            .enumerate()
            .find(|(p, w)| *w == b"PK\x03\x04" && zip[p + 30..].starts_with(name))
            .map(|(p, _)| p)
            .expect("local header");
        let extra = u16::from_le_bytes([zip[p + 28], zip[p + 29]]) as usize;
        let csize = u32::from_le_bytes(zip[p + 18..p + 22].try_into().unwrap()) as usize;
        (p + 30 + name.len() + extra, csize)
    };
    let (data, csize) = lfh(b"b.txt");
    assert_eq!(zip[data] & 1, 1, "one final block");
    let mut damaged = zip.clone();
    damaged[data] &= !1;
    let session = parse("overrun.zip", damaged.clone());
    let t = session.tree();
    for n in ["a.txt", "c.txt"] {
        assert_eq!(t.status_of(t.resolve(n).unwrap()), Status::Complete, "{n}");
    }
    let b = t.resolve("b.txt").unwrap();
    assert_eq!(t.status_of(b), Status::Corrupt);
    let d = &t.exts[b].damage;
    assert!(
        d.iter()
            .any(|d| d.range.start == 0 && d.reason.contains("does not end within")),
        "{d:?}"
    );
    // Cut inside b.txt's data: the file ends inside the stream.
    let cut = truncated(&damaged, (data + csize / 2) as u64);
    let session = parse("cut.zip", cut);
    let t = session.tree();
    let b = t.resolve("b.txt").unwrap();
    assert_eq!(t.status_of(b), Status::Truncated, "{:?}", t.exts[b].damage);
    assert_eq!(t.status_of(t.resolve("a.txt").unwrap()), Status::Complete);
}

/// Soft damage: a flipped bit that zlib decodes through (inside a stored
/// block, here the fixture's random member), so only the gzip CRC fails.
/// Every member keeps its bytes and is `unverified`, never `complete` nor
/// withheld as corrupt: `extract` writes all of them, as GNU tar does,
/// byte-exact where the damage is not, and lists them on stderr.
#[test]
fn soft_damage_keeps_every_member_unverified_and_extract_writes_them() {
    let a = archive("nested.tar.gz");
    let data = fixture("nested.tar.gz");
    let start = u(&a["gzip"]["data_offset"]) as usize;
    let end = u(&a["gzip"]["deflate_end"]) as usize;
    let original = gunzip_checked(&data, start).expect("the fixture decodes");
    let members = tar_members("nested.tar.gz");
    // The first flip (every 61st byte from the middle) that decodes to the
    // same length with other bytes, all inside one member's data (its
    // header intact, so every member is still listed).
    let (bad, at, changed) = (start + (end - start) / 2..end)
        .step_by(61)
        .find_map(|at| {
            let mut d = data.clone();
            flip(&mut d, at as u64, 0x10);
            let (out, _) = inflate_whole(&d, start)?;
            if out.len() != original.len() {
                return None;
            }
            let diff: Vec<usize> = (0..out.len()).filter(|&i| out[i] != original[i]).collect();
            let (&first, &last) = (diff.first()?, diff.last()?);
            members
                .iter()
                .any(|m| m.data_offset <= first as u64 && (last as u64) < m.data_offset + m.size)
                .then_some((d, at, first as u64))
        })
        .expect("a flip that decodes through");
    let sources = tar_sources(&members);
    let session = parse("soft.tar.gz", bad.clone());
    let t = session.tree();
    let mut before = 0;
    for m in members.iter().filter(|m| m.is_file()) {
        let id = t.resolve(&m.path).expect("every member is kept");
        let st = t.status_of(id);
        assert_eq!(
            st,
            Status::Unverified,
            "{} (flip at {at}): {}",
            m.path,
            damage_text(&t, id)
        );
        if m.data_offset + m.size <= changed {
            before += 1;
            assert_eq!(read_all(&t, id), sources[&m.path], "{}", m.path);
        }
    }
    assert!(before > 3, "members before the damage: {before}");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("soft.tar.gz");
    std::fs::write(&file, &bad).unwrap();
    let out = tmp.path().join("out");
    let run = pparse([
        "extract".as_ref(),
        file.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(run.code, 1, "{}", run.stderr_text());
    let err = run.stderr_text();
    assert!(err.contains("written, unverified"), "{err}");
    for m in members.iter().filter(|m| m.is_file()) {
        let rel = m.path.trim_start_matches("nested.tar/");
        let path = out.join("nested.tar").join(rel);
        if path.is_dir() {
            // A container (the zip): its entries are written inside.
            continue;
        }
        let got =
            std::fs::read(&path).unwrap_or_else(|e| panic!("{} not written: {e}; {err}", m.path));
        if m.data_offset + m.size <= changed {
            assert_eq!(got, sources[&m.path], "{}", m.path);
        }
    }
}

/// Soft damage in a tar.gz that holds a `.gz`, a `.bz2` and an `.xz` file: each
/// one's own CRCs cover its every byte and hold, so the outer failed CRC
/// does not reach them: `complete`, as the same bytes are alone; the members beside
/// it stay `unverified`. (Python's tarfile and gzip: random bytes are
/// stored, so a flipped bit in them decodes through.)
#[test]
fn a_member_proved_by_its_own_crc_stays_complete_under_soft_damage() {
    let tgz = python(
        "import bz2, gzip, io, lzma, random, sys, tarfile\n\
         rng = random.Random(7)\n\
         files = [('a.txt', b'some text\\n' * 3000),\n\
         \x20        ('b.txt.gz', gzip.compress(b'inner text\\n' * 4000, mtime=0)),\n\
         \x20        ('d.txt.bz2', bz2.compress(b'bzip2 text\\n' * 4000)),\n\
         \x20        ('e.txt.xz', lzma.compress(b'xz text\\n' * 4000)),\n\
         \x20        ('c.bin', bytes(rng.getrandbits(8) for _ in range(100000)))]\n\
         b = io.BytesIO()\n\
         with tarfile.open(fileobj=b, mode='w', format=tarfile.GNU_FORMAT) as t:\n\
         \x20   for name, data in files:\n\
         \x20       i = tarfile.TarInfo(name); i.size = len(data); i.mtime = 0\n\
         \x20       t.addfile(i, io.BytesIO(data))\n\
         sys.stdout.buffer.write(gzip.compress(b.getvalue(), mtime=0))",
    );
    let whole = parse("ok.tar.gz", tgz.clone());
    let t = whole.tree();
    assert_eq!(t.worst_status(), Status::Complete);
    // c.bin's bytes are stored verbatim: flip one in the middle of them.
    let random = read_all(&t, t.resolve("ok.tar/c.bin").unwrap());
    let at = tgz
        .windows(32)
        .position(|w| w == &random[50_000..50_032])
        .expect("stored bytes");
    let mut bad = tgz.clone();
    flip(&mut bad, at as u64 + 7, 0x20);
    let session = parse("soft.tar.gz", bad);
    let t = session.tree();
    let st = |p: &str| t.status_of(t.resolve(p).unwrap());
    assert_eq!(st("soft.tar/a.txt"), Status::Unverified);
    assert_eq!(st("soft.tar/c.bin"), Status::Unverified);
    let inner = t.resolve("soft.tar/b.txt.gz").unwrap();
    assert_eq!(
        t.status_of(inner),
        Status::Complete,
        "{}",
        damage_text(&t, inner)
    );
    assert_eq!(
        read_all(&t, t.resolve("soft.tar/b.txt.gz/b.txt").unwrap()),
        b"inner text\n".repeat(4000)
    );
    for p in ["soft.tar/d.txt.bz2", "soft.tar/e.txt.xz"] {
        let id = t.resolve(p).unwrap();
        assert_eq!(
            t.status_of(id),
            Status::Complete,
            "{p}: {}",
            damage_text(&t, id)
        );
    }
}
