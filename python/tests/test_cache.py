"""pparse.cache's shared cache: two processes filling the same items at
once store each once and never read a torn one, the bound stops it
adding, and its index is read as untrusted."""

import multiprocessing as mp
import struct

import pytest

from pparse.cache import SharedCache, cache_key


def _fill(cache, keys, size, barrier, out):
    """One of two processes filling the same items at once, as two workers
    missing the same member do, with the cache their parent made (a forked
    child must not share its parent's open files: a flock is theirs)."""
    barrier.wait()
    added = bad = 0
    for k in keys:
        want = _item(k, size)
        got = cache.get(cache_key(k))
        if got is None:
            added += cache.put(cache_key(k), want)
            got = cache.get(cache_key(k))
        bad += got != want
    out.put((added, bad))


def _item(k: str, size: int) -> bytes:
    return (k.encode() * (size // len(k) + 1))[:size]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_two_processes_filling_the_same_items_store_each_once(tmp_path, method):
    folder = tmp_path / "cache"
    keys = [f"item-{i}" for i in range(200)]
    size = 256 << 10
    ctx = mp.get_context(method)
    barrier, out = ctx.Barrier(2), ctx.Queue()
    parent = SharedCache(folder)
    procs = [ctx.Process(target=_fill, args=(parent, keys, size, barrier, out)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert sum(a for a, _ in results) == len(keys), "each item added exactly once"
    assert all(b == 0 for _, b in results), "a torn or wrong item was read"
    cache = SharedCache(folder)
    assert cache.stats()["items"] == len(keys)
    assert cache.stats()["bytes"] == len(keys) * size, "an item stored twice"
    assert all(cache.get(cache_key(k)) == _item(k, size) for k in keys)


def test_the_cache_stops_adding_when_full(tmp_path):
    cache = SharedCache(tmp_path / "c", max_bytes=1000, max_items=3)
    assert cache.put(cache_key("a"), b"x" * 600)
    assert not cache.put(cache_key("b"), b"y" * 600), "past max_bytes"
    assert cache.put(cache_key("c"), b"z" * 10) and cache.put(cache_key("d"), b"w" * 10)
    assert not cache.put(cache_key("e"), b"v"), "past max_items"
    assert not cache.put(cache_key("a"), b"other"), "a key is added once"
    assert cache.get(cache_key("a")) == b"x" * 600 and cache.get(cache_key("b")) is None
    # The bounds are the folder's: opening it asking for more changes nothing.
    again = SharedCache(tmp_path / "c", max_bytes=1 << 30, max_items=1000)
    assert again.stats() == {"items": 3, "bytes": 620, "max_items": 3, "max_bytes": 1000}
    assert not again.put(cache_key("e"), b"v")


def test_the_cache_index_is_untrusted(tmp_path):
    folder = tmp_path / "c"
    cache = SharedCache(folder, max_items=4)
    keys = [cache_key(str(i)) for i in range(3)]
    for i, k in enumerate(keys):
        assert cache.put(k, bytes([65 + i]) * 100)
    index = bytearray((folder / "index").read_bytes())
    slots = [(o, index[o : o + 20]) for o in range(64, len(index), 40) if any(index[o : o + 20])]
    assert len(slots) == 3
    by_key = {bytes(k): o for o, k in slots}
    # A slot pointing past the data file, a slot whose length runs past
    # it, and a flipped byte of data (its CRC fails): misses, not served.
    struct.pack_into("<Q", index, by_key[keys[0]] + 20, 1 << 40)
    struct.pack_into("<Q", index, by_key[keys[1]] + 28, 1 << 62)
    (folder / "index").write_bytes(bytes(index))
    data = bytearray((folder / "data").read_bytes())
    data[250] ^= 1
    (folder / "data").write_bytes(bytes(data))
    fresh = SharedCache(folder)
    assert [fresh.get(k) for k in keys] == [None, None, None]
    # Not a cache at all, or an index shorter than its slots: refused.
    (folder / "index").write_bytes(b"not a cache".ljust(64, b"\0"))
    with pytest.raises(ValueError, match="not a pparse cache"):
        SharedCache(folder)
    (folder / "index").write_bytes(bytes(index[:100]))
    with pytest.raises(ValueError, match="damaged"):
        SharedCache(folder)
