#!/usr/bin/env bash
# Listing the arrays of a ~1 GB Flax checkpoint (flax.serialization.
# msgpack_serialize): pparse beside flax and msgpack themselves.
#
#   peers/msgpack.sh                    # RUNS=5 by default
#   RUNS=9 ARRAYS=400 peers/msgpack.sh
#
# Needs python3 with flax (and so jax, numpy, msgpack). The input is made at
# bench time in $BENCH_DIR (default /tmp/pparse-bench) by flax: a state dict
# of $ARRAYS float32 arrays of 1,310,720 elements (5 MiB) each, 200 by
# default: 1.05 GB. Every tool runs on a warm page cache.
#
# MessagePack has no index: a reader finds an array only by reading what is
# before it. flax.serialization.msgpack_restore reads the whole file into
# arrays; msgpack.unpackb without flax's ext hook stops at the ext values
# (it still copies every array's bytes into an ExtType). Both are timed as
# the listing a Python user would write: the names, dtypes and shapes.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-5}
ARRAYS=${ARRAYS:-200}
DIR=${BENCH_DIR:-/tmp/pparse-bench}
FILE="$DIR/flax-${ARRAYS}x5MiB.msgpack"
mkdir -p "$DIR"

cargo build --release --quiet
BIN=target/release/pparse

if [ ! -s "$FILE" ]; then
    echo "making $FILE with flax.serialization.msgpack_serialize ..." >&2
    python3 - "$FILE" "$ARRAYS" <<'EOF'
import sys
import numpy as np
from flax import serialization

path, n = sys.argv[1], int(sys.argv[2])
base = np.arange(1310720, dtype=np.float32).reshape(1280, 1024)
state = {"params": {f"layer{i // 8}": {} for i in range(n)}}
for i in range(n):
    state["params"][f"layer{i // 8}"][f"block{i % 8}"] = {"kernel": base}
with open(path, "wb") as f:
    f.write(serialization.msgpack_serialize(state))
EOF
fi

python3 - "$RUNS" "$FILE" "$BIN" <<'EOF'
import json, os, statistics, subprocess, sys, time

runs, path, binary = sys.argv[1:]
runs = int(runs)
pp = [binary, "tensors", path, "--json"]
FLAX = (
    "import sys\n"
    "from flax import serialization, traverse_util\n"
    "def listing(path):\n"
    "    with open(path, 'rb') as f:\n"
    "        tree = serialization.msgpack_restore(f.read())\n"
    "    return [(k, v.dtype.name, v.shape) for k, v in traverse_util.flatten_dict(tree, sep='/').items()]\n"
)
RAW = (
    "import sys, msgpack\n"
    "def walk(x, path, out):\n"
    "    if isinstance(x, dict):\n"
    "        for k, v in x.items(): walk(v, path + [str(k)], out)\n"
    "    elif isinstance(x, msgpack.ExtType) and x.code in (1, 3):\n"
    "        shape, dtype, _ = msgpack.unpackb(x.data)\n"
    "        out.append(('/'.join(path), dtype, tuple(shape)))\n"
    "    return out\n"
    "def listing(path):\n"
    "    with open(path, 'rb') as f:\n"
    "        return walk(msgpack.unpackb(f.read(), strict_map_key=False), [], [])\n"
)
PRINT = "for r in listing(sys.argv[1]): print(*r)\n"
flax = [sys.executable, "-c", FLAX + PRINT, path]
raw = [sys.executable, "-c", RAW + PRINT, path]

def timed(cmd):
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        sys.exit(f"{cmd[:3]} failed ({r.returncode}): {r.stderr.decode()[-500:]}")
    return dt, r.stdout

_, out_pp = timed(pp)
_, out_fx = timed(flax)
_, out_raw = timed(raw)
got = [t["name"] for t in json.loads(out_pp)]
want = [l.split()[0] for l in out_fx.decode().splitlines()]
also = [l.split()[0] for l in out_raw.decode().splitlines()]
if got != want or got != also:
    sys.exit(f"pparse listed {len(got)} arrays, flax {len(want)}, msgpack {len(also)}, or other names")
times = {"pp": [], "flax": [], "raw": []}
for _ in range(runs):
    times["pp"].append(timed(pp)[0])
    times["flax"].append(timed(flax)[0])
    times["raw"].append(timed(raw)[0])
med = {k: statistics.median(v) * 1000 for k, v in times.items()}
row = lambda k: ", ".join(f"{t * 1000:.1f}" for t in times[k])
size = os.path.getsize(path)
print(f"input: {path} ({size:,} bytes, {len(want)} arrays, made by flax.serialization.msgpack_serialize)")
print(f"runs: {runs}, median wall time")
print("| tool | median | runs (ms) |")
print("|---|---|---|")
print(f"| pparse tensors FILE --json | {med['pp']:.1f} ms | {row('pp')} |")
print(f"| python3: flax.serialization.msgpack_restore + flatten_dict | {med['flax']:.1f} ms | {row('flax')} |")
print(f"| python3: msgpack.unpackb, ext headers read | {med['raw']:.1f} ms | {row('raw')} |")
print(f"pparse / flax: {med['pp'] / med['flax']:.3f}x; pparse / msgpack: {med['pp'] / med['raw']:.3f}x")
print("requirement: pparse lists the arrays in under 100 ms:", "met" if med["pp"] < 100 else "NOT met")
EOF
