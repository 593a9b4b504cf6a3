#!/usr/bin/env bash
# Listing the tensors of a ~1 GB GGUF model: pparse beside the gguf
# package's GGUFReader.
#
#   peers/gguf.sh                   # RUNS=5 by default
#   RUNS=9 TENSORS=400 peers/gguf.sh
#
# Needs python3 with numpy and gguf (pip install gguf). The input is made at
# bench time in $BENCH_DIR (default /tmp/pparse-bench) by GGUFWriter: a
# tokenizer-sized metadata array (32,000 strings) and $TENSORS Q8_0 tensors
# of 4,718,592 elements (5,013,504 bytes) each, 200 by default: 1.0 GB. Both
# tools run on a warm page cache.
#
# The peer is GGUFReader(path) (it maps the file and reads the header; the
# tensors' data are numpy views, not read) and, per tensor, its name, type
# and shape.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
TENSORS=${TENSORS:-200}
DIR=${BENCH_DIR:-/tmp/pparse-bench}
FILE="$DIR/model-${TENSORS}xQ8_0.gguf"
mkdir -p "$DIR"

cargo build --release --quiet
BIN=target/release/pparse

if [ ! -s "$FILE" ]; then
    echo "making $FILE with GGUFWriter ..." >&2
    python3 - "$FILE" "$TENSORS" <<'EOF'
import sys
import numpy as np
import gguf

path, n = sys.argv[1], int(sys.argv[2])
q = gguf.GGMLQuantizationType.Q8_0
x = np.linspace(-1, 1, 4718592, dtype=np.float32).reshape(1152, 4096)
blocks = gguf.quants.quantize(x, q)
w = gguf.GGUFWriter(path, "llama")
w.add_array("tokenizer.ggml.tokens", [f"token{i}" for i in range(32000)])
for i in range(n):
    w.add_tensor(f"blk.{i // 8}.ffn_{i % 8}.weight", blocks, raw_dtype=q)
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
EOF
fi

python3 - "$RUNS" "$FILE" "$BIN" <<'EOF'
import os, statistics, subprocess, sys, time, json

runs, path, binary = sys.argv[1:]
runs = int(runs)
pp = [binary, "tensors", path, "--json"]
LIST = (
    "from gguf import GGUFReader\n"
    "def listing(path):\n"
    "    r = GGUFReader(path)\n"
    "    return [(t.name, t.tensor_type.name, list(t.shape)) for t in r.tensors]\n"
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
got = [t["name"] for t in json.loads(out_pp)]
want = [l.split()[0] for l in out_py.decode().splitlines()]
if got != want:
    sys.exit(f"pparse listed {len(got)} tensors, gguf {len(want)}, or other names")
pp_times, py_times, inner_times = [], [], []
for _ in range(runs):
    pp_times.append(timed(pp)[0])
    py_times.append(timed(py)[0])
    inner_times.append(float(timed(inner)[1]) / 1000)
m_pp = statistics.median(pp_times) * 1000
m_py = statistics.median(py_times) * 1000
m_in = statistics.median(inner_times) * 1000
size = os.path.getsize(path)
print(f"input: {path} ({size:,} bytes, {len(want)} tensors, made by GGUFWriter)")
print(f"runs: {runs}, median wall time")
print("| tool | median | runs (ms) |")
print("|---|---|---|")
print(f"| pparse tensors FILE --json | {m_pp:.1f} ms | {', '.join(f'{t*1000:.1f}' for t in pp_times)} |")
print(f"| python3: GGUFReader + each tensor's name, type, shape | {m_py:.1f} ms | {', '.join(f'{t*1000:.1f}' for t in py_times)} |")
print(f"| (inside python: the listing alone, no start-up) | {m_in:.1f} ms | {', '.join(f'{t*1000:.1f}' for t in inner_times)} |")
print(f"pparse / python (whole commands): {m_pp / m_py:.3f}x; pparse / the listing alone: {m_pp / m_in:.2f}x")
print("requirement: pparse lists the tensors in under 100 ms:", "met" if m_pp < 100 else "NOT met")
EOF
