use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;

use super::per_process::PerProcess;

use parking_lot::Mutex;

/// Key of one cached chunk: (source id, chunk index).
type Key = (u64, u64);

/// One cached chunk of decoded bytes, allocated at its exact size (the last
/// chunk of a small stream is small) and accounted at that size plus
/// `KEEP_COST`.
pub struct Chunk(Vec<u8>);

/// What keeping one chunk costs beside its bytes: its shared box, its
/// allocation's header, and its entries in the cache's two maps. A tar of
/// small `.gz` files fills the cache with chunks of a few hundred bytes,
/// and counted by their bytes alone, 32 MiB of them held 57 MB.
pub(super) const KEEP_COST: usize = 128;

impl Chunk {
    /// A shared chunk holding a copy of `bytes`.
    pub fn copy_of(bytes: &[u8]) -> Arc<Chunk> {
        let mut v = Vec::with_capacity(bytes.len());
        v.extend_from_slice(bytes);
        Arc::new(Chunk(v))
    }

    /// A chunk holding `bytes` (shrunk to their size).
    pub fn from_vec(mut bytes: Vec<u8>) -> Chunk {
        bytes.shrink_to_fit();
        Chunk(bytes)
    }

    /// Memory keeping the chunk costs (see `KEEP_COST`).
    pub fn cost(&self) -> usize {
        self.0.capacity() + KEEP_COST
    }
}

impl Deref for Chunk {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// The process-wide cache (see [`ChunkCache::global`]).
static CACHE: PerProcess<ChunkCache> = PerProcess::new(|| {
    let budget = std::env::var("PPARSE_CACHE_MB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(DEFAULT_CACHE_BYTES, |mb| mb.max(1) << 20);
    ChunkCache::new(budget)
});

/// In a forked child: the next use makes the child's own cache.
pub(super) fn forget_in_child() {
    CACHE.forget_in_child();
}

/// A process-wide LRU of decoded chunks with a byte budget.
///
/// Decoded streams put what they produce here so that parsers reading just
/// behind the decoder hit memory; anything older is evicted and decoded again
/// from the nearest checkpoint when asked for. This is the one place where
/// decoded bytes live in RAM, so its budget bounds that memory.
pub struct ChunkCache {
    inner: Mutex<Lru>,
}

struct Lru {
    /// Ordered by key, so that a source's chunks are one range of it
    /// (`forget` runs for every stream dropped: a zip's entries are
    /// hundreds of thousands of streams).
    map: BTreeMap<Key, (Arc<Chunk>, u64)>,
    order: BTreeMap<u64, Key>,
    tick: u64,
    bytes: usize,
    budget: usize,
}

/// Default budget of the global cache. With it the opened file's own
/// gzip stream runs 32 MiB ahead of its parsers and keeps 48 MiB for them
/// (see `AHEAD_WINDOW`): on the 10 GB tar.gz of `peers/index.sh` that
/// took the same time as twice this budget, in 64 MiB less (issue 37,
/// item 4), and decoded 17 MB of its 13.7 GB twice.
pub(super) const DEFAULT_CACHE_BYTES: usize = 16 << 20;

impl ChunkCache {
    /// A cache that keeps at most `budget` bytes of chunks.
    pub fn new(budget: usize) -> ChunkCache {
        ChunkCache {
            inner: Mutex::new(Lru {
                map: BTreeMap::new(),
                order: BTreeMap::new(),
                tick: 0,
                bytes: 0,
                budget,
            }),
        }
    }

    /// The process-wide cache used by decoded streams. Its budget is
    /// `DEFAULT_CACHE_BYTES`, or `PPARSE_CACHE_MB` megabytes when set.
    /// A forked child gets a cache of its own (see `data::fork`).
    pub fn global() -> &'static ChunkCache {
        CACHE.get()
    }

    /// Changes the budget (`--cache-size`), evicting what no longer fits.
    pub fn set_budget(&self, budget: usize) {
        let mut l = self.inner.lock();
        l.budget = budget;
        while l.bytes > l.budget && !l.order.is_empty() {
            let Some((_, k)) = l.order.pop_first() else {
                break;
            };
            if let Some((d, _)) = l.map.remove(&k) {
                l.bytes -= d.cost();
            }
        }
    }

    /// The budget in bytes.
    pub fn budget(&self) -> usize {
        self.inner.lock().budget
    }

    /// The chunk at `key`, marked as just used.
    pub fn get(&self, key: Key) -> Option<Arc<Chunk>> {
        let mut l = self.inner.lock();
        l.tick += 1;
        let tick = l.tick;
        let (data, old) = {
            let e = l.map.get_mut(&key)?;
            let old = e.1;
            e.1 = tick;
            (e.0.clone(), old)
        };
        l.order.remove(&old);
        l.order.insert(tick, key);
        Some(data)
    }

    /// Keeps a chunk, evicting the least recently used ones over the budget.
    pub fn insert(&self, key: Key, data: Arc<Chunk>) {
        let mut l = self.inner.lock();
        l.tick += 1;
        let tick = l.tick;
        l.bytes += data.cost();
        if let Some((old, t)) = l.map.insert(key, (data, tick)) {
            l.bytes -= old.cost();
            l.order.remove(&t);
        }
        l.order.insert(tick, key);
        while l.bytes > l.budget && l.order.len() > 1 {
            let Some((_, k)) = l.order.pop_first() else {
                break;
            };
            if let Some((d, _)) = l.map.remove(&k) {
                l.bytes -= d.cost();
            }
        }
    }

    /// Drops every chunk of one source (when the source goes away).
    pub fn forget(&self, source: u64) {
        let mut l = self.inner.lock();
        let keys: Vec<Key> = l
            .map
            .range((source, 0)..=(source, u64::MAX))
            .map(|(k, _)| *k)
            .collect();
        for k in keys {
            if let Some((d, t)) = l.map.remove(&k) {
                l.bytes -= d.cost();
                l.order.remove(&t);
            }
        }
    }
}

/// Reads `[offset, offset + buf.len())` of a decoded stream keyed `key`
/// with `avail` bytes, cached in chunks of `chunk_len`: from the cache, else from the producer's unfinished
/// chunk (`tail`), else by decoding the chunk again (`chunk`). Shared by
/// the decoded sources (deflate streams, block-compressed streams).
/// Checks chunk `idx` of a stream labelled `label`, decoded again, against
/// `crcs`, the CRC-32s its first pass recorded (one per `chunk` bytes): a
/// stream read back from an index whose checkpoints or blocks were moved
/// fails here instead of serving other bytes.
pub(crate) fn check_chunk_crc(
    crcs: &Mutex<Vec<u32>>,
    label: &str,
    chunk: u64,
    idx: u64,
    data: &[u8],
) -> std::io::Result<()> {
    let want = crcs.lock().get(idx as usize).copied();
    if want == Some(crc32fast::hash(data)) {
        return Ok(());
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!(
            "the index does not match the file: the {label} decoded again at {:#x} ({} bytes) is not what was decoded when the index was written",
            idx.saturating_mul(chunk),
            data.len()
        ),
    ))
}

