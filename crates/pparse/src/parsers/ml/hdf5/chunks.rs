//! Chunked datasets: the indexes that list their chunks (v1 B-trees,
//! single chunks, implicit runs, fixed arrays, extensible arrays, v2
//! B-trees), the filters that undo how each chunk was stored (deflate,
//! shuffle, fletcher32), and [`Array`], the dataset's values in C order
//! made from its chunks as they are read.
//!
//! An index structure whose checksum fails is not trusted: its chunks are
//! left out (their values unknown) and the failure is a problem at its
//! offset. A chunk's own bytes are judged when it is decoded: deflate's
//! Adler-32 and fletcher32 check them; an unfiltered chunk only has to lie
//! inside the file.

use std::collections::HashSet;
use std::io::Read;
use std::sync::{Arc, Mutex};

use crate::data::{Data, Range, Source};

use super::read::{
    Bad, Chunking, Cur, IndexKind, MAX_LEVELS, Superblock, bytes, check_sum, filter_name,
};

/// Decoded bytes of one chunk at most: HDF5 itself keeps a chunk under
/// 4 GiB; a larger one here is not read.
pub(crate) const MAX_CHUNK_BYTES: u64 = 256 << 20;
/// Chunks listed per dataset at most.
pub(crate) const MAX_CHUNKS: u64 = 16 << 20;
/// Decoded chunks kept for reads, in bytes (at least two chunks are).
const CACHE_BYTES: u64 = 32 << 20;

/// One stored chunk: where it is in the chunk grid (its index in C order
/// of the grid), where its bytes are, and which filters were skipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub(crate) index: u64,
    pub(crate) at: u64,
    pub(crate) size: u64,
    pub(crate) mask: u32,
}

/// How a dataset's elements are cut into chunks.
#[derive(Clone, Debug)]
pub(crate) struct Grid {
    /// The dataset's dimensions.
    pub(crate) dims: Vec<u64>,
    /// A chunk's dimensions.
    pub(crate) chunk: Vec<u64>,
    /// Chunks along each dimension.
    pub(crate) counts: Vec<u64>,
    /// Bytes of one element.
    pub(crate) elem: u64,
    /// Bytes of one decoded chunk.
    pub(crate) chunk_bytes: u64,
    /// Chunks in the grid.
    pub(crate) total: u64,
    /// Bytes of the dataset's values.
    pub(crate) nbytes: u64,
}

impl Grid {
    pub(crate) fn new(dims: &[u64], chunk: &[u64], elem: u64, at: u64) -> Result<Grid, Bad> {
        if dims.len() != chunk.len() || dims.is_empty() {
            return Err(Bad::wrong(
                at,
                format!(
                    "chunks of {} dimensions for a dataset of {}",
                    chunk.len(),
                    dims.len()
                ),
            ));
        }
        if chunk.contains(&0) || elem == 0 {
            return Err(Bad::wrong(at, "a chunk dimension of 0"));
        }
        let chunk_bytes = chunk
            .iter()
            .try_fold(elem, |a, &d| a.checked_mul(d))
            .filter(|&b| b <= MAX_CHUNK_BYTES)
            .ok_or_else(|| Bad::wrong(at, "chunks larger than 256 MiB are not read"))?;
        let counts: Vec<u64> = dims
            .iter()
            .zip(chunk)
            .map(|(d, c)| d.div_ceil(*c))
            .collect();
        let total = counts
            .iter()
            .try_fold(1u64, |a, &d| a.checked_mul(d))
            .ok_or_else(|| Bad::wrong(at, "more chunks than 2^64"))?;
        let nbytes = dims
            .iter()
            .try_fold(elem, |a, &d| a.checked_mul(d))
            .filter(|&n| n <= i64::MAX as u64)
            .ok_or_else(|| Bad::wrong(at, "a dataset of more than 2^63 bytes"))?;
        Ok(Grid {
            dims: dims.to_vec(),
            chunk: chunk.to_vec(),
            counts,
            elem,
            chunk_bytes,
            total,
            nbytes,
        })
    }

    /// The index in C order of the chunk at grid coordinates `scaled`,
    /// when it is inside the grid.
    fn linear(&self, scaled: &[u64]) -> Option<u64> {
        let mut i = 0u64;
        for (s, n) in scaled.iter().zip(&self.counts) {
            if s >= n {
                return None;
            }
            i = i * n + s;
        }
        Some(i)
    }

    /// A chunk's grid coordinates from its index.
    fn coords(&self, mut index: u64) -> Vec<u64> {
        let mut out = vec![0; self.counts.len()];
        for (o, n) in out.iter_mut().zip(&self.counts).rev() {
            *o = index % n;
            index /= n;
        }
        out
    }

    /// A chunk's grid coordinates, as text: `(2, 0)`.
    pub(crate) fn coords_text(&self, index: u64) -> String {
        let c: Vec<String> = self.coords(index).iter().map(u64::to_string).collect();
        format!("({})", c.join(", "))
    }

