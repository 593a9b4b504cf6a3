//! ONNX models compared with the `onnx` package's view of them
//! (fixtures/onnx/*.json, made by make_refs.py and make_constants.py with
//! onnx 1.23.2), then cut and damaged.

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::util::*;

const MODELS: [&str; 7] = [
    "attrs.onnx",
    "tensors.onnx",
    "silero_vad.onnx",
    "external/model.onnx",
    "external_missing/model.onnx",
    "external_short/model.onnx",
    "external_multi/model.onnx",
];

fn reference(model: &str) -> Value {
    serde_json::from_slice(&fixture(&format!("onnx/{model}.json"))).unwrap()
}

fn sha(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// ONNX data type names as pparse spells dtypes.
fn dtype_of(onnx: &str) -> Option<&'static str> {
    Some(match onnx {
        "FLOAT" => "F32",
        "UINT8" => "U8",
        "INT8" => "I8",
        "UINT16" => "U16",
        "INT16" => "I16",
        "INT32" => "I32",
        "INT64" => "I64",
        "BOOL" => "BOOL",
        "FLOAT16" => "F16",
        "DOUBLE" => "F64",
        "UINT32" => "U32",
        "UINT64" => "U64",
        "COMPLEX64" => "C64",
        "COMPLEX128" => "C128",
        "BFLOAT16" => "BF16",
        "FLOAT8E4M3FN" => "F8_E4M3",
        "FLOAT8E4M3FNUZ" => "F8_E4M3FNUZ",
        "FLOAT8E5M2" => "F8_E5M2",
        "FLOAT8E5M2FNUZ" => "F8_E5M2FNUZ",
        "UINT4" => "U4",
        "INT4" => "I4",
        "FLOAT4E2M1" => "F4",
        "FLOAT8E8M0" => "F8_E8M0",
        "UINT2" => "U2",
        "INT2" => "I2",
        _ => return None,
    })
}

struct Listed {
    json: Vec<Value>,
    code: i32,
}

fn tensors_of(path: &std::path::Path) -> Listed {
    let run = pparse(["tensors".as_ref(), "--json".as_ref(), path.as_os_str()]);
    let json: Vec<Value> = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", run.stdout_text()));
    Listed {
        json,
        code: run.code,
    }
}

/// The bytes a listed tensor points at: `source` is a PATH below the model.
fn bytes_of(model: &std::path::Path, t: &Value) -> Vec<u8> {
    let src = t["source"].as_str().unwrap();
    let file = if src.is_empty() || src == model.file_name().unwrap().to_str().unwrap() {
        model.to_path_buf()
    } else {
        model
            .parent()
            .unwrap()
            .join(src.rsplit('/').next().unwrap())
    };
    let all = std::fs::read(file).unwrap();
    let (o, l) = (
        t["offset"].as_u64().unwrap() as usize,
        t["length"].as_u64().unwrap() as usize,
    );
    all[o.min(all.len())..(o + l).min(all.len())].to_vec()
}

#[test]
fn initializers_match_the_onnx_package() {
    let mut f = Failures::default();
    for model in MODELS {
        let r = reference(model);
        let path = fixture_path(&format!("onnx/{model}"));
        let listed = tensors_of(&path);
        let mut damaged = false;
        let inits = r["graph"]["initializers"].as_array().unwrap();
        for (i, w) in inits.iter().enumerate() {
            let name = w["name"].as_str().unwrap();
            let Some(dt) = dtype_of(w["data_type"].as_str().unwrap()) else {
                // STRING tensors have no byte layout to list.
                assert!(
                    !listed.json.iter().any(|t| t["name"] == name),
                    "{model}: {name}"
                );
                continue;
            };
            let Some(t) = listed.json.iter().find(|t| t["name"] == name) else {
                f.push(format!("{model}: initializer {name} not listed"));
                continue;
            };
            if listed.json.iter().position(|t| t["name"] == name) > Some(i) {
                f.push(format!("{model}: {name} out of order"));
            }
            if t["dtype"] != dt || t["shape"] != w["dims"] {
                f.push(format!("{model}: {name}: {t} vs {w}"));
            }
            let status = t["status"].as_str().unwrap();
            let want_status = match w["status"].as_str() {
                Some("missing" | "short") => "truncated",
                _ => "complete",
            };
            damaged |= want_status != "complete";
            if status != want_status {
                f.push(format!(
                    "{model}: {name}: status {status}, expected {want_status}"
                ));
                continue;
            }
            if status != "complete" {
                continue;
            }
            let got = sha(&bytes_of(&path, t));
            let want = if let Some(h) = w["raw_data_sha256"].as_str() {
                h
            } else if let Some(h) = w["external_range"]["sha256"].as_str() {
                h
            } else if matches!(
                w["typed_field"].as_str(),
                Some("float_data" | "double_data")
            ) {
                // Fixed-width typed fields hold the little-endian values.
                w["sha256_values"].as_str().unwrap()
            } else {
                continue;
            };
            if got != want {
                f.push(format!("{model}: {name}: bytes differ"));
            }
        }
        if listed.code != if damaged { 1 } else { 0 } {
            f.push(format!("{model}: exit status {}", listed.code));
        }
    }
    f.check("ONNX initializers");
}

