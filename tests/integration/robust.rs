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

/// Makes a FIFO at `path`.
fn mkfifo(path: &std::path::Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Runs pparse, which must end within 20 s (a sibling read forever would
/// not): its exit status and all it printed. Without an index unless one
/// is named: an index is keyed by FILE alone, and these tests change what
/// is beside it.
fn quick(args: &[&std::ffi::OsStr]) -> (i32, String) {
    let start = Instant::now();
    let mut args = args.to_vec();
    if !args.contains(&"--index".as_ref()) {
        args.push("--no-index".as_ref());
    }
    let run = pparse(args.iter().copied());
    let took = start.elapsed();
    assert!(took < Duration::from_secs(20), "{args:?} took {took:?}");
    (
        run.code,
        format!("{}\n{}", run.stdout_text(), run.stderr_text()),
    )
}

/// Siblings pparse opens itself (a split model's shards, a program's
/// parameters, a model's external data) are read only when they are
/// regular files: a FIFO would hang the open, /dev/zero would be read
/// forever. Each is refused with its path and kind, as a missing one is
/// treated.
#[test]
fn siblings_that_are_not_regular_files_are_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();

    // A GGUF shard that is a FIFO: the split model is damaged, as with a
    // shard missing, and the message says what is there.
    let split = fixture_path("gguf/split");
    for n in ["tiny-00001-of-00003.gguf", "tiny-00003-of-00003.gguf"] {
        std::fs::copy(split.join(n), dir.join(n)).unwrap();
    }
    mkfifo(&dir.join("tiny-00002-of-00003.gguf"));
    let first = dir.join("tiny-00001-of-00003.gguf");
    for cmd in ["tree", "tensors"] {
        let (code, out) = quick(&[cmd.as_ref(), first.as_os_str()]);
        assert_eq!(code, 1, "{cmd}: {out}");
        assert!(
            out.contains("tiny-00002-of-00003.gguf is a FIFO, not a regular file"),
            "{cmd}: {out}"
        );
    }

    // A saved Paddle program whose parameters are a FIFO, then a link to
    // /dev/zero (which was copied to a temporary file until the disk was
    // full): the program is read, the parameters are not, and a note says
    // why.
    let program = dir.join("saved-cnn.json");
    std::fs::copy(fixture_path("paddle/saved-cnn.json"), &program).unwrap();
    let params = dir.join("saved-cnn.pdiparams");
    mkfifo(&params);
    let (code, out) = quick(&["tree".as_ref(), program.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("saved-cnn.pdiparams is a FIFO, not a regular file"),
        "{out}"
    );
    std::fs::remove_file(&params).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &params).unwrap();
    let (code, out) = quick(&["tree".as_ref(), program.as_os_str()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("saved-cnn.pdiparams is a character device, not a regular file"),
        "{out}"
    );
    // `tensors` shows no notes: it ends, and lists nothing read from it
    // (exit 4: none of what it shows).
    let (code, out) = quick(&["tensors".as_ref(), program.as_os_str()]);
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("no tensors found"), "{out}");
    // Opened itself, the link is refused as FILE is.
    let (code, out) = quick(&["tensors".as_ref(), params.as_os_str()]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("not a regular file"), "{out}");

    // An ONNX model whose external data is a FIFO.
    let model = dir.join("model.onnx");
    std::fs::copy(fixture_path("onnx/external/model.onnx"), &model).unwrap();
    mkfifo(&dir.join("model.onnx.data"));
    let (code, out) = quick(&["tensors".as_ref(), model.as_os_str()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("model.onnx.data is a FIFO, not a regular file"),
        "{out}"
    );
}

/// `--index PATH` naming a FIFO, a device or a folder: the index is
/// neither read (a FIFO would hang the open) nor written (a rename would
/// replace /dev/null); a note says so and the command goes on as without
/// an index.
#[test]
fn an_index_that_is_not_a_regular_file_is_neither_read_nor_written() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let fifo = tmp.path().join("index.fifo");
    mkfifo(&fifo);
    let folder = tmp.path().join("index.dir");
    std::fs::create_dir(&folder).unwrap();
    let file = fixture_path("nested.tar.gz");
    let want = pparse(["tree".as_ref(), file.as_os_str(), "--no-index".as_ref()]);
    assert_eq!(want.code, 0, "{}", want.stderr_text());
    let null = std::path::Path::new("/dev/null");
    for (place, kind) in [(fifo.as_path(), "a FIFO"), (null, "a character device")] {
        // Twice: a first run that wrote an index would be read by the second.
        for _ in 0..2 {
            let (code, out) = quick(&[
                "tree".as_ref(),
                file.as_os_str(),
                "--index".as_ref(),
                place.as_os_str(),
            ]);
            assert_eq!(code, 0, "{}: {out}", place.display());
            assert!(
                out.starts_with(&want.stdout_text()),
                "{}: {out}",
                place.display()
            );
            let note = format!(
                "note: the index {}: is {kind}, not a regular file: it is neither read nor written",
                place.display()
            );
            assert!(out.contains(&note), "{}: {out}", place.display());
        }
    }
    // A folder is a shared one: the index goes inside, named by the
    // file's bytes, and a folder of that name is not written over either.
    let into_folder = || {
        quick(&[
            "tree".as_ref(),
            file.as_os_str(),
            "--index".as_ref(),
            folder.as_os_str(),
        ])
    };
    let (code, out) = into_folder();
    assert_eq!(code, 0, "{out}");
    let inside: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(inside.len(), 1, "{inside:?}");
    std::fs::remove_file(&inside[0]).unwrap();
    std::fs::create_dir(&inside[0]).unwrap();
    let (code, out) = into_folder();
    assert_eq!(code, 0, "{out}");
    assert!(out.starts_with(&want.stdout_text()), "{out}");
    let note = format!(
        "note: the index {}: is a folder, not a regular file: it is neither read nor written",
        inside[0].display()
    );
    assert!(out.contains(&note), "{out}");
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::metadata(null).unwrap();
    assert!(meta.file_type().is_char_device() && meta.len() == 0);
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert!(std::fs::metadata(&inside[0]).unwrap().is_dir());
    assert_eq!(std::fs::read_dir(&inside[0]).unwrap().count(), 0);
}
