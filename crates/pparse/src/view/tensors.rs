//! The tensor table of any extraction, found through the registry: each
//! format says in its [`crate::offer::Offers`] how it makes its tensors.

use crate::extraction::{ExtId, Phase, Tree};
use crate::offer::TensorOffer;
use crate::offer::tensor::{Tensor, TensorJob};
use crate::parsers::format_of;
use crate::status::Status;

/// Takes what the table of `ext` needs from the tree (quickly, under its
/// lock) and returns the work that makes it; `None` if it has no tensors.
///
/// An extraction whose format has no tensors but that holds models or
/// arrays (an `.npz`, a tar of checkpoints) gets the tables of the first
/// extractions below it that have some, as [`collect`] finds them.
pub fn prepare(tree: &Tree, ext: ExtId) -> Option<TensorJob> {
    let e = tree.get(ext)?;
    let listed = |t: Vec<Tensor>| (!t.is_empty()).then(|| Box::new(move || t) as TensorJob);
    match format_of(e).and_then(|f| f.offers.tensors) {
        // A zip that is not a torch checkpoint may be an `.npz`.
        Some(TensorOffer::Prepare(prepare)) => {
            prepare(tree, ext).or_else(|| listed(collect(tree, ext)))
        }
        Some(TensorOffer::List(_) | TensorOffer::OfChildren) => listed(tensors(tree, ext)),
        None => listed(collect(tree, ext)),
    }
}

/// The tensors of `id`, or of the first extractions below it that have
/// some (the arrays of an `.npz`, the checkpoints in an archive).
pub fn collect(tree: &Tree, id: ExtId) -> Vec<Tensor> {
    let mut out = Vec::new();
    // Depth first with an explicit stack: archives nest deep.
    let mut stack = vec![id];
    while let Some(x) = stack.pop() {
        let mine = tensors(tree, x);
        if mine.is_empty() {
            stack.extend(tree.exts[x].children.iter().rev());
        } else {
            out.extend(mine);
        }
    }
    out
}

/// The tensors of extraction `ext`, if its format has any.
pub fn tensors(tree: &Tree, ext: ExtId) -> Vec<Tensor> {
    let Some(e) = tree.get(ext) else {
        return Vec::new();
    };
    let mut list = match format_of(e).and_then(|f| f.offers.tensors) {
        Some(TensorOffer::List(list)) => list(tree, ext),
        Some(TensorOffer::Prepare(prepare)) => {
            prepare(tree, ext).map(|job| job()).unwrap_or_default()
        }
        // The depth of folders is bounded.
        Some(TensorOffer::OfChildren) => {
            return e.children.iter().flat_map(|&c| tensors(tree, c)).collect();
        }
        None => Vec::new(),
    };
    vouch(tree, &mut list);
    list
}

/// Marks each tensor its format calls complete that lies over damage of
/// the extraction holding its bytes (a zip member whose CRC fails, bytes a
/// decoder could not recover): the format reads its own structure, and only
/// the extraction knows whether its bytes are the ones its container holds.
pub fn vouch(tree: &Tree, list: &mut [Tensor]) {
    for t in list.iter_mut().filter(|t| t.status == Status::Complete) {
        let Some(src) = tree.get(t.source) else {
            continue;
        };
        let end = t.offset.saturating_add(t.length);
        // Only what the containers and decoders found: the format has
        // judged its own damage already.
        let over = src
            .outer_damage()
            .iter()
            .filter_map(|&i| src.damage.get(i as usize))
            .filter(|d| {
                let r = d.range;
                if r.is_empty() {
                    t.offset <= r.start && r.start < end
                } else {
                    r.start < end && t.offset < r.end
                }
            })
            .max_by_key(|d| d.status);
        if let Some(d) = over {
            t.status = d.status;
            t.detail = Some(format!("its bytes hold damage: {}", d.reason));
        }
    }
}

/// Whether the tensors below `id` can be read: every extraction there is
/// parsed, or far enough for its format's views (see
/// [`crate::offer::Offers::settled`]).
pub fn ready(tree: &Tree, id: ExtId) -> bool {
    tree.subtree(id).into_iter().all(|x| {
        let e = &tree.exts[x];
        match format_of(e) {
            Some(f) => match f.offers.settled {
                Some(settled) => settled(tree, x),
                None => !matches!(e.phase, Phase::Parsing | Phase::Waiting),
            },
            // Not sniffed yet: it may be a shard or a model.
            None => e.phase != Phase::Waiting,
        }
    })
}
