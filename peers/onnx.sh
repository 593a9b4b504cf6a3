#!/usr/bin/env bash
# Benchmark: `pparse tensors` on a large ONNX model beside the onnx package's listing of
# its initializers, with the weights inline and in an external data file.
#
# Inputs, generated once into $BENCH_DIR (default /tmp/pparse-bench-onnx) by the onnx
# package (peers/onnx_gen.py, fixed seed; ~1 min) and reused while ONNX_MB and the onnx
# version stay the same:
#   big.onnx              ~$ONNX_MB MiB (1536 by default; protobuf's limit is 2 GiB) written
#                         by onnx.save_model: a chain of MatMul/Add/Mul/Relu layers, widths
#                         384..1024, ~2,500 initializers (FLOAT weights, biases and scales
#                         of seeded normal values, INT64 Reshape shapes), all as raw_data
#   ext/big.onnx          the same model saved with save_as_external_data=True,
#   ext/big.onnx.data     all_tensors_to_one_file=True, location="big.onnx.data"
#
# Timed on each file, warm page cache (the files are read with cat first, and each
# command runs once untimed), outputs to /dev/null:
#   peer:   peers/onnx_list.py FILE: onnx.load(FILE, load_external_data=False), then per
#           initializer its name, data type name, dims and data length
#   pparse: `pparse tensors FILE`, median of PPARSE_RUNS (default 5) runs
# Wall seconds from `date +%s%N`, peak RSS from GNU time (%M). Ratios are peer/pparse
# (above 1: pparse is faster / smaller). The number of tensors in `pparse tensors --json
# FILE` (a JSON array) is checked against the number of initializers; a difference is
# printed as a warning. The Markdown table goes to stdout (and to $OUT if set).
#
# Usage: peers/onnx.sh
#   env: PPARSE=/path/to/pparse (default: cargo build --release, target/release/pparse)
#        ONNX_PYTHON=/tmp/onnx-venv/bin/python (a python with onnx and numpy)
#        ONNX_MB=1536   PPARSE_RUNS=5   BENCH_DIR=/tmp/pparse-bench-onnx   OUT
#        SKIP_PPARSE=1 (generate and time the Python side only; no cargo)
set -euo pipefail

cd "$(dirname "$0")/.."
source peers/lib.sh
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench-onnx}
ONNX_MB=${ONNX_MB:-1536}
ONNX_PYTHON=${ONNX_PYTHON:-/tmp/onnx-venv/bin/python}
PPARSE_RUNS=${PPARSE_RUNS:-5}
SEED=0
mkdir -p "$BENCH_DIR"

if ! ONNX_VERSION=$("$ONNX_PYTHON" -c 'import numpy, onnx; print(onnx.__version__)' 2>/dev/null); then
  echo "peers/onnx.sh: skipped: $ONNX_PYTHON cannot import onnx and numpy" \
       "(set ONNX_PYTHON to a python with them, e.g. a venv with pip install onnx numpy)" >&2
  exit 0
fi
if (( ONNX_MB > 1900 )); then
  echo "peers/onnx.sh: ONNX_MB=$ONNX_MB: an inline model must stay under protobuf's 2 GiB limit (<= 1900)" >&2
  exit 2
fi

find_pparse

# ---- inputs ------------------------------------------------------------------
INLINE=$BENCH_DIR/big.onnx
EXT=$BENCH_DIR/ext/big.onnx
EXT_DATA=$BENCH_DIR/ext/big.onnx.data
META=$BENCH_DIR/onnx.meta   # "ONNX_MB SEED onnx-version initializers N bytes B", written last
if [[ -s $INLINE && -s $EXT && -s $EXT_DATA && -s $META ]] \
   && read -r m_mb m_seed m_ver _ NINIT _ m_bytes < "$META" \
   && [[ $m_mb == "$ONNX_MB" && $m_seed == "$SEED" && $m_ver == "$ONNX_VERSION" \
         && $m_bytes == $(stat -c %s "$INLINE") ]]; then
  echo "reusing $INLINE and $EXT ($NINIT initializers)"
else
  echo "writing $INLINE and $EXT (+ .data) (~$ONNX_MB MiB of weights, onnx $ONNX_VERSION) ..."
  rm -f "$META"
  t0=$(date +%s%N)
  gen=$("$ONNX_PYTHON" peers/onnx_gen.py "$BENCH_DIR" "$ONNX_MB" "$SEED" | tail -1)
  t1=$(date +%s%N)
  echo "$ONNX_MB $SEED $ONNX_VERSION $gen" > "$META"
  read -r _ _ _ _ NINIT _ _ < "$META"
  echo "  $gen, $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b - a) / 1e9 }') s"
fi

# ---- timing ------------------------------------------------------------------
: > "$BENCH_DIR/times"
# warm CMD...: the page cache, and one untimed run.
warm() { "$@" > /dev/null 2>&1 || true; }

