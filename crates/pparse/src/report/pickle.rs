//! `pparse pickle`'s listings: like `python -m pickletools` (with the VM's
//! stack and memo after each opcode for `--trace`), or one JSON object per
//! opcode. The listing is the pickle format's own, reached through the
//! offer of the extraction that holds the pickles
//! ([`crate::offer::pickle::PickleOffer`]).

use std::io::{self, Write};

use crate::data::Range;
use crate::extraction::{ExtId, Extraction, Tree};
use crate::offer::pickle::PickleOffer;
pub use crate::offer::pickle::{ListStyle, ListingWork};
use crate::parsers::format_of;
use crate::view::stepper;

/// The pickle offer of `e`'s format, if it has one.
pub fn offer(e: &Extraction) -> Option<PickleOffer> {
    format_of(e).and_then(|f| f.offers.pickles)
}

/// `pparse pickle --json` of extraction `id` (a pickle, or a torch file's
/// `data.pkl`); `Ok(false)` when it holds no pickle.
pub fn json_of(t: &Tree, id: ExtId, out: &mut dyn Write) -> io::Result<bool> {
    let Some((target, ranges)) = stepper::pickles(t, id) else {
        return Ok(false);
    };
    let e = &t.exts[target];
    let Some(o) = offer(e) else {
        return Ok(false);
    };
    (o.list_json)(&*e.data(), &ranges, out)?;
    Ok(true)
}

/// `pparse pickle [--trace] [--decimal]` of extraction `id`: the
/// pickletools-like listing written in `style`, and what it took;
/// `Ok(None)` when it holds no pickle.
pub fn text_of(
    t: &Tree,
    id: ExtId,
    style: ListStyle,
    out: &mut dyn Write,
) -> io::Result<Option<ListingWork>> {
    let Some(target) = stepper::pickle_target(t, id) else {
        return Ok(None);
    };
    let e = &t.exts[target];
    let Some(o) = offer(e) else {
        return Ok(None);
    };
    (o.list_text)(&*e.data(), &ranges(e), style, out).map(Some)
}

/// The pickles of an extraction: their ranges and why each one is damaged.
pub fn ranges(e: &Extraction) -> Vec<(Range, Option<String>)> {
    e.nodes
        .iter()
        .filter(|n| n.kind == "pickle")
        .map(|n| (n.range, n.damage.as_ref().map(|d| d.reason.to_string())))
        .collect()
}
