//! A process forked while a session parses (a `multiprocessing` or
//! DataLoader worker, see `data::fork`): the child opens a file and reads
//! it whole, its copy of the parent's session neither waits nor hangs
//! when dropped, and the parent's bytes stay right though both decode at
//! once.

use std::io::Write;
use std::time::{Duration, Instant};

use pparse::{Options, Session};

use crate::bounds::{blocks, tar_header};
use crate::util::read_all;

const MEMBERS: usize = 16_000;
const BODY: usize = 4096;

/// Member `i`'s bytes in file `file`.
fn body(file: usize, i: usize) -> Vec<u8> {
    format!("file {file} member {i} ")
        .into_bytes()
        .into_iter()
        .cycle()
        .take(BODY)
        .collect()
}

/// A tar.gz of many members, whose parse takes a while.
fn big_tar_gz(dir: &std::path::Path, file: usize) -> std::path::PathBuf {
    let path = dir.join(format!("many{file}.tar.gz"));
    let out = std::fs::File::create(&path).unwrap();
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::fast());
    for i in 0..MEMBERS {
        gz.write_all(&tar_header(&format!("m{i}.txt"), b'0', BODY as u64))
            .unwrap();
        gz.write_all(&blocks(&body(file, i))).unwrap();
    }
    gz.write_all(&[0; 1024]).unwrap();
    gz.finish().unwrap();
    path
}

/// The member number of a tar member's name, `m{i}.txt`.
fn number(e: &pparse::Extraction) -> Option<usize> {
    std::str::from_utf8(e.name.raw())
        .ok()?
        .strip_prefix('m')?
        .strip_suffix(".txt")?
        .parse()
        .ok()
}

fn members(s: &Session) -> usize {
    s.tree().exts.iter().filter_map(number).count()
}

#[test]
fn a_forked_child_parses_while_its_parent_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = big_tar_gz(dir.path(), 0);
    // The child reads another file, with other bytes: nothing of the
    // parent's it could still see would pass for its own.
    let other = big_tar_gz(dir.path(), 1);
    let out = dir.path().join("child");
    let parent = Session::open(&path, Options::default()).unwrap();
    assert!(
        !parent.is_finished(),
        "the parse ended before the fork: make the file bigger"
    );
    // SAFETY: the child only opens and parses a file, writes one small
    // file and leaves with `_exit`; it prints nothing (another test's
    // thread may hold stdout's lock in the copy it gets).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            if !parent.is_forked() || parent.wait_until(|_| true) {
                return 2;
            }
            let Ok(again) = Session::open(&other, Options::default()) else {
                return 3;
            };
            again.wait();
            let n = members(&again);
            let whole = exact(&again, 1);
            // Dropping the parent's copy joins no thread of the parent's.
            drop(parent);
            if std::fs::write(&out, format!("{n} {whole}")).is_err() {
                return 4;
            }
            0
        }))
        .unwrap_or(5);
        // SAFETY: ends the child without running the test harness's exit.
        unsafe { libc::_exit(code) };
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    let status = loop {
        let mut status = 0;
        // SAFETY: waits for our own child, without blocking.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            break status;
        }
        if Instant::now() > deadline {
            // SAFETY: our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the forked child hangs");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child status {status:#x}"
    );
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        format!("{MEMBERS} true")
    );
    // The parent goes on; every member it reads is exact.
    parent.wait();
    assert_eq!(members(&parent), MEMBERS);
    assert!(exact(&parent, 0));
}

/// Whether every member of the parsed tar reads back as written.
fn exact(s: &Session, file: usize) -> bool {
    let t = s.tree();
    t.exts
        .iter()
        .rev()
        .filter_map(|e| Some((e.id(), number(e)?)))
        .all(|(id, i)| read_all(&t, id) == body(file, i))
}
