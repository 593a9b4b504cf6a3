//! Getting bytes out of the explorer: saving the selection to a new file
//! (`s`) and copying a PATH, offset or value to the clipboard (`y`).
//!
//! Saving never overwrites: the file is created with `create_new`, and the
//! name offered is one not taken yet, beside the input (where the user is
//! likely to look for it), not in whatever folder pparse was started from.
//! The copy goes through OSC 52, the terminal's own clipboard sequence,
//! because it is the one that works over SSH and inside tmux; a terminal
//! that ignores it loses nothing, as the status bar shows what was copied.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use base64::Engine as _;

use super::worker::{To, Worker};
use pparse::data::{Data, Range};
use pparse::extraction::{ExtId, Tree};

/// The worker slot of a save: a new save stops the one before.
const SAVE: &str = "save";

/// Most text copied at once: terminals drop longer OSC 52 sequences.
pub const MAX_COPY: usize = 64 * 1024;

/// What `s` writes: bytes of one extraction.
#[derive(Debug, Clone)]
pub struct Chosen {
    /// The extraction.
    pub ext: ExtId,
    /// Its bytes to write.
    pub range: Range,
    /// A file name for them (no folder).
    pub name: String,
}

/// A save under way: its task, bytes written and to write.
#[derive(Debug, Clone, Copy)]
pub struct Saving {
    /// The worker task.
    pub id: u64,
    /// Bytes written so far.
    pub done: u64,
    /// Bytes to write.
    pub total: u64,
}

/// A save's report.
pub enum SaveEvent {
    /// Bytes written so far.
    Progress {
        /// The task.
        id: u64,
        /// Bytes written.
        done: u64,
    },
    /// The save is over: bytes written, or why not.
    Finished {
        /// The task.
        id: u64,
        /// The file (absolute).
        path: PathBuf,
        /// Bytes written, or why the file is not there.
        result: Result<u64, String>,
        /// What the user should know about the bytes written (damage).
        note: Option<String>,
    },
}

/// A file name for `ext`'s bytes `range` (the whole extraction when it is
/// all of them): its own name, or with the range in it.
pub fn file_name(tree: &Tree, ext: ExtId, range: Range) -> String {
    let Some(e) = tree.get(ext) else {
        return "selection.bin".into();
    };
    // A member's own name, not its folders: `docs/guide.txt` saves as
    // `guide.txt`, as a browser names a download.
    let raw = e.name.raw();
    let last = raw
        .rsplit(|&b| b == b'/')
        .find(|c| !c.is_empty())
        .unwrap_or(raw);
    let own = pparse::unpack::sanitize_component(last).unwrap_or_else(|| "bytes".into());
    if range.start == 0 && range.end >= e.available() {
        own
    } else {
        format!("{own}@{:#x}-{:#x}.bin", range.start, range.end)
    }
}

/// Where to offer writing a file called `name`: beside the input file (or
/// in the current folder when the input is not a local file), under a name
/// no file has yet (`name-1.ext`, `name-2.ext`, … when it is taken).
pub fn beside_input(tree: &Tree, name: &str) -> String {
    let dir = tree
        .root()
        .file()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let (stem, ext) = match name.rfind('.') {
        Some(i) if i > 0 => (&name[..i], &name[i..]),
        _ => (name, ""),
    };
    let mut p = dir.join(name);
    for k in 1..10_000 {
        if !p.exists() {
            break;
        }
        p = dir.join(format!("{stem}-{k}{ext}"));
    }
    p.display().to_string()
}

/// `path` made absolute (from the current folder), for messages that must
/// say where something was written.
pub fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// What is wrong in `range` of `ext`, in words, to say beside "wrote".
pub fn damage_note(tree: &Tree, ext: ExtId, range: Range) -> Option<String> {
    let e = tree.get(ext)?;
    let mut unknown = 0u64;
    let mut damaged = None::<Range>;
    for d in &e.damage {
        let r = d.range;
        let hits =
            r.overlaps(&range) || (r.is_empty() && r.start >= range.start && r.start < range.end);
        if !hits {
            continue;
        }
        if d.unknown {
            let lo = r.start.max(range.start);
            unknown += r.end.min(range.end).saturating_sub(lo);
        } else if damaged.is_none() {
            damaged = Some(r);
        }
    }
    let mut parts = Vec::new();
    if unknown > 0 {
        parts.push(format!(
            "{} unknown bytes in it are written as zeros",
            pparse::util::thousands(unknown)
        ));
    }
    if let Some(r) = damaged {
        parts.push(format!("damaged from {:#x}", r.start.max(range.start)));
    }
    // A cut member: what was saved is what is there, and no more.
    let avail = e.available();
    if range.end >= avail {
        match e.declared_size() {
            Some(d) if d > avail => parts.push(format!(
                "partial: {} of its {} bytes are there",
                pparse::util::thousands(avail),
                pparse::util::thousands(d)
            )),
            _ if tree.status_of(ext) == pparse::status::Status::Truncated => {
                parts.push("partial: it is cut off after these bytes".into());
            }
            _ => {}
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// Starts writing `range` of `data` to the new file `path` in the
/// background; the path it will write (absolute), or why it does not start.
pub fn start(
    worker: &Worker,
    data: Data,
    range: Range,
    path: &str,
    note: Option<String>,
) -> Result<Saving, String> {
    let path = path.trim();
    if path.is_empty() {
        return Err("no file name: nothing was written".into());
    }
    let path = absolute(Path::new(path));
    if path.exists() {
        return Err(format!(
            "{} exists: nothing was written (choose another name)",
            pparse::name::escape_str(&path.display().to_string())
        ));
    }
    let id = worker.spawn(SAVE, To::Save, move |_, stop, report, id| {
        let progress = |done| report(Box::new(SaveEvent::Progress { id, done }));
        let result = write_range(&*data, range, &path, stop, &progress);
        report(Box::new(SaveEvent::Finished {
            id,
            path,
            result,
            note,
        }));
    });
    Ok(Saving {
        id,
        done: 0,
        total: range.len(),
    })
}

/// Writes `range` of `data` to a new file at `path` in pieces (never the
/// whole range in memory); removes the file when the write fails or is
/// stopped. Stops early, keeping what it wrote, where the bytes end.
fn write_range(
    data: &dyn pparse::data::Source,
    range: Range,
    path: &Path,
    stop: &AtomicBool,
    progress: &dyn Fn(u64),
) -> Result<u64, String> {
    use std::io::Write;
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .map_err(|e| e.to_string())?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut buf = vec![0u8; 1 << 20];
    let mut at = range.start;
    let mut run = || -> std::io::Result<()> {
        while at < range.end {
            if stop.load(Ordering::Relaxed) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    "save stopped",
                ));
            }
            let want = (range.end - at).min(buf.len() as u64) as usize;
            let n = data.read_at(at, &mut buf[..want])?;
            if n == 0 {
                break;
            }
            out.write_all(&buf[..n])?;
            let before = (at - range.start) >> 24;
            at += n as u64;
            if (at - range.start) >> 24 != before {
                progress(at - range.start);
            }
        }
        out.flush()
    };
    match run() {
        Ok(()) => Ok(at - range.start),
        Err(e) => {
            let _ = std::fs::remove_file(path);
            Err(e.to_string())
        }
    }
}

/// The OSC 52 sequence that puts `text` on the terminal's clipboard.
pub fn osc52(text: &str) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(text.as_bytes());
    format!("\x1b]52;c;{b64}\x07")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osc52_is_base64_between_the_markers() {
        assert_eq!(osc52("a/b.txt"), "\x1b]52;c;YS9iLnR4dA==\x07");
    }
}
