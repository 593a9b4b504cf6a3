//! Nested containers as a file system: a file in a zip in a tar in a gzip
//! is listed, stat'ed and opened like a file on disk, as a training job or
//! a notebook wants it (`fs.open("train/0001.jpg")`), without unpacking.
//!
//! ```
//! use std::io::Read;
//!
//! // A zip in a zip in a tar in a gzip (fixtures/nested.tar.gz in this
//! // repository).
//! # let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/nested.tar.gz");
//! let fs = pparse::fs::Fs::new(path)?;
//! for entry in fs.list("nested.tar/docs/inner.zip", false)? {
//!     println!("{} {} bytes, {}", entry.path, entry.size, entry.status);
//! }
//! let mut text = String::new();
//! fs.open("nested.tar/docs/inner.zip/deep.zip/x.txt")?
//!     .read_to_string(&mut text)?;
//! assert_eq!(text.len(), 5000);
//!
//! // A view rooted below, as PFIO's `subfs`.
//! let zip = fs.sub("nested.tar/docs/inner.zip")?;
//! assert_eq!(zip.stat("deep.zip/y.txt")?.size, 4000);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Paths are the contract's PATH (docs/contract.md): the names from the top
//! down joined by `/`, where a member's own `/`s are part of its name.
//! Every entry has a path of its own: of two members of one name the
//! second is `NAME~1` (a symlink `lnk2`, then a file `lnk2~1`), and
//! members stored under a symlink's name (`link/x`) are in the folder
//! `link~1` (docs/contract.md, "One name per member"). An
//! [`Fs`] is a `Session` parsing in the background; each call waits only
//! until what it names is there (a member near the start of a huge archive
//! opens before the rest is read). Handles are `Send + Sync`: many threads
//! read at once, each [`File`] read is a positional read of the bytes, and
//! no lock of the tree is held while reading them.
//!
//! `pparse mount` serves the same view to the kernel ([`mount`]).

mod api;

#[cfg(all(target_os = "linux", feature = "mount"))]
pub mod mount;

pub use api::{Entry, EntryHandle, Error, File, Fs, Kind};
