//! One verdict per byte sequence (issue 31): a file's status and the
//! extraction tree below it are the same whether it is opened alone or found
//! inside a tar, a tar.gz, a stored or a deflated zip, a `.gz`, `.bz2`,
//! `.xz` or `.zst` file, and whatever the size of the steps its bytes
//! arrive in.
//!
//! Every intact fixture is wrapped at test time by the real tools (GNU tar
//! and gzip, Info-ZIP zip, bzip2, xz, zstd), then parsed alone and in each
//! wrapper with the default step and with 64 KiB and 4 KiB steps: with small
//! steps a container inside a decoded stream is parsed while its bytes are
//! still arriving, as a jar in a tar.gz is (the JDK's `ct.sym` got `94
//! bytes belong to no entry` and a `found@0x0.zip` that way; the jars of
//! `fixtures/jar/` are written as it is). The subtree under the file in a
//! wrapper must be the one it has alone: the same extractions in the same
//! order, with the same kinds, sizes, declared sizes, parsers, statuses
//! and damage (ranges in the extraction's own offsets; reasons with their
//! hexadecimal offsets blanked, since a reason may name an offset in an
//! outer layer).

use std::path::Path;
use std::process::{Command, Stdio};

use pparse::{ExtId, Options, Status, Tree};

use crate::util::*;

/// Step sizes: the default first (the reference), then small ones.
fn steps() -> [u64; 3] {
    [Options::default().step_bytes, 64 << 10, 4 << 10]
}

/// Files under `fixtures/` that are no intact fixture, and why. A folder
/// ends with `/`; anything else is a prefix of a path or a suffix of a name.
const SKIP_PREFIX: &[(&str, &str)] = &[
    (
        "src/",
        "the files the archives were made from; each is inside an archive fixture",
    ),
    ("hostile.", "hostile member names, on purpose (hostile.rs)"),
    ("hostile_ml/", "hostile ML files, on purpose (bounds.rs)"),
    ("pickle/damaged/", "damaged pickles, on purpose"),
    (
        "onnx/external_short/model.onnx.data",
        "an external data file cut short, on purpose",
    ),
];
const SKIP_SUFFIX: &[(&str, &str)] = &[
    (".py", "the scripts that made the fixtures"),
    (".sh", "the scripts that made the fixtures"),
    (".java", "the scripts that made the fixtures"),
    (".md", "the fixtures' descriptions"),
];

/// The folders of `fixtures/` each test below covers ("" for the files at
/// the top). Every folder is in one of them or skipped whole.
const GROUPS: &[&str] = &[
    "",
    "compress",
    "expect",
    "gguf",
    "hdf5",
    "jar",
    "json",
    "msgpack",
    "npy",
    "onnx",
    "paddle",
    "pickle",
    "safetensors",
    "torch",
    "values",
    "wandb",
];

/// How a fixture is wrapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wrap {
    /// `tar cf F.tar F` (GNU tar).
    Tar,
    /// `tar czf F.tar.gz F` (GNU tar through GNU gzip: no name in the gzip
    /// header, so the stream is `F.tar`).
    TarGz,
    /// `zip -0` (Info-ZIP, stored).
    ZipStored,
    /// `zip` (Info-ZIP, deflated unless that makes it bigger).
    ZipDeflated,
    /// `gzip -c F > F.gz` (the header names F).
    Gz,
    /// `bzip2 -c`.
    Bz2,
    /// `xz -c`.
    Xz,
    /// `zstd -c`.
    Zst,
}

const WRAPS: [Wrap; 8] = [
    Wrap::Tar,
    Wrap::TarGz,
    Wrap::ZipStored,
    Wrap::ZipDeflated,
    Wrap::Gz,
    Wrap::Bz2,
    Wrap::Xz,
    Wrap::Zst,
];

impl Wrap {
    /// The wrapper's file name for a fixture named `f`.
    fn file_name(self, f: &str) -> String {
        match self {
            Wrap::Tar => format!("{f}.tar"),
            Wrap::TarGz => format!("{f}.tar.gz"),
            Wrap::ZipStored => format!("{f}.stored.zip"),
            Wrap::ZipDeflated => format!("{f}.zip"),
            Wrap::Gz => format!("{f}.gz"),
            Wrap::Bz2 => format!("{f}.bz2"),
            Wrap::Xz => format!("{f}.xz"),
            Wrap::Zst => format!("{f}.zst"),
        }
    }

