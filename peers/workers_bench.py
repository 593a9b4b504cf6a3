"""Random members of a zip of many small files and of the same files as a
tar.gz, read by a pool of worker processes (spawn, as a DataLoader with
workers gets its dataset: pickled), through pparse and its peers:
fsspec's zip:// and tar://, ratarmount's ratar:// (when installed) and
Python's zipfile and tarfile opened in each worker.

Prints one line per reader and archive: members/s over the whole job
(workers started, the reader opened in each, every member read), and the
peak RSS of a worker. Run by peers/workers.sh, which says what to pass.
"""

import argparse
import io
import multiprocessing as mp
import os
import random
import sys
import tarfile
import time
import zipfile


def make(dir_: str, n: int):
    zp = os.path.join(dir_, f"small-{n}.zip")
    tp = os.path.join(dir_, f"small-{n}.tar.gz")
    names = [f"d{i % 1000:03d}/f{i:07d}.txt" for i in range(n)]
    body = lambda i: (f"item {i} " * (1 + i % 20)).encode()  # noqa: E731
    if not os.path.exists(zp):
        with zipfile.ZipFile(zp, "w", zipfile.ZIP_DEFLATED) as z:
            for i, name in enumerate(names):
                z.writestr(name, body(i))
    if not os.path.exists(tp):
        # Written in place: gzip keeps the file's name in its header.
        with tarfile.open(tp, "w:gz", compresslevel=6) as t:
            for i, name in enumerate(names):
                b = body(i)
                info = tarfile.TarInfo(name)
                info.size = len(b)
                t.addfile(info, io.BytesIO(b))
    return zp, tp, names


# --- readers: each is (opener run once per worker, read(handle, name)) ---

_H = None


def _init(kind, path, index):
    global _H
    if kind == "pparse":
        import pparse

        _H = pparse.open(path, index=index)
    elif kind in ("fsspec-zip", "fsspec-tar"):
        import fsspec

        _H = fsspec.filesystem(kind.split("-")[1], fo=path)
    elif kind == "ratar":
        import fsspec

        _H = fsspec.filesystem("ratar", fo=path)
    elif kind == "zipfile":
        _H = zipfile.ZipFile(path)
    elif kind == "tarfile":
        _H = tarfile.open(path)


def _read(args):
    kind, names = args
    total = 0
    for name in names:
        if kind == "pparse":
            with _H.open(name) as f:
                total += len(f.read())
        elif kind in ("fsspec-zip", "fsspec-tar", "ratar"):
            total += len(_H.cat_file(name))
        elif kind == "zipfile":
            total += len(_H.read(name))
        elif kind == "tarfile":
            total += len(_H.extractfile(name).read())
    return total, _peak_rss_kib()


def _peak_rss_kib() -> int:
    """This process's peak resident memory (VmHWM: ru_maxrss would carry
    the parent's over the spawn's exec on Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def run(kind, path, index, names, workers, batch):
    ctx = mp.get_context("spawn")
    chunks = [names[i : i + batch] for i in range(0, len(names), batch)]
    t0 = time.perf_counter()
    with ctx.Pool(workers, initializer=_init, initargs=(kind, path, index)) as pool:
        out = pool.map(_read, [(kind, c) for c in chunks])
    took = time.perf_counter() - t0
    rss = max(r for _, r in out)
    return len(names) / took, rss, sum(b for b, _ in out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/pparse-bench")
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--reads", type=int, default=5_000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    zp, tp, names = make(args.dir, args.files)
    rng = random.Random(0)
    pick = rng.sample(names, min(args.reads, len(names)))
    import pparse

    for path in (zp, tp):
        # pparse's index, written once beforehand (as a dataset's would be).
        index = path + ".pidx"
        if not os.path.exists(index):
            with pparse.open(path, index=index) as src:
                src.tree()
        top = os.path.basename(path)[: -len(".gz")] + "/" if path.endswith(".gz") else ""
        kinds = ["pparse", "fsspec-zip" if path == zp else "fsspec-tar", "zipfile" if path == zp else "tarfile"]
        try:
            import fsspec
            import ratarmountcore  # noqa: F401

            if path == tp:
                # ratarmount's index too, written once beforehand.
                fsspec.filesystem("ratar", fo=path).ls("")
                kinds.append("ratar")
        except ImportError:
            pass
        for kind in kinds:
            wanted = [top + n for n in pick] if kind == "pparse" else pick
            rate, rss, nbytes = run(kind, path, index, wanted, args.workers, 250)
            print(
                f"{os.path.basename(path):24} {kind:11} {rate:10.0f} members/s  "
                f"worker peak RSS {rss / 1024:7.0f} MiB  ({nbytes} B)",
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())
