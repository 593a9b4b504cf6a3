//! The headless commands of docs/contract.md, run as the real binary: JSON shapes,
//! exit codes (0 intact, 1 partial, 2 usage or unreadable), `cat` and
//! `extract` bytes.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::util::*;

const STATUSES: &[&str] = &["complete", "truncated", "corrupt"];

/// Checks a `tree --json` node and its subtree; collects (path, size,
/// status) of every node.
fn walk_tree_json(
    v: &Value,
    parent_path: Option<&str>,
    out: &mut Vec<(String, u64, String)>,
    f: &mut Failures,
) {
    for key in ["name", "path", "parser", "size", "status", "children"] {
        if v.get(key).is_none() {
            f.push(format!("tree --json node lacks {key:?}: {}", brief(v)));
            return;
        }
    }
    let (Some(name), Some(path), Some(size), Some(status), Some(children)) = (
        v["name"].as_str(),
        v["path"].as_str(),
        v["size"].as_u64(),
        v["status"].as_str(),
        v["children"].as_array(),
    ) else {
        f.push(format!("tree --json node has mistyped keys: {}", brief(v)));
        return;
    };
    if !(v["parser"].is_null() || v["parser"].is_string()) {
        f.push(format!("parser is neither null nor a string: {}", brief(v)));
    }
    if !STATUSES.contains(&status) {
        f.push(format!("status {status:?} is not one of {STATUSES:?}"));
    }
    let want_path = match parent_path {
        None => String::new(),
        Some("") => name.to_string(),
        Some(p) => format!("{p}/{name}"),
    };
    if path != want_path {
        f.push(format!(
            "node {name:?} has path {path:?}, expected {want_path:?}"
        ));
    }
    out.push((path.to_string(), size, status.to_string()));
    for c in children {
        walk_tree_json(c, Some(path), out, f);
    }
}

fn brief(v: &Value) -> String {
    let s = v.to_string();
    s.chars().take(200).collect()
}

/// `tree --json` on nested.tar.gz: the docs/contract.md keys on every node, paths
/// built from names, every path resolving in the library to an extraction
/// of the same size and status, every manifest leaf present and complete.
#[test]
fn tree_json_nested() {
    let file = fixture_path("nested.tar.gz");
    let run = pparse(["tree".as_ref(), file.as_os_str(), "--json".as_ref()]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr_text());
    let v: Value = serde_json::from_slice(&run.stdout).expect("tree --json is JSON");
    let mut f = Failures::default();
    let mut nodes = Vec::new();
    walk_tree_json(&v, None, &mut nodes, &mut f);
    let session = parse("nested.tar.gz", fixture("nested.tar.gz"));
    let t = session.tree();
    if nodes.len() != t.len() {
        f.push(format!(
            "tree --json has {} nodes, the library {}",
            nodes.len(),
            t.len()
        ));
    }
    let by_path: BTreeMap<&str, (u64, &str)> = nodes
        .iter()
        .map(|(p, s, st)| (p.as_str(), (*s, st.as_str())))
        .collect();
    for (path, size, status) in &nodes {
        match t.resolve(path) {
            None => f.push(format!("tree --json path {path:?} does not resolve")),
            Some(id) => {
                let e = &t.exts[id];
                if t.path_of(id) != *path || e.size() != *size || e.status().as_str() != status {
                    f.push(format!(
                        "{path:?}: JSON says {size} bytes {status}, the library {:?} {} bytes {}",
                        t.path_of(id),
                        e.size(),
                        e.status().as_str()
                    ));
                }
            }
        }
    }
    for leaf in leaves("nested.tar.gz") {
        match by_path.get(leaf.path.as_str()) {
            Some(&(size, "complete")) if size == leaf.size => {}
            got => f.push(format!(
                "leaf {:?} ({} bytes) in tree --json: {got:?}",
                leaf.path, leaf.size
            )),
        }
    }
    f.check("tree --json");
}

/// Exit 0 for every intact fixture.
#[test]
fn exit_0_for_intact_fixtures() {
    let mut f = Failures::default();
    let mut all: Vec<&str> = vec!["nested.tar.gz", "multi.gz", "hostile.tar", "hostile.zip"];
    all.extend(TARS);
    all.extend(ZIPS);
    for name in all {
        let run = pparse(["tree".as_ref(), fixture_path(name).as_os_str()]);
        if run.code != 0 {
            f.push(format!(
                "pparse tree {name}: exit {}; stderr: {}",
                run.code,
                run.stderr_text()
            ));
        }
    }
    f.check("exit codes of intact fixtures");
}

