"""Training-style reads of a zip of many small files and of the same files
as a tar.gz (issue 35, item 8), through pparse and its peers, with real
PyTorch DataLoaders (spawned workers) and a Dask cluster. Run by
peers/training.sh, which makes the venv and says what to pass.

Parts (--parts, comma-separated):

  local   random members, DataLoader(num_workers=W, spawn): pparse
          (MemberDataset, and a plain dataset calling pparse.open), fsspec
          zip:// and tar://, ratarmount (ratar:// for the tar.gz, its
          ZipMountSource for the zip), zipfile and tarfile opened per worker
  s3      the same on moto's S3 server: pparse (index beside the data on
          S3), fsspec zip:// and tar:// over s3fs, ratar:// over s3fs
  stream  one pass over the tar.gz in archive order, split across the
          workers: pparse.torch.MemberStream, tarfile "r|gz", webdataset
  cache   MemberDataset(cache=FOLDER) over the S3 zip: epoch 1 and epoch 2
  dask    pparse.manifest per archive on S3, distributed.LocalCluster of 1
          and of 2 worker processes

Every DataLoader reads its members in the workers; the batch's collate
function (run in the worker) sends back the batch's count and bytes, the
worker's pid, its peak RSS (VmHWM of /proc/self/status), its anonymous RSS
(RssAnon: not the pages of a mapped archive, which the page cache shares)
and, where pparse
is loaded, pparse.io_stats()["remote_bytes"]: no member's bytes cross to
the main process, for every reader alike.
"""

import argparse
import io
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import zipfile

import torch.utils.data

BUCKET = "pparse-bench"


# --------------------------------------------------------------------- files


def _names(n):
    # key.ext names (webdataset groups a sample's files by key).
    return [f"d{i % 1000:03d}/f{i:07d}.bin" for i in range(n)]


def _bodies(n, seed=1):
    """n members of 100 to 2,000 bytes: slices of a text of words drawn
    from a vocabulary of 2,000 (deflate makes about a third of them)."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(2000)]
    text = " ".join(rng.choice(vocab) for _ in range(400_000)).encode()
    for _ in range(n):
        size = rng.randint(100, 2000)
        off = rng.randrange(0, len(text) - size)
        yield text[off : off + size]


def make(dir_, n):
    """The zip (Python's zipfile, deflate, level 6) and the tar.gz
    (tarfile, gzip level 6) of the same n files, made once."""
    zp = os.path.join(dir_, f"small-{n}.zip")
    tp = os.path.join(dir_, f"small-{n}.tar.gz")
    names = _names(n)
    if not os.path.exists(zp):
        t0 = time.perf_counter()
        raw = 0
        with zipfile.ZipFile(zp + ".part", "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
            for name, body in zip(names, _bodies(n)):
                z.writestr(name, body)
                raw += len(body)
        with open(tp + ".raw", "w") as f:
            f.write(str(raw))
        os.rename(zp + ".part", zp)
        log(f"made {zp} in {time.perf_counter() - t0:.0f} s")
    if not os.path.exists(tp):
        t0 = time.perf_counter()
        # Written under its own name (gzip keeps it in its header), then moved.
        os.makedirs(os.path.join(dir_, "part"), exist_ok=True)
        part = os.path.join(dir_, "part", os.path.basename(tp))
        with tarfile.open(part, "w:gz", compresslevel=6) as t:
            for name, body in zip(names, _bodies(n)):
                info = tarfile.TarInfo(name)
                info.size = len(body)
                t.addfile(info, io.BytesIO(body))
        os.rename(part, tp)
        log(f"made {tp} in {time.perf_counter() - t0:.0f} s")
    return zp, tp, names


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------- readers


def _peak_rss_kib():
    """This process's peak resident memory (VmHWM: ru_maxrss would carry
    the parent's over the spawn's exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def summarize(batch):
    """The DataLoader's collate_fn, run in the worker: what the batch was,
    not its bytes."""
    pparse = sys.modules.get("pparse")
    remote = pparse.io_stats()["remote_bytes"] if pparse is not None else None
    nbytes = 0
    for item in batch:
        if isinstance(item, tuple):  # MemberStream's (PATH, bytes)
            item = item[1]
        elif isinstance(item, dict):  # webdataset's sample
            item = item["bin"]
        nbytes += len(item)
    return len(batch), nbytes, os.getpid(), _peak_rss_kib(), remote, _status_kib("RssAnon")


def _s3_options():
    return {
        "client_kwargs": {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]},
        "key": os.environ["AWS_ACCESS_KEY_ID"],
        "secret": os.environ["AWS_SECRET_ACCESS_KEY"],
    }


