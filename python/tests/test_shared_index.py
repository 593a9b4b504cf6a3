"""A shared index: written once, beside the data on the S3 test server
(moto) or in a folder, and read by every worker process, which then
parses nothing (``io_stats()["decoded"]`` stays 0) and reads the same
bytes as tarfile. The fingerprint that keys it is the same in every
process and changes with the file."""

import hashlib
import io
import multiprocessing as mp
import os
import shutil
import tarfile
import time
from pathlib import Path

import pytest

import pparse

DEADLINE = 300
MEMBERS = 2_000
NAMES = [f"data.tar/d{i % 7}/m{i}.txt" for i in range(0, MEMBERS, 97)]


def _write(path: Path) -> None:
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for i in range(MEMBERS):
            body = (f"member {i}\n" * (1 + i % 30)).encode()
            info = tarfile.TarInfo(f"d{i % 7}/m{i}.txt")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("shared") / "data.tar.gz"
    _write(p)
    return p


def _expected(path: Path) -> dict:
    with tarfile.open(path) as tar:
        return {n: hashlib.sha256(tar.extractfile(n.split("/", 1)[1]).read()).hexdigest() for n in NAMES}


def _finish(src: pparse.Source) -> None:
    """Waits for the parse (and the index written at its end)."""
    deadline = time.monotonic() + DEADLINE
    while src.parsing:
        assert time.monotonic() < deadline, "the parse did not end"
        time.sleep(0.05)


def _worker(args):
    """Opens the archive as a new worker does, reads its share and says
    what that cost."""
    url, index, names = args
    with pparse.open(url, index=index) as src:
        digests = {}
        for n in names:
            with src.open(n) as f:
                digests[n] = hashlib.sha256(f.read()).hexdigest()
        return digests, src.io_stats()["decoded"], src.fingerprint


def _run_workers(url: str, index: str, method: str):
    shares = [(url, index, NAMES[k::2]) for k in range(2)]
    with mp.get_context(method).Pool(2) as pool:
        return pool.map_async(_worker, shares).get(DEADLINE)


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_an_index_beside_the_data_on_s3_serves_every_worker(data, moto, method):
    url = moto(data, f"shared/{method}/data.tar.gz")
    index = f"s3://pparse-test/indexes/{method}/"
    before = pparse.io_stats()
    with pparse.open(url, index=index) as src:
        _finish(src)
        assert src.io_stats()["decoded"] > 0
        first = src.fingerprint
    after = pparse.io_stats()
    # The archive's bytes, and the look for an index that is not there yet.
    assert after["remote_bytes"] - before["remote_bytes"] >= data.stat().st_size
    assert after["remote_requests"] - before["remote_requests"] >= 2
    got = _run_workers(url, index, method)
    want = _expected(data)
    for digests, decoded, fingerprint in got:
        assert decoded == 0, "a worker parsed though the index was there"
        assert fingerprint == first
        assert digests == {n: want[n] for n in digests}
    assert sum(len(d) for d, _, _ in got) == len(NAMES)


def test_a_folder_index_serves_a_copy_and_a_changed_file_is_parsed_again(data, tmp_path):
    folder = str(tmp_path / "indexes") + os.sep
    copy = tmp_path / "copy" / "data.tar.gz"
    copy.parent.mkdir()
    shutil.copy2(data, copy)  # the same bytes and mtime, another inode
    with pparse.open(data, index=folder) as src:
        _finish(src)
        fingerprint = src.fingerprint
    assert len(os.listdir(folder)) == 1
    (digests, decoded, copy_fingerprint), = _run_workers(str(copy), folder, "spawn")[:1]
    assert decoded == 0 and copy_fingerprint == fingerprint
    assert digests == {n: _expected(data)[n] for n in digests}

    os.utime(copy, (0, 1_000_000_000))
    with pparse.open(copy, index=folder) as src:
        assert src.fingerprint != fingerprint
        _finish(src)
        assert src.io_stats()["decoded"] > 0, "a changed file is never read through the old index"
