#!/usr/bin/env python3
"""The real-world sweep of peers/realworld.sh: every file of nine kinds
under DIR, read by its reference tool and by pparse, and where they differ.

Usage: realworld.py PPARSE DIR OUTDIR

How a file's kind is found (first match wins):
  by magic bytes: gzip (1f 8b), xz (fd '7zXZ' 00), bz2 ('BZh' 1-9 and a
  block or end-of-stream magic), zst (28 b5 2f fd), zip ('PK' 03 04 or an
  empty zip's 'PK' 05 06), npy (93 'NUMPY'), tar ('ustar' at offset 257);
  by extension: zip (.zip .jar .whl, whatever their first bytes: a
  self-extracting zip or one with a prefix), tar (.tar: v7 tars have no
  magic), json (.json), pickle (.pkl .pickle).
Every other regular file is of kind "other" (OTHERS=0 leaves them out):
no reference reads them, nothing says they are damaged, and pparse must
exit 0 on them too (what it finds in them by scanning, `found@…`, must be
real). Symbolic links and files that cannot be read are skipped.

Each file is read twice, JOBS files at a time (default 2):
  the reference tool, in Python: gzip (every member to its end: CRC and
  length), zipfile (testzip: every entry's CRC), lzma, bz2, tarfile (every
  header; tarfile checks each member's data is there), json.load,
  numpy.load(allow_pickle=False), pickletools.dis (the first pickle, as
  `python -m pickletools` reads it); `zstd -t` for zst. A file the
  reference declines (an encrypted zip entry, a compression method
  zipfile lacks, a NumPy object array or header over 10 KB, which numpy
  reads only with allow_pickle) is "n/a";
  and `pparse tree --no-index --json FILE`, under a timeout of TIMEOUT
  seconds (default 60), wall and CPU time measured.

Verdicts: a false alarm is a file the reference reads cleanly (or one of
kind "other") where pparse exits 1 (damage); a miss, one the reference fails where pparse exits 0; a
crash, any other exit (2: could not read; 101: a panic) or a signal; a slow
file, pparse over SLOW seconds (default 5) of wall time. Output:
OUTDIR/sweep.tsv (one line a file) and a Markdown report on stdout.
"""
import json
import os
import resource
import signal
import stat
import subprocess
import sys
import time
from multiprocessing import Pool

PPARSE, ROOT, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
JOBS = int(os.environ.get("JOBS", "2"))
TIMEOUT = float(os.environ.get("TIMEOUT", "60"))
SLOW = float(os.environ.get("SLOW", "5"))
OTHERS = os.environ.get("OTHERS", "1") != "0"
KINDS = ("gzip", "zip", "xz", "bz2", "zst", "tar", "json", "npy", "pickle", "other")
BZ_MAGIC = (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")
BY_EXT = {".zip": "zip", ".jar": "zip", ".whl": "zip", ".tar": "tar",
          ".json": "json", ".pkl": "pickle", ".pickle": "pickle"}


def classify(path, head):
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:6] == b"\xfd7zXZ\x00":
        return "xz"
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and len(head) >= 10 and head[4:10] in BZ_MAGIC:
        return "bz2"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zst"
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06"):
        return "zip"
    if head[:6] == b"\x93NUMPY":
        return "npy"
    if head[257:262] == b"ustar":
        return "tar"
    return BY_EXT.get(os.path.splitext(path)[1].lower(), "other" if OTHERS else None)


def find(root):
    """(kind, path, size) of every file of a kind under root."""
    found = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            p = os.path.join(d, f)
            try:
                st = os.lstat(p)
                if not stat.S_ISREG(st.st_mode):
                    continue
                with open(p, "rb") as fh:
                    head = fh.read(512)
            except OSError:
                continue
            kind = classify(p, head)
            if kind:
                found.append((kind, p, st.st_size))
    return found


class Declined(Exception):
    """The reference tool cannot judge this file (not damage)."""