def _open(kind, path, index):
    """What a worker opens, once, on its first read."""
    s3 = path.startswith("s3://")
    if kind in ("pparse-open", "pparse-tree"):
        import pparse

        src = pparse.open(path, index=index)
        if kind == "pparse-tree":
            # A listing needs the whole tree: built from the index's records.
            src.list("")
        return src
    if kind in ("fsspec-zip", "fsspec-tar"):
        import fsspec

        proto = kind.split("-")[1]
        if s3:
            return fsspec.filesystem(proto, fo=path[len("s3://") :], target_protocol="s3", target_options=_s3_options())
        return fsspec.filesystem(proto, fo=path)
    if kind == "ratar":
        import fsspec

        if s3:
            return fsspec.filesystem(
                "ratar",
                fo=path[len("s3://") :],
                target_protocol="s3",
                target_options=_s3_options(),
                indexFilePath=index,
                writeIndex=False,
            )
        return fsspec.filesystem("ratar", fo=path)
    if kind == "ratar-zip":
        from ratarmountcore.mountsource.formats.zip import ZipMountSource
        from ratarmountcore.SQLiteIndexedTarFsspec import MountSourceFileSystem

        # It writes metadata into its index on every open, and two workers
        # opening one index deadlock on sqlite's lock ("database is
        # locked"): each worker opens its own copy, made beforehand.
        info = torch.utils.data.get_worker_info()
        own = f"{index}.w{info.id if info is not None else 0}"
        return MountSourceFileSystem(ZipMountSource(path, writeIndex=False, indexFilePath=own))
    if kind == "zipfile":
        return zipfile.ZipFile(path)
    if kind == "tarfile":
        return tarfile.open(path)
    if kind == "idle":
        return None
    raise ValueError(kind)


def _read(kind, h, name):
    if kind in ("pparse-open", "pparse-tree"):
        with h.open(name) as f:
            return f.read()
    if kind in ("fsspec-zip", "fsspec-tar", "ratar", "ratar-zip"):
        return h.cat_file(name)
    if kind == "zipfile":
        return h.read(name)
    if kind == "tarfile":
        return h.extractfile(name).read()
    if kind == "idle":
        return b""
    raise ValueError(kind)


class Named(torch.utils.data.Dataset):
    """A fixed sample of members by name, read by `kind`'s reader, opened
    in each worker on its first read (the handle does not pickle)."""

    def __init__(self, kind, path, names, index=None):
        self.kind, self.path, self.names, self.index = kind, path, names, index
        self.h = None

    def __len__(self):
        return len(self.names)

    def __getitem__(self, i):
        if self.h is None:
            self.h = _open(self.kind, self.path, self.index)
        return _read(self.kind, self.h, self.names[i])

    def __getstate__(self):
        return {**self.__dict__, "h": None}


class Numbered(torch.utils.data.Dataset):
    """The same sample through pparse.torch.MemberDataset, by member number."""

    def __init__(self, ds, numbers):
        self.ds, self.numbers = ds, numbers

    def __len__(self):
        return len(self.numbers)

    def __getitem__(self, i):
        return self.ds[int(self.numbers[i])]


def load(ds, workers, batch_size, **kw):
    """One pass of a DataLoader over ds: members, bytes, seconds for the
    whole job (workers started, the reader opened in each) and to the first
    batch, each worker's peak RSS and remote bytes."""
    dl = torch.utils.data.DataLoader(
        ds,
        batch_size=batch_size,
        num_workers=workers,
        collate_fn=summarize,
        multiprocessing_context="spawn",
        **kw,
    )
    hwm, remote, anon = {}, {}, {}
    n = nbytes = 0
    first = n_first = None
    t0 = time.perf_counter()
    for c, b, pid, h, r, a in dl:
        if first is None:
            first, n_first = time.perf_counter() - t0, c
        n += c
        nbytes += b
        hwm[pid] = max(hwm.get(pid, 0), h)
        anon[pid] = max(anon.get(pid, 0), a)
        if r is not None:
            remote[pid] = max(remote.get(pid, 0), r)
    took = time.perf_counter() - t0
    del dl
    return {
        "members": n,
        "bytes": nbytes,
        "seconds": took,
        "first_s": first,
        "steady": (n - n_first) / (took - first) if n > n_first and took > first else None,
        "rate": n / took,
        "rss_kib": sorted(hwm.values()),
        "anon_kib": sorted(anon.values()),
        "remote_bytes": sum(remote.values()) if remote else None,
    }


