//! `pparse::fs`: nested containers as a file system. Every file of
//! `nested.tar.gz` (a zip in a zip in a tar in a gzip, made by GNU tar,
//! gzip and Info-ZIP) is listed, stat'ed and read back byte for byte
//! against the files it was made from; errors are typed; a cut archive
//! gives what was recovered and says so.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;

use pparse::Status;
use pparse::fs::{Error, Fs, Kind};

use crate::util::*;

fn source(leaf: &Leaf) -> Vec<u8> {
    std::fs::read(fixture_path(&leaf.source)).unwrap()
}

#[test]
fn every_file_at_any_depth_is_listed_and_read_back() {
    let fs = Fs::new(fixture_path("nested.tar.gz")).unwrap();
    let listed: BTreeMap<String, pparse::fs::Entry> = fs
        .list("", true)
        .unwrap()
        .into_iter()
        .map(|e| (e.path.clone(), e))
        .collect();
    let leaves = leaves("nested.tar.gz");
    assert!(leaves.len() > 10);
    for leaf in &leaves {
        let e = listed
            .get(&leaf.path)
            .unwrap_or_else(|| panic!("{} not listed", leaf.path));
        assert_eq!(
            (e.kind.clone(), e.size, e.status),
            (Kind::File, leaf.size, Status::Complete)
        );
        assert_eq!(fs.stat(&leaf.path).unwrap(), *e);
        let mut f = fs.open(&leaf.path).unwrap();
        let mut got = Vec::new();
        f.read_to_end(&mut got).unwrap();
        assert!(got == source(leaf), "{} differs", leaf.path);
    }
    // Containers are listed as such, with their format.
    let inner = &listed["nested.tar/docs/inner.zip"];
    assert!(inner.container);
    assert_eq!(inner.format, Some("zip"));
    assert_eq!(listed["nested.tar/a/"].kind, Kind::Dir);
    assert_eq!(
        listed["nested.tar/latest.md"].kind,
        Kind::Symlink("README.md".into())
    );
    // One level, as `ls` shows it: the top holds the decoded tar, the tar
    // its top-level members and directories, a directory its members.
    let names = |path: &str| -> Vec<String> {
        fs.list(path, false)
            .unwrap()
            .into_iter()
            .map(|e| e.path)
            .collect()
    };
    assert_eq!(names(""), vec!["nested.tar"]);
    assert_eq!(
        names("nested.tar"),
        [
            "README.md",
            "a/",
            "data/",
            "docs/",
            "latest.md",
            "long/",
            "src/"
        ]
        .map(|n| format!("nested.tar/{n}"))
    );
    assert_eq!(
        names("nested.tar/docs"),
        ["nested.tar/docs/guide.txt", "nested.tar/docs/inner.zip"]
    );
    assert_eq!(names("nested.tar/docs/"), names("nested.tar/docs"));
    assert_eq!(names("nested.tar/a"), ["nested.tar/a/b/"]);
    assert_eq!(fs.stat("nested.tar/docs").unwrap().kind, Kind::Dir);
    assert!(matches!(
        fs.open("nested.tar/docs"),
        Err(Error::NoContent { .. })
    ));
}

