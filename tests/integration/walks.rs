//! Hostile object graphs and sizes (fixtures/hostile_ml, made by its
//! make_hostile_ml.py with CPython's pickler): every walk over a pickle's
//! objects is linear in the pickle, the `--trace` output grows linearly with
//! it, and element counts that overflow u64 make a tensor corrupt, never
//! complete with 0 elements (the tests run with overflow checks on).

use pparse::Status;
use pparse::view::stepper::{self, StepCache, Target};
use pparse::view::tensors;
use serde_json::Value;

use crate::util::*;

const SHARED: &[&str] = &[
    "shared_list.pkl",
    "shared_dict.pkl",
    "shared_tuple.pkl",
    "shared.pt",
    "shared_legacy.pt",
];

fn hostile(name: &str) -> String {
    fixture_path(&format!("hostile_ml/{name}"))
        .to_string_lossy()
        .into_owned()
}

/// Runs pparse and checks that its stdout is at most `per_byte` bytes per
/// byte of the input (plus a little for headers).
fn bounded(args: &[&str], input: usize, per_byte: usize) -> Run {
    let run = pparse(args);
    let limit = input * per_byte + 4096;
    assert!(
        run.stdout.len() <= limit,
        "pparse {args:?}: {} bytes of output for {input} bytes of input (limit {limit})",
        run.stdout.len()
    );
    run
}

#[test]
fn shared_objects_are_walked_once() {
    for name in SHARED {
        let path = hostile(name);
        let size = std::fs::read(&path).unwrap().len();
        bounded(&["tree", &path], size, 4);
        bounded(&["pickle", &path], size, 128);
        bounded(&["pickle", &path, "--json"], size, 64);
        bounded(&["pickle", &path, "--trace"], size, 2048);
        bounded(&["nodes", &path, "--depth", "200"], size, 128);
        bounded(&["nodes", &path, "--depth", "200", "--json"], size, 256);
        let run = bounded(&["tensors", &path, "--json"], size, 8);
        if name.ends_with(".pt") {
            // L[0] = [t]: one tensor, under the path of its first reference.
            let v: Value = serde_json::from_slice(&run.stdout).unwrap();
            let list = v.as_array().unwrap();
            assert_eq!(list.len(), 1, "{name}: {list:?}");
            let want = vec!["0"; 61].join(".");
            assert_eq!(list[0]["name"], want.as_str(), "{name}");
            assert_eq!(list[0]["status"], "complete", "{name}");
            assert_eq!(list[0]["length"], 16, "{name}");
            assert_eq!(run.code, 0, "{name}: {}", run.stderr_text());
        }
    }
}

#[test]
fn shared_objects_in_the_session_and_the_stepper() {
    for name in SHARED {
        let bytes = fixture(&format!("hostile_ml/{name}"));
        let size = bytes.len();
        let session = parse(name, bytes);
        let t = session.tree();
        // Every node of every extraction, loaded to the bottom.
        let mut count = 0usize;
        let mut text = 0usize;
        for id in 0..t.exts.len() {
            let e = &t.exts[id];
            let mut todo: Vec<pparse::node::Node> = e.nodes.to_vec();
            while let Some(n) = todo.pop() {
                count += 1;
                text += n.name.len() + n.value.as_ref().map_or(0, |v| v.to_string().len());
                assert!(count <= 8 * size, "{name}: more than {count} nodes");
                match &n.children {
                    pparse::node::Children::Loaded(k) => todo.extend(k.iter().cloned()),
                    pparse::node::Children::Unloaded => {
                        let fmt = pparse::parsers::by_name(e.parser().unwrap()).unwrap();
                        todo.extend((fmt.load)(&*e.data(), &n, &pparse::Options::default()));
                    }
                    _ => {}
                }
            }
        }
        assert!(text <= 256 * size, "{name}: {text} bytes of node text");
        let table = tensors::tensors(&t, 0);
        assert!(table.len() <= 1, "{name}: {table:?}");
        // The stepper at every 50th opcode and at the last one, on every
        // pickle (a legacy file holds five, a torch zip one in data.pkl).
        let mut cache = StepCache::default();
        let mut pickles = 0;
        for e in &t.exts {
            for n in e.nodes.iter().filter(|n| n.kind == "pickle") {
                pickles += 1;
                for step in (0..2000).step_by(50).chain([usize::MAX]) {
                    let r = stepper::request(&t, e.id(), n.range, Target::Step(step), 0)
                        .expect("a pickle's extraction offers pickles")
                        .run(&mut cache);
                    let shown: usize = r.stack.iter().map(String::len).sum::<usize>()
                        + r.meta
                            .iter()
                            .flat_map(|m| &m.1)
                            .map(String::len)
                            .sum::<usize>()
                        + r.memo.iter().map(|m| m.1.len()).sum::<usize>();
                    assert!(shown <= 64 * 1024, "{name}: {shown} bytes of state");
                }
            }
        }
        assert!(pickles > 0, "{name}");
    }
}

