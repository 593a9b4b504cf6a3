//! Protobuf without a format on top: a user's schema (`--proto`,
//! `--message`), the builtin ones, and no schema at all (guesses).

use serde_json::Value;

use crate::util::*;

const PROTO: &str = r#"
syntax = "proto3";
package demo;
import "google/protobuf/timestamp.proto";
enum Color { RED = 0; GREEN = 1; }
message Point {
  sint32 x = 1;
  int64 y = 2;
  string label = 3;
  repeated Point children = 4;
  Color color = 5;
  repeated int32 packed = 6;
  google.protobuf.Timestamp at = 7;
  double weight = 8;
}
"#;

/// Point{x=-3, y=300, label="héllo", children=[{x=1}], color=GREEN, packed=[1,2,300], weight=0.5}
fn point() -> Vec<u8> {
    let mut b = vec![0x08, 5, 0x10, 0xac, 0x02];
    b.extend(len_field(3, "héllo".as_bytes()));
    b.extend(len_field(4, &[0x08, 2]));
    b.extend([0x28, 1]);
    b.extend(len_field(6, &[1, 2, 0xac, 0x02]));
    b.push(0x41);
    b.extend(0.5f64.to_le_bytes());
    b
}

/// `nodes FILE` read as demo.Point with the schema in `dir`.
fn demo_nodes(dir: &std::path::Path, file: &std::path::Path) -> (Vec<Value>, Run) {
    let proto = dir.join("demo.proto");
    std::fs::write(&proto, PROTO).unwrap();
    nodes(&[
        file.as_os_str(),
        "--proto".as_ref(),
        proto.as_os_str(),
        "--message".as_ref(),
        "demo.Point".as_ref(),
    ])
}

fn nodes(args: &[&std::ffi::OsStr]) -> (Vec<Value>, Run) {
    let mut all: Vec<&std::ffi::OsStr> = vec!["nodes".as_ref()];
    all.extend(args);
    all.extend([
        "--json".as_ref() as &std::ffi::OsStr,
        "--depth".as_ref(),
        "3".as_ref(),
    ]);
    let run = pparse(all);
    let v: Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", run.stdout_text(), run.stderr_text()));
    // One root object, the extraction; the message's fields are its children.
    assert_eq!(v["kind"], "extraction", "{v}");
    let top = v["children"].as_array().cloned().unwrap_or_default();
    (top, run)
}

