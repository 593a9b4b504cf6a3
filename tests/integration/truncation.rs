//! Truncation: every prefix of an archive gives back exactly the bytes that
//! the prefix holds — nothing recoverable lost, nothing invented — with the
//! status saying what happened.

use std::collections::{BTreeMap, BTreeSet};

use pparse::{Status, Tree};

use crate::util::*;

/// Checks one regular-file leaf expected to hold `expected` bytes (a prefix
/// of `source`, whose full size is `size`). A leaf with fewer bytes must not
/// be Complete; one with all of them must be Complete when
/// `must_be_complete` (its whole record is there, e.g. not when only the
/// last bits of a deflate stream are cut off).
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_leaf_prefix(
    t: &Tree,
    what: &str,
    path: &str,
    expected: u64,
    size: u64,
    must_be_complete: bool,
    source: &[u8],
    f: &mut Failures,
) {
    let Some(id) = t.resolve(path) else {
        f.push(format!(
            "{what}: {path:?} should hold {expected} of {size} bytes but does not resolve"
        ));
        return;
    };
    let got = read_all(t, id);
    if got.len() as u64 != expected {
        f.push(format!(
            "{what}: {path:?} has {} bytes, expected exactly {expected} (of {size}); status {:?}, damage: {}",
            got.len(),
            t.status_of(id),
            damage_text(t, id)
        ));
        return;
    }
    if got[..] != source[..expected as usize] {
        let at = got
            .iter()
            .zip(source)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        f.push(format!(
            "{what}: {path:?} bytes differ from the source at offset {at}"
        ));
        return;
    }
    let st = t.status_of(id);
    if expected < size && st == Status::Complete {
        f.push(format!(
            "{what}: {path:?} holds {expected} of {size} bytes but its status is Complete"
        ));
    }
    if expected == size && must_be_complete && st != Status::Complete {
        f.push(format!(
            "{what}: {path:?} holds all {size} bytes but its status is {st:?}: {}",
            damage_text(t, id)
        ));
    }
}

/// A member whose headers are not all inside the prefix must not appear:
/// expect/nested_truncation.json lists only members whose headers are
/// present ("only regular-file leaves whose headers are present appear"),
/// and a member named by a partial header would be invented.
pub(crate) fn check_absent(t: &Tree, what: &str, path: &str, f: &mut Failures) {
    let Some(id) = t.resolve(path) else { return };
    let n = t.exts[id].size();
    let st = t.status_of(id);
    f.push(format!(
        "{what}: {path:?} should not be there (its header is cut off) but resolves with {n} bytes, status {st:?}"
    ));
}

/// Whether the whole record of a leaf of nested.tar.gz is inside the cut: a
/// tar member always (its bytes are all there when its size is), a zip entry
/// when its zip's available bytes reach the end of its compressed data (and
/// data descriptor).
fn record_present(path: &str, cut: &serde_json::Value) -> bool {
    let layers = archive("nested.tar.gz")["layers"]
        .as_object()
        .expect("layers");
    let Some((zip, layer)) = layers
        .iter()
        .filter(|(k, _)| path.starts_with(&format!("{k}/")))
        .max_by_key(|(k, _)| k.len())
    else {
        return true;
    };
    let entry = &path[zip.len() + 1..];
    let m = zip_members_of(layer)
        .into_iter()
        .find(|m| m.name == entry)
        .unwrap_or_else(|| panic!("{path}: no entry {entry:?} in layer {zip}"));
    u(&cut["containers"][zip.as_str()]) >= m.end()
}

fn nested_cuts(zip_level: bool) {
    let exp = nested_truncation();
    let data = fixture("nested.tar.gz");
    assert_eq!(u(&exp["size"]), data.len() as u64);
    let full = data.len() as u64;
    let sizes: BTreeMap<String, u64> = exp["leaf_sizes"]
        .as_object()
        .expect("leaf_sizes")
        .iter()
        .map(|(k, v)| (k.clone(), u(v)))
        .collect();
    let sources: BTreeMap<String, Vec<u8>> = leaves("nested.tar.gz")
        .into_iter()
        .map(|l| (l.path, source_bytes(&l.source)))
        .collect();
    let cuts = exp["cuts"].as_array().expect("cuts");
    assert!(cuts.len() > 100, "expected the 138 cuts of the manifest");
    let mut f = Failures::default();
    let mut checked = 0;
    for c in cuts {
        let cut = u(&c["cut"]);
        let what = format!("nested.tar.gz[..{cut}]");
        let session = parse_named("nested.tar.gz", truncated(&data, cut), &what);
        let t = session.tree();
        if !zip_level {
            let root = t.status_of(0);
            let want = if cut < full {
                Status::Truncated
            } else {
                Status::Complete
            };
            // An empty prefix holds nothing to recognise: no parser is fine.
            let unrecognised = cut == 0 && t.exts[0].parser().is_none() && t.len() == 1;
            if root != want && !unrecognised {
                f.push(format!(
                    "{what}: root status {root:?}, expected {want:?}; damage: {}",
                    damage_text(&t, 0)
                ));
            }
        }
        let listed = c["leaves"].as_object().expect("leaves");
        for (path, &size) in &sizes {
            if inside_zip(path) != zip_level {
                continue;
            }
            match listed.get(path) {
                Some(n) => {
                    checked += 1;
                    let whole = record_present(path, c);
                    check_leaf_prefix(&t, &what, path, u(n), size, whole, &sources[path], &mut f);
                }
                None => check_absent(&t, &what, path, &mut f),
            }
        }
        for (path, n) in c["containers"].as_object().expect("containers") {
            // nested.tar and nested.tar/docs/inner.zip are tar-level; deep.zip
            // is an entry of inner.zip.
            if inside_zip(path) != zip_level {
                continue;
            }
            let n = u(n);
            match t.resolve(path) {
                Some(id) if t.exts[id].size() == n => {}
                Some(id) => f.push(format!(
                    "{what}: container {path:?} has {} bytes, expected {n}",
                    t.exts[id].size()
                )),
                None if n == 0 && path == "nested.tar" => {}
                None => f.push(format!(
                    "{what}: container {path:?} ({n} bytes available) does not resolve"
                )),
            }
        }
    }
    assert!(checked > 0);
    f.check(if zip_level {
        "nested.tar.gz truncation, leaves inside zips"
    } else {
        "nested.tar.gz truncation, tar-level leaves and root status"
    });
}

