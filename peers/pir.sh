#!/usr/bin/env bash
# Reading a printed Paddle program of a million ops, beside Paddle printing.
#
# Needs a Python with paddlepaddle (PYTHON=/path/to/venv/bin/python) and a
# release build (cargo build --release). Paddle builds a real program of
# ITER blocks (Linear, LayerNorm, GELU, a residual: 7 ops each) and prints
# it, timed; peers/pir_grow.py repeats its ops, renumbered, to OPS ops; then
# pparse reads the grown text three ways, timed, with its peak memory.
# Paddle itself cannot read the text back (it deleted its reader in 3.0),
# and building a million-op program in Paddle takes about a millisecond per
# op, so Paddle's figure is its printing rate on the program it built.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
ITER=${ITER:-1000}
OPS=${OPS:-1000000}
DIR=${BENCH_DIR:-/tmp/pparse-bench}
BIN=${BIN:-target/release/pparse}
mkdir -p "$DIR"

"$PYTHON" - "$ITER" "$DIR/real.txt" <<'EOF' 2>/dev/null
import sys, time
import paddle
paddle.enable_static()
n, out = int(sys.argv[1]), sys.argv[2]
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    x = paddle.static.data("x", [-1, 16], "float32")
    lin, ln = paddle.nn.Linear(16, 16), paddle.nn.LayerNorm(16)
    y = x
    for _ in range(n):
        y = paddle.nn.functional.gelu(ln(lin(y))) * 0.5 + y
best = None
for _ in range(5):
    t = time.perf_counter()
    text = str(main)
    dt = time.perf_counter() - t
    best = dt if best is None else min(best, dt)
open(out, "w").write(text)
mb = len(text.encode()) / 1e6
ops = sum(1 for l in text.splitlines() if l.lstrip().startswith("("))
print(f"paddle {paddle.__version__} print(program): {ops} ops, {mb:.1f} MB in {best*1e3:.1f} ms "
      f"= {mb/best:.0f} MB/s", file=sys.__stdout__)
EOF

python3 peers/pir_grow.py "$DIR/real.txt" "$DIR/grown.txt" "$OPS"
size=$(stat -c %s "$DIR/grown.txt")
echo "grown: $(numfmt --to=iec "$size") ($size bytes)"
for mode in "--stats" "" "--json"; do
  # Best of three, with the peak resident memory of that run.
  best=""
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$DIR/time.txt" "$BIN" ir "$DIR/grown.txt" $mode > /dev/null
    read -r secs kb < "$DIR/time.txt"
    if [ -z "$best" ] || awk "BEGIN{exit !($secs < $best)}"; then best=$secs; mem=$kb; fi
  done
  rate=$(awk "BEGIN{printf \"%.0f\", $size / 1e6 / $best}")
  echo "pparse ir ${mode:-(printer form)}: ${best} s = ${rate} MB/s, peak $((mem / 1024)) MiB"
done
