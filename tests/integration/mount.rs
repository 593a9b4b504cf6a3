//! `pparse mount` for real, through the kernel's FUSE: every file of
//! `nested.tar.gz` (a zip in a zip in a tar in a gzip) read back from the
//! mount against the files it was made from, by Rust and by Python;
//! statuses as extended attributes; a cut archive's member readable up to
//! what was recovered; SIGTERM and `umount` each end it, and no mount is
//! left behind. Where FUSE cannot be used the test says so and skips.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

fn mounted(at: &Path) -> bool {
    let at = at.to_string_lossy().to_string();
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(at.as_str()))
}

/// A running `pparse mount`, taken down when dropped.
pub(crate) struct Mount {
    child: Child,
    pub(crate) at: PathBuf,
    _dir: tempfile::TempDir,
}

impl Mount {
    /// Mounts `file`; `None` (said on stderr) where FUSE is not usable.
    pub(crate) fn start(file: &Path) -> Option<Mount> {
        Mount::start_with(file, &[])
    }

    /// Mounts `file` with more arguments after the mount point.
    fn start_with(file: &Path, args: &[&str]) -> Option<Mount> {
        if std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse")
            .is_err()
        {
            eprintln!("SKIPPED: /dev/fuse cannot be opened here: no FUSE to mount with");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let at = dir.path().join("mnt");
        std::fs::create_dir(&at).unwrap();
        let mut child = Command::new(BIN)
            .arg("mount")
            .arg(file)
            .arg(&at)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !mounted(&at) {
            if let Some(st) = child.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
                // Exit 2: it could not mount (no permission, no
                // fusermount3 for a user): this machine cannot run it.
                // Anything else (a panic is 101) is a bug.
                if st.code() == Some(2) {
                    eprintln!("SKIPPED: pparse mount cannot mount here: {err}");
                    return None;
                }
                panic!("pparse mount ended ({st}) before mounting: {err}");
            }
            assert!(Instant::now() < deadline, "not mounted after 60 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(Mount {
            child,
            at,
            _dir: dir,
        })
    }

    /// Sends `signal` and waits for the process to end; returns its code.
    pub(crate) fn stop(&mut self, signal: i32) -> Option<i32> {
        // SAFETY: kill sends a signal to the child this test started.
        unsafe { libc::kill(self.child.id() as i32, signal) };
        self.wait()
    }

    fn wait(&mut self) -> Option<i32> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code();
            }
            assert!(Instant::now() < deadline, "pparse mount did not end");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            // SAFETY: as in `stop`.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
            let _ = self.child.wait();
        }
        if mounted(&self.at) {
            let _ = Command::new("umount").arg(&self.at).status();
        }
    }
}

fn xattr(path: &Path, name: &str) -> Option<String> {
    let p = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let n = std::ffi::CString::new(name).unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: both strings are NUL-terminated and buf is as long as said.
    let got = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    (got >= 0).then(|| String::from_utf8_lossy(&buf[..got as usize]).into_owned())
}

