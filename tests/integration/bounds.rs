//! Hostile values in archive headers, built by hand: sizes and offsets at
//! the top of their range, malformed PAX records. Each is reported as
//! damage with its offset and reason; none panics (tests run in debug, where
//! arithmetic overflow panics) and none is silently ignored.

use pparse::Status;
use pparse::extraction::Tree;

use crate::util::*;

/// A 512-byte ustar header with a valid checksum.
pub(crate) fn tar_header(name: &str, kind: u8, size: u64) -> Vec<u8> {
    let mut h = vec![0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..108].copy_from_slice(b"0000644\0");
    h[108..116].copy_from_slice(b"0000000\0");
    h[116..124].copy_from_slice(b"0000000\0");
    if size < 0o77777777777 {
        h[124..136].copy_from_slice(format!("{size:011o}\0").as_bytes());
    } else {
        // base-256, as GNU tar writes sizes past 8 GiB.
        h[124] = 0x80;
        h[128..136].copy_from_slice(&size.to_be_bytes());
    }
    h[136..148].copy_from_slice(b"00000000000\0");
    h[156] = kind;
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    h[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    h
}

/// `data` padded to whole 512-byte blocks.
pub(crate) fn blocks(data: &[u8]) -> Vec<u8> {
    let mut v = data.to_vec();
    v.resize(data.len().div_ceil(512) * 512, 0);
    v
}

fn ext(t: &Tree, name: &str) -> usize {
    (0..t.len())
        .find(|&i| t.exts[i].display_name() == name)
        .unwrap_or_else(|| panic!("no {name}:\n{}", tree_text(t)))
}

/// One PAX record `"LEN key=value\n"`, LEN counting itself.
fn pax_record(key: &str, value: &str) -> Vec<u8> {
    let body = format!(" {key}={value}\n");
    let mut len = body.len() + 1;
    while format!("{len}").len() + body.len() != len {
        len += 1;
    }
    format!("{len}{body}").into_bytes()
}

fn pax_tar(records: &[u8]) -> Vec<u8> {
    let mut tar = tar_header("PaxHeaders/a.txt", b'x', records.len() as u64);
    tar.extend(blocks(records));
    tar.extend(tar_header("a.txt", b'0', 5));
    tar.extend(blocks(b"hello"));
    tar.extend(tar_header("b.txt", b'0', 3));
    tar.extend(blocks(b"bye"));
    tar.extend([0u8; 1024]);
    tar
}

/// A PAX `size=` that is no number (or too big for one) and a record longer
/// than its header are damage at the record, and the members still list.
#[test]
fn pax_problems_are_damage_with_offsets() {
    for (records, why) in [
        (
            pax_record("size", "99999999999999999999999"),
            "is not a size",
        ),
        (pax_record("size", "12x"), "is not a size"),
        (b"99 path=x\n".to_vec(), "longer than"),
        (b"10 path=xy".to_vec(), "line break"),
    ] {
        let s = parse("pax.tar", pax_tar(&records));
        let t = s.tree();
        let root = t.root();
        let d = root
            .damage
            .iter()
            .find(|d| d.reason.contains(why))
            .unwrap_or_else(|| panic!("{records:?}: no damage with {why:?}: {:?}", root.damage));
        assert_eq!(d.status, Status::Corrupt);
        assert_eq!(d.range.start, 512, "{records:?}: {d}");
        let a = ext(&t, "a.txt");
        assert_eq!(read_all(&t, a), b"hello", "{records:?}");
        let b = ext(&t, "b.txt");
        assert_eq!(read_all(&t, b), b"bye", "{records:?}");
    }
}

/// A member whose size is 2^64-1 (base-256) ends the archive as a cut
/// member, with no overflow on the way.
#[test]
fn tar_size_at_the_top_of_the_range() {
    for size in [u64::MAX, u64::MAX - 511, 1 << 63] {
        let mut tar = tar_header("huge.bin", b'0', size);
        tar.extend(blocks(b"some bytes"));
        let s = parse("huge.tar", tar);
        let t = s.tree();
        let h = ext(&t, "huge.bin");
        assert_eq!(t.status_of(h), Status::Truncated, "{size}");
        assert_eq!(t.exts[h].declared_size(), Some(size));
    }
    // As a PAX size too.
    let rec = pax_record("size", &u64::MAX.to_string());
    let s = parse("pax.tar", pax_tar(&rec));
    let t = s.tree();
    let a = ext(&t, "a.txt");
    assert_eq!(t.exts[a].declared_size(), Some(u64::MAX));
    // The rest of the archive is a.txt's bytes (in which a tar is found).
    assert!(
        damage_text(&t, a).contains(&format!("of {} bytes present", u64::MAX)),
        "{}",
        damage_text(&t, a)
    );
}

/// A stored zip entry whose zip64 compressed size is 2^64-1: the offset
/// does not wrap; the entry is corrupt, with the reason, and its bytes are
/// the ones that are there.
#[test]
fn zip64_size_past_the_end_is_damage() {
    let data = b"hello zip";
    let crc = crc32fast::hash(data);
    let name = b"a.txt";
    let mut zip = Vec::new();
    // Local header: stored, real sizes.
    zip.extend(b"PK\x03\x04");
    zip.extend(20u16.to_le_bytes());
    zip.extend([0u8; 4]); // flags, method
    zip.extend([0u8; 4]); // time, date
    zip.extend(crc.to_le_bytes());
    zip.extend((data.len() as u32).to_le_bytes());
    zip.extend((data.len() as u32).to_le_bytes());
    zip.extend((name.len() as u16).to_le_bytes());
    zip.extend(0u16.to_le_bytes());
    zip.extend(name);
    zip.extend(data);
    let cd = zip.len() as u32;
    // Central header: sizes in a zip64 extra, the compressed one 2^64-1.
    let mut extra = Vec::new();
    extra.extend(1u16.to_le_bytes());
    extra.extend(16u16.to_le_bytes());
    extra.extend((data.len() as u64).to_le_bytes());
    extra.extend(u64::MAX.to_le_bytes());
    zip.extend(b"PK\x01\x02");
    zip.extend(45u16.to_le_bytes());
    zip.extend(45u16.to_le_bytes());
    zip.extend([0u8; 4]);
    zip.extend([0u8; 4]);
    zip.extend(crc.to_le_bytes());
    zip.extend(u32::MAX.to_le_bytes());
    zip.extend(u32::MAX.to_le_bytes());
    zip.extend((name.len() as u16).to_le_bytes());
    zip.extend((extra.len() as u16).to_le_bytes());
    zip.extend([0u8; 12]); // comment length, disk, attributes
    zip.extend(0u32.to_le_bytes()); // local header offset
    zip.extend(name);
    zip.extend(&extra);
    let cd_len = zip.len() as u32 - cd;
    zip.extend(b"PK\x05\x06");
    zip.extend([0u8; 4]);
    zip.extend(1u16.to_le_bytes());
    zip.extend(1u16.to_le_bytes());
    zip.extend(cd_len.to_le_bytes());
    zip.extend(cd.to_le_bytes());
    zip.extend(0u16.to_le_bytes());
    let s = parse("big64.zip", zip);
    let t = s.tree();
    let a = ext(&t, "a.txt");
    assert_eq!(t.status_of(a), Status::Corrupt, "{}", damage_text(&t, a));
    assert!(
        t.root()
            .damage
            .iter()
            .any(|d| d.reason.contains("past the end")),
        "{}",
        damage_text(&t, 0)
    );
    assert!(read_all(&t, a).starts_with(data));
}

/// One zip member for [`zip_of`].
pub(crate) struct Member {
    pub name: String,
    pub data: Vec<u8>,
    pub deflate: bool,
}

/// A zip written by hand. With `repeat`, the central directory lists the
/// first member `repeat` times under different names, every record pointing
/// at the one local header (the shape of overlapping zip bombs).
pub(crate) fn zip_of(members: &[Member], repeat: usize) -> Vec<u8> {
    use std::io::Write;
    let mut out = Vec::new();
    let mut central = Vec::new();
    let mut records = 0u16;
    for m in members {
        let crc = crc32fast::hash(&m.data);
        let body = if m.deflate {
            let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
            e.write_all(&m.data).unwrap();
            e.finish().unwrap()
        } else {
            m.data.clone()
        };
        let method: u16 = if m.deflate { 8 } else { 0 };
        let at = out.len() as u32;
        out.extend(b"PK\x03\x04");
        out.extend(20u16.to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(method.to_le_bytes());
        out.extend([0u8; 4]);
        out.extend(crc.to_le_bytes());
        out.extend((body.len() as u32).to_le_bytes());
        out.extend((m.data.len() as u32).to_le_bytes());
        out.extend((m.name.len() as u16).to_le_bytes());
        out.extend(0u16.to_le_bytes());
        out.extend(m.name.as_bytes());
        out.extend(&body);
        let copies = if repeat > 0 { repeat } else { 1 };
        for k in 0..copies {
            let name = if k == 0 {
                m.name.clone()
            } else {
                format!("{k}-{}", m.name)
            };
            central.extend(b"PK\x01\x02");
            central.extend(20u16.to_le_bytes());
            central.extend(20u16.to_le_bytes());
            central.extend(0u16.to_le_bytes());
            central.extend(method.to_le_bytes());
            central.extend([0u8; 4]);
            central.extend(crc.to_le_bytes());
            central.extend((body.len() as u32).to_le_bytes());
            central.extend((m.data.len() as u32).to_le_bytes());
            central.extend((name.len() as u16).to_le_bytes());
            central.extend([0u8; 12]);
            central.extend(at.to_le_bytes());
            central.extend(name.as_bytes());
            records += 1;
        }
    }
    let cd = out.len() as u32;
    out.extend(&central);
    out.extend(b"PK\x05\x06");
    out.extend([0u8; 4]);
    out.extend(records.to_le_bytes());
    out.extend(records.to_le_bytes());
    out.extend((central.len() as u32).to_le_bytes());
    out.extend(cd.to_le_bytes());
    out.extend(0u16.to_le_bytes());
    out
}

/// Ten nested stored zips, each listing its one local header 16 times
/// (9.6 KB): the overlaps are reported, repeats are listed but not parsed
/// again, and the tree stays proportional to the input instead of 16^10.
#[test]
fn overlapping_entries_do_not_multiply_the_tree() {
    let mut inner = b"kernel".to_vec();
    for level in 0..10 {
        let m = Member {
            name: format!("level{level}.zip"),
            data: inner,
            deflate: false,
        };
        inner = zip_of(&[m], 16);
    }
    assert!(inner.len() < 16_000, "{}", inner.len());
    let s = parse("bomb.zip", inner.clone());
    let t = s.tree();
    assert!(t.len() <= 16 * 11, "{} extractions", t.len());
    assert!(
        t.root()
            .damage
            .iter()
            .filter(|d| d.reason.contains("overlaps the bytes of entry"))
            .count()
            == 15,
        "{}",
        damage_text(&t, 0)
    );
    // Each repeat has the same bytes as the entry it repeats.
    let first = (1..t.len())
        .find(|&i| t.exts[i].parent() == Some(0))
        .unwrap();
    let bytes = read_all(&t, first);
    for &c in &t.root().children {
        assert_eq!(read_all(&t, c), bytes);
    }
    drop(t);
    // The command line too, with the overlap on stderr and exit 1.
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("bomb.zip");
    std::fs::write(&path, &inner).unwrap();
    let run = pparse(["tree".as_ref(), path.as_os_str()]);
    assert_eq!(run.code, 1);
    assert!(run.stdout.len() < 64 * 1024, "{} bytes", run.stdout.len());
    assert!(
        run.stderr_text().contains("overlaps"),
        "{}",
        run.stderr_text()
    );
}

/// Nested deflated zips, each of 16 members (42.zip's shape), decode to
/// 32 GiB; decoding stops at the session's budget with a note, and what was
/// not decoded is not called complete.
#[test]
fn nested_deflate_bomb_stops_at_the_decode_budget() {
    let mut level = zip_of(
        &(0..16)
            .map(|i| Member {
                name: format!("zeros{i}.bin"),
                data: vec![0u8; 8 << 20],
                deflate: true,
            })
            .collect::<Vec<_>>(),
        0,
    );
    for depth in 0..2 {
        level = zip_of(
            &(0..16)
                .map(|i| Member {
                    name: format!("d{depth}-{i}.zip"),
                    data: level.clone(),
                    deflate: true,
                })
                .collect::<Vec<_>>(),
            0,
        );
    }
    let budget = 256u64 << 20;
    let opts = pparse::Options {
        decode_ratio: 1,
        decode_floor: budget,
        ..pparse::Options::default()
    };
    let s = pparse::Session::from_bytes("bomb.zip", level, opts);
    s.wait();
    let t = s.tree();
    let decoded: u64 = t
        .exts
        .iter()
        .filter(|e| e.data().describe() == "deflate")
        .map(|e| e.size())
        .sum();
    assert!(
        decoded <= budget + (64 << 20),
        "decoded {decoded} bytes with a budget of {budget}"
    );
    let stopped: Vec<_> = (0..t.len())
        .filter(|&i| {
            t.exts[i]
                .notes()
                .iter()
                .any(|n| n.contains("decode budget") || n.contains("budget"))
        })
        .collect();
    assert!(!stopped.is_empty(), "no note says the budget stopped work");
    for i in 0..t.len() {
        let e = &t.exts[i];
        if e.data().describe() == "deflate" && e.declared_size().is_some_and(|d| e.size() < d) {
            assert_ne!(t.status_of(i), Status::Complete, "{}", t.path_of(i));
        }
    }
}