/// Exit 1 for partial results: a truncated copy (tree, cat of a cut-off
/// member, extract), with the damage on stderr; the bytes that exist are
/// still written.
#[test]
fn exit_1_for_truncated_copy() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let cut = tmp.path().join("cut.tar.gz");
    // Cut inside docs/guide.txt (see expect/nested_truncation.json).
    let exp = nested_truncation();
    let case = exp["cuts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| {
            let l = &c["leaves"]["nested.tar/docs/guide.txt"];
            l.as_u64().is_some_and(|n| n > 0 && n < 40000)
        })
        .expect("a cut inside guide.txt");
    let n = u(&case["cut"]);
    let have = u(&case["leaves"]["nested.tar/docs/guide.txt"]) as usize;
    std::fs::write(&cut, truncated(&fixture("nested.tar.gz"), n)).unwrap();
    let mut f = Failures::default();

    let run = pparse(["tree".as_ref(), cut.as_os_str()]);
    if run.code != 1 || run.stderr.is_empty() {
        f.push(format!(
            "tree of a truncated copy: exit {} (expected 1), stderr {:?}",
            run.code,
            run.stderr_text()
        ));
    }
    let run = pparse([
        "cat".as_ref(),
        cut.as_os_str(),
        "nested.tar/docs/guide.txt".as_ref(),
    ]);
    let src = fixture("src/nested/docs/guide.txt");
    if run.code != 1 || run.stdout != src[..have] {
        f.push(format!(
            "cat of a cut-off member: exit {} (expected 1), {} bytes (expected the {have} recoverable)",
            run.code,
            run.stdout.len()
        ));
    }
    let run = pparse([
        "cat".as_ref(),
        cut.as_os_str(),
        "nested.tar/README.md".as_ref(),
    ]);
    if run.code != 0 || run.stdout != fixture("src/nested/README.md") {
        f.push(format!(
            "cat of a whole member of a truncated copy: exit {} (expected 0), {} bytes",
            run.code,
            run.stdout.len()
        ));
    }
    let out = tmp.path().join("out");
    let run = pparse([
        "extract".as_ref(),
        cut.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    let written = std::fs::read(out.join("nested.tar/docs/guide.txt")).unwrap_or_default();
    if run.code != 1 || written != src[..have] {
        f.push(format!(
            "extract of a truncated copy: exit {} (expected 1), guide.txt has {} bytes (expected {have})",
            run.code,
            written.len()
        ));
    }
    f.check("exit 1");
}

/// Exit 2 for a missing file and for a PATH that names nothing, with a
/// message on stderr and nothing on stdout.
#[test]
fn exit_2_for_missing_file_and_bad_path() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let missing = tmp.path().join("no-such-file.tar.gz");
    let file = fixture_path("nested.tar.gz");
    let out = tmp.path().join("out");
    let m = missing.as_os_str();
    let fl = file.as_os_str();
    let cases: Vec<Vec<&std::ffi::OsStr>> = vec![
        vec!["tree".as_ref(), m],
        vec!["tree".as_ref(), m, "--json".as_ref()],
        vec!["cat".as_ref(), m, "nested.tar/README.md".as_ref()],
        vec!["nodes".as_ref(), m],
        vec!["extract".as_ref(), m, "--out".as_ref(), out.as_os_str()],
        vec!["cat".as_ref(), fl, "nested.tar/no/such/member".as_ref()],
        vec!["cat".as_ref(), fl, "nested.tar/README.mdx".as_ref()],
        vec!["nodes".as_ref(), fl, "nested.tar/nope".as_ref()],
        vec![
            "extract".as_ref(),
            fl,
            "nope.tar".as_ref(),
            "--out".as_ref(),
            out.as_os_str(),
        ],
        vec!["tree".as_ref()],
        vec!["frobnicate".as_ref(), fl],
    ];
    let mut f = Failures::default();
    for args in cases {
        let run = pparse(&args);
        if run.code != 2 || run.stderr.is_empty() || !run.stdout.is_empty() {
            f.push(format!(
                "pparse {args:?}: exit {} (expected 2), stdout {} bytes, stderr {:?}",
                run.code,
                run.stdout.len(),
                run.stderr_text()
            ));
        }
    }
    f.check("exit 2");
}

/// `cat FILE PATH` writes exactly the source bytes of every leaf, exit 0.
#[test]
fn cat_every_leaf() {
    let mut f = Failures::default();
    for name in [
        "nested.tar.gz",
        "gnu.tar",
        "dd_stored.zip",
        "nested_stored.zip",
    ] {
        let file = fixture_path(name);
        for leaf in leaves(name) {
            let run = pparse(["cat".as_ref(), file.as_os_str(), leaf.path.as_ref()]);
            let want = source_bytes(&leaf.source);
            if run.code != 0 || run.stdout != want {
                f.push(format!(
                    "pparse cat {name} {:?}: exit {}, {} bytes (expected {}), equal: {}; stderr {:?}",
                    leaf.path,
                    run.code,
                    run.stdout.len(),
                    want.len(),
                    run.stdout == want,
                    run.stderr_text()
                ));
            }
        }
    }
    f.check("cat");
}

/// Checks `nodes --json` nodes: the docs/contract.md keys, `start <= end <= size`,
/// children inside their parent. Returns the deepest level seen.
fn check_nodes(
    nodes: &[Value],
    lo: u64,
    hi: u64,
    level: usize,
    f: &mut Failures,
    where_: &str,
) -> usize {
    let mut deepest = level;
    for n in nodes {
        for key in ["name", "kind", "start", "end", "children"] {
            if n.get(key).is_none() {
                f.push(format!("{where_}: node lacks {key:?}: {}", brief(n)));
                return deepest;
            }
        }
        let (Some(name), Some(start), Some(end), Some(kids)) = (
            n["name"].as_str(),
            n["start"].as_u64(),
            n["end"].as_u64(),
            n["children"].as_array(),
        ) else {
            f.push(format!("{where_}: mistyped node: {}", brief(n)));
            continue;
        };
        if !(lo <= start && start <= end && end <= hi) {
            f.push(format!(
                "{where_}: node {name:?} {start}..{end} is outside its parent's {lo}..{hi}"
            ));
        }
        if let Some(st) = n.get("status")
            && !st.as_str().is_some_and(|s| STATUSES.contains(&s))
        {
            f.push(format!("{where_}: node {name:?} has status {st}"));
        }
        if !kids.is_empty() {
            let w = format!("{where_}/{name}");
            deepest = deepest.max(check_nodes(kids, start, end, level + 1, f, &w));
        }
    }
    deepest
}

