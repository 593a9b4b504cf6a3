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

/// The escapes the tests below put in every name and string a format has:
/// OSC 52 (writes the clipboard), OSC 0 (the title), CSI 2J (clears the
/// screen), then CSI and OSC again in their C1 forms.
const ESC: &str = "\u{1b}]52;c;SGk=\u{7}\u{1b}]0;t\u{7}\u{1b}[2J\u{9b}2J\u{9d}0;t\u{9c}";

/// `pparse ARGS...` (FILE second, as in [`prints_no_escape`]) as JSON.
fn json_of(file: &Path, args: &[&str]) -> Value {
    let mut all: Vec<&std::ffi::OsStr> = vec![args[0].as_ref(), file.as_os_str()];
    all.extend(args[1..].iter().map(std::ffi::OsStr::new));
    let run = pparse(&all);
    serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("{args:?} is not JSON ({e}): {}", run.stderr_text()))
}

/// `tree --json` of `file`, checked to be read by `parser` with `status`:
/// a test of what pparse prints cannot pass on a file it does not read.
fn parses_as(file: &Path, parser: &str, status: &str) -> Value {
    let v = json_of(file, &["tree", "--json"]);
    assert_eq!(
        (v["parser"].as_str(), v["status"].as_str()),
        (Some(parser), Some(status)),
        "{v}"
    );
    v
}

/// A GGUF v3 file written by hand: key/values `k…` (a string), `a…` (an
/// array of strings) and `general.name`, and tensor `w…` (F32 [1]), every
/// key and string holding [`ESC`]; `cut` leaves the tensor's data out.
fn gguf_file(cut: bool) -> Vec<u8> {
    let s = |b: &mut Vec<u8>, t: String| {
        b.extend((t.len() as u64).to_le_bytes());
        b.extend(t.as_bytes());
    };
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes()); // tensors
    b.extend(3u64.to_le_bytes()); // key/values
    s(&mut b, format!("k{ESC}"));
    b.extend(8u32.to_le_bytes()); // a string
    s(&mut b, format!("v{ESC}"));
    s(&mut b, "general.name".into());
    b.extend(8u32.to_le_bytes());
    s(&mut b, format!("n{ESC}"));
    s(&mut b, format!("a{ESC}"));
    b.extend(9u32.to_le_bytes()); // an array
    b.extend(8u32.to_le_bytes()); // of strings
    b.extend(2u64.to_le_bytes());
    s(&mut b, format!("x{ESC}"));
    s(&mut b, format!("y{ESC}"));
    s(&mut b, format!("w{ESC}")); // the tensor info
    b.extend(1u32.to_le_bytes()); // dimensions
    b.extend(1u64.to_le_bytes());
    b.extend(0u32.to_le_bytes()); // F32
    b.extend(0u64.to_le_bytes()); // offset
    b.resize(b.len().next_multiple_of(32), 0);
    if !cut {
        b.extend(1.0f32.to_le_bytes());
    }
    b
}

/// A GGUF file whose keys, string values, string array and tensor name
/// hold terminal escapes: no command prints one raw, nor does the
/// message about its tensor when its data is cut off.
#[test]
fn gguf_escapes_never_reach_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    for (cut, status, code) in [(false, "complete", 0), (true, "truncated", 1)] {
        let file = tmp.path().join(format!("{status}.gguf"));
        std::fs::write(&file, gguf_file(cut)).unwrap();
        parses_as(&file, "gguf", status);
        let list = json_of(&file, &["tensors", "--json"]);
        assert_eq!(
            list[0]["name"].as_str(),
            Some(&*format!("w{ESC}")),
            "{list}"
        );
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
            Some(code),
        );
    }
}

