"""Workers that open members through an index keep no memory per member:
the index's records are mapped and read in place, so N worker processes
cost one copy of the index in the page cache, not one extraction tree
each (issue 35, item 3). Measured as the anonymous memory a fresh
(spawned) worker gains while it reads every member of a zip of 60,000
files, beside a worker that builds the tree."""

import hashlib
import multiprocessing as mp
import time
import zipfile
from pathlib import Path

import pytest

import pparse

DEADLINE = 300
MEMBERS = 60_000


def _names():
    return [f"d{i % 50}/f{i:06d}.bin" for i in range(MEMBERS)]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("memory")
    path = folder / "many.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for i, n in enumerate(_names()):
            z.writestr(n, f"member {i}\n".encode())
    index = str(folder / "index") + "/"
    with pparse.open(path, index=index) as src:
        deadline = time.monotonic() + DEADLINE
        while src.parsing:
            assert time.monotonic() < deadline, "the parse did not end"
            time.sleep(0.05)
    h = hashlib.sha256()
    with zipfile.ZipFile(path) as z:
        for n in _names():
            h.update(z.read(n))
    return path, index, h.hexdigest()


def _anon_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    raise AssertionError("no RssAnon in /proc/self/status")


def _reader(args):
    """Reads every member as a DataLoader worker does; with ``whole``,
    first asks for something only the tree answers (a folder that only
    members' names make). Returns the anonymous memory it gained (KiB),
    whether the tree was built, and the digest of what it read."""
    path, index, whole = args
    names = _names()
    before = _anon_kib()
    with pparse.open(path, index=index) as src:
        if whole:
            assert src.stat("d0")["kind"] == "dir"
        h = hashlib.sha256()
        for n in names:
            with src.open(n, complete=True) as f:
                h.update(f.read())
        loaded = src.tree_loaded
        gained = _anon_kib() - before
    return gained, loaded, h.hexdigest()


def test_workers_read_every_member_through_the_index_without_a_tree(data):
    path, index, digest = data
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        lazy, whole = pool.map(_reader, [(str(path), index, False), (str(path), index, True)])
    assert lazy[2] == digest and whole[2] == digest
    assert not lazy[1], "opening members built the tree"
    assert whole[1]
    # The tree costs a few hundred bytes a member (60,000 members: more
    # than 8 MiB); the records read in place cost nothing a member.
    assert whole[0] > 8 * 1024, f"the tree took only {whole[0]} KiB"
    assert lazy[0] < whole[0] / 4, f"{lazy[0]} KiB without a tree, {whole[0]} KiB with it"
