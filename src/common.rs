//! What every command shares: opening a session, waiting for the parse,
//! resolving a PATH, reporting damage on stderr, ending output quietly on a
//! closed pipe.

use std::cell::RefCell;
use std::io::{self, IsTerminal};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use pparse::engine::{Ledger, Options, Session};
use pparse::extraction::{ExtId, Phase, Tree};
use pparse::status::Status;

/// What ends a command before its status: a failure (exit 2), or a file
/// that holds none of what the command shows (exit 4).
pub(super) enum Fatal {
    /// A usage error, a file that cannot be read, a PATH that does not
    /// exist: exit 2.
    Error(String),
    /// No tensors, no records, no pickle, no program: exit 4, the same
    /// for every command, so a script that runs one over many files can
    /// tell "not this kind of file" from "broken" (1) and "unreadable" (2).
    Absent(String),
}

impl Fatal {
    /// The exit status it ends the command with.
    pub(super) fn code(&self) -> i32 {
        match self {
            Fatal::Error(_) => 2,
            Fatal::Absent(_) => 4,
        }
    }

    /// What is said on stderr (nothing when empty).
    pub(super) fn message(&self) -> &str {
        match self {
            Fatal::Error(m) | Fatal::Absent(m) => m,
        }
    }
}

/// The file a command works on, and the options its session is opened with.
pub(super) struct Input {
    pub(super) file: PathBuf,
    pub(super) options: Options,
    /// What each session opened for the command counted and noted, for
    /// the notes and `--io-stats` printed after it.
    pub(super) ledgers: Rc<RefCell<Vec<Ledger>>>,
}

pub(super) fn open(input: &Input) -> Result<Session, Fatal> {
    let mut session = if let Some(url) = input.url() {
        // The source's errors already name the URL.
        Session::open_url(url, input.options.clone())
            .map_err(|e| Fatal::Error(format!("cannot read {e}")))?
    } else {
        Session::open(&input.file, input.options.clone())
            .map_err(|e| Fatal::Error(format!("cannot read {}: {e}", input.file.display())))?
    };
    // A command's session lives until the process ends.
    session.free_at_exit();
    input.ledgers.borrow_mut().push(session.ledger());
    Ok(session)
}

/// Maps FILE for a command that reads it outside a session (a program or
/// a log read straight from its mapping), counting its reads for
/// `--io-stats`.
pub(super) fn map_file(input: &Input) -> io::Result<pparse::data::MmapSource> {
    let own = Ledger::default();
    let src = pparse::data::MmapSource::open_counted(&input.file, Some(own.counters()))?;
    input.ledgers.borrow_mut().push(own);
    Ok(src)
}

impl Input {
    /// The FILE when it is a URL (`http://`, `https://`, `s3://`).
    pub(super) fn url(&self) -> Option<&str> {
        self.file
            .to_str()
            .filter(|f| pparse::data::is_remote_url(f))
    }
}

/// How progress is shown while a command waits for the parse.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Progress {
    /// Not at all: stderr is not a terminal, or `PPARSE_PROGRESS=0`.
    Off,
    /// One line on the terminal, redrawn in place, once the wait is long.
    InPlace,
    /// `PPARSE_PROGRESS=1`: every update a line of its own, at once, and
    /// one at the end, wherever stderr goes (logs, tests).
    Lines,
}

fn progress_mode() -> Progress {
    match std::env::var_os("PPARSE_PROGRESS").as_deref() {
        Some(v) if v == "0" => Progress::Off,
        Some(v) if v == "1" => Progress::Lines,
        _ if io::stderr().is_terminal() => Progress::InPlace,
        _ => Progress::Off,
    }
}

/// A wait shorter than this draws nothing on a terminal.
const PROGRESS_AFTER: Duration = Duration::from_secs(1);

/// Waits until `until` holds or the parse is over, drawing a progress line
/// on a terminal. Returns whether `until` held.
pub(super) fn wait(session: &Session, mut until: impl FnMut(&Tree) -> bool) -> bool {
    let mode = progress_mode();
    let started = Instant::now();
    let mut drew = false;
    let held = loop {
        let deadline = Instant::now() + Duration::from_millis(250);
        session.wait_until(|t| until(t) || Instant::now() >= deadline);
        if until(&session.tree()) {
            break true;
        }
        if session.is_finished() {
            break until(&session.tree());
        }
        match mode {
            Progress::InPlace if started.elapsed() > PROGRESS_AFTER => {
                say_inline!("\r{} ", progress_line(&session.tree()));
                drew = true;
            }
            Progress::Lines => say!("pparse: {}", progress_line(&session.tree())),
            _ => {}
        }
    };
    if drew {
        say_inline!("\r\x1b[K");
    }
    if mode == Progress::Lines {
        say!("pparse: {}", progress_line(&session.tree()));
    }
    held
}