/// An ONNX model written by hand, every name and string holding [`ESC`]:
/// the model's producer, doc_string, opset domain and metadata_props key
/// and value; the graph's name and doc_string; a node's name, op_type,
/// domain, doc_string, inputs, output and a string attribute; an
/// initializer's name and doc_string; an input's name and doc_string.
/// With `external`, a second initializer's data is in a file whose name
/// holds the escapes, and which is missing.
fn onnx_file(external: bool) -> Vec<u8> {
    let e = |p: &str| format!("{p}{ESC}");
    let s = |n: u32, t: &str| len_field(n, t.as_bytes());
    let int = |n: u32, v: u64| {
        let mut f = varint(u64::from(n) << 3);
        f.extend(varint(v));
        f
    };
    let mut init = int(1, 1); // dims [1]
    init.extend(int(2, 1)); // FLOAT
    init.extend(s(8, &e("w")));
    init.extend(len_field(9, &1.0f32.to_le_bytes()));
    init.extend(s(12, &e("td")));
    let mut attr = s(1, &e("a"));
    attr.extend(s(4, &e("s")));
    attr.extend(int(20, 3)); // STRING
    let mut node = s(1, &e("x"));
    node.extend(s(1, &e("w")));
    node.extend(s(2, &e("y")));
    node.extend(s(3, &e("n")));
    node.extend(s(4, &e("Op")));
    node.extend(len_field(5, &attr));
    node.extend(s(6, &e("nd")));
    node.extend(s(7, &e("dom")));
    let mut input = s(1, &e("x"));
    input.extend(s(3, &e("vd")));
    let mut graph = len_field(1, &node);
    graph.extend(s(2, &e("g")));
    graph.extend(len_field(5, &init));
    if external {
        let mut location = s(1, "location");
        location.extend(s(2, &e("loc")));
        let mut ext = int(1, 1);
        ext.extend(int(2, 1));
        ext.extend(s(8, &e("ext")));
        ext.extend(len_field(13, &location));
        ext.extend(int(14, 1)); // EXTERNAL
        graph.extend(len_field(5, &ext));
    }
    graph.extend(s(10, &e("gd")));
    graph.extend(len_field(11, &input));
    graph.extend(len_field(12, &s(1, &e("y"))));
    let mut opset = s(1, &e("od"));
    opset.extend(int(2, 13));
    let mut meta = s(1, &e("k"));
    meta.extend(s(2, &e("v")));
    let mut m = int(1, 8); // ir_version
    m.extend(s(2, &e("p")));
    m.extend(s(6, &e("doc")));
    m.extend(len_field(7, &graph));
    m.extend(len_field(8, &opset));
    m.extend(len_field(14, &meta));
    m
}

/// An ONNX model whose names and strings hold terminal escapes: no
/// command prints one raw, nor do the messages about a tensor whose
/// external data file (named with escapes) is missing.
#[test]
fn onnx_escapes_never_reach_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    for (external, status, code) in [(false, "complete", 0), (true, "truncated", 1)] {
        let file = tmp.path().join(format!("{status}.onnx"));
        std::fs::write(&file, onnx_file(external)).unwrap();
        parses_as(&file, "onnx", status);
        let list = json_of(&file, &["tensors", "--json"]);
        assert_eq!(
            list[0]["name"].as_str(),
            Some(&*format!("w{ESC}")),
            "{list}"
        );
        prints_no_escape(
            &file,
            &[
                &["tree"],
                &["tree", "--json"],
                &["nodes", "--depth", "8"],
                &["nodes", "--depth", "8", "--json"],
                &["tensors"],
                &["tensors", "--json"],
            ],
            Some(code),
        );
    }
}

