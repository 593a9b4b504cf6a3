//! `pparse mount`: an [`Fs`] as a read-only FUSE file system. Containers
//! are folders (a zip in a tar is a folder in a folder, as ratarmount's
//! `--recursive` shows them), or, for a member that is a container, the
//! file it is, or both ([`Containers`]), members are files of the bytes pparse
//! recovered, links are links, and every entry's status is the extended
//! attribute `user.pparse.status` (`complete`, or `truncated: why`).
//!
//! Folders are listed when first looked into, each through [`Fs::list`],
//! which waits for that container's parse only; a member is read with
//! positional reads of its bytes. Inode numbers are handed out as entries
//! are met and kept for the life of the mount, one per member (by its
//! [`EntryHandle`], never by its PATH: two members of one name are two inodes,
//! each with its own kind, size and bytes). Names are the ones
//! [`Fs::list`] gives: a name two entries of a folder share is the first
//! member's, the others get `~1`, `~2`, …
//!
//! A link is served as a link: `readlink` gives the target the archive
//! stores, as text. The mount never follows one itself, and never reads
//! anything but the archive's bytes.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation, INodeNo,
    LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEntry, ReplyOpen,
    ReplyXattr, Request,
};

use super::api::{Entry, EntryHandle, File, Fs, Kind};
use crate::status::Status;

/// The extended attribute that holds an entry's status.
pub const STATUS_XATTR: &str = "user.pparse.status";

/// How long the kernel may keep what it was told: nothing changes.
const TTL: Duration = Duration::from_secs(3600);

/// How a member that is a container itself (a jar, `.gz` or `.whl` in a
/// backup) is shown (`pparse mount --containers`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Containers {
    /// A folder of what it holds, under its own name (the default).
    #[default]
    Folders,
    /// The file it is, its bytes as the archive holds them: `cp -r` from
    /// the mount gives back the archive's files as they were.
    Files,
    /// Both: `x.jar` the file, `x.jar.d/` the folder of what it holds.
    Both,
}

/// One inode: what it is, and (for a folder, once looked into) its
/// entries by name.
struct Inode {
    /// The handle its folder is listed or its file opened with.
    node: EntryHandle,
    /// `None` for the root.
    entry: Option<Entry>,
    /// A container shown as the file it is ([`Containers`]).
    as_file: bool,
    children: Option<Arc<Children>>,
}

/// A folder's entries: in order for `readdir`, by name for `lookup` (a
/// folder of a million files is looked up in once each, not scanned).
struct Children {
    list: Vec<(OsString, u64)>,
    by_name: HashMap<OsString, u64>,
}

impl Inode {
    fn is_dir(&self) -> bool {
        self.entry
            .as_ref()
            .is_none_or(|e| e.container && !self.as_file || e.kind == Kind::Dir)
    }
}

/// The FUSE side of a mount.
struct MountFs {
    fs: Fs,
    inodes: RwLock<Vec<Inode>>,
    /// Inodes by the member (or folder) they stand for, and whether as a
    /// file (a container may be both).
    by_node: Mutex<HashMap<(EntryHandle, bool), u64>>,
    containers: Containers,
    files: Mutex<HashMap<u64, Arc<File>>>,
    next_fh: AtomicU64,
    uid: u32,
    gid: u32,
    /// The mtime of every entry: the source's (members' own are not kept).
    time: SystemTime,
}