    /// The names from the wrapper's root down to the fixture.
    fn path(self, f: &str) -> Vec<String> {
        match self {
            Wrap::TarGz => vec![format!("{f}.tar"), f.to_string()],
            _ => vec![f.to_string()],
        }
    }

    /// Makes the wrapper of `dir/f` in `dir` with the real tool; its bytes.
    fn make(self, dir: &Path, f: &str) -> Vec<u8> {
        let out = dir.join(self.file_name(f));
        let run = |cmd: &mut Command| {
            let o = cmd
                .current_dir(dir)
                .stderr(Stdio::piped())
                .output()
                .unwrap_or_else(|e| panic!("{self:?} of {f}: {e}"));
            assert!(
                o.status.success(),
                "{self:?} of {f}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            o.stdout
        };
        match self {
            Wrap::Tar => {
                run(Command::new("tar").arg("cf").arg(&out).arg("--").arg(f));
            }
            Wrap::TarGz => {
                run(Command::new("tar").arg("czf").arg(&out).arg("--").arg(f));
            }
            Wrap::ZipStored => {
                run(Command::new("zip")
                    .args(["-X", "-q", "-0"])
                    .arg(&out)
                    .arg(f));
            }
            Wrap::ZipDeflated => {
                run(Command::new("zip").args(["-X", "-q"]).arg(&out).arg(f));
            }
            Wrap::Gz => return run(Command::new("gzip").args(["-c", "--"]).arg(f)),
            Wrap::Bz2 | Wrap::Xz | Wrap::Zst => {
                // From stdin: bzip2 refuses a file named `.bz2`, and
                // these formats keep no name.
                let tool = match self {
                    Wrap::Bz2 => "bzip2",
                    Wrap::Xz => "xz",
                    _ => "zstd",
                };
                let input = std::fs::File::open(dir.join(f)).unwrap();
                return run(Command::new(tool).args(["-q", "-c"]).stdin(input));
            }
        }
        let bytes = std::fs::read(&out).unwrap();
        std::fs::remove_file(&out).unwrap();
        bytes
    }
}

/// One extraction of a subtree, as compared.
#[derive(Debug, PartialEq, Eq)]
struct Row {
    /// PATH below the fixture ("" for the fixture itself).
    path: String,
    /// Its kind (not compared for the fixture itself: the opened file is
    /// the root, a member is a file).
    kind: String,
    size: u64,
    /// As its container declares it (none for the fixture itself).
    declared: Option<u64>,
    parser: Option<&'static str>,
    status: Status,
    damage: Vec<String>,
    notes: Vec<String>,
}

/// A damage reason with its hexadecimal offsets blanked.
fn blank_offsets(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut rest = reason;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i + 2]);
        rest = &rest[i + 2..];
        let n = rest
            .find(|c: char| !c.is_ascii_hexdigit())
            .unwrap_or(rest.len());
        if n > 0 {
            out.push('…');
        }
        rest = &rest[n..];
    }
    out.push_str(rest);
    out
}

/// The rows of the subtree of `top`, depth first in children order.
fn rows(tree: &Tree, top: ExtId) -> Vec<Row> {
    let base = tree.path_of(top);
    tree.subtree(top)
        .into_iter()
        .map(|id| {
            let e = &tree.exts[id];
            let path = tree.path_of(id);
            let path = if id == top {
                String::new()
            } else if base.is_empty() {
                path
            } else {
                path[base.len() + 1..].to_string()
            };
            Row {
                kind: if id == top {
                    "-".into()
                } else {
                    e.kind.as_str().to_string()
                },
                size: e.size(),
                declared: if id == top { None } else { e.declared_size() },
                parser: e.parser(),
                status: tree.status_of(id),
                damage: e
                    .damage
                    .iter()
                    .map(|d| {
                        format!(
                            "{} {}{}: {}",
                            d.status,
                            d.range,
                            if d.unknown { " unknown" } else { "" },
                            blank_offsets(&d.reason)
                        )
                    })
                    .collect(),
                notes: e.notes().iter().map(|n| blank_offsets(n)).collect(),
                path,
            }
        })
        .collect()
}