/// Many archives name no directory entries (GNU tar given a list of
/// files, most dataset packers): their directories are made by the
/// members' names alone, and list, stat, sub and open go through them.
#[test]
fn directories_named_only_by_their_members() {
    // fixtures/make_nodirs.sh: what each file holds.
    let content = |n: &str| format!("{n} ").repeat(100 + n.len() * 7).into_bytes();
    let fs = Fs::new(fixture_path("nodirs.tar.gz")).unwrap();
    let names = |fs: &Fs, path: &str| -> Vec<String> {
        fs.list(path, false)
            .unwrap()
            .into_iter()
            .map(|e| e.path)
            .collect()
    };
    assert_eq!(
        names(&fs, "nodirs.tar"),
        [
            "nodirs.tar/train",
            "nodirs.tar/val",
            "nodirs.tar/README.txt"
        ]
    );
    assert_eq!(
        names(&fs, "nodirs.tar/train"),
        ["nodirs.tar/train/cat", "nodirs.tar/train/dog"]
    );
    assert_eq!(
        names(&fs, "nodirs.tar/train/cat"),
        [
            "nodirs.tar/train/cat/0001.txt",
            "nodirs.tar/train/cat/0002.txt"
        ]
    );
    let st = fs.stat("nodirs.tar/train/dog").unwrap();
    assert_eq!(
        (st.kind, st.name.as_str(), st.container),
        (Kind::Dir, "dog", true)
    );
    assert!(matches!(
        fs.open("nodirs.tar/train"),
        Err(Error::NoContent { .. })
    ));
    assert!(matches!(
        fs.stat("nodirs.tar/test"),
        Err(Error::NotFound { .. })
    ));
    // Recursively: every file below, and only those.
    let all: Vec<String> = fs
        .list("nodirs.tar/train", true)
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(all.len(), 3, "{all:?}");
    // A view rooted at a directory.
    let train = fs.sub("nodirs.tar/train").unwrap();
    assert_eq!(names(&train, "cat"), ["cat/0001.txt", "cat/0002.txt"]);
    for n in ["train/cat/0001", "train/cat/0002", "train/dog/0001"] {
        let mut got = Vec::new();
        let rel = format!("{}.txt", n.strip_prefix("train/").unwrap());
        train.open(&rel).unwrap().read_to_end(&mut got).unwrap();
        assert_eq!(got, content(n), "{n}");
    }
}

