"""Containers as a file system, checked against Python's tarfile, zipfile,
gzip and PIL on the same bytes."""

import gzip
import io
import shutil
import subprocess
import tarfile
import zipfile

import pytest

import pparse


def tar_members(path):
    """(name, bytes) of every regular member, as tarfile reads them."""
    with tarfile.open(path) as tf:
        return {m.name: tf.extractfile(m).read() for m in tf if m.isfile()}


def test_every_member_of_a_tar_gz_reads_as_tarfile_reads_it(fixtures):
    want = tar_members(fixtures / "nested.tar.gz")
    with pparse.open(fixtures / "nested.tar.gz") as src:
        files = {
            e["path"]: e for e in src.list("", recursive=True) if e["kind"] == "file"
        }
        got = {}
        for path, e in files.items():
            name = path[len("nested.tar/") :]
            if name in want:
                with src.open(path) as f:
                    got[name] = f.read()
                assert e["status"] == "complete"
                assert e["size"] == len(want[name])
    assert got == want


def test_a_zip_in_a_tar_gz_reads_as_zipfile_reads_it(fixtures):
    inner = tar_members(fixtures / "nested.tar.gz")["docs/inner.zip"]
    zf = zipfile.ZipFile(io.BytesIO(inner))
    with pparse.open(fixtures / "nested.tar.gz") as src:
        zsrc = src.sub("nested.tar/docs/inner.zip")
        names = [e["path"] for e in zsrc.list("", recursive=True) if e["kind"] == "file"]
        for info in zf.infolist():
            if info.is_dir():
                continue
            assert info.filename in names
            with zsrc.open(info.filename) as f:
                assert f.read() == zf.read(info.filename)
        # Two levels of zip below the gzip.
        deep = zipfile.ZipFile(io.BytesIO(zf.read("deep.zip")))
        with src.open("nested.tar/docs/inner.zip/deep.zip/x.txt") as f:
            assert f.read() == deep.read("x.txt")


def test_zipfile_reads_a_member_opened_through_pparse(fixtures):
    """The file object seeks and reads as zipfile needs."""
    inner = tar_members(fixtures / "nested.tar.gz")["docs/inner.zip"]
    with pparse.open(fixtures / "nested.tar.gz") as src:
        with src.open("nested.tar/docs/inner.zip") as f:
            assert f.seekable() and f.readable() and not f.writable()
            with zipfile.ZipFile(f) as zf:
                ref = zipfile.ZipFile(io.BytesIO(inner))
                assert zf.namelist() == ref.namelist()
                assert zf.read("chapter1.txt") == ref.read("chapter1.txt")


def test_file_object_semantics(fixtures):
    ref = tar_members(fixtures / "nested.tar.gz")["src/main.c"]
    with pparse.open(fixtures / "nested.tar.gz") as src:
        f = src.open("nested.tar/src/main.c")
        assert isinstance(f, io.RawIOBase)
        assert f.read(10) == ref[:10]
        assert f.tell() == 10
        assert f.seek(-5, io.SEEK_END) == len(ref) - 5
        assert f.read() == ref[-5:]
        assert f.read() == b""
        f.seek(100)
        buf = bytearray(50)
        assert f.readinto(buf) == 50 and bytes(buf) == ref[100:150]
        f.seek(0)
        assert f.readall() == ref
        with io.BufferedReader(src.open("nested.tar/src/main.c")) as b:
            assert b.read(7) == ref[:7] and b.read() == ref[7:]
        assert f.size == len(ref) and f.status == "complete" and f.damage == []
        f.close()
        assert f.closed
        with pytest.raises(ValueError):
            f.read()


