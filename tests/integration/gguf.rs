//! GGUF: every fixture against what the `gguf` package reads back
//! (fixtures/gguf/expect.json, written by make_gguf.py with GGUFWriter,
//! GGUFReader and gguf.quants.dequantize): tensor names, types, shapes,
//! where the data is, the sha256 of its bytes, the dequantized values bit
//! for bit; metadata keys as nodes over their bytes, long arrays loaded on
//! expand; `pparse tensors --json`; nesting in a zip and a tar.gz; a split
//! model from its first shard and from its folder, with a shard missing;
//! cuts, flips and hostile headers.

use std::time::{Duration, Instant};

use pparse::offer::tensor::Tensor;
use pparse::view::tensors::tensors;
use pparse::view::values::{self, Element as V};
use pparse::{Status, Tree};
use serde_json::Value;

use crate::util::*;

fn expect() -> Value {
    let text = std::fs::read_to_string(fixture_path("gguf/expect.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// pparse's dtype name of a gguf type name: the same, as ggml.rs spells
/// them like the package.
fn check_tensor(tree: &Tree, t: &Tensor, w: &Value, what: &str, f: &mut Failures) {
    let ctx = format!("{what}: {}", t.name);
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
        s(&w["type"]).to_string(),
        &shape,
        u(&w["offset"]),
        u(&w["length"]),
        Status::Complete,
    );
    if got != exp {
        f.push(format!("{ctx}: got {got:?}, expected {exp:?}"));
        return;
    }
    if sha_hex(&tensor_bytes(tree, t)) != s(&w["sha256"]) {
        f.push(format!("{ctx}: sha256 of the data differs"));
    }
    let data = tree.exts[t.source].data();
    if let Some(bits) = w["f32_bits"].as_array() {
        let got = values::values(t, &*data, 0, bits.len());
        let same = got.len() == bits.len()
            && got.iter().zip(bits).all(|(v, b)| match v {
                V::Float(x) => (*x as f32).to_bits() == u(b) as u32,
                _ => false,
            });
        if !same {
            let show: Vec<String> = got.iter().take(8).map(V::display).collect();
            f.push(format!(
                "{ctx}: {} values differ from dequantize's (first {show:?}, want bits {:?})",
                got.len(),
                &bits[..bits.len().min(8)]
            ));
        }
    } else if let Some(ints) = w["ints"].as_array() {
        let got = values::values(t, &*data, 0, ints.len());
        let want: Vec<V> = ints.iter().map(|i| V::Int(i.as_i64().unwrap())).collect();
        if got != want {
            f.push(format!("{ctx}: ints {got:?}"));
        }
    } else if let Some(vals) = w["values"].as_array() {
        let got = values::values(t, &*data, 0, vals.len());
        let want: Vec<V> = vals.iter().map(|x| V::Float(x.as_f64().unwrap())).collect();
        if got != want {
            f.push(format!("{ctx}: values {got:?}"));
        }
    }
}

#[test]
fn every_gguf_fixture_matches_the_gguf_package() {
    let e = expect();
    let mut f = Failures::default();
    let mut types = Vec::new();
    for (name, want) in e["files"].as_object().unwrap() {
        let session = parse(name, fixture(&format!("gguf/{name}")));
        let t = session.tree();
        if t.root().parser() != Some("gguf") || !t.root().damage.is_empty() {
            f.push(format!(
                "{name}: parser {:?}, damage {}",
                t.root().parser(),
                damage_text(&t, 0)
            ));
            continue;
        }
        let list = tensors(&t, 0);
        let want_t = want["tensors"].as_array().unwrap();
        if list.len() != want_t.len() {
            f.push(format!(
                "{name}: {} tensors, gguf {}",
                list.len(),
                want_t.len()
            ));
            continue;
        }
        for (x, w) in list.iter().zip(want_t) {
            check_tensor(&t, x, w, name, &mut f);
            types.push(x.dtype.name().to_string());
            if x.big_endian != (s(&want["byte_order"]) == "S") {
                f.push(format!("{name}: {} big_endian {}", x.name, x.big_endian));
            }
        }
        // Every key is a node over the bytes GGUFReader reads it from.
        let Some(meta) = t.root().nodes.iter().find(|n| &*n.name == "metadata") else {
            f.push(format!("{name}: no metadata node"));
            continue;
        };
        let kids = meta.loaded_children();
        let keys = want["keys"].as_array().unwrap();
        if kids.len() != keys.len() {
            f.push(format!("{name}: {} keys, gguf {}", kids.len(), keys.len()));
            continue;
        }
        for (n, k) in kids.iter().zip(keys) {
            let r = (n.range.start, n.range.len());
            let w = (u(&k["offset"]), u(&k["length"]));
            if &*n.name != s(&k["key"]) || r != w {
                f.push(format!(
                    "{name}: key {} at {r:?}, gguf {} at {w:?}",
                    n.name, k["key"]
                ));
            }
        }
    }
    types.sort();
    types.dedup();
    for needed in [
        "F32", "F16", "BF16", "I8", "I32", "F64", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K",
        "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL",
    ] {
        if !types.iter().any(|d| d == needed) {
            f.push(format!("no fixture has {needed}"));
        }
    }
    f.check("gguf fixtures");
}

#[test]
fn metadata_values_and_long_arrays_load_on_expand() {
    let session = parse("model.gguf", fixture("gguf/model.gguf"));
    let meta = session
        .tree()
        .root()
        .nodes
        .iter()
        .position(|n| &*n.name == "metadata")
        .unwrap();
    let find = |name: &str| {
        let t = session.tree();
        let kids = t.root().nodes[meta].loaded_children();
        let i = kids.iter().position(|n| &*n.name == name).unwrap();
        (i, kids[i].clone())
    };
    let shown = |name: &str| find(name).1.value.map(|v| v.to_string()).unwrap();
    assert_eq!(shown("test.u8"), "200");
    assert_eq!(shown("test.i8"), "-100");
    assert_eq!(shown("test.u64"), "18000000000000000000");
    assert_eq!(shown("test.i64"), "-9000000000000000000");
    assert_eq!(shown("test.f32"), "0.1");
    assert_eq!(shown("test.f64"), "2.5e-300");
    assert_eq!(shown("test.bool"), "true");
    assert_eq!(shown("test.string"), "\"héllo\\nworld\"");
    assert_eq!(shown("test.strings"), "3 × string");
    // Short arrays come with their items, arrays of arrays too.
    let (_, nested) = find("test.nested");
    let items = nested.loaded_children();
    assert_eq!(items.len(), 3);
    let inner: Vec<String> = items[2]
        .loaded_children()
        .iter()
        .map(|n| n.value.as_ref().unwrap().to_string())
        .collect();
    assert_eq!(inner, ["4", "5", "6"]);
    // Long ones load on expand: groups, then items.
    let (tok, _) = find("tokenizer.ggml.tokens");
    assert!(session.load(0, &[meta, tok]));
    let groups: Vec<String> = {
        let t = session.tree();
        t.root().nodes[meta].loaded_children()[tok]
            .loaded_children()
            .iter()
            .map(|n| n.name.to_string())
            .collect()
    };
    assert_eq!(groups, ["[0..1000)", "[1000..2000)", "[2000..2500)"]);
    assert!(session.load(0, &[meta, tok, 2]));
    let t = session.tree();
    let last = t.root().nodes[meta].loaded_children()[tok].loaded_children()[2].loaded_children();
    assert_eq!(last.len(), 500);
    assert_eq!(&*last[499].name, "[2499]");
    assert_eq!(last[499].value.as_ref().unwrap().to_string(), "\"tok2499\"");
    // A tensor info's fields load on expand, each over its bytes.
    let infos = t
        .root()
        .nodes
        .iter()
        .position(|n| &*n.name == "tensor_infos")
        .unwrap();
    drop(t);
    assert!(session.load(0, &[infos, 6]));
    let t = session.tree();
    let info = &t.root().nodes[infos].loaded_children()[6];
    let fields: Vec<String> = info
        .loaded_children()
        .iter()
        .map(|n| format!("{}={}", n.name, n.value.as_ref().unwrap()))
        .collect();
    assert_eq!(
        fields,
        [
            "name=\"q4_0\"",
            "n_dims=2",
            "dims=[64, 4]",
            "type=Q4_0 (2)",
            "offset=256"
        ]
    );
    let kids = info.loaded_children();
    assert_eq!(kids[0].range.start, info.range.start);
    assert_eq!(kids[4].range.end, info.range.end);
    let (u8s, _) = find("test.u8s");
    drop(t);
    assert!(session.load(0, &[meta, u8s]));
    let t = session.tree();
    assert_eq!(
        t.root().nodes[meta].loaded_children()[u8s]
            .loaded_children()
            .len(),
        40
    );
}

#[test]
fn tensors_json_and_tree_json_agree_with_the_package() {
    let e = expect();
    let want = e["files"]["model.gguf"]["tensors"].as_array().unwrap();
    let path = fixture_path("gguf/model.gguf");
    let run = pparse(["tensors".as_ref(), path.as_os_str(), "--json".as_ref()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let got: Value = serde_json::from_slice(&run.stdout).unwrap();
    let got = got.as_array().unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g["name"], w["name"]);
        assert_eq!(g["dtype"], w["type"]);
        assert_eq!(g["shape"], w["shape"]);
        assert_eq!(g["offset"], w["offset"]);
        assert_eq!(g["length"], w["length"]);
        assert_eq!(g["status"], "complete");
    }
    let run = pparse(["tree".as_ref(), path.as_os_str(), "--json".as_ref()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let tree: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(tree["parser"], "gguf");
    let run = pparse(["nodes".as_ref(), path.as_os_str(), "--json".as_ref()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let nodes: Value = serde_json::from_slice(&run.stdout).unwrap();
    let top: Vec<&str> = nodes["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| s(&n["name"]))
        .collect();
    assert_eq!(
        top,
        [
            "magic",
            "version",
            "tensor_count",
            "kv_count",
            "metadata",
            "tensor_infos",
            "padding",
            "data",
            "padding"
        ]
    );
}

#[test]
fn gguf_files_nest_in_a_zip_and_a_tar_gz() {
    let e = expect();
    for name in ["nest.zip", "nest.tar.gz"] {
        let session = parse(name, fixture(&format!("gguf/{name}")));
        let t = session.tree();
        let mut found = Vec::new();
        for id in t.subtree(0) {
            if t.exts[id].parser() == Some("gguf") {
                let file = t.path_of(id);
                let base = file.rsplit('/').next().unwrap().to_string();
                let want = &e["files"][&base]["tensors"];
                let list = tensors(&t, id);
                let mut f = Failures::default();
                // Offsets are the file's own.
                assert_eq!(list.len(), want.as_array().unwrap().len(), "{file}");
                for (x, w) in list.iter().zip(want.as_array().unwrap()) {
                    check_tensor(&t, x, w, &file, &mut f);
                }
                f.check(&file);
                found.push(base);
            }
        }
        found.sort();
        assert_eq!(found, ["aligned.gguf", "big.gguf"], "{name}");
    }
}

fn tensor_names(run: &Run) -> Vec<(String, String)> {
    let v: Value = serde_json::from_slice(&run.stdout).unwrap_or(Value::Null);
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|t| (s(&t["name"]).to_string(), s(&t["status"]).to_string()))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn a_split_model_opens_as_one() {
    let dir = fixture_path("gguf/split");
    let first = dir.join("tiny-00001-of-00003.gguf");
    let want: Vec<(String, String)> = (0..5)
        .map(|i| (format!("blk.{i}.weight"), "complete".to_string()))
        .collect();
    for p in [&first, &dir] {
        let run = pparse(["tensors".as_ref(), p.as_os_str(), "--json".as_ref()]);
        assert_eq!(run.code, 0, "{}", run.stderr_text());
        assert_eq!(tensor_names(&run), want, "{}", p.display());
    }
    // A shard missing: the others listed, the model damaged.
    let tmp = std::env::temp_dir().join(format!("pparse-gguf-split-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    for n in ["tiny-00001-of-00003.gguf", "tiny-00003-of-00003.gguf"] {
        std::fs::copy(dir.join(n), tmp.join(n)).unwrap();
    }
    let run = pparse([
        "tensors".as_ref(),
        tmp.join("tiny-00001-of-00003.gguf").as_os_str(),
        "--json".as_ref(),
    ]);
    let names: Vec<String> = tensor_names(&run).into_iter().map(|x| x.0).collect();
    assert_eq!(names, ["blk.0.weight", "blk.1.weight", "blk.4.weight"]);
    let run = pparse([
        "tree".as_ref(),
        tmp.join("tiny-00001-of-00003.gguf").as_os_str(),
    ]);
    assert_ne!(run.code, 0);
    assert!(
        run.stdout_text().contains("tiny-00002-of-00003.gguf")
            && run.stdout_text().contains("missing"),
        "{}",
        run.stdout_text()
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Cuts at many offsets: every tensor wholly before the cut is complete
/// with its bytes; the others are not complete; nothing panics.
#[test]
fn a_cut_file_keeps_every_whole_tensor() {
    let e = expect();
    let want = e["files"]["model.gguf"]["tensors"].as_array().unwrap();
    let full = fixture("gguf/model.gguf");
    let data_start = u(&e["files"]["model.gguf"]["data_offset"]);
    let mut cuts: Vec<u64> = (0..full.len() as u64).step_by(211).collect();
    for w in want {
        let (o, l) = (u(&w["offset"]), u(&w["length"]));
        cuts.extend([o, o + 1, o + l - 1, o + l, o + l + 1]);
    }
    cuts.extend([data_start - 1, data_start]);
    let mut f = Failures::default();
    for cut in cuts {
        let cut = cut.min(full.len() as u64);
        let bytes = truncated(&full, cut);
        let session = parse_named("model.gguf", bytes, &format!("model.gguf cut at {cut}"));
        let t = session.tree();
        let list = tensors(&t, 0);
        if cut >= data_start && list.len() != want.len() {
            f.push(format!("cut {cut}: {} tensors", list.len()));
            continue;
        }
        for x in &list {
            let Some(w) = want.iter().find(|w| s(&w["name"]) == x.name) else {
                f.push(format!("cut {cut}: unknown tensor {}", x.name));
                continue;
            };
            let whole = u(&w["offset"]) + u(&w["length"]) <= cut;
            if whole {
                if x.status != Status::Complete || sha_hex(&tensor_bytes(&t, x)) != s(&w["sha256"])
                {
                    f.push(format!("cut {cut}: {} whole but {:?}", x.name, x.status));
                }
            } else if x.status == Status::Complete {
                f.push(format!("cut {cut}: {} cut but complete", x.name));
            } else if x.status == Status::Truncated && x.detail.is_none() {
                f.push(format!("cut {cut}: {} cut without a word", x.name));
            }
        }
        let last = want
            .iter()
            .map(|w| u(&w["offset"]) + u(&w["length"]))
            .max()
            .unwrap();
        if cut > 0 && cut < last && t.root().damage.is_empty() {
            f.push(format!("cut {cut}: no damage"));
        }
    }
    f.check("cuts of model.gguf");
}

/// Flips, zeroed and random spans: never a panic or a hang; a complete
/// tensor lies within the file; damage to the data alone changes no
/// tensor's place.
#[test]
fn damage_never_panics_or_misplaces() {
    let e = expect();
    let want = e["files"]["model.gguf"]["tensors"].as_array().unwrap();
    let full = fixture("gguf/model.gguf");
    let data_start = u(&e["files"]["model.gguf"]["data_offset"]);
    let mut rng = Rng::new(17);
    let mut f = Failures::default();
    for round in 0..300 {
        let mut b = full.clone();
        let at = if round % 3 == 0 {
            rng.below(full.len() as u64)
        } else {
            // The header, where a flip changes structure; its start most.
            rng.below(if round % 2 == 0 { 600 } else { data_start })
        };
        match round % 4 {
            0 | 1 => flip(&mut b, at, 1 << rng.below(8)),
            2 => {
                let n = 1 + rng.below(64).min(full.len() as u64 - at - 1);
                for x in &mut b[at as usize..(at + n) as usize] {
                    *x = 0;
                }
            }
            _ => overwrite(&mut b, at, 1 + rng.below(32), &mut rng),
        }
        let header_intact = b[..data_start as usize] == full[..data_start as usize];
        let len = b.len() as u64;
        let session = parse_named("model.gguf", b, &format!("model.gguf damaged at {at}"));
        let t = session.tree();
        let list = tensors(&t, 0);
        for x in &list {
            if x.status == Status::Complete && x.offset + x.length > len {
                f.push(format!("round {round}: {} complete past the end", x.name));
            }
            // Decoding anything never panics.
            let data = t.exts[x.source].data();
            let _ = values::values(x, &*data, 0, 300);
        }
        if header_intact {
            let places: Vec<(String, u64, u64)> = list
                .iter()
                .map(|x| (x.name.clone(), x.offset, x.length))
                .collect();
            let wanted: Vec<(String, u64, u64)> = want
                .iter()
                .map(|w| (s(&w["name"]).into(), u(&w["offset"]), u(&w["length"])))
                .collect();
            if places != wanted {
                f.push(format!(
                    "round {round}: places changed by damage to the data"
                ));
            }
        }
    }
    f.check("damaged model.gguf");
}

fn hostile(counts: (u64, u64), kv: &[u8]) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(counts.0.to_le_bytes());
    b.extend(counts.1.to_le_bytes());
    b.extend(kv);
    b
}

#[test]
fn hostile_headers_end_quickly() {
    let key = |k: &str| {
        let mut v = (k.len() as u64).to_le_bytes().to_vec();
        v.extend(k.as_bytes());
        v
    };
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    cases.push(("huge counts", hostile((u64::MAX, u64::MAX), &[])));
    let mut kv = key("a");
    kv.extend(8u32.to_le_bytes());
    kv.extend(u64::MAX.to_le_bytes());
    cases.push(("huge string", hostile((0, 1), &kv)));
    let mut kv = key("a");
    kv.extend(9u32.to_le_bytes());
    kv.extend(8u32.to_le_bytes());
    kv.extend((u64::MAX / 2).to_le_bytes());
    kv.extend(std::iter::repeat_n(0u8, 8 * 10_000));
    cases.push(("huge array of empty strings", hostile((0, 1), &kv)));
    let mut kv = key("a");
    for _ in 0..10_000 {
        kv.extend(9u32.to_le_bytes());
        kv.extend(9u32.to_le_bytes());
        kv.extend(1u64.to_le_bytes());
    }
    cases.push(("arrays nested deep", hostile((0, 1), &kv)));
    let mut ti = key("t");
    ti.extend(4u32.to_le_bytes());
    for _ in 0..4 {
        ti.extend(u64::MAX.to_le_bytes());
    }
    ti.extend(2u32.to_le_bytes());
    ti.extend(u64::MAX.to_le_bytes());
    cases.push(("huge dims and offset", hostile((1, 0), &ti)));
    let mut ti = key("t");
    ti.extend(u32::MAX.to_le_bytes());
    cases.push(("huge dim count", hostile((1, 0), &ti)));
    for (what, b) in cases {
        let start = Instant::now();
        let session = parse_named("h.gguf", b, what);
        let t = session.tree();
        let list = tensors(&t, 0);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{what}: {:?}",
            start.elapsed()
        );
        assert!(!t.root().damage.is_empty(), "{what}: no damage");
        for x in &list {
            assert_ne!(x.status, Status::Complete, "{what}: {}", x.name);
        }
    }
}

/// The explorer's tensor panel on a GGUF model: the tensors listed with
/// their GGML types, a Q8_0 tensor's values dequantized as
/// `gguf.quants.dequantize` gives them, its statistics, and its `.npy`
/// export holding those float32s.
#[test]
fn tensor_panel_on_a_gguf_model() {
    use crate::tui::{Harness, assert_on_screen};
    let e = expect();
    let tensors = e["files"]["model.gguf"]["tensors"].as_array().unwrap();
    let at = tensors.iter().position(|t| t["name"] == "q8_0").unwrap();
    let bits: Vec<u32> = tensors[at]["f32_bits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b.as_u64().unwrap() as u32)
        .collect();
    let mut h = Harness::open("model.gguf", fixture("gguf/model.gguf"));
    h.keys("T");
    for want in [
        "f32  F32 [3, 4]",
        "q8_0  Q8_0 [4, 64]",
        "q6_k  Q6_K [2, 256]",
    ] {
        assert_on_screen(&h, want);
    }
    h.keys("<Home>");
    h.keys(&"j".repeat(at));
    assert_on_screen(
        &h,
        &format!("tensor   q8_0  {} of {}", at + 1, tensors.len()),
    );
    let first: Vec<String> = bits[..3]
        .iter()
        .map(|&b| format!("{:?}", f32::from_bits(b)))
        .collect();
    assert_on_screen(&h, &format!("values   {}", first.join(" ")));
    assert_on_screen(&h, "256 finite");

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("q8_0.npy");
    h.keys("e<C-u>");
    h.keys(&out.display().to_string());
    h.keys("<Enter>");
    assert_on_screen(&h, &format!("wrote {}", out.display()));
    let npy = std::fs::read(&out).unwrap();
    let body = &npy[npy.len() - 256 * 4..];
    let got: Vec<u32> = body
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(got.len(), 256);
    assert_eq!(&got[..bits.len().min(256)], &bits[..bits.len().min(256)]);
    assert!(npy.starts_with(b"\x93NUMPY") && npy.windows(10).any(|w| w == b"'<f4', 'fo"));
}
