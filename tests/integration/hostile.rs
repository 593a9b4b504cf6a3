//! Hostile member names (fixtures/hostile.tar and hostile.zip, made by
//! fixtures/make_hostile.py): `pparse extract` writes nothing outside its
//! output directory, creates no link, writes no control character into a
//! file name, keeps every member (duplicates under distinct names), and no
//! command prints a raw terminal escape.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use pparse::extraction::EntryKind;
use serde_json::Value;

use crate::util::*;

const ARCHIVES: &[&str] = &["hostile.tar", "hostile.zip"];

struct Member {
    name: String,
    kind: String,
    linkname: Option<String>,
    content: Option<Vec<u8>>,
}

fn members() -> Vec<Member> {
    let text = std::fs::read_to_string(fixture_path("hostile.json")).expect("hostile.json");
    let v: Value = serde_json::from_str(&text).expect("hostile.json parses");
    v["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| Member {
            name: s(&m["name"]).to_string(),
            kind: s(&m["type"]).to_string(),
            linkname: opt_s(&m["linkname"]).map(str::to_string),
            content: opt_s(&m["content"]).map(|c| c.as_bytes().to_vec()),
        })
        .collect()
}

/// Every entry below `dir`, never following links.
fn walk(dir: &Path, out: &mut Vec<(PathBuf, std::fs::Metadata)>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let meta = std::fs::symlink_metadata(&p).expect("symlink_metadata");
        let is_dir = meta.is_dir();
        out.push((p.clone(), meta));
        if is_dir {
            walk(&p, out);
        }
    }
}

fn has_terminal_control(bytes: &[u8]) -> bool {
    bytes.iter().any(|&b| b == 0x1b || b == 0x07 || b == 0x9b)
}