#[test]
fn files_seek_and_read_at_any_offset_from_many_threads() {
    let fs = Fs::new(fixture_path("nested.tar.gz")).unwrap();
    let leaf = leaves("nested.tar.gz")
        .into_iter()
        .find(|l| l.path == "nested.tar/docs/inner.zip/chapter1.txt")
        .unwrap();
    let want = Arc::new(source(&leaf));
    let mut f = fs.open(&leaf.path).unwrap();
    assert_eq!(f.len(), want.len() as u64);
    // Seek from the end, from here, from the start.
    let mut buf = [0u8; 100];
    f.seek(SeekFrom::End(-100)).unwrap();
    f.read_exact(&mut buf).unwrap();
    assert_eq!(&buf[..], &want[want.len() - 100..]);
    assert_eq!(f.read(&mut buf).unwrap(), 0, "at the end");
    f.seek(SeekFrom::Current(-150)).unwrap();
    f.read_exact(&mut buf[..50]).unwrap();
    assert_eq!(&buf[..50], &want[want.len() - 150..want.len() - 100]);
    assert!(f.seek(SeekFrom::Current(-1_000_000)).is_err());
    f.seek(SeekFrom::Start(7)).unwrap();
    f.read_exact(&mut buf).unwrap();
    assert_eq!(&buf[..], &want[7..107]);
    // One handle, positional reads from eight threads at once.
    let f = Arc::new(f);
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (f, want) = (f.clone(), want.clone());
            std::thread::spawn(move || {
                let mut x = t * 7919 + 1;
                for _ in 0..200 {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    let off = (x >> 33) % want.len() as u64;
                    let len = ((x >> 13) % 4096) as usize;
                    let mut buf = vec![0u8; len];
                    let n = f.read_at(off, &mut buf).unwrap();
                    let end = (off as usize + len).min(want.len());
                    assert_eq!(&buf[..n], &want[off as usize..end]);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn sub_views_are_rooted_below() {
    let fs = Fs::new(fixture_path("nested.tar.gz")).unwrap();
    let zip = fs.sub("nested.tar/docs/inner.zip").unwrap();
    let names: Vec<String> = zip
        .list("", false)
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert!(names.contains(&"chapter1.txt".to_string()), "{names:?}");
    assert!(names.contains(&"deep.zip".to_string()), "{names:?}");
    let deep = zip.sub("deep.zip").unwrap();
    let leaf = leaves("nested.tar.gz")
        .into_iter()
        .find(|l| l.path == "nested.tar/docs/inner.zip/deep.zip/x.txt")
        .unwrap();
    for (view, path) in [
        (&fs, leaf.path.as_str()),
        (&zip, "deep.zip/x.txt"),
        (&deep, "x.txt"),
    ] {
        let mut got = Vec::new();
        view.open(path).unwrap().read_to_end(&mut got).unwrap();
        assert!(got == source(&leaf), "{path}");
    }
    assert_eq!(deep.stat("x.txt").unwrap().path, "x.txt");
}

#[test]
fn errors_are_typed_and_say_what_is_there() {
    let fs = Fs::new(fixture_path("nested.tar.gz")).unwrap();
    match fs.open("nested.tar/nope.txt") {
        Err(Error::NotFound { path, hint }) => {
            assert_eq!(path, "nested.tar/nope.txt");
            assert!(hint.contains("README.md"), "{hint}");
        }
        other => panic!("{:?}", other.map(|f| f.len())),
    }
    assert!(
        matches!(fs.open("nested.tar/a/"), Err(Error::NoContent { kind, .. }) if kind == "dir")
    );
    assert!(matches!(
        fs.list("nested.tar/README.md", false),
        Err(Error::NotAContainer { .. })
    ));
    assert!(matches!(
        fs.sub("nested.tar/README.md"),
        Err(Error::NotAContainer { .. })
    ));
    let io: std::io::Error = fs.open("nested.tar/nope.txt").err().unwrap().into();
    assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
    assert!(matches!(
        Fs::new("/no/such/file.tar"),
        Err(Error::Open { .. })
    ));
}

/// A tar.gz cut in the middle of a member: the member opens with what
/// was recovered (a prefix of the real bytes), says it is truncated, and
/// `open_complete` refuses it; members before the cut are whole.
#[test]
fn a_cut_archive_gives_what_was_recovered_and_says_so() {
    let bytes = fixture("nested.tar.gz");
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.tar.gz");
    std::fs::write(&cut, &bytes[..bytes.len() * 3 / 5]).unwrap();
    let fs = Fs::new(&cut).unwrap();
    let entries = fs.list("", true).unwrap();
    let mut whole = 0;
    let mut cut_seen = 0;
    for leaf in leaves("nested.tar.gz") {
        let Some(e) = entries.iter().find(|e| e.path == leaf.path) else {
            continue;
        };
        let want = source(&leaf);
        let mut got = Vec::new();
        let mut f = fs.open(&leaf.path).unwrap();
        f.read_to_end(&mut got).unwrap();
        assert!(
            want.starts_with(&got),
            "{}: not a prefix of the real bytes",
            leaf.path
        );
        if e.status == Status::Complete {
            assert_eq!(got.len(), want.len(), "{}", leaf.path);
            assert!(fs.open_complete(&leaf.path).is_ok());
            whole += 1;
        } else {
            assert!(
                got.len() < want.len() || e.status == Status::Corrupt,
                "{}",
                leaf.path
            );
            assert!(e.reason.is_some());
            match fs.open_complete(&leaf.path) {
                Err(Error::Damaged { status, .. }) => assert_eq!(status, e.status),
                other => panic!("{}: {:?}", leaf.path, other.map(|f| f.len())),
            }
            cut_seen += 1;
        }
    }
    assert!(whole >= 3, "{whole} whole members before the cut");
    assert!(cut_seen >= 1, "no member was cut");
}

#[test]
fn handles_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Fs>();
    both::<pparse::fs::File>();
    both::<Error>();
}

/// `walk` visits every entry below a PATH with its raw names and its
/// bytes opened, as `pparse extract` uses it.
#[test]
fn walk_visits_every_entry_with_its_bytes() {
    let fs = Fs::new(fixture_path("nested.tar.gz")).unwrap();
    let mut files = BTreeMap::new();
    let mut dirs = 0;
    fs.walk("nested.tar/docs", |e, names, file| {
        assert_eq!(
            names
                .last()
                .map(|n| String::from_utf8_lossy(n).into_owned()),
            Some(e.name.clone())
        );
        match file {
            Some(mut f) if !e.container => {
                let mut got = Vec::new();
                f.read_to_end(&mut got)?;
                files.insert(e.path.clone(), got);
            }
            _ if e.kind == Kind::Dir => dirs += 1,
            _ => {}
        }
        Ok(())
    })
    .unwrap()
    .unwrap();
    let want: Vec<Leaf> = leaves("nested.tar.gz")
        .into_iter()
        .filter(|l| l.path.starts_with("nested.tar/docs/"))
        .collect();
    assert_eq!(
        files.len(),
        want.len(),
        "{:?}",
        files.keys().collect::<Vec<_>>()
    );
    for leaf in &want {
        assert!(files[&leaf.path] == source(leaf), "{}", leaf.path);
    }
    assert_eq!(dirs, 2, "docs/ itself and inner.zip's notes/");
    // The callback's error ends the walk and comes back.
    let stopped = fs
        .walk("", |_, _, _| Err(std::io::Error::other("enough")))
        .unwrap();
    assert_eq!(stopped.unwrap_err().to_string(), "enough");
}

/// Members' times and permissions are those Python's tarfile and zipfile
/// read (a zip's DOS time taken as UTC, as `calendar.timegm` does).
#[test]
fn stat_gives_mtime_and_mode_where_the_format_has_them() {
    let fs = Fs::with_options(fixture_path("nested.tar.gz"), pparse::Options::default()).unwrap();
    let mut checked = 0;
    for m in archive("nested.tar.gz")["members"].as_array().unwrap() {
        let e = fs.stat(s(&m["path"])).unwrap();
        assert_eq!(e.mtime, Some(u(&m["mtime"]) as i64), "{}", s(&m["path"]));
        assert_eq!(e.mode, Some(u(&m["mode"]) as u32), "{}", s(&m["path"]));
        checked += 1;
    }
    assert!(checked > 10);
    let zip = fixture_path("plain.zip");
    let out = std::process::Command::new("python3")
        .arg("-c")
        .arg(
            "import calendar, json, sys, zipfile\n\
             z = zipfile.ZipFile(sys.argv[1])\n\
             print(json.dumps({i.filename: [calendar.timegm(i.date_time + (0, 0, 0)), \
             (i.external_attr >> 16) & 0o7777 if i.create_system == 3 else None] \
             for i in z.infolist()}))",
        )
        .arg(&zip)
        .output()
        .expect("python3 reads the zip");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let fs = Fs::with_options(&zip, pparse::Options::default()).unwrap();
    let mut checked = 0;
    for (name, v) in want.as_object().unwrap() {
        let e = fs.stat(name).unwrap();
        assert_eq!(e.mtime, v[0].as_i64(), "{name}");
        assert_eq!(e.mode, v[1].as_u64().map(|m| m as u32), "{name}");
        checked += 1;
    }
    assert!(checked > 2);
}

/// A backup made with `tar -C dir -cf backup.tar .` (members `./a/x`…):
/// its members are listed, stat'ed and opened as `backup.tar/a/x`, as
/// `tar x` writes them, with no folder for `.`; the old spelling
/// `./a/x` (and `a//x`) still finds them.
#[test]
fn members_named_with_dot_slash_are_one_path() {
    let (_tmp, tgz) = dot_tar_gz();
    let fs = Fs::new(&tgz).unwrap();
    let names = |path: &str| -> Vec<String> {
        fs.list(path, false)
            .unwrap()
            .into_iter()
            .map(|e| e.path)
            .collect()
    };
    assert_eq!(names("backup.tar"), ["backup.tar/a/", "backup.tar/b/"]);
    assert_eq!(names("backup.tar/a"), ["backup.tar/a/x", "backup.tar/a/z"]);
    assert_eq!(names("backup.tar/./a/"), names("backup.tar/a"));
    let all: Vec<String> = fs
        .list("", true)
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(
        all,
        [
            "backup.tar",
            "backup.tar/a/",
            "backup.tar/a/x",
            "backup.tar/a/z",
            "backup.tar/b/",
            "backup.tar/b/y"
        ]
    );
    assert_eq!(
        fs.stat("backup.tar/a/z").unwrap().kind,
        Kind::HardLink("a/x".into())
    );
    for (name, bytes) in DOT_TAR_FILES {
        let path = format!("backup.tar/{name}");
        let st = fs.stat(&path).unwrap();
        assert_eq!((st.path.as_str(), &st.kind), (path.as_str(), &Kind::File));
        for spelling in [
            path.clone(),
            format!("backup.tar/./{name}"),
            format!("./backup.tar//{name}"),
        ] {
            assert_eq!(fs.stat(&spelling).unwrap(), st, "{spelling}");
            let mut got = Vec::new();
            fs.open(&spelling).unwrap().read_to_end(&mut got).unwrap();
            assert_eq!(got, *bytes, "{spelling}");
        }
    }
}

/// Members of one name are entries of their own (issue 32): a symlink
/// `lnk2 -> /etc/shadow`, a file `lnk2` and a directory `lnk2/` are
/// listed as `lnk2`, `lnk2~1`, `lnk2~2`, each with its own kind, size and
/// bytes, and each PATH leads back to its entry alone; a member `link/x`
/// stored under a symlink `link` is `link~1/x`. `extract` writes the
/// same names and `cat` reads them; no byte of the host's files is read.
#[test]
fn members_of_one_name_are_entries_of_their_own() {
    let (_tmp, dup, under) = link_tars();
    let fs = Fs::with_options(&dup, pparse::Options::default()).unwrap();
    let top = fs.list("", false).unwrap();
    let seen: Vec<(&str, &Kind, u64)> = top
        .iter()
        .map(|e| (e.path.as_str(), &e.kind, e.size))
        .collect();
    assert_eq!(
        seen,
        [
            ("lnk2", &Kind::Symlink("/etc/shadow".into()), 0),
            ("lnk2~1", &Kind::File, DUP_FILE.len() as u64),
            ("lnk2~2/", &Kind::Dir, 0),
        ]
    );
    // Each PATH leads to its own entry, and only there.
    for e in &top {
        assert_eq!(fs.stat(&e.path).unwrap(), *e, "{}", e.path);
    }
    assert_ne!(top[0].node, top[1].node);
    let mut text = Vec::new();
    fs.open("lnk2~1").unwrap().read_to_end(&mut text).unwrap();
    assert_eq!(text, DUP_FILE);
    // The symlink has no bytes of its own: it is never followed.
    assert!(matches!(fs.open("lnk2"), Err(Error::NoContent { .. })));
    let inside = fs.list("lnk2~2", false).unwrap();
    assert_eq!(inside.len(), 1);
    assert_eq!(inside[0].path, "lnk2~2/y");
    text.clear();
    fs.open(&inside[0].path)
        .unwrap()
        .read_to_end(&mut text)
        .unwrap();
    assert_eq!(text, UNDER_X);
    // The recursive list and a view rooted below spell them the same.
    let all: Vec<String> = fs
        .list("", true)
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(all, ["lnk2", "lnk2~1", "lnk2~2/", "lnk2~2/y"]);
    let sub = fs.sub("lnk2~2").unwrap();
    assert_eq!(sub.stat("y").unwrap().size, UNDER_X.len() as u64);

    let fs = Fs::with_options(&under, pparse::Options::default()).unwrap();
    let top = fs.list("", false).unwrap();
    let seen: Vec<(&str, &Kind)> = top.iter().map(|e| (e.path.as_str(), &e.kind)).collect();
    assert_eq!(
        seen,
        [
            ("link", &Kind::Symlink("/etc".into())),
            ("link~1", &Kind::Dir)
        ]
    );
    assert_eq!(fs.stat("link").unwrap().kind, Kind::Symlink("/etc".into()));
    assert!(matches!(
        fs.list("link", false),
        Err(Error::NotAContainer { .. })
    ));
    let x = fs.list("link~1", false).unwrap();
    assert_eq!(x.len(), 1);
    assert_eq!(
        (x[0].path.as_str(), x[0].size),
        ("link~1/x", UNDER_X.len() as u64)
    );
    assert_eq!(fs.stat("link~1/x").unwrap(), x[0]);
    // The member's name as stored still finds it.
    assert_eq!(fs.stat("link/x").unwrap(), x[0]);
    text.clear();
    fs.open("link~1/x").unwrap().read_to_end(&mut text).unwrap();
    assert_eq!(text, UNDER_X);

    // `cat` and `extract` spell them the same.
    let run = pparse(["cat", "--no-index", dup.to_str().unwrap(), "lnk2~1"]);
    assert_eq!(
        (run.code, run.stdout.as_slice()),
        (0, DUP_FILE),
        "{}",
        run.stderr_text()
    );
    let run = pparse(["cat", "--no-index", under.to_str().unwrap(), "link~1/x"]);
    assert_eq!(
        (run.code, run.stdout.as_slice()),
        (0, UNDER_X),
        "{}",
        run.stderr_text()
    );
    let out = tempfile::tempdir().unwrap();
    let run = pparse([
        "extract",
        "--no-index",
        dup.to_str().unwrap(),
        "lnk2~1",
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    assert_eq!(std::fs::read(out.path().join("lnk2~1")).unwrap(), DUP_FILE);
    for (tar, want) in [
        (&dup, vec![("lnk2~1", DUP_FILE), ("lnk2~2/y", UNDER_X)]),
        (&under, vec![("link~1/x", UNDER_X)]),
    ] {
        let out = tempfile::tempdir().unwrap();
        let run = pparse([
            "extract",
            "--no-index",
            tar.to_str().unwrap(),
            "--out",
            out.path().to_str().unwrap(),
        ]);
        assert_eq!(run.code, 0, "{}", run.stderr_text());
        let mut files = Vec::new();
        walk_files(out.path(), out.path(), &mut files);
        files.sort();
        let want: Vec<(String, Vec<u8>)> = want
            .iter()
            .map(|(p, b)| (p.to_string(), b.to_vec()))
            .collect();
        assert_eq!(files, want, "{}", tar.display());
    }
}

/// Every regular file below `dir`: its path from `root` and its bytes (a
/// link is never followed: none is expected).
fn walk_files(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        assert!(!meta.file_type().is_symlink(), "{} is a link", p.display());
        if meta.is_dir() {
            walk_files(root, &p, out);
        } else {
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            out.push((rel, std::fs::read(&p).unwrap()));
        }
    }
}

/// The names of one folder (contract, "One name per member"): members
/// first in archive order, then folders made by names; a taken name gets
/// the first `~N` no entry of the folder has. Members `a.txt`, `a.txt`,
/// `a.txt~1`, `d/x`, `d` are `a.txt`, `a.txt~2`, `a.txt~1`, `d~1/x`, `d`.
#[test]
fn a_taken_name_gets_the_first_free_suffix() {
    let tmp = tempfile::tempdir().unwrap();
    let tar = tmp.path().join("names.tar");
    python(&format!(
        r#"
import io, tarfile
with tarfile.open({tar:?}, "w", format=tarfile.GNU_FORMAT) as t:
    for name, data in [("a.txt", b"one"), ("a.txt", b"two"), ("a.txt~1", b"real"), ("d/x", b"x"), ("d", b"file d")]:
        i = tarfile.TarInfo(name)
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
"#,
        tar = tar.to_str().unwrap()
    ));
    let fs = Fs::with_options(&tar, pparse::Options::default()).unwrap();
    let listed: Vec<String> = fs
        .list("", false)
        .unwrap()
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(listed, ["a.txt", "a.txt~2", "a.txt~1", "d~1", "d"]);
    for (path, want) in [
        ("a.txt", &b"one"[..]),
        ("a.txt~2", b"two"),
        ("a.txt~1", b"real"),
        ("d~1/x", b"x"),
        ("d/x", b"x"),
        ("d", b"file d"),
    ] {
        let mut got = Vec::new();
        fs.open(path).unwrap().read_to_end(&mut got).unwrap();
        assert_eq!(got, want, "{path}");
    }
    let out = tempfile::tempdir().unwrap();
    let run = pparse([
        "extract",
        "--no-index",
        tar.to_str().unwrap(),
        "--out",
        out.path().to_str().unwrap(),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
    let mut files = Vec::new();
    walk_files(out.path(), out.path(), &mut files);
    files.sort();
    let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(names, ["a.txt", "a.txt~1", "a.txt~2", "d", "d~1/x"]);
    assert_eq!(files[2].1, b"two");
}