/// Where two lists of rows differ, in a few lines.
fn differences(want: &[Row], got: &[Row]) -> String {
    let mut out = Vec::new();
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        if w != g {
            out.push(format!("row {i}: alone {w:?}\n        here  {g:?}"));
        }
        if out.len() == 4 {
            break;
        }
    }
    if want.len() != got.len() {
        out.push(format!(
            "{} extractions alone, {} here; alone only: {:?}; here only: {:?}",
            want.len(),
            got.len(),
            want.iter()
                .filter(|w| !got.iter().any(|g| g.path == w.path))
                .map(|w| &w.path)
                .take(6)
                .collect::<Vec<_>>(),
            got.iter()
                .filter(|g| !want.iter().any(|w| w.path == g.path))
                .map(|g| &g.path)
                .take(6)
                .collect::<Vec<_>>(),
        ));
    }
    out.join("\n      ")
}

/// The child of `at` named `name` exactly.
fn child_named(tree: &Tree, at: ExtId, name: &str) -> Option<ExtId> {
    tree.exts[at]
        .children
        .iter()
        .copied()
        .find(|&c| tree.exts[c].display_name() == name)
}

fn opts(step: u64) -> Options {
    Options {
        step_bytes: step,
        ..Options::default()
    }
}

/// Why `rel` (a path under fixtures/) is no intact fixture, if it is not.
fn skipped(rel: &str) -> Option<&'static str> {
    SKIP_PREFIX
        .iter()
        .find(|(p, _)| rel.starts_with(p))
        .or_else(|| SKIP_SUFFIX.iter().find(|(s, _)| rel.ends_with(s)))
        .map(|(_, why)| *why)
}