    /// Whether the chunk at `index` reaches past the dataset's far edge in
    /// some dimension.
    fn is_edge(&self, index: u64) -> bool {
        let c = self.coords(index);
        c.iter()
            .zip(&self.chunk)
            .zip(&self.dims)
            .any(|((s, k), d)| (s + 1) * k > *d)
    }

    /// The bytes of the values, in C order, from the first element of
    /// chunk `index` to its last: a chunk's values lie within this span.
    pub(crate) fn span(&self, index: u64) -> Range {
        let c = self.coords(index);
        let (mut first, mut last) = (0u64, 0u64);
        for ((s, k), d) in c.iter().zip(&self.chunk).zip(&self.dims) {
            let lo = s * k;
            let hi = (lo + k).min(*d).saturating_sub(1);
            first = first * d + lo;
            last = last * d + hi;
        }
        Range::new(first * self.elem, (last + 1) * self.elem)
    }
}

/// The chunks of a dataset: read from its index, sorted by grid index.
/// Chunks outside the grid are dropped; problems met are added to
/// `problems` (the chunks read before them are kept).
pub(crate) fn chunks(
    src: &dyn Source,
    sb: &Superblock,
    c: &Chunking,
    grid: &Grid,
    max: Option<&[Option<u64>]>,
    filtered: bool,
    problems: &mut Vec<Bad>,
) -> Vec<Chunk> {
    let Some(at) = c.index else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match c.kind {
        IndexKind::BTree1 => btree1(src, sb, at, grid, &mut out, problems),
        IndexKind::Single(f) => {
            let (size, mask) = f.unwrap_or((grid.chunk_bytes, 0));
            out.push(Chunk {
                index: 0,
                at,
                size,
                mask,
            });
        }
        IndexKind::Implicit => {
            let n = grid.total.min(MAX_CHUNKS);
            for i in 0..n {
                let Some(a) = i
                    .checked_mul(grid.chunk_bytes)
                    .and_then(|o| at.checked_add(o))
                else {
                    break;
                };
                out.push(Chunk {
                    index: i,
                    at: a,
                    size: grid.chunk_bytes,
                    mask: 0,
                });
            }
        }
        IndexKind::Fixed => {
            let order = Order::new(grid, max, None);
            fixed(src, sb, at, grid, &order, filtered, &mut out, problems);
        }
        IndexKind::Extensible => {
            let unlimited = max.and_then(|m| m.iter().position(Option::is_none));
            let order = Order::new(grid, max, unlimited);
            extensible(src, sb, at, grid, &order, filtered, &mut out, problems);
        }
        IndexKind::BTree2 => btree2(src, sb, at, grid, &mut out, problems),
    }
    out.sort_unstable_by_key(|c| c.index);
    // Two entries for one chunk: one of them is wrong, and which cannot
    // be told.
    if let Some(w) = out.windows(2).find(|w| w[0].index == w[1].index) {
        problems.push(Bad::wrong(
            at,
            format!(
                "two chunks listed at {} (at {} and {})",
                grid.coords_text(w[0].index),
                w[0].at,
                w[1].at
            ),
        ));
        let twice: HashSet<u64> = out
            .windows(2)
            .filter(|w| w[0].index == w[1].index)
            .map(|w| w[0].index)
            .collect();
        out.retain(|c| !twice.contains(&c.index));
    }
    out
}

/// How a fixed or extensible array numbers chunks: in C order over the
/// grid of the dataset's largest dimensions, with the unlimited dimension
/// (of an extensible array) moved first.
struct Order {
    /// Chunks along each dimension, in the array's order.
    counts: Vec<u64>,
    /// Where each of the array's dimensions is in the dataset's.
    from: Vec<usize>,
}

impl Order {
    fn new(grid: &Grid, max: Option<&[Option<u64>]>, unlimited: Option<usize>) -> Order {
        let rank = grid.dims.len();
        let mut from: Vec<usize> = (0..rank).collect();
        if let Some(u) = unlimited.filter(|&u| u < rank) {
            from.remove(u);
            from.insert(0, u);
        }
        let counts = from
            .iter()
            .map(|&i| {
                let d = max
                    .and_then(|m| m.get(i).copied().flatten())
                    .unwrap_or(grid.dims[i])
                    .max(grid.dims[i]);
                d.div_ceil(grid.chunk[i])
            })
            .collect();
        Order { counts, from }
    }

    /// The grid index of the array's element `i`, when it is a chunk
    /// inside the dataset's current extent.
    fn grid_index(&self, grid: &Grid, mut i: u64) -> Option<u64> {
        let mut scaled = vec![0u64; self.counts.len()];
        for (k, n) in self.counts.iter().enumerate().rev() {
            if k == 0 {
                scaled[self.from[0]] = i;
            } else {
                scaled[self.from[k]] = i % n.max(&1);
                i /= n.max(&1);
            }
        }
        grid.linear(&scaled)
    }
}

