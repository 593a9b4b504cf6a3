//! The CLI's JSON writers over a parsed tree, writing to any [`Write`]
//! instead of stdout: what `tree --json`, `nodes --json`, `pickle --json`,
//! `tensors --json`, `records --json` and `ir --json` print, for the fuzz targets and
//! tests. They wrap the functions the commands use, so the bytes are the
//! same.

use std::io::{self, Write};

pub use super::ml::ListingWork;
use crate::data::Source;
use crate::extraction::{ExtId, Tree};
use crate::status::Status;

/// `pparse tree --json`: the extraction tree below `id`.
pub fn tree_json(t: &Tree, id: ExtId, out: &mut dyn Write) -> io::Result<()> {
    super::render::tree_json(t, id, &mut &mut *out)
}

/// `pparse tree`: the extraction tree as text.
pub fn tree_text(t: &Tree, out: &mut dyn Write) -> io::Result<()> {
    super::render::tree_text(t, &mut &mut *out)
}

/// `pparse nodes --json --depth DEPTH`: extraction `id` and its (loaded)
/// nodes.
pub fn nodes_json(t: &Tree, id: ExtId, depth: usize, out: &mut dyn Write) -> io::Result<()> {
    super::render::nodes_json(t, id, depth, &mut &mut *out)
}

/// `pparse pickle --json` of extraction `id` (a pickle, or a torch file's
/// `data.pkl`); `Ok(false)` when it holds no pickle.
pub fn pickle_json(t: &Tree, id: ExtId, out: &mut dyn Write) -> io::Result<bool> {
    let Some((target, ranges)) = crate::view::stepper::pickles(t, id) else {
        return Ok(false);
    };
    super::ml::list_json(&*t.exts[target].data(), &ranges, &mut &mut *out)?;
    Ok(true)
}

/// `pparse ir --json` of the program text (or saved program) in `data`.
pub fn ir_json(data: &dyn Source, out: &mut dyn Write) -> io::Result<()> {
    super::ir::json(data, &mut &mut *out)
}

/// `pparse tensors --json` of extraction `id`.
pub fn tensors_json(t: &Tree, id: ExtId, out: &mut dyn Write) -> io::Result<()> {
    let list = crate::view::tensors::collect(t, id);
    super::ml::tensors_json(t, &list, &mut &mut *out)
}

/// `pparse records --json` of the `.wandb` log in `src`; `bad` hears of
/// each damage.
pub fn records_json(
    src: &dyn Source,
    out: &mut dyn Write,
    bad: &mut dyn FnMut(Status, String),
) -> io::Result<()> {
    let show = crate::offer::RecordQuery {
        types: &[],
        verbose: false,
        json: true,
        count: false,
    };
    crate::parsers::wandb::listing::list(src, &show, out, bad)
}

/// `pparse pickle [--trace]` of extraction `id`: the pickletools-like
/// listing, with the VM's stack and memo after each opcode when `trace`,
/// and what it took; `Ok(None)` when it holds no pickle.
pub fn pickle_text(
    t: &Tree,
    id: ExtId,
    trace: bool,
    out: &mut dyn Write,
) -> io::Result<Option<ListingWork>> {
    let Some(target) = crate::view::stepper::pickle_target(t, id) else {
        return Ok(None);
    };
    let e = &t.exts[target];
    let ranges = super::ml::pickle_ranges(e);
    super::ml::list_text(&*e.data(), &ranges, trace, &mut &mut *out).map(Some)
}
