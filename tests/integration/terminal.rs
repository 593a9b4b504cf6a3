//! The real binary in a real pseudo-terminal: keys go in as bytes, the
//! screen comes back through a VT100 parser.

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use portable_pty::{CommandBuilder, PtySize, native_pty_system};

use crate::util::*;

struct Term {
    screen: Arc<Mutex<vt100::Parser>>,
    /// Every byte the program wrote, for sequences the screen does not
    /// show (OSC 52).
    raw: Arc<Mutex<Vec<u8>>>,
    writer: Box<dyn Write + Send>,
    child: Box<dyn portable_pty::Child + Send + Sync>,
}

impl Term {
    fn spawn(args: &[&str], cols: u16, rows: u16) -> Term {
        let pty = native_pty_system()
            .openpty(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a pty");
        let mut cmd = CommandBuilder::new(env!("CARGO_BIN_EXE_pparse"));
        cmd.args(args);
        cmd.env("TERM", "xterm-256color");
        cmd.env_remove("NO_COLOR");
        let child = pty.slave.spawn_command(cmd).expect("spawn pparse");
        drop(pty.slave);
        let mut reader = pty.master.try_clone_reader().unwrap();
        let writer = pty.master.take_writer().unwrap();
        let screen = Arc::new(Mutex::new(vt100::Parser::new(
            std::num::NonZero::new(rows).unwrap(),
            std::num::NonZero::new(cols).unwrap(),
            0,
        )));
        let s = screen.clone();
        let raw = Arc::new(Mutex::new(Vec::new()));
        let r = raw.clone();
        std::thread::spawn(move || {
            let _keep = pty.master;
            let mut buf = [0u8; 8192];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock().unwrap().process(&buf[..n]);
                r.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Term {
            screen,
            raw,
            writer,
            child,
        }
    }

    fn text(&self) -> String {
        self.screen.lock().unwrap().screen().contents()
    }

    fn send(&mut self, bytes: &str) {
        self.writer.write_all(bytes.as_bytes()).unwrap();
        self.writer.flush().unwrap();
        // Let the key be handled before the next one (as a person would).
        std::thread::sleep(Duration::from_millis(60));
    }

    fn wait_for(&self, what: &str, ok: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let t = self.text();
            if ok(&t) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{t}"
            );
            std::thread::sleep(Duration::from_millis(30));
        }
    }
}

#[test]
fn explorer_in_a_terminal_opens_a_truncated_nested_archive() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.tgz");
    std::fs::write(&path, &fixture("nested.tar.gz")[..60_000]).unwrap();
    let mut t = Term::spawn(&[path.to_str().unwrap()], 140, 40);
    t.wait_for("the tree", |s| {
        s.contains("cut.tgz") && s.contains("[gzip]")
    });
    t.wait_for("the parse to end", |s| s.contains("parsed"));
    assert!(t.text().contains("truncated"));
    // Open the file and the tar, search the zip, open it, select a member.
    t.send("\r");
    t.send("\x1b[B");
    t.send("\r");
    t.send("/inner.zip\r");
    t.wait_for("the zip", |s| s.contains("inner.zip  ◐ partial  [zip]"));
    t.send("\r");
    t.send("\x1b[B");
    let src = source_bytes("src/inner/chapter1.txt");
    let hex: Vec<String> = src[..8].iter().map(|b| format!("{b:02x}")).collect();
    let hex = hex.join(" ");
    let text = String::from_utf8_lossy(&src[..7]).replace(' ', "_");
    t.wait_for("the member's bytes", |s| {
        s.contains("chapter1.txt (deflate") && s.contains(&hex) && s.contains(&text)
    });
    // The member is cut off: the inspector says so.
    assert!(t.text().contains("deflate data cut off"), "{}", t.text());
    // `y p` puts its PATH on the terminal's clipboard (OSC 52).
    t.send("yp");
    let osc = pparse_explorer::save::osc52("nested.tar/docs/inner.zip/chapter1.txt");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !t
        .raw
        .lock()
        .unwrap()
        .windows(osc.len())
        .any(|w| w == osc.as_bytes())
    {
        assert!(Instant::now() < deadline, "no OSC 52 sequence came");
        std::thread::sleep(Duration::from_millis(30));
    }
    // `s` offers a name beside the input; Enter writes the bytes that are
    // there, and says they are partial.
    t.send("s");
    let offered = dir.path().join("chapter1.txt");
    t.wait_for("the save prompt", |s| s.contains("save to"));
    t.send("\r");
    t.wait_for("the save", |s| {
        s.contains("wrote ") && s.contains("partial")
    });
    let saved = std::fs::read(&offered).unwrap();
    assert!(!saved.is_empty() && saved.len() < src.len());
    assert_eq!(saved, &src[..saved.len()]);
    // q quits at once and restores the terminal.
    let start = Instant::now();
    t.send("q");
    loop {
        if let Some(status) = t.child.try_wait().unwrap() {
            assert!(status.success(), "exit status {status:?}");
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "did not quit");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn explorer_refuses_to_run_without_a_terminal() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pparse"))
        .arg(fixture_path("ustar.tar"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a terminal"));
}

/// While a long parse runs (4,000 gzip members of 1 MiB of zeros each), the
/// screen updates, keys work, and q quits at once.
#[test]
fn explorer_stays_live_and_quits_mid_parse() {
    use flate2::Compression;
    use flate2::write::GzEncoder;
    let mut member = GzEncoder::new(Vec::new(), Compression::best());
    member.write_all(&vec![0u8; 1 << 20]).unwrap();
    let member = member.finish().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zeros.gz");
    std::fs::write(&path, member.repeat(4000)).unwrap();
    let mut t = Term::spawn(&[path.to_str().unwrap()], 120, 30);
    // Enter expands only a node that has children: wait for the stream.
    t.wait_for("the parse to show progress", |s| {
        s.contains("parsing") && s.contains("Extractions (2)")
    });
    t.send("\r");
    t.wait_for("the decoded stream", |s| {
        s.contains("zeros  ") || s.contains("▾ zeros.gz")
    });
    // Wait for events, never for a fixed time: on a busy 2-core machine
    // a frame can take long, so deadlines are generous.
    let first = t.text();
    t.wait_for("the screen to follow the parse", |s| s != first);
    assert!(
        t.text().contains("parsing"),
        "the parse should still run:\n{}",
        t.text()
    );
    let start = Instant::now();
    t.send("q");
    loop {
        if let Some(status) = t.child.try_wait().unwrap() {
            assert!(status.success());
            break;
        }
        // Quitting does not wait for the parse (4 GB of zeros to decode);
        // the bound leaves room for a machine busy with other work.
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "quitting mid-parse waited for the parse"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
