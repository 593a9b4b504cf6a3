"""pparse.torch's datasets in real DataLoaders (2 workers, fork and spawn):
every member read exactly once an epoch with the bytes zipfile and
tarfile read, damaged members skipped and reported or raised, ranks and
workers partitioning the members; through the shared cache, a changed
archive never served from it, transformed items kept under their tag,
and a second epoch over a zip on S3 (moto) that fetches nothing.

Transforms and collate functions are defined here at module level, so
spawned workers can import them."""

import collections
import io
import os
import pickle
import socket
import tarfile
import threading
import time
import zipfile

import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

import pparse  # noqa: E402
from pparse.torch import MemberDataset, MemberStream  # noqa: E402

MEMBERS = 20_000


def _body(i: int) -> bytes:
    return (f"member {i}\n" * (1 + i % 23)).encode()


@pytest.fixture(scope="module")
def many_zip(tmp_path_factory):
    """A zip of 20,000 small files written by zipfile, and what zipfile
    reads of each."""
    path = tmp_path_factory.mktemp("torch") / "many.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(MEMBERS):
            z.writestr(f"d{i % 89}/m{i}.txt", _body(i))
    with zipfile.ZipFile(path) as z:
        want = {n: z.read(n) for n in z.namelist()}
    return path, want


@pytest.fixture(scope="module")
def many_tgz(tmp_path_factory):
    """A tar.gz of 20,000 small files written by tarfile, its index written
    first by a parse left to finish, and what tarfile reads of each (by
    pparse's PATH)."""
    folder = tmp_path_factory.mktemp("torch")
    path, index = folder / "many.tar.gz", folder / "many.pidx"
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for i in range(MEMBERS):
            body = _body(i)
            info = tarfile.TarInfo(f"d{i % 89}/m{i}.txt")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    with pparse.open(path, index=index) as src:
        src.list("", recursive=True)
        deadline = time.monotonic() + 120
        while src.parsing:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    assert index.exists()
    with tarfile.open(path) as tar:
        want = {f"many.tar/{m.name}": tar.extractfile(m).read() for m in tar.getmembers()}
    return path, index, want


def _named(name, data):
    return name, data


def _as_list(batch):
    return batch


def _upper(name, data):
    return data.upper()


def _never(name, data):
    raise AssertionError(f"the transform ran for {name}: its item was cached")


def _epoch(ds, method, workers=2, batch_size=500):
    """Every item of one epoch through a DataLoader, and members/s."""
    loader = DataLoader(
        ds,
        batch_size=batch_size,
        num_workers=workers,
        multiprocessing_context=method if workers else None,
        collate_fn=_as_list,
        timeout=300 if workers else 0,
    )
    t = time.perf_counter()
    items = [x for batch in loader for x in batch]
    return items, len(items) / (time.perf_counter() - t)


