//! The layers of `src/` import downward only, and no two files import each
//! other, directly or through others (docs/architecture.md).
//!
//! Reads every source file, takes the paths it names through `crate::` and
//! `super::` (and a `mod.rs` naming its own submodules), maps each to the
//! file that defines it, and checks the ranks below and the absence of
//! cycles in that graph. Comments, string literals and `#[cfg(test)]`
//! modules are left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules from the bottom up; a module may import only from its
/// own rank or below (and within a rank, without cycles).
const LAYERS: &[&[&str]] = &[
    &["util", "chunked"],
    &["data"],
    &["status", "name", "extract"],
    &["node"],
    &["extraction"],
    &["offer"],
    &["parsers"],
    &["engine", "index"],
    &["fs", "view"],
    &["report"],
    &["tui"],
    &["cli"],
];

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
                todo.push(p);
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

/// Paths named after `crate::` or `super::`, brace groups expanded.
fn paths(code: &str, here: &Module, is_mod_file: bool) -> Vec<Module> {
    let parent: Module = here[..here.len().saturating_sub(1)].to_vec();
    let mut out = Vec::new();
    let b = code.as_bytes();
    for (root, base) in [("crate::", Vec::new()), ("super::", parent)] {
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
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, p) in &mods {
        let text = std::fs::read_to_string(p).unwrap();
        let is_mod_file = p.ends_with("mod.rs") || p.ends_with("lib.rs");
        let e = edges.entry(m.clone()).or_default();
        for path in paths(&code(&text), m, is_mod_file) {
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
            let (Some(ra), Some(rb)) = (rank(&a[0]), rank(&b[0])) else {
                continue;
            };
            if ra < rb {
                up.push(format!("{} imports {}", a.join("/"), b.join("/")));
            }
        }
    }
    for top in g.keys().filter_map(|m| m.first()) {
        assert!(rank(top).is_some(), "src/{top} is in no layer of LAYERS");
    }
    assert!(up.is_empty(), "upward imports:\n{}", up.join("\n"));
}

#[test]
fn no_two_files_import_each_other() {
    let found = cycles(&graph());
    assert!(found.is_empty(), "files that import each other: {found:#?}");
}

/// The checker itself finds what it must: an upward import and a cycle in
/// a small made-up tree, so the tests above cannot pass by seeing nothing.
#[test]
fn the_checker_sees_imports() {
    let here: Module = vec!["parsers".into(), "tar".into()];
    let code = code(
        "use crate::{data::{Range, Source}, view::tensors};\n// crate::tui::app\nuse super::api::Step;\nmod inner { use super::X; }",
    );
    let found = paths(&code, &here, false);
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
        real[&vec!["parsers".to_string(), "tar".to_string()]]
            .contains(&vec!["parsers".to_string(), "api".to_string()])
    );
}
