//! `pparse records --json`: a log's records through its format's own
//! listing (the `records` offer).

use std::io::{self, Write};

use crate::data::Source;
use crate::offer::RecordQuery;
use crate::status::Status;

/// `pparse records --json` of the `.wandb` log in `src`; `bad` hears of
/// each damage.
pub fn json(
    src: &dyn Source,
    out: &mut dyn Write,
    bad: &mut dyn FnMut(Status, String),
) -> io::Result<()> {
    let show = RecordQuery {
        types: &[],
        verbose: false,
        json: true,
        count: false,
    };
    crate::parsers::serial::wandb::listing::list(src, &show, out, bad)
}
