//! Finding objects the path from the root no longer reaches, by the
//! signatures of the structures that hold or name them: object headers of
//! version 2 (`OHDR`, checked by their checksum) and the entries of
//! symbol-table nodes (`SNOD`), which give version 1 headers, named from
//! the local heap (`HEAP`) whose strings their name offsets fit.
//!
//! The scan reads the file once; it runs only when the walk from the root
//! met damage.

use std::collections::HashSet;

use crate::data::{Source, read_exact_at};

use super::read::{Header, Superblock, local_heap, snod_entries};

/// Bytes read per step of the scan.
const BLOCK: usize = 1 << 20;
/// Signatures of each kind taken at most.
const MAX_HITS: usize = 1_000_000;
/// Local heaps tried for one symbol-table node's names at most.
const HEAP_TRIES: usize = 8;

/// An object header found by the scan, with the name a symbol-table node
/// gives it when one does.
#[derive(Clone, Debug)]
pub(crate) struct Orphan {
    pub(crate) at: u64,
    pub(crate) name: Option<Vec<u8>>,
    pub(crate) header: Header,
}

/// The offsets where each of `sigs` starts in `src`.
fn scan(src: &dyn Source, sigs: &[&[u8; 4]]) -> Vec<Vec<u64>> {
    let mut out = vec![Vec::new(); sigs.len()];
    let finders: Vec<memchr::memmem::Finder> = sigs
        .iter()
        .map(|s| memchr::memmem::Finder::new(&s[..]))
        .collect();
    let len = src.available();
    let mut buf = vec![0u8; BLOCK + 3];
    let mut at = 0u64;
    while at < len {
        let n = ((len - at) as usize).min(buf.len());
        if !read_exact_at(src, at, &mut buf[..n]).unwrap_or(false) {
            break;
        }
        for (f, hits) in finders.iter().zip(out.iter_mut()) {
            for i in f.find_iter(&buf[..n]) {
                // A hit in the 3 bytes read again is found by the next block.
                if (i < BLOCK || at + n as u64 >= len) && hits.len() < MAX_HITS {
                    hits.push(at + i as u64);
                }
            }
        }
        at += BLOCK as u64;
    }
    out
}

/// A name at `off` of a local heap's data: a whole string there, one
/// that starts after a NUL (or at 0), of printable bytes.
fn heap_name(heap: &[u8], off: u64) -> Option<&[u8]> {
    let off = usize::try_from(off).ok()?;
    if off > 0 && *heap.get(off - 1)? != 0 {
        return None;
    }
    let rest = heap.get(off..)?;
    let end = rest.iter().position(|&b| b == 0)?;
    let name = &rest[..end];
    (!name.is_empty() && name.iter().all(|&b| b >= 0x20 && b != 0x7f)).then_some(name)
}

/// The object headers not in `reached` that the scan finds, by address.
pub(crate) fn find(src: &dyn Source, sb: &Superblock, reached: &HashSet<u64>) -> Vec<Orphan> {
    let hits = scan(src, &[b"OHDR", b"SNOD", b"HEAP"]);
    let (ohdr, snod, heap) = (&hits[0], &hits[1], &hits[2]);
    let mut found: Vec<(u64, Option<Vec<u8>>)> = Vec::new();
    let mut heaps: Vec<(u64, Option<Vec<u8>>)> = heap.iter().map(|&h| (h, None)).collect();
    for &s in snod {
        let Ok(entries) = snod_entries(src, sb, s) else {
            continue;
        };
        // The nearest heaps first: a group's heap is written near its nodes.
        let mut order: Vec<usize> = (0..heaps.len()).collect();
        order.sort_by_key(|&i| heaps[i].0.abs_diff(s));
        let mut names = None;
        for &i in order.iter().take(HEAP_TRIES) {
            if heaps[i].1.is_none() {
                heaps[i].1 = Some(local_heap(src, sb, heaps[i].0).unwrap_or_default());
            }
            let data = heaps[i].1.as_deref().unwrap_or_default();
            let fit: Option<Vec<Vec<u8>>> = entries
                .iter()
                .map(|&(off, _)| heap_name(data, off).map(<[u8]>::to_vec))
                .collect();
            if fit.is_some() {
                names = fit;
                break;
            }
        }
        for (k, &(_, h)) in entries.iter().enumerate() {
            if let Some(h) = sb.abs(h) {
                let name = names.as_ref().map(|n| n[k].clone());
                found.push((h, name));
            }
        }
    }
    found.extend(ohdr.iter().map(|&h| (h, None)));
    // One per address, a named one first.
    found.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.is_some().cmp(&a.1.is_some())));
    found.dedup_by_key(|f| f.0);
    found
        .into_iter()
        .filter(|(at, _)| !reached.contains(at))
        .filter_map(|(at, name)| {
            let header = Header::read(src, sb, at).ok()?;
            // A header found by signature whose checksum fails is no find.
            header
                .problems
                .is_empty()
                .then_some(Orphan { at, name, header })
        })
        .collect()
}