def index_pparse(path, index):
    import pparse

    t0 = time.perf_counter()
    with pparse.open(path, index=index) as src:
        while src.parsing:
            time.sleep(0.05)
        src.tree()
    return time.perf_counter() - t0


def index_ratar(path, index=None, fo=None):
    import fsspec

    t0 = time.perf_counter()
    if path.endswith(".zip"):
        from ratarmountcore.mountsource.formats.zip import ZipMountSource

        ZipMountSource(path, writeIndex=True, indexFilePath=index)
    elif fo is not None:
        fsspec.filesystem(
            "ratar", fo=fo, target_protocol="s3", target_options=_s3_options(), indexFilePath=index, writeIndex=True
        ).ls("")
    else:
        fsspec.filesystem("ratar", fo=path).ls("")
    return time.perf_counter() - t0


# ------------------------------------------------------------------- tables

ROWS = []
IDLE = "idle worker (no reads)"
# The report; what libraries print (ratarmount's progress) goes to stderr.
OUT = sys.stdout


def say(*a):
    print(*a, file=OUT, flush=True)


def row(part, archive, reader, res, note=""):
    r = {"part": part, "archive": archive, "reader": reader, **res, "note": note}
    ROWS.append(r)
    rss = "/".join(f"{k / 1024:.0f}" for k in res["rss_kib"])
    log(
        f"{part:7} {archive:24} {reader:28} {res['members']:8d} members {res['rate']:9.1f}/s "
        f"(first batch {res['first_s']:.1f} s, then {res['steady'] or 0:.1f}/s) rss {rss} MiB "
        f"remote {res['remote_bytes']}"
    )
    say("JSON " + json.dumps(r))


def fmt_rate(x):
    if x is None:
        return "-"
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def table(part, base_reader, extra=None):
    rows = [r for r in ROWS if r["part"] == part]
    if not rows:
        return
    say()
    idle = next((max(r["rss_kib"]) for r in ROWS if r["reader"] == IDLE), None)
    head = (
        "| archive | reader | members read | members/s (whole job) | vs pparse | first batch "
        "| members/s after it | peak RSS per worker (MiB) | over an idle worker (MiB) "
        "| anonymous RSS per worker (MiB) |"
    )
    if extra:
        head += f" {extra[0]} |"
    say(head)
    say("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        base = next(
            (b for b in rows if b["archive"] == r["archive"] and b["reader"] == base_reader), None
        )
        ratio = f"{r['rate'] / base['rate']:.3g}x" if base and r["reader"] != IDLE else ""
        rss = " / ".join(f"{k / 1024:.0f}" for k in r["rss_kib"])
        line = (
            f"| {r['archive']} | {r['reader']}{' ' + r['note'] if r['note'] else ''} | {r['members']:,} | "
            f"{fmt_rate(r['rate'])} | {ratio} | {r['first_s']:.1f} s | {fmt_rate(r['steady'])} | {rss} | "
            + (f"{(max(r['rss_kib']) - idle) / 1024:+.0f} |" if idle and r["reader"] != IDLE else " |")
            + " " + " / ".join(f"{k / 1024:.0f}" for k in r["anon_kib"]) + " |"
        )
        if extra:
            line += f" {extra[1](r)} |"
        say(line)


# ------------------------------------------------------------------ S3 server


