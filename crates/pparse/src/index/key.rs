//! Which file an index belongs to, and where the index lives.
//!
//! An index is valid for one version of one file. The key is the file's
//! size, its modification and change times, its inode, and a SHA-256 of
//! its first and last 64 KiB: a file rewritten in place gets a new change
//! time even when a tool sets its mtime back (`rsync -t`, `tar x`), and an
//! index with another key is never used.
//!
//! A shared index (a folder or an object-store prefix that many processes
//! and machines read) cannot use what differs between machines: the inode,
//! the device and the change time. Its key is the size, the mtime (a local
//! file) or the version the server gives (an object's ETag), and the same
//! SHA-256 of the ends; the index's name in the folder is a hash of the
//! size and the ends, so every copy of the same bytes finds it.

use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Where an index is read from and written to.
#[derive(Clone, Debug)]
pub(super) enum Place {
    /// A file on this machine.
    File(PathBuf),
    /// An object (`s3://`, read and written; `http(s)://`, read only).
    Url(String),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::File(p) => write!(f, "{}", crate::data::shown(p)),
            Place::Url(u) => f.write_str(u),
        }
    }
}

/// Bytes hashed at each end of the file.
const SAMPLE: u64 = 64 * 1024;

/// What identifies one version of a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FileKey {
    pub(super) size: u64,
    pub(super) mtime_secs: i64,
    pub(super) mtime_nanos: u32,
    /// Change time and inode, hashed into one number.
    pub(super) change: u64,
    pub(super) sample: [u8; 32],
}

impl FileKey {
    /// The key of the file at `path` as it is now; `shared`: without the
    /// inode, device and change time, which another machine does not share.
    pub(super) fn of(path: &Path, shared: bool) -> io::Result<FileKey> {
        let mut f = crate::data::open_regular(path)?;
        let meta = f.metadata()?;
        let (mtime_secs, mtime_nanos) = match meta.modified()?.duration_since(std::time::UNIX_EPOCH)
        {
            Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
            Err(e) => (
                -(e.duration().as_secs() as i64),
                e.duration().subsec_nanos(),
            ),
        };
        let size = meta.len();
        let change = if shared {
            0
        } else {
            use std::os::unix::fs::MetadataExt;
            let d = Sha256::new()
                .chain_update(meta.ctime().to_le_bytes())
                .chain_update(meta.ctime_nsec().to_le_bytes())
                .chain_update(meta.ino().to_le_bytes())
                .chain_update(meta.dev().to_le_bytes())
                .finalize();
            u64::from_le_bytes(d[..8].try_into().expect("8 bytes"))
        };
        let sample = sample(size, |buf, at| {
            f.seek(SeekFrom::Start(at))?;
            f.read_exact(buf)
        })?;
        Ok(FileKey {
            size,
            mtime_secs,
            mtime_nanos,
            change,
            sample,
        })
    }

    /// The key of a remote object as the server describes it: its size,
    /// its version (`ETag`, else `Last-Modified`; none: only size and
    /// ends tell versions apart) and the hash of its ends, read through
    /// `src`.
    pub(super) fn of_remote(src: &crate::data::RemoteSource) -> io::Result<FileKey> {
        use crate::data::Source;
        let size = src.available();
        let sample = sample(size, |buf, at| {
            match crate::data::read_exact_at(src, at, buf)? {
                true => Ok(()),
                false => Err(io::ErrorKind::UnexpectedEof.into()),
            }
        })?;
        let change = src.version().map_or(0, |v| {
            let d = Sha256::digest(v.as_bytes());
            u64::from_le_bytes(d[..8].try_into().expect("8 bytes")) | 1
        });
        Ok(FileKey {
            size,
            mtime_secs: 0,
            mtime_nanos: 0,
            change,
            sample,
        })
    }

