//! JSON: node ranges against the spans Python's json decoder finds
//! (fixtures/json/expect.json), lazy loading, the depth limit on 100,000
//! nested arrays, syntax errors at Python's line:column, truncation at every
//! offset, JSON Lines, and a no-panic damage sweep.

use std::sync::OnceLock;

use pparse::name::escape_str;
use pparse::node::{Children, Node};
use pparse::{Session, Status};
use serde_json::Value;

use crate::sweep::sweep_with;
use crate::util::*;

fn expect() -> &'static Value {
    static E: OnceLock<Value> = OnceLock::new();
    E.get_or_init(|| {
        let text = std::fs::read_to_string(fixture_path("json/expect.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    })
}

/// The node name an expected entry gets: its key (escaped) or `[index]`.
fn name_of(e: &Value) -> String {
    match e.get("key") {
        Some(k) => escape_str(s(k)),
        None => format!("[{}]", u(&e["index"])),
    }
}

/// (name, kind, start, end) of nodes.
fn shape(nodes: &[Node]) -> Vec<(String, String, u64, u64)> {
    nodes
        .iter()
        .map(|n| {
            (
                n.name.to_string(),
                n.kind.to_string(),
                n.range.start,
                n.range.end,
            )
        })
        .collect()
}

fn expected(entries: &Value) -> Vec<(String, String, u64, u64)> {
    entries
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                name_of(e),
                s(&e["kind"]).to_string(),
                u(&e["start"]),
                u(&e["end"]),
            )
        })
        .collect()
}

fn json_files() -> Vec<(&'static str, &'static Value)> {
    expect()["files"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect()
}

/// What Python found for each line of a JSON Lines file.
fn expected_lines(lines: &Value) -> Vec<(String, String, u64, u64)> {
    lines
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                format!("line {}", u(&l["line"])),
                s(&l["kind"]).to_string(),
                u(&l["start"]),
                u(&l["end"]),
            )
        })
        .collect()
}

#[test]
fn node_ranges_are_the_spans_python_finds() {
    for (name, want) in json_files() {
        let session = parse(name, fixture(&format!("json/{name}")));
        let t = session.tree();
        assert_eq!(t.root().parser(), Some("json"), "{name}");
        assert_eq!(
            t.worst_status(),
            Status::Complete,
            "{name}: {}",
            damage_text(&t, 0)
        );
        if let Some(lines) = want.get("lines") {
            let got: Vec<(String, String, u64, u64)> = shape(&t.root().nodes);
            let exp = expected_lines(lines);
            assert_eq!(got, exp, "{name}");
            continue;
        }
        let entries = &want["entries"];
        assert_eq!(shape(&t.root().nodes), expected(entries), "{name}");
        drop(t);
        // One level down, loaded lazily from each container's range.
        for (i, e) in entries.as_array().unwrap().iter().enumerate() {
            let Some(children) = e.get("children") else {
                continue;
            };
            let loaded = session.load(0, &[i]);
            let t = session.tree();
            let node = &t.root().nodes[i];
            if children.as_array().unwrap().is_empty() {
                assert!(matches!(node.children, Children::Leaf), "{name} {i}");
                continue;
            }
            assert!(loaded, "{name}: node {i} does not load");
            assert_eq!(
                shape(node.loaded_children()),
                expected(children),
                "{name} {i}"
            );
        }
    }
}

