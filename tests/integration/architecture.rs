//! The layers import downward only, and no two files import each other,
//! directly or through others (docs/architecture.md).
//!
//! Reads every source file of the workspace (the library, the explorer,
//! the command line, the Python crate and the fuzz targets, see [`CRATES`])
//! as one tree of modules: the library's at the top, each front end's
//! under its own name. Takes the paths each file names through `crate::`,
//! `super::` and the names of the crates it uses (and a `mod.rs` naming its
//! own submodules), maps each to the file that defines it, and checks the
//! ranks below and the absence of cycles in that graph. Comments, string
//! literals and `#[cfg(test)]` modules are left out: tests may reach
//! anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules from the bottom up; a module may import only from its
/// own rank or below (and within a rank, without cycles).
const LAYERS: &[&[&str]] = &[
    &["util", "chunked"],
    &["data"],
    &["status", "name", "unpack"],
    &["node"],
    &["extraction"],
    &["offer"],
    &["parsers"],
    &["engine", "index"],
    &["fs", "view"],
    &["report"],
    &["python", "fuzz"],
    &["tui"],
    &["cli"],
];

/// Where each crate's files are, the module its root stands for, and the
/// paths it names other crates' modules by (besides `super::`).
struct Crate {
    dir: &'static str,
    at: &'static [&'static str],
    roots: &'static [(&'static str, &'static [&'static str])],
}

const CRATES: &[Crate] = &[
    Crate {
        dir: "crates/pparse/src",
        at: &[],
        roots: &[("crate::", &[])],
    },
    Crate {
        dir: "crates/explorer/src",
        at: &["tui"],
        roots: &[("crate::", &["tui"]), ("pparse::", &[])],
    },
    Crate {
        dir: "src",
        at: &["cli"],
        roots: &[
            ("crate::", &["cli"]),
            ("pparse::", &[]),
            ("pparse_explorer::", &["tui"]),
        ],
    },
    Crate {
        dir: "python/src",
        at: &["python"],
        roots: &[("crate::", &["python"]), ("pparse::", &[])],
    },
    Crate {
        dir: "fuzz",
        at: &["fuzz"],
        roots: &[("crate::", &["fuzz"]), ("pparse::", &[])],
    },
];

fn module_of(path: &[&str]) -> Module {
    path.iter().map(|s| s.to_string()).collect()
}

type Module = Vec<String>;

fn rank(top: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&top))
}

fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut todo = vec![src.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                // The fuzz crate's build output and inputs hold no source.
                let name = p.file_name().unwrap_or_default();
                if !["target", "corpus", "artifacts", "coverage"]
                    .iter()
                    .any(|d| name == *d)
                {
                    todo.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(src).unwrap().with_extension("");
                let mut m: Module = rel.iter().map(|c| c.to_string_lossy().into()).collect();
                if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
                    m.pop();
                }
                out.insert(m, p);
            }
        }
    }
    out
}

/// The code of a file without comments, string and char literals, and
/// `#[cfg(test)]` items; `super::` inside inline modules is dropped (it
/// names this file).
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                i += if b[i] == b'\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    // Inline modules: `super` there is the file itself.
    let mut cleaned = String::new();
    let mut rest = out.as_str();
    while let Some(at) = find_inline_mod(rest) {
        cleaned.push_str(&rest[..at]);
        let body = &rest[at..];
        let mut depth = 0;
        let mut end = body.len();
        for (k, ch) in body.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        cleaned.push_str(&body[..end].replace("super::", "self_::"));
        rest = &body[end..];
    }
    cleaned.push_str(rest);
    cleaned
}

fn find_inline_mod(s: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(k) = s[from..].find("mod ") {
        let at = from + k;
        let before_ok = at == 0 || !s.as_bytes()[at - 1].is_ascii_alphanumeric();
        let after = &s[at + 4..];
        let name_len = after
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        if before_ok && name_len > 0 && after[name_len..].trim_start().starts_with('{') {
            return Some(at);
        }
        from = at + 4;
    }
    None
}

/// Paths named after `super::` or one of `roots` (`crate::`, another
/// crate's name), brace groups expanded.
fn paths(code: &str, here: &Module, is_mod_file: bool, roots: &[(&str, &[&str])]) -> Vec<Module> {
    let parent: Module = here[..here.len().saturating_sub(1)].to_vec();
    let mut out = Vec::new();
    let b = code.as_bytes();
    let roots = roots
        .iter()
        .map(|(r, base)| (*r, module_of(base)))
        .chain([("super::", parent)]);
    for (root, base) in roots {
        let mut from = 0;
        while let Some(k) = code[from..].find(root) {
            let at = from + k;
            from = at + root.len();
            if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_') {
                continue;
            }
            expand(&code[from..], base.clone(), &mut out);
        }
    }
    // A mod.rs naming its own submodules (`tar::FORMAT`).
    if is_mod_file {
        for (i, _) in code.match_indices("::") {
            let start = code[..i]
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |k| k + 1);
            if start > 0 && code[..start].ends_with("::") {
                continue;
            }
            let name = &code[start..i];
            if !name.is_empty() {
                let mut m = here.clone();
                m.push(name.to_string());
                out.push(m);
            }
        }
    }
    out
}

