//! Visiting a tensor's elements in C order, whatever its strides, with
//! their bytes fetched in bounded chunks and runs of missing elements
//! handed over at once. Shared by [`values`](super::values), the statistics
//! and the `.npy` export.

use std::io;

use super::dequant::{self, MAX_BLOCK};
use crate::data::{self, Source};
use crate::offer::ggml::GgmlType;
use crate::offer::tensor::{Dtype, Tensor};

/// Bytes fetched from the source at once.
pub(super) const CHUNK: u64 = 1 << 16;

/// Elements handed over per fetch at most (cancellation granularity).
const BATCH: u64 = 1 << 14;

/// A tensor's layout, normalized: dimensions of length 1 dropped, adjacent
/// dimensions that are contiguous with each other merged; at least one
/// dimension; every length ≥ 1 unless the tensor is empty.
pub(super) struct Plan {
    /// (length, stride in elements), outermost first.
    dims: Vec<(u64, u64)>,
    pub(super) numel: u64,
    bits: u64,
    /// Byte offset of element 0 in the source.
    base: u64,
    /// Bits present after `base` (fixed when the plan is made, so that two
    /// passes over a growing source see the same elements).
    limit: u128,
    /// A GGML block type that is dequantized: (type, elements per block,
    /// bytes per block). Its elements are handed over as `f32`.
    quant: Option<(GgmlType, u64, u64)>,
    /// The type of the elements handed over.
    pub(super) dtype: Dtype,
    /// Whether they are big-endian.
    pub(super) be: bool,
}

impl Plan {
    pub(super) fn new(t: &Tensor, data: &dyn Source) -> Plan {
        let shape = &t.shape;
        let strides: Vec<u64> = match &t.stride {
            Some(s) if s.len() == shape.len() => s.clone(),
            _ => {
                let mut s = vec![1u64; shape.len()];
                for k in (0..shape.len().saturating_sub(1)).rev() {
                    s[k] = s[k + 1].saturating_mul(shape[k + 1]);
                }
                s
            }
        };
        let numel = shape.iter().fold(1u64, |a, &n| a.saturating_mul(n));
        let mut dims: Vec<(u64, u64)> = Vec::new();
        for (&n, &s) in shape.iter().zip(&strides) {
            if n == 1 {
                continue;
            }
            if let Some(last) = dims.last_mut()
                && n.checked_mul(s) == Some(last.1)
                && let Some(len) = last.0.checked_mul(n)
            {
                *last = (len, s);
                continue;
            }
            dims.push((n, s));
        }
        if dims.is_empty() {
            dims.push((1, 1));
        }
        let end = data.available().min(t.offset.saturating_add(t.length));
        let quant = match t.dtype {
            // Blocks of a big-endian file would need their scales swapped.
            Dtype::Ggml(g) if dequant::supported(g) && !t.big_endian => {
                g.block().map(|(n, b)| (g, n, b))
            }
            _ => None,
        };
        Plan {
            dims,
            numel,
            bits: t.dtype.bits(),
            base: t.offset,
            limit: u128::from(end.saturating_sub(t.offset)) * 8,
            quant,
            dtype: if quant.is_some() { Dtype::F32 } else { t.dtype },
            be: t.big_endian && quant.is_none(),
        }
    }

    /// Whether elements can be decoded at all (block types only when they
    /// are dequantized).
    pub(super) fn decodable(&self) -> bool {
        !self.dtype.is_block()
    }

    /// Whether elements are stored one after the other from element 0.
    fn contiguous(&self) -> bool {
        self.dims.len() == 1 && self.dims[0].1 == 1
    }
}

/// What the walk hands over for each element, in C order.
pub(super) enum Item<'a> {
    /// A present element: its bits start at bit offset `.1` of `.0` (the
    /// slice is empty when the walk does not read).
    Here(&'a [u8], u64),
    /// This many consecutive elements whose bytes are not there.
    Gone(u64),
}