class TimedOut(Exception):
    pass


def _alarm(*_):
    raise TimedOut()


def drain(f):
    while f.read(1 << 20):
        pass


def reference(kind, path):
    """What the reference tool says: ("ok" | "fail" | "n/a", reason); "-"
    for a file of no kind."""
    if kind == "other":
        return "-", ""
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIMEOUT)
    try:
        ref_check(kind, path)
        return "ok", ""
    except Declined as e:
        return "n/a", str(e)
    except TimedOut:
        return "n/a", f"the reference took over {TIMEOUT:.0f} s"
    except Exception as e:  # every failure of the reader is its verdict
        return "fail", f"{type(e).__name__}: {e}"[:300]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def ref_check(kind, path):
    if kind == "gzip":
        import gzip
        with gzip.open(path) as f:
            drain(f)
    elif kind == "xz":
        import lzma
        with lzma.open(path) as f:
            drain(f)
    elif kind == "bz2":
        import bz2
        with bz2.open(path) as f:
            drain(f)
    elif kind == "zst":
        r = subprocess.run(["zstd", "-t", "-q", path], capture_output=True, timeout=TIMEOUT)
        if r.returncode != 0:
            raise RuntimeError(r.stderr.decode(errors="replace").strip())
    elif kind == "zip":
        import zipfile
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                if info.flag_bits & 1:
                    raise Declined(f"{info.filename}: encrypted")
                if info.compress_type not in (0, 8, 12, 14):
                    raise Declined(f"{info.filename}: compression method {info.compress_type}")
            bad = z.testzip()
            if bad is not None:
                raise RuntimeError(f"testzip: bad CRC in {bad}")
    elif kind == "tar":
        import tarfile
        with tarfile.open(path, "r:") as t:
            for _ in t:
                pass
    elif kind == "json":
        with open(path, "rb") as f:
            json.loads(f.read())
    elif kind == "npy":
        import numpy
        try:
            numpy.load(path, allow_pickle=False)
        except ValueError as e:
            if "allow_pickle" in str(e):  # an object array, or a header over 10 KB
                raise Declined(str(e)[:200])
            raise
    elif kind == "pickle":
        import pickletools
        with open(path, "rb") as f, open(os.devnull, "w") as null:
            pickletools.dis(f, out=null)