impl MountFs {
    fn new(fs: Fs, root: EntryHandle, time: SystemTime, containers: Containers) -> MountFs {
        // SAFETY: getuid and getgid only read the process's ids.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        MountFs {
            fs,
            inodes: RwLock::new(vec![Inode {
                node: root,
                entry: None,
                as_file: false,
                children: None,
            }]),
            by_node: Mutex::new(HashMap::new()),
            containers,
            files: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            uid,
            gid,
            time,
        }
    }

    fn attr(&self, ino: u64, node: &Inode) -> FileAttr {
        let (kind, size, perm) = match &node.entry {
            _ if node.is_dir() => (FileType::Directory, 0, 0o555),
            Some(Entry {
                kind: Kind::Symlink(to),
                ..
            }) => (FileType::Symlink, to.len() as u64, 0o777),
            // Read-only, but an executable stays executable.
            Some(e) => (
                FileType::RegularFile,
                e.size,
                0o444 | (e.mode.unwrap_or(0) & 0o111) as u16,
            ),
            None => (FileType::Directory, 0, 0o555),
        };
        let time = node
            .entry
            .as_ref()
            .and_then(|e| e.mtime)
            .and_then(|t| u64::try_from(t).ok())
            .map_or(self.time, |t| UNIX_EPOCH + Duration::from_secs(t));
        FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: time,
            mtime: time,
            ctime: time,
            crtime: time,
            kind,
            perm,
            nlink: if kind == FileType::Directory { 2 } else { 1 },
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            flags: 0,
            blksize: 4096,
        }
    }

    /// The inode of `entry` (`as_file`: a container shown as its bytes),
    /// made on first meeting: one per member and view.
    fn inode_of(&self, entry: Entry, as_file: bool) -> u64 {
        let mut by_node = self.by_node.lock().unwrap_or_else(|e| e.into_inner());
        let key = (entry.node.clone(), as_file);
        if let Some(&ino) = by_node.get(&key) {
            return ino;
        }
        let mut inodes = self.inodes.write().unwrap_or_else(|e| e.into_inner());
        inodes.push(Inode {
            node: entry.node.clone(),
            entry: Some(entry),
            as_file,
            children: None,
        });
        let ino = inodes.len() as u64;
        by_node.insert(key, ino);
        ino
    }

    /// The entries of folder `ino` by name, listed on first use. Names
    /// that two entries share are told apart by [`Fs::list`]'s rule: the
    /// first member keeps it, the others get `~1`, `~2`, …
    fn children(&self, ino: u64) -> Result<Arc<Children>, Errno> {
        let handle = {
            let inodes = self.inodes.read().unwrap_or_else(|e| e.into_inner());
            let node = inodes.get(index(ino)?).ok_or(Errno::ENOENT)?;
            if !node.is_dir() {
                return Err(Errno::ENOTDIR);
            }
            if let Some(c) = &node.children {
                return Ok(c.clone());
            }
            node.node.clone()
        };
        // Outside the locks: listing waits for the container's parse.
        let entries = self.fs.list_node_named(&handle).map_err(|_| Errno::EIO)?;
        let mut out = Vec::with_capacity(entries.len());
        // With `Both`, a container's folder is `NAME.d`, or `NAME.d~1` …
        // when the archive has a member of that name too.
        let taken: std::collections::HashSet<String> = match self.containers {
            Containers::Both => entries.iter().map(|(n, _)| n.clone()).collect(),
            _ => Default::default(),
        };
        for (name, e) in entries {
            let shown_as_file = e.container && e.member && e.kind == Kind::File;
            match self.containers {
                Containers::Files if shown_as_file => {
                    out.push((OsString::from(name), self.inode_of(e, true)));
                }
                Containers::Both if shown_as_file => {
                    let mut folder = format!("{name}.d");
                    let mut k = 0;
                    while taken.contains(&folder) {
                        k += 1;
                        folder = format!("{name}.d~{k}");
                    }
                    out.push((OsString::from(name), self.inode_of(e.clone(), true)));
                    out.push((OsString::from(folder), self.inode_of(e, false)));
                }
                _ => out.push((OsString::from(name), self.inode_of(e, false))),
            }
        }
        let by_name = out.iter().cloned().collect();
        let children = Arc::new(Children { list: out, by_name });
        let mut inodes = self.inodes.write().unwrap_or_else(|e| e.into_inner());
        if let Some(node) = inodes.get_mut(index(ino)?) {
            node.children = Some(children.clone());
        }
        Ok(children)
    }

    fn with_node<T>(&self, ino: INodeNo, f: impl FnOnce(&Inode) -> T) -> Result<T, Errno> {
        let inodes = self.inodes.read().unwrap_or_else(|e| e.into_inner());
        let node = inodes.get(index(u64::from(ino))?).ok_or(Errno::ENOENT)?;
        Ok(f(node))
    }

    fn status_text(node: &Inode) -> String {
        match &node.entry {
            Some(e) if e.status != Status::Complete => match &e.reason {
                Some(r) => format!("{}: {r}", e.status),
                None => e.status.to_string(),
            },
            _ => Status::Complete.to_string(),
        }
    }
}

fn index(ino: u64) -> Result<usize, Errno> {
    usize::try_from(ino)
        .ok()
        .and_then(|i| i.checked_sub(1))
        .ok_or(Errno::ENOENT)
}