#[test]
fn a_users_schema_names_fields() {
    let dir = tempfile::tempdir().unwrap();
    let data = point();
    let file = dir.path().join("point.bin");
    std::fs::write(&file, &data).unwrap();
    let proto = dir.path().join("demo.proto");
    let (top, run) = demo_nodes(dir.path(), &file);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let by = |n: &str| {
        top.iter()
            .find(|x| x["name"] == n)
            .unwrap_or_else(|| panic!("{n}: {top:?}"))
    };
    assert_eq!(
        (&by("x")["kind"], &by("x")["value"]),
        (&Value::from("sint32"), &Value::from(-3))
    );
    assert_eq!(by("y")["value"], 300);
    // A string's value is the string: quoted once, by JSON.
    assert_eq!(by("label")["value"], "héllo");
    assert_eq!(by("color")["value"], "GREEN (1)");
    assert_eq!(by("weight")["value"], "0.5");
    let child = by("children[0]");
    assert_eq!(child["kind"], "demo.Point");
    assert_eq!(child["children"][0]["value"], 1);
    let packed = by("packed");
    assert_eq!(packed["kind"], "packed int32");
    let els: Vec<&Value> = packed["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["value"])
        .collect();
    assert_eq!(els, [&Value::from(1), &Value::from(2), &Value::from(300)]);
    // Ranges are exact: the label field is its tag, length and 6 bytes.
    assert_eq!(
        (by("label")["start"].as_u64(), by("label")["end"].as_u64()),
        (Some(5), Some(13))
    );
    // An unknown type name is a usage error that names the near misses.
    let run = pparse([
        "nodes".as_ref(),
        file.as_os_str(),
        "--proto".as_ref(),
        proto.as_os_str(),
        "--message".as_ref(),
        "Point".as_ref(),
    ]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr_text().contains("demo.Point"),
        "{}",
        run.stderr_text()
    );
    let run = pparse([
        "nodes".as_ref(),
        file.as_os_str(),
        "--proto".as_ref(),
        dir.path().join("nope.proto").as_os_str(),
    ]);
    assert_eq!(run.code, 2);
}

#[test]
fn builtin_schemas_read_plain_messages() {
    // An ONNX TensorProto on its own, as in test_data_set_*/input_0.pb.
    let dir = tempfile::tempdir().unwrap();
    let mut t = vec![0x08, 2, 0x10, 1];
    t.extend(len_field(8, b"x"));
    t.extend(len_field(9, &[0u8; 8]));
    let file = dir.path().join("input_0.pb");
    std::fs::write(&file, &t).unwrap();
    let (top, run) = nodes(&[
        file.as_os_str(),
        "--message".as_ref(),
        "onnx.TensorProto".as_ref(),
    ]);
    assert_eq!(run.code, 0);
    let names: Vec<&str> = top.iter().map(|n| n["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["dims[0]", "data_type", "name", "raw_data"]);
    assert_eq!(top[1]["value"], "FLOAT (1)");
}

#[test]
fn without_a_schema_fields_are_guessed_and_marked() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("unknown.pb");
    std::fs::write(&file, point()).unwrap();
    let (top, run) = nodes(&[file.as_os_str()]);
    assert_eq!(run.code, 0);
    let kinds: Vec<&str> = top.iter().map(|n| n["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "varint",
            "varint",
            "string?",
            "message?",
            "varint",
            "packed varint?",
            "fixed64"
        ]
    );
    assert_eq!(top[0]["name"], "#1");
}

#[test]
fn cut_messages_keep_their_fields() {
    let dir = tempfile::tempdir().unwrap();
    let data = point();
    let mut f = Failures::default();
    for cut in 1..data.len() {
        let file = dir.path().join(format!("cut{cut}.pb"));
        std::fs::write(&file, &data[..cut]).unwrap();
        let (top, run) = demo_nodes(dir.path(), &file);
        // Fields wholly before the cut are there, with their values.
        let whole = [
            (2u64, "x"),
            (5, "y"),
            (13, "label"),
            (17, "children[0]"),
            (19, "color"),
            (25, "packed"),
            (34, "weight"),
        ];
        for (end, name) in whole {
            if end <= cut as u64 && !top.iter().any(|n| n["name"] == name && n["end"] == end) {
                f.push(format!("cut {cut}: {name} lost"));
            }
        }
        let truncated = top.iter().any(|n| n["status"] == "truncated");
        let at_boundary = whole.iter().any(|&(e, _)| e == cut as u64);
        if !at_boundary && (!truncated || run.code != 1) {
            f.push(format!("cut {cut}: not reported as truncated: {top:?}"));
        }
    }
    f.check("cut protobuf");
}

/// `--message` is a session's option, not process state: two sessions in
/// one process read the same bytes with and without a message type.
#[test]
fn two_sessions_differ_in_their_message_type() {
    let mut t = vec![0x08, 2, 0x10, 1];
    t.extend(len_field(8, b"x"));
    t.extend(len_field(9, &[0u8; 8]));
    let typed = pparse::Options {
        message: Some(
            pparse::Schemas::default()
                .check_message("onnx.TensorProto")
                .unwrap(),
        ),
        ..Default::default()
    };
    let a = pparse::Session::from_bytes("input_0.pb", t.clone(), typed);
    let b = pparse::Session::from_bytes("input_0.pb", t, pparse::Options::default());
    for s in [&a, &b] {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while !s.is_finished() {
            assert!(std::time::Instant::now() < deadline, "parse did not end");
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    let names = |s: &pparse::Session| -> Vec<String> {
        s.tree().exts[0]
            .nodes
            .iter()
            .map(|n| n.name.to_string())
            .collect()
    };
    assert_eq!(names(&a), ["dims[0]", "data_type", "name", "raw_data"]);
    assert_eq!(names(&b)[0], "#1", "{:?}", names(&b));
    assert!(pparse::Schemas::default().check_message("no.Such").is_err());
}

/// Damage names a field as the schema does, with its number (`raw_data
/// (field 9)`); a field the schema does not know keeps its number alone.
/// A cut bytes field's `data` child holds what is there, after the tag and
/// the length.
#[test]
fn damage_names_fields_by_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let tensor = |tail: &[u8]| {
        let mut t = vec![0x08, 2, 0x10, 1];
        t.extend(len_field(8, b"x"));
        t.extend(tail);
        t
    };
    let cases: [(Vec<u8>, &str, &str); 4] = [
        // raw_data declared 100 bytes, 8 there.
        (
            tensor(&[&[0x4a, 100][..], &[0u8; 8]].concat()),
            "onnx.TensorProto",
            "raw_data (field 9) is cut off: 8 of its 100 bytes are here",
        ),
        // Field 99 is not in the schema.
        (
            tensor(&[&[0x9a, 0x06, 100][..], &[0u8; 8]].concat()),
            "onnx.TensorProto",
            "field 99 is cut off: 8 of its 100 bytes are here",
        ),
        // doc_string (a string) written as a varint.
        (
            tensor(&[0x60, 5]),
            "onnx.TensorProto",
            "doc_string (field 12) is declared string but has wire type varint",
        ),
        // Inside the graph, its name runs past the graph's end (a
        // model_version follows the graph).
        (
            [
                &[0x08, 8][..],
                &len_field(7, &[0x12, 50, b'g', b'g']),
                &[0x28, 3],
            ]
            .concat(),
            "onnx.ModelProto",
            "name (field 2): length 50 runs 48 bytes past the end of its message",
        ),
    ];
    for (i, (bytes, msg, want)) in cases.into_iter().enumerate() {
        let file = dir.path().join(format!("case{i}.pb"));
        std::fs::write(&file, &bytes).unwrap();
        let run = pparse([
            "nodes".as_ref(),
            file.as_os_str(),
            "--message".as_ref(),
            msg.as_ref(),
            "--depth".as_ref(),
            "3".as_ref(),
        ]);
        assert!(
            run.stdout_text().contains(want),
            "case {i}: {}\n{}",
            run.stdout_text(),
            run.stderr_text()
        );
    }
    // The cut raw_data: its data child starts after tag and length.
    let file = dir.path().join("case0.pb");
    let (top, run) = nodes(&[
        file.as_os_str(),
        "--message".as_ref(),
        "onnx.TensorProto".as_ref(),
    ]);
    assert_eq!(run.code, 1);
    let raw = top.iter().find(|n| n["name"] == "raw_data").unwrap();
    let data = &raw["children"][0];
    assert_eq!(
        (&data["name"], &data["start"], &data["end"], &data["status"]),
        (
            &Value::from("data"),
            &Value::from(9),
            &Value::from(17),
            &Value::from("truncated")
        ),
        "{raw}"
    );
}

/// The `--proto` schemas are a session's, not the process's: two sessions
/// in one process read the same bytes with the same type name through
/// different schemas, each when it parses and when it loads a nested
/// message later, and each keys its index with its own set.
#[test]
fn two_sessions_read_with_their_own_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let schema = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let mut o = pparse::Options::default();
        o.schemas.add_proto_file(&p).unwrap();
        o.message = Some(o.schemas.check_message("demo.Point").unwrap());
        o
    };
    let a = schema("a.proto", PROTO);
    let b = schema(
        "b.proto",
        "syntax = \"proto3\";\npackage demo;\nmessage Point { sint32 other = 1; repeated Point kids = 4; }\n",
    );
    assert_ne!(a.fingerprint(), b.fingerprint());
    assert!(
        pparse::Options::default()
            .schemas
            .message("demo.Point")
            .is_none()
    );
    let open = |o: pparse::Options| {
        let s = pparse::Session::from_bytes("point.bin", point(), o);
        s.wait();
        assert!(s.is_finished());
        s
    };
    let (sa, sb) = (open(a), open(b));
    // The nested message's fields, loaded on demand with the session's schemas.
    let nested = |s: &pparse::Session, field: &str| -> (Vec<String>, Vec<String>) {
        let top: Vec<String> = s.tree().exts[0]
            .nodes
            .iter()
            .map(|n| n.name.to_string())
            .collect();
        let i = top
            .iter()
            .position(|n| n == field)
            .unwrap_or_else(|| panic!("{field}: {top:?}"));
        assert!(s.load(0, &[i]), "{field} loads");
        let t = s.tree();
        let inner = match &t.exts[0].nodes[i].children {
            pparse::node::Children::Loaded(c) => c.iter().map(|n| n.name.to_string()).collect(),
            _ => panic!("{field} not loaded"),
        };
        (top, inner)
    };
    let (top_a, inner_a) = nested(&sa, "children[0]");
    let (top_b, inner_b) = nested(&sb, "kids[0]");
    assert_eq!(top_a[0], "x", "{top_a:?}");
    assert_eq!(top_b[0], "other", "{top_b:?}");
    assert_eq!(inner_a, ["x"]);
    assert_eq!(inner_b, ["other"]);
}
