#!/usr/bin/env bash
# Listing the tensors of a ~1 GB safetensors file: pparse beside the
# reference `safetensors` package (safe_open: keys, dtype and shape of each).
#
#   peers/safetensors.sh            # RUNS=5 by default
#   RUNS=9 TENSORS=400 peers/safetensors.sh
#
# Needs python3 with `safetensors` and `numpy` (pip install safetensors numpy).
# The input is made at bench time in $BENCH_DIR (default /tmp/pparse-bench) by
# the real package: $TENSORS F32 tensors of 1,310,720 elements (5 MiB) each,
# 200 by default: 1.05 GB. Both tools run on a warm page cache.
#
# pparse lists the tensors with `pparse tensors FILE --json` when the binary
# has that command; otherwise with `pparse nodes FILE --depth 1` (one node per
# tensor: name, dtype, shape, byte range), and the output says which.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
TENSORS=${TENSORS:-200}
DIR=${BENCH_DIR:-/tmp/pparse-bench}
FILE="$DIR/model-${TENSORS}x5MiB.safetensors"
mkdir -p "$DIR"

cargo build --release --quiet
BIN=target/release/pparse

if [ ! -s "$FILE" ]; then
    echo "making $FILE with the safetensors package ..." >&2
    python3 - "$FILE" "$TENSORS" <<'EOF'
import sys
import numpy as np
from safetensors.numpy import save_file

path, n = sys.argv[1], int(sys.argv[2])
base = np.arange(1310720, dtype=np.float32)
tensors = {f"model.layers.{i // 8}.block{i % 8}.weight": base for i in range(n)}
save_file(tensors, path, metadata={"format": "pt"})
EOF
fi

if "$BIN" --help | grep -q '^  tensors'; then
    PP=("$BIN" tensors "$FILE" --json)
    WHAT="pparse tensors FILE --json"
else
    PP=("$BIN" nodes "$FILE" --depth 1)
    WHAT="pparse nodes FILE --depth 1 (no tensors command in this build)"
fi

python3 - "$RUNS" "$FILE" "$WHAT" "${PP[@]}" <<'EOF'
import os, statistics, subprocess, sys, time

runs, path, what, *pp = sys.argv[1:]
runs = int(runs)
py = [sys.executable, "-c",
      "import sys\n"
      "from safetensors import safe_open\n"
      "with safe_open(sys.argv[1], framework='numpy') as f:\n"
      "    for k in f.keys():\n"
      "        s = f.get_slice(k)\n"
      "        print(k, s.get_dtype(), s.get_shape())\n",
      path]

def timed(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({r.returncode}): {r.stderr.decode()[:500]}")
    return dt, r.stdout

# The package's own listing time, without Python's start-up and imports.
inner = [sys.executable, "-c",
         "import sys, time\n"
         "from safetensors import safe_open\n"
         "t = time.perf_counter()\n"
         "with safe_open(sys.argv[1], framework='numpy') as f:\n"
         "    rows = [(k, f.get_slice(k).get_dtype(), f.get_slice(k).get_shape()) for k in f.keys()]\n"
         "print((time.perf_counter() - t) * 1000)\n",
         path]

# Warm the page cache and check both list the same tensors.
_, out_pp = timed(pp)
_, out_py = timed(py)
n_py = len(out_py.splitlines())
if "--json" in pp:
    import json
    n_pp = len(json.loads(out_pp))
else:
    n_pp = sum(1 for l in out_pp.decode().splitlines() if "  tensor  " in l)
if n_pp != n_py:
    sys.exit(f"pparse listed {n_pp} tensors, the package {n_py}")
pp_times, py_times, inner_times = [], [], []
for _ in range(runs):
    pp_times.append(timed(pp)[0])
    py_times.append(timed(py)[0])
    inner_times.append(float(timed(inner)[1]) / 1000)
m_pp = statistics.median(pp_times) * 1000
m_py = statistics.median(py_times) * 1000
m_in = statistics.median(inner_times) * 1000
size = os.path.getsize(path)
print(f"input: {path} ({size:,} bytes, {n_py} tensors, made by the safetensors package)")
print(f"runs: {runs}, median wall time")
print(f"| tool | median | runs (ms) |")
print(f"|---|---|---|")
print(f"| {what} | {m_pp:.1f} ms | {', '.join(f'{t*1000:.1f}' for t in pp_times)} |")
print(f"| python3 safe_open: keys, get_dtype, get_shape | {m_py:.1f} ms | {', '.join(f'{t*1000:.1f}' for t in py_times)} |")
print(f"| (inside python: safe_open + keys/dtype/shape, no start-up) | {m_in:.1f} ms | {', '.join(f'{t*1000:.1f}' for t in inner_times)} |")
print(f"pparse / python (whole commands): {m_pp / m_py:.3f}x; pparse / the listing alone: {m_pp / m_in:.2f}x")
print("requirement: pparse lists the tensors in under 100 ms:", "met" if m_pp < 100 else "NOT met")
EOF