/// Visits `count` elements from C-order index `first`. `f` returns false
/// to stop; the result is false when it did. With `read` false no bytes
/// are fetched (presence depends on offsets only). With `release`, pages
/// of a contiguous tensor are released behind the walk.
pub(super) fn walk(
    p: &Plan,
    data: &dyn Source,
    first: u64,
    count: u64,
    read: bool,
    release: bool,
    mut f: impl FnMut(Item<'_>) -> bool,
) -> io::Result<bool> {
    if let Some(q) = p.quant {
        return walk_blocks(p, q, data, first, count, read, release, f);
    }
    let nd = p.dims.len();
    let mut left = count.min(p.numel.saturating_sub(first));
    if left == 0 {
        return Ok(true);
    }
    let mut idx = vec![0u64; nd];
    let mut rem = first;
    for k in (0..nd).rev() {
        let n = p.dims[k].0.max(1);
        idx[k] = rem % n;
        rem /= n;
    }
    let bits = u128::from(p.bits);
    let release = release && p.contiguous();
    let mut scratch = Vec::new();
    while left > 0 {
        let lin: u128 = idx
            .iter()
            .zip(&p.dims)
            .map(|(&i, &(_, s))| u128::from(i) * u128::from(s))
            .fold(0u128, |a, b| a.saturating_add(b));
        let (n, s) = p.dims[nd - 1];
        let j = idx[nd - 1];
        let pos0 = lin.saturating_mul(bits);
        let step = u128::from(s) * bits;
        // How many of this row's next `take` elements are present: positions
        // grow along the row, so they are a prefix.
        let take = (n - j).min(left);
        let present = if pos0.saturating_add(bits) > p.limit {
            0
        } else {
            // A zero step (a broadcast row) repeats one present element.
            match (p.limit - pos0 - bits).checked_div(step) {
                None => take,
                Some(room) => u64::try_from(room + 1).map_or(take, |r| r.min(take)),
            }
        };
        if present == 0 {
            // Positions only grow with each index (strides are unsigned), so
            // with `m` the start of the run of trailing zero indices, every
            // element from here to the end of dimension `m - 1`'s run is
            // missing: skip them at once (the whole rest when `m` is 0).
            let m = (0..nd)
                .rev()
                .take_while(|&k| idx[k] == 0)
                .last()
                .unwrap_or(nd);
            let (level, block) = if m == 0 {
                (0, left)
            } else {
                let inner = p.dims[m..]
                    .iter()
                    .fold(1u64, |a, &(n, _)| a.saturating_mul(n));
                (m - 1, (p.dims[m - 1].0 - idx[m - 1]).saturating_mul(inner))
            };
            let block = block.min(left);
            if !f(Item::Gone(block)) {
                return Ok(false);
            }
            left -= block;
            if left > 0 && !next_run(&mut idx, &p.dims, level) {
                break;
            }
            continue;
        }
        let per = u128::from(CHUNK * 8)
            .checked_div(step)
            .map_or(BATCH, |k| u64::try_from(k).unwrap_or(BATCH).clamp(1, BATCH));
        let mut a = 0u64;
        while a < present {
            let b = (a + per).min(present);
            let start = pos0 + u128::from(a) * step;
            let end = pos0 + u128::from(b - 1) * step + bits;
            let lo = start / 8;
            let hi = end.div_ceil(8);
            // Present elements lie within `limit`, which fits in u64 bytes.
            let lo64 = u64::try_from(lo).unwrap_or(u64::MAX);
            let len = usize::try_from(hi - lo).unwrap_or(usize::MAX);
            let slice: &[u8] = if read {
                data::view(data, p.base.saturating_add(lo64), len, &mut scratch)?
            } else {
                &[]
            };
            for e in a..b {
                let off = pos0 + u128::from(e) * step - lo * 8;
                let ok = !read || off + bits <= slice.len() as u128 * 8;
                let item = if ok {
                    Item::Here(slice, off as u64)
                } else {
                    Item::Gone(1)
                };
                if !f(item) {
                    return Ok(false);
                }
            }
            if release {
                data.release(
                    p.base.saturating_add(lo64),
                    p.base.saturating_add(lo64.saturating_add(len as u64)),
                );
            }
            a = b;
        }
        if take > present && !f(Item::Gone(take - present)) {
            return Ok(false);
        }
        left -= take;
        if left > 0 && !next_run(&mut idx, &p.dims, nd - 1) {
            break;
        }
    }
    Ok(true)
}

/// The walk over a block-quantized tensor: always C-contiguous (GGUF has
/// no strides), read a chunk of whole blocks at a time, each block
/// dequantized and its elements handed over as little-endian `f32`. A block
/// whose bytes are not all there makes its elements and all after missing.
#[allow(clippy::too_many_arguments)]
fn walk_blocks(
    p: &Plan,
    (ty, block, bytes): (GgmlType, u64, u64),
    data: &dyn Source,
    first: u64,
    count: u64,
    read: bool,
    release: bool,
    mut f: impl FnMut(Item<'_>) -> bool,
) -> io::Result<bool> {
    let end = first.saturating_add(count.min(p.numel.saturating_sub(first)));
    let have = u64::try_from(p.limit / 8).unwrap_or(u64::MAX);
    let per = (CHUNK / bytes).max(1);
    let mut scratch = Vec::new();
    let mut vals = [0f32; MAX_BLOCK];
    let mut le = vec![0u8; MAX_BLOCK * 4];
    let mut e = first;
    while e < end {
        let b0 = e / block;
        let whole = have / bytes;
        if b0 >= whole {
            return Ok(f(Item::Gone(end - e)));
        }
        let last = (end - 1) / block;
        let nb = per.min(whole - b0).min(last - b0 + 1);
        let lo = b0 * bytes;
        let len = usize::try_from(nb * bytes).unwrap_or(usize::MAX);
        let slice: &[u8] = if read {
            data::view(data, p.base.saturating_add(lo), len, &mut scratch)?
        } else {
            &[]
        };
        for k in 0..nb {
            let b = b0 + k;
            if read {
                let at = (k * bytes) as usize;
                let ok = slice
                    .get(at..at + bytes as usize)
                    .is_some_and(|blk| dequant::dequantize(ty, blk, &mut vals));
                if !ok {
                    return Ok(f(Item::Gone(end - e)));
                }
                for (o, v) in le.chunks_exact_mut(4).zip(&vals[..block as usize]) {
                    o.copy_from_slice(&v.to_le_bytes());
                }
            }
            let stop = ((b + 1) * block).min(end);
            while e < stop {
                let item = if read {
                    Item::Here(&le, (e - b * block) * 32)
                } else {
                    Item::Here(&[], 0)
                };
                if !f(item) {
                    return Ok(false);
                }
                e += 1;
            }
        }
        if release {
            data.release(
                p.base.saturating_add(lo),
                p.base.saturating_add(lo + len as u64),
            );
        }
    }
    Ok(true)
}

/// Moves the multi-index past the end of dimension `level`'s current run:
/// indices `level..` become 0 and dimension `level - 1` goes up by one,
/// with carry. Returns false past the last element.
fn next_run(idx: &mut [u64], dims: &[(u64, u64)], level: usize) -> bool {
    for i in &mut idx[level..] {
        *i = 0;
    }
    let mut k = level;
    while k > 0 {
        k -= 1;
        idx[k] += 1;
        if idx[k] < dims[k].0 {
            return true;
        }
        idx[k] = 0;
    }
    false
}