/// The intact fixtures of a group: the files of `fixtures/GROUP` and its
/// subfolders ("" for the files at the top, not in a folder), by path.
fn fixtures_of(group: &str) -> Vec<String> {
    fn walk(dir: &Path, rel: &str, deep: bool, out: &mut Vec<String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().into_string().unwrap();
            let rel = if rel.is_empty() {
                name
            } else {
                format!("{rel}/{name}")
            };
            let ty = e.file_type().unwrap();
            if ty.is_dir() {
                if deep {
                    walk(&e.path(), &rel, true, out);
                }
            } else if ty.is_file() && skipped(&rel).is_none() {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(&fixture_path(group), group, !group.is_empty(), &mut out);
    out
}

/// The wrappers of a file named `name` holding `bytes`, made by the tools
/// once and kept in the build's scratch folder, under the hash of the name
/// and the bytes, for the next runs (making them is most of this test's
/// time: xz alone takes seconds on the megabyte models).
fn wrappers(name: &str, bytes: &[u8]) -> Vec<(Wrap, Vec<u8>)> {
    let key = sha_hex(&[name.as_bytes(), b"\0", bytes].concat());
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("verdict-wrappers")
        .join(key);
    let read = |dir: &Path| -> Option<Vec<(Wrap, Vec<u8>)>> {
        WRAPS
            .iter()
            .map(|&w| Some((w, std::fs::read(dir.join(w.file_name(name))).ok()?)))
            .collect()
    };
    if let Some(all) = read(&cache) {
        return all;
    }
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join(name), bytes).unwrap();
    let all: Vec<(Wrap, Vec<u8>)> = WRAPS
        .iter()
        .map(|&w| (w, w.make(tmp.path(), name)))
        .collect();
    // Written beside the cache and renamed into place, so that a run never
    // reads half a cache entry.
    std::fs::create_dir_all(cache.parent().unwrap()).unwrap();
    let staged = tempfile::tempdir_in(cache.parent().unwrap()).unwrap();
    for (w, b) in &all {
        std::fs::write(staged.path().join(w.file_name(name)), b).unwrap();
    }
    // Another run may have put it there first: its bytes are as good.
    let staged = staged.keep();
    if std::fs::rename(&staged, &cache).is_err() {
        let _ = std::fs::remove_dir_all(&staged);
    }
    all
}

/// Parses the fixture at `rel` alone and in every wrapper, with every step
/// size, and records each subtree that is not the one it has alone.
fn check_fixture(rel: &str, failures: &mut Failures) {
    let bytes = fixture(rel);
    let name = Path::new(rel).file_name().unwrap().to_str().unwrap();
    let wrapped = wrappers(name, &bytes);

    let steps = steps();
    let alone = {
        let s = parse_with(name, bytes.clone(), opts(steps[0]), rel);
        rows(&s.tree(), 0)
    };
    for &step in &steps[1..] {
        let what = format!("{rel} alone, steps of {step} B");
        let s = parse_with(name, bytes.clone(), opts(step), &what);
        let got = rows(&s.tree(), 0);
        if got != alone {
            failures.push(format!("{what}: {}", differences(&alone, &got)));
        }
    }
    for (wrap, w) in &wrapped {
        let wname = wrap.file_name(name);
        for &step in &steps {
            let what = format!("{rel} in {wrap:?}, steps of {step} B");
            let s = parse_with(&wname, w.clone(), opts(step), &what);
            let tree = s.tree();
            // The wrapper's own layers are intact: the tools wrote them.
            let mut at = 0;
            let mut found = true;
            for step_name in wrap.path(name) {
                if tree.status_of(at) != Status::Complete {
                    failures.push(format!(
                        "{what}: the wrapper is damaged:\n{}",
                        tree_text(&tree)
                    ));
                    found = false;
                    break;
                }
                match child_named(&tree, at, &step_name) {
                    Some(c) => at = c,
                    None => {
                        failures.push(format!(
                            "{what}: no {step_name:?} in the wrapper:\n{}",
                            tree_text(&tree)
                        ));
                        found = false;
                        break;
                    }
                }
            }
            if !found {
                continue;
            }
            let got = rows(&tree, at);
            if got != alone {
                failures.push(format!("{what}: {}", differences(&alone, &got)));
            }
        }
    }
}

fn check_group(group: &str) {
    let list = fixtures_of(group);
    assert!(!list.is_empty(), "no fixtures in fixtures/{group}");
    let mut failures = Failures::default();
    for rel in &list {
        check_fixture(rel, &mut failures);
    }
    failures.check(&format!(
        "the verdicts of the {} fixtures of fixtures/{group}",
        list.len()
    ));
}

/// Every folder of `fixtures/` is covered by a test below, or skipped whole
/// with its reason: a new fixture folder cannot go unchecked.
#[test]
fn every_fixture_folder_has_a_verdict_test() {
    for e in std::fs::read_dir(FIX).unwrap() {
        let e = e.unwrap();
        if !e.file_type().unwrap().is_dir() {
            continue;
        }
        let name = e.file_name().into_string().unwrap();
        assert!(
            GROUPS.contains(&name.as_str()) || skipped(&format!("{name}/")).is_some(),
            "fixtures/{name}/ is in no verdict test: add it to GROUPS (and a test), or to \
             SKIP_PREFIX with the reason"
        );
    }
    assert_eq!(
        skipped("pickle/damaged/bad_opcode.pkl"),
        Some("damaged pickles, on purpose")
    );
    assert_eq!(skipped("pickle/p0_scalars.pkl"), None);
    assert_eq!(
        blank_offsets("cut at 0x1f3: 5 of 0x10 bytes; 0x"),
        "cut at 0x…: 5 of 0x… bytes; 0x"
    );
}

macro_rules! group_tests {
    ($($test:ident => $group:expr),* $(,)?) => {
        $(
            #[test]
            fn $test() {
                check_group($group);
            }
        )*
        /// The tests above cover [`GROUPS`], each once.
        #[test]
        fn every_group_has_its_test() {
            let mut tested = vec![$($group),*];
            tested.sort_unstable();
            let mut groups = GROUPS.to_vec();
            groups.sort_unstable();
            assert_eq!(tested, groups);
        }
    };
}

group_tests! {
    top_level_archives_have_one_verdict => "",
    compressed_streams_have_one_verdict => "compress",
    expectations_have_one_verdict => "expect",
    gguf_models_have_one_verdict => "gguf",
    hdf5_files_have_one_verdict => "hdf5",
    jars_have_one_verdict => "jar",
    json_files_have_one_verdict => "json",
    msgpack_files_have_one_verdict => "msgpack",
    npy_arrays_have_one_verdict => "npy",
    onnx_models_have_one_verdict => "onnx",
    paddle_files_have_one_verdict => "paddle",
    pickles_have_one_verdict => "pickle",
    safetensors_files_have_one_verdict => "safetensors",
    torch_checkpoints_have_one_verdict => "torch",
    tensor_values_have_one_verdict => "values",
    wandb_logs_have_one_verdict => "wandb",
}