def test_stat_tree_and_errors(fixtures):
    with pparse.open(fixtures / "nested.tar.gz") as src:
        st = src.stat("nested.tar/docs/guide.txt")
        assert (st["kind"], st["size"], st["status"]) == ("file", 40000, "complete")
        assert src.stat("nested.tar/latest.md")["kind"] == "symlink"
        assert src.stat("nested.tar/docs/inner.zip")["parser"] == "zip"
        tree = src.tree()
        assert tree["parser"] == "gzip" and tree["children"][0]["parser"] == "tar"
        with pytest.raises(pparse.NotFound) as e:
            src.stat("nested.tar/nope.txt")
        assert isinstance(e.value, pparse.Error) and e.value.path == "nested.tar/nope.txt"
        with pytest.raises(pparse.NotAContainer):
            src.list("nested.tar/docs/guide.txt")
        with pytest.raises(pparse.NoContent):
            src.open("nested.tar/docs")
    assert src.closed
    with pytest.raises(ValueError):
        src.list()
    with pytest.raises(OSError):
        pparse.open(fixtures / "no such file")


def test_a_backup_of_dot_has_one_path_per_member(tmp_path):
    """`tar -C dir -czf backup.tar.gz .` names members `./a/x`; pparse
    names them as `tar x` writes them, `backup.tar/a/x`, and still finds
    the spelling the archive holds."""
    if shutil.which("tar") is None:
        pytest.skip("no GNU tar")
    files = {"a/x": b"x in a\n", "b/y": b"y in b\n"}
    for name, data in files.items():
        (tmp_path / "d" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "d" / name).write_bytes(data)
    tgz = tmp_path / "backup.tar.gz"
    subprocess.run(["tar", "--sort=name", "-C", tmp_path / "d", "-czf", tgz, "."], check=True)
    with tarfile.open(tgz) as tf:
        assert tf.getnames() == [".", "./a", "./a/x", "./b", "./b/y"]
        want = {m.name[2:]: tf.extractfile(m).read() for m in tf if m.isfile()}
    assert want == files
    with pparse.open(tgz) as src:
        assert [e["path"] for e in src.list("backup.tar")] == ["backup.tar/a/", "backup.tar/b/"]
        paths = [e["path"] for e in src.list("", recursive=True)]
        assert paths == [
            "backup.tar",
            "backup.tar/a/",
            "backup.tar/a/x",
            "backup.tar/b/",
            "backup.tar/b/y",
        ]
        tar = src.tree()["children"][0]
        assert [c["path"] for c in tar["children"]] == paths[1:]
        for name, data in files.items():
            for spelling in (f"backup.tar/{name}", f"backup.tar/./{name}"):
                assert src.stat(spelling)["path"] == f"backup.tar/{name}"
                with src.open(spelling) as f:
                    assert f.read() == data