#[test]
fn a_mounted_archive_is_read_back_file_by_file_and_unmounts() {
    let Some(mut m) = Mount::start(&fixture_path("nested.tar.gz")) else {
        return;
    };
    let leaves = leaves("nested.tar.gz");
    for leaf in &leaves {
        let at = m.at.join(&leaf.path);
        let got = std::fs::read(&at).unwrap_or_else(|e| panic!("{}: {e}", at.display()));
        let want = std::fs::read(fixture_path(&leaf.source)).unwrap();
        assert!(got == want, "{} differs", leaf.path);
        assert_eq!(
            xattr(&at, "user.pparse.status").as_deref(),
            Some("complete")
        );
    }
    // Members show the times their tar headers give.
    for m_ in archive("nested.tar.gz")["members"].as_array().unwrap() {
        let path = m.at.join(s(&m_["path"]));
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let t = meta
            .modified()
            .unwrap()
            .duration_since(std::time::UNIX_EPOCH);
        assert_eq!(t.unwrap().as_secs(), u(&m_["mtime"]), "{}", path.display());
    }
    // Folders: the tar's directories, and containers as folders.
    let names = |p: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(m.at.join(p))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names("nested.tar/docs"), ["guide.txt", "inner.zip"]);
    assert!(m.at.join("nested.tar/docs/inner.zip/deep.zip").is_dir());
    assert_eq!(
        std::fs::read_link(m.at.join("nested.tar/latest.md")).unwrap(),
        Path::new("README.md")
    );
    // Read through Python, as a data loader would.
    let script = "import os, sys, hashlib\n\
        n = 0\n\
        for root, dirs, files in os.walk(sys.argv[1]):\n\
        \x20   for f in files:\n\
        \x20       p = os.path.join(root, f)\n\
        \x20       if os.path.islink(p): continue\n\
        \x20       with open(p, 'rb') as fh: fh.seek(0, 2); size = fh.tell(); fh.seek(size // 2); fh.read()\n\
        \x20       n += 1\n\
        print(n)\n";
    match Command::new("python3")
        .arg("-c")
        .arg(script)
        .arg(&m.at)
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let n: usize = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
            assert_eq!(n, leaves.len(), "files Python walked");
        }
        Err(e) => eprintln!("SKIPPED the Python walk: no python3 ({e})"),
    }
    // SIGTERM: unmounted, exit 0.
    assert_eq!(m.stop(libc::SIGTERM), Some(0));
    assert!(!mounted(&m.at), "a stale mount is left");
}

#[test]
fn a_cut_archive_mounts_with_its_recovered_bytes_and_umount_ends_it() {
    let bytes = fixture("nested.tar.gz");
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.tar.gz");
    std::fs::write(&cut, &bytes[..bytes.len() * 3 / 5]).unwrap();
    let Some(mut m) = Mount::start(&cut) else {
        return;
    };
    let mut truncated = 0;
    for leaf in leaves("nested.tar.gz") {
        let at = m.at.join(&leaf.path);
        let Ok(got) = std::fs::read(&at) else {
            continue;
        };
        let want = std::fs::read(fixture_path(&leaf.source)).unwrap();
        assert!(
            want.starts_with(&got),
            "{}: not a prefix of the real bytes",
            leaf.path
        );
        let status = xattr(&at, "user.pparse.status").unwrap();
        if got.len() < want.len() {
            assert!(status.starts_with("truncated"), "{}: {status}", leaf.path);
            truncated += 1;
        }
    }
    assert!(truncated >= 1, "no member was cut");
    // `umount` from outside: the process ends by itself.
    let st = Command::new("umount").arg(&m.at).status().unwrap();
    assert!(st.success());
    assert!(m.wait().is_some());
    assert!(!mounted(&m.at));
}

/// A backup made with `tar -C dir -cf backup.tar .` mounts as `tar x`
/// would write it: `backup.tar/a/x`, no folder for `.` (once `_.`).
#[test]
fn a_backup_of_dot_mounts_as_tar_x_writes_it() {
    let (_tmp, tgz) = dot_tar_gz();
    let Some(mut m) = Mount::start(&tgz) else {
        return;
    };
    let names = |p: &str| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(m.at.join(p))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    assert_eq!(names(""), ["backup.tar"]);
    assert_eq!(names("backup.tar"), ["a", "b"]);
    assert_eq!(names("backup.tar/a"), ["x", "z"]);
    for (name, bytes) in DOT_TAR_FILES {
        let at = m.at.join("backup.tar").join(name);
        assert_eq!(std::fs::read(&at).unwrap(), *bytes, "{}", at.display());
    }
    assert_eq!(m.stop(libc::SIGTERM), Some(0));
    assert!(!mounted(&m.at), "a stale mount is left");
}

