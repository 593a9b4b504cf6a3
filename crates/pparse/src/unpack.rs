//! Writing extractions to disk without ever leaving the output directory.
//!
//! Names in archives are hostile input: `../x`, `/etc/passwd`, `a/../../x`,
//! names with escape sequences, 10,000-byte names, the same name twice, a
//! member that is a file where a later member needs a directory. The
//! [`Extractor`] maps each logical path to a physical one under its root:
//!
//! * every component is sanitised: `.`/`..`/empty components are dropped,
//!   control and bidirectional characters become `_`, Windows device names get
//!   a `_` prefix, over-long components are shortened with a hash;
//! * nothing is ever written through a symlink: directories are created one
//!   component at a time and checked, files are opened with `O_NOFOLLOW` and
//!   `O_EXCL`, and pparse itself never creates links;
//! * an existing file or a clash gets a `~N` suffix, so nothing is overwritten.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::data::Source;

/// Longest file name component written (Linux allows 255 bytes).
const MAX_COMPONENT: usize = 200;
/// Longest path below the root before it is flattened.
const MAX_PATH: usize = 3800;

/// Turns one raw name component into a safe file name, or `None` for
/// components that must be dropped (`.`, `..`, empty).
pub fn sanitize_component(raw: &[u8]) -> Option<String> {
    if raw.is_empty() || raw == b"." || raw == b".." {
        return None;
    }
    let text = String::from_utf8_lossy(raw);
    let mut s: String = text
        .chars()
        .map(|c| {
            if c.is_control()
                || c == '\u{fffd}'
                || matches!(c as u32, 0x200b..=0x200f | 0x202a..=0x202e | 0x2066..=0x2069 | 0xfeff)
            {
                '_'
            } else {
                c
            }
        })
        .collect();
    let stem = s.split('.').next().unwrap_or("").to_ascii_uppercase();
    let device = matches!(stem.as_str(), "CON" | "PRN" | "AUX" | "NUL")
        || (stem.len() == 4
            && (stem.starts_with("COM") || stem.starts_with("LPT"))
            && stem.as_bytes()[3].is_ascii_digit());
    if device {
        s.insert(0, '_');
    }
    if s.len() > MAX_COMPONENT {
        let mut cut = MAX_COMPONENT - 10;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s = format!("{}~{:08x}", &s[..cut], crc32fast::hash(raw));
    }
    Some(s)
}

/// Splits a raw member name into sanitised components (`/` and `\` separate).
pub fn components(raw: &[u8]) -> Vec<String> {
    raw.split(|&b| b == b'/' || b == b'\\')
        .filter_map(sanitize_component)
        .collect()
}

/// What [`Extractor::create`] does with a file of the same name that was
/// in the folder before (not one it wrote: two members of one name are
/// always both written, the second as `name~1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// Leave it, and write nothing for this member.
    Skip,
    /// Write beside it, as `name~1.ext`.
    Rename,
}

/// Writes files and directories under one root. See the module docs.
pub struct Extractor {
    root: PathBuf,
    existing: Existing,
    /// Files found in the way: left as they were, written beside.
    kept_old: u64,
    beside: u64,
    dirs: HashMap<Vec<String>, PathBuf>,
    taken: HashSet<PathBuf>,
    /// The copy buffer, allocated once: zeroing 1 MiB for every small file
    /// of a big archive cost more than writing the files.
    buf: Vec<u8>,
}

impl Extractor {
    /// Creates `root` if needed; `existing` says what to do with files of
    /// the same names already there.
    pub fn new(root: &Path, existing: Existing) -> io::Result<Extractor> {
        fs::create_dir_all(root)?;
        let root = root.canonicalize()?;
        let mut dirs = HashMap::new();
        dirs.insert(Vec::new(), root.clone());
        Ok(Extractor {
            root,
            existing,
            kept_old: 0,
            beside: 0,
            dirs,
            taken: HashSet::new(),
            buf: Vec::new(),
        })
    }

    /// The directory everything is written below.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The physical directory for a logical directory path, created safely.
    pub fn dir(&mut self, logical: &[String]) -> io::Result<PathBuf> {
        if let Some(p) = self.dirs.get(logical) {
            return Ok(p.clone());
        }
        let (last, parent) = logical.split_last().expect("root is always mapped");
        let base = self.dir(parent)?;
        let mut n = 0;
        loop {
            let cand = base.join(suffixed(last, n));
            match fs::create_dir(&cand) {
                Ok(()) => {
                    self.dirs.insert(logical.to_vec(), cand.clone());
                    return Ok(cand);
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    let meta = fs::symlink_metadata(&cand)?;
                    if meta.is_dir()
                        && !meta.file_type().is_symlink()
                        && !self.taken.contains(&cand)
                    {
                        self.dirs.insert(logical.to_vec(), cand.clone());
                        return Ok(cand);
                    }
                }
                Err(e) => return Err(e),
            }
            n += 1;
            if n > 10_000 {
                return Err(io::Error::other("too many name clashes"));
            }
        }
    }