#[test]
fn constants_and_subgraph_tensors_are_listed() {
    for model in ["silero_vad.onnx", "attrs.onnx"] {
        let path = fixture_path(&format!("onnx/{model}"));
        let want: Vec<Value> =
            serde_json::from_slice(&fixture(&format!("onnx/{model}.constants.json"))).unwrap();
        let r = reference(model);
        let main = r["graph"]["initializers"].as_array().unwrap().len();
        let listed = tensors_of(&path);
        assert_eq!(listed.code, 0);
        let extra = &listed.json[main..];
        assert_eq!(extra.len(), want.len(), "{model}");
        // As multisets of (type, dims, bytes): names are pparse's own.
        let mut a: Vec<String> = want
            .iter()
            .filter(|w| w["stored"] == "raw_data")
            .map(|w| {
                format!(
                    "{} {} {}",
                    dtype_of(w["data_type"].as_str().unwrap()).unwrap(),
                    w["dims"],
                    w["sha256"].as_str().unwrap()
                )
            })
            .collect();
        let mut b: Vec<String> = extra
            .iter()
            .map(|t| {
                format!(
                    "{} {} {}",
                    t["dtype"].as_str().unwrap(),
                    t["shape"],
                    sha(&bytes_of(&path, t))
                )
            })
            .collect();
        // Every tensor stored as raw_data is listed with its exact bytes.
        a.sort();
        for x in &a {
            match b.iter().position(|y| y == x) {
                Some(i) => {
                    b.remove(i);
                }
                None => panic!("{model}: {x} not listed"),
            }
        }
    }
}

/// The children of a node whose names start with `prefix` (`node[`).
fn named<'a>(n: &'a Value, prefix: &str) -> Vec<&'a Value> {
    n["children"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter(|c| c["name"].as_str().unwrap_or_default().starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// A node's loaded children by name, from `pparse nodes --json`.
fn child<'a>(n: &'a Value, name: &str) -> Option<&'a Value> {
    n["children"].as_array()?.iter().find(|c| c["name"] == name)
}

/// A string node's value: the string itself, never quoted again.
fn unquote(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

/// `pparse nodes --json --depth DEPTH` of a fixture model: the root node.
fn nodes_of(model: &str, depth: u32) -> Value {
    let path = fixture_path(&format!("onnx/{model}"));
    let run = pparse([
        "nodes".as_ref(),
        path.as_os_str(),
        "--json".as_ref(),
        "--depth".as_ref(),
        depth.to_string().as_ref(),
    ]);
    serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("{model}: {e}: {}", run.stderr_text()))
}

/// Every node below `n` (itself first), depth first in file order.
fn preorder<'a>(n: &'a Value, out: &mut Vec<&'a Value>) {
    out.push(n);
    for c in n["children"].as_array().into_iter().flatten() {
        preorder(c, out);
    }
}