/// A zip of 20,000 entries written by Python's zipfile, mounted, and every
/// file read whole through the mount, as a data loader would: the zip is
/// read from the file about once, and each entry's bytes are served from
/// the cache about once (`--io-stats`, printed when it unmounts).
#[test]
fn every_file_of_a_mounted_zip_of_20k_entries_is_read_about_once() {
    const N: usize = 20_000;
    let tmp = tempfile::tempdir().unwrap();
    let zip = tmp.path().join("many.zip");
    let want: u64 = String::from_utf8(python(&format!(
        "import zipfile\n\
         with zipfile.ZipFile({p:?}, 'w', zipfile.ZIP_DEFLATED) as z:\n\
         \x20   for i in range({N}):\n\
         \x20       z.writestr(f'dir{{i % 100}}/file{{i}}.txt', f'entry {{i}}\\n' * (1 + i % 7))\n\
         print(sum(i.file_size for i in zipfile.ZipFile({p:?}).infolist()))\n",
        p = zip.display().to_string()
    )))
    .unwrap()
    .trim()
    .parse()
    .unwrap();
    let size = std::fs::metadata(&zip).unwrap().len();
    let Some(mut m) = Mount::start_with(&zip, &["--io-stats"]) else {
        return;
    };
    let (mut files, mut bytes) = (0usize, 0u64);
    let mut dirs = vec![m.at.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                dirs.push(e.path());
            } else {
                bytes += std::fs::read(e.path()).unwrap().len() as u64;
                files += 1;
            }
        }
    }
    assert_eq!((files, bytes), (N, want));
    assert_eq!(m.stop(libc::SIGTERM), Some(0));
    let mut err = String::new();
    std::io::Read::read_to_string(m.child.stderr.as_mut().unwrap(), &mut err).unwrap();
    let io = io_counts(&err);
    let count = |k: &str| io[k].as_u64().unwrap_or_else(|| panic!("{k} in {io}"));
    assert!(count("file_read") <= 2 * size, "{io} for a zip of {size} B");
    assert!(
        // Decoded where listed, and again where read: twice at most.
        (want..=2 * want).contains(&(count("decoded") + count("redecoded"))),
        "{io} for {want} B of entries"
    );
    assert!(
        count("from_cache") <= 3 * want,
        "{io} for {want} B of entries"
    );
}

/// Members of one name through the mount (issue 32): a symlink `lnk2 ->
/// /etc/shadow`, a file `lnk2` and a directory `lnk2/` are `lnk2` (a
/// symlink whose readlink is the stored target), `lnk2~1` (a file of the
/// archive's bytes) and `lnk2~2` (a folder holding `y`), each its own
/// inode; a member `link/x` under a symlink `link` is `link~1/x`. No
/// file of the mount reads the host's /etc/shadow.
#[test]
fn members_of_one_name_are_inodes_of_their_own() {
    use std::os::unix::fs::MetadataExt;
    let (_tmp, dup, under) = link_tars();
    let shadow = std::fs::read("/etc/shadow").ok();
    let Some(mut m) = Mount::start_with(&dup, &["--no-index"]) else {
        return;
    };
    let at = |p: &str| m.at.join(p);
    let mut names: Vec<String> = std::fs::read_dir(&m.at)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["lnk2", "lnk2~1", "lnk2~2"]);
    let meta = |p: &str| std::fs::symlink_metadata(at(p)).unwrap();
    assert!(meta("lnk2").file_type().is_symlink());
    assert_eq!(
        std::fs::read_link(at("lnk2")).unwrap(),
        Path::new("/etc/shadow")
    );
    assert!(meta("lnk2~1").file_type().is_file());
    assert_eq!(meta("lnk2~1").len(), DUP_FILE.len() as u64);
    assert_eq!(std::fs::read(at("lnk2~1")).unwrap(), DUP_FILE);
    assert!(meta("lnk2~2").is_dir());
    assert_eq!(std::fs::read(at("lnk2~2/y")).unwrap(), UNDER_X);
    let inodes: std::collections::BTreeSet<u64> = ["", "lnk2", "lnk2~1", "lnk2~2", "lnk2~2/y"]
        .iter()
        .map(|p| meta(p).ino())
        .collect();
    assert_eq!(inodes.len(), 5, "inode numbers are shared: {inodes:?}");
    // (getxattr follows a link: the link's own attribute is not asked.)
    for p in ["lnk2~1", "lnk2~2", "lnk2~2/y"] {
        assert_eq!(
            xattr(&at(p), "user.pparse.status").as_deref(),
            Some("complete")
        );
    }
    // Only the archive's bytes are read: no regular file of the mount holds
    // the host's /etc/shadow.
    for p in ["lnk2~1", "lnk2~2/y"] {
        assert_ne!(Some(std::fs::read(at(p)).unwrap()), shadow, "{p}");
    }
    assert_eq!(m.stop(libc::SIGTERM), Some(0));

    let Some(mut m) = Mount::start_with(&under, &["--no-index"]) else {
        return;
    };
    let at = |p: &str| m.at.join(p);
    let mut names: Vec<String> = std::fs::read_dir(&m.at)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["link", "link~1"]);
    let meta = |p: &str| std::fs::symlink_metadata(at(p)).unwrap();
    assert!(meta("link").file_type().is_symlink());
    assert_eq!(std::fs::read_link(at("link")).unwrap(), Path::new("/etc"));
    assert!(meta("link~1").is_dir());
    assert!(meta("link~1/x").is_file());
    assert_eq!(std::fs::read(at("link~1/x")).unwrap(), UNDER_X);
    assert_ne!(meta("link").ino(), meta("link~1").ino());
    assert_eq!(m.stop(libc::SIGTERM), Some(0));
    assert!(!mounted(&m.at), "a stale mount is left");
}

