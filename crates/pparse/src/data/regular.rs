//! Opening a file by path when only a regular file will do.
//!
//! Every file pparse opens by path (the opened FILE, the siblings it finds
//! beside it: GGUF shards, a program's `.pdiparams`, ONNX external data,
//! an index) is read through [`open_regular`]. A FIFO, a device, a socket
//! or a folder under such a name is refused with its kind: a FIFO blocks
//! the open itself, and `/dev/zero` never ends.

use std::fs::{File, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

/// What a file that is not regular is, in words ("a FIFO"); `None` for a
/// regular file.
pub fn irregular_kind(meta: &Metadata) -> Option<&'static str> {
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a folder")
    } else if t.is_fifo() {
        Some("a FIFO")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else if t.is_symlink() {
        Some("a symbolic link")
    } else {
        Some("not a file")
    }
}

/// The error for `path`, which is `kind`: it names both.
pub fn not_regular(path: &Path, kind: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} is {kind}, not a regular file", shown(path)),
    )
}

/// `path` for a message on a terminal: control characters escaped (a
/// sibling's name may come from the file itself).
pub fn shown(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Opens `path` for reading when it is a regular file (a symbolic link to
/// one is followed). Anything else is refused before it is opened, and
/// checked again on the opened file (opened without blocking, so a FIFO
/// put there in between cannot hang the open): the error names the path
/// and what it is.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let meta = std::fs::metadata(path)?;
    if let Some(kind) = irregular_kind(&meta) {
        return Err(not_regular(path, kind));
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    if let Some(kind) = irregular_kind(&meta) {
        return Err(not_regular(path, kind));
    }
    // Blocking reads again: a regular file ignores the flag, but a later
    // reader should not have to know it was set.
    // SAFETY: fcntl on a descriptor this function owns, with plain flags.
    unsafe {
        let fd = file.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK);
        }
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_open() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(open_regular(&file).is_ok());
        let e = open_regular(dir.path()).unwrap_err();
        assert!(e.to_string().contains("is a folder"), "{e}");
        let e = open_regular(Path::new("/dev/null")).unwrap_err();
        assert!(
            e.to_string().contains("/dev/null is a character device"),
            "{e}"
        );
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open_regular(&fifo).unwrap_err();
        assert!(e.to_string().contains("is a FIFO"), "{e}");
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = open_regular(&link).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
    }
}
