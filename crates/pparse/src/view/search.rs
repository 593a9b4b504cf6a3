//! Searching: extraction names, node names and values, and bytes. Each
//! search stops when its flag is set and reports its progress, so the
//! explorer runs it in the background and the CLI could run it in place.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::data::Data;
use crate::engine::Session;
use crate::extraction::{ExtId, Tree};
use crate::node::Node;

/// Extractions checked per hold of the tree's lock.
const EXTS_PER_LOCK: usize = 20_000;

/// Extractions whose name contains `query` (ignoring case), in tree order;
/// `None` when stopped. The tree's lock is taken per batch, so a parse
/// going on beside the search is not held up.
pub fn extractions(
    session: &Session,
    query: &str,
    stop: &AtomicBool,
    progress: &dyn Fn(u64, u64),
) -> Option<Vec<ExtId>> {
    let q = query.to_lowercase();
    let order = session.tree().subtree(0);
    let total = order.len() as u64;
    let mut hits = Vec::new();
    for (i, chunk) in order.chunks(EXTS_PER_LOCK).enumerate() {
        if stop.load(Ordering::Acquire) {
            return None;
        }
        let t = session.tree();
        hits.extend(
            chunk
                .iter()
                .copied()
                .filter(|&x| t.exts[x].display_name().to_lowercase().contains(&q)),
        );
        drop(t);
        progress(((i + 1) * EXTS_PER_LOCK).min(order.len()) as u64, total);
    }
    Some(hits)
}

/// Paths of the loaded nodes of `ext` whose name or value contains `query`
/// (ignoring case), in tree order; `None` when stopped.
pub fn nodes(tree: &Tree, ext: ExtId, query: &str, stop: &AtomicBool) -> Option<Vec<Vec<usize>>> {
    let q = query.to_lowercase();
    let e = tree.get(ext)?;
    let mut hits = Vec::new();
    let mut stack: Vec<(Vec<usize>, &Node)> = e
        .nodes
        .iter()
        .enumerate()
        .rev()
        .map(|(i, n)| (vec![i], n))
        .collect();
    let mut seen = 0u64;
    while let Some((path, n)) = stack.pop() {
        seen += 1;
        if seen.is_multiple_of(50_000) && stop.load(Ordering::Acquire) {
            return None;
        }
        let value = n.value.as_ref().map(|v| v.to_string()).unwrap_or_default();
        if n.name.to_lowercase().contains(&q) || value.to_lowercase().contains(&q) {
            hits.push(path.clone());
        }
        for (i, c) in n.loaded_children().iter().enumerate().rev() {
            let mut p = path.clone();
            p.push(i);
            stack.push((p, c));
        }
    }
    Some(hits)
}

/// Finds `pat` in `data` from `from` (forward) or before `from` (back),
/// a MiB at a time, reporting progress and stopping on `stop`.
pub fn bytes(
    data: &Data,
    pat: &[u8],
    from: u64,
    forward: bool,
    stop: &std::sync::atomic::AtomicBool,
    progress: &dyn Fn(u64, u64),
) -> Option<u64> {
    const WIN: u64 = 1 << 20;
    let len = data.available();
    let overlap = pat.len() as u64 - 1;
    let mut buf = Vec::new();
    if forward {
        let finder = memchr::memmem::Finder::new(pat);
        let mut pos = from;
        while pos < len {
            if stop.load(Ordering::Acquire) {
                return None;
            }
            let w = crate::data::view(&**data, pos, (WIN + overlap) as usize, &mut buf).ok()?;
            if let Some(i) = finder.find(w) {
                return Some(pos + i as u64);
            }
            pos += WIN;
            progress(pos.min(len) - from, len - from);
        }
    } else {
        let finder = memchr::memmem::FinderRev::new(pat);
        let mut end = from.min(len);
        while end > 0 {
            if stop.load(Ordering::Acquire) {
                return None;
            }
            let start = end.saturating_sub(WIN);
            let w = crate::data::view(&**data, start, (end - start + overlap) as usize, &mut buf)
                .ok()?;
            // Only matches that start before `end`.
            let limit = ((end - start) as usize + pat.len() - 1).min(w.len());
            if let Some(i) = finder.rfind(&w[..limit])
                && start + (i as u64) < end
            {
                return Some(start + i as u64);
            }
            end = start;
            progress(from - end, from);
        }
    }
    None
}

/// How many times `pat` occurs in `data` (overlapping matches count),
/// and how many of them start before `at`; `None` if stopped.
pub fn count(
    data: &Data,
    pat: &[u8],
    at: u64,
    stop: &std::sync::atomic::AtomicBool,
) -> Option<(u64, u64)> {
    const WIN: u64 = 1 << 20;
    let len = data.available();
    let overlap = pat.len() as u64 - 1;
    let finder = memchr::memmem::Finder::new(pat);
    let mut buf = Vec::new();
    let (mut total, mut before) = (0, 0);
    let mut pos = 0;
    while pos < len {
        if stop.load(Ordering::Acquire) {
            return None;
        }
        let w = crate::data::view(&**data, pos, (WIN + overlap) as usize, &mut buf).ok()?;
        // Matches that start in this window; the overlap only completes them.
        let own = WIN.min(len - pos);
        let mut i = 0;
        while let Some(k) = finder.find(&w[i..]) {
            let m = pos + (i + k) as u64;
            if m >= pos + own {
                break;
            }
            total += 1;
            if m < at {
                before += 1;
            }
            i += k + 1;
        }
        pos += WIN;
    }
    Some((total, before))
}