def test_pil_opens_an_image_in_a_zip_in_a_tar_gz(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    img = Image.new("RGB", (37, 23))
    img.putdata([(x * 7 % 256, y * 11 % 256, (x ^ y) % 256) for y in range(23) for x in range(37)])
    png = io.BytesIO()
    img.save(png, format="PNG")
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("img/cat.png", png.getvalue())
    tpath = tmp_path / "photos.tar.gz"
    with tarfile.open(tpath, "w:gz") as tf:
        info = tarfile.TarInfo("photos.zip")
        info.size = len(zbuf.getvalue())
        tf.addfile(info, io.BytesIO(zbuf.getvalue()))
    with pparse.open(tpath) as src:
        with src.open("photos.tar/photos.zip/img/cat.png") as f:
            got = Image.open(f)
            got.load()
    assert got.size == (37, 23)
    assert got.tobytes() == img.tobytes()


def test_numpy_and_pandas_read_members_through_pparse(fixtures, tmp_path):
    """numpy.load and pandas.read_csv take pparse's file objects as they
    take open files: an array in an .npz in a tar.gz, a CSV in a zip in a
    tar.gz."""
    np = pytest.importorskip("numpy")
    pd = pytest.importorskip("pandas")
    npz = (fixtures / "npy" / "compressed.npz").read_bytes()
    want = dict(np.load(io.BytesIO(npz)))
    csv = "step,loss,acc\n" + "".join(f"{i},{1 / (i + 1)},{i / 50}\n" for i in range(50))
    zbuf = io.BytesIO()
    with zipfile.ZipFile(zbuf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("metrics/run.csv", csv)
    tpath = tmp_path / "data.tar.gz"
    with tarfile.open(tpath, "w:gz") as tf:
        for name, blob in (("arrays.npz", npz), ("logs.zip", zbuf.getvalue())):
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tf.addfile(info, io.BytesIO(blob))
    with pparse.open(tpath) as src:
        for key, w in want.items():
            with src.open(f"data.tar/arrays.npz/{key}.npy") as f:
                a = np.load(f)
            assert a.dtype == w.dtype and np.array_equal(a, w), key
        with src.open("data.tar/logs.zip/metrics/run.csv") as f:
            df = pd.read_csv(f)
    assert list(df.columns) == ["step", "loss", "acc"] and len(df) == 50
    assert df["loss"][3] == pytest.approx(0.25)


def test_a_cut_tar_gz_gives_back_what_survived_and_says_so(fixtures, tmp_path):
    whole = (fixtures / "nested.tar.gz").read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    ref = tar_members(fixtures / "nested.tar.gz")
    decoded = gzip.decompress(whole)
    with pparse.open(cut) as src:
        entries = src.list("", recursive=True)
        assert entries[0]["status"] == "truncated"
        damaged = [e for e in entries if e["kind"] == "file" and e["status"] != "complete"]
        assert damaged, "the cut member says it is cut"
        for e in entries:
            if e["kind"] != "file" or e["path"].count("/") != 1:
                continue
            name = e["path"].split("/", 1)[1]
            with src.open(e["path"]) as f:
                data = f.read()
            if e["status"] == "complete":
                assert data == ref[name]
            else:
                # What was recovered is the member's own prefix, and asking for
                # it whole raises with where and why.
                assert ref[name].startswith(data)
                with pytest.raises(pparse.DamagedError) as err:
                    src.open(e["path"], complete=True)
                assert err.value.status == "truncated"
                assert err.value.offset <= len(data)
                assert err.value.reason
        with src.open(entries[0]["path"]) as f:
            assert decoded.startswith(f.read())


def test_nothing_is_written_unless_asked(fixtures, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pparse.open(fixtures / "nested.tar.gz") as src:
        src.list("", recursive=True)
    assert not (tmp_path / "cache").exists()
    index = tmp_path / "nested.pidx"
    with pparse.open(fixtures / "nested.tar.gz", index=index) as src:
        src.tree()
    assert index.exists()


def test_every_file_of_a_zip_of_20k_entries_is_read_about_once(tmp_path):
    """Reading every file of a zip of 20,000 entries (written by zipfile)
    through the package reads the zip from disk about once and decodes
    each entry once (``pparse.io_stats()``), in a process of its own: the
    counters are the process's."""
    import sys

    path = tmp_path / "many.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(20_000):
            z.writestr(f"dir{i % 100}/file{i}.txt", f"entry {i}\n" * (1 + i % 7))
    want = {i.filename: z_read for i, z_read in _zip_contents(path)}
    script = (
        "import json, sys, pparse\n"
        "before = pparse.io_stats()\n"
        "got = {}\n"
        "with pparse.open(sys.argv[1]) as src:\n"
        "    for e in src.list('', recursive=True):\n"
        "        if e['kind'] == 'file':\n"
        "            with src.open(e['path']) as f:\n"
        "                got[e['path']] = len(f.read())\n"
        "after = pparse.io_stats()\n"
        "print(json.dumps({'got': got, 'io': {k: after[k] - before[k] for k in after}}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    import json

    res = json.loads(out.stdout)
    assert res["got"] == {name: len(data) for name, data in want.items()}
    io = res["io"]
    size = path.stat().st_size
    total = sum(len(d) for d in want.values())
    # Every entry is deflated: it is decoded at least once (where it is
    # listed, and again where it is read: twice at most), and the zip read.
    assert size <= io["file_read"] <= 2 * size, io
    assert total <= io["decoded"] + io["redecoded"] <= 2 * total, io
    assert io["from_cache"] <= 3 * total, io


def test_two_sources_count_their_own_work(tmp_path):
    """Each source counts what reading it cost (``Source.io_stats()``),
    apart from another open beside it in the same process."""
    sizes = {}
    for name, n in (("a.zip", 50), ("b.zip", 400)):
        with zipfile.ZipFile(tmp_path / name, "w", zipfile.ZIP_DEFLATED) as z:
            for i in range(n):
                z.writestr(f"f{i}.txt", f"{name} {i}\n" * (1 + i % 9))
        sizes[name] = (tmp_path / name).stat().st_size

    def read_all(src):
        src.tree()
        for e in src.list("", recursive=True):
            if e["kind"] == "file":
                with src.open(e["path"]) as f:
                    f.read()

    with pparse.open(tmp_path / "a.zip") as a, pparse.open(tmp_path / "b.zip") as b:
        read_all(a)
        io_a = a.io_stats()
        read_all(b)
        io_b = b.io_stats()
        assert a.io_stats() == io_a, "b's reads counted in a's"
        for io, name in ((io_a, "a.zip"), (io_b, "b.zip")):
            # Small zips: sniffing and the directory add a few KiB.
            assert sizes[name] <= io["file_read"] <= 4 * sizes[name], (name, io)
            assert io["decoded"] > 0, (name, io)
        assert io_b["decoded"] > io_a["decoded"]
    process = pparse.io_stats()
    assert process["file_read"] >= io_a["file_read"] + io_b["file_read"]


def _zip_contents(path):
    with zipfile.ZipFile(path) as z:
        return [(i, z.read(i)) for i in z.infolist()]


def test_soft_damage_keeps_members_readable_as_unverified(tmp_path):
    """A bit flipped inside stored (random) bytes: zlib decodes through and
    only the gzip CRC fails. Every member reads back, status `unverified`;
    asking for one complete raises; a `.gz` member that passes its own CRC
    stays complete."""
    import random
    import zlib

    rng = random.Random(5)
    noise = bytes(rng.getrandbits(8) for _ in range(100_000))
    inner = gzip.compress(b"inner text\n" * 4000, mtime=0)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        for name, data in [("a.txt", b"text\n" * 5000), ("b.gz", inner), ("c.bin", noise)]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    good = gzip.compress(buf.getvalue(), mtime=0)
    at = good.index(noise[50_000:50_032]) + 3
    bad = bytearray(good)
    bad[at] ^= 0x20
    d = zlib.decompressobj(31)
    with pytest.raises(zlib.error):
        d.decompress(bytes(bad))  # only the trailer's check fails
    path = tmp_path / "soft.tar.gz"
    path.write_bytes(bytes(bad))
    with pparse.open(path) as src:
        entries = {e["path"]: e for e in src.list("", recursive=True)}
        assert entries["soft.tar/a.txt"]["status"] == "unverified"
        assert entries["soft.tar/b.gz"]["status"] == "complete"
        with src.open("soft.tar/a.txt") as f:
            assert f.read() == b"text\n" * 5000 and f.status == "unverified"
        with pytest.raises(pparse.DamagedError) as err:
            src.open("soft.tar/a.txt", complete=True)
        assert err.value.status == "unverified"


def test_hdf5_groups_are_folders_and_datasets_files(fixtures):
    """An HDF5 file's groups list as folders and its datasets open as files
    of their values (a chunked one decoded), as h5py reads them
    (fixtures/hdf5/expect.json); numpy reads a dataset file as the array."""
    import hashlib
    import json

    np = pytest.importorskip("numpy")
    expect = json.loads((fixtures / "hdf5" / "expect.json").read_text())
    want = {o["path"]: o for o in expect["files"]["chunks-latest.h5"]["objects"]}
    with pparse.open(fixtures / "hdf5" / "basic-latest.h5", index=False) as src:
        top = {e["path"]: e["kind"] for e in src.list("")}
        assert top["weights"] == "dir" and top["chunked"] == "file"
        inner = {e["path"] for e in src.list("weights/deeper/still")}
        assert inner == {"weights/deeper/still/bytes"}
    with pparse.open(fixtures / "hdf5" / "chunks-latest.h5", index=False) as src:
        for path in ["filtered", "growing", "tree_gzip", "partial", "implicit"]:
            with src.open(path, complete=True) as f:
                data = f.read()
            assert hashlib.sha256(data).hexdigest() == want[path]["sha256"], path
        with src.open("filtered") as f:
            a = np.frombuffer(f.read(), dtype="<i2").reshape(200, 300)
        assert int(a[199, 299]) == (59999 * 7) % 1000
