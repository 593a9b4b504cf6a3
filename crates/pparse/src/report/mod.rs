//! Every text and JSON report pparse writes, to any [`std::io::Write`]:
//! what `tree`, `nodes`, `pickle`, `tensors`, `records` and `ir` print,
//! and `--io-stats`. The CLI adds only argument parsing, waiting and exit
//! codes, so the Python package, the fuzz targets and the tests get the
//! same bytes by calling these.
//!
//! Reports are written as a stream: a listing of a million members is
//! never built in memory as one JSON value.

mod io_stats;
pub mod ir;
pub mod pickle;
pub mod query;
pub mod records;
pub mod tensors;
pub mod tree;

pub use io_stats::io_stats;
