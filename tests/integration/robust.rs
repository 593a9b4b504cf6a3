//! The command line under conditions that are not the file's fault: a bug
//! in a worker thread, output into a closed pipe, inputs that are not
//! regular files. None of them may hang or end in a panic trace.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;

/// A panic on the engine thread ends the command with a clear message and
/// the bug exit status, instead of leaving it waiting forever.
#[test]
fn engine_panic_ends_the_command() {
    let file = fixture_path("nested.tar.gz");
    for args in [
        vec!["tree"],
        vec!["tree", "--json"],
        vec!["nodes"],
        vec!["tensors"],
        vec!["pickle"],
        vec!["records"],
    ] {
        let mut all: Vec<std::ffi::OsString> = args.iter().map(|a| a.into()).collect();
        all.insert(1, file.clone().into());
        // An index would spare the engine its work: there must be a parse.
        all.push("--no-index".into());
        // The hook fires only for the process id of pparse's parent (this
        // test), in debug and release builds alike.
        let me = std::process::id().to_string();
        let run = pparse_env(&all, &[("PPARSE_TEST_ENGINE_PANIC", me.as_str())]);
        assert_eq!(run.code, 101, "{args:?}: {}", run.stderr_text());
        assert!(
            run.stderr_text().contains("internal error"),
            "{args:?}: {}",
            run.stderr_text()
        );
    }
    // Any other value (a variable exported in a shell, a stale one) leaves
    // the engine alone.
    let all = vec![
        std::ffi::OsString::from("tree"),
        file.into(),
        "--no-index".into(),
    ];
    let run = pparse_env(&all, &[("PPARSE_TEST_ENGINE_PANIC", "1")]);
    assert_eq!(run.code, 0, "{}", run.stderr_text());
}

/// A library user is not left waiting either: the session finishes and
/// says why. The panic here comes from the bytes' source.
#[test]
fn engine_panic_finishes_the_session() {
    struct Failing;
    impl pparse::data::Source for Failing {
        fn available(&self) -> u64 {
            4096
        }
        fn is_final(&self) -> bool {
            true
        }
        fn read_at(&self, _: u64, _: &mut [u8]) -> std::io::Result<usize> {
            panic!("source failed on purpose")
        }
        fn describe(&self) -> &'static str {
            "failing"
        }
    }
    let s = pparse::Session::start(
        pparse::name::Name::from("x.gz"),
        std::sync::Arc::new(Failing),
        pparse::Options::default(),
    );
    s.wait();
    assert!(s.is_finished());
    let why = s.failure().expect("a failure is reported");
    assert!(why.contains("on purpose"), "{why}");
}

/// Output into a pipe whose reader is gone (`pparse tree F 2>&1 | head -1`)
/// ends quietly: the exit status is the file's, not a panic's.
#[test]
fn closed_pipe_ends_output_quietly() {
    let mut gz = fixture("nested.tar.gz");
    gz.truncate(gz.len() / 2);
    let tmp = tempfile::tempdir().expect("tempdir");
    let cut = tmp.path().join("cut.tar.gz");
    std::fs::write(&cut, &gz).expect("write");
    for args in [
        vec!["tree"],
        vec!["tree", "--json"],
        vec!["nodes", "--json"],
        vec!["cat", "nested.tar/README.md"],
    ] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let err = writer.try_clone().expect("clone pipe");
        let mut cmd = Command::new(BIN);
        cmd.arg(args[0]).arg(&cut).args(&args[1..]);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(err)
            .spawn()
            .expect("spawn");
        let status = wait_with_deadline(&mut child, &args);
        assert!(
            matches!(status.code(), Some(0 | 1)),
            "{args:?}: {status} (a panic exits 101)"
        );
    }
}

fn wait_with_deadline(
    child: &mut std::process::Child,
    what: &dyn std::fmt::Debug,
) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("wait") {
            return st;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{what:?} did not exit within 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Devices and FIFOs have no end: they are refused (exit 2), not read forever.
#[test]
fn non_regular_files_are_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fifo = tmp.path().join("fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    for file in [std::path::Path::new("/dev/zero"), fifo.as_path()] {
        for cmd in ["tree", "nodes", "tensors"] {
            let run = pparse([cmd.as_ref(), file.as_os_str()]);
            assert_eq!(
                run.code,
                2,
                "{cmd} {}: {}",
                file.display(),
                run.stderr_text()
            );
            assert!(
                run.stderr_text().contains("not a regular file"),
                "{}",
                run.stderr_text()
            );
        }
    }
}
