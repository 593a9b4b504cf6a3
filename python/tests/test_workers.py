"""Sources, files and tensors in worker processes: fork (a handle made in
the parent, used in the child while the parent's parse still runs), spawn
and forkserver (handles pickled), on a local file and on an S3 server
(moto) started here. Every read is checked against tarfile.

A hang is a failure: results are awaited with a deadline."""

import hashlib
import io
import multiprocessing as mp
import pickle
import sys
import tarfile
from pathlib import Path

import pytest

import pparse

# Results come back within this, however busy the machine; a child that
# waits on its parent's threads never does.
DEADLINE = 300

MEMBERS = 30_000


def _make_tar_gz(path: Path) -> None:
    """A tar.gz of many small members: its parse takes a while, so a
    worker forks while it runs."""
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        for i in range(MEMBERS):
            body = (f"member {i}\n" * (1 + i % 40)).encode()
            info = tarfile.TarInfo(f"d{i % 97}/m{i}.txt")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("workers") / "many.tar.gz"
    _make_tar_gz(p)
    return p


def _expected(path: Path, names) -> dict:
    with tarfile.open(path) as tar:
        return {
            n: hashlib.sha256(tar.extractfile(n.split("/", 1)[1]).read()).hexdigest()
            for n in names
        }


# A handle the fork workers inherit (set before the pool forks).
_INHERITED = None


def _digest_inherited(name: str) -> str:
    with _INHERITED.open(name) as f:
        return hashlib.sha256(f.read()).hexdigest()


def _digest_with(args) -> str:
    src, name = args
    with src.open(name) as f:
        return hashlib.sha256(f.read()).hexdigest()


NAMES = [f"many.tar/d{i % 97}/m{i}.txt" for i in (0, 1, 5000, 12345, 29999)]


def test_fork_workers_read_while_the_parent_parses(big):
    global _INHERITED
    src = pparse.open(big)
    try:
        # The parse is still going when the workers fork (what used to
        # hang them: they waited on the parent's engine).
        assert src.parsing, "the parse ended before the fork: make the file bigger"
        _INHERITED = src
        with mp.get_context("fork").Pool(2) as pool:
            got = pool.map_async(_digest_inherited, NAMES).get(DEADLINE)
        assert dict(zip(NAMES, got)) == _expected(big, NAMES)
        # The parent goes on as if nothing happened.
        assert src.stat(NAMES[-1])["status"] == "complete"
    finally:
        _INHERITED = None
        src.close()


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_pickled_sources_open_again_in_new_processes(big, method):
    src = pparse.open(big)
    try:
        assert src.parsing
        with mp.get_context(method).Pool(2) as pool:
            got = pool.map_async(_digest_with, [(src, n) for n in NAMES]).get(DEADLINE)
        assert dict(zip(NAMES, got)) == _expected(big, NAMES)
    finally:
        src.close()


def test_errors_pickle_back_from_workers(big):
    # multiprocessing sends a worker's exception by its module and name:
    # an error that cannot be unpickled hangs the parent's pool.
    with pparse.open(big) as src:
        with pytest.raises(pparse.NotFound) as e:
            src.open("nope")
    again = pickle.loads(pickle.dumps(e.value))
    assert type(again) is pparse.NotFound
    assert again.path == "nope" and str(again) == str(e.value)


def _read_rest(f, out) -> None:
    out.put(f.read())


def test_a_file_goes_on_from_its_position_in_a_forked_child(big):
    name = NAMES[2]
    want = _expected(big, [name])[name]
    with tarfile.open(big) as tar:
        body = tar.extractfile(name.split("/", 1)[1]).read()
    with pparse.open(big) as src:
        f = src.open(name)
        head = f.read(7)
        ctx = mp.get_context("fork")
        q = ctx.Queue()
        p = ctx.Process(target=_read_rest, args=(f, q))
        p.start()
        rest = q.get(timeout=DEADLINE)
        p.join(DEADLINE)
        assert p.exitcode == 0
        assert hashlib.sha256(head + rest).hexdigest() == want
        # Pickled, it opens again where it was.
        f.seek(3)
        g = pickle.loads(pickle.dumps(f))
        assert g.tell() == 3 and g.read() == body[3:]
        # The parent's file is where it was.
        assert f.read() == body[3:]


def test_a_sub_source_and_a_tensor_pickle_as_what_opens_them(fixtures):
    with pparse.open(fixtures / "nested.tar.gz") as src:
        entries = [e for e in src.list("", recursive=True) if e["kind"] == "dir"]
        assert entries, "a folder to take a sub-source of"
        sub = src.sub(entries[0]["path"])
        again = pickle.loads(pickle.dumps(sub))
        assert again.list("") == sub.list("")
    with pparse.open(fixtures / "safetensors" / "numpy_dtypes.safetensors") as src:
        t = src.tensors()[0]
        u = pickle.loads(pickle.dumps(t))
        assert (u.name, u.offset) == (t.name, t.offset)
        assert (u.numpy() == t.numpy()).all()
    closed = pparse.open(fixtures / "nested.tar.gz")
    closed.close()
    with pytest.raises(TypeError):
        pickle.dumps(closed)


# ---------------------------------------------------------------------------
# On S3 (moto's server, started here with the system's python3)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3(big, moto):
    return moto(big, "data/many.tar.gz")


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_workers_read_an_archive_on_s3(big, s3, method):
    global _INHERITED
    src = pparse.open(s3)
    _INHERITED = src
    try:
        with mp.get_context(method).Pool(2) as pool:
            if method == "fork":
                got = pool.map_async(_digest_inherited, NAMES).get(DEADLINE)
            else:
                got = pool.map_async(_digest_with, [(src, n) for n in NAMES]).get(DEADLINE)
        assert dict(zip(NAMES, got)) == _expected(big, NAMES)
    finally:
        _INHERITED = None
        src.close()


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