/// A protocol 2 pickle of a dict whose keys and values hold terminal
/// escapes: BINUNICODE strings, a UNICODE key (its escapes as `\uXXXX`),
/// and a value made by a GLOBAL whose module and name hold them too (the
/// ASCII ones only: pickletools reads GLOBAL's lines as ASCII), called
/// with an escape-holding argument. No command prints one raw, nor does
/// `--trace`'s stack and memo.
#[test]
fn pickle_escapes_never_reach_the_terminal() {
    let ascii = ESC.split('\u{9b}').next().unwrap();
    let uni = |b: &mut Vec<u8>, s: String| {
        b.push(b'X');
        b.extend((s.len() as u32).to_le_bytes());
        b.extend(s.as_bytes());
    };
    let mut b = vec![0x80, 2, b'}', b'(']; // PROTO 2, EMPTY_DICT, MARK
    uni(&mut b, format!("k{ESC}"));
    b.extend(b"q\x01"); // BINPUT 1
    uni(&mut b, format!("v{ESC}"));
    uni(&mut b, format!("g{ESC}"));
    b.extend(format!("cm{ascii}\nn{ascii}\n").as_bytes()); // GLOBAL
    uni(&mut b, format!("arg{ESC}"));
    b.extend(b"\x85R"); // TUPLE1, REDUCE
    let escaped: String = ESC
        .chars()
        .map(|c| {
            if c.is_control() {
                format!("\\u{:04x}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect();
    b.extend(format!("Vu{escaped}\n").as_bytes()); // UNICODE
    b.extend(b"h\x01u."); // BINGET 1, SETITEMS, STOP
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("esc.pkl");
    std::fs::write(&file, &b).unwrap();
    parses_as(&file, "pickle", "complete");
    let ops = json_of(&file, &["pickle", "--json"]);
    let args = |op: &str| -> Vec<&str> {
        let all = ops.as_array().unwrap().iter();
        all.filter(|o| o["op"] == op)
            .map(|o| o["arg"].as_str().unwrap())
            .collect()
    };
    assert_eq!(args("GLOBAL"), [format!("m{ascii} n{ascii}")], "{ops}");
    assert_eq!(args("UNICODE"), [format!("u{ESC}")], "{ops}");
    assert_eq!(args("BINUNICODE")[0], format!("k{ESC}"), "{ops}");
    prints_no_escape(
        &file,
        &[
            &["pickle"],
            &["pickle", "--json"],
            &["pickle", "--trace"],
            &["tree"],
            &["tree", "--json"],
            &["nodes", "--depth", "6"],
            &["nodes", "--depth", "6", "--json"],
        ],
        Some(0),
    );
}

/// A MessagePack map whose keys and string values hold terminal escapes,
/// with a nested map and two flax arrays (ext 1): `a…`, whole, and `b…`,
/// whose data is shorter than its shape says (a corrupt tensor, reported
/// by name). No command prints an escape raw.
#[test]
fn msgpack_escapes_never_reach_the_terminal() {
    let s = |b: &mut Vec<u8>, t: String| {
        b.push(0xd9); // str 8
        b.push(t.len() as u8);
        b.extend(t.as_bytes());
    };
    let array = |b: &mut Vec<u8>, dim: u8| {
        let mut a = vec![0x93, 0x91, dim]; // [[dim], "float32", bin]
        s(&mut a, "float32".into());
        a.extend([0xc4, 4]);
        a.extend(1.0f32.to_le_bytes());
        b.extend([0xc7, a.len() as u8, 1]); // ext 8, type 1
        b.extend(a);
    };
    let mut b = vec![0x84];
    s(&mut b, format!("k{ESC}"));
    s(&mut b, format!("v{ESC}"));
    s(&mut b, format!("n{ESC}"));
    b.push(0x81);
    s(&mut b, format!("i{ESC}"));
    s(&mut b, format!("j{ESC}"));
    s(&mut b, format!("a{ESC}"));
    array(&mut b, 1);
    s(&mut b, format!("b{ESC}"));
    array(&mut b, 5);
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("esc.msgpack");
    std::fs::write(&file, &b).unwrap();
    parses_as(&file, "msgpack", "complete");
    let list = json_of(&file, &["tensors", "--json"]);
    let names: Vec<_> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap(), t["status"].as_str().unwrap()))
        .collect();
    // Flax tensors are named by their escaped keys.
    let a = pparse::name::escape_str(&format!("a{ESC}"));
    let bad = pparse::name::escape_str(&format!("b{ESC}"));
    assert_eq!(names, [(&*a, "complete"), (&*bad, "corrupt")], "{list}");
    prints_no_escape(
        &file,
        &[
            &["tree"],
            &["tree", "--json"],
            &["nodes", "--depth", "4"],
            &["nodes", "--depth", "4", "--json"],
        ],
        Some(0),
    );
    prints_no_escape(&file, &[&["tensors"], &["tensors", "--json"]], Some(1));
}

/// A `.wandb` log written by hand (file header, one FULL chunk a record
/// with its CRC-32), every key and string holding [`ESC`]: a run record
/// (id, project, display name, notes, a tag, a config item), a history
/// record (keys, a nested key, values as JSON with the escapes as JSON
/// escapes and as raw characters), a summary record and a line of output.
fn wandb_file() -> Vec<u8> {
    let e = |p: &str| format!("{p}{ESC}");
    let s = |n: u32, t: &str| len_field(n, t.as_bytes());
    let int = |n: u32, v: u64| {
        let mut f = varint(u64::from(n) << 3);
        f.extend(varint(v));
        f
    };
    // serde_json escapes C0 controls and leaves C1 ones as they are.
    let json = serde_json::to_string(&e("v")).unwrap();
    let item = |key: &str, value: &str| {
        let mut f = s(1, key);
        f.extend(s(2, &e("nk")));
        f.extend(s(16, value));
        f
    };
    let mut run = s(1, &e("id"));
    run.extend(s(3, &e("p")));
    run.extend(s(8, &e("dn")));
    run.extend(s(9, &e("notes")));
    run.extend(s(10, &e("tag")));
    run.extend(len_field(4, &len_field(1, &item(&e("c"), &json))));
    let mut history = s(1, &e("k"));
    history.extend(s(16, &json));
    let mut history = len_field(1, &history);
    history.extend(len_field(1, &item(&e("r"), &format!("\"raw{ESC}\""))));
    history.extend(len_field(2, &int(1, 1))); // step 1
    let summary = len_field(1, &item(&e("s"), &json));
    let mut output = int(1, 1); // stdout
    output.extend(s(3, &format!("{}\n", e("line"))));
    let mut b = vec![b':', b'W', b'&', b'B', 0xe1, 0xbe, 0];
    for (i, (field, body)) in [(17, run), (2, history), (3, summary), (13, output)]
        .into_iter()
        .enumerate()
    {
        let mut record = int(1, i as u64 + 1);
        record.extend(len_field(field, &body));
        let mut h = crc32fast::Hasher::new();
        h.update(&[1]); // FULL
        h.update(&record);
        b.extend(h.finalize().to_le_bytes());
        b.extend((record.len() as u16).to_le_bytes());
        b.push(1);
        b.extend(record);
    }
    b
}

/// A W&B log whose record keys and values hold terminal escapes: no
/// command prints one raw, the records' JSON (`--json`, `--verbose`)
/// included.
#[test]
fn wandb_escapes_never_reach_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("esc.wandb");
    std::fs::write(&file, wandb_file()).unwrap();
    parses_as(&file, "wandb", "complete");
    let run = pparse(["records".as_ref(), file.as_os_str(), "--json".as_ref()]);
    let records: Vec<Value> = run
        .stdout_text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = records.iter().map(|r| s(&r["type"])).collect();
    assert_eq!(
        types,
        ["run", "history", "summary", "output_raw"],
        "{records:?}"
    );
    assert_eq!(
        records[0]["data"]["run_id"].as_str(),
        Some(&*format!("id{ESC}")),
        "{records:?}"
    );
    prints_no_escape(
        &file,
        &[
            &["records"],
            &["records", "--json"],
            &["records", "--verbose"],
            &["records", "--count"],
            &["tree"],
            &["tree", "--json"],
            &["nodes", "--depth", "8"],
            &["nodes", "--depth", "8", "--json"],
        ],
        Some(0),
    );
}

/// An npz written by Python's zipfile and NumPy whose member names, zip
/// comment and a structured array's field name hold terminal escapes: no
/// command prints one raw, `extract`'s messages and `cat`'s message
/// listing the members included.
#[test]
fn npz_escapes_never_reach_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("esc.npz");
    python(&format!(
        r#"
import io, zipfile, numpy as np
E = "\x1b]52;c;SGk=\x07\x1b]0;t\x07\x1b[2J\x9b2J\x9d0;t\x9c"
def npy(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()
with zipfile.ZipFile({:?}, "w") as z:
    z.writestr("a" + E + ".npy", npy(np.arange(3, dtype=np.float32)))
    z.writestr("s" + E + ".npy", npy(np.zeros(2, dtype=[("f" + E, "<f4")])))
    z.comment = ("c" + E).encode()
"#,
        file.to_str().unwrap()
    ));
    let tree = parses_as(&file, "zip", "complete");
    let kids: Vec<_> = tree["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (s(&c["name"]), s(&c["parser"]), s(&c["status"])))
        .collect();
    let a = pparse::name::escape_str(&format!("a{ESC}.npy"));
    let member = pparse::name::escape_str(&format!("s{ESC}.npy"));
    assert_eq!(
        kids,
        [(&*a, "npy", "complete"), (&*member, "npy", "complete")],
        "{tree}"
    );
    let out = tmp.path().join("out");
    let out = out.to_str().unwrap();
    prints_no_escape(
        &file,
        &[
            &["tree"],
            &["tree", "--json"],
            &["nodes", "--depth", "6"],
            &["nodes", "--depth", "6", "--json"],
            &["nodes", &member, "--depth", "5"],
            &["nodes", &member, "--depth", "5", "--json"],
            &["tensors"],
            &["tensors", "--json"],
            &["extract", "--out", out],
            &["extract", "--out", out, "--rename"],
        ],
        Some(0),
    );
    // A second extraction names the files in its way, sanitised.
    prints_no_escape(
        &file,
        &[&["cat", "missing"], &["extract", "--out", out]],
        Some(2),
    );
}

/// A PAX tar written by Python's tarfile whose member names, link targets
/// and PAX records (a `comment`, and a key of its own) hold terminal
/// escapes: no command prints one raw, `extract` (which names the links
/// it does not create) included, and no written name holds a control.
#[test]
fn tar_escapes_never_reach_the_terminal() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("esc.tar");
    python(&format!(
        r#"
import io, tarfile
E = "\x1b]52;c;SGk=\x07\x1b]0;t\x07\x1b[2J\x9b2J\x9d0;t\x9c"
with tarfile.open({:?}, "w", format=tarfile.PAX_FORMAT) as t:
    f = tarfile.TarInfo("f" + E)
    f.size = 5
    f.pax_headers = {{"comment": "c" + E, "k" + E: "v" + E}}
    t.addfile(f, io.BytesIO(b"hello"))
    for kind, name, target in [(tarfile.SYMTYPE, "l", "t"), (tarfile.LNKTYPE, "h", "f")]:
        i = tarfile.TarInfo(name + E)
        i.type = kind
        i.linkname = target + E
        t.addfile(i)
    d = tarfile.TarInfo("d" + E)
    d.type = tarfile.DIRTYPE
    t.addfile(d)
"#,
        file.to_str().unwrap()
    ));
    let tree = parses_as(&file, "tar", "complete");
    let kids: Vec<_> = tree["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (s(&c["kind"]), c["target"].as_str()))
        .collect();
    let (t, f) = (
        pparse::name::escape_str(&format!("t{ESC}")),
        pparse::name::escape_str(&format!("f{ESC}")),
    );
    assert_eq!(
        kids,
        [
            ("file", None),
            ("symlink", Some(&*t)),
            ("hardlink", Some(&*f)),
            ("dir", None)
        ],
        "{tree}"
    );
    let out = tmp.path().join("out");
    prints_no_escape(
        &file,
        &[
            &["tree"],
            &["tree", "--json"],
            &["nodes", "--depth", "6"],
            &["nodes", "--depth", "6", "--json"],
            &["extract", "--out", out.to_str().unwrap()],
            &["extract", "--out", out.to_str().unwrap(), "--rename"],
        ],
        Some(0),
    );
    prints_no_escape(
        &file,
        &[&["extract", "--out", out.to_str().unwrap()]],
        Some(2),
    );
    let mut written = Vec::new();
    walk(&out, &mut written);
    assert!(written.len() >= 2, "{written:?}");
    for (path, _) in &written {
        let name = path.file_name().unwrap().as_bytes();
        assert_eq!(unsafe_name(name), None, "{path:?}");
    }
}
