#!/usr/bin/env bash
# Listing the arrays of a ~1 GB .npz (numpy.savez, stored members): pparse
# beside numpy itself.
#
#   peers/npy.sh                    # RUNS=5 by default
#   RUNS=9 ARRAYS=400 peers/npy.sh
#
# Needs python3 with numpy. The input is made at bench time in $BENCH_DIR
# (default /tmp/pparse-bench) by numpy.savez: $ARRAYS float32 arrays of
# 1,310,720 elements (5 MiB) each, 200 by default: 1.05 GB. Both tools run on
# a warm page cache.
#
# The peer is numpy's lazy way to list an archive without loading the arrays:
# numpy.load (an NpzFile: the zip directory) and, per member, the .npy magic
# and header (numpy.lib.format.read_magic / read_array_header_1_0) read
# through the zip, for the dtype and shape. `numpy.load(f)[name]` would read
# all 1 GB.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
ARRAYS=${ARRAYS:-200}
DIR=${BENCH_DIR:-/tmp/pparse-bench}
FILE="$DIR/arrays-${ARRAYS}x5MiB.npz"
mkdir -p "$DIR"

cargo build --release --quiet
BIN=target/release/pparse

if [ ! -s "$FILE" ]; then
    echo "making $FILE with numpy.savez ..." >&2
    python3 - "$FILE" "$ARRAYS" <<'EOF'
import sys
import numpy as np

path, n = sys.argv[1], int(sys.argv[2])
base = np.arange(1310720, dtype=np.float32).reshape(1280, 1024)
np.savez(path, **{f"layer{i // 8}.block{i % 8}.weight": base for i in range(n)})
EOF
fi

python3 - "$RUNS" "$FILE" "$BIN" <<'EOF'
import os, statistics, subprocess, sys, time, json

runs, path, binary = sys.argv[1:]
runs = int(runs)
pp = [binary, "tensors", path, "--json"]
LIST = (
    "import numpy as np\n"
    "from numpy.lib import format as fmt\n"
    "def listing(path):\n"
    "    rows = []\n"
    "    with np.load(path) as z:\n"
    "        for k in z.files:\n"
    "            with z.zip.open(k + '.npy') as f:\n"
    "                fmt.read_magic(f)\n"
    "                shape, fortran, dtype = fmt.read_array_header_1_0(f)\n"
    "            rows.append((k, dtype.str, shape))\n"
    "    return rows\n"
)
py = [sys.executable, "-c", LIST + "import sys\nfor r in listing(sys.argv[1]): print(*r)\n", path]
inner = [sys.executable, "-c", LIST + "import sys, time\nt = time.perf_counter()\nlisting(sys.argv[1])\nprint((time.perf_counter() - t) * 1000)\n", path]

def timed(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}): {r.stderr.decode()[:500]}")
    return dt, r.stdout

_, out_pp = timed(pp)
_, out_py = timed(py)
got = [(t["name"], t["shape"]) for t in json.loads(out_pp)]
want = [(l.split()[0], None) for l in out_py.decode().splitlines()]
if [g[0] for g in got] != [w[0] for w in want]:
    sys.exit(f"pparse listed {len(got)} arrays, numpy {len(want)}, or other names")
pp_times, py_times, inner_times = [], [], []
for _ in range(runs):
    pp_times.append(timed(pp)[0])
    py_times.append(timed(py)[0])
    inner_times.append(float(timed(inner)[1]) / 1000)
m_pp = statistics.median(pp_times) * 1000
m_py = statistics.median(py_times) * 1000
m_in = statistics.median(inner_times) * 1000
size = os.path.getsize(path)
print(f"input: {path} ({size:,} bytes, {len(want)} arrays, made by numpy.savez)")
print(f"runs: {runs}, median wall time")
print("| tool | median | runs (ms) |")
print("|---|---|---|")
print(f"| pparse tensors FILE --json | {m_pp:.1f} ms | {', '.join(f'{t*1000:.1f}' for t in pp_times)} |")
print(f"| python3: numpy.load + each member's .npy header | {m_py:.1f} ms | {', '.join(f'{t*1000:.1f}' for t in py_times)} |")
print(f"| (inside python: the listing alone, no start-up) | {m_in:.1f} ms | {', '.join(f'{t*1000:.1f}' for t in inner_times)} |")
print(f"pparse / python (whole commands): {m_pp / m_py:.3f}x; pparse / the listing alone: {m_pp / m_in:.2f}x")
print("requirement: pparse lists the arrays in under 100 ms:", "met" if m_pp < 100 else "NOT met")
EOF
