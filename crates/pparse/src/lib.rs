//! pparse: explore and recover nested, huge, truncated or corrupted files.
//!
//! # Why it is built this way
//!
//! Most parsers assume that the input is complete and that both the input and
//! the parsed result fit in memory. pparse assumes neither: a `.tar.gz` cut off
//! halfway that holds a zip should still give back every byte that survived,
//! and a 200 GB file should open on a 16 GB machine. So:
//!
//! * [`data`]: every byte source (a mapped file, a decoded gzip stream, a
//!   member of an archive) is read at offsets through one trait, and decoded
//!   streams are never held whole in memory (checkpoints + a bounded cache);
//! * [`parsers`]: every format is a resumable state machine that keeps what it
//!   parsed, records damage with its offset and reason, and resynchronises
//!   after it where the format allows;
//! * [`extraction`]: embedded data becomes child extractions, parsed in turn to
//!   any depth, each with its own status;
//! * [`node`]: the parsed structure is a tree whose subtrees load lazily from
//!   their byte ranges and can be dropped again;
//! * [`engine`]: one background thread steps all parsers a little at a time,
//!   so readers see partial results while parsing goes on;
//! * [`index`]: what one pass learned (the extraction tree, the decoders'
//!   checkpoints) is saved, and the next open starts from it;
//! * [`report`]: every text and JSON report, written to any `Write`.
//!
//! The front ends stand apart: the explorer (`pparse-explorer`), the
//! command line (the `pparse` binary) and the Python package each depend
//! on this crate alone, which builds none of their terminal, argument or
//! diagnostics crates.

pub mod chunked;
pub mod data;
pub mod engine;
pub mod extraction;
pub mod fs;
pub mod index;
pub mod name;
pub mod node;
pub mod offer;
pub mod parsers;
pub mod report;
pub mod status;
pub mod unpack;
pub mod util;
pub mod view;

pub use engine::{Ledger, Options, Schemas, Session};
pub use extraction::{ExtId, Extraction, Tree};
pub use status::{Damage, Status};