/// Reads one path (`a::b::{c, d::e}`) from the start of `s`.
fn expand(s: &str, base: Module, out: &mut Vec<Module>) {
    let mut m = base;
    let mut rest = s;
    loop {
        if let Some(inner) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = 0;
            for (k, ch) in inner.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' | ',' if depth == 1 => {
                        expand(inner[item..k].trim_start(), m.clone(), out);
                        item = k + 1;
                        if ch == '}' {
                            break;
                        }
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            return;
        }
        let len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if len > 0 {
            m.push(rest[..len].to_string());
            rest = &rest[len..];
        }
        match rest.strip_prefix("::") {
            Some(r) if len > 0 => rest = r,
            _ => {
                if !m.is_empty() {
                    out.push(m);
                }
                return;
            }
        }
    }
}

/// The file defining `path`: its longest prefix that is a module.
fn owner(path: &Module, mods: &BTreeMap<Module, PathBuf>) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| mods.contains_key(m))
}

fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let top = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut mods = BTreeMap::new();
    let mut roots = BTreeMap::new();
    for c in CRATES {
        for (m, p) in modules(&top.join(c.dir)) {
            let mut full = module_of(c.at);
            full.extend(m);
            roots.insert(p.clone(), c.roots);
            mods.insert(full, p);
        }
    }
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, p) in &mods {
        let text = std::fs::read_to_string(p).unwrap();
        let is_mod_file = ["mod.rs", "lib.rs", "main.rs"]
            .iter()
            .any(|f| p.ends_with(f));
        let e = edges.entry(m.clone()).or_default();
        for path in paths(&code(&text), m, is_mod_file, roots[p]) {
            if let Some(o) = owner(&path, &mods)
                && o != *m
                && !o.is_empty()
            {
                e.insert(o);
            }
        }
    }
    edges
}

/// Strongly connected components of more than one file.
fn cycles(g: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    // Kosaraju, iteratively: finish order on g, then components on g reversed.
    let nodes: Vec<&Module> = g.keys().collect();
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for &n in &nodes {
        if !seen.insert(n.clone()) {
            continue;
        }
        let mut stack = vec![(n, g[n].iter())];
        while let Some((v, it)) = stack.last_mut() {
            match it.next() {
                Some(w) if g.contains_key(w) && seen.insert(w.clone()) => {
                    let w = g.get_key_value(w).unwrap().0;
                    stack.push((w, g[w].iter()));
                }
                Some(_) => {}
                None => {
                    order.push((*v).clone());
                    stack.pop();
                }
            }
        }
    }
    let mut rev: BTreeMap<&Module, Vec<&Module>> = BTreeMap::new();
    for (a, bs) in g {
        for b in bs {
            rev.entry(b).or_default().push(a);
        }
    }
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for n in order.iter().rev() {
        if !done.insert(n.clone()) {
            continue;
        }
        let mut comp = vec![n.join("/")];
        let mut stack = vec![n];
        while let Some(v) = stack.pop() {
            for &w in rev.get(v).map(Vec::as_slice).unwrap_or_default() {
                if done.insert(w.clone()) {
                    comp.push(w.join("/"));
                    stack.push(w);
                }
            }
        }
        if comp.len() > 1 {
            comp.sort();
            out.push(comp);
        }
    }
    out.sort();
    out
}

#[test]
fn layers_import_downward_only() {
    let g = graph();
    let mut up = Vec::new();
    for (a, bs) in &g {
        for b in bs {
            let (Some(ra), Some(rb)) = (
                a.first().and_then(|m| rank(m)),
                b.first().and_then(|m| rank(m)),
            ) else {
                continue;
            };
            if ra < rb {
                up.push(format!("{} imports {}", a.join("/"), b.join("/")));
            }
        }
    }
    for top in g.keys().filter_map(|m| m.first()) {
        assert!(rank(top).is_some(), "module {top} is in no layer of LAYERS");
    }
    assert!(up.is_empty(), "upward imports:\n{}", up.join("\n"));
}

#[test]
fn no_two_files_import_each_other() {
    let found = cycles(&graph());
    assert!(found.is_empty(), "files that import each other: {found:#?}");
}

/// Format families below `parsers/`: what they hold is a format's own.
const FAMILIES: &[&str] = &["compress", "archive", "ml", "serial"];

