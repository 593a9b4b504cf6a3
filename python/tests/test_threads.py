"""``pparse.set_threads``: one large gzip stream decoded on several threads
gives the same bytes, and the workers did decode them (``io_stats``)."""

import gzip
import io
import os
import random
import tarfile

import pytest

import pparse


def _archive(path):
    """A tar.gz (Python's tarfile, gzip level 6) of 15 MB of gzip: noise
    (stored blocks) and words (dynamic blocks), more than the three pieces
    of 4 MiB workers need."""
    rng = random.Random(37)
    members = {
        "noise": os.urandom(7_000_000),
        "words": " ".join(f"w{rng.randrange(5000)}" for _ in range(600_000)).encode(),
        "last": os.urandom(6_000_000),
    }
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    path.write_bytes(gzip.compress(raw.getvalue(), compresslevel=6, mtime=0))
    assert path.stat().st_size > 13 << 20
    return members["last"]


def _read_last(path):
    before = pparse.io_stats()
    with pparse.open(path) as src:
        with src.open("t.tar/last") as f:
            got = f.read()
    after = pparse.io_stats()
    return got, after["decoded_ahead"] - before["decoded_ahead"]


def test_threads_read_the_same_bytes_and_decode_ahead(tmp_path):
    path = tmp_path / "t.tar.gz"
    want = _archive(path)
    assert pparse.threads() == 1
    got, ahead = _read_last(path)
    assert got == want
    assert ahead == 0
    pparse.set_threads(2)
    try:
        assert pparse.threads() == 2
        got, ahead = _read_last(path)
    finally:
        pparse.set_threads(1)
    assert got == want
    # The first piece is the reader's own: the workers made most of the rest.
    assert ahead > 4 << 20, ahead
    with pytest.raises(ValueError):
        pparse.set_threads(0)