/// Walks a v1 B-tree of type 1: its keys give each chunk's stored size,
/// filter mask and element offsets.
fn btree1(
    src: &dyn Source,
    sb: &Superblock,
    tree: u64,
    grid: &Grid,
    out: &mut Vec<Chunk>,
    problems: &mut Vec<Bad>,
) {
    let o = usize::from(sb.offsets);
    let rank = grid.dims.len();
    let key = 8 + 8 * (rank + 1);
    let mut seen = HashSet::new();
    let mut todo = vec![(tree, 0u32)];
    while let Some((node, depth)) = todo.pop() {
        if depth > MAX_LEVELS || !seen.insert(node) {
            problems.push(Bad::wrong(node, "a B-tree node seen before"));
            continue;
        }
        let head = match bytes(src, node, 8, "a B-tree node") {
            Ok(b) if &b[..4] == b"TREE" && b[4] == 1 => b,
            Ok(_) => {
                problems.push(Bad::wrong(node, "no TREE signature of type 1"));
                continue;
            }
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let level = head[5];
        let entries = usize::from(u16::from_le_bytes([head[6], head[7]]));
        let len = 8 + 2 * o + entries * (key + o) + key;
        let b = match bytes(src, node, len as u64, "a B-tree node") {
            Ok(b) => b,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let mut c = Cur::new(&b, node);
        let mut kids = Vec::new();
        // A node's keys ascend: one that does not was changed.
        let mut prev: Option<Vec<u64>> = None;
        let r = (|| -> Result<(), Bad> {
            c.skip(8 + 2 * o)?;
            for _ in 0..entries {
                let key_at = c.at();
                let size = u64::from(c.u32()?);
                let mask = c.u32()?;
                let mut scaled = Vec::with_capacity(rank);
                for d in 0..rank {
                    let off = c.uint(8)?;
                    if off % grid.chunk[d] != 0 {
                        return Err(Bad::wrong(key_at, "a chunk key off the chunk grid"));
                    }
                    scaled.push(off / grid.chunk[d]);
                }
                if prev.as_ref().is_some_and(|p| *p >= scaled) {
                    return Err(Bad::wrong(key_at, "chunk keys out of order"));
                }
                prev = Some(scaled.clone());
                c.skip(8)?;
                let child = c.uint(o)?;
                let Some(child) = sb.abs(child) else {
                    return Err(Bad::wrong(key_at, "a B-tree child at no address"));
                };
                if level > 0 {
                    kids.push((child, depth + 1));
                } else if let Some(index) = grid.linear(&scaled) {
                    out.push(Chunk {
                        index,
                        at: child,
                        size,
                        mask,
                    });
                }
            }
            Ok(())
        })();
        if let Err(e) = r {
            problems.push(e);
        }
        todo.extend(kids.into_iter().rev());
        if out.len() as u64 >= MAX_CHUNKS {
            problems.push(Bad::wrong(tree, format!("more than {MAX_CHUNKS} chunks")));
            break;
        }
    }
}

/// `n` bytes at `at` that start with `sig` and end with their lookup3
/// checksum, which holds.
fn signed_block(
    src: &dyn Source,
    at: u64,
    n: u64,
    sig: &[u8; 4],
    what: &str,
) -> Result<Vec<u8>, Bad> {
    let b = bytes(src, at, n, what)?;
    if b.get(..4) != Some(&sig[..]) {
        return Err(Bad::wrong(
            at,
            format!("no {} signature", String::from_utf8_lossy(sig)),
        ));
    }
    checked(b, at)
}

/// `b` (read at `at`), when the lookup3 checksum in its last 4 bytes holds.
fn checked(b: Vec<u8>, at: u64) -> Result<Vec<u8>, Bad> {
    let mut sums = Vec::new();
    check_sum(&b, at, &mut sums);
    match sums.pop() {
        Some(e) => Err(e),
        None => Ok(b),
    }
}

/// One entry of a fixed or extensible array, or a v2 B-tree record's
/// first fields: the chunk's address, and its stored size and filter
/// mask when the chunks are filtered (`size_len` bytes of size).
fn entry(
    c: &mut Cur,
    sb: &Superblock,
    grid: &Grid,
    size_len: Option<usize>,
) -> Result<Option<(u64, u64, u32)>, Bad> {
    let addr = c.uint(usize::from(sb.offsets))?;
    let (size, mask) = match size_len {
        Some(n) => (c.uint(n)?, c.u32()?),
        None => (grid.chunk_bytes, 0),
    };
    Ok(sb.abs(addr).map(|a| (a, size, mask)))
}

/// A fixed array (`FAHD`, then `FADB`, in pages when it is long).
#[allow(clippy::too_many_arguments)]
fn fixed(
    src: &dyn Source,
    sb: &Superblock,
    at: u64,
    grid: &Grid,
    order: &Order,
    filtered: bool,
    out: &mut Vec<Chunk>,
    problems: &mut Vec<Bad>,
) {
    let (o, l) = (usize::from(sb.offsets), usize::from(sb.lengths));
    let r = (|| -> Result<(), Bad> {
        let h = signed_block(
            src,
            at,
            (4 + 4 + l + o + 4) as u64,
            b"FAHD",
            "a fixed array header",
        )?;
        let mut c = Cur::new(&h, at);
        c.skip(6)?;
        let esize = usize::from(c.u8()?);
        let page_bits = u32::from(c.u8()?);
        let n = c.uint(l)?;
        let block = c.uint(o)?;
        let size_len = size_len(esize, o, filtered, at)?;
        let Some(block) = sb.abs(block) else {
            return Ok(());
        };
        if n > MAX_CHUNKS || page_bits > 32 {
            return Err(Bad::wrong(at, format!("a fixed array of {n} entries")));
        }
        let prefix = 4 + 2 + o;
        let page = 1u64 << page_bits;
        // `count` entries from entry `from`, in `b` (checked) at `skip`.
        let mut read_run =
            |from: u64, count: u64, b: &[u8], at: u64, skip: usize| -> Result<(), Bad> {
                let mut c = Cur::new(b, at);
                c.skip(skip)?;
                for i in from..from + count {
                    let start = c.at();
                    if let Some((a, size, mask)) = entry(&mut c, sb, grid, size_len)?
                        && let Some(index) = order.grid_index(grid, i)
                    {
                        out.push(Chunk {
                            index,
                            at: a,
                            size,
                            mask,
                        });
                    }
                    c.skip(esize.saturating_sub((c.at() - start) as usize))?;
                }
                Ok(())
            };
        if n <= page {
            // Prefix, entries and checksum in one.
            let b = signed_block(
                src,
                block,
                prefix as u64 + n * esize as u64 + 4,
                b"FADB",
                "a fixed array data block",
            )?;
            return read_run(0, n, &b, block, prefix);
        }
        let pages = n.div_ceil(page);
        let bitmap = pages.div_ceil(8);
        let head = signed_block(
            src,
            block,
            prefix as u64 + bitmap + 4,
            b"FADB",
            "a fixed array data block",
        )?;
        let mut page_at = block + head.len() as u64;
        for p in 0..pages {
            let count = page.min(n - p * page);
            let init = head[prefix + (p / 8) as usize] & (0x80 >> (p % 8)) != 0;
            if init {
                let r = bytes(src, page_at, count * esize as u64 + 4, "a fixed array page")
                    .and_then(|b| checked(b, page_at))
                    .and_then(|b| read_run(p * page, count, &b, page_at, 0));
                if let Err(e) = r {
                    problems.push(e);
                }
            }
            page_at += count * esize as u64 + 4;
        }
        Ok(())
    })();
    if let Err(e) = r {
        problems.push(e);
    }
}

/// Bytes of a filtered entry's chunk size, from the entry's size.
fn size_len(esize: usize, o: usize, filtered: bool, at: u64) -> Result<Option<usize>, Bad> {
    if !filtered {
        return if esize >= o {
            Ok(None)
        } else {
            Err(Bad::wrong(at, format!("entries of {esize} bytes")))
        };
    }
    match esize.checked_sub(o + 4) {
        Some(n @ 1..=8) => Ok(Some(n)),
        _ => Err(Bad::wrong(at, format!("filtered entries of {esize} bytes"))),
    }
}

/// An extensible array (`EAHD`, its index block `EAIB`, super blocks
/// `EASB` and data blocks `EADB`, paged when they are long).
#[allow(clippy::too_many_arguments)]
fn extensible(
    src: &dyn Source,
    sb: &Superblock,
    at: u64,
    grid: &Grid,
    order: &Order,
    filtered: bool,
    out: &mut Vec<Chunk>,
    problems: &mut Vec<Bad>,
) {
    let (o, l) = (usize::from(sb.offsets), usize::from(sb.lengths));
    let r = (|| -> Result<(), Bad> {
        let h = signed_block(
            src,
            at,
            (4 + 2 + 6 + 6 * l + o + 4) as u64,
            b"EAHD",
            "an extensible array header",
        )?;
        let mut c = Cur::new(&h, at);
        c.skip(6)?;
        let esize = usize::from(c.u8()?);
        let max_bits = u32::from(c.u8()?);
        let idx_elmts = u64::from(c.u8()?);
        let dblk_min = u64::from(c.u8()?);
        let sblk_min_ptrs = u64::from(c.u8()?);
        let page_bits = u32::from(c.u8()?);
        c.skip(4 * l)?;
        let max_set = c.uint(l)?;
        let _realized = c.uint(l)?;
        let iblock = c.uint(o)?;
        let size_len = size_len(esize, o, filtered, at)?;
        if !(1..=64).contains(&max_bits)
            || !dblk_min.is_power_of_two()
            || !sblk_min_ptrs.is_power_of_two()
            || page_bits > 32
            || u64::from(dblk_min.trailing_zeros()) > u64::from(max_bits)
        {
            return Err(Bad::wrong(at, "an extensible array of impossible geometry"));
        }
        let Some(iblock) = sb.abs(iblock) else {
            return Ok(());
        };
        let n = max_set.min(MAX_CHUNKS);
        let off_size = (max_bits as usize).div_ceil(8);
        let page = 1u64 << page_bits;
        // Super block u: 2^(u/2) data blocks of 2^((u+1)/2) * dblk_min
        // elements each.
        let nsblks = 1 + (max_bits - dblk_min.trailing_zeros()) as usize;
        let sblk = |u: usize| -> (u64, u64) {
            let ndblks = 1u64 << (u / 2).min(63);
            let nelmts = (1u64 << u.div_ceil(2).min(63)).saturating_mul(dblk_min);
            (ndblks, nelmts)
        };
        let iblock_sblks = 2 * sblk_min_ptrs.trailing_zeros() as usize;
        let ndblk_addrs = 2 * (sblk_min_ptrs as usize - 1);
        let nsblk_addrs = nsblks.saturating_sub(iblock_sblks);
        let len = 4 + 2 + o + idx_elmts as usize * esize + (ndblk_addrs + nsblk_addrs) * o + 4;
        let b = signed_block(
            src,
            iblock,
            len as u64,
            b"EAIB",
            "an extensible array index block",
        )?;
        let mut c = Cur::new(&b, iblock);
        c.skip(6 + o)?;
        let mut push = |i: u64, c: &mut Cur| -> Result<(), Bad> {
            let start = c.at();
            let e = entry(c, sb, grid, size_len)?;
            c.skip(esize.saturating_sub((c.at() - start) as usize))?;
            if i < n
                && let Some((a, size, mask)) = e
                && let Some(index) = order.grid_index(grid, i)
            {
                out.push(Chunk {
                    index,
                    at: a,
                    size,
                    mask,
                });
            }
            Ok(())
        };
        for i in 0..idx_elmts {
            push(i, &mut c)?;
        }
        let mut dblks = Vec::new();
        for _ in 0..ndblk_addrs {
            dblks.push(sb.abs(c.uint(o)?));
        }
        let mut sblks = Vec::new();
        for _ in 0..nsblk_addrs {
            sblks.push(sb.abs(c.uint(o)?));
        }
        // A data block of `count` elements from element `first`.
        // A data block of `count` elements from element `first`; a paged
        // one with the bitmap of its pages that were written.
        let mut data_block =
            |at: u64, first: u64, count: u64, init: &[u8], problems: &mut Vec<Bad>| {
                let r = (|| -> Result<(), Bad> {
                    let prefix = (4 + 2 + o + off_size) as u64;
                    if count > page {
                        // Its prefix, checked; the pages follow.
                        signed_block(
                            src,
                            at,
                            prefix + 4,
                            b"EADB",
                            "an extensible array data block",
                        )?;
                        let mut page_at = at + prefix + 4;
                        for p in 0..count.div_ceil(page) {
                            let k = page.min(count - p * page);
                            let written = init
                                .get((p / 8) as usize)
                                .is_some_and(|b| b & (0x80 >> (p % 8)) != 0);
                            if !written {
                                page_at += k * esize as u64 + 4;
                                continue;
                            }
                            let b = bytes(
                                src,
                                page_at,
                                k * esize as u64 + 4,
                                "an extensible array page",
                            )?;
                            match checked(b, page_at) {
                                Ok(b) => {
                                    let mut c = Cur::new(&b, page_at);
                                    for i in 0..k {
                                        push(first + p * page + i, &mut c)?;
                                    }
                                }
                                Err(e) => problems.push(e),
                            }
                            page_at += k * esize as u64 + 4;
                        }
                        return Ok(());
                    }
                    let b = signed_block(
                        src,
                        at,
                        prefix + count * esize as u64 + 4,
                        b"EADB",
                        "an extensible array data block",
                    )?;
                    let mut c = Cur::new(&b, at);
                    c.skip(prefix as usize)?;
                    for i in 0..count {
                        push(first + i, &mut c)?;
                    }
                    Ok(())
                })();
                if let Err(e) = r {
                    problems.push(e);
                }
            };
        let mut first = idx_elmts;
        let mut dblk = 0usize;
        let mut seen = HashSet::new();
        for u in 0..nsblks {
            if first >= n {
                break;
            }
            let (ndblks, nelmts) = sblk(u);
            if u < iblock_sblks {
                for _ in 0..ndblks {
                    if let Some(Some(a)) = dblks.get(dblk)
                        && first < n
                        && seen.insert(*a)
                    {
                        data_block(*a, first, nelmts, &[], problems);
                    }
                    dblk += 1;
                    first = first.saturating_add(nelmts);
                }
                continue;
            }
            let span = ndblks.saturating_mul(nelmts);
            let Some(Some(s)) = sblks.get(u - iblock_sblks) else {
                first = first.saturating_add(span);
                continue;
            };
            if !seen.insert(*s) {
                problems.push(Bad::wrong(*s, "a super block seen before"));
                first = first.saturating_add(span);
                continue;
            }
            let paged = nelmts > page;
            let bitmap = if paged {
                nelmts.div_ceil(page).div_ceil(8)
            } else {
                0
            };
            let len = (4 + 2 + o + off_size) as u64 + ndblks * (bitmap + o as u64) + 4;
            let sbk = match signed_block(src, *s, len, b"EASB", "an extensible array super block") {
                Ok(b) => b,
                Err(e) => {
                    problems.push(e);
                    first = first.saturating_add(span);
                    continue;
                }
            };
            let maps = 4 + 2 + o + off_size;
            let mut c = Cur::new(&sbk, *s);
            c.skip(maps + (ndblks * bitmap) as usize)?;
            for d in 0..ndblks {
                let a = sb.abs(c.uint(o)?);
                let from = maps + (d * bitmap) as usize;
                let init = &sbk[from..from + bitmap as usize];
                if let Some(a) = a
                    && first < n
                    && seen.insert(a)
                {
                    data_block(a, first, nelmts, init, problems);
                }
                first = first.saturating_add(nelmts);
            }
        }
        Ok(())
    })();
    if let Err(e) = r {
        problems.push(e);
    }
}

/// A v2 B-tree of chunk records: type 10 (unfiltered) or 11 (filtered),
/// each with the chunk's grid coordinates.
fn btree2(
    src: &dyn Source,
    sb: &Superblock,
    tree: u64,
    grid: &Grid,
    out: &mut Vec<Chunk>,
    problems: &mut Vec<Bad>,
) {
    let o = usize::from(sb.offsets);
    let rank = grid.dims.len();
    let min = o + 8 * rank;
    let mut bad = None;
    super::read::btree2(src, sb, tree, &[10, 11], min, problems, |kind, r, at| {
        let size_len = if kind == 11 {
            match r.len().checked_sub(o + 4 + 8 * rank) {
                Some(n @ 1..=8) => Some(n),
                _ => {
                    bad = Some(Bad::wrong(
                        at,
                        format!("chunk records of {} bytes", r.len()),
                    ));
                    return false;
                }
            }
        } else {
            None
        };
        let mut c = Cur::new(r, at);
        let parsed = (|| -> Result<Option<Chunk>, Bad> {
            let e = entry(&mut c, sb, grid, size_len)?;
            let mut scaled = Vec::with_capacity(rank);
            for _ in 0..rank {
                scaled.push(c.uint(8)?);
            }
            Ok(e.zip(grid.linear(&scaled))
                .map(|((a, size, mask), index)| Chunk {
                    index,
                    at: a,
                    size,
                    mask,
                }))
        })();
        match parsed {
            Ok(Some(ch)) => out.push(ch),
            Ok(None) => {}
            Err(e) => bad = Some(e),
        }
        (out.len() as u64) < MAX_CHUNKS
    });
    problems.extend(bad);
}

/// What undoes the filters a chunk was stored with.
#[derive(Clone, Debug)]
pub(crate) struct Pipeline {
    pub(crate) filters: Vec<u16>,
    /// Bytes of one element (shuffle's unit).
    pub(crate) elem: usize,
    pub(crate) edge_unfiltered: bool,
}

impl Pipeline {
    /// The names of the filters that are not decoded here.
    pub(crate) fn unknown(&self) -> Vec<String> {
        self.filters
            .iter()
            .filter(|f| !matches!(f, 1..=3))
            .map(|&f| filter_name(f))
            .collect()
    }

    /// The chunk `stored`, with its filters undone (those whose bit is
    /// set in `mask` were skipped when it was written): exactly `want`
    /// bytes, or why not.
    pub(crate) fn decode(
        &self,
        stored: Vec<u8>,
        mask: u32,
        want: usize,
    ) -> Result<Vec<u8>, String> {
        let mut b = stored;
        for (i, &f) in self.filters.iter().enumerate().rev() {
            if i < 32 && mask & (1 << i) != 0 {
                continue;
            }
            b = match f {
                1 => inflate(&b, want)?,
                2 => unshuffle(&b, self.elem),
                3 => fletcher32_strip(b)?,
                _ => return Err(format!("its {} filter is not decoded", filter_name(f))),
            };
        }
        if b.len() != want {
            return Err(format!("it decodes to {} bytes, not {want}", b.len()));
        }
        Ok(b)
    }
}

/// A zlib stream (deflate's filter), checked by its Adler-32; more than
/// `want` bytes is an error.
fn inflate(b: &[u8], want: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(want);
    let mut z = flate2::read::ZlibDecoder::new(b);
    match (&mut z).take(want as u64 + 1).read_to_end(&mut out) {
        Ok(_) if out.len() > want => Err(format!("its deflate data makes more than {want} bytes")),
        Ok(_) => Ok(out),
        Err(e) => Err(format!("its deflate data is bad: {e}")),
    }
}

/// Shuffle undone: byte `j` of element `i` was stored at `j * n + i`.
fn unshuffle(b: &[u8], elem: usize) -> Vec<u8> {
    if elem <= 1 || b.len() < elem {
        return b.to_vec();
    }
    let n = b.len() / elem;
    let mut out = vec![0u8; b.len()];
    for j in 0..elem {
        let plane = &b[j * n..(j + 1) * n];
        for (i, &v) in plane.iter().enumerate() {
            out[i * elem + j] = v;
        }
    }
    out[n * elem..].copy_from_slice(&b[n * elem..]);
    out
}

/// HDF5's Fletcher-32 of `b`: 16-bit words, big-endian, sums folded
/// every 360 words.
pub(crate) fn fletcher32(b: &[u8]) -> u32 {
    let (mut s1, mut s2) = (0u32, 0u32);
    let fold = |s: u32| (s & 0xffff) + (s >> 16);
    for block in b.chunks(720) {
        let mut words = block.chunks_exact(2);
        for w in &mut words {
            s1 += u32::from(w[0]) << 8 | u32::from(w[1]);
            s2 += s1;
        }
        if let [last] = words.remainder() {
            s1 += u32::from(*last) << 8;
            s2 += s1;
        }
        s1 = fold(s1);
        s2 = fold(s2);
    }
    s1 = fold(s1);
    s2 = fold(s2);
    s2 << 16 | s1
}

/// The data before a fletcher32 checksum, when it holds (also in the
/// byte order files of HDF5 before 1.6.3 wrote it).
fn fletcher32_strip(mut b: Vec<u8>) -> Result<Vec<u8>, String> {
    let Some(n) = b.len().checked_sub(4) else {
        return Err("its fletcher32 checksum is cut".into());
    };
    let stored = u32::from_le_bytes([b[n], b[n + 1], b[n + 2], b[n + 3]]);
    let sum = fletcher32(&b[..n]);
    let old = sum.swap_bytes().rotate_left(16);
    if stored != sum && stored != old {
        return Err(format!(
            "its fletcher32 checksum is {stored:#010x}, its data sums to {sum:#010x}"
        ));
    }
    b.truncate(n);
    Ok(b)
}

/// A chunked dataset's values in C order, decoded from its chunks as they
/// are read; unwritten chunks read as the fill value, and a chunk that
/// does not decode as zeros (the parse records it as damage).
pub(crate) struct Array {
    file: Data,
    grid: Grid,
    chunks: Vec<Chunk>,
    pipe: Pipeline,
    fill: Option<Vec<u8>>,
    /// The index has no checksum over the chunks' filter masks (a v1
    /// B-tree).
    masks_unchecked: bool,
    cache: Mutex<Vec<(u64, Arc<[u8]>)>>,
}

impl Array {
    pub(crate) fn new(
        file: Data,
        grid: Grid,
        chunks: Vec<Chunk>,
        pipe: Pipeline,
        fill: Option<Vec<u8>>,
        masks_unchecked: bool,
    ) -> Array {
        let fill = fill.filter(|f| f.len() as u64 == grid.elem && f.iter().any(|&b| b != 0));
        Array {
            file,
            grid,
            chunks,
            pipe,
            fill,
            masks_unchecked,
            cache: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn chunks(&self) -> &[Chunk] {
        &self.chunks
    }

    pub(crate) fn grid(&self) -> &Grid {
        &self.grid
    }

    /// Why chunk `c`'s values are not proved, when its filter mask says
    /// filters were skipped and no checksum covers the mask: HDF5 skips
    /// one only when it fails, which shuffle, deflate and fletcher32 do
    /// not, so a damaged mask is likelier (it decodes, to other values).
    pub(crate) fn doubtful_mask(&self, c: &Chunk) -> Option<String> {
        if !self.masks_unchecked || c.mask == 0 || !self.is_filtered(c) {
            return None;
        }
        let skipped: Vec<String> = (self.pipe.filters.iter().enumerate())
            .filter(|(i, _)| *i < 32 && c.mask & (1 << i) != 0)
            .map(|(_, &f)| filter_name(f))
            .collect();
        Some(format!(
            "its filter mask ({:#x}) says {} skipped, and no checksum covers the mask",
            c.mask,
            if skipped.is_empty() {
                "unknown filters were".to_string()
            } else {
                format!("{} was", skipped.join("+"))
            }
        ))
    }

    /// Whether chunk `c` was stored through filters (it is checked by
    /// decoding it).
    pub(crate) fn is_filtered(&self, c: &Chunk) -> bool {
        !(self.pipe.filters.is_empty() || (self.pipe.edge_unfiltered && self.grid.is_edge(c.index)))
    }

    /// Why unfiltered chunk `c` cannot be read, when it cannot: its size
    /// is wrong, or its bytes run past `avail`. (Its file range, why,
    /// whether it is cut.)
    pub(crate) fn check_bounds(&self, c: &Chunk, avail: u64) -> Option<(Range, String, bool)> {
        let r = Range::new(c.at, c.at.saturating_add(c.size));
        if c.size != self.grid.chunk_bytes {
            return Some((
                r,
                format!("a chunk of {} bytes, not {}", c.size, self.grid.chunk_bytes),
                false,
            ));
        }
        (r.end > avail).then(|| (r, "its bytes run past the end of the file".into(), true))
    }

    /// Chunk `k` of [`Array::chunks`] decoded, or why it cannot be.
    pub(crate) fn decode(&self, k: usize) -> Result<Vec<u8>, (Range, String, bool)> {
        let c = self.chunks[k];
        let want = self.grid.chunk_bytes as usize;
        let r = Range::new(c.at, c.at.saturating_add(c.size));
        let unfiltered = !self.is_filtered(&c);
        if c.size > MAX_CHUNK_BYTES.saturating_mul(2) {
            return Err((r, format!("a chunk stored in {} bytes", c.size), false));
        }
        if unfiltered && c.size != want as u64 {
            return Err((r, format!("a chunk of {} bytes, not {want}", c.size), false));
        }
        let mut stored = vec![0u8; c.size as usize];
        match crate::data::read_exact_at(&*self.file, c.at, &mut stored) {
            Ok(true) => {}
            Ok(false) => {
                return Err((r, "its bytes run past the end of the file".into(), true));
            }
            Err(e) => return Err((r, e.to_string(), false)),
        }
        if unfiltered {
            return Ok(stored);
        }
        self.pipe
            .decode(stored, c.mask, want)
            .map_err(|e| (r, e, false))
    }

    /// Chunk `index` of the grid decoded, through the cache; `None` when
    /// it was never written.
    fn chunk(&self, index: u64) -> Option<Arc<[u8]>> {
        let k = self.chunks.binary_search_by_key(&index, |c| c.index).ok()?;
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = cache.iter().position(|(x, _)| *x == index) {
            let hit = cache.remove(i);
            let b = hit.1.clone();
            cache.push(hit);
            return Some(b);
        }
        drop(cache);
        let b: Arc<[u8]> = match self.decode(k) {
            Ok(b) => b.into(),
            Err(_) => vec![0u8; self.grid.chunk_bytes as usize].into(),
        };
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        let keep = (CACHE_BYTES / self.grid.chunk_bytes.max(1)).max(2) as usize;
        while cache.len() >= keep {
            cache.remove(0);
        }
        cache.push((index, b.clone()));
        Some(b)
    }
}

impl Source for Array {
    fn available(&self) -> u64 {
        self.grid.nbytes
    }
    fn is_final(&self) -> bool {
        true
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<usize> {
        let g = &self.grid;
        let end = offset.saturating_add(buf.len() as u64).min(g.nbytes);
        if offset >= end {
            return Ok(0);
        }
        let rank = g.dims.len();
        let last = rank - 1;
        let mut pos = offset;
        let mut held: Option<(u64, Option<Arc<[u8]>>)> = None;
        let mut coords = vec![0u64; rank];
        while pos < end {
            let e = pos / g.elem;
            let byte = pos % g.elem;
            let mut rest = e;
            for (c, d) in coords.iter_mut().zip(&g.dims).rev() {
                *c = rest % d;
                rest /= d;
            }
            let mut index = 0u64;
            let mut within = 0u64;
            for ((c, n), k) in coords.iter().zip(&g.counts).zip(&g.chunk) {
                index = index * n + c / k;
                within = within * k + c % k;
            }
            let run_elems =
                (g.chunk[last] - coords[last] % g.chunk[last]).min(g.dims[last] - coords[last]);
            let run = (run_elems * g.elem - byte).min(end - pos) as usize;
            let at = (pos - offset) as usize;
            let out = &mut buf[at..at + run];
            if held.as_ref().is_none_or(|(i, _)| *i != index) {
                held = Some((index, self.chunk(index)));
            }
            match held.as_ref().and_then(|(_, b)| b.as_ref()) {
                Some(b) => {
                    let from = (within * g.elem + byte) as usize;
                    out.copy_from_slice(&b[from..from + run]);
                }
                None => match &self.fill {
                    Some(f) => {
                        for (i, o) in out.iter_mut().enumerate() {
                            *o = f[((byte as usize) + i) % f.len()];
                        }
                    }
                    None => out.fill(0),
                },
            }
            pos += run as u64;
        }
        Ok((end - offset) as usize)
    }
    fn describe(&self) -> &'static str {
        "hdf5 dataset"
    }
    fn counters(&self) -> Option<&Arc<crate::data::stats::Counters>> {
        self.file.counters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_is_undone() {
        // Three 4-byte elements, and two bytes left over.
        let plain: Vec<u8> = (0..14).collect();
        let n = 3;
        let mut shuffled = vec![0u8; 14];
        for i in 0..n {
            for j in 0..4 {
                shuffled[j * n + i] = plain[i * 4 + j];
            }
        }
        shuffled[12..].copy_from_slice(&plain[12..]);
        assert_eq!(unshuffle(&shuffled, 4), plain);
    }

    #[test]
    fn fletcher32_of_known_words() {
        // Words 0x0102, 0x0304: s1 = 0x0406, s2 = 0x0102 + 0x0406.
        assert_eq!(fletcher32(&[1, 2, 3, 4]), (0x0508 << 16) | 0x0406);
        // An odd byte counts as the high half of a word.
        assert_eq!(fletcher32(&[1]), (0x0100 << 16) | 0x0100);
    }

    #[test]
    fn a_grid_spans_its_chunks() {
        let g = Grid::new(&[5, 7], &[2, 3], 4, 0).unwrap();
        assert_eq!(g.counts, vec![3, 3]);
        assert_eq!(g.total, 9);
        // Chunk (2, 2) holds element (4, 6) only.
        assert_eq!(g.span(8), Range::new((4 * 7 + 6) * 4, (4 * 7 + 7) * 4));
        assert!(g.is_edge(8));
        assert!(!g.is_edge(0));
        assert_eq!(g.linear(&[1, 2]), Some(5));
        assert_eq!(g.linear(&[3, 0]), None);
    }
}
