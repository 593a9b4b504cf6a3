#!/usr/bin/env bash
# Listing every dataset of a ~1 GB HDF5 file of 10,000 datasets: pparse
# beside h5py visiting every item (name, dtype, shape of each dataset) and
# `h5ls -r` (Debian's hdf5-tools), when it is installed.
#
#   peers/hdf5.sh                   # RUNS=5, DATASETS=10000
#   RUNS=9 LIBVER=latest peers/hdf5.sh
#
# Needs python3 with h5py and numpy (pip install h5py numpy). The input is
# made at bench time in $BENCH_DIR (default /tmp/pparse-bench) by h5py:
# $DATASETS contiguous f32 datasets of 25,600 elements (100 KiB) each, in
# groups of 100 (`g0042/d004217`), written with libver=$LIBVER (h5py's
# default, "earliest": symbol tables and v1 B-trees; "latest": link
# messages and dense groups). Every tool runs on a warm page cache, and
# pparse without an index (each run parses the file).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
DATASETS=${DATASETS:-10000}
LIBVER=${LIBVER:-earliest}
DIR=${BENCH_DIR:-/tmp/pparse-bench}
FILE="$DIR/h5-${DATASETS}x100KiB-$LIBVER.h5"
mkdir -p "$DIR"

cargo build --release --quiet
BIN=target/release/pparse

if [ ! -s "$FILE" ]; then
    echo "making $FILE with h5py ..." >&2
    python3 - "$FILE" "$DATASETS" "$LIBVER" <<'PY'
import sys
import h5py
import numpy as np

path, n, libver = sys.argv[1], int(sys.argv[2]), sys.argv[3]
base = np.arange(25600, dtype="<f4")
with h5py.File(path, "w", libver=libver) as f:
    for i in range(n):
        f.create_dataset(f"g{i // 100:04d}/d{i:06d}", data=base + i)
PY
fi

python3 - "$RUNS" "$FILE" "$BIN" <<'PY'
import shutil, statistics, subprocess, sys, time

runs, path, pparse = int(sys.argv[1]), sys.argv[2], sys.argv[3]
h5py_list = [sys.executable, "-c",
    "import sys, h5py\n"
    "rows = []\n"
    "def visit(name, obj):\n"
    "    if isinstance(obj, h5py.Dataset):\n"
    "        rows.append((name, obj.dtype.str, obj.shape, obj.id.get_offset()))\n"
    "with h5py.File(sys.argv[1], 'r') as f:\n"
    "    f.visititems(visit)\n"
    "print(len(rows))\n",
    path]
tools = [
    ("pparse tensors --json", [pparse, "tensors", "--no-index", path, "--json"]),
    ("pparse tree", [pparse, "tree", "--no-index", path]),
    ("h5py visititems", h5py_list),
]
if shutil.which("h5ls"):
    tools.append(("h5ls -r", ["h5ls", "-r", path]))

with open(path, "rb") as f:  # a warm page cache for everyone
    while f.read(1 << 24):
        pass

def timed(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}): {r.stderr.decode()[:500]}")
    return dt, r.stdout

counts = {}
times = {}
for name, cmd in tools:
    ts = []
    for _ in range(runs):
        dt, out = timed(cmd)
        ts.append(dt)
    times[name] = statistics.median(ts)
    counts[name] = out
n_pp = counts["pparse tensors --json"].count(b"\"name\"")
n_py = int(counts["h5py visititems"])
print(f"file: {path} ({__import__('os').path.getsize(path) / 1e9:.2f} GB), {n_py} datasets; median of {runs} runs, warm cache")
print()
print("| tool | wall s | vs pparse tensors |")
print("|---|---|---|")
base = times["pparse tensors --json"]
for name, _ in tools:
    print(f"| {name} | {times[name]:.3f} | {times[name] / base:.2f}x |")
print()
print(f"- pparse listed {n_pp} tensors, h5py {n_py} datasets")
if n_pp != n_py:
    sys.exit("the counts differ")
if not shutil.which("h5ls"):
    print("- h5ls not installed (Debian: apt install hdf5-tools): not timed")
PY
