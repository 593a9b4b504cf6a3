//! What a format offers beyond nodes and child extractions, and the types
//! those offers are made of.
//!
//! A format declares its offers in its registry entry
//! ([`crate::parsers::Format::offers`]); the views, the CLI and the explorer
//! find them there and nowhere else. This layer sits below the parsers so
//! that a parser can build a [`tensor::Tensor`] without importing the views
//! that list them.

pub mod ggml;
pub mod metrics;
pub mod pickle;
pub mod program;
pub mod tensor;

use std::io::{self, Write};
use std::sync::atomic::AtomicBool;

use crate::data::{Range, Source};
use crate::extraction::{ExtId, Tree};
use crate::status::Status;
use tensor::{Tensor, TensorJob};

/// What one format offers. See the module docs.
#[derive(Clone, Copy)]
pub struct Offers {
    /// A table of tensors.
    pub tensors: Option<TensorOffer>,
    /// Its nodes of kind `pickle` each cover one pickle that can be listed
    /// (`pparse pickle`), read opcode by opcode, judged and stepped (the
    /// explorer's stepper).
    pub pickles: Option<pickle::PickleOffer>,
    /// It is a log of records: how `pparse records` lists them.
    pub records: Option<RecordsOffer>,
    /// The metrics a log holds, as series (the explorer's metrics panel).
    pub metrics: Option<MetricsScan>,
    /// A program text: its diagnostics and its values to follow (the
    /// explorer's diagnostics panel and definition and use keys).
    pub program: Option<program::ProgramOffer>,
    /// Whether an extraction of this format is parsed far enough for the
    /// views it offers while its parse goes on (a zip's entries are listed
    /// before their CRCs are checked). `None`: when its parse is over.
    pub settled: Option<fn(&Tree, ExtId) -> bool>,
}

impl Offers {
    /// Nothing beyond nodes and children.
    pub const NONE: Offers = Offers {
        tensors: None,
        pickles: None,
        records: None,
        metrics: None,
        program: None,
        settled: None,
    };
}

/// How a format makes its tensor table.
#[derive(Clone, Copy)]
pub enum TensorOffer {
    /// Lists them at once (a header already parsed).
    List(fn(&Tree, ExtId) -> Vec<Tensor>),
    /// Takes what the table needs from the tree (under its lock) and
    /// returns the work that makes it (a torch pickle's walk), or `None`.
    Prepare(fn(&Tree, ExtId) -> Option<TensorJob>),
    /// Its children's tensors (a folder of shards).
    OfChildren,
}

/// Reads the metrics of a log in `src`: their names with counts, and the
/// series of `only`, or of every name while they hold at most `budget`
/// buckets; reports progress as (bytes read, bytes); `None` once `stop` is
/// set.
pub type MetricsScan = fn(
    src: &dyn Source,
    only: Option<&str>,
    budget: usize,
    stop: &AtomicBool,
    progress: &dyn Fn(u64, u64),
) -> Option<metrics::Scan>;

/// How a log's records are read.
#[derive(Clone, Copy)]
pub struct RecordsOffer {
    /// `pparse records`' listing.
    pub list: RecordsList,
    /// The records one by one (the Python package's `records()`).
    pub each: RecordsEach,
    /// Whether `kind` is a record type this format can have, and the types
    /// it names: a user's `--type` is checked against them, so a typo is
    /// an error, not an empty listing.
    pub types: RecordTypes,
}

/// See [`RecordsOffer::types`]: the named types, and whether a type is
/// known (the named ones, or one the format names by pattern, such as
/// W&B's `#N` for a type newer than its schema).
#[derive(Clone, Copy)]
pub struct RecordTypes {
    /// The types, by name.
    pub named: fn() -> Vec<&'static str>,
    /// Whether `kind` can be a record's type.
    pub known: fn(kind: &str) -> bool,
}

/// One record of a log, or a damaged span of it.
#[derive(Debug)]
pub enum LogEntry {
    /// A record that decodes.
    Record {
        /// Its number, as the writer gave it.
        number: i64,
        /// Its type (`history`, `run`, ...).
        kind: String,
        /// Where its first chunk starts.
        offset: u64,
        /// Its `data` as `records --json` gives it: a JSON text.
        data: String,
    },
    /// Bytes that hold no record that can be vouched for.
    Damage {
        /// How bad.
        status: Status,
        /// Where.
        range: Range,
        /// Why.
        reason: String,
    },
}

/// Hands the records of the log in `src` (of the given types; all when
/// none) and its damage, in file order and in batches, to the callback
/// until it returns `false`.
pub type RecordsEach =
    fn(src: &dyn Source, types: &[String], take: &mut dyn FnMut(Vec<LogEntry>) -> bool);

/// What `pparse records` asks of a log's listing.
pub struct RecordQuery<'a> {
    /// Record types to keep (none: all).
    pub types: &'a [String],
    /// Whole records instead of a summary.
    pub verbose: bool,
    /// JSON Lines instead of text.
    pub json: bool,
    /// Counts per type instead of the records.
    pub count: bool,
}

/// Writes the records of the log in `src` to `out` as `query` asks, in
/// file order; `bad` hears of each damage with its status and where it is
/// (the contract's `records` command, docs/contract.md).
pub type RecordsList = fn(
    src: &dyn Source,
    query: &RecordQuery,
    out: &mut dyn Write,
    bad: &mut dyn FnMut(Status, String),
) -> io::Result<()>;
