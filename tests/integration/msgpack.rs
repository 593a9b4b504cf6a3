//! MessagePack and flax checkpoints against what the `msgpack` package and
//! flax read back (fixtures/msgpack/expect.json, written by
//! make_msgpack.py): the byte range, kind and value of every type, values
//! written one after another, flax's arrays as tensors (names, dtypes,
//! shapes, sha256 of the bytes, first values), cuts at every offset,
//! damage, hostile counts and nesting, nesting in archives, and the CLI.

use std::time::{Duration, Instant};

use pparse::Status;
use pparse::node::Node;
use pparse::offer::tensor::Tensor;
use pparse::view::tensors::tensors;
use pparse::view::values;
use serde_json::Value;

use crate::util::*;

fn expect() -> Value {
    let text = std::fs::read_to_string(fixture_path("msgpack/expect.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The text shown beside a node, unquoted.
fn shown(n: &Node) -> String {
    match &n.value {
        Some(pparse::node::Value::Quoted(s)) => s.to_string(),
        Some(v) => v.to_string(),
        None => String::new(),
    }
}

/// Loads the children of the node at `path` of the root extraction.
fn kids(session: &pparse::Session, path: &[usize]) -> Vec<Node> {
    assert!(session.load(0, path), "node {path:?} loads");
    let t = session.tree();
    let mut n = &t.root().nodes[path[0]];
    for &i in &path[1..] {
        n = &n.loaded_children()[i];
    }
    n.loaded_children().to_vec()
}

/// pparse's name of a NumPy dtype name.
fn dtype_name(numpy: &str) -> &'static str {
    match numpy {
        "float32" => "F32",
        "float16" => "F16",
        "bfloat16" => "BF16",
        "int8" => "I8",
        "int32" => "I32",
        "bool" => "BOOL",
        "complex64" => "C64",
        other => panic!("no pparse name for {other}"),
    }
}

#[test]
fn every_type_has_its_exact_range_kind_and_value() {
    let e = &expect()["types.msgpack"];
    let session = parse("types.msgpack", fixture("msgpack/types.msgpack"));
    let t = session.tree();
    assert_eq!(t.root().parser(), Some("msgpack"));
    assert!(t.root().damage.is_empty(), "{}", damage_text(&t, 0));
    assert_eq!(t.root().nodes.len(), 1);
    let root = &t.root().nodes[0];
    assert_eq!(
        (root.kind, root.range.start, root.range.end),
        ("map", 0, u(&e["size"]))
    );
    drop(t);
    let pairs = kids(&session, &[0]);
    let want = e["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), want.len());
    let mut f = Failures::default();
    for (n, w) in pairs.iter().zip(want) {
        let key = s(&w["key"]);
        let got = (&*n.name, n.kind, n.range.start, n.range.end, n.status());
        let exp = (
            key,
            s(&w["kind"]),
            u(&w["start"]),
            u(&w["end"]),
            Status::Complete,
        );
        if got != exp {
            f.push(format!("{key}: got {got:?}, expected {exp:?}"));
        }
        let text = shown(n);
        let summary = s(&w["summary"]);
        let ok = match n.kind {
            "str" => match text.strip_suffix('…') {
                Some(head) => summary.starts_with(head),
                None => text == summary,
            },
            "array" | "map" => text.contains(summary),
            _ => text == summary,
        };
        if !ok {
            f.push(format!("{key}: shows {text:?}, msgpack {summary:?}"));
        }
    }
    f.check("types.msgpack");
    // Children of containers: exact ranges one level down and deeper.
    let i = |k: &str| want.iter().position(|w| s(&w["key"]) == k).unwrap();
    let a16 = kids(&session, &[0, i("array16")]);
    let start = u(&want[i("array16")]["value_start"]) + 3;
    assert_eq!(a16.len(), 20);
    for (j, n) in a16.iter().enumerate() {
        assert_eq!(&*n.name, format!("[{j}]"));
        assert_eq!(
            (n.range.start, n.range.end),
            (start + j as u64, start + j as u64 + 1)
        );
        assert_eq!(shown(n), j.to_string());
    }
    let fm = kids(&session, &[0, i("fixmap")]);
    assert_eq!(fm.iter().map(|n| &*n.name).collect::<Vec<_>>(), ["a", "b"]);
    let b = kids(&session, &[0, i("fixmap"), 1]);
    assert_eq!((&*b[0].name, b[0].kind), ("c", "array"));
    let c = kids(&session, &[0, i("fixmap"), 1, 0]);
    assert_eq!((c[0].kind, shown(&c[0])), ("bool", "true".to_string()));
    let a32 = kids(&session, &[0, i("array32")]);
    assert_eq!(a32.len(), 2);
    assert_eq!(a32[1].kind, "array");
    let m32 = kids(&session, &[0, i("map32")]);
    assert_eq!((&*m32[0].name, shown(&m32[0])), ("z", "9".to_string()));
    // Five levels down.
    let mut path = vec![0, i("nested")];
    for _ in 0..4 {
        let k = kids(&session, &path);
        assert_eq!(k.len(), 1);
        path.push(0);
    }
    let deep = kids(&session, &path);
    assert_eq!(&*deep[0].name, "deep");
}

#[test]
fn concatenated_values_are_all_listed() {
    let e = &expect()["concat.msgpack"];
    let session = parse("concat.msgpack", fixture("msgpack/concat.msgpack"));
    let t = session.tree();
    assert!(t.root().damage.is_empty(), "{}", damage_text(&t, 0));
    let got: Vec<(u64, u64, &str)> = t
        .root()
        .nodes
        .iter()
        .map(|n| (n.range.start, n.range.end, n.kind.trim_end_matches("64")))
        .collect();
    let want: Vec<(u64, u64, &str)> = e["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (u(&v["start"]), u(&v["end"]), s(&v["kind"])))
        .collect();
    assert_eq!(got, want);
    assert_eq!(&*t.root().nodes[0].name, "value");
    assert_eq!(&*t.root().nodes[2].name, "[2]");
}

/// Checks flax's stored arrays against the tensors listed.
fn check_flax(t: &pparse::Tree, list: &[Tensor], e: &Value, what: &str) {
    let stored = e["stored"].as_array().unwrap();
    let mut f = Failures::default();
    let names: Vec<&str> = list.iter().map(|x| x.name.as_str()).collect();
    let want: Vec<&str> = stored.iter().map(|w| s(&w["name"])).collect();
    assert_eq!(names, want, "{what}: tensor names");
    for (x, w) in list.iter().zip(stored) {
        let ctx = format!("{what}: {}", x.name);
        let shape: Vec<u64> = w["shape"].as_array().unwrap().iter().map(u).collect();
        let got = (x.dtype.name().to_string(), &x.shape, x.length, x.status);
        let exp = (
            dtype_name(s(&w["dtype"])).to_string(),
            &shape,
            u(&w["data_length"]),
            Status::Complete,
        );
        if got != exp {
            f.push(format!("{ctx}: got {got:?}, expected {exp:?}"));
            continue;
        }
        if x.offset != u(&w["data_offset"]) {
            f.push(format!(
                "{ctx}: data at {}, flax's at {}",
                x.offset, w["data_offset"]
            ));
        }
        if sha_hex(&tensor_bytes(t, x)) != s(&w["sha256"]) {
            f.push(format!("{ctx}: sha256 differs"));
        }
        let first: Vec<&str> = w["first"].as_array().unwrap().iter().map(s).collect();
        let data = t.exts[x.source].data();
        let vals: Vec<String> = values::values(x, &*data, 0, first.len())
            .iter()
            .map(|v| v.display())
            .collect();
        if vals != first {
            f.push(format!("{ctx}: values {vals:?}, flax {first:?}"));
        }
    }
    f.check(what);
}

#[test]
fn flax_arrays_are_tensors_as_flax_reads_them() {
    let e = &expect()["flax_model.msgpack"];
    for name in ["flax_model.msgpack", "checkpoint_100"] {
        let session = parse(name, fixture(&format!("msgpack/{name}")));
        let t = session.tree();
        assert_eq!(t.root().parser(), Some("msgpack"), "{name}");
        assert!(t.root().damage.is_empty(), "{}", damage_text(&t, 0));
        let list = tensors(&t, 0);
        check_flax(&t, &list, e, name);
        // The chunks of a chunked array hold the restored array's bytes.
        let mut whole = Vec::new();
        for x in list
            .iter()
            .filter(|x| x.name.starts_with("params/big/chunks/"))
        {
            whole.extend(tensor_bytes(&t, x));
        }
        assert_eq!(
            sha_hex(&whole),
            s(&e["restored"]["params/big"]["sha256"]),
            "{name}: chunks together"
        );
    }
    // The nodes: an ndarray opens to shape, dtype and data; the scalar, the
    // complex and the string show their values.
    let session = parse("flax_model.msgpack", fixture("msgpack/flax_model.msgpack"));
    let top = kids(&session, &[0]);
    let by = |k: &str| top.iter().position(|n| &*n.name == k).unwrap();
    assert_eq!(top[by("step")].kind, "npscalar");
    assert_eq!(shown(&top[by("lr")]), "(0.5+2j)");
    assert_eq!(shown(&top[by("note")]), s(&e["note"]));
    let params = kids(&session, &[0, by("params")]);
    let big = params.iter().find(|n| &*n.name == "big").unwrap();
    assert!(
        shown(big).contains("flax stored in chunks"),
        "{}",
        shown(big)
    );
    let dense = params.iter().position(|n| &*n.name == "dense").unwrap();
    let d = kids(&session, &[0, by("params"), dense]);
    let kernel = d.iter().position(|n| &*n.name == "kernel").unwrap();
    assert_eq!(
        (d[kernel].kind, shown(&d[kernel])),
        ("ndarray", "float32 [3, 4]".into())
    );
    let parts = kids(&session, &[0, by("params"), dense, kernel]);
    let names: Vec<&str> = parts.iter().map(|n| &*n.name).collect();
    assert_eq!(names, ["shape", "dtype", "data"]);
    assert_eq!(parts[2].range.len(), 48);
}

#[test]
fn a_checkpoint_name_alone_does_not_claim_other_bytes() {
    for bytes in [
        b"PK\x03\x04 not a checkpoint".to_vec(),
        b"{\"json\": 1}".to_vec(),
        vec![0x81, 0x01, 0x02],
        vec![0x8f; 100],
    ] {
        let session = parse("checkpoint_7", bytes.clone());
        let t = session.tree();
        assert_ne!(t.root().parser(), Some("msgpack"), "{bytes:?}");
    }
}

/// Every offset of every fixture: values before the cut stay complete with
/// their ranges, the one cut is truncated where the bytes end, and a tensor
/// called complete has flax's bytes.
#[test]
fn cuts_keep_every_whole_value() {
    let e = expect();
    let mut f = Failures::default();
    // Top-level values of concat.msgpack.
    let bytes = fixture("msgpack/concat.msgpack");
    let spans = e["concat.msgpack"]["values"].as_array().unwrap();
    for cut in 0..bytes.len() as u64 {
        let what = format!("concat.msgpack cut at {cut}");
        let session = parse_named("concat.msgpack", truncated(&bytes, cut), &what);
        let t = session.tree();
        let nodes = &t.root().nodes;
        let whole = spans.iter().filter(|w| u(&w["end"]) <= cut).count();
        let cut_one = spans
            .iter()
            .any(|w| u(&w["start"]) < cut && cut < u(&w["end"]));
        if nodes.len() != whole + usize::from(cut_one) {
            f.push(format!("{what}: {} nodes", nodes.len()));
            continue;
        }
        for (n, w) in nodes.iter().zip(spans) {
            let done = u(&w["end"]) <= cut;
            let ok = if done {
                n.status() == Status::Complete && n.range.end == u(&w["end"])
            } else {
                n.status() == Status::Truncated
                    && n.damage.as_ref().unwrap().range.start == cut
                    && n.range.end == cut
            };
            if !ok {
                f.push(format!(
                    "{what}: node {} {:?} {:?}",
                    n.name, n.range, n.damage
                ));
            }
        }
        if cut_one != (t.root().status() == Status::Truncated) {
            f.push(format!("{what}: status {}", t.root().status()));
        }
    }
    // Pairs of the root map of types.msgpack.
    let bytes = fixture("msgpack/types.msgpack");
    let pairs = e["types.msgpack"]["pairs"].as_array().unwrap();
    for cut in (3..bytes.len() as u64).step_by(7) {
        let what = format!("types.msgpack cut at {cut}");
        let session = parse_named("types.msgpack", truncated(&bytes, cut), &what);
        let t = session.tree();
        if t.root().status() != Status::Truncated {
            f.push(format!("{what}: status {}", t.root().status()));
        }
        drop(t);
        let got = kids(&session, &[0]);
        for (j, w) in pairs.iter().enumerate() {
            let (start, end) = (u(&w["start"]), u(&w["end"]));
            let n = got.get(j);
            let ok = if end <= cut {
                n.is_some_and(|n| n.status() == Status::Complete && n.range.end == end)
            } else if start < cut {
                n.is_some_and(|n| n.status() == Status::Truncated && n.range.end == cut)
            } else {
                n.is_none()
            };
            if !ok {
                f.push(format!("{what}: pair {} is {n:?}", s(&w["key"])));
            }
        }
    }
    // Tensors of the flax checkpoint.
    let bytes = fixture("msgpack/flax_model.msgpack");
    let stored = e["flax_model.msgpack"]["stored"].as_array().unwrap();
    for cut in 0..bytes.len() as u64 {
        let what = format!("flax_model.msgpack cut at {cut}");
        let session = parse_named("flax_model.msgpack", truncated(&bytes, cut), &what);
        let t = session.tree();
        let list = tensors(&t, 0);
        for x in &list {
            let Some(w) = stored.iter().find(|w| s(&w["name"]) == x.name) else {
                f.push(format!("{what}: unknown tensor {}", x.name));
                continue;
            };
            let complete = x.status == Status::Complete;
            if complete && x.offset + x.length > cut {
                f.push(format!("{what}: {} complete past the cut", x.name));
            }
            if complete && sha_hex(&tensor_bytes(&t, x)) != s(&w["sha256"]) {
                f.push(format!("{what}: {} complete with other bytes", x.name));
            }
            if !complete && x.status != Status::Truncated {
                f.push(format!("{what}: {} is {:?}", x.name, x.status));
            }
        }
        // Every array whose bytes end before the cut is listed whole.
        for w in stored {
            if u(&w["data_offset"]) + u(&w["data_length"]) <= cut
                && !list
                    .iter()
                    .any(|x| x.name == s(&w["name"]) && x.status == Status::Complete)
            {
                f.push(format!(
                    "{what}: {} is whole but not listed so",
                    s(&w["name"])
                ));
            }
        }
        if cut > 0 && cut < bytes.len() as u64 && t.root().status() != Status::Truncated {
            f.push(format!("{what}: status {}", t.root().status()));
        }
    }
    f.check("msgpack cuts");
}

/// Flips, zeroed and random spans: nothing panics or hangs, every node's
/// children load, and a tensor called complete has flax's bytes or sits
/// where a flax array's bytes are (msgpack has no checksum: damage inside
/// an array's bytes cannot be seen).
#[test]
fn damage_never_panics_nor_passes_for_whole() {
    let e = expect();
    let stored = e["flax_model.msgpack"]["stored"].as_array().unwrap();
    let mut rng = Rng::new(0x5eed_0018);
    let mut f = Failures::default();
    for name in ["flax_model.msgpack", "types.msgpack", "concat.msgpack"] {
        let orig = fixture(&format!("msgpack/{name}"));
        for round in 0..150 {
            let mut bytes = orig.clone();
            let at = rng.below(bytes.len() as u64);
            let len = [1, 4, 16, 64][round % 4].min(bytes.len() as u64 - at);
            match round % 3 {
                0 => flip(&mut bytes, at, 0x10 << (round % 4)),
                1 => bytes[at as usize..(at + len) as usize].fill(0),
                _ => overwrite(&mut bytes, at, len, &mut rng),
            }
            let what = format!("{name} damaged at {at}+{len} (round {round})");
            let session = parse_named(name, bytes, &what);
            // Open everything the first two levels hold.
            let n = session.tree().root().nodes.len();
            for i in 0..n.min(50) {
                if session.load(0, &[i]) {
                    let k = session.tree().root().nodes[i].loaded_children().len();
                    for j in 0..k.min(100) {
                        session.load(0, &[i, j]);
                    }
                }
            }
            let t = session.tree();
            for x in tensors(&t, 0) {
                if x.status != Status::Complete {
                    continue;
                }
                let sha = sha_hex(&tensor_bytes(&t, &x));
                let at_flax = stored
                    .iter()
                    .any(|w| u(&w["data_offset"]) == x.offset && u(&w["data_length"]) == x.length);
                if !stored.iter().any(|w| s(&w["sha256"]) == sha) && !at_flax {
                    f.push(format!("{what}: {} complete with other bytes", x.name));
                }
                if x.offset + x.length > t.exts[x.source].data().available() {
                    f.push(format!("{what}: {} complete past the end", x.name));
                }
            }
        }
    }
    f.check("msgpack damage");
}

#[test]
fn hostile_counts_and_nesting_return_at_once() {
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("array32", vec![0xdd, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5]),
        ("map32", vec![0xdf, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5]),
        ("bin32", vec![0xc6, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5]),
        ("ext32", vec![0xc9, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5]),
        ("str32", vec![0xdb, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5]),
        ("deep", {
            let mut b = vec![0x91; 10_000];
            b.push(0xc0);
            b
        }),
        ("deep maps", {
            let mut b = Vec::new();
            for _ in 0..10_000 {
                b.extend([0x81, 0xa1, b'k']);
            }
            b.push(0xc0);
            b
        }),
        ("never", vec![0x92, 0x01, 0xc1, 0x02]),
    ];
    for (what, bytes) in cases {
        let start = Instant::now();
        let session = parse(&format!("{what}.msgpack"), bytes.clone());
        let t = session.tree();
        let nodes = t.root().nodes.len();
        assert_eq!(nodes, 1, "{what}: {}", tree_text(&t));
        let status = t.root().status();
        let want = match what {
            "deep" | "deep maps" => Status::Complete,
            "never" => Status::Corrupt,
            _ => Status::Truncated,
        };
        assert_eq!(status, want, "{what}: {}", damage_text(&t, 0));
        let _ = tensors(&t, 0);
        drop(t);
        // Ten levels down, opening each.
        let mut path = vec![0];
        for _ in 0..10 {
            if !session.load(0, &path) || kids(&session, &path).is_empty() {
                break;
            }
            path.push(0);
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{what} took {:?}",
            start.elapsed()
        );
    }
    // The damage names the count and the bytes left.
    let session = parse(
        "a.msgpack",
        vec![0xdd, 0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5],
    );
    let text = damage_text(&session.tree(), 0);
    assert!(
        text.contains("4294967295 elements") && text.contains("5 bytes are left"),
        "{text}"
    );
}

#[test]
fn a_checkpoint_in_a_tar_gz_or_a_zip_lists_the_same_tensors() {
    let e = &expect()["flax_model.msgpack"];
    for name in ["nested.tar.gz", "nested.zip"] {
        let session = parse(name, fixture(&format!("msgpack/{name}")));
        let t = session.tree();
        let id = t
            .subtree(0)
            .into_iter()
            .find(|&id| t.exts[id].parser() == Some("msgpack"))
            .unwrap_or_else(|| panic!("{name}: no msgpack inside\n{}", tree_text(&t)));
        let list = tensors(&t, id);
        check_flax(&t, &list, e, name);
    }
}

#[test]
fn the_cli_lists_the_tensors() {
    let e = &expect()["flax_model.msgpack"];
    let path = fixture_path("msgpack/flax_model.msgpack")
        .display()
        .to_string();
    let out = pparse(["tensors", "--json", &path]);
    assert_eq!(out.code, 0, "{}", out.stderr_text());
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    let got: Vec<(&str, &str)> = j
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (s(&x["name"]), s(&x["dtype"])))
        .collect();
    let want: Vec<(&str, &str)> = e["stored"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (s(&w["name"]), dtype_name(s(&w["dtype"]))))
        .collect();
    assert_eq!(got, want);
    let out = pparse(["tensors", &path]);
    assert_eq!(out.code, 0, "{}", out.stderr_text());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("params/dense/kernel"), "{text}");
    // The tree as JSON: the root map and its size.
    let out = pparse(["tree", "--json", &path]);
    assert_eq!(out.code, 0, "{}", out.stderr_text());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("\"msgpack\""), "{text}");
}

#[test]
fn tensor_panel_on_a_flax_checkpoint() {
    use crate::tui::{Harness, assert_on_screen};
    let mut h = Harness::open("flax_model.msgpack", fixture("msgpack/flax_model.msgpack"));
    h.keys("T");
    for want in [
        "params/big/chunks/0  F32 [25]",
        "params/dense/kernel  F32 [3, 4]",
        "params/embed/embedding  BF16 [5, 2]",
        "step  I32 []",
    ] {
        assert_on_screen(&h, want);
    }
    h.keys("jjjj");
    assert_on_screen(&h, "values   1.1012625 0.33843127 -0.53997153 -1.2602419");
}