HAVE_TENSORS=0
if [[ -n $PPARSE ]] && "$PPARSE" tensors --help > /dev/null 2>&1; then HAVE_TENSORS=1; fi

WARN=()
for v in inline ext; do
  if [[ $v == inline ]]; then f=$INLINE; files=("$INLINE"); else f=$EXT; files=("$EXT" "$EXT_DATA"); fi
  cat "${files[@]}" > /dev/null
  warm "$ONNX_PYTHON" peers/onnx_list.py "$f"
  bench "$v peer" "$ONNX_PYTHON" peers/onnx_list.py "$f"
  n_py=$(awk '$1 == "initializers" { n = $2 } END { print n }' "$BENCH_DIR/err.${v}_peer")
  [[ $n_py == "$NINIT" ]] || WARN+=("$v: onnx lists ${n_py:-no} initializers, the generator wrote $NINIT")
  if (( HAVE_TENSORS )); then
    cat "${files[@]}" > /dev/null
    warm "$PPARSE" tensors "$f"
    median "$v pparse" "$PPARSE_RUNS" "$PPARSE" tensors "$f"
    n_pp=$({ "$PPARSE" tensors --json "$f" 2>/dev/null || true; } \
           | "$ONNX_PYTHON" -c 'import json, sys
try:
    v = json.load(sys.stdin)
    print(len(v) if isinstance(v, list) else "not-a-list")
except ValueError:
    print("bad-json")')
    [[ $n_pp == "$n_py" ]] \
      || WARN+=("$v: \`pparse tensors --json\` lists $n_pp tensors, onnx $n_py initializers")
  fi
done

# ---- report ------------------------------------------------------------------
CMD="${PPARSE_GIVEN:+PPARSE=$PPARSE_GIVEN }ONNX_MB=$ONNX_MB"
[[ $ONNX_PYTHON != /tmp/onnx-venv/bin/python ]] && CMD+=" ONNX_PYTHON=$ONNX_PYTHON"
[[ $PPARSE_RUNS != 5 ]] && CMD+=" PPARSE_RUNS=$PPARSE_RUNS"
[[ -n ${SKIP_PPARSE:-} ]] && CMD+=" SKIP_PPARSE=1"
CMD+=" peers/onnx.sh"
{
  echo "## pparse tensors: a ${ONNX_MB} MiB ONNX model ($(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo
  echo "- \`big.onnx\`: $(stat -c %s "$INLINE") bytes, $NINIT initializers inline (raw_data), written by onnx $ONNX_VERSION \`save_model\` (peers/onnx_gen.py, seed $SEED)"
  echo "- \`ext/big.onnx\`: $(stat -c %s "$EXT") bytes + \`big.onnx.data\` $(stat -c %s "$EXT_DATA") bytes, the same model with \`save_as_external_data=True, all_tensors_to_one_file=True\`"
  no_pparse_note "$HAVE_TENSORS" "pparse tensors"
  warnings "${WARN[@]}"
  "$ONNX_PYTHON" - "$BENCH_DIR/times" <<'EOF'
import sys
sys.path.insert(0, "bench")
from times import cells, ratios
cell = cells(sys.argv[1])
print("| input | `onnx.load(load_external_data=False)` + listing: wall | peak RSS "
      "| `pparse tensors`: wall | peak RSS | time peer/pparse | RSS peer/pparse |")
print("|---|---|---|---|---|---|---|")
for v, label in (("inline", "`big.onnx` (weights inline)"), ("ext", "`ext/big.onnx` (+ `big.onnx.data`)")):
    pw, pr, _, _ = cell(f"{v} peer")
    qw, qr, _, _ = cell(f"{v} pparse")
    tr, mr = ratios(cell(f"{v} peer"), cell(f"{v} pparse"))
    print(f"| {label} | {pw} | {pr} | {qw} | {qr} | {tr} | {mr} |")
runs = [k for k in rows if " pparse run" in k]
if runs:
    print()
    print("pparse runs (wall s / peak RSS KiB): " + "; ".join(
        f"{k.replace(' pparse run', ' #')}: {rows[k][0]}/{rows[k][1]}" for k in runs))
EOF
  echo
  echo "Warm page cache; the peer: one run after an untimed one; pparse: median of $PPARSE_RUNS after an untimed one;" \
       "outputs to /dev/null; ratios above 1 mean pparse is faster / smaller." \
       "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(free -g | awk '/Mem:/{print $2}') GiB RAM."
  echo "Tools: $( [[ -n $PPARSE ]] && { "$PPARSE" --version 2>/dev/null || echo "pparse (no --version)"; } || echo "pparse not run"), onnx $ONNX_VERSION, protobuf $("$ONNX_PYTHON" -c 'import google.protobuf as p; from google.protobuf.internal import api_implementation as a; print(p.__version__, "(" + a.Type() + ")")'), $("$ONNX_PYTHON" --version)."
  echo
  echo "Reproduce: \`$CMD\`"
} | tee ${OUT:+"$OUT"}