/// Every regular file below `dir`, by path relative to it, with its bytes.
fn regular_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p);
            } else if meta.is_file() {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// `--containers files`: a zip in the tar is the file it is, so the
/// mount's files are `tar x`'s, byte for byte (GNU tar extracts the
/// reference); `both` adds `inner.zip.d/` with what it holds.
#[test]
fn containers_mount_as_files_folders_or_both() {
    let file = fixture_path("nested.tar.gz");
    let reference = tempfile::tempdir().unwrap();
    let untar = Command::new("tar")
        .arg("-xzf")
        .arg(&file)
        .arg("-C")
        .arg(reference.path())
        .status()
        .expect("run GNU tar");
    assert!(untar.success());
    let want = regular_files(reference.path());
    assert!(want.iter().any(|(p, _)| p == "docs/inner.zip"), "{want:?}");

    let Some(mut m) = Mount::start_with(&file, &["--containers", "files"]) else {
        return;
    };
    let got = regular_files(&m.at.join("nested.tar"));
    assert_eq!(
        got.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(),
        want.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>()
    );
    assert!(got == want, "the mount's files differ from tar x's");
    assert!(
        std::fs::metadata(m.at.join("nested.tar/docs/inner.zip"))
            .unwrap()
            .is_file()
    );
    assert_eq!(m.stop(libc::SIGTERM), Some(0));

    let Some(mut m) = Mount::start_with(&file, &["--containers", "both"]) else {
        return;
    };
    let docs = m.at.join("nested.tar/docs");
    let inner = std::fs::read(docs.join("inner.zip")).unwrap();
    let (_, want_inner) = want.iter().find(|(p, _)| p == "docs/inner.zip").unwrap();
    assert!(&inner == want_inner);
    let folder = docs.join("inner.zip.d");
    assert!(std::fs::metadata(&folder).unwrap().is_dir());
    // What the folder holds is what the zip holds (Python's zipfile).
    let listed = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile; print('\\n'.join(sorted(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if not n.endswith('/'))))",
        ])
        .arg(reference.path().join("docs/inner.zip"))
        .output()
        .unwrap();
    let names: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(String::from)
        .collect();
    for n in &names {
        assert!(folder.join(n).exists(), "{n} in {}", folder.display());
    }
    // The deeper zip too: a file and a folder.
    assert!(
        std::fs::metadata(folder.join("deep.zip"))
            .unwrap()
            .is_file()
    );
    assert!(
        std::fs::metadata(folder.join("deep.zip.d"))
            .unwrap()
            .is_dir()
    );
    assert_eq!(m.stop(libc::SIGTERM), Some(0));

    // The default is unchanged: a container is a folder.
    let Some(mut m) = Mount::start(&file) else {
        return;
    };
    assert!(
        std::fs::metadata(m.at.join("nested.tar/docs/inner.zip"))
            .unwrap()
            .is_dir()
    );
    assert_eq!(m.stop(libc::SIGTERM), Some(0));
}
