"""The ``pparse://`` fsspec filesystem, as pandas, numpy, PIL and fsspec's
own helpers use it, on a tar.gz holding a zip made here by tarfile and
zipfile; checked against those libraries' own reading."""

import gzip
import io
import pickle
import tarfile
import zipfile
from pathlib import Path

import fsspec
import numpy as np
import pandas as pd
import pytest
from PIL import Image

import pparse
from pparse.filesystem import PparseFileSystem

CSV = "a,b\n" + "".join(f"{i},{i * i}\n" for i in range(500))


def _png() -> bytes:
    img = Image.new("RGB", (40, 30))
    img.putdata([(x * 6, y * 8, (x + y) % 256) for y in range(30) for x in range(40)])
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


def _npy() -> bytes:
    out = io.BytesIO()
    np.save(out, np.arange(1000, dtype=np.float32).reshape(10, 100))
    return out.getvalue()


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    """data.tar.gz: data/inner.zip (x.csv, y.csv, pic.png, arr.npy) and
    data/big.bin."""
    d = tmp_path_factory.mktemp("fsspec")
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("x.csv", CSV)
        z.writestr("y.csv", CSV.replace(",", ";"))
        z.writestr("pic.png", _png())
        z.writestr("arr.npy", _npy())
    path = d / "data.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, body in [("data/inner.zip", inner.getvalue()), ("data/big.bin", bytes(range(256)) * 4096)]:
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return path


def url(archive: Path, inside: str) -> str:
    return f"pparse://{inside}::file://{archive}"


def test_the_protocol_is_registered_through_the_entry_point():
    assert fsspec.get_filesystem_class("pparse") is PparseFileSystem


def test_pandas_numpy_and_pil_read_members_of_a_zip_in_a_tar_gz(archive):
    df = pd.read_csv(url(archive, "data.tar/data/inner.zip/x.csv"))
    assert df.equals(pd.read_csv(io.StringIO(CSV)))
    with fsspec.open(url(archive, "data.tar/data/inner.zip/arr.npy")) as f:
        arr = np.load(f)
    assert (arr == np.arange(1000, dtype=np.float32).reshape(10, 100)).all()
    with fsspec.open(url(archive, "data.tar/data/inner.zip/pic.png")) as f:
        img = Image.open(f)
        img.load()
    assert img.tobytes() == Image.open(io.BytesIO(_png())).tobytes()


def test_open_files_globs_inside_the_zip(archive):
    files = fsspec.open_files(url(archive, "data.tar/data/inner.zip/*.csv"))
    assert sorted(f.path for f in files) == [
        "data.tar/data/inner.zip/x.csv",
        "data.tar/data/inner.zip/y.csv",
    ]
    for f in files:
        with f as fh:
            assert fh.read().decode().replace(";", ",") == CSV


def test_ls_info_and_ranges(archive):
    fs, _ = fsspec.core.url_to_fs(url(archive, ""))
    assert fs.ls("", detail=False) == ["data.tar"]
    names = fs.ls("data.tar/data", detail=False)
    assert names == ["data.tar/data/inner.zip", "data.tar/data/big.bin"]
    detail = {e["name"]: e for e in fs.ls("data.tar/data/inner.zip")}
    assert detail["data.tar/data/inner.zip/x.csv"]["size"] == len(CSV)
    assert detail["data.tar/data/inner.zip/x.csv"]["type"] == "file"
    assert fs.info("data.tar/data/inner.zip")["type"] == "directory"
    assert fs.info("data.tar/data/big.bin")["status"] == "complete"
    big = bytes(range(256)) * 4096
    for start, end in [(0, 10), (1000, 300_000), (-100, None), (None, -1000), (5, 5)]:
        assert fs.cat_file("data.tar/data/big.bin", start, end) == big[start:end]
    with fs.open("data.tar/data/big.bin", block_size=4096) as f:
        f.seek(700_000)
        assert f.read(100) == big[700_000:700_100]
    with pytest.raises(FileNotFoundError):
        fs.info("data.tar/nope")


