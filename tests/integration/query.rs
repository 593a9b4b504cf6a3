//! `pparse query`: jq filters (jaq) over the extraction tree, checked
//! against `tree --json` read with serde_json, and with jq itself where
//! it is installed.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::*;

/// Archives of every kind, intact and damaged.
fn files(tmp: &Path) -> Vec<PathBuf> {
    let cut = tmp.join("cut.tar.gz");
    let whole = fixture("nested.tar.gz");
    std::fs::write(&cut, &whole[..whole.len() * 3 / 5]).unwrap();
    let mut v: Vec<PathBuf> = [
        "nested.tar.gz",
        "many-gnu.tar.gz",
        "dd.zip",
        "hostile.tar",
        "compress/nested.tar.xz",
    ]
    .map(fixture_path)
    .to_vec();
    v.push(cut);
    v
}

/// Every extraction below the root of `tree --json`, depth first, without
/// `children`: what `members` should give.
fn members_of(tree: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    let mut stack: Vec<&Value> = tree["children"].as_array().unwrap().iter().rev().collect();
    while let Some(v) = stack.pop() {
        if let Some(kids) = v["children"].as_array() {
            stack.extend(kids.iter().rev());
        }
        let mut m = v.clone();
        m.as_object_mut().unwrap().remove("children");
        out.push(m);
    }
    out
}

fn lines(run: &Run) -> Vec<Value> {
    run.stdout_text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn jq(filter: &str, input: &[u8]) -> Option<String> {
    let mut child = Command::new("jq")
        .args(["-c", filter])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .ok()?;
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), input).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "jq {filter} failed");
    Some(String::from_utf8(out.stdout).unwrap())
}

/// `.` is the extraction without its children, `members` every one below
/// it as `tree --json` has it; selections over them agree with jq's over
/// `tree --json`.
#[test]
fn a_query_sees_what_tree_json_shows() {
    let tmp = tempfile::tempdir().unwrap();
    let mut jq_checked = 0;
    for file in files(tmp.path()) {
        let f = file.to_str().unwrap();
        let tree = pparse(["tree", "--json", f, "--no-index"]);
        let doc: Value = serde_json::from_slice(&tree.stdout).unwrap();
        let mut root = doc.clone();
        root.as_object_mut().unwrap().remove("children");
        let run = pparse(["query", f, ".", "--no-index"]);
        assert_eq!(run.code, 0, "{f}: {}", run.stderr_text());
        assert_eq!(lines(&run), vec![root], "{f}");
        let run = pparse(["query", f, "members", "--no-index"]);
        assert_eq!(lines(&run), members_of(&doc), "{f}");
        // Through an index (the second run reads the members from its
        // records, without a tree): the same.
        let index = tmp.path().join("q.pidx");
        let _ = std::fs::remove_file(&index);
        for _ in 0..2 {
            let idx = pparse(["query", f, "members", "--index", index.to_str().unwrap()]);
            assert_eq!(idx.stdout, run.stdout, "{f}: {}", idx.stderr_text());
        }
        let damaged = "members | select(.status != \"complete\") | .path";
        let run = pparse(["query", f, damaged, "--no-index"]);
        let want: Vec<Value> = members_of(&doc)
            .into_iter()
            .filter(|m| m["status"] != "complete")
            .map(|m| m["path"].clone())
            .collect();
        assert_eq!(lines(&run), want, "{f}");
        // The same filters in jq over `tree --json`.
        for (ours, theirs) in [
            (
                damaged,
                ".children[] | recurse(.children[]?) | select(.status != \"complete\") | .path",
            ),
            (
                "[members | select(.kind == \"file\") | .size] | add",
                "[.children[] | recurse(.children[]?) | select(.kind == \"file\") | .size] | add",
            ),
            (
                "[members | .parser // \"raw\"] | group_by(.) | map({(.[0]): length}) | add",
                "[.children[] | recurse(.children[]?) | .parser // \"raw\"] | group_by(.) | map({(.[0]): length}) | add",
            ),
        ] {
            let Some(want) = jq(theirs, &tree.stdout) else {
                continue;
            };
            jq_checked += 1;
            let run = pparse(["query", f, ours, "--no-index"]);
            assert_eq!(run.stdout_text(), want, "{f}: {ours}");
        }
    }
    if jq_checked == 0 {
        eprintln!("jq is not installed: the query tests compared with serde_json only");
    }
}