    /// How many files already in the folder were in the way: left as they
    /// were ([`Existing::Skip`]), and written beside ([`Existing::Rename`]).
    pub fn clashes(&self) -> (u64, u64) {
        (self.kept_old, self.beside)
    }

    /// Creates a new file for `logical` (never overwriting) and returns it
    /// with its physical path; `None` when a file was already there and is
    /// left as it is ([`Existing::Skip`]).
    pub fn create(&mut self, logical: &[String]) -> io::Result<Option<(File, PathBuf)>> {
        let mut logical = logical.to_vec();
        if logical.is_empty() {
            logical.push("_".into());
        }
        let total: usize = logical.iter().map(|c| c.len() + 1).sum();
        if total > MAX_PATH {
            let name = logical.last().cloned().unwrap_or_default();
            let joined = logical.join("/");
            logical = vec![format!(
                "long-path~{:08x}~{}",
                crc32fast::hash(joined.as_bytes()),
                name
            )];
        }
        let (last, parent) = logical.split_last().expect("non-empty");
        let dir = self.dir(parent)?;
        let mut n = 0;
        loop {
            let cand = dir.join(suffixed(last, n));
            let opened = OpenOptions::new()
                .write(true)
                .create_new(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&cand);
            match opened {
                Ok(f) => {
                    self.taken.insert(cand.clone());
                    if n > 0 && !self.taken.contains(&dir.join(last)) {
                        self.beside += 1;
                    }
                    return Ok(Some((f, cand)));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    // Not one this extraction wrote: the user's.
                    if n == 0 && !self.taken.contains(&cand) && self.existing == Existing::Skip {
                        self.kept_old += 1;
                        return Ok(None);
                    }
                }
                Err(e) => return Err(e),
            }
            n += 1;
            if n > 10_000 {
                return Err(io::Error::other("too many name clashes"));
            }
        }
    }

    /// Writes the bytes of `src` (a member opened through `pparse::fs`) to
    /// a new file at `logical`, 1 MiB at a time; returns where and how many
    /// bytes.
    pub fn write_from(
        &mut self,
        logical: &[String],
        src: &mut dyn io::Read,
    ) -> io::Result<Option<(PathBuf, u64)>> {
        let Some((mut f, path)) = self.create(logical)? else {
            return Ok(None);
        };
        self.buf.resize(1 << 20, 0);
        let mut n = 0u64;
        loop {
            let k = src.read(&mut self.buf)?;
            if k == 0 {
                return Ok(Some((path, n)));
            }
            f.write_all(&self.buf[..k])?;
            n += k as u64;
        }
    }
}

/// `name`, `name~1`, `name~2`, ... keeping a file extension at the end.
fn suffixed(name: &str, n: usize) -> String {
    if n == 0 {
        return name.to_string();
    }
    match name.rfind('.') {
        Some(i) if i > 0 => format!("{}~{n}{}", &name[..i], &name[i..]),
        _ => format!("{name}~{n}"),
    }
}

/// Streams every available byte of a source to a writer, 1 MiB at a time.
pub fn copy_source(src: &dyn Source, out: &mut impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    loop {
        let n = src.read_at(off, &mut buf)?;
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n])?;
        off += n as u64;
    }
    Ok(off)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_components() {
        assert_eq!(components(b"../../etc/passwd"), vec!["etc", "passwd"]);
        assert_eq!(components(b"/abs/x"), vec!["abs", "x"]);
        assert_eq!(components(b"a/./b//c/.."), vec!["a", "b", "c"]);
        assert_eq!(components(b"..\\..\\win"), vec!["win"]);
        assert_eq!(components(b"e\x1b[31mvil\x07"), vec!["e_[31mvil_"]);
        assert_eq!(components(b"CON.txt"), vec!["_CON.txt"]);
        assert_eq!(components(b"\xff\xfe"), vec!["__"]);
        let long = vec![b'x'; 1000];
        assert!(components(&long)[0].len() <= MAX_COMPONENT);
    }

    #[test]
    fn suffixes_keep_extension() {
        assert_eq!(suffixed("a.txt", 2), "a~2.txt");
        assert_eq!(suffixed(".bashrc", 1), ".bashrc~1");
        assert_eq!(suffixed("plain", 1), "plain~1");
    }
}