def run_pparse(path):
    """(code, wall s, cpu s, problems): code is the exit status, -N for
    signal N, or "timeout"."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.Popen([PPARSE, "tree", "--no-index", "--json", path],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         env={**os.environ, "PPARSE_PROGRESS": "0"})
    try:
        _, err = p.communicate(timeout=TIMEOUT)
        code = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        code = "timeout"
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [l for l in err.decode(errors="replace").splitlines() if not l.startswith("pparse: note:")]
    return code, wall, cpu, " | ".join(lines[:2])[:400]


def check(item):
    kind, path, size = item
    ref, why = reference(kind, path)
    code, wall, cpu, problems = run_pparse(path)
    return kind, path, size, ref, why, code, wall, cpu, problems


def verdict(ref, code):
    if code == "timeout" or code not in (0, 1):
        return "crash"
    if ref in ("ok", "-") and code == 1:
        return "false alarm"
    if ref == "fail" and code == 0:
        return "miss"
    if ref == "fail":
        return "both damaged"
    if ref == "n/a":
        return "n/a"
    return "agree"


def main():
    os.makedirs(OUT, exist_ok=True)
    t0 = time.monotonic()
    items = find(ROOT)
    found_s = time.monotonic() - t0
    # Largest first, so that the last file does not start alone at the end.
    items.sort(key=lambda i: -i[2])
    rows = []
    done = 0
    with Pool(JOBS) as pool:
        for r in pool.imap_unordered(check, items, chunksize=4):
            rows.append(r)
            done += 1
            if done % 1000 == 0:
                print(f"  {done} of {len(items)} files ...", file=sys.stderr)
    sweep_s = time.monotonic() - t0
    rows.sort(key=lambda r: (r[0], r[1]))
    with open(os.path.join(OUT, "sweep.tsv"), "w") as f:
        f.write("kind\tpath\tsize\treference\treference_says\tpparse_exit\twall_s\tcpu_s\tpparse_says\n")
        for kind, path, size, ref, why, code, wall, cpu, problems in rows:
            clean = [str(x).replace("\t", " ").replace("\n", " ") for x in (path, why, problems)]
            f.write(f"{kind}\t{clean[0]}\t{size}\t{ref}\t{clean[1]}\t{code}\t{wall:.3f}\t{cpu:.3f}\t{clean[2]}\n")
    report(rows, found_s, sweep_s)
    bad = sum(1 for r in rows if verdict(r[3], r[5]) in ("false alarm", "miss", "crash") or r[6] > SLOW)
    sys.exit(1 if bad else 0)


def report(rows, found_s, sweep_s):
    print(f"Files found in {found_s:.1f} s; swept in {sweep_s / 60:.1f} min "
          f"({JOBS} at a time, pparse timeout {TIMEOUT:.0f} s).")
    print()
    print("| kind | files | MB | reference ok | reference fails | n/a | pparse exit 0 | exit 1 "
          "| false alarms | misses | over %g s | crashes | slowest pparse |" % SLOW)
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kind in KINDS + ("all",):
        rs = [r for r in rows if kind == "all" or r[0] == kind]
        v = [verdict(r[3], r[5]) for r in rs]
        slowest = max(rs, key=lambda r: r[6], default=None)
        cells = [
            len(rs), f"{sum(r[2] for r in rs) / 1e6:.1f}",
            sum(r[3] == "ok" for r in rs), sum(r[3] == "fail" for r in rs),
            sum(r[3] == "n/a" for r in rs),
            sum(r[5] == 0 for r in rs), sum(r[5] == 1 for r in rs),
            v.count("false alarm"), v.count("miss"), sum(r[6] > SLOW for r in rs),
            v.count("crash"),
            f"{slowest[6]:.2f} s" if slowest else "-",
        ]
        name = "**all**" if kind == "all" else kind
        print(f"| {name} | " + " | ".join(str(c) for c in cells) + " |")
    if OTHERS:
        print()
        print("\"other\": every other regular file; no reference reads it, so pparse exiting 1 "
              "on one is a false alarm (what it reports finding in it by a scan is not there).")
    lists = [
        ("False alarms (the reference reads the file cleanly, or it is of no kind; pparse exits 1)",
         lambda r: verdict(r[3], r[5]) == "false alarm"),
        ("Misses (the reference fails; pparse exits 0)", lambda r: verdict(r[3], r[5]) == "miss"),
        ("Crashes (pparse exits other than 0 or 1, or is killed, or times out)",
         lambda r: verdict(r[3], r[5]) == "crash"),
        (f"Over {SLOW:g} s", lambda r: r[6] > SLOW),
        ("Damaged for both (the reference fails; pparse exits 1)",
         lambda r: verdict(r[3], r[5]) == "both damaged"),
        ("The reference declines (n/a)", lambda r: r[3] == "n/a"),
    ]
    for title, pick in lists:
        rs = [r for r in rows if pick(r)]
        print()
        print(f"**{title}: {len(rs)}**")
        if rs:
            print()
        for kind, path, size, ref, why, code, wall, cpu, problems in rs[:50]:
            print(f"- `{path}` ({kind}, {size:,} B): reference {ref}"
                  + (f" ({why})" if why else "")
                  + f"; pparse exit {code} in {wall:.2f} s (CPU {cpu:.2f} s)"
                  + (f": {problems}" if problems else ""))
        if len(rs) > 50:
            print(f"- ... and {len(rs) - 50} more (see sweep.tsv)")


if __name__ == "__main__":
    main()
