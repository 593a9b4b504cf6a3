//! The log below an extraction, for `pparse records` and the Python
//! package's `records()`: the first extraction at or below it whose format
//! offers records ([`crate::offer::RecordsOffer`]).

use crate::extraction::{ExtId, Phase, Tree};
use crate::offer::RecordsOffer;
use crate::parsers::format_of;

/// The log at or below `id`, and how its records are read.
pub fn log_target(t: &Tree, id: ExtId) -> Option<(ExtId, RecordsOffer)> {
    t.subtree(id)
        .into_iter()
        .find_map(|x| Some((x, format_of(&t.exts[x])?.offers.records?)))
}

/// Whether waiting for the tree can stop: the log below `id` is known,
/// or nothing below `id` is still being sniffed or parsed (then there is
/// none).
pub fn ready(t: &Tree, id: ExtId) -> bool {
    log_target(t, id).is_some_and(|(x, _)| t.exts[x].is_final())
        || t.subtree(id)
            .iter()
            .all(|&x| !matches!(t.exts[x].phase, Phase::Waiting | Phase::Parsing))
}