/// `nodes FILE nested.tar --json --depth 3`: node keys, ranges within the
/// extraction and nested in their parents, three levels deep.
#[test]
fn nodes_json_nested_tar() {
    let file = fixture_path("nested.tar.gz");
    let mut f = Failures::default();
    let size = u(&archive("nested.tar.gz")["decoded_size"]);
    let run = pparse([
        "nodes".as_ref(),
        file.as_os_str(),
        "nested.tar".as_ref(),
        "--json".as_ref(),
        "--depth".as_ref(),
        "3".as_ref(),
    ]);
    assert_eq!(run.code, 0, "stderr: {}", run.stderr_text());
    let v: Value = serde_json::from_slice(&run.stdout).expect("nodes --json is JSON");
    // One root object: the extraction, its nodes as children.
    assert_eq!(
        (&v["name"], &v["kind"], &v["parser"], &v["start"], &v["end"]),
        (
            &Value::from("nested.tar"),
            &Value::from("extraction"),
            &Value::from("tar"),
            &Value::from(0),
            &Value::from(size)
        )
    );
    let nodes = v["children"].as_array().expect("nodes --json has children");
    // One entry node per tar member, plus the end-of-archive marker.
    let members = tar_members("nested.tar.gz");
    let entries: Vec<&Value> = nodes.iter().filter(|n| n["kind"] == "entry").collect();
    if entries.len() != members.len() {
        f.push(format!(
            "{} entry nodes, expected {}",
            entries.len(),
            members.len()
        ));
    }
    for (n, m) in entries.iter().zip(&members) {
        if n["start"].as_u64() != Some(m.header_offset) || n["end"].as_u64() != Some(m.end()) {
            f.push(format!(
                "entry node {} is {}..{}, member {:?} spans {}..{}",
                n["name"],
                n["start"],
                n["end"],
                m.name,
                m.header_offset,
                m.end()
            ));
        }
    }
    let deepest = check_nodes(nodes, 0, size, 1, &mut f, "nested.tar");
    if deepest != 3 {
        f.push(format!("--depth 3 gave {deepest} levels"));
    }
    f.check("nodes --json");
}

/// Runs `extract nested.tar.gz --out DIR` with `extra` arguments into a
/// new temporary folder (kept while the first value lives).
fn extract_nested(extra: &[&str]) -> (tempfile::TempDir, std::path::PathBuf, Run) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("dir");
    let mut args: Vec<std::ffi::OsString> = vec![
        "extract".into(),
        fixture_path("nested.tar.gz").into(),
        "--out".into(),
        out.clone().into(),
    ];
    args.extend(extra.iter().map(|a| a.into()));
    let run = pparse(args);
    (tmp, out, run)
}

/// `extract nested.tar.gz --out DIR` writes every leaf's bytes to
/// DIR/<PATH>, exit 0.
#[test]
fn extract_nested_writes_every_leaf() {
    let (_tmp, out, run) = extract_nested(&[]);
    let mut f = Failures::default();
    if run.code != 0 {
        f.push(format!(
            "exit {} (expected 0); stderr {}",
            run.code,
            run.stderr_text()
        ));
    }
    for leaf in leaves("nested.tar.gz") {
        let p = out.join(Path::new(&leaf.path));
        match std::fs::read(&p) {
            Ok(b) if b == source_bytes(&leaf.source) => {}
            Ok(b) => f.push(format!(
                "{}: {} bytes, expected its {} source bytes",
                leaf.path,
                b.len(),
                leaf.size
            )),
            Err(e) => f.push(format!("{}: {e}", p.display())),
        }
    }
    f.check("extract nested.tar.gz");
}

/// `--keep-containers` writes a zip held in a tar as the zip file it is,
/// byte for byte what Python's tarfile reads, and not what it holds.
#[test]
fn extract_keep_containers_writes_the_inner_zip_as_a_file() {
    let (_tmp, out, run) = extract_nested(&["--keep-containers"]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let want = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sys,tarfile\n\
             t = tarfile.open(sys.argv[1])\n\
             sys.stdout.buffer.write(t.extractfile('docs/inner.zip').read())",
        )
        .arg(fixture_path("nested.tar.gz"))
        .output()
        .expect("python3 runs");
    assert!(want.status.success());
    let zip = walk_files(&out)
        .into_iter()
        .find(|p| p.ends_with("docs/inner.zip"))
        .expect("docs/inner.zip written");
    assert!(zip.is_file(), "{}", zip.display());
    assert_eq!(std::fs::read(&zip).unwrap(), want.stdout);
    // What the zip holds is not written, the tar's other members are.
    let files = walk_files(&out);
    assert!(
        !files
            .iter()
            .any(|p| p.to_string_lossy().contains("inner.zip/")),
        "{files:?}"
    );
    assert!(
        files.iter().any(|p| p.ends_with("docs/guide.txt")),
        "{files:?}"
    );
}

/// Every regular file under `dir`.
fn walk_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// The subcommands `pparse --help` lists under "Commands:".
fn commands_in_help() -> Vec<String> {
    let help = pparse(["--help"]).stdout_text();
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .map(str::to_string)
        .collect()
}

