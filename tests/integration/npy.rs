//! NumPy `.npy` and `.npz`: every fixture's arrays against what numpy
//! reads back (fixtures/npy/expect.json, written by make_npy.py with numpy
//! itself): names as `numpy.load` gives them, dtypes, shapes, where the data
//! is, the sha256 of its bytes, the first elements as Python shows them;
//! object arrays through the pickle VM; `.npz` stored and compressed, and
//! inside a tar.gz; the export read back by numpy; cuts and damage.

use std::process::Command;

use pparse::offer::tensor::Tensor;
use pparse::view::tensors::tensors;
use pparse::view::values;
use pparse::{Status, Tree};
use serde_json::Value;

use crate::util::*;

fn expect() -> Value {
    let text = std::fs::read_to_string(fixture_path("npy/expect.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// numpy's description of the arrays of fixture `name` (a `.npy` or `.npz`).
fn arrays<'a>(e: &'a Value, name: &str) -> Vec<&'a Value> {
    let kind = if name.ends_with(".npz") { "npz" } else { "npy" };
    e[kind][name]["arrays"].as_array().unwrap().iter().collect()
}

/// pparse's name of a numpy dtype string, from numpy's own spelling.
fn dtype_name(descr: &str, itemsize: u64) -> String {
    let body = descr.trim_start_matches(['<', '>', '|', '=']);
    let (kind, size) = body.split_at(1);
    match (kind, size) {
        ("b", "1") => "BOOL".into(),
        ("i", n) => format!("I{}", n.parse::<u32>().unwrap() * 8),
        ("u", n) => format!("U{}", n.parse::<u32>().unwrap() * 8),
        ("f", n) => format!("F{}", n.parse::<u32>().unwrap() * 8),
        ("c", n) => format!("C{}", n.parse::<u32>().unwrap() * 8),
        ("M" | "m" | "S" | "U" | "V", _) => body.to_string(),
        _ => panic!("no pparse name for {descr} ({itemsize} bytes)"),
    }
}

/// Every tensor of every `.npy` extraction in the tree, in tree order.
fn all_tensors(tree: &Tree) -> Vec<Tensor> {
    tree.subtree(0)
        .into_iter()
        .filter(|&id| tree.exts[id].parser() == Some("npy"))
        .flat_map(|id| tensors(tree, id))
        .collect()
}

/// Checks one tensor against numpy's description of its array.
fn check_array(tree: &Tree, t: &Tensor, w: &Value, what: &str, f: &mut Failures) {
    let ctx = format!("{what}: {}", t.name);
    let want_dtype = match w["descr"].as_str() {
        Some(d) => dtype_name(d, u(&w["itemsize"])),
        None => format!("V{}", u(&w["itemsize"])),
    };
    let shape: Vec<u64> = w["shape"].as_array().unwrap().iter().map(u).collect();
    let got = (
        t.name.as_str(),
        t.dtype.name().to_string(),
        &t.shape,
        t.offset,
        t.length,
        t.status,
    );
    let exp = (
        s(&w["name"]),
        want_dtype,
        &shape,
        u(&w["data_offset"]),
        u(&w["data_length"]),
        Status::Complete,
    );
    if got != exp {
        f.push(format!("{ctx}: got {got:?}, expected {exp:?}"));
        return;
    }
    let be = w["descr"].as_str().is_some_and(|d| d.starts_with('>'));
    if t.big_endian != be {
        f.push(format!("{ctx}: big_endian {}", t.big_endian));
    }
    if w["fortran_order"].as_bool().unwrap() && shape.len() > 1 && t.stride.is_none() {
        f.push(format!("{ctx}: Fortran order without strides"));
    }
    if sha_hex(&tensor_bytes(tree, t)) != s(&w["sha256"]) {
        f.push(format!("{ctx}: sha256 of the data differs"));
    }
    let first: Vec<&str> = w["first"].as_array().unwrap().iter().map(s).collect();
    let data = tree.exts[t.source].data();
    let shown: Vec<String> = values::values(t, &*data, 0, first.len())
        .iter()
        .map(|v| v.display())
        .collect();
    // pparse shows the first 80 characters of a long item.
    let same = shown.len() == first.len()
        && shown
            .iter()
            .zip(&first)
            .all(|(a, b)| match a.strip_suffix("…'") {
                Some(head) => b.starts_with(head),
                None => a == b,
            });
    if !same {
        f.push(format!("{ctx}: values {shown:?}, numpy {first:?}"));
    }
}

#[test]
fn every_npy_fixture_matches_numpy() {
    let e = expect();
    let mut f = Failures::default();
    let mut dtypes: Vec<String> = Vec::new();
    for (name, want) in e["npy"].as_object().unwrap() {
        let session = parse(name, fixture(&format!("npy/{name}")));
        let t = session.tree();
        if t.root().parser() != Some("npy") || !t.root().damage.is_empty() {
            f.push(format!(
                "{name}: parser {:?}, damage {}",
                t.root().parser(),
                damage_text(&t, 0)
            ));
            continue;
        }
        let arrays: Vec<&Value> = want["arrays"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| !a["object"].as_bool().unwrap())
            .collect();
        let list = tensors(&t, 0);
        if list.len() != arrays.len() {
            f.push(format!(
                "{name}: {} tensors, numpy {}",
                list.len(),
                arrays.len()
            ));
            continue;
        }
        for (x, w) in list.iter().zip(&arrays) {
            check_array(&t, x, w, name, &mut f);
            dtypes.push(x.dtype.name().to_string());
        }
        // The header's keys are nodes over their values' text.
        drop(t);
        let header = t_index(&session, "header");
        assert!(session.load(0, &[header]), "{name}: header loads");
        let t = session.tree();
        let keys: Vec<&str> = t.root().nodes[header]
            .loaded_children()
            .iter()
            .map(|n| &*n.name)
            .collect();
        if keys != ["descr", "fortran_order", "shape"] {
            f.push(format!("{name}: header keys {keys:?}"));
        }
        if let Some(fields) = want["arrays"][0]["fields"].as_array() {
            let descr = &t.root().nodes[header].loaded_children()[0];
            let got: Vec<&str> = descr.loaded_children().iter().map(|n| &*n.name).collect();
            let want: Vec<String> = fields.iter().map(|x| x.as_str().unwrap().into()).collect();
            let stripped: Vec<String> = got
                .iter()
                .map(|g| g.split(" (").next().unwrap().to_string())
                .filter(|g| g != "(padding)")
                .collect();
            if stripped != want {
                f.push(format!("{name}: fields {got:?}, numpy {want:?}"));
            }
        }
    }
    dtypes.sort();
    dtypes.dedup();
    for needed in [
        "BOOL", "I8", "I16", "I32", "I64", "U8", "U16", "U32", "U64", "F16", "F32", "F64", "F128",
        "C64", "C128", "C256", "M8[ns]", "M8[D]", "M8[s]", "M8[10ms]", "m8[us]", "m8[10ms]", "S5",
        "U3", "U2", "V4",
    ] {
        if !dtypes.iter().any(|d| d == needed) {
            f.push(format!("no fixture has {needed}"));
        }
    }
    f.check("npy fixtures");
}

/// The index of the first top-level node named `name`.
fn t_index(session: &pparse::Session, name: &str) -> usize {
    session
        .tree()
        .root()
        .nodes
        .iter()
        .position(|n| &*n.name == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

#[test]
fn an_object_array_is_a_pickle_read_by_the_vm() {
    let session = parse("object.npy", fixture("npy/object.npy"));
    let t = session.tree();
    assert!(tensors(&t, 0).is_empty());
    let kids = child_names(&t, 0);
    assert_eq!(kids, ["object.pkl"]);
    let c = t.exts[0].children[0];
    assert_eq!(t.exts[c].parser(), Some("pickle"), "{}", tree_text(&t));
    assert!(t.exts[c].damage.is_empty(), "{}", damage_text(&t, c));
    // `pparse pickle` lists it as pickletools would; the strings numpy
    // pickled are there, and nothing was run.
    let out = pparse([
        "pickle",
        &fixture_path("npy/object.npy").display().to_string(),
        "object.pkl",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr_text());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("'text'") && text.contains("STOP"), "{text}");
}

#[test]
fn npz_members_are_tensors_named_as_numpy_load_names_them() {
    let e = expect();
    let mut f = Failures::default();
    for (name, want) in e["npz"].as_object().unwrap() {
        let session = parse(name, fixture(&format!("npy/{name}")));
        let t = session.tree();
        let list = all_tensors(&t);
        let names: Vec<&str> = list.iter().map(|x| x.name.as_str()).collect();
        let files: Vec<&str> = want["files"].as_array().unwrap().iter().map(s).collect();
        if names != files {
            f.push(format!("{name}: tensors {names:?}, numpy.load {files:?}"));
            continue;
        }
        for (x, w) in list.iter().zip(want["arrays"].as_array().unwrap()) {
            check_array(&t, x, w, name, &mut f);
        }
        // The CLI lists the same.
        let out = pparse([
            "tensors",
            "--json",
            &fixture_path(&format!("npy/{name}")).display().to_string(),
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr_text());
        let j: Value = serde_json::from_slice(&out.stdout).unwrap();
        let cli: Vec<&str> = j
            .as_array()
            .unwrap()
            .iter()
            .map(|x| s(&x["name"]))
            .collect();
        if cli != files {
            f.push(format!("{name}: pparse tensors {cli:?}"));
        }
    }
    f.check("npz fixtures");
}

#[test]
fn an_npz_in_a_tar_gz_lists_the_same_tensors() {
    let e = expect();
    let session = parse("nested.tar.gz", fixture("npy/nested.tar.gz"));
    let t = session.tree();
    let list = all_tensors(&t);
    let mut want: Vec<(String, String)> = e["npz"]["compressed.npz"]["arrays"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (s(&a["name"]).to_string(), s(&a["sha256"]).to_string()))
        .collect();
    let fa = &e["npy"]["fortran_f4.npy"]["arrays"][0];
    want.push(("fortran_f4".into(), s(&fa["sha256"]).to_string()));
    let got: Vec<(String, String)> = list
        .iter()
        .map(|x| {
            assert_eq!(x.status, Status::Complete, "{}", x.name);
            (x.name.clone(), sha_hex(&tensor_bytes(&t, x)))
        })
        .collect();
    // Members of a tar keep their folder; numpy.load of the npz names the
    // arrays inside it.
    let got: Vec<(String, String)> = got
        .into_iter()
        .map(|(n, h)| (n.trim_start_matches("data/").to_string(), h))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn bytes_after_the_last_array_are_kept_for_the_carver() {
    let session = parse("trailing.npy", fixture("npy/trailing.npy"));
    let t = session.tree();
    let list = tensors(&t, 0);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].status, Status::Complete);
    let last = t.root().nodes.last().unwrap();
    assert_eq!(last.kind, "trailing");
    assert_eq!(last.range.len(), 75);
    assert!(t.root().damage.is_empty());
}

#[test]
fn the_export_reads_back_in_numpy_as_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let mut script = String::from("import numpy as np, sys\nok = True\n");
    for name in [
        "fortran_f4.npy",
        "fortran_i2_be.npy",
        "datetime_ns.npy",
        "timedelta_10ms.npy",
        "unicode_be.npy",
        "bytes.npy",
        "longdouble.npy",
        "clongdouble.npy",
        "struct_packed.npy",
        "f2_be.npy",
    ] {
        let session = parse(name, fixture(&format!("npy/{name}")));
        let t = session.tree();
        let x = &tensors(&t, 0)[0];
        let out = dir.path().join(name);
        let mut file = std::fs::File::create(&out).unwrap();
        values::write_npy(x, &*t.exts[0].data(), &mut file).unwrap();
        script.push_str(&format!(
            "a = np.load({orig:?}); b = np.load({out:?})\n\
             same = a.shape == b.shape and (a.tobytes() == b.tobytes() and b.dtype.kind == 'V' if a.dtype.names else np.array_equal(a, b, equal_nan=a.dtype.kind in 'fcmM'))\n\
             if not same: print({name:?}, a.dtype, b.dtype, a, b); ok = False\n",
            orig = fixture_path(&format!("npy/{name}")).display().to_string(),
            out = out.display().to_string(),
        ));
    }
    script.push_str("sys.exit(0 if ok else 1)\n");
    let out = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

// Records export as opaque `V` items of the same bytes: `write_npy` keeps
// no field names.

/// Cuts every fixture kind at many offsets: an array whose bytes are all
/// there stays complete and byte-exact, one cut short is truncated, nothing
/// complete is missing bytes.
#[test]
fn cuts_keep_what_is_whole() {
    let e = expect();
    let mut f = Failures::default();
    for name in [
        "concat.npy",
        "fortran_i2_be.npy",
        "struct_nested.npy",
        "header_v2.npy",
        "stored.npz",
        "compressed.npz",
    ] {
        let bytes = fixture(&format!("npy/{name}"));
        let want = arrays(&e, name);
        let n = bytes.len();
        let mut cuts: Vec<usize> = (0..n).step_by((n / 97).max(1)).collect();
        for w in &want {
            let end = (u(&w["data_offset"]) + u(&w["data_length"])) as usize;
            cuts.extend(
                [end.saturating_sub(1), end, end + 1]
                    .iter()
                    .filter(|&&c| c < n),
            );
        }
        for cut in cuts {
            let what = format!("{name} cut at {cut}");
            let session = parse_named(name, truncated(&bytes, cut as u64), &what);
            let t = session.tree();
            for x in all_tensors(&t) {
                let Some(w) = want.iter().find(|w| s(&w["name"]) == x.name) else {
                    f.push(format!("{what}: unknown tensor {}", x.name));
                    continue;
                };
                let whole = x.status == Status::Complete;
                if whole && sha_hex(&tensor_bytes(&t, &x)) != s(&w["sha256"]) {
                    f.push(format!("{what}: {} complete with other bytes", x.name));
                }
                let avail = t.exts[x.source].data().available();
                if whole && x.offset + x.length > avail {
                    f.push(format!("{what}: {} complete past the end", x.name));
                }
                if !whole && x.status != Status::Truncated {
                    f.push(format!("{what}: {} is {:?}", x.name, x.status));
                }
            }
            // A plain file cut after an array's last byte keeps it whole.
            if name.ends_with(".npy") {
                for w in &want {
                    let end = (u(&w["data_offset"]) + u(&w["data_length"])) as usize;
                    let listed = all_tensors(&t)
                        .into_iter()
                        .find(|x| x.name == s(&w["name"]));
                    if cut >= end && listed.as_ref().map(|x| x.status) != Some(Status::Complete) {
                        f.push(format!("{what}: {} is whole but {listed:?}", s(&w["name"])));
                    }
                }
            }
        }
    }
    f.check("npy cuts");
}

/// Flips, zeroed and random spans anywhere: nothing panics or hangs, and in
/// an `.npz` (whose members carry CRCs) no tensor is called complete over
/// bytes other than numpy's. A plain `.npy` has no checksum: damage in its
/// data cannot be seen by anyone, so there only the header is checked.
#[test]
fn damage_never_passes_for_whole() {
    let e = expect();
    let mut f = Failures::default();
    let mut rng = Rng::new(0x5eed_0017);
    for name in [
        "stored.npz",
        "compressed.npz",
        "struct_packed.npy",
        "concat.npy",
    ] {
        let orig = fixture(&format!("npy/{name}"));
        let want = arrays(&e, name);
        for round in 0..60 {
            let mut bytes = orig.clone();
            let at = rng.below(bytes.len() as u64);
            let len = [1, 4, 16, 64][round % 4].min(bytes.len() as u64 - at);
            match round % 3 {
                0 => flip(&mut bytes, at, 0x10),
                1 => bytes[at as usize..(at + len) as usize].fill(0),
                _ => overwrite(&mut bytes, at, len, &mut rng),
            }
            if bytes == orig {
                continue;
            }
            let what = format!("{name} damaged at {at}+{len} (round {round})");
            let session = parse_named(name, bytes, &what);
            let t = session.tree();
            for x in all_tensors(&t) {
                if x.status != Status::Complete || !name.ends_with(".npz") {
                    continue;
                }
                // A name read from a damaged local header may differ; the
                // bytes may not.
                let sha = sha_hex(&tensor_bytes(&t, &x));
                let ok = want.iter().any(|w| sha == s(&w["sha256"]));
                if !ok {
                    f.push(format!("{what}: {} complete with other bytes", x.name));
                }
            }
        }
    }
    f.check("npy damage");
}