#[test]
fn model_graph_and_nodes_match_the_onnx_package() {
    for model in ["attrs.onnx", "silero_vad.onnx", "external/model.onnx"] {
        let r = reference(model);
        let root = nodes_of(model, 4);
        // One root object: the model itself, its fields below it.
        assert_eq!(
            (&root["kind"], &root["parser"], &root["name"]),
            (
                &Value::from("extraction"),
                &Value::from("onnx"),
                &Value::from(model.rsplit('/').next().unwrap())
            )
        );
        // A string's value is the string, not its quoted form.
        assert_eq!(
            child(&root, "producer_name").unwrap()["value"],
            r["producer_name"],
            "{model}"
        );
        assert_eq!(
            child(&root, "ir_version").unwrap()["value"],
            r["ir_version"],
            "{model}"
        );
        let prod = child(&root, "producer_name")
            .map(|v| unquote(&v["value"]))
            .unwrap_or_default();
        assert_eq!(prod, r["producer_name"].as_str().unwrap(), "{model}");
        let opsets = named(&root, "opset_import[");
        assert_eq!(
            opsets.len(),
            r["opset_import"].as_array().unwrap().len(),
            "{model}"
        );
        for (o, w) in opsets.iter().zip(r["opset_import"].as_array().unwrap()) {
            assert_eq!(
                child(o, "version").unwrap()["value"],
                w["version"],
                "{model}"
            );
        }
        let graph = child(&root, "graph").expect("graph");
        assert_eq!(graph["kind"], "onnx.GraphProto");
        let nodes = named(graph, "node[");
        let want = r["graph"]["nodes"].as_array().unwrap();
        assert_eq!(nodes.len(), want.len(), "{model}");
        for (n, w) in nodes.iter().zip(want) {
            assert_eq!(n["kind"], "onnx.NodeProto");
            assert_eq!(
                child(n, "op_type")
                    .map(|v| unquote(&v["value"]))
                    .unwrap_or_default(),
                w["op_type"].as_str().unwrap(),
                "{model}"
            );
            let outs: Vec<String> = named(n, "output[")
                .iter()
                .map(|c| unquote(&c["value"]))
                .collect();
            let wouts: Vec<String> = w["outputs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_str().unwrap().to_string())
                .collect();
            assert_eq!(outs, wouts, "{model}");
            let attrs = named(n, "attribute[");
            assert_eq!(
                attrs.len(),
                w["attributes"].as_array().unwrap().len(),
                "{model}"
            );
            for (a, wa) in attrs.iter().zip(w["attributes"].as_array().unwrap()) {
                assert_eq!(
                    child(a, "name")
                        .map(|v| unquote(&v["value"]))
                        .unwrap_or_default(),
                    wa["name"].as_str().unwrap()
                );
                let ty = child(a, "type").map(|v| {
                    v["value"]
                        .as_str()
                        .unwrap()
                        .split(' ')
                        .next()
                        .unwrap()
                        .to_string()
                });
                assert_eq!(ty.as_deref(), wa["type"].as_str(), "{model}");
            }
        }
        let inputs: Vec<String> = named(graph, "input[")
            .iter()
            .map(|n| unquote(&child(n, "name").unwrap()["value"]))
            .collect();
        let winputs: Vec<String> = r["graph"]["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(inputs, winputs, "{model}");
    }
}

#[test]
fn raw_data_is_a_range_of_the_file() {
    // attrs.onnx: the TENSOR attribute of node "everything" and its raw_data.
    let root = nodes_of("tensors.onnx", 4);
    let graph = child(&root, "graph").unwrap();
    let init = graph["children"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| {
            n["value"]
                .as_str()
                .unwrap_or_default()
                .contains("name=\"f32\"")
        })
        .unwrap();
    let raw = child(init, "raw_data").unwrap();
    let data = fixture("onnx/tensors.onnx");
    let r = reference("tensors.onnx");
    let w = r["graph"]["initializers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "f32")
        .unwrap();
    // The node's range is the whole field: tag 0x4a, the length, the bytes.
    let (s, e) = (
        raw["start"].as_u64().unwrap() as usize,
        raw["end"].as_u64().unwrap() as usize,
    );
    assert_eq!(data[s], 0x4a);
    assert_eq!(
        sha(&data[e - 24..e]),
        w["raw_data_sha256"].as_str().unwrap()
    );
    assert!(raw["value"].as_str().unwrap().starts_with("24 bytes:"));
}

/// Every `bytes` field (`raw_data` first) has a child `data` on its
/// payload alone, after the tag and the length: its range is where a
/// reader of the wire format finds the bytes, and those bytes are the ones
/// the onnx package hashed.
#[test]
fn bytes_fields_have_their_data_as_a_child() {
    let mut f = Failures::default();
    for model in ["tensors.onnx", "attrs.onnx", "silero_vad.onnx"] {
        let data = fixture(&format!("onnx/{model}"));
        let root = nodes_of(model, 12);
        let mut all = Vec::new();
        preorder(&root, &mut all);
        let r = reference(model);
        let hashes: Vec<&str> = r["graph"]["initializers"]
            .as_array()
            .unwrap()
            .iter()
            // An empty raw_data has no data child.
            .filter(|i| i["raw_data_len"].as_u64().is_some_and(|n| n > 0))
            .filter_map(|i| i["raw_data_sha256"].as_str())
            .collect();
        let mut seen = 0;
        let mut hashed = 0;
        for n in all.iter().filter(|n| n["kind"] == "bytes") {
            let (start, end) = (n["start"].as_u64().unwrap(), n["end"].as_u64().unwrap());
            // Tag and length read here, as protobuf's wire format has them.
            let mut p = start as usize;
            let mut read_varint = || {
                let (mut v, mut shift) = (0u64, 0);
                loop {
                    let b = data[p];
                    p += 1;
                    v |= u64::from(b & 0x7f) << shift;
                    shift += 7;
                    if b < 0x80 {
                        return v;
                    }
                }
            };
            let _tag = read_varint();
            let len = read_varint();
            let at = p as u64;
            assert_eq!(at + len, end, "{model}: {}", n["name"]);
            let kids = n["children"].as_array().unwrap();
            if kids.is_empty() && n["more"] == true {
                // Below --depth: not loaded.
                continue;
            }
            if len == 0 {
                if !kids.is_empty() {
                    f.push(format!("{model}: empty {} has children", n["name"]));
                }
                continue;
            }
            seen += 1;
            match &kids[..] {
                [d] if d["name"] == "data"
                    && d["kind"] == "data"
                    && d["start"].as_u64() == Some(at)
                    && d["end"].as_u64() == Some(end) =>
                {
                    if n["name"] == "raw_data"
                        && hashes.contains(&sha(&data[at as usize..end as usize]).as_str())
                    {
                        hashed += 1;
                    }
                }
                _ => f.push(format!(
                    "{model}: {} at {start}: data should be {at}..{end}, children {kids:?}",
                    n["name"]
                )),
            }
        }
        if seen == 0 {
            f.push(format!("{model}: no bytes field with data"));
        }
        if hashed != hashes.len() {
            f.push(format!(
                "{model}: {hashed} data children hold an initializer's raw_data, the onnx package has {}",
                hashes.len()
            ));
        }
    }
    f.check("data children of bytes fields");
}

/// A graph's value is its name and its counts of nodes, initializers,
/// inputs and outputs, the numbers the onnx package gives (every graph,
/// subgraphs of If, Loop and Scan included); a cut graph says `≥`.
#[test]
fn graphs_are_summarised_by_their_counts() {
    let mut f = Failures::default();
    for model in MODELS {
        let want: Vec<Value> =
            serde_json::from_slice(&fixture(&format!("onnx/{model}.graphs.json"))).unwrap();
        let root = nodes_of(model, 24);
        let mut all = Vec::new();
        preorder(&root, &mut all);
        let got: Vec<String> = all
            .iter()
            .filter(|n| n["kind"] == "onnx.GraphProto")
            .map(|n| n["value"].as_str().unwrap().to_string())
            .collect();
        let plural = |n: &Value, one: &str| {
            let n = n.as_u64().unwrap();
            format!("{n} {one}{}", if n == 1 { "" } else { "s" })
        };
        let want: Vec<String> = want
            .iter()
            .map(|g| {
                let counts = format!(
                    "{}, {}, {}, {}",
                    plural(&g["node"], "node"),
                    plural(&g["initializer"], "initializer"),
                    plural(&g["input"], "input"),
                    plural(&g["output"], "output")
                );
                match g["name"].as_str().unwrap() {
                    "" => counts,
                    name => format!("\"{name}\": {counts}"),
                }
            })
            .collect();
        if got != want {
            f.push(format!("{model}: pparse {got:#?}\nonnx {want:#?}"));
        }
    }
    // Cut inside the graph: what is there is counted, as a lower bound.
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.onnx");
    std::fs::write(&cut, &fixture("onnx/attrs.onnx")[..3000]).unwrap();
    let run = pparse(["nodes".as_ref(), cut.as_os_str(), "--json".as_ref()]);
    let root: Value = serde_json::from_slice(&run.stdout).unwrap();
    let graph = child(&root, "graph").unwrap();
    assert_eq!(
        graph["value"],
        "\"attrs_main\": ≥11 nodes, ≥1 initializer, ≥3 inputs, ≥5 outputs"
    );
    f.check("graph summaries");
}

/// A cut model names the field that is cut by its schema name, with its
/// number: `graph (field 7)`, not `field 7` alone.
#[test]
fn a_cut_field_is_named_by_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.onnx");
    std::fs::write(&cut, &fixture("onnx/attrs.onnx")[..3000]).unwrap();
    let run = pparse(["tree".as_ref(), cut.as_os_str()]);
    assert_eq!(run.code, 1);
    let want = "graph (field 7) is cut off: 2880 of its 2919 bytes are here";
    assert!(run.stdout_text().contains(want), "{}", run.stdout_text());
    assert!(run.stderr_text().contains(want), "{}", run.stderr_text());
    // Nested fields too: the graph's last field is cut with it.
    let run = pparse([
        "nodes".as_ref(),
        cut.as_os_str(),
        "--depth".as_ref(),
        "3".as_ref(),
    ]);
    assert!(
        run.stdout_text()
            .contains("metadata_props (field 16) is cut off: 16 of its 55 bytes are here"),
        "{}",
        run.stdout_text()
    );
}

#[test]
fn truncated_models_keep_what_is_there() {
    let mut f = Failures::default();
    let dir = tempfile::tempdir().unwrap();
    for model in ["tensors.onnx", "silero_vad.onnx"] {
        let data = fixture(&format!("onnx/{model}"));
        let whole = tensors_of(&fixture_path(&format!("onnx/{model}"))).json;
        let step = (data.len() / 25).max(1);
        for cut in (1..data.len()).step_by(step).chain([data.len() - 1]) {
            let p = dir.path().join(format!("cut-{cut}-{model}"));
            std::fs::write(&p, &data[..cut]).unwrap();
            let listed = tensors_of(&p);
            if listed.code != 1 {
                f.push(format!("{model} cut at {cut}: exit {}", listed.code));
            }
            for t in &listed.json {
                let w = whole.iter().find(|w| w["name"] == t["name"]);
                let end = t["offset"].as_u64().unwrap() + t["length"].as_u64().unwrap();
                match w {
                    // A tensor cut inside its own description: its name may be cut too.
                    None if t["status"] != "complete" => {}
                    None => f.push(format!(
                        "{model} cut at {cut}: unknown tensor {}",
                        t["name"]
                    )),
                    Some(w)
                        if end <= cut as u64
                            && t["status"] == "complete"
                            && (t["offset"] != w["offset"] || t["length"] != w["length"]) =>
                    {
                        f.push(format!("{model} cut at {cut}: {} moved", t["name"]));
                    }
                    Some(_) if end > cut as u64 && t["status"] == "complete" => {
                        f.push(format!(
                            "{model} cut at {cut}: {} claims bytes past the cut",
                            t["name"]
                        ));
                    }
                    _ => {}
                }
            }
            // Every tensor whole before the cut is listed.
            for w in &whole {
                let end = w["offset"].as_u64().unwrap() + w["length"].as_u64().unwrap();
                if end + 64 < cut as u64
                    && w["length"].as_u64().unwrap() > 0
                    && !listed.json.iter().any(|t| t["name"] == w["name"])
                {
                    f.push(format!("{model} cut at {cut}: {} lost", w["name"]));
                }
            }
            let _ = std::fs::remove_file(&p);
        }
    }
    f.check("truncated ONNX models");
}

fn entry(k: &str, v: &str) -> Vec<u8> {
    let mut e = len_field(1, k.as_bytes());
    e.extend(len_field(2, v.as_bytes()));
    e
}

#[test]
fn external_data_beyond_4_gib_opens_without_reading_it() {
    // A model whose weights are in a sparse 5 GB file: offsets past 2^32.
    let dir = tempfile::tempdir().unwrap();
    let off: u64 = 5_000_000_000;
    let mut t = vec![0x08, 32, 0x08, 32, 0x10, 1];
    t.extend(len_field(8, b"big.weight"));
    t.extend(len_field(13, &entry("location", "weights.bin")));
    t.extend(len_field(13, &entry("offset", &off.to_string())));
    t.extend(len_field(13, &entry("length", "4096")));
    t.extend([0x70, 1]);
    let mut g = len_field(5, &t);
    g.extend(len_field(2, b"g"));
    let mut m = vec![0x08, 8];
    m.extend(len_field(7, &g));
    std::fs::write(dir.path().join("big.onnx"), &m).unwrap();
    let w = std::fs::File::create(dir.path().join("weights.bin")).unwrap();
    w.set_len(off + 4096).unwrap();
    let listed = tensors_of(&dir.path().join("big.onnx"));
    assert_eq!(listed.code, 0);
    assert_eq!(listed.json.len(), 1);
    let t = &listed.json[0];
    assert_eq!(
        (t["offset"].as_u64(), t["length"].as_u64()),
        (Some(off), Some(4096))
    );
    assert_eq!(t["source"], "weights.bin");
    assert_eq!(t["status"], "complete");
    // A location leaving the folder is refused.
    let mut t2 = vec![0x08, 1, 0x10, 1];
    t2.extend(len_field(8, b"evil"));
    t2.extend(len_field(13, &entry("location", "../weights.bin")));
    t2.extend([0x70, 1]);
    let mut m2 = vec![0x08, 8];
    m2.extend(len_field(7, &len_field(5, &t2)));
    std::fs::write(dir.path().join("evil.onnx"), &m2).unwrap();
    let run = pparse(["tensors".as_ref(), dir.path().join("evil.onnx").as_os_str()]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr_text().contains("leaves the model's folder"),
        "{}",
        run.stderr_text()
    );
}

macro_rules! onnx_sweeps {
    ($($test:ident => $name:expr,)*) => {
        $(
            #[test]
            fn $test() {
                crate::sweep::sweep_with($name, &|t, what, f| {
                    for x in pparse::view::tensors::tensors(t, 0) {
                        let size = t.exts[x.source].size();
                        if x.status == pparse::Status::Complete && x.offset + x.length > size {
                            f.push(format!("{what}: tensor {} past the end", x.name));
                        }
                    }
                });
            }
        )*
    };
}

onnx_sweeps! {
    sweep_onnx_attrs => "onnx/attrs.onnx",
    sweep_onnx_tensors => "onnx/tensors.onnx",
}

/// Tensors kept as varints (`int32_data`, `int64_data`, `uint64_data`) are
/// decoded: their `.npy` data is what `onnx.numpy_helper.to_array` gives
/// (the reference's `sha256_values`), and a field whose count of varints
/// does not fit the shape, or that is cut inside a varint, is corrupt.
#[test]
fn varint_fields_are_decoded_as_numpy_helper_does() {
    let mut f = Failures::default();
    let r = reference("tensors.onnx");
    let session = parse("tensors.onnx", fixture("onnx/tensors.onnx"));
    let t = session.tree();
    let list = pparse::view::tensors::tensors(&t, 0);
    let mut checked = 0;
    for w in r["graph"]["initializers"].as_array().unwrap() {
        if !matches!(
            w["typed_field"].as_str(),
            Some("int32_data" | "int64_data" | "uint64_data")
        ) {
            continue;
        }
        let name = w["name"].as_str().unwrap();
        let x = list.iter().find(|x| x.name == name).unwrap();
        let data = t.exts[x.source].data();
        let mut out = Vec::new();
        pparse::view::values::write_npy_data(x, &*data, &mut out).unwrap();
        if x.status != pparse::Status::Complete
            || x.encoding != pparse::offer::tensor::Encoding::Varints
            || sha(&out) != w["sha256_values"].as_str().unwrap()
        {
            f.push(format!("{name}: {:?} {:?} {out:?}", x.status, x.detail));
        }
        checked += 1;
    }
    assert_eq!(checked, 5);
    // typed_int64_data: [-(2^40), 2^62], its field a packed run of varints.
    let x = list.iter().find(|x| x.name == "typed_int64_data").unwrap();
    let data = t.exts[x.source].data();
    let vals: Vec<String> = pparse::view::values::values(x, &*data, 0, 4)
        .iter()
        .map(|v| v.display())
        .collect();
    if vals != ["-1099511627776", "4611686018427387904"] {
        f.push(format!("typed_int64_data values {vals:?}"));
    }
    // One varint too many, and the field cut inside its last varint.
    let bytes = fixture("onnx/tensors.onnx");
    let x = list.iter().find(|x| x.name == "typed_int32_data").unwrap();
    let (o, n) = (x.offset as usize, x.length as usize);
    let mut cut = bytes.clone();
    cut[o + n - 1] |= 0x80;
    let mut more = bytes.clone();
    // The first varint (-1, ten bytes) made two: 0x7f and then nine bytes
    // ending in 0x01 read as a second value.
    more[o] = 0x7f;
    for (label, bad) in [("cut", cut), ("more", more)] {
        let session = parse("tensors.onnx", bad);
        let t = session.tree();
        let list = pparse::view::tensors::tensors(&t, 0);
        let x = list.iter().find(|x| x.name == "typed_int32_data").unwrap();
        if x.status != pparse::Status::Corrupt
            || !x.detail.as_deref().unwrap_or("").contains("int32_data")
        {
            f.push(format!("{label}: {:?} {:?}", x.status, x.detail));
        }
    }
    f.check("ONNX varint fields");
}