/// `pparse` alone is a usage error (exit 2) that lists every command, each
/// with its line of description, not a few of them.
#[test]
fn pparse_alone_lists_every_command() {
    let run = pparse(Vec::<&str>::new());
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty());
    let err = run.stderr_text();
    let commands = commands_in_help();
    assert!(commands.len() >= 9, "{commands:?}");
    for c in &commands {
        let line = err
            .lines()
            .find(|l| l.split_whitespace().next() == Some(c.as_str()))
            .unwrap_or_else(|| panic!("{c} is not listed:\n{err}"));
        // The name, then words saying what it does.
        assert!(line.split_whitespace().count() > 3, "{line}");
    }
    assert!(err.contains("pparse FILE"), "{err}");
}

/// Runs `pparse ARGS` expecting a usage error: exit 2, nothing on stdout,
/// none of clap's misleading words; gives stderr.
fn usage_error(args: &[&std::ffi::OsStr]) -> String {
    let run = pparse(args);
    let err = run.stderr_text();
    assert_eq!(run.code, 2, "{args:?}: {err}");
    assert!(run.stdout.is_empty(), "{args:?}");
    for clap_words in ["cannot be used with", "tip:", "unexpected argument"] {
        assert!(!err.contains(clap_words), "{args:?}: {err}");
    }
    err
}

/// `--theme` given with a command: it is the explorer's option, said so
/// in words, wherever it is on the line.
#[test]
fn theme_with_a_command_says_it_is_for_the_explorer() {
    let f = fixture_path("nested.tar.gz");
    let f = f.as_os_str();
    for args in [
        vec!["--theme".as_ref(), "light".as_ref(), "tree".as_ref(), f],
        vec!["tree".as_ref(), f, "--theme".as_ref(), "light".as_ref()],
    ] {
        let err = usage_error(&args);
        assert!(
            err.contains("--theme is for the explorer (`pparse --theme light FILE`)")
                && err.contains("`pparse tree` does not take it"),
            "{args:?}: {err}"
        );
    }
}

/// A negative or wrong number for a numeric option gets a plain message
/// naming what the option takes; an option of another command names the
/// command that takes it.
#[test]
fn numeric_options_say_what_they_take() {
    let f = fixture_path("nested.tar.gz");
    let f = f.as_os_str();
    let cases: [(Vec<&std::ffi::OsStr>, &str); 5] = [
        (
            vec!["nodes".as_ref(), "--depth".as_ref(), "-1".as_ref(), f],
            "--depth takes a number of levels, 0 or more, not \"-1\"",
        ),
        (
            vec!["nodes".as_ref(), f, "--depth".as_ref(), "two".as_ref()],
            "--depth takes a number of levels, 0 or more, not \"two\"",
        ),
        (
            vec!["tree".as_ref(), "--depth".as_ref(), "-1".as_ref(), f],
            "`pparse tree` does not take --depth; `pparse nodes` does",
        ),
        (
            vec!["tree".as_ref(), "--cache-size".as_ref(), "-1".as_ref(), f],
            "--cache-size takes a size such as 64M or 1G, not \"-1\"",
        ),
        (
            vec!["tree".as_ref(), f, "--cache-size".as_ref(), "1K".as_ref()],
            "the cache needs at least 1M",
        ),
    ];
    for (args, want) in cases {
        let err = usage_error(&args);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // A number that is right still works.
    let run = pparse(["nodes".as_ref(), f, "--depth".as_ref(), "0".as_ref()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
}

/// `tree DIR` parses every file of the folder. Its progress goes to
/// stderr only on a terminal (never into a pipe or a file), unless
/// PPARSE_PROGRESS=1 asks for it as lines; PPARSE_PROGRESS=0 keeps it off.
#[test]
fn folder_progress_only_where_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("models");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("a.txt"), b"hello\n").unwrap();
    std::fs::write(dir.join("b.bin"), vec![7u8; 3000]).unwrap();
    std::fs::write(dir.join("sub/c.tar.gz"), fixture("nested.tar.gz")).unwrap();
    let d = dir.as_os_str();
    let quiet = pparse(["tree".as_ref(), d, "--no-index".as_ref()]);
    assert_eq!(quiet.code, 0, "{}", quiet.stderr_text());
    // Every file is listed, what the archive holds too.
    let out = quiet.stdout_text();
    for name in ["a.txt", "b.bin", "c.tar.gz", "nested.tar", "deep.zip"] {
        assert!(out.contains(name), "{name}: {out}");
    }
    assert!(quiet.stderr.is_empty(), "{}", quiet.stderr_text());
    let off = pparse_env(
        ["tree".as_ref(), d, "--no-index".as_ref()],
        &[("PPARSE_PROGRESS", "0")],
    );
    assert!(off.stderr.is_empty(), "{}", off.stderr_text());
    let on = pparse_env(
        ["tree".as_ref(), d, "--no-index".as_ref()],
        &[("PPARSE_PROGRESS", "1")],
    );
    assert_eq!(on.stdout, quiet.stdout);
    let err = on.stderr_text();
    let last = err.lines().last().unwrap_or_default();
    let size = 6 + 3000 + fixture("nested.tar.gz").len() as u64;
    assert!(
        last.starts_with("pparse: reading models: 3 of 3 files, ")
            && last.contains(&format!("of {}", pparse::util::human(size))),
        "{err}"
    );
    assert!(!err.contains('\r'), "{err:?}");
}

/// The README speaks to its readers: every path of the repository it names
/// (`docs/…`, `peers/…`, `fixtures/…`) is there, every section it points
/// to (`see "Known limits"`) is one of its headings, and no word of the
/// project's own bookkeeping (a fixture's seed number) is left in it.
#[test]
fn readme_cites_only_what_the_repository_holds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let mut f = Failures::default();
    const TOP: [&str; 11] = [
        "docs/",
        "fixtures/",
        "peers/",
        "proto/",
        "src/",
        "tests/",
        "themes/",
        "fuzz/",
        "benches/",
        "examples/",
        ".ci/",
    ];
    for (i, quoted) in readme.split('`').enumerate() {
        if i % 2 == 1
            && !quoted.contains(char::is_whitespace)
            && TOP.iter().any(|t| quoted.starts_with(t))
            && !root.join(quoted.trim_end_matches('/')).exists()
        {
            f.push(format!("README names {quoted}, which the repository lacks"));
        }
    }
    let flat = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let headings: Vec<&str> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("## ").or_else(|| l.strip_prefix("### ")))
        .collect();
    for part in flat.split("see \"").skip(1) {
        let title = part.split('"').next().unwrap_or_default();
        if !headings.contains(&title) {
            f.push(format!(
                "README points to a section {title:?} it does not have"
            ));
        }
    }
    for word in ["seed 0", "seed 1", "the recovery report"] {
        if flat.contains(word) {
            f.push(format!("README says {word:?}"));
        }
    }
    f.check("README citations");
}