def test_the_filesystem_pickles_and_opens_again(archive):
    fs, _ = fsspec.core.url_to_fs(url(archive, ""))
    again = pickle.loads(pickle.dumps(fs))
    assert again.cat_file("data.tar/data/inner.zip/x.csv") == CSV.encode()


def test_a_worker_with_the_index_does_not_scan_the_archive_again(archive, tmp_path):
    index = tmp_path / "data.pidx"
    fs = PparseFileSystem(fo=str(archive), index=str(index))
    assert fs.ls("data.tar/data/inner.zip", detail=False)
    fs.source.tree()  # waits for the whole parse, which writes the index
    assert index.exists()
    # A worker gets the filesystem pickled, and opens it from the index.
    blob = pickle.dumps(fs)
    PparseFileSystem.clear_instance_cache()
    worker = pickle.loads(blob)
    assert worker is not fs
    assert worker.ls("data.tar/data/inner.zip", detail=False) == fs.ls("data.tar/data/inner.zip", detail=False)
    stats = worker.source.io_stats()
    assert stats["decoded"] == 0, stats
    assert worker.cat_file("data.tar/data/inner.zip/x.csv") == CSV.encode()


def test_a_damaged_member_says_so_and_does_not_read(archive, tmp_path):
    # Cut the tar.gz inside big.bin: inner.zip is whole, big.bin is not.
    raw = gzip.decompress(archive.read_bytes())
    with tarfile.open(archive) as tar:
        member = tar.getmember("data/big.bin")
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(gzip.compress(raw[: member.offset_data + 100_000]))
    fs = PparseFileSystem(fo=str(cut), index=None)
    info = fs.info("cut.tar/data/big.bin")
    assert info["status"] == "truncated", info
    with pytest.raises(pparse.DamagedError):
        fs.cat_file("cut.tar/data/big.bin")
    with pytest.raises(pparse.DamagedError):
        fs.open("cut.tar/data/big.bin").read()
    assert fs.cat_file("cut.tar/data/inner.zip/x.csv") == CSV.encode()


def test_a_container_on_s3(archive, moto):
    key = moto(archive, "fsspec/data.tar.gz")
    fs = fsspec.filesystem("pparse", fo=key, index=None)
    with fs.open("data.tar/data/inner.zip/x.csv") as f:
        assert pd.read_csv(f).equals(pd.read_csv(io.StringIO(CSV)))
    assert fs.info("data.tar/data/big.bin")["size"] == 256 * 4096
    assert fs.cat_file("data.tar/data/big.bin", 1000, 2000) == (bytes(range(256)) * 4096)[1000:2000]


def test_the_chained_form_reads_a_container_on_s3(archive, moto):
    """``pparse://PATH::s3://bucket/key``, as pandas and fsspec take it:
    fsspec parses the ``s3://`` hop with s3fs's rules, and pparse reads
    the object itself (the endpoint and keys from the environment)."""
    pytest.importorskip("s3fs", reason="fsspec parses an s3:// hop with s3fs: pip install s3fs")
    key = moto(archive, "fsspec/chained.tar.gz")
    chained = f"pparse://data.tar/data/inner.zip/x.csv::{key}"
    assert pd.read_csv(chained).equals(pd.read_csv(io.StringIO(CSV)))
    files = fsspec.open_files(f"pparse://data.tar/data/inner.zip/*.csv::{key}")
    assert sorted(f.path for f in files) == ["data.tar/data/inner.zip/x.csv", "data.tar/data/inner.zip/y.csv"]
    with files[1] as f:
        assert f.read() == CSV.replace(",", ";").encode()
    # Each hop's options are keyed by its protocol: ones pparse would
    # have to pass on to the object store are refused, never ignored.
    with pytest.raises(ValueError, match="environment"):
        fsspec.open(chained, s3={"key": "someone-else"}).open()