/// Names in /etc that a write through `link -> /etc` could have produced.
fn etc_passwd_like() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir("/etc")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("passwd"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Why a written file name is unsafe, if it is.
fn unsafe_name(name: &[u8]) -> Option<String> {
    if name.iter().any(|&b| b < 0x20 || b == 0x7f) {
        return Some("contains a control byte".into());
    }
    let text = String::from_utf8_lossy(name);
    if text.chars().any(|c| c.is_control()) {
        return Some("contains a control character".into());
    }
    if name.contains(&b'\\') {
        return Some("contains a backslash (a path separator on Windows)".into());
    }
    let stem = text.split('.').next().unwrap_or("").to_ascii_uppercase();
    let device = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL")
        || (stem.len() == 4
            && (stem.starts_with("COM") || stem.starts_with("LPT"))
            && stem.as_bytes()[3].is_ascii_digit());
    if device {
        return Some("is a Windows device name".into());
    }
    None
}

fn extract_is_contained(archive: &str) {
    let members = members();
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = tmp.path().join("out");
    let etc_before = etc_passwd_like();
    let abs_before = Path::new("/abs").exists();
    let run = pparse([
        "extract".as_ref(),
        fixture_path(archive).as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ]);
    let mut f = Failures::default();
    let what = format!("pparse extract {archive}");
    if run.code != 0 {
        f.push(format!(
            "{what}: exit {} for an intact archive (expected 0); stderr:\n{}",
            run.code,
            run.stderr_text()
        ));
    }
    if has_terminal_control(&run.stdout) || has_terminal_control(&run.stderr) {
        f.push(format!(
            "{what}: printed a raw ESC/BEL/CSI byte: {:?}",
            run.stderr_text()
        ));
    }
    // Nothing beside out/, nothing written through /etc or to /abs.
    let top: Vec<String> = std::fs::read_dir(tmp.path())
        .expect("read tmp")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    if top != ["out"] {
        f.push(format!(
            "{what}: the temp dir holds {top:?}, expected only \"out\""
        ));
    }
    if etc_passwd_like() != etc_before {
        f.push(format!(
            "{what}: /etc changed: {etc_before:?} -> {:?}",
            etc_passwd_like()
        ));
    }
    if Path::new("/abs").exists() && !abs_before {
        f.push(format!("{what}: /abs was created"));
    }
    // Walk everything written.
    let mut entries = Vec::new();
    if out.is_dir() {
        walk(tmp.path(), &mut entries);
    } else {
        f.push(format!("{what}: {} was not created", out.display()));
    }
    // content -> (expected count - written count)
    let mut balance: BTreeMap<Vec<u8>, i64> = BTreeMap::new();
    for m in &members {
        if let Some(c) = &m.content {
            *balance.entry(c.clone()).or_default() += 1;
        }
    }
    let targets: Vec<Vec<u8>> = members
        .iter()
        .filter_map(|m| m.linkname.as_ref().map(|l| l.as_bytes().to_vec()))
        .collect();
    let mut written = Vec::new();
    for (path, meta) in &entries {
        let rel = path.strip_prefix(tmp.path()).unwrap_or(path);
        let name = path.file_name().map(|n| n.as_bytes()).unwrap_or(b"");
        if meta.file_type().is_symlink() {
            f.push(format!("{what}: created a symlink {rel:?}"));
            continue;
        }
        if let Some(why) = unsafe_name(name) {
            f.push(format!("{what}: wrote {rel:?}, whose name {why}"));
        }
        if meta.is_file() {
            let bytes = std::fs::read(path).expect("read written file");
            *balance.entry(bytes.clone()).or_default() -= 1;
            written.push((rel.to_path_buf(), bytes));
        } else if !meta.is_dir() {
            f.push(format!(
                "{what}: wrote {rel:?}, neither a file nor a directory"
            ));
        }
    }
    for (content, n) in &balance {
        let head = String::from_utf8_lossy(&content[..content.len().min(60)]).into_owned();
        if *n > 0 {
            f.push(format!(
                "{what}: the content of {n} member(s) was not written: {head:?}"
            ));
        } else if *n < 0 && !targets.contains(content) {
            let at: Vec<_> = written
                .iter()
                .filter(|(_, b)| b == content)
                .map(|(p, _)| p.clone())
                .collect();
            f.push(format!(
                "{what}: {} file(s) with content that no member has: {at:?} {head:?}",
                -n
            ));
        }
    }
    f.check(&what);
}

#[test]
fn hostile_tar_extract_is_contained() {
    extract_is_contained("hostile.tar");
}

#[test]
fn hostile_zip_extract_is_contained() {
    extract_is_contained("hostile.zip");
}

/// `pparse tree` (text and JSON) shows hostile names escaped: no raw ESC or
/// BEL reaches the terminal, and the JSON lists every member.
#[test]
fn hostile_tree_output_is_escaped() {
    let n = members().len();
    let mut f = Failures::default();
    for archive in ARCHIVES {
        let file = fixture_path(archive);
        for json in [false, true] {
            let mut args = vec!["tree".as_ref(), file.as_os_str()];
            if json {
                args.push("--json".as_ref());
            }
            let what = format!("pparse tree {archive}{}", if json { " --json" } else { "" });
            let run = pparse(&args);
            if run.code != 0 {
                f.push(format!("{what}: exit {} (expected 0)", run.code));
            }
            for (stream, bytes) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
                if let Some(at) = bytes.iter().position(|&b| b == 0x1b || b == 0x07) {
                    f.push(format!(
                        "{what}: raw {:#04x} byte in {stream} at {at}",
                        bytes[at]
                    ));
                }
            }
            if json {
                match serde_json::from_slice::<Value>(&run.stdout) {
                    Ok(v) => {
                        let kids = v["children"].as_array().map_or(0, |a| a.len());
                        if kids != n {
                            f.push(format!("{what}: {kids} children, expected {n}"));
                        }
                    }
                    Err(e) => f.push(format!("{what}: output is not JSON: {e}")),
                }
            } else {
                let lines = run.stdout_text().lines().count();
                if lines != n + 1 {
                    f.push(format!(
                        "{what}: {lines} lines, expected {} (a name with a newline must stay on one line)",
                        n + 1
                    ));
                }
            }
        }
    }
    f.check("hostile tree output");
}

/// The library keeps the raw names and the entry kinds: every member, in
/// order, symlinks as symlinks (with their targets), files with their bytes.
#[test]
fn hostile_members_raw_names_and_kinds() {
    let members = members();
    let mut f = Failures::default();
    for archive in ARCHIVES {
        let session = parse(archive, fixture(archive));
        let t = session.tree();
        let kids = t.exts[0].children.clone();
        if kids.len() != members.len() {
            f.push(format!(
                "{archive}: {} members, expected {}: {:?}",
                kids.len(),
                members.len(),
                child_names(&t, 0)
            ));
            continue;
        }
        // The header nodes keep the names as stored, in order.
        let stored: Vec<String> = members
            .iter()
            .map(|m| pparse::name::escape_str(&m.name))
            .collect();
        let nodes: Vec<String> = t.exts[0]
            .nodes
            .iter()
            .filter(|n| n.kind == "entry")
            .map(|n| n.name.to_string())
            .collect();
        if nodes != stored {
            f.push(format!(
                "{archive}: header nodes {nodes:?}, stored {stored:?}"
            ));
        }
        for (m, &id) in members.iter().zip(&kids) {
            let e = &t.exts[id];
            // The member is named as `tar x` and `unzip` write it: no `.`
            // or empty components, no leading `/`.
            let as_written: Vec<&str> = m
                .name
                .split('/')
                .filter(|c| !c.is_empty() && *c != ".")
                .collect();
            if e.name.raw() != as_written.join("/").as_bytes() {
                f.push(format!(
                    "{archive}: member {:?} is named {:?}",
                    m.name,
                    e.display_name()
                ));
            }
            match (m.kind.as_str(), &e.kind) {
                ("symlink", EntryKind::Symlink(target)) => {
                    if Some(&**target) != m.linkname.as_deref() {
                        f.push(format!(
                            "{archive}: symlink {:?} points to {target:?}, expected {:?}",
                            m.name, m.linkname
                        ));
                    }
                }
                ("file", EntryKind::File) => {
                    let got = read_all(&t, id);
                    if Some(&got) != m.content.as_ref() {
                        f.push(format!(
                            "{archive}: {:?} has the wrong {} bytes",
                            m.name,
                            got.len()
                        ));
                    }
                }
                (want, got) => f.push(format!(
                    "{archive}: {:?} should be a {want}, pparse says {}",
                    m.name,
                    got.as_str()
                )),
            }
        }
    }
    f.check("hostile members");
}