def _check_once(items, want):
    counts = collections.Counter(n for n, _ in items)
    assert set(counts) == set(want)
    assert max(counts.values()) == 1, "a member came twice"
    for n, data in items:
        assert data == want[n], n


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_map_dataset_reads_every_member_of_a_zip_once(many_zip, method):
    path, want = many_zip
    ds = MemberDataset(path, transform=_named)
    assert len(ds) == MEMBERS
    assert isinstance(ds._names, bytes), "names are one blob, not a list of strings"
    items, rate = _epoch(ds, method)
    _check_once(items, want)
    print(f"map-style, zip, {method}: {rate:.0f} members/s")
    # Without a transform, an item is the member's bytes.
    plain = MemberDataset(path, suffix="/m7.txt")
    assert len(plain) == 1 and plain[0] == want["d7/m7.txt"] and plain[-1] == plain[0]
    with pytest.raises(IndexError):
        plain[1]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_stream_reads_every_member_of_a_tar_gz_once_an_epoch(many_tgz, method):
    path, index, want = many_tgz
    stream = MemberStream(path, index=index)
    assert len(stream) == MEMBERS
    for epoch in range(2):
        items, rate = _epoch(stream, method)
        _check_once(items, want)
        print(f"stream, tar.gz with its index, {method}, epoch {epoch + 1}: {rate:.0f} members/s")
    # Each worker reads one contiguous run of members forward: the first
    # half in the archive's order, and the second.
    at = {n: i for i, n in enumerate(stream.names())}
    order = [at[n] for n, _ in items]
    halves = [[i for i in order if i < MEMBERS // 2], [i for i in order if i >= MEMBERS // 2]]
    assert halves == [list(range(MEMBERS // 2)), list(range(MEMBERS // 2, MEMBERS))]


def test_two_ranks_of_two_workers_partition_the_members(many_zip):
    path, want = many_zip
    seen = []
    for rank in range(2):
        stream = MemberStream(path, rank=rank, world_size=2)
        items, _ = _epoch(stream, "fork")
        assert len(items) == len(stream)
        seen.append([n for n, _ in items])
        for n, data in items:
            assert data == want[n]
    assert not set(seen[0]) & set(seen[1])
    assert len(seen[0]) + len(seen[1]) == MEMBERS and set(seen[0]) | set(seen[1]) == set(want)
    with pytest.raises(ValueError):
        MemberStream(path, rank=2, world_size=2)


@pytest.fixture(scope="module")
def damaged_zip(tmp_path_factory):
    """A zip of 300 stored files, one with a byte flipped in its data (its
    CRC fails), and what zipfile reads of the others."""
    path = tmp_path_factory.mktemp("torch") / "damaged.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for i in range(300):
            z.writestr(f"m{i}.txt", _body(i))
    raw = bytearray(path.read_bytes())
    at = raw.find(_body(150))
    assert at > 0
    raw[at + 3] ^= 0x20
    path.write_bytes(bytes(raw))
    with zipfile.ZipFile(path) as z:
        want = {n: z.read(n) for n in z.namelist() if n != "m150.txt"}
        with pytest.raises(zipfile.BadZipFile):
            z.read("m150.txt")
    return path, want


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_damaged_member_is_skipped_and_reported_or_raised(damaged_zip, method):
    path, want = damaged_zip
    stream = MemberStream(path, on_damage="skip")
    for epoch in range(2):
        items, _ = _epoch(stream, method, batch_size=16)
        _check_once(items, want)
        skipped = stream.skipped()
        assert [s["path"] for s in skipped] == ["m150.txt"] * (epoch + 1)
        assert "CRC" in skipped[0]["reason"]
    stream.reset_skipped()
    assert stream.skipped() == []
    report = stream.report
    del stream
    assert not os.path.exists(report), "the report folder goes with the stream"

    with pytest.raises(pparse.DamagedError, match="m150.txt"):
        _epoch(MemberStream(path, on_damage="raise"), method, batch_size=16)
    # The map-style dataset raises too: a number must give an item.
    ds = MemberDataset(path)
    with pytest.raises(pparse.DamagedError):
        ds[[ds.name(i) for i in range(len(ds))].index("m150.txt")]


def test_filters_and_containers(tmp_path):
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr("a.txt", b"a")
        z.writestr("b.bin", b"b")
    path = tmp_path / "outer.tar"
    with tarfile.open(path, "w") as tar:
        for name, body in [("x/inner.zip", inner.getvalue()), ("x/c.txt", b"c")]:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    # No filter: containers are opened, their files are the members.
    assert list(MemberDataset(path).names()) == ["x/inner.zip/a.txt", "x/inner.zip/b.bin", "x/c.txt"]
    assert list(MemberDataset(path, suffix=".txt").names()) == ["x/inner.zip/a.txt", "x/c.txt"]
    assert list(MemberDataset(path, pattern="x/inner.zip/*").names()) == ["x/inner.zip/a.txt", "x/inner.zip/b.bin"]
    # A container the filter names is one member, whole.
    whole = MemberDataset(path, suffix=(".zip", ".bin"))
    assert list(whole.names()) == ["x/inner.zip"] and whole[0] == inner.getvalue()
    with pparse.open(path) as src:
        assert list(MemberDataset(src.sub("x/inner.zip")).names()) == ["a.txt", "b.bin"]


# ---------------------------------------------------------------------------
# Through the shared cache
# ---------------------------------------------------------------------------


def test_a_changed_archive_is_never_served_from_the_cache(tmp_path):
    path, cache = tmp_path / "a.zip", tmp_path / "cache"

    def write(tag):
        with zipfile.ZipFile(path, "w") as z:
            for i in range(10):
                z.writestr(f"m{i}.txt", f"{tag} {i}\n" * (3 if tag == "old" else 5))

    write("old")
    old = MemberDataset(path, cache=cache)
    assert old[0] == b"old 0\n" * 3
    assert old.cache.stats()["items"] == 1
    write("new")
    new = MemberDataset(path, cache=cache)
    assert new[0] == b"new 0\n" * 5 and new[1] == b"new 1\n" * 5
    # The old dataset still serves what it cached of the old archive, but
    # a process reading the changed archive for it refuses.
    assert old[0] == b"old 0\n" * 3
    worker = pickle.loads(pickle.dumps(old))
    with pytest.raises(pparse.Error, match="changed since the dataset listed it"):
        worker[5]


def test_transformed_items_are_cached_under_their_tag(tmp_path):
    path = tmp_path / "a.zip"
    with zipfile.ZipFile(path, "w") as z:
        for i in range(20):
            z.writestr(f"m{i}.txt", f"item {i}")
    first = MemberDataset(path, transform=_upper, cache=tmp_path / "c", cache_items="upper-v1")
    assert [first[i] for i in range(20)] == [f"ITEM {i}".encode() for i in range(20)]
    again = MemberDataset(path, transform=_never, cache=tmp_path / "c", cache_items="upper-v1")
    assert again[3] == b"ITEM 3"
    other = MemberDataset(path, transform=_never, cache=tmp_path / "c", cache_items="upper-v2")
    with pytest.raises(AssertionError, match="the transform ran"):
        other[3]


# ---------------------------------------------------------------------------
# A zip on S3 (moto's server) through the cache
# ---------------------------------------------------------------------------


class _CountingProxy:
    """A TCP relay in front of the S3 server that counts the connections
    made and the bytes the server sends back: what every process (the
    workers too) fetched, counted where no process can miss it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sent = 0
        self.connections = 0
        self._lock = threading.Lock()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.port))
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket, count: bool) -> None:
        try:
            while True:
                data = a.recv(1 << 16)
                if not data:
                    break
                if count:
                    with self._lock:
                        self.sent += len(data)
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def take(self):
        with self._lock:
            out = (self.sent, self.connections)
            self.sent = self.connections = 0
        return out

    def close(self) -> None:
        self._sock.close()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_second_epoch_over_s3_fetches_nothing_through_the_cache(moto, tmp_path, monkeypatch, method):
    path = tmp_path / "remote.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(2000):
            z.writestr(f"d{i % 13}/m{i}.txt", _body(i) * 8)
    with zipfile.ZipFile(path) as z:
        want = {n: z.read(n) for n in z.namelist()}
    url = moto(path, f"torch/{method}/remote.zip")
    proxy = _CountingProxy(int(os.environ["AWS_ENDPOINT_URL"].rsplit(":", 1)[1]))
    monkeypatch.setenv("AWS_ENDPOINT_URL", proxy.url)
    try:
        ds = MemberDataset(url, transform=_named, cache=tmp_path / "cache")
        listed, _ = proxy.take()
        assert listed > 0, "the listing went through the relay"
        first, rate1 = _epoch(ds, method, batch_size=100)
        sent1, conns1 = proxy.take()
        second, rate2 = _epoch(ds, method, batch_size=100)
        sent2, conns2 = proxy.take()
    finally:
        proxy.close()
    _check_once(first, want)
    assert sent1 > 0 and conns1 > 0, "epoch 1 fetched the members"
    assert (sent2, conns2) == (0, 0), "epoch 2 asked the server for something"
    assert sorted(second) == sorted(first)
    assert ds.cache.stats()["items"] == len(want)
    print(
        f"S3 zip through the cache, {method}: epoch 1 {sent1} bytes in {conns1} connections "
        f"({rate1:.0f} members/s), epoch 2 {sent2} bytes ({rate2:.0f} members/s)"
    )