/// A protocol 2 pickle of `body` then STOP, written to a file in `dir`.
fn pickle_file(dir: &tempfile::TempDir, name: &str, body: &[u8]) -> (String, usize) {
    let mut p = b"\x80\x02".to_vec();
    p.extend_from_slice(body);
    p.push(b'.');
    let path = dir.path().join(name);
    std::fs::write(&path, &p).unwrap();
    (path.to_string_lossy().into_owned(), p.len())
}

#[test]
fn trace_output_is_linear_in_the_pickle() {
    let dir = tempfile::tempdir().unwrap();
    // 100,000 NONEs: the stack grows to 100,000 items.
    let (nones, n) = pickle_file(&dir, "nones.pkl", &vec![b'N'; 100_000]);
    let run = bounded(&["pickle", &nones, "--trace"], n, 200);
    let text = run.stdout_text();
    assert!(
        text.contains("stack: [… 99992 more, None, None"),
        "{}",
        &text[text.len() - 2000..]
    );
    // 20,000 empty lists appended each into the one below: nested 20,000 deep.
    let mut body = vec![b']'; 20_000];
    body.extend(vec![b'a'; 19_999]);
    let (lists, n) = pickle_file(&dir, "lists.pkl", &body);
    let run = bounded(&["pickle", &lists, "--trace"], n, 400);
    assert!(run.stdout_text().contains("[[[[[[[["));
    // 20,000 open MARKs: the metastack is summarised.
    let mut body = vec![b'('; 20_000];
    body.push(b'N');
    let (marks, n) = pickle_file(&dir, "marks.pkl", &body);
    let run = bounded(&["pickle", &marks, "--trace"], n, 400);
    assert!(
        run.stdout_text()
            .contains("metastack: [… 19999 more frames, []]")
    );
}

fn tensors_json(path: &str) -> (Vec<Value>, Run) {
    let run = pparse(["tensors", path, "--json"]);
    let v: Value = serde_json::from_slice(&run.stdout).unwrap();
    (v.as_array().unwrap().clone(), run)
}

fn named<'a>(list: &'a [Value], name: &str) -> &'a Value {
    list.iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no tensor {name}: {list:?}"))
}

#[test]
fn torch_sizes_that_overflow_are_corrupt() {
    let (list, run) = tensors_json(&hostile("huge_shape.pt"));
    for (name, why) in [
        (
            "count",
            "element count of shape [4611686018427387904, 4611686018427387904] overflows",
        ),
        (
            "span",
            "the byte span of shape [3, 2] with stride [4611686018427387904, 1] overflows",
        ),
        ("offset", "storage offset 4611686018427387904 overflows"),
        (
            "bigint",
            "stride (18446744073709551616, 1) is not a tuple of non-negative integers",
        ),
        (
            "negative",
            "size (-1, 2) is not a tuple of non-negative integers",
        ),
    ] {
        let t = named(&list, name);
        assert_eq!(t["status"], "corrupt", "{name}: {t}");
        let detail = t["detail"].as_str().unwrap();
        assert!(
            detail.starts_with(why) && detail.contains("; the rebuild call is at 0x"),
            "{name}: {detail}"
        );
        assert_eq!(t["length"], 0, "{name}");
    }
    let ok = named(&list, "ok");
    assert_eq!(
        (ok["status"].as_str(), ok["length"].as_u64()),
        (Some("complete"), Some(16))
    );
    assert_ne!(run.code, 0);
    assert!(
        run.stderr_text()
            .contains("tensor count: corrupt: element count")
    );
    // In process too (debug build: an unchecked product would panic).
    let session = parse("huge_shape.pt", fixture("hostile_ml/huge_shape.pt"));
    let table = tensors::tensors(&session.tree(), 0);
    let count = table.iter().find(|t| t.name == "count").unwrap();
    assert_eq!(count.status, Status::Corrupt);
    assert_eq!(count.numel(), u64::MAX);
}