impl Filesystem for MountFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        let found = self
            .children(u64::from(parent))
            .and_then(|c| c.by_name.get(name).copied().ok_or(Errno::ENOENT))
            .and_then(|ino| self.with_node(INodeNo(ino), |n| self.attr(ino, n)));
        match found {
            Ok(attr) => reply.entry(&TTL, &attr, Generation(0)),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.with_node(ino, |n| self.attr(u64::from(ino), n)) {
            Ok(attr) => reply.attr(&TTL, &attr),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.with_node(ino, |n| match &n.entry {
            Some(Entry {
                kind: Kind::Symlink(to),
                ..
            }) => Ok(to.clone()),
            _ => Err(Errno::EINVAL),
        }) {
            Ok(Ok(to)) => reply.data(to.as_bytes()),
            Ok(Err(e)) | Err(e) => reply.error(e),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        let node = match self.with_node(ino, |n| (!n.is_dir()).then(|| n.node.clone())) {
            Ok(Some(p)) => p,
            Ok(None) => return reply.error(Errno::EISDIR),
            Err(e) => return reply.error(e),
        };
        match self.fs.open_node(&node) {
            Ok(f) => {
                let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
                self.files
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(fh, Arc::new(f));
                reply.opened(FileHandle(fh), FopenFlags::FOPEN_KEEP_CACHE);
            }
            Err(_) => reply.error(Errno::EIO),
        }
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        // Folders never change: the kernel may keep what it was given.
        reply.opened(
            FileHandle(0),
            FopenFlags::FOPEN_CACHE_DIR | FopenFlags::FOPEN_KEEP_CACHE,
        );
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        let file = self
            .files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&u64::from(fh))
            .cloned();
        let Some(file) = file else {
            return reply.error(Errno::EBADF);
        };
        // Outside the lock: other reads go on while this one decodes.
        let mut buf = vec![0u8; size as usize];
        match file.read_at(offset, &mut buf) {
            Ok(n) => reply.data(&buf[..n]),
            Err(_) => reply.error(Errno::EIO),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: fuser::ReplyEmpty,
    ) {
        self.files
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&u64::from(fh));
        reply.ok();
    }

    fn readdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        let children = match self.children(u64::from(ino)) {
            Ok(c) => c,
            Err(e) => return reply.error(e),
        };
        let kinds: Vec<FileType> = {
            let inodes = self.inodes.read().unwrap_or_else(|e| e.into_inner());
            children
                .list
                .iter()
                .skip(offset.saturating_sub(2) as usize)
                // More than one reply holds: the rest comes in the next.
                .take(1024)
                .map(|(_, c)| {
                    let n = index(*c).ok().and_then(|i| inodes.get(i));
                    n.map_or(FileType::RegularFile, |n| self.attr(*c, n).kind)
                })
                .collect()
        };
        let dots = [
            (u64::from(ino), FileType::Directory, OsString::from(".")),
            (u64::from(ino), FileType::Directory, OsString::from("..")),
        ];
        // `offset` is where the previous call stopped: entries from there.
        let skip = offset.saturating_sub(2) as usize;
        let all = dots.into_iter().enumerate().skip(offset as usize).chain(
            children
                .list
                .iter()
                .skip(skip)
                .zip(kinds)
                .enumerate()
                .map(|(i, ((name, c), k))| (i + 2 + skip, (*c, k, name.clone()))),
        );
        for (i, (c, kind, name)) in all {
            if reply.add(INodeNo(c), (i + 1) as u64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        if name != STATUS_XATTR {
            return reply.error(Errno::ENODATA);
        }
        match self.with_node(ino, MountFs::status_text) {
            Ok(text) => xattr_reply(text.as_bytes(), size, reply),
            Err(e) => reply.error(e),
        }
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        if let Err(e) = self.with_node(ino, |_| ()) {
            return reply.error(e);
        }
        let mut names = STATUS_XATTR.as_bytes().to_vec();
        names.push(0);
        xattr_reply(&names, size, reply);
    }
}

/// The size-then-data protocol of extended attributes.
fn xattr_reply(value: &[u8], size: u32, reply: ReplyXattr) {
    if size == 0 {
        reply.size(u32::try_from(value.len()).unwrap_or(u32::MAX));
    } else if (size as usize) < value.len() {
        reply.error(Errno::ERANGE);
    } else {
        reply.data(value);
    }
}

/// Mounts `fs` read-only at `mountpoint` and serves it until `stop` is
/// set or the file system is unmounted from outside (`umount`); then
/// unmounts it, so no stale mount is left. `time` is the mtime its entries
/// show (the source's).
pub fn serve(
    fs: Fs,
    mountpoint: &Path,
    time: SystemTime,
    containers: Containers,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    let name = fs.session().tree().root().display_name();
    let mut cfg = Config::default();
    cfg.mount_options = vec![
        MountOption::RO,
        MountOption::FSName(format!("pparse:{name}")),
        MountOption::Subtype("pparse".into()),
        MountOption::NoDev,
        MountOption::NoSuid,
    ];
    // Listing a folder waits for its container's parse: other requests go
    // on meanwhile on the other threads.
    cfg.n_threads = Some(4);
    let root = fs.root_node().map_err(std::io::Error::from)?;
    let session = fuser::spawn_mount(MountFs::new(fs, root, time, containers), mountpoint, &cfg)?;
    while !stop.load(Ordering::Acquire) && !session.guard.is_finished() {
        std::thread::sleep(Duration::from_millis(100));
    }
    if session.guard.is_finished() {
        // Unmounted from outside: the session thread has ended.
        return session.join();
    }
    session.umount_and_join()
}

/// The mtime entries of a mount show: the source file's, else now.
pub fn source_time(file: &Path) -> SystemTime {
    std::fs::metadata(file)
        .and_then(|m| m.modified())
        .unwrap_or_else(|_| SystemTime::now())
        .max(UNIX_EPOCH)
}