    /// The index's file name in a shared folder or prefix: a hash of the
    /// size and the ends, the same for every copy of the bytes on every
    /// machine (the rest of the key is checked when it is read).
    pub(super) fn shared_name(&self) -> String {
        let d = Sha256::new()
            .chain_update(self.size.to_le_bytes())
            .chain_update(self.sample)
            .finalize();
        let hex: String = d[..16].iter().map(|b| format!("{b:02x}")).collect();
        format!("{hex}.pidx")
    }

    /// A short text that changes whenever the key does: the identity of
    /// this version of the file, for caches kept outside pparse.
    pub(super) fn fingerprint(&self) -> String {
        let d = Sha256::new()
            .chain_update(self.size.to_le_bytes())
            .chain_update(self.mtime_secs.to_le_bytes())
            .chain_update(self.mtime_nanos.to_le_bytes())
            .chain_update(self.change.to_le_bytes())
            .chain_update(self.sample)
            .finalize();
        d[..16].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// SHA-256 of `size` and the first and last [`SAMPLE`] bytes, read with
/// `read(buf, at)`.
fn sample(
    size: u64,
    mut read: impl FnMut(&mut [u8], u64) -> io::Result<()>,
) -> io::Result<[u8; 32]> {
    let mut h = Sha256::new();
    h.update(size.to_le_bytes());
    let mut buf = vec![0u8; SAMPLE.min(size) as usize];
    read(&mut buf, 0)?;
    h.update(&buf);
    if size > SAMPLE {
        let tail = SAMPLE.min(size - SAMPLE);
        buf.resize(tail as usize, 0);
        read(&mut buf, size - tail)?;
        h.update(&buf);
    }
    Ok(h.finalize().into())
}

/// The folder indexes go to by default: `$XDG_CACHE_HOME/pparse/index`,
/// else `~/.cache/pparse/index`. Never beside the file: it may sit on a
/// failing disk or a read-only rescue mount.
pub(super) fn cache_dir() -> Option<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME") {
        Some(x) if !x.is_empty() && Path::new(&x).is_absolute() => PathBuf::from(x),
        _ => PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?).join(".cache"),
    };
    Some(base.join("pparse").join("index"))
}

/// The default index file of `file`: named by a hash of its absolute
/// path, so each file has one index that a new version replaces.
pub(super) fn default_place(file: &Path) -> Option<PathBuf> {
    let abs = std::fs::canonicalize(file).ok()?;
    let digest = Sha256::digest(abs.as_os_str().as_encoded_bytes());
    let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    Some(cache_dir()?.join(format!("{name}.pidx")))
}

/// The default index file of the remote object at `url`: named by a hash
/// of the URL, as a local file's is by its path.
pub(super) fn default_place_of_url(url: &str) -> Option<PathBuf> {
    let digest = Sha256::digest(url.as_bytes());
    let name: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    Some(cache_dir()?.join(format!("{name}.pidx")))
}

/// What identifies the parsers writing or reading an index: pparse's
/// version and a hash of its sources (build.rs), so that every program
/// built from the same sources (the CLI, a library user) shares indexes,
/// and a changed pparse, whose parsers may find other things, never reads
/// an index an older one wrote.
pub(super) fn build_id() -> String {
    format!(
        "{} {}",
        env!("CARGO_PKG_VERSION"),
        env!("PPARSE_SOURCE_HASH")
    )
}

/// Whether an index may be at `place`: nothing there, or a regular file
/// (a symbolic link is followed to read, but renaming over it would
/// replace the link, so one to anything but a regular file is refused).
pub(super) fn check_kind(place: &Path) -> Result<(), String> {
    let meta = match std::fs::metadata(place) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return match std::fs::symlink_metadata(place) {
                // A dangling link: writing would replace the link.
                Ok(_) => Err("is a symbolic link to nothing".into()),
                Err(_) => Ok(()),
            };
        }
        Err(e) => return Err(e.to_string()),
    };
    match crate::data::irregular_kind(&meta) {
        Some(kind) => Err(format!("is {kind}, not a regular file")),
        None => Ok(()),
    }
}