/// Every cut of expect/nested_truncation.json: tar members, root status and
/// the decoded tar's size.
#[test]
fn nested_tar_gz_every_cut_tar_level() {
    nested_cuts(false);
}

/// The same cuts for the leaves inside docs/inner.zip and deep.zip (needs
/// the zip parser).
#[test]
fn nested_tar_gz_every_cut_zip_level() {
    nested_cuts(true);
}

/// Cut offsets for a plain tar: every 37th byte and every header/data
/// boundary ±1.
fn tar_cuts(name: &str) -> Vec<u64> {
    let size = u(&archive(name)["size"]);
    let end = u(&archive(name)["end_offset"]);
    let mut cuts: BTreeSet<u64> = (0..=size).step_by(37).collect();
    let mut marks = vec![size, end, end + 512, end + 1024];
    for m in tar_members(name) {
        marks.extend(m.headers.iter().map(|h| h.0));
        marks.push(m.data_offset);
        marks.push(m.data_offset + m.size);
        marks.push(m.end());
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

/// Members of every prefix of a plain tar: a member is there iff all its
/// header blocks are; a file holds min(size, cut - data_offset) bytes.
fn plain_tar_cuts(name: &str) {
    let data = fixture(name);
    let members = tar_members(name);
    let sources: BTreeMap<String, Vec<u8>> = members
        .iter()
        .filter_map(|m| Some((m.path.clone(), source_bytes(m.source.as_ref()?))))
        .collect();
    let mut f = Failures::default();
    for cut in tar_cuts(name) {
        let what = format!("{name}[..{cut}]");
        let session = parse_named(name, truncated(&data, cut), &what);
        let t = session.tree();
        for m in &members {
            let present = cut >= m.data_offset;
            if !present {
                check_absent(&t, &what, &m.path, &mut f);
                continue;
            }
            if m.is_file() {
                let n = m.size.min(cut - m.data_offset);
                check_leaf_prefix(
                    &t,
                    &what,
                    &m.path,
                    n,
                    m.size,
                    true,
                    &sources[&m.path],
                    &mut f,
                );
            } else {
                match t.resolve(&m.path) {
                    None => f.push(format!(
                        "{what}: {} {:?} has all its headers but does not resolve",
                        m.kind, m.path
                    )),
                    Some(id) if t.exts[id].kind.as_str() != m.kind => f.push(format!(
                        "{what}: {:?} is a {}, pparse says {}",
                        m.path,
                        m.kind,
                        t.exts[id].kind.as_str()
                    )),
                    Some(_) => {}
                }
            }
        }
    }
    f.check(&format!("{name} truncation"));
}

/// The status of the tar itself for every prefix of every plain tar.
///
/// The archive is whole once both end-of-archive blocks are there (what
/// follows them is padding); before that it is truncated: cut inside a
/// member, inside the padding after its data (GNU tar: "Unexpected EOF in
/// archive"), on a block boundary without an end-of-archive marker (pparse
/// has a message for it: "archive ends without its end-of-archive marker"),
/// or after a lone zero block (GNU tar: "A lone zero block").
#[test]
fn plain_tars_root_status_every_cut() {
    let mut f = Failures::default();
    for name in TARS {
        let data = fixture(name);
        let end = u(&archive(name)["end_offset"]);
        for cut in tar_cuts(name) {
            let what = format!("{name}[..{cut}]");
            let session = parse_named(name, truncated(&data, cut), &what);
            let t = session.tree();
            let want = if cut < end + 1024 {
                Status::Truncated
            } else {
                Status::Complete
            };
            let root = t.status_of(0);
            // Less than one header block cannot be recognised as a tar: no
            // parser (and no members) is fine there.
            let unrecognised = cut < 512 && t.exts[0].parser().is_none() && t.len() == 1;
            if root != want && !unrecognised {
                f.push(format!(
                    "{what}: root status {root:?}, expected {want:?} (end-of-archive blocks at {end}..{}); damage: {}",
                    end + 1024,
                    damage_text(&t, 0)
                ));
            }
        }
    }
    f.check("plain tar root status");
}

#[test]
fn ustar_tar_every_cut() {
    plain_tar_cuts("ustar.tar");
}

#[test]
fn gnu_tar_every_cut() {
    plain_tar_cuts("gnu.tar");
}

#[test]
fn pax_tar_every_cut() {
    plain_tar_cuts("pax.tar");
}

#[test]
fn v7_tar_every_cut() {
    plain_tar_cuts("v7.tar");
}

#[test]
fn base256_tar_every_cut() {
    plain_tar_cuts("base256.tar");
}
