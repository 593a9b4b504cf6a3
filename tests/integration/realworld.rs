//! A small, deterministic part of the real-world sweep
//! (`peers/realworld.sh`): a folder of real files packed by GNU tar and
//! gzip, whose members must read inside the archive as they read alone.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::util::*;

/// The fixtures that are damaged on purpose (fixtures/README.md): the
/// pickles of `pickle/damaged/` and the ONNX model whose external data file
/// is missing. Every other fixture is intact.
fn damaged_on_purpose(rel: &str) -> bool {
    (rel.starts_with("pickle/damaged/") && rel.ends_with(".pkl"))
        || rel == "onnx/external_missing/model.onnx"
}

/// Every regular file under `dir` (no symbolic links), as paths relative
/// to it, sorted.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let ty = e.file_type().unwrap();
            if ty.is_dir() {
                stack.push(e.path());
            } else if ty.is_file() {
                let rel = e.path().strip_prefix(dir).unwrap().to_path_buf();
                out.push(rel.to_str().unwrap().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Every extraction below `node`: PATH (less `prefix`) to (status, detail).
fn below(node: &Value, prefix: &str, out: &mut BTreeMap<String, (String, String)>) {
    for c in node["children"].as_array().into_iter().flatten() {
        let path = s(&c["path"]);
        let rel = path.strip_prefix(prefix).unwrap_or(path).to_string();
        let detail = c["detail"].as_str().unwrap_or_default().to_string();
        out.insert(rel, (s(&c["status"]).to_string(), detail));
        below(c, prefix, out);
    }
}

/// The extraction at PATH in a `tree --json` object.
fn find<'a>(node: &'a Value, path: &str) -> Option<&'a Value> {
    for c in node["children"].as_array().into_iter().flatten() {
        let p = s(&c["path"]);
        if p == path {
            return Some(c);
        }
        if path.starts_with(&format!("{p}/"))
            && let Some(f) = find(c, path)
        {
            return Some(f);
        }
    }
    None
}

/// `fixtures/` as GNU tar (sorted by name) gzipped by GNU gzip, in `dir`.
fn fixtures_tar_gz(dir: &Path) -> PathBuf {
    let tar = dir.join("fixtures.tar");
    let fix = Path::new(FIX);
    let st = Command::new("tar")
        .arg("--sort=name")
        .arg("-C")
        .arg(fix.parent().unwrap())
        .arg("-cf")
        .arg(&tar)
        .arg("fixtures")
        .status()
        .expect("GNU tar runs");
    assert!(st.success());
    let st = Command::new("gzip")
        .arg("-n")
        .arg(&tar)
        .status()
        .expect("GNU gzip runs");
    assert!(st.success());
    dir.join("fixtures.tar.gz")
}