/// Reads `buf` at `offset` of the decoded stream `(key, counters)` (its key
/// in the cache, and the counters that bytes found there add to): from the
/// cache, then the stream's `tail` not yet in a chunk, then `chunk`.
pub(crate) fn read_chunked(
    (key, counters): (u64, Option<&super::stats::Counters>),
    chunk_len: u64,
    avail: u64,
    offset: u64,
    buf: &mut [u8],
    tail: impl Fn(u64, &mut [u8]) -> usize,
    chunk: impl Fn(u64) -> std::io::Result<Arc<Chunk>>,
) -> std::io::Result<usize> {
    if offset >= avail {
        return Ok(0);
    }
    let n = (buf.len() as u64).min(avail - offset) as usize;
    let mut done = 0;
    while done < n {
        let pos = offset + done as u64;
        let idx = pos / chunk_len;
        let within = (pos % chunk_len) as usize;
        if let Some(c) = ChunkCache::global().get((key, idx)) {
            let k = (n - done).min(c.len().saturating_sub(within));
            if k == 0 {
                break;
            }
            buf[done..done + k].copy_from_slice(&c[within..within + k]);
            done += k;
            super::stats::from_cache(counters, k as u64);
            continue;
        }
        let k = tail(pos, &mut buf[done..n]);
        if k > 0 {
            done += k;
            super::stats::from_cache(counters, k as u64);
            continue;
        }
        let c = chunk(idx)?;
        let k = (n - done).min(c.len().saturating_sub(within));
        if k == 0 {
            return Err(std::io::Error::other(format!(
                "decoded stream ended early at {pos:#x} while re-reading"
            )));
        }
        buf[done..done + k].copy_from_slice(&c[within..within + k]);
        done += k;
    }
    Ok(done)
}