/// The places above the parsers that may name a format module, each for a
/// reason no offer serves: the engine runs the carver over unclaimed bytes
/// and holds the session's protobuf schemas in its options; the file
/// system checks an index's member offsets against the tar or zip headers
/// before it trusts them.
const FORMAT_READERS: &[(&str, &str)] = &[
    ("engine/scheduler", "parsers/archive/carve"),
    ("engine", "parsers/serial/protobuf/schema"),
    ("fs/api", "parsers/archive/tar"),
    ("fs/api", "parsers/archive/zip"),
];

/// Views, reports and front ends reach a format through the registry and
/// its offers, never its internals (docs/architecture.md, "Adding a
/// format"); the fuzz targets check the readers piece by piece.
#[test]
fn formats_are_reached_through_their_offers() {
    let parsers = rank("parsers").unwrap();
    let mut found = Vec::new();
    for (a, bs) in &graph() {
        let Some(ra) = a.first().and_then(|m| rank(m)) else {
            continue;
        };
        if ra <= parsers || a.first().is_some_and(|m| m == "fuzz") {
            continue;
        }
        for b in bs {
            let inside = b.len() > 2 && b[0] == "parsers" && FAMILIES.contains(&b[1].as_str());
            let (a, b) = (a.join("/"), b.join("/"));
            if inside && !FORMAT_READERS.contains(&(a.as_str(), b.as_str())) {
                found.push(format!("{a} imports {b}"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "format internals named above the parsers:\n{}",
        found.join("\n")
    );
    // The rule sees what it must: each exception is an import that exists
    // (one that no longer does is taken off the list).
    let g = graph();
    for (a, b) in FORMAT_READERS {
        let (a, b) = (
            a.split('/').collect::<Vec<_>>(),
            b.split('/').collect::<Vec<_>>(),
        );
        assert!(
            g[&module_of(&a)].contains(&module_of(&b)),
            "{a:?} no longer imports {b:?}"
        );
    }
}

/// The checker itself finds what it must: an upward import and a cycle in
/// a small made-up tree, so the tests above cannot pass by seeing nothing.
#[test]
fn the_checker_sees_imports() {
    let here: Module = vec!["parsers".into(), "tar".into()];
    let code = code(
        "use crate::{data::{Range, Source}, view::tensors};\n// crate::tui::app\nuse super::api::Step;\nmod inner { use super::X; }",
    );
    let found = paths(&code, &here, false, &[("crate::", &[])]);
    let names: Vec<String> = found.iter().map(|m| m.join("/")).collect();
    assert!(names.contains(&"data/Range".to_string()), "{names:?}");
    assert!(names.contains(&"data/Source".to_string()), "{names:?}");
    assert!(names.contains(&"view/tensors".to_string()), "{names:?}");
    assert!(names.contains(&"parsers/api/Step".to_string()), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("tui")),
        "comments are code: {names:?}"
    );
    assert!(
        !names.iter().any(|n| n.ends_with("/X")),
        "inline super: {names:?}"
    );
    let mut g: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    let (a, b, c) = (
        vec!["a".to_string()],
        vec!["b".to_string()],
        vec!["c".to_string()],
    );
    g.entry(a.clone()).or_default().insert(b.clone());
    g.entry(b.clone()).or_default().insert(c.clone());
    g.entry(c.clone()).or_default().insert(a.clone());
    assert_eq!(cycles(&g), vec![vec!["a", "b", "c"]]);
    let real = graph();
    assert!(
        real[&module_of(&["parsers", "archive", "tar"])].contains(&module_of(&["parsers", "api"]))
    );
    // Each front end is read, by the names it gives the other crates.
    let cli_ir = real[&module_of(&["cli", "ir"])].clone();
    assert!(
        cli_ir.contains(&module_of(&["cli", "common"])),
        "{cli_ir:?}"
    );
    assert!(cli_ir.contains(&module_of(&["report", "ir"])), "{cli_ir:?}");
    let python = &real[&module_of(&["python"])];
    assert!(
        python.contains(&module_of(&["report", "tree"])),
        "{python:?}"
    );
    let fuzz = &real[&module_of(&["fuzz", "harness"])];
    assert!(fuzz.contains(&module_of(&["report"])), "{fuzz:?}");
    let app = &real[&module_of(&["tui", "app"])];
    assert!(app.contains(&module_of(&["engine"])), "{app:?}");
}

/// The library stands apart from its front ends: the Python package (and
/// so a Rust user of the library) builds none of the explorer's, the
/// command line's or the diagnostics' crates.
#[test]
fn the_python_package_builds_no_front_end_crate() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "pparse-python",
            "-e",
            "normal",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    let crates: BTreeSet<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        crates.contains("pparse") && crates.contains("pyo3"),
        "{crates:?}"
    );
    for front in [
        "ratatui",
        "crossterm",
        "syntect",
        "clap",
        "codespan-reporting",
        "pparse-explorer",
    ] {
        assert!(!crates.contains(front), "the Python package builds {front}");
    }
}