/// Every JSON string in `v` (keys aside) that is itself a quoted string.
fn quoted_twice(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') => {
            out.push(s.clone());
        }
        Value::Array(a) => a.iter().for_each(|x| quoted_twice(x, out)),
        // W&B keeps values as JSON text: the string `"tiny"` is the value.
        Value::Object(o) if o.get("name").is_some_and(|n| n == "value_json") => {}
        Value::Object(o) => o.values().for_each(|x| quoted_twice(x, out)),
        _ => {}
    }
}

/// No `--json` output writes a string as its quoted form (`"\"pytorch\""`):
/// strings read from files are JSON strings of themselves, in every
/// command's output, on files of every kind that holds strings.
#[test]
fn no_json_output_quotes_its_strings_twice() {
    let cases: [(&str, &str, &[&str]); 10] = [
        ("tree", "nested.tar.gz", &[]),
        ("nodes", "onnx/attrs.onnx", &["--depth", "8"]),
        ("nodes", "onnx/tensors.onnx", &["--depth", "5"]),
        ("nodes", "wandb/current-core.wandb", &["--depth", "6"]),
        ("nodes", "json/nested.json", &["--depth", "6"]),
        ("tensors", "onnx/tensors.onnx", &[]),
        ("tensors", "torch/dtypes.pt", &[]),
        ("records", "wandb/current-core.wandb", &[]),
        ("pickle", "pickle/hand_strings.pkl", &[]),
        ("ir", "paddle/b2-cnn.txt", &[]),
    ];
    let mut f = Failures::default();
    for (cmd, file, extra) in cases {
        let path = fixture_path(file);
        let mut args: Vec<&std::ffi::OsStr> = vec![cmd.as_ref(), path.as_os_str()];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        args.push("--json".as_ref());
        let run = pparse(&args);
        let text = run.stdout_text();
        // `records --json` is JSON Lines; the others one value.
        let values: Vec<Value> = serde_json::Deserializer::from_str(&text)
            .into_iter()
            .map(|v| v.unwrap_or_else(|e| panic!("{cmd} {file}: {e}")))
            .collect();
        assert!(!values.is_empty(), "{cmd} {file}: {}", run.stderr_text());
        let mut bad = Vec::new();
        values.iter().for_each(|v| quoted_twice(v, &mut bad));
        if !bad.is_empty() {
            f.push(format!("{cmd} {file}: {bad:?}"));
        }
    }
    f.check("strings quoted twice");
}

/// The paths of a `tree --json` object's extractions below the root, in
/// tree order.
fn tree_paths(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![v];
    while let Some(n) = todo.pop() {
        if let Some(p) = n["path"].as_str().filter(|p| !p.is_empty()) {
            out.push(p.to_string());
        }
        if let Some(c) = n["children"].as_array() {
            todo.extend(c.iter().rev());
        }
    }
    out
}