class Moto:
    def __init__(self, python):
        self.python = python
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [python, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("moto did not start")
                time.sleep(0.05)
        os.environ.update(
            {
                "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ACCESS_KEY_ID": "test",
                "AWS_SECRET_ACCESS_KEY": "test",
                "AWS_REGION": "us-east-1",
            }
        )
        self._boto("s3.create_bucket(Bucket=sys.argv[1])", BUCKET)

    def _boto(self, code, *args):
        client = (
            "import boto3, sys\n"
            f"s3 = boto3.client('s3', endpoint_url='{self.endpoint}', aws_access_key_id='test',"
            " aws_secret_access_key='test', region_name='us-east-1')\n"
        )
        subprocess.run([self.python, "-c", client + code, *args], check=True)

    def upload(self, path, key):
        self._boto("s3.upload_file(sys.argv[1], sys.argv[2], sys.argv[3])", path, BUCKET, key)
        return f"s3://{BUCKET}/{key}"

    def close(self):
        self.proc.kill()
        self.proc.wait()


# --------------------------------------------------------------------- parts


def sample_of(names, k, seed=0):
    return random.Random(seed).sample(range(len(names)), min(k, len(names)))


def member_numbers(ds, wanted):
    """MemberDataset's numbers of the PATHs in `wanted`, in its order."""
    pos = {p: i for i, p in enumerate(wanted)}
    out = [None] * len(wanted)
    for i in range(len(ds)):
        j = pos.get(ds.name(i))
        if j is not None:
            out[j] = i
    assert None not in out, "a sampled member is not in the dataset"
    return out


def random_members(part, zp, tp, names, args, s3=None):
    """Part `local` (s3 None) or `s3` (s3: {local path: URL})."""
    from pparse.torch import MemberDataset

    pick = sample_of(names, args.reads if s3 is None else args.s3_reads)
    W, B = args.workers, args.batch
    for path in (zp, tp):
        is_zip = path == zp
        arch = os.path.basename(path)
        url = path if s3 is None else s3[path]
        top = "" if is_zip else arch[: -len(".gz")] + "/"
        if s3 is None:
            index = path + ".pidx"
            if not os.path.exists(index):
                log(f"pparse index of {arch}: {index_pparse(path, index):.1f} s")
        else:
            index = f"s3://{BUCKET}/indexes/"
            log(f"pparse index of {url} into {index}: {index_pparse(url, index):.1f} s")
        wanted = [top + names[i] for i in pick]
        plain = [names[i] for i in pick]

        if s3 is None:
            res = load(Named("idle", path, plain), W, B)
            row(part, arch, IDLE, res)

        ds = MemberDataset(url, index=index)
        row(part, arch, "pparse MemberDataset", load(Numbered(ds, member_numbers(ds, wanted)), W, B))
        del ds
        row(part, arch, "pparse.open per worker", load(Named("pparse-open", url, wanted, index), W, B))

        # fsspec's archive filesystems: the zip's is quick, the tar.gz's
        # scans the archive in each worker and inflates from the start on
        # every backward seek.
        if is_zip:
            k = args.reads if s3 is None else args.s3_slow_reads
            note = "" if k >= len(plain) else f"(first {k:,} of the sample)"
            row(part, arch, "fsspec zip://" + ("::s3 (s3fs)" if s3 else ""), load(Named("fsspec-zip", url, plain[:k]), W, _b(k, B)), note)
        else:
            k = args.slow_reads if s3 is None else args.s3_tar_reads
            row(part, arch, "fsspec tar://" + ("::s3 (s3fs)" if s3 else ""), load(Named("fsspec-tar", url, plain[:k]), W, 1), f"(first {k:,} of the sample)")

        # ratarmount, its index written once beforehand, as pparse's is.
        if is_zip and s3 is None:
            rindex = path + ".index.sqlite"
            if not os.path.exists(rindex):
                log(f"ratarmount index of {arch}: {index_ratar(path, rindex):.1f} s")
            for w in range(W):
                shutil.copyfile(rindex, f"{rindex}.w{w}")
            row(part, arch, "ratarmountcore ZipMountSource", load(Named("ratar-zip", url, plain, rindex), W, B), "(an index copy per worker)")
        elif not is_zip:
            k = args.mid_reads if s3 is None else args.s3_ratar_reads
            note = f"(first {k:,} of the sample)" if k < len(plain) else ""
            if s3 is None:
                if not os.path.exists(path + ".index.sqlite"):
                    log(f"ratarmount index of {arch}: {index_ratar(path):.1f} s")
                row(part, arch, "ratarmount ratar://", load(Named("ratar", url, plain[:k]), W, _b(k, B)), note)
            else:
                rindex = os.path.join(args.dir, f"s3-{arch}.index.sqlite")
                try:
                    if not os.path.exists(rindex):
                        log(f"ratarmount index of {url}: {index_ratar(path, rindex, fo=url[len('s3://'):]):.1f} s")
                    row(part, arch, "ratarmount ratar://::s3 (s3fs)", load(Named("ratar", url, plain[:k], rindex), W, _b(k, B)), note)
                except Exception as e:  # noqa: BLE001 - reported, not hidden
                    log(f"ratar over S3 failed: {e!r}")
                    say(f"NOTE ratar over S3 failed: {type(e).__name__}: {str(e)[:300]}")

        # The standard library, opened in each worker (local files only).
        if s3 is None:
            if is_zip:
                row(part, arch, "zipfile", load(Named("zipfile", path, plain), W, B))
            else:
                k = args.slow_reads
                row(part, arch, "tarfile", load(Named("tarfile", path, plain[:k]), W, 1), f"(first {k:,} of the sample)")


def _b(k, B):
    # Small samples in batches of 1, so both workers get their share.
    return B if k >= 20 * B else 1


class TarStream(torch.utils.data.IterableDataset):
    """tarfile streaming ("r|gz", what webdataset does): each worker
    inflates and walks the whole archive and keeps every W-th member."""

    def __init__(self, path):
        self.path = path

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        k, w = (info.id, info.num_workers) if info is not None else (0, 1)
        with tarfile.open(self.path, mode="r|gz") as t:
            for i, m in enumerate(t):
                if i % w == k and m.isfile():
                    yield m.name, t.extractfile(m).read()


def stream(tp, names, args):
    from pparse.torch import MemberStream

    arch = os.path.basename(tp)
    index = tp + ".pidx"
    if not os.path.exists(index):
        log(f"pparse index of {arch}: {index_pparse(tp, index):.1f} s")
    W, B = args.workers, args.batch
    row("stream", arch, "pparse MemberStream", load(MemberStream(tp, index=index), W, B))
    row("stream", arch, 'tarfile "r|gz", every W-th member', load(TarStream(tp), W, B))
    try:
        import webdataset as wds
    except ImportError as e:
        say(f"NOTE webdataset not installed: {e}")
        return
    ds = wds.WebDataset(tp, shardshuffle=False, empty_check=False)
    row("stream", arch, "webdataset.WebDataset (1 shard)", load(ds, W, B))


def cache_epochs(zp, url, names, args):
    from pparse.torch import MemberDataset

    folder = os.path.join(args.dir, "shared-cache")
    shutil.rmtree(folder, ignore_errors=True)
    index = f"s3://{BUCKET}/indexes/"
    pick = sample_of(names, args.s3_reads)
    ds = MemberDataset(url, index=index, cache=folder)
    numbers = member_numbers(ds, [names[i] for i in pick])
    for epoch in (1, 2):
        res = load(Numbered(ds, numbers), args.workers, args.batch)
        row("cache", os.path.basename(zp) + " on S3", f"MemberDataset(cache=), epoch {epoch}", res)


def dask_job(args, moto):
    import distributed

    import pparse

    d = os.path.join(args.dir, "dask")
    os.makedirs(d, exist_ok=True)
    urls = []
    per = args.dask_members
    for a in range(args.dask_archives):
        names = [f"a{a}/d{i % 100:02d}/f{i:06d}.bin" for i in range(per)]
        bodies = _bodies(per, seed=100 + a)
        if a % 2:
            p = os.path.join(d, f"a{a}-{per}.zip")
            if not os.path.exists(p):
                with zipfile.ZipFile(p, "w", zipfile.ZIP_DEFLATED) as z:
                    for n, b in zip(names, bodies):
                        z.writestr(n, b)
        else:
            p = os.path.join(d, f"a{a}-{per}.tar.gz")
            if not os.path.exists(p):
                with tarfile.open(p, "w:gz") as t:
                    for n, b in zip(names, bodies):
                        info = tarfile.TarInfo(n)
                        info.size = len(b)
                        t.addfile(info, io.BytesIO(b))
        urls.append(moto.upload(p, f"dask/{os.path.basename(p)}"))
    sizes = sum(os.path.getsize(os.path.join(d, os.path.basename(u))) for u in urls)
    out = []
    for n in (1, 2):
        with distributed.LocalCluster(
            n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster, distributed.Client(cluster) as client:
            client.run(lambda: __import__("pparse") and None)
            t0 = time.perf_counter()
            results = client.gather(client.map(pparse.manifest, urls, pure=False))
            took = time.perf_counter() - t0
        files = sum(len(r) for r in results)
        assert files == per * len(urls), files
        assert all(i["status"] == "complete" for r in results for i in r)
        log(f"dask {n} workers: {took:.2f} s, {files} files")
        out.append((n, took, files))
        say("JSON " + json.dumps({"part": "dask", "workers": n, "seconds": took, "files": files}))
    say()
    say(
        f"{len(urls)} archives on S3 ({(len(urls) + 1) // 2} tar.gz, {len(urls) // 2} zip; "
        f"{per:,} files each, {sizes / 1e6:.0f} MB in all), one `pparse.manifest` task each "
        "(every file listed, read and hashed with SHA-256):"
    )
    say()
    say("| Dask workers (threads_per_worker=1) | wall time | files/s | vs 1 worker |")
    say("|---|---|---|---|")
    for n, took, files in out:
        say(f"| {n} | {took:.2f} s | {files / took:,.0f} | {out[0][1] / took:.2f}x |")


# ------------------------------------------------------------------- memory


def _rss_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _hold(kind, path, index, name, q):
    """In a fresh spawned process (which imports this script, and so
    torch, before `before`): open `kind`'s reader, read one member, and
    report resident memory before, after, and at its peak."""
    before, anon0 = _rss_kib("VmRSS"), _rss_kib("RssAnon")
    t0 = time.perf_counter()
    h = _open(kind, path, index)
    data = _read(kind, h, name)
    took = time.perf_counter() - t0
    q.put((before, _rss_kib("VmRSS"), _rss_kib("VmHWM"), took, _rss_kib("RssAnon") - anon0))


def memory(zp, tp, names, args):
    """What one process holds to read members at random: resident memory
    grown by opening each reader (from its index, written beforehand,
    where it has one) and reading one member, in a fresh spawned process."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    rows = []
    n = len(names)
    for path in (zp, tp):
        arch = os.path.basename(path)
        is_zip = path == zp
        top = "" if is_zip else arch[: -len(".gz")] + "/"
        name = names[n // 2]
        # The indexes the readers start from, as part `local` writes them.
        if not os.path.exists(path + ".pidx"):
            log(f"pparse index of {arch}: {index_pparse(path, path + '.pidx'):.1f} s")
        if not os.path.exists(path + ".index.sqlite"):
            log(f"ratarmount index of {arch}: {index_ratar(path, path + '.index.sqlite' if is_zip else None):.1f} s")
        kinds = [
            ("pparse-open", top + name, path + ".pidx", "pparse.open (from its index)"),
            ("pparse-tree", top + name, path + ".pidx", "pparse.open (from its index), whole tree built"),
        ]
        if is_zip:
            kinds += [
                ("zipfile", name, None, "zipfile.ZipFile"),
                ("fsspec-zip", name, None, "fsspec zip://"),
                ("ratar-zip", name, path + ".index.sqlite", "ratarmountcore ZipMountSource (from its index)"),
            ]
        else:
            kinds += [
                ("ratar", name, None, "ratarmount ratar:// (from its index)"),
                ("fsspec-tar", name, None, "fsspec tar://"),
                ("tarfile", name, None, "tarfile.open + extractfile"),
            ]
        for kind, member, index, label in kinds:
            if kind == "ratar-zip":
                shutil.copyfile(index, index + ".w0")
            q = ctx.Queue()
            p = ctx.Process(target=_hold, args=(kind, path, index, member, q))
            p.start()
            before, after, peak, took, anon = q.get()
            p.join()
            grown = after - before
            r = {"part": "memory", "archive": arch, "reader": label, "members": n, "before_kib": before,
                 "after_kib": after, "peak_kib": peak, "anon_grown_kib": anon, "seconds": took}
            say("JSON " + json.dumps(r))
            log(f"memory {arch} {label}: +{grown / 1024:.0f} MiB, peak {peak / 1024:.0f} MiB, {took:.1f} s")
            rows.append((arch, label, grown, peak - before, anon, took))
    say()
    say(
        f"| archive ({n:,} members) | reader | resident memory grown (MiB) | per member "
        "| of it anonymous (MiB) | peak over the start (MiB) | open + one read |"
    )
    say("|---|---|---|---|---|---|---|")
    for arch, label, grown, peak, anon, took in rows:
        say(
            f"| {arch} | {label} | {grown / 1024:,.0f} | {grown * 1024 / n:,.0f} B | {anon / 1024:,.0f} "
            f"| {peak / 1024:,.0f} | {took:.1f} s |"
        )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/pparse-bench")
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--reads", type=int, default=50_000)
    ap.add_argument("--mid-reads", type=int, default=2_000, help="ratar:// on the tar.gz")
    ap.add_argument("--slow-reads", type=int, default=16, help="tarfile and fsspec tar:// on the tar.gz")
    ap.add_argument(
        "--s3-files",
        type=int,
        default=100_000,
        help="members of the archives on S3 (the first of the same files): moto reads the "
        "whole object for every range request, so its time grows with the object",
    )
    ap.add_argument("--s3-reads", type=int, default=2_000)
    ap.add_argument("--s3-slow-reads", type=int, default=500, help="fsspec zip:// over s3fs")
    ap.add_argument("--s3-tar-reads", type=int, default=4, help="fsspec tar:// over s3fs")
    ap.add_argument("--s3-ratar-reads", type=int, default=200, help="ratar:// over s3fs")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--dask-archives", type=int, default=8)
    ap.add_argument("--dask-members", type=int, default=20_000)
    ap.add_argument("--parts", default="local,memory,stream,s3,cache,dask")
    ap.add_argument("--system-python", default="python3", help="a python3 with moto[server] and boto3")
    args = ap.parse_args()
    global OUT
    OUT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    parts = args.parts.split(",")
    os.makedirs(args.dir, exist_ok=True)
    zp, tp, names = make(args.dir, args.files)
    say(
        f"Files: {args.files:,} members of 100 to 2,000 bytes ({_raw(tp):,} B in all); "
        f"{os.path.basename(zp)} {os.path.getsize(zp):,} B (zipfile, deflate level 6), "
        f"{os.path.basename(tp)} {os.path.getsize(tp):,} B (tarfile, gzip level 6)."
    )
    if "local" in parts:
        random_members("local", zp, tp, names, args)
        table("local", "pparse MemberDataset")
    if "memory" in parts:
        memory(zp, tp, names, args)
    if "stream" in parts:
        stream(tp, names, args)
        mb = lambda r: f"{r['bytes'] / 1e6 / r['seconds']:.1f}"  # noqa: E731
        table("stream", "pparse MemberStream", ("MB/s (members' bytes)", mb))
    if any(p in parts for p in ("s3", "cache", "dask")) and args.s3_files != args.files:
        zp, tp, names = make(args.dir, args.s3_files)
        say()
        say(
            f"On S3: the first {args.s3_files:,} of the same files, {os.path.basename(zp)} "
            f"{os.path.getsize(zp):,} B, {os.path.basename(tp)} {os.path.getsize(tp):,} B."
        )
    moto = None
    try:
        if any(p in parts for p in ("s3", "cache", "dask")):
            moto = Moto(args.system_python)
            log(f"moto at {moto.endpoint}")
        urls = {}
        if "s3" in parts or "cache" in parts:
            for p in (zp, tp) if "s3" in parts else (zp,):
                t0 = time.perf_counter()
                urls[p] = moto.upload(p, os.path.basename(p))
                log(f"uploaded {p} in {time.perf_counter() - t0:.0f} s")
        if "s3" in parts:
            random_members("s3", zp, tp, names, args, s3=urls)
            table("s3", "pparse MemberDataset")
        if "cache" in parts:
            if "s3" not in parts:
                index_pparse(urls[zp], f"s3://{BUCKET}/indexes/")
            cache_epochs(zp, urls[zp], names, args)
            rb = lambda r: f"{r['remote_bytes']:,}" if r["remote_bytes"] is not None else "-"  # noqa: E731
            table("cache", "MemberDataset(cache=), epoch 1", ("remote bytes fetched (all workers)", rb))
        if "dask" in parts:
            dask_job(args, moto)
    finally:
        if moto is not None:
            moto.close()


def _raw(tp):
    meta = tp + ".raw"
    if not os.path.exists(meta):
        n = 0
        with tarfile.open(tp, "r|gz") as t:
            for m in t:
                n += m.size
        with open(meta, "w") as f:
            f.write(str(n))
    with open(meta) as f:
        return int(f.read())


if __name__ == "__main__":
    sys.exit(main())