/// A printed program whose op names, attribute strings and text around
/// it hold terminal escapes (OSC 52 writes the clipboard, OSC 0 the
/// title, CSI 2J clears the screen, and their C1 forms): no command
/// prints one raw, in text or JSON, on stdout or stderr.
#[test]
fn program_escapes_never_reach_the_terminal() {
    let esc = "\u{1b}]52;c;SGk=\u{7}\u{1b}]0;title\u{7}\u{1b}[2J\u{9b}2J\u{9d}0;t\u{9c}";
    let text = format!(
        "{{\n    (%0) = \"pd_op.full{esc}\" () {{name:\"x{esc}\",value:1.0}} : () -> builtin.tensor<f32>\n    (%1) = \"pd_op.relu\" (%0) {{}} : (builtin.tensor<f32>) -> builtin.tensor<f32>\n    garbage {esc}\n}}\n"
    );
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("esc.txt");
    std::fs::write(&file, &text).unwrap();
    prints_no_escape(
        &file,
        &[
            &["ir"],
            &["ir", "--json"],
            &["nodes", "--depth", "4"],
            &["nodes", "--depth", "4", "--json"],
            &["tree"],
            &["tree", "--json"],
        ],
        None,
    );
}

/// Runs `pparse CMD FILE ARGS` for each `[CMD, ARGS...]` and checks that
/// neither stdout nor stderr holds a terminal control: ESC, BEL or a C1
/// control (raw, or UTF-8 encoded); with `code`, the exit status too.
fn prints_no_escape(file: &Path, runs: &[&[&str]], code: Option<i32>) {
    let c1 = |b: &[u8]| {
        b.windows(2)
            .any(|w| w[0] == 0xc2 && (0x80..=0x9f).contains(&w[1]))
    };
    for args in runs {
        let mut all: Vec<&std::ffi::OsStr> = vec![args[0].as_ref(), file.as_os_str()];
        all.extend(args[1..].iter().map(std::ffi::OsStr::new));
        let run = pparse(&all);
        if let Some(code) = code {
            assert_eq!(run.code, code, "{args:?}: {}", run.stderr_text());
        }
        for (what, out) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
            assert!(
                !has_terminal_control(out) && !c1(out),
                "{args:?} {what}: {}",
                String::from_utf8_lossy(out).escape_debug()
            );
        }
    }
}

/// A safetensors file whose tensor names and metadata hold terminal
/// escapes (written as JSON escapes in its header, so the names hold the
/// raw control characters): no command prints one raw.
#[test]
fn safetensors_escapes_never_reach_the_terminal() {
    let esc = "\\u001b]52;c;SGk=\\u0007\\u001b]0;t\\u0007\\u001b[2J\\u009b2J\\u009d0;t\\u009c";
    let header = format!(
        "{{\"__metadata__\":{{\"k{esc}\":\"v{esc}\"}},\"w{esc}\":{{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}}}"
    );
    let mut b = (header.len() as u64).to_le_bytes().to_vec();
    b.extend(header.as_bytes());
    b.extend(1.0f32.to_le_bytes());
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("esc.safetensors");
    std::fs::write(&file, &b).unwrap();
    prints_no_escape(
        &file,
        &[
            &["tree"],
            &["tree", "--json"],
            &["nodes", "--depth", "4"],
            &["nodes", "--depth", "4", "--json"],
            &["tensors"],
            &["tensors", "--json"],
        ],
        Some(0),
    );
}