/// A ModelProto whose graph has one float initializer `w` with `dims`.
fn onnx_model(dims: &[u64]) -> Vec<u8> {
    let mut t = Vec::new();
    for &d in dims {
        t.push(0x08);
        t.extend(varint(d));
    }
    t.extend([0x10, 1]);
    t.extend(len_field(8, b"w"));
    t.extend(len_field(9, &[0u8; 16]));
    let mut g = len_field(5, &t);
    g.extend(len_field(2, b"g"));
    let mut m = vec![0x08, 8];
    m.extend(len_field(7, &g));
    m
}

#[test]
fn onnx_dims_that_overflow_are_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    for (dims, why) in [
        (
            vec![1 << 62, 1 << 62],
            "element count of shape [4611686018427387904, 4611686018427387904] overflows",
        ),
        // A negative dim (int64 -1 as a varint) is 2^64 - 1 elements of 4 bytes.
        (
            vec![u64::MAX],
            "the byte size of FLOAT [18446744073709551615] overflows",
        ),
    ] {
        let path = dir.path().join("m.onnx");
        std::fs::write(&path, onnx_model(&dims)).unwrap();
        let (list, run) = tensors_json(&path.to_string_lossy());
        assert_eq!(list.len(), 1);
        assert_eq!(list[0]["status"], "corrupt", "{dims:?}");
        let detail = list[0]["detail"].as_str().unwrap();
        assert!(
            detail.starts_with(why) && detail.contains("; the tensor is at 0x"),
            "{detail}"
        );
        assert_ne!(run.code, 0);
        let session = parse("m.onnx", onnx_model(&dims));
        let t = session.tree();
        assert!(
            t.root()
                .damage
                .iter()
                .any(|d| d.status == Status::Corrupt && d.reason.starts_with(why)),
            "{}",
            damage_text(&t, 0)
        );
        assert_eq!(tensors::tensors(&t, 0)[0].status, Status::Corrupt);
    }
    // The same model with dims [2, 2] is complete.
    let session = parse("m.onnx", onnx_model(&[2, 2]));
    assert_eq!(
        tensors::tensors(&session.tree(), 0)[0].status,
        Status::Complete
    );
}

#[test]
fn safetensors_shapes_that_overflow_are_corrupt() {
    let header = r#"{"w":{"dtype":"F32","shape":[4611686018427387904,4611686018427387904],"data_offsets":[0,16]}}"#;
    let mut h = header.to_string();
    while !h.len().is_multiple_of(8) {
        h.push(' ');
    }
    let mut bytes = (h.len() as u64).to_le_bytes().to_vec();
    bytes.extend(h.as_bytes());
    bytes.extend([0u8; 16]);
    let session = parse("w.safetensors", bytes.clone());
    let t = session.tree();
    assert!(
        t.root()
            .damage
            .iter()
            .any(|d| d.status == Status::Corrupt && d.reason.contains("overflows")),
        "{}",
        damage_text(&t, 0)
    );
    let table = tensors::tensors(&t, 0);
    assert_eq!(table.len(), 1);
    assert_eq!(table[0].status, Status::Corrupt, "{:?}", table[0].detail);
    // What the tensor panel shows: no overflow panic in a debug build.
    assert_eq!(table[0].numel(), u64::MAX);
    assert_eq!(pparse::offer::tensor::numel(&table[0].shape), None);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.safetensors");
    std::fs::write(&path, &bytes).unwrap();
    let (list, run) = tensors_json(&path.to_string_lossy());
    assert_eq!(list[0]["status"], "corrupt");
    assert_ne!(run.code, 0);
}