#[test]
fn children_load_lazily_and_again() {
    let session = parse("nested.json", fixture("json/nested.json"));
    let idx = {
        let t = session.tree();
        let nodes = &t.root().nodes;
        assert!(
            nodes
                .iter()
                .all(|n| !matches!(n.children, Children::Loaded(_)))
        );
        nodes.iter().position(|n| &*n.name == "deep").unwrap()
    };
    // Walk down "deep" level by level: every level is loaded on demand.
    let mut path = vec![idx];
    let mut names = Vec::new();
    loop {
        if !session.load(0, &path) {
            break;
        }
        let t = session.tree();
        let n = t.root().nodes[path[0]].descend(&path[1..]).unwrap();
        let kids = n.loaded_children();
        if kids.is_empty() {
            break;
        }
        names.push(kids[0].name.to_string());
        drop(t);
        path.push(0);
    }
    assert_eq!(
        names,
        ["a", "b", "c", "d", "e", "[0]", "[0]", "[0]", "[0]", "[0]"]
    );
    let first = {
        let t = session.tree();
        shape(t.root().nodes[idx].loaded_children())
    };
    session.unload(0, &[idx]);
    assert!(matches!(
        session.tree().root().nodes[idx].children,
        Children::Unloaded
    ));
    assert!(session.load(0, &[idx]));
    assert_eq!(
        shape(session.tree().root().nodes[idx].loaded_children()),
        first
    );
}

#[test]
fn nesting_100000_deep_is_reported_not_recursed() {
    let n = 100_000;
    let doc = format!(
        "{{\"deep\": {}{}, \"after\": 1}}",
        "[".repeat(n),
        "]".repeat(n)
    );
    let session = parse("deep.json", doc.into_bytes());
    let t = session.tree();
    let d = &t.root().damage;
    assert_eq!(d.len(), 1, "{}", damage_text(&t, 0));
    assert_eq!(d[0].status, Status::Corrupt);
    // The root object and 511 arrays are open at the 512th '[' (column 9 + 512).
    assert!(
        d[0].reason
            .contains("nesting deeper than 512 levels at 1:521"),
        "{}",
        d[0].reason
    );
    let names: Vec<&str> = t.root().nodes.iter().map(|n| &*n.name).collect();
    assert_eq!(names, ["deep", "after"]);
    drop(t);
    // Loading goes down one level at a time, also far below the limit.
    let mut path = vec![0];
    for _ in 0..600 {
        assert!(session.load(0, &path));
        path.push(0);
    }
    // Unclosed, the document is truncated and says how deep it was.
    let doc = format!("[{}", "[".repeat(n));
    let session = parse("open.json", doc.into_bytes());
    let t = session.tree();
    assert_eq!(t.worst_status(), Status::Corrupt);
    assert!(
        t.root()
            .damage
            .iter()
            .any(|d| d.status == Status::Truncated && d.reason.contains("nested deeper than 512")),
        "{}",
        damage_text(&t, 0)
    );
}

#[test]
fn syntax_errors_are_at_pythons_line_and_column() {
    for case in expect()["errors"].as_array().unwrap() {
        let text = s(&case["text"]);
        let session = parse("case.json", text.as_bytes().to_vec());
        let t = session.tree();
        let at = format!("at {}:{}", u(&case["lineno"]), u(&case["colno"]));
        let pos = u(&case["pos"]);
        let d = t
            .root()
            .damage
            .iter()
            .find(|d| d.status == Status::Corrupt)
            .unwrap_or_else(|| panic!("{text:?}: no corrupt damage: {}", damage_text(&t, 0)));
        assert!(
            d.reason.contains(&at),
            "{text:?}: {} (Python: {} {at})",
            d.reason,
            s(&case["msg"])
        );
        assert_eq!(d.range.start, pos, "{text:?}: {}", d.reason);
        if text.starts_with('{') {
            let kept: Vec<String> = t
                .root()
                .nodes
                .iter()
                .filter(|n| n.damage.is_none())
                .map(|n| n.name.to_string())
                .collect();
            let want: Vec<String> = case["kept"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| escape_str(s(k)))
                .collect();
            assert_eq!(kept, want, "{text:?}");
        }
    }
}