/// A backup made with `tar -C dir -cf backup.tar .` names its members
/// `./a/x`; `tar x` writes `a/x`, and so every command names, finds and
/// writes them as `a/x` (the old spelling `./a/x` is still found), while
/// the node tree keeps the name as the header holds it.
#[test]
fn a_backup_of_dot_names_each_member_once() {
    let (tmp, tar) = dot_tar();
    let run = pparse(["tree".as_ref(), tar.as_os_str(), "--json".as_ref()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let v: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(tree_paths(&v), ["a/", "a/x", "a/z", "b/", "b/y"]);
    // The hard link names its target as the member is named.
    let run = pparse(["tree".as_ref(), tar.as_os_str()]);
    assert!(
        run.stdout_text().contains("a/z  hard link -> a/x"),
        "{}",
        run.stdout_text()
    );
    for (name, bytes) in DOT_TAR_FILES {
        for spelling in [
            name.to_string(),
            format!("./{name}"),
            name.replace('/', "//./"),
        ] {
            let run = pparse(["cat".as_ref(), tar.as_os_str(), spelling.as_ref()]);
            assert_eq!(run.code, 0, "cat {spelling}: {}", run.stderr_text());
            assert_eq!(run.stdout, *bytes, "cat {spelling}");
        }
    }
    // The header node keeps the raw name.
    let run = pparse(["nodes".as_ref(), tar.as_os_str(), "--json".as_ref()]);
    let v: Value = serde_json::from_slice(&run.stdout).unwrap();
    let names: Vec<&str> = v["children"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "entry")
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["./", "./a/", "./a/x", "./a/z", "./b/", "./b/y"]);
    // `extract` writes what `tar x` writes, at the same paths.
    let out = tmp.path().join("out");
    let run = pparse([
        "extract".as_ref(),
        tar.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let mut files: Vec<String> = walk_files(&out)
        .iter()
        .map(|p| p.strip_prefix(&out).unwrap().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["a/x", "b/y"]);
    for (name, bytes) in DOT_TAR_FILES {
        assert_eq!(std::fs::read(out.join(name)).unwrap(), *bytes);
    }
}

/// GNU tar `-P` keeps a leading `/` in member names; `tar x` strips it,
/// saying so, and so does pparse (a note, not damage).
#[test]
fn a_leading_slash_is_dropped_with_a_note() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("f.txt");
    std::fs::write(&file, b"absolute\n").unwrap();
    let tar = tmp.path().join("abs.tar");
    let ok = std::process::Command::new("tar")
        .arg("-P")
        .arg("-cf")
        .arg(&tar)
        .arg(&file)
        .status()
        .expect("GNU tar runs");
    assert!(ok.success());
    let stored = file.to_string_lossy().into_owned();
    assert!(stored.starts_with('/'));
    let run = pparse(["tree".as_ref(), tar.as_os_str(), "--json".as_ref()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let v: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(tree_paths(&v), [&stored[1..]]);
    let notes = v["notes"].to_string();
    assert!(notes.contains("leading `/`"), "{notes}");
    for spelling in [&stored[1..], &stored] {
        let run = pparse(["cat".as_ref(), tar.as_os_str(), spelling.as_ref()]);
        assert_eq!(run.code, 0, "cat {spelling}: {}", run.stderr_text());
        assert_eq!(run.stdout, b"absolute\n");
    }
}

/// Python's zipfile writes entry names as given: `./x`, `/abs/y`, and a
/// `./` directory. They are named as `unzip` writes them.
#[test]
fn zip_entries_named_with_dots_or_a_root_are_named_once() {
    let tmp = tempfile::tempdir().unwrap();
    let zip = tmp.path().join("dots.zip");
    let ok = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, zipfile\n\
             with zipfile.ZipFile(sys.argv[1], 'w') as z:\n\
             \x20   z.writestr('./', b'')\n\
             \x20   z.writestr('./x', b'x at the top\\n')\n\
             \x20   z.writestr('./d//y', b'y in d\\n', zipfile.ZIP_DEFLATED)\n\
             \x20   z.writestr('/abs/z', b'z\\n')\n\
             print(*zipfile.ZipFile(sys.argv[1]).namelist())\n",
        )
        .arg(&zip)
        .output()
        .expect("python3 runs");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&ok.stdout).trim(),
        "./ ./x ./d//y /abs/z"
    );
    let run = pparse(["tree".as_ref(), zip.as_os_str(), "--json".as_ref()]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let v: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(tree_paths(&v), ["x", "d/y", "abs/z"]);
    assert!(v["notes"].to_string().contains("leading `/`"), "{v}");
    for (spelling, bytes) in [
        ("x", &b"x at the top\n"[..]),
        ("./x", b"x at the top\n"),
        ("d/y", b"y in d\n"),
        ("./d//y", b"y in d\n"),
        ("abs/z", b"z\n"),
        ("/abs/z", b"z\n"),
    ] {
        let run = pparse(["cat".as_ref(), zip.as_os_str(), spelling.as_ref()]);
        assert_eq!(run.code, 0, "cat {spelling}: {}", run.stderr_text());
        assert_eq!(run.stdout, bytes, "cat {spelling}");
    }
}

/// `--trace-io FILE`: Chrome trace-event JSON of the command's reads,
/// decodes, cache hits and waits (docs/contract.md), which add up to what
/// `--io-stats` counts.
#[test]
fn trace_io_writes_chrome_trace_events() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.json");
    let file = fixture_path("nested.tar.gz");
    let run = pparse([
        "tree".as_ref(),
        "--no-index".as_ref(),
        "--json".as_ref(),
        "--io-stats".as_ref(),
        "--trace-io".as_ref(),
        trace.as_os_str(),
        file.as_os_str(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().expect("traceEvents");
    let named: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "M")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(named.contains(&"pparse-engine"), "{named:?}");
    let mut sums = std::collections::BTreeMap::<&str, u64>::new();
    for e in events.iter().filter(|e| e["ph"] != "M") {
        for k in ["pid", "tid", "ts"] {
            assert!(e[k].is_number(), "{k} in {e}");
        }
        let name = e["name"].as_str().unwrap();
        match e["ph"].as_str().unwrap() {
            "X" => assert!(e["dur"].as_f64().unwrap() >= 0.0, "{e}"),
            "i" => assert!(e["dur"].is_null(), "{e}"),
            ph => panic!("phase {ph} in {e}"),
        }
        *sums.entry(name).or_default() += e["args"]["bytes"].as_u64().unwrap_or(0);
    }
    // The same work as --io-stats counts.
    let io = io_counts(&run.stderr_text());
    assert_eq!(
        sums.get("read").copied().unwrap_or(0),
        io["file_read"].as_u64().unwrap()
    );
    assert_eq!(
        sums.get("decode").copied().unwrap_or(0),
        io["decoded"].as_u64().unwrap()
    );
    assert_eq!(
        sums.get("cache hit").copied().unwrap_or(0),
        io["from_cache"].as_u64().unwrap()
    );
    assert!(sums["decode"] > 0, "{sums:?}");
    // A trace that cannot be written is a usage error.
    let bad = pparse([
        "tree".as_ref(),
        "--trace-io".as_ref(),
        dir.path().join("no/such/dir/t.json").as_os_str(),
        file.as_os_str(),
    ]);
    assert_eq!(bad.code, 2, "{}", bad.stderr_text());
}

// ---------------------------------------------------------------------------
// Guard rails (issue 36, item 5)
// ---------------------------------------------------------------------------

#[test]
fn an_unknown_record_type_names_the_known_ones() {
    let log = std::fs::read_dir(fixture_path("wandb"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "wandb"))
        .expect("a .wandb fixture");
    let run = pparse(["records", "--type", "histroy", log.to_str().unwrap()]);
    assert_eq!(run.code, 2, "{}", run.stderr_text());
    assert!(run.stdout.is_empty());
    let err = run.stderr_text();
    assert!(err.contains("--type histroy: no such record type"), "{err}");
    assert!(err.contains("history") && err.contains("summary"), "{err}");
    // A known type, and one newer than the schema, are taken.
    for t in ["history", "#77"] {
        let run = pparse(["records", "--type", t, log.to_str().unwrap()]);
        assert!(run.code == 0 || run.code == 1, "{t}: {}", run.stderr_text());
    }
}

#[test]
fn a_file_without_what_the_command_shows_exits_4_for_every_command() {
    let tar = fixture_path("nested.tar.gz");
    for (cmd, says) in [
        ("tensors", "no tensors found"),
        ("records", "not a W&B log"),
        ("pickle", "not a pickle"),
        ("ir", "no program found"),
    ] {
        for json in [false, true] {
            let mut args = vec![cmd, tar.to_str().unwrap()];
            if json && cmd != "pickle" {
                args.push("--json");
            }
            let run = pparse(args.iter().copied());
            assert_eq!(run.code, 4, "{cmd}: {}", run.stderr_text());
            assert!(
                run.stderr_text().contains(says),
                "{cmd}: {}",
                run.stderr_text()
            );
        }
    }
    // A file that is not there is still 2, and one that has them 0.
    assert_eq!(pparse(["tensors", "/no/such/file"]).code, 2);
    let st = std::fs::read_dir(fixture_path("safetensors"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .unwrap();
    assert_eq!(pparse(["tensors", st.to_str().unwrap()]).code, 0);
}

#[test]
fn extract_into_a_folder_holding_the_files_stops_skips_or_renames() {
    let (dir, out, first) = extract_nested(&[]);
    assert_eq!(first.code, 0, "{}", first.stderr_text());
    let files = |out: &Path| walk_files(out).len();
    let n = files(&out);
    assert!(n > 5);
    let readme = out.join("nested.tar/README.md");
    std::fs::write(&readme, b"the user's own").unwrap();
    let again = |extra: &[&str]| {
        let mut args: Vec<std::ffi::OsString> = vec![
            "extract".into(),
            fixture_path("nested.tar.gz").into(),
            "--out".into(),
            out.clone().into(),
        ];
        args.extend(extra.iter().map(|a| a.into()));
        pparse(args)
    };
    // Stops before writing anything, naming what is in the way, having
    // read no member to find out (the first run's index serves the names).
    let run = again(&["--io-stats"]);
    assert_eq!(run.code, 2, "{}", run.stderr_text());
    assert!(
        run.stderr_text().contains("decoded 0 B, re-decoded 0 B"),
        "{}",
        run.stderr_text()
    );
    let err = run.stderr_text();
    assert!(
        err.contains(&format!("{n} files to write are already in")),
        "{err}"
    );
    assert!(
        err.contains("nothing was written") && err.contains("--skip-existing"),
        "{err}"
    );
    assert!(err.contains("README.md exists"), "{err}");
    assert_eq!(files(&out), n);
    // Leaves them, the user's file untouched.
    let run = again(&["--skip-existing"]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert!(
        run.stderr_text().contains(&format!("{n} files already in")),
        "{}",
        run.stderr_text()
    );
    assert_eq!(files(&out), n);
    assert_eq!(std::fs::read(&readme).unwrap(), b"the user's own");
    // Writes beside them, and says how many.
    let run = again(&["--rename"]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert!(
        run.stderr_text()
            .contains(&format!("{n} files were written beside")),
        "{}",
        run.stderr_text()
    );
    assert_eq!(files(&out), 2 * n);
    assert_eq!(std::fs::read(&readme).unwrap(), b"the user's own");
    assert!(out.join("nested.tar/README~1.md").exists());
    // Both at once is a usage error.
    assert_eq!(again(&["--rename", "--skip-existing"]).code, 2);
    drop(dir);
}

#[test]
fn an_unknown_command_says_so_and_lists_the_commands() {
    for args in [&["frobnicate", "x.tar"][..], &["frobnicate"]] {
        let run = pparse(args.iter().copied());
        assert_eq!(run.code, 2, "{args:?}");
        let err = run.stderr_text();
        assert!(
            err.contains("frobnicate: not a command, nor a file that exists"),
            "{err}"
        );
        assert!(err.contains("tree, nodes, cat"), "{err}");
        assert!(!err.contains("cannot be used with"), "{err}");
    }
}

// ---------------------------------------------------------------------------
// Damage at a glance (issue 36, item 2)
// ---------------------------------------------------------------------------

/// `nested.tar.gz` with its gzip CRC-32 flipped: every member of the tar
/// inherits one failed check.
fn crc_flipped(dir: &Path) -> std::path::PathBuf {
    let mut gz = fixture("nested.tar.gz");
    let at = gz.len() - 6;
    gz[at] ^= 0xff;
    let path = dir.join("crc.tar.gz");
    std::fs::write(&path, gz).unwrap();
    path
}

#[test]
fn a_root_cause_is_said_once_with_how_many_inherit_it() {
    let tmp = tempfile::tempdir().unwrap();
    let file = crc_flipped(tmp.path());
    let run = pparse(["tree", "--no-index", file.to_str().unwrap()]);
    assert_eq!(run.code, 1, "{}", run.stderr_text());
    let json = pparse(["tree", "--no-index", "--json", file.to_str().unwrap()]);
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let tar = &v["children"][0];
    assert_eq!(tar["name"], "nested.tar");
    let mut below = 0;
    let mut stack: Vec<&Value> = tar["children"].as_array().unwrap().iter().collect();
    while let Some(n) = stack.pop() {
        // --json keeps each member's whole chain (a zip entry its own CRC
        // proves inherits nothing).
        if let Some(reason) = n["damage"][0]["reason"].as_str() {
            assert!(reason.contains("member #1 fails its check"), "{reason}");
            below += 1;
        }
        stack.extend(n["children"].as_array().unwrap());
    }
    assert!(below > 10);
    let text = run.stdout_text();
    let cause = "member #1 fails its check";
    assert_eq!(text.matches(cause).count(), 1, "the cause once:\n{text}");
    let tar_line = text
        .lines()
        .find(|l| l.contains("nested.tar  [tar]"))
        .unwrap();
    assert!(
        tar_line.ends_with(&format!("({below} extractions inherit it)")),
        "{tar_line}"
    );
    let readme = text.lines().find(|l| l.contains("README.md")).unwrap();
    assert!(
        readme
            .ends_with("UNVERIFIED: unverified at 0x0..0x2ee0: inherits the damage of nested.tar"),
        "{readme}"
    );
    // On stderr too: the gzip stream's CRC and the tar's failed check,
    // nothing repeated per member.
    let err = run.stderr_text();
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.contains(&format!("({below} extractions inherit it)")),
        "{err}"
    );
    // One member alone still says its whole chain.
    let cat = pparse([
        "cat",
        "--no-index",
        file.to_str().unwrap(),
        "nested.tar/README.md",
    ]);
    assert!(
        cat.stderr_text()
            .contains("lie in a damaged span of nested.tar: member #1 fails its check"),
        "{}",
        cat.stderr_text()
    );
}

#[test]
fn tree_damaged_shows_what_is_not_complete_under_its_containers() {
    let tmp = tempfile::tempdir().unwrap();
    let cut = tmp.path().join("cut.tar.gz");
    let gz = fixture("nested.tar.gz");
    std::fs::write(&cut, &gz[..60_000]).unwrap();
    let file = cut.to_str().unwrap();
    let all: Value =
        serde_json::from_slice(&pparse(["tree", "--no-index", "--json", file]).stdout).unwrap();
    let only: Value =
        serde_json::from_slice(&pparse(["tree", "--no-index", "--json", "--damaged", file]).stdout)
            .unwrap();
    // What --damaged keeps: every extraction not complete, and its containers.
    fn keep(n: &Value, out: &mut Vec<String>) -> bool {
        let mut any = n["status"] != "complete";
        let at = out.len();
        out.push(n["path"].as_str().unwrap().to_string());
        for c in n["children"].as_array().unwrap() {
            any |= keep(c, out);
        }
        if !any {
            out.truncate(at);
        }
        any
    }
    fn paths(n: &Value, out: &mut Vec<String>) {
        out.push(n["path"].as_str().unwrap().to_string());
        for c in n["children"].as_array().unwrap() {
            paths(c, out);
        }
    }
    let (mut want, mut got) = (Vec::new(), Vec::new());
    keep(&all, &mut want);
    paths(&only, &mut got);
    assert_eq!(got, want);
    assert!(got.len() >= 3 && got.len() < 10, "{got:?}");
    let text = pparse(["tree", "--no-index", "--damaged", file]);
    assert_eq!(text.code, 1);
    assert_eq!(
        text.stdout_text().lines().count(),
        got.len(),
        "{}",
        text.stdout_text()
    );
    assert!(
        text.stdout_text()
            .lines()
            .last()
            .unwrap()
            .contains("└─ chapter1.txt"),
        "{}",
        text.stdout_text()
    );
    // An intact file: the root alone.
    let intact = pparse([
        "tree",
        "--no-index",
        "--damaged",
        fixture_path("nested.tar.gz").to_str().unwrap(),
    ]);
    assert_eq!(intact.code, 0);
    assert_eq!(intact.stdout_text().lines().count(), 1);
}