/// What the parse has done so far: of a folder, the files read and their
/// bytes (a folder has no byte offset to be at); of a file, how far into it.
fn progress_line(t: &Tree) -> String {
    let root = t.root();
    if root.parser() == Some("folder") {
        let (files, done, bytes, done_bytes) = folder_progress(t);
        return format!(
            "reading {}: {done} of {files} files, {} of {}, {} extractions",
            root.display_name(),
            pparse::util::human(done_bytes),
            pparse::util::human(bytes),
            t.len()
        );
    }
    let p = root.progress();
    let total = p.total.unwrap_or(root.size()).max(1);
    format!(
        "parsing {}: {:5.1}% of {}, {} extractions",
        root.display_name(),
        p.done as f64 * 100.0 / total as f64,
        pparse::util::human(total),
        t.len()
    )
}

/// The files of the folders below the root: (files, files parsed, their
/// bytes, bytes of those parsed). Only folders are walked, not what the
/// files hold, so this costs the folder entries (bounded by the folder
/// parser), not the members of every archive.
fn folder_progress(t: &Tree) -> (u64, u64, u64, u64) {
    let (mut files, mut done, mut bytes, mut done_bytes) = (0, 0, 0, 0);
    let mut todo = vec![0];
    while let Some(id) = todo.pop() {
        for &c in &t.exts[id].children {
            let e = &t.exts[c];
            if e.parser() == Some("folder") {
                todo.push(c);
                continue;
            }
            if !e.kind.has_content() {
                continue;
            }
            files += 1;
            bytes += e.size();
            if !matches!(e.phase, Phase::Waiting | Phase::Parsing) {
                done += 1;
                done_bytes += e.size();
            }
        }
    }
    (files, done, bytes, done_bytes)
}

/// Lists damaged extractions of a subtree on stderr; returns the worst status.
pub(super) fn report(tree: &Tree, ids: &[ExtId]) -> Status {
    let mut worst = Status::Complete;
    let mut shown = 0;
    let mut hidden = 0;
    let damaged = || {
        ids.iter()
            .copied()
            .filter(|&id| !tree.exts[id].damage.is_empty())
    };
    let causes = pparse::report::tree::Causes::of(tree, damaged());
    // Damage inherited from one reported here is said once, at its root.
    let reported: std::collections::HashSet<ExtId> = damaged().collect();
    for &id in ids {
        let e = &tree.exts[id];
        let st = tree.status_of(id);
        worst = worst.max(st);
        if st == Status::Complete {
            continue;
        }
        let path = tree.path_of(id);
        let label = if path.is_empty() {
            e.display_name()
        } else {
            path
        };
        for k in 0..e.damage.len() {
            let (root, _) = tree.root_cause(id, k);
            if root != id && reported.contains(&root) {
                continue;
            }
            if shown < 50 {
                // Inherited from damage not said here: its whole chain.
                let said = if root == id {
                    causes.say(tree, id, k)
                } else {
                    e.damage[k].to_string()
                };
                say!("pparse: {label}: {said}");
                shown += 1;
            } else {
                hidden += 1;
            }
        }
        if e.damage.is_empty()
            && let Some(declared) = e.declared_size()
            && shown < 50
        {
            say!(
                "pparse: {label}: truncated: {} of {declared} bytes present",
                e.size()
            );
            shown += 1;
        }
    }
    if hidden > 0 {
        say!("pparse: ... and {hidden} more problems");
    }
    worst
}

pub(super) fn resolve_final(session: &Session, path: &str) -> Result<ExtId, Fatal> {
    // Resolving walks the members and holds the tree's read lock, which
    // the engine then waits for: try a few times a second, not constantly.
    // A throttled check repeats the last answer: `wait` asks twice in a row.
    let mut last: Option<(Instant, bool)> = None;
    let found = wait(session, |t| {
        if let Some((at, found)) = last
            && (found || at.elapsed() < Duration::from_millis(150))
        {
            return found;
        }
        let found = t.resolve(path).is_some_and(|id| t.exts[id].is_final());
        last = Some((Instant::now(), found));
        found
    });
    let t = session.tree();
    match t.resolve(path) {
        Some(id) => Ok(id),
        None if found => Err(Fatal::Error(format!("no extraction named {path:?}"))),
        None => Err(Fatal::Error(no_such_path(&t, path))),
    }
}

/// An error message that names what does exist where the PATH went wrong.
fn no_such_path(t: &Tree, path: &str) -> String {
    format!("no extraction named {path:?}; {}", t.hint(path))
}

pub(super) fn finish_output(r: io::Result<()>) -> Result<(), Fatal> {
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Fatal::Error(format!("cannot write output: {e}"))),
    }
}