/// `members` makes each member's object when the filter asks for it:
/// `first(members)` makes one of 2,000, `limit(5; members)` five.
#[test]
fn members_are_made_as_the_filter_takes_them() {
    let s = pparse::Session::open(&fixture_path("many-gnu.tar.gz"), pparse::Options::default())
        .unwrap();
    s.wait();
    let n = s.tree().len() as u64 - 1;
    assert!(n > 2000);
    let count = |filter: &str| {
        let q = pparse::report::query::Query::compile(filter).unwrap();
        let mut out = Vec::new();
        let ran = q
            .run(&s, 0, |l| {
                out.push(l.to_string());
                Ok(())
            })
            .unwrap();
        assert_eq!(ran.error, None, "{filter}");
        (ran.made, out)
    };
    assert_eq!(count("first(members) | .path").0, 1);
    assert_eq!(count("limit(5; members)").0, 5);
    let (made, out) = count("[members] | length");
    assert_eq!((made, out), (n, vec![n.to_string()]));
    // Under a PATH: its members only.
    let q = pparse::report::query::Query::compile("[members | .path] | length").unwrap();
    let tar = s.tree().resolve("many-gnu.tar").unwrap();
    let mut got = String::new();
    q.run(&s, tar, |l| {
        got = l.to_string();
        Ok(())
    })
    .unwrap();
    assert_eq!(got, (n - 1).to_string());
    // Opened from an index, `members` reads the index's records: the tree
    // is never built, and the members are the same.
    let tmp = tempfile::tempdir().unwrap();
    let opts = pparse::Options {
        index: pparse::parsers::IndexMode::At(tmp.path().join("i.pidx")),
        ..pparse::Options::default()
    };
    let file = fixture_path("many-gnu.tar.gz");
    pparse::Session::open(&file, opts.clone()).unwrap().wait();
    let r = pparse::Session::open(&file, opts).unwrap();
    assert!(r.from_index() && !r.tree_is_built());
    let q = pparse::report::query::Query::compile("[members | .path]").unwrap();
    let (mut a, mut b) = (String::new(), String::new());
    q.run(&r, 0, |l| {
        a = l.to_string();
        Ok(())
    })
    .unwrap();
    assert!(!r.tree_is_built(), "the query built the tree");
    // An index holds no nodes: `nodes` says so rather than being empty.
    let q_nodes = pparse::report::query::Query::compile("[nodes] | length").unwrap();
    let ran = q_nodes.run(&r, 0, |_| Ok(())).unwrap();
    assert!(
        ran.error
            .as_deref()
            .is_some_and(|e| e.contains("holds no nodes")),
        "{ran:?}"
    );
    q.run(&s, 0, |l| {
        b = l.to_string();
        Ok(())
    })
    .unwrap();
    assert_eq!(a, b);
}

/// A filter that does not compile says where (exit 2); one that fails
/// says why, and for `.members[]` that `members` is a stream.
#[test]
fn a_bad_filter_is_an_error_that_says_where() {
    let f = fixture_path("nested.tar.gz");
    let f = f.to_str().unwrap();
    let run = pparse(["query", f, "members | foo(", "--no-index"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr_text().contains("does not compile") && run.stderr_text().contains("at byte"),
        "{}",
        run.stderr_text()
    );
    let run = pparse(["query", f, "nosuchfilter", "--no-index"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr_text().contains("undefined filter nosuchfilter"),
        "{}",
        run.stderr_text()
    );
    let run = pparse(["query", f, ".members[] | .path", "--no-index"]);
    assert_eq!(run.code, 2);
    assert!(
        run.stderr_text().contains("`members` is a stream"),
        "{}",
        run.stderr_text()
    );
    let run = pparse(["query", f, "error(\"stop\")", "--no-index"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr_text().contains("stop"), "{}", run.stderr_text());
}

/// `nodes` walks the node tree as `nodes --json` shows it, loading what
/// the parser left to load on demand and dropping it once walked past: a
/// walk holds one path, and the tree is as it was after.
#[test]
fn nodes_are_walked_loaded_and_dropped_again() {
    use pparse::node::Children;
    // A JSON document whose values are loaded on demand.
    let mut doc = String::from("[");
    for i in 0..3000 {
        if i > 0 {
            doc.push(',');
        }
        doc.push_str(&format!(
            "{{\"id\":{i},\"tags\":[\"a\",\"b\"],\"more\":{{\"x\":[1,2,3]}}}}"
        ));
    }
    doc.push(']');
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("big.json");
    std::fs::write(&file, &doc).unwrap();
    let s = pparse::Session::open(&file, pparse::Options::default()).unwrap();
    s.wait();
    let unloaded = |s: &pparse::Session| {
        let t = s.tree();
        let mut stack: Vec<&pparse::node::Node> = t.exts[0].nodes.iter().collect();
        let (mut lazy, mut loaded) = (0, 0);
        while let Some(n) = stack.pop() {
            match &n.children {
                Children::Unloaded => lazy += 1,
                Children::Loaded(c) => {
                    loaded += c.len();
                    stack.extend(c.iter());
                }
                Children::Leaf => {}
            }
        }
        (lazy, loaded)
    };
    let before = unloaded(&s);
    assert!(before.0 > 0, "no node is loaded on demand: {before:?}");
    let q = pparse::report::query::Query::compile("[nodes | select(.kind == \"number\")] | length")
        .unwrap();
    let mut out = String::new();
    let ran = q
        .run(&s, 0, |l| {
            out = l.to_string();
            Ok(())
        })
        .unwrap();
    assert_eq!(ran.error, None);
    // 3,000 ids and 9,000 numbers in `x`.
    assert_eq!(out, "12000");
    assert!(ran.made > 12000);
    assert_eq!(unloaded(&s), before, "the walk left nodes loaded");
    // What the command shows agrees with `nodes --json` read whole.
    let f = file.to_str().unwrap();
    let run = pparse(["query", f, "[nodes | select(.depth <= 3) | del(.depth)]"]);
    let all = pparse(["nodes", f, "--depth", "3", "--json"]);
    let whole: Value = serde_json::from_slice(&all.stdout).unwrap();
    let mut want = Vec::new();
    let mut stack: Vec<&Value> = whole["children"].as_array().unwrap().iter().rev().collect();
    while let Some(v) = stack.pop() {
        if let Some(kids) = v["children"].as_array() {
            stack.extend(kids.iter().rev());
        }
        let mut m = v.clone();
        m.as_object_mut().unwrap().remove("children");
        m.as_object_mut().unwrap().remove("more");
        want.push(m);
    }
    assert_eq!(lines(&run), vec![Value::Array(want)]);
}