#[test]
fn every_fixture_reads_inside_a_tar_gz_as_it_reads_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let gz = fixtures_tar_gz(tmp.path());
    let run = pparse(["tree", "--json", "--no-index", gz.to_str().unwrap()]);
    let inside: Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("tree --json: {e}; stderr {}", run.stderr_text()));
    assert_eq!(s(&inside["status"]), "complete");
    assert_eq!(s(&inside["children"][0]["status"]), "complete", "the tar");

    let fix = Path::new(FIX);
    let files = files_under(fix);
    assert!(files.len() > 300, "{} files under fixtures/", files.len());
    let mut wrong = Vec::new();
    let mut damaged_alone = Vec::new();
    let mut damaged_inside = Vec::new();
    for rel in &files {
        let alone_run = pparse(["tree", "--json", "--no-index", &format!("{FIX}/{rel}")]);
        assert!(alone_run.code <= 1, "{rel} alone: exit {}", alone_run.code);
        let alone: Value = serde_json::from_slice(&alone_run.stdout).unwrap();
        let path = format!("fixtures.tar/fixtures/{rel}");
        let Some(member) = find(&inside, &path) else {
            wrong.push(format!("{rel}: no member {path}"));
            continue;
        };
        let size = std::fs::metadata(fix.join(rel)).unwrap().len();
        if u(&member["size"]) != size {
            wrong.push(format!(
                "{rel}: {} B inside, {size} B alone",
                member["size"]
            ));
        }

        // The file's own verdict. A member taken for its format by its
        // name alone reports what the file alone reports as damage as a
        // note (docs/contract.md, "Notes"); otherwise the same status and
        // reason.
        let (a_status, a_detail) = (s(&alone["status"]), alone["detail"].as_str());
        let (m_status, m_detail) = (s(&member["status"]), member["detail"].as_str());
        let noted = member["notes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(|n| {
                Some(n)
                    == a_detail
                        .map(|d| format!("not read as its name suggests: {d}"))
                        .as_deref()
            });
        // A model whose external data is missing beside it on disk: in an
        // archive no file beside it is opened, and a note says so.
        let not_opened = a_detail.is_some_and(|d| d.contains("external data file"))
            && member["notes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .any(|n| n.contains("not opened: the model is not a file on disk"));
        if (a_status, a_detail) != (m_status, m_detail)
            && !(m_status == "complete" && (noted || not_opened))
        {
            wrong.push(format!(
                "{rel}: alone {a_status} {a_detail:?}, inside {m_status} {m_detail:?}"
            ));
        }

        // What it holds: the same extractions with the same verdicts,
        // except the files beside it on disk that a file alone opens (the
        // shards of a split model, external data), which are not its bytes.
        let mut a = BTreeMap::new();
        below(&alone, "", &mut a);
        let mut m = BTreeMap::new();
        below(member, &format!("{path}/"), &mut m);
        let dir = fix.join(rel).parent().unwrap().to_path_buf();
        for (p, v) in &a {
            match m.get(p) {
                Some(w) if w == v => {}
                Some(w) => wrong.push(format!("{rel}: {p} alone {v:?}, inside {w:?}")),
                None if !p.contains('/') && dir.join(p).is_file() => {}
                None => wrong.push(format!("{rel}: {p} ({v:?}) is missing inside")),
            }
        }
        for p in m.keys().filter(|p| !a.contains_key(*p)) {
            wrong.push(format!("{rel}: {p} is found inside only"));
        }

        if alone_run.code == 1 {
            damaged_alone.push(rel.clone());
        }
        if m_status != "complete" || m.values().any(|(st, _)| st != "complete") {
            damaged_inside.push(rel.clone());
        }
    }
    assert!(
        wrong.is_empty(),
        "{} differences:\n{}",
        wrong.len(),
        wrong.join("\n")
    );

    // The damaged fixtures are those made damaged, and no other; inside,
    // those read by their content (not by name alone) are damaged too, and
    // they alone make the exit status 1.
    let unexpected: Vec<_> = damaged_alone
        .iter()
        .filter(|r| !damaged_on_purpose(r))
        .collect();
    assert!(
        unexpected.is_empty(),
        "intact fixtures read as damaged alone: {unexpected:?}"
    );
    let intact_alone: Vec<_> = files
        .iter()
        .filter(|r| damaged_on_purpose(r) && !damaged_alone.contains(r))
        .collect();
    assert!(
        intact_alone.is_empty(),
        "damaged fixtures read as intact alone: {intact_alone:?}"
    );
    assert!(damaged_inside.iter().all(|r| damaged_alone.contains(r)));
    assert!(!damaged_inside.is_empty());
    assert_eq!(run.code, 1, "{}", run.stderr_text());
    let err = run.stderr_text();
    for r in &damaged_inside {
        assert!(
            err.contains(&format!("fixtures.tar/fixtures/{r}")),
            "{r} on stderr: {err}"
        );
    }
    for line in err.lines() {
        assert!(
            damaged_inside
                .iter()
                .any(|r| line.starts_with(&format!("pparse: fixtures.tar/fixtures/{r}"))),
            "a problem outside the damaged fixtures: {line}"
        );
    }
}