/// Cuts a document at every offset: every entry that ended before the cut
/// is there with its exact range and no damage, and nothing else is whole.
#[test]
fn truncation_keeps_every_entry_before_the_cut() {
    let mut f = Failures::default();
    for (name, want) in json_files() {
        let data = fixture(&format!("json/{name}"));
        let lines = want.get("lines").is_some();
        let entries: Vec<(String, String, u64, u64)> = if lines {
            expected_lines(&want["lines"])
        } else {
            expected(&want["entries"])
        };
        for cut in 0..=data.len() {
            let what = format!("{name} cut at {cut}");
            let session = parse_named(name, data[..cut].to_vec(), &what);
            let t = session.tree();
            let c = cut as u64;
            // An entry is whole when its last byte is there, except a number
            // inside a container, which may go on (it needs the next byte).
            let whole: Vec<&(String, String, u64, u64)> = entries
                .iter()
                .filter(|e| e.3 < c || (e.3 == c && (e.1 != "number" || lines)))
                .collect();
            let got: Vec<(String, String, u64, u64)> = shape(
                &t.root()
                    .nodes
                    .iter()
                    .filter(|n| n.damage.is_none())
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            // JSON Lines: a number line cut inside reads as a shorter number.
            let got: Vec<_> = got
                .into_iter()
                .filter(|g| {
                    !(lines && g.1 == "number" && g.3 == c && !whole.iter().any(|w| w.2 == g.2))
                })
                .collect();
            let whole: Vec<(String, String, u64, u64)> = whole.into_iter().cloned().collect();
            if got != whole {
                f.push(format!("{what}: whole entries {got:?}, expected {whole:?}"));
            }
            let damaged = t.root().nodes.iter().filter(|n| n.damage.is_some()).count();
            if damaged > 1 {
                f.push(format!("{what}: {damaged} damaged nodes"));
            }
            let rest_blank = data[cut..].iter().all(|b| b" \t\r\n".contains(b));
            let ended =
                lines && (cut == 0 || data[cut - 1] == b'\n' || entries.iter().any(|e| e.3 == c));
            let want_status = if rest_blank || ended {
                Status::Complete
            } else {
                Status::Truncated
            };
            if t.worst_status() != want_status && !(lines && t.worst_status() == Status::Complete) {
                f.push(format!(
                    "{what}: status {:?}, expected {want_status:?}: {}",
                    t.worst_status(),
                    damage_text(&t, 0)
                ));
            }
        }
    }
    f.check("json truncation");
}

#[test]
fn json_lines_go_on_after_a_bad_line() {
    let mut data = fixture("json/records.jsonl");
    let lines: Vec<usize> = std::iter::once(0)
        .chain(
            data.iter()
                .enumerate()
                .filter(|(_, b)| **b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    // Break line 5: `{"step": @, ...`.
    data[lines[4] + 9] = b'@';
    let session = parse("records.jsonl", data);
    let t = session.tree();
    let n = &t.root().nodes;
    assert_eq!(n.len(), 40, "every line is listed");
    assert!(n[4].damage.is_some());
    assert!(
        n.iter()
            .enumerate()
            .all(|(i, x)| i == 4 || x.damage.is_none())
    );
    assert_eq!(&*n[39].name, "line 40");
    assert!(
        damage_text(&t, 0).contains("at 5:10"),
        "{}",
        damage_text(&t, 0)
    );
}

#[test]
fn a_root_scalar_and_trailing_data() {
    let session = parse("x.json", b" \"just a string\" ".to_vec());
    let t = session.tree();
    assert_eq!(
        shape(&t.root().nodes),
        [("value".to_string(), "string".to_string(), 1, 16)]
    );
    let session = parse("x.json", b"{\"a\": 1} {\"b\": 2}\n".to_vec());
    let t = session.tree();
    assert!(damage_text(&t, 0).contains("trailing data after the top-level JSON value at 1:10"));
    assert_eq!(t.root().nodes.len(), 1);
    // A second value on a later line: JSON Lines under a .json name.
    let session = parse("x.json", b"{\"a\": 1}\n{\"b\": 2}\n".to_vec());
    let t = session.tree();
    assert_eq!(
        t.root().status(),
        Status::Complete,
        "{}",
        damage_text(&t, 0)
    );
    assert_eq!(t.root().nodes.len(), 2);
}

#[test]
fn sniffing_claims_json_not_text() {
    let sniffed = |name: &str, bytes: &[u8]| -> Option<&'static str> {
        let session: Session = parse(name, bytes.to_vec());
        session.tree().root().parser()
    };
    assert_eq!(sniffed("data.bin", b"  {\n \"k\": 1}"), Some("json"));
    assert_eq!(sniffed("data.bin", b"{}"), Some("json"));
    assert_eq!(sniffed("notes.txt", b"[1, 2] is a list"), None);
    assert_eq!(sniffed("notes.txt", b"{curly text}"), None);
    assert_eq!(sniffed("list.json", b"[1, 2]"), Some("json"));
}

fn no_more_than_the_bytes(t: &pparse::Tree, what: &str, f: &mut Failures) {
    let size = t.root().size();
    for n in &t.root().nodes {
        if n.range.end > size {
            f.push(format!(
                "{what}: node {} ends at {} past {size}",
                n.name, n.range.end
            ));
        }
    }
}

#[test]
fn sweep_json_fixtures() {
    for name in [
        "nested.json",
        "ascii.json",
        "numbers.json",
        "array.json",
        "records.jsonl",
    ] {
        sweep_with(&format!("json/{name}"), &no_more_than_the_bytes);
    }
}

fn gzip(name: &str, data: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut gz = flate2::GzBuilder::new()
        .filename(name)
        .mtime(0)
        .write(Vec::new(), flate2::Compression::fast());
    gz.write_all(data).unwrap();
    gz.finish().unwrap()
}

/// Inside a gzip file the bytes arrive while they are decoded (4 MiB per
/// step): the parser must wait for them and end with the same nodes.
#[test]
fn a_document_decoded_while_it_is_parsed() {
    let mut doc = String::from("[");
    for i in 0..150_000 {
        if i > 0 {
            doc.push_str(",\n ");
        }
        doc.push_str(&format!(
            "{{\"i\": {i}, \"s\": \"{}\", \"l\": [1, 2.5, null]}}",
            "x".repeat(i % 50)
        ));
    }
    doc.push(']');
    let mut lines = String::new();
    for i in 0..150_000 {
        lines.push_str(&format!(
            "{{\"n\": {i}, \"t\": \"{}\"}}\n",
            "y".repeat(i % 40)
        ));
    }
    for (name, text) in [("big.json", doc), ("big.jsonl", lines)] {
        assert!(text.len() > 5 << 20, "more than one decoding step");
        let plain = parse(name, text.as_bytes().to_vec());
        let want = shape(&plain.tree().root().nodes);
        assert_eq!(want.len(), 150_000);
        let gz = parse(&format!("{name}.gz"), gzip(name, text.as_bytes()));
        let t = gz.tree();
        let child = t.resolve(name).expect("the decoded stream");
        assert_eq!(t.exts[child].parser(), Some("json"));
        assert_eq!(t.worst_status(), Status::Complete, "{}", tree_text(&t));
        assert_eq!(shape(&t.exts[child].nodes), want, "{name}");
    }
}

/// Members taken for a format by their name alone (fixtures/named.tar.gz,
/// made by fixtures/make_named.sh): JSON Lines under a `.json` name read as
/// JSON Lines; text under a `.json` name is a note on the member,
/// not damage, so an intact archive exits 0.
#[test]
fn members_sniffed_by_name_get_notes_not_damage() {
    let path = fixture_path("named.tar.gz");
    let run = pparse(["tree".as_ref(), path.as_os_str(), "--json".as_ref()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let v: Value = serde_json::from_slice(&run.stdout).expect("tree --json");
    let mut found = std::collections::BTreeMap::new();
    let mut stack = vec![&v];
    while let Some(n) = stack.pop() {
        found.insert(s(&n["path"]).to_string(), n);
        stack.extend(n["children"].as_array().into_iter().flatten());
    }
    let get = |p: &str| {
        *found
            .get(p)
            .unwrap_or_else(|| panic!("{p} not in {found:?}"))
    };
    for p in [
        "named.tar/named/lines.json",
        "named.tar/named/notes.json",
        "named.tar/named/real.json",
        "named.tar/named/model.pb",
    ] {
        assert_eq!(s(&get(p)["status"]), "complete", "{p}");
    }
    for p in ["named.tar/named/lines.json", "named.tar/named/real.json"] {
        assert!(get(p).get("notes").is_none(), "{p}: {}", get(p));
    }
    // Text under a `.pb` name does not pass the protobuf sniff's wire check.
    assert!(get("named.tar/named/model.pb")["parser"].is_null());
    let notes = get("named.tar/named/notes.json")["notes"]
        .as_array()
        .expect("notes");
    assert!(
        s(&notes[0]).contains("not read as its name suggests"),
        "{notes:?}"
    );
    // lines.json is read as three JSON Lines entries.
    let run = pparse([
        "nodes".as_ref(),
        path.as_os_str(),
        "named.tar/named/lines.json".as_ref(),
        "--json".as_ref(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let v: Value = serde_json::from_slice(&run.stdout).expect("nodes --json");
    let names: Vec<&str> = v["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| s(&n["name"]))
        .collect();
    assert_eq!(names, ["line 1", "line 2", "line 3"]);
    // Opened on its own, a file that is not what its name says is damage:
    // the user asked about that file.
    let tmp = tempfile::tempdir().unwrap();
    let alone = tmp.path().join("notes.json");
    std::fs::write(&alone, b"this file is not JSON at all\n").unwrap();
    assert_eq!(pparse(["tree".as_ref(), alone.as_os_str()]).code, 1);
    let lines = tmp.path().join("lines.json");
    std::fs::write(&lines, b"{\"a\": 1}\n{\"a\": 2}\n").unwrap();
    assert_eq!(pparse(["tree".as_ref(), lines.as_os_str()]).code, 0);
}

/// Each line's value: (start, end) in the file.
type Spans = Vec<(u64, u64)>;

/// Logs written as JSON Lines by Python's json module, in the shape of
/// wandb's `debug-internal.log` (`{"time", "level", "msg", ...}` a line):
/// `debug-internal.log`, 3,000 lines, and `big-first.log`, whose first
/// line is longer than a parse step (5 MiB), so the parser has listed
/// the first value's members before the second line tells it the text is
/// JSON Lines. Returns the folder and each file's line spans.
fn wandb_shaped_logs() -> (tempfile::TempDir, Spans, Spans) {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import json, sys\n\
             def write(path, first, n):\n\
             \x20   spans, pos = [], 0\n\
             \x20   with open(path, 'wb') as f:\n\
             \x20       for i in range(n):\n\
             \x20           rec = {'time': '2025-01-02T03:04:%02d.%06dZ' % (i % 60, i),\n\
             \x20                  'level': ['DEBUG', 'INFO', 'WARN'][i % 3],\n\
             \x20                  'msg': first if i == 0 else 'handler: handle_request: status_report %d' % i}\n\
             \x20           if i % 7 == 0:\n\
             \x20               rec['stream_id'] = 'run-%d' % i\n\
             \x20               rec['counts'] = [i, i + 1.5, None, True]\n\
             \x20           line = json.dumps(rec).encode()\n\
             \x20           f.write(line + b'\\n')\n\
             \x20           spans.append([pos, pos + len(line)])\n\
             \x20           pos += len(line) + 1\n\
             \x20   return spans\n\
             d = sys.argv[1]\n\
             print(json.dumps([write(d + '/debug-internal.log', 'stream: starting', 3000),\n\
             \x20                 write(d + '/big-first.log', 'x' * (5 << 20), 50)]))",
        )
        .arg(dir.path())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let spans = |v: &Value| -> Spans {
        v.as_array()
            .unwrap()
            .iter()
            .map(|p| (u(&p[0]), u(&p[1])))
            .collect()
    };
    (dir, spans(&v[0]), spans(&v[1]))
}

fn line_shape(spans: &[(u64, u64)]) -> Vec<(String, String, u64, u64)> {
    spans
        .iter()
        .enumerate()
        .map(|(i, &(a, b))| (format!("line {}", i + 1), "object".to_string(), a, b))
        .collect()
}

/// A file found to be JSON by its first bytes, not its name, that holds a
/// value a line is JSON Lines, not JSON with trailing data: one node per
/// line with the line's bytes, its members loaded from them, complete;
/// also when the first line is longer than a parse step, and inside a
/// gzip file. One broken line is damage at that line only.
#[test]
fn json_lines_under_any_name_are_read_as_lines() {
    let (dir, spans, big_spans) = wandb_shaped_logs();
    let log = dir.path().join("debug-internal.log");
    let bytes = std::fs::read(&log).unwrap();
    let session = parse("debug-internal.log", bytes.clone());
    {
        let t = session.tree();
        assert_eq!(t.root().parser(), Some("json"));
        assert_eq!(t.worst_status(), Status::Complete, "{}", damage_text(&t, 0));
        assert_eq!(shape(&t.root().nodes), line_shape(&spans));
    }
    assert!(session.load(0, &[7]));
    {
        let t = session.tree();
        let names: Vec<&str> = t.root().nodes[7]
            .loaded_children()
            .iter()
            .map(|n| &*n.name)
            .collect();
        assert_eq!(names, ["time", "level", "msg", "stream_id", "counts"]);
    }
    let run = pparse(["tree".as_ref(), log.as_os_str(), "--no-index".as_ref()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert!(
        run.stdout_text().contains("[json]"),
        "{}",
        run.stdout_text()
    );

    // Line 1500 broken in the middle of its value.
    let (a, _) = spans[1499];
    let mut broken = bytes.clone();
    broken[a as usize + 1] = b'@';
    let bad = dir.path().join("broken-internal.log");
    std::fs::write(&bad, &broken).unwrap();
    let session = parse("broken-internal.log", broken);
    {
        let t = session.tree();
        let n = &t.root().nodes;
        assert_eq!(n.len(), spans.len(), "every line is listed");
        for (i, x) in n.iter().enumerate() {
            assert_eq!(x.damage.is_some(), i == 1499, "line {}", i + 1);
        }
        assert!(damage_text(&t, 0).contains("syntax error at 1500:2"));
    }
    let run = pparse(["tree".as_ref(), bad.as_os_str(), "--no-index".as_ref()]);
    assert_eq!(run.code, 1);
    assert!(
        run.stderr_text().contains("syntax error at 1500:2"),
        "{}",
        run.stderr_text()
    );

    // The first line longer than a step: its members were listed as the
    // document's before the second line came; the lines replace them.
    let big = std::fs::read(dir.path().join("big-first.log")).unwrap();
    assert!(big.len() as u64 > pparse::Options::default().step_bytes);
    for name in ["big-first.log", "big-first.jsonl"] {
        let session = parse(name, big.clone());
        let t = session.tree();
        assert_eq!(t.worst_status(), Status::Complete, "{}", damage_text(&t, 0));
        assert_eq!(shape(&t.root().nodes), line_shape(&big_spans), "{name}");
    }

    // Decoded from a gzip file while it is parsed: the same lines.
    let session = parse("debug-internal.log.gz", gzip("debug-internal.log", &bytes));
    let t = session.tree();
    let child = t.resolve("debug-internal.log").expect("the decoded stream");
    assert_eq!(t.worst_status(), Status::Complete, "{}", tree_text(&t));
    assert_eq!(shape(&t.exts[child].nodes), line_shape(&spans));
}

/// Text whose first bytes look like a JSON object but whose first value
/// breaks at once is not JSON (nothing said it was): unknown data, intact,
/// exit 0. Under a `.json` name the same bytes are damaged JSON.
#[test]
fn text_that_only_starts_like_json_is_not_damaged_json() {
    let text = b"{\"level\" INFO} server started\n{\"level\" INFO} ready\n";
    let session = parse("server.log", text.to_vec());
    let t = session.tree();
    assert_eq!(t.root().parser(), None);
    assert_eq!(t.worst_status(), Status::Complete, "{}", damage_text(&t, 0));
    let dir = tempfile::tempdir().unwrap();
    for (name, code) in [("server.log", 0), ("server.json", 1)] {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let run = pparse(["tree".as_ref(), p.as_os_str(), "--no-index".as_ref()]);
        assert_eq!(run.code, code, "{name}: {}", run.stderr_text());
    }
}
