"""A Dask cluster (``distributed.LocalCluster``, 2 worker processes,
started and stopped here) lists, reads and checksums every member of
archives on an S3 server (moto) through ``pparse.manifest``, one task per
archive; checked against tarfile and zipfile, a damaged archive's
members reported."""

import gzip
import hashlib
import io
import tarfile
import zipfile

import pytest

import pparse

distributed = pytest.importorskip("distributed")


def _members(i: int):
    return {f"dir{i}/f{j}.bin": bytes([i, j]) * (100 + 37 * j) for j in range(50)}


@pytest.fixture(scope="module")
def archives(tmp_path_factory, moto):
    d = tmp_path_factory.mktemp("dask")
    urls, expected = [], {}
    for i in range(3):
        members = _members(i)
        if i == 1:
            p = d / f"a{i}.zip"
            with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
                for n, b in members.items():
                    z.writestr(n, b)
            top = ""
        else:
            p = d / f"a{i}.tar.gz"
            with tarfile.open(p, "w:gz") as tar:
                for n, b in members.items():
                    info = tarfile.TarInfo(n)
                    info.size = len(b)
                    tar.addfile(info, io.BytesIO(b))
            top = f"a{i}.tar/"
        # What the standard library reads back.
        if p.suffix == ".zip":
            with zipfile.ZipFile(p) as z:
                got = {n: z.read(n) for n in z.namelist()}
        else:
            with tarfile.open(p) as tar:
                got = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
        assert got == members
        urls.append(moto(p, f"dask/{p.name}"))
        expected[urls[-1]] = {top + n: hashlib.sha256(b).hexdigest() for n, b in got.items()}
    # A tar.gz cut inside its 30th member: the 29 before it are whole.
    whole = gzip.decompress((d / "a0.tar.gz").read_bytes())
    with tarfile.open(d / "a0.tar.gz") as tar:
        m = tar.getmember("dir0/f29.bin")
    cut = d / "cut.tar.gz"
    cut.write_bytes(gzip.compress(whole[: m.offset_data + 10]))
    urls.append(moto(cut, "dask/cut.tar.gz"))
    expected[urls[-1]] = {
        "cut.tar/" + n: hashlib.sha256(b).hexdigest()
        for j, (n, b) in enumerate(_members(0).items())
        if j < 29
    }
    return urls, expected


def test_a_dask_cluster_checksums_every_member_of_archives_on_s3(archives):
    urls, expected = archives
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        results = client.gather(client.map(pparse.manifest, urls), errors="raise")
    for url, items in zip(urls, results):
        whole = {i["path"]: i["sha256"] for i in items if i["status"] == "complete"}
        assert whole == expected[url], url
        damaged = [i for i in items if i["status"] != "complete"]
        if url.endswith("cut.tar.gz"):
            assert [i["path"] for i in damaged] == ["cut.tar/dir0/f29.bin"]
            assert damaged[0]["sha256"] is None and damaged[0]["reason"]
        else:
            assert not damaged, damaged
