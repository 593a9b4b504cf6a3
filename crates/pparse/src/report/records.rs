//! `pparse records --json`: a log's records through its format's own
//! listing (the `records` offer).

use std::io::{self, Write};

use crate::extraction::Extraction;
use crate::offer::RecordQuery;
use crate::parsers::format_of;
use crate::status::Status;

/// `pparse records --json` of extraction `e`, a log; `bad` hears of each
/// damage. `Ok(false)` when its format offers no records.
pub fn json_of(
    e: &Extraction,
    out: &mut dyn Write,
    bad: &mut dyn FnMut(Status, String),
) -> io::Result<bool> {
    let Some(offer) = format_of(e).and_then(|f| f.offers.records) else {
        return Ok(false);
    };
    let show = RecordQuery {
        types: &[],
        verbose: false,
        json: true,
        count: false,
    };
    (offer.list)(&*e.data(), &show, out, bad).map(|()| true)
}
