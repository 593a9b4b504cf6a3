//! Stepping a pickle: the VM's state after any opcode, forward and back.
//! This module finds the pickles of an extraction and makes the request;
//! the format that holds them runs it ([`crate::offer::pickle::PickleOffer`]).

use crate::data::Range;
use crate::extraction::{ExtId, Phase, Tree};
pub use crate::offer::pickle::{StepCache, StepRequest, StepResult, Target};
use crate::parsers::format_of;

/// The extraction holding the pickle(s) to list: PATH itself, or the
/// `data.pkl` (else the first child with pickles) of a container named by
/// PATH, such as a torch zip.
pub fn pickle_target(t: &Tree, id: ExtId) -> Option<ExtId> {
    let e = &t.exts[id];
    let has_pickles = |x: ExtId| format_of(&t.exts[x]).is_some_and(|f| f.offers.pickles.is_some());
    if has_pickles(id) {
        return Some(id);
    }
    e.children
        .iter()
        .copied()
        .find(|&c| t.exts[c].display_name().ends_with("data.pkl"))
        .or_else(|| e.children.iter().copied().find(|&c| has_pickles(c)))
}

/// The pickle at or below `id` ([`pickle_target`]) and the ranges of the
/// pickles it holds, in order.
pub fn pickles(t: &Tree, id: ExtId) -> Option<(ExtId, Vec<Range>)> {
    let target = pickle_target(t, id)?;
    let ranges = t.exts[target]
        .nodes
        .iter()
        .filter(|n| n.kind == "pickle")
        .map(|n| n.range)
        .collect();
    Some((target, ranges))
}

/// Whether waiting for the tree can stop: the pickle below `id` is parsed,
/// or nothing below `id` is still being sniffed or parsed (then there is
/// none).
pub fn pickles_ready(t: &Tree, id: ExtId) -> bool {
    let parsing = |x: ExtId| matches!(t.exts[x].phase, Phase::Waiting | Phase::Parsing);
    pickle_target(t, id).is_some_and(|x| !parsing(x))
        || t.subtree(id).into_iter().all(|x| !parsing(x))
}

/// A request for the state at `target` of the pickle at `range` in
/// extraction `ext`, run by its format; `None` when `ext` offers no
/// pickles.
pub fn request(
    t: &Tree,
    ext: ExtId,
    range: Range,
    target: Target,
    generation: u64,
) -> Option<StepRequest> {
    let e = t.get(ext)?;
    let offer = format_of(e)?.offers.pickles?;
    Some(StepRequest {
        ext,
        data: e.data(),
        range,
        target,
        generation,
        offer,
    })
}
