#!/usr/bin/env bash
# Benchmark: `pparse tensors` on a large ONNX model beside the onnx package's listing of
# its initializers, with the weights inline and in an external data file.
#
# Inputs, generated once into $BENCH_DIR (default /tmp/pparse-bench-onnx) by the onnx
# package (bench/onnx_gen.py, fixed seed; ~1 min) and reused while ONNX_MB and the onnx
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
#   peer:   bench/onnx_list.py FILE: onnx.load(FILE, load_external_data=False), then per
#           initializer its name, data type name, dims and data length
#   pparse: `pparse tensors FILE`, median of PPARSE_RUNS (default 5) runs
# Wall seconds from `date +%s%N`, peak RSS from GNU time (%M). Ratios are peer/pparse
# (above 1: pparse is faster / smaller). The number of tensors in `pparse tensors --json
# FILE` (a JSON array) is checked against the number of initializers; a difference is
# printed as a warning. The Markdown table goes to stdout (and to $OUT if set).
#
# Usage: bench/onnx.sh
#   env: PPARSE=/path/to/pparse (default: cargo build --release, target/release/pparse)
#        ONNX_PYTHON=/tmp/onnx-venv/bin/python (a python with onnx and numpy)
#        ONNX_MB=1536   PPARSE_RUNS=5   BENCH_DIR=/tmp/pparse-bench-onnx   OUT
#        SKIP_PPARSE=1 (generate and time the Python side only; no cargo)
set -euo pipefail

cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench-onnx}
ONNX_MB=${ONNX_MB:-1536}
ONNX_PYTHON=${ONNX_PYTHON:-/tmp/onnx-venv/bin/python}
PPARSE_RUNS=${PPARSE_RUNS:-5}
SEED=0
mkdir -p "$BENCH_DIR"

if ! ONNX_VERSION=$("$ONNX_PYTHON" -c 'import numpy, onnx; print(onnx.__version__)' 2>/dev/null); then
  echo "bench/onnx.sh: skipped: $ONNX_PYTHON cannot import onnx and numpy" \
       "(set ONNX_PYTHON to a python with them, e.g. a venv with pip install onnx numpy)" >&2
  exit 0
fi
if (( ONNX_MB > 1900 )); then
  echo "bench/onnx.sh: ONNX_MB=$ONNX_MB: an inline model must stay under protobuf's 2 GiB limit (<= 1900)" >&2
  exit 2
fi

PPARSE_GIVEN=${PPARSE:-}
if [[ -n ${SKIP_PPARSE:-} ]]; then
  PPARSE=
elif [[ -z $PPARSE_GIVEN ]]; then
  cargo build --release --quiet
  PPARSE=$PWD/target/release/pparse
fi

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
  gen=$("$ONNX_PYTHON" bench/onnx_gen.py "$BENCH_DIR" "$ONNX_MB" "$SEED" | tail -1)
  t1=$(date +%s%N)
  echo "$ONNX_MB $SEED $ONNX_VERSION $gen" > "$META"
  read -r _ _ _ _ NINIT _ _ < "$META"
  echo "  $gen, $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b - a) / 1e9 }') s"
fi

# ---- timing ------------------------------------------------------------------
: > "$BENCH_DIR/times"
# bench NAME CMD...: one run under GNU time; appends "NAME<TAB>wall<TAB>rss_kib<TAB>status",
# keeps the run's stderr in $BENCH_DIR/err.NAME.
bench() {
  local name=$1; shift
  local rc=0 err=$BENCH_DIR/err.${name// /_}
  echo "  $name ..." >&2
  local t0 t1
  t0=$(date +%s%N)
  /usr/bin/time -o "$BENCH_DIR/t" -f '%e %M' "$@" > /dev/null 2> "$err" || rc=$?
  t1=$(date +%s%N)
  if (( rc > 1 )); then   # pparse: 1 = partial results, still a timing
    printf '%s\t-\t-\t%s\n' "$name" "exit $rc: $(head -c 200 "$err" | tr '\n\t' '  ')" >> "$BENCH_DIR/times"
  else
    read -r _ rss < <(tail -1 "$BENCH_DIR/t")
    wall=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
    printf '%s\t%s\t%s\t%s\n' "$name" "$wall" "$rss" "exit $rc" >> "$BENCH_DIR/times"
  fi
}
# warm CMD...: the page cache, and one untimed run.
warm() { "$@" > /dev/null 2>&1 || true; }

HAVE_TENSORS=0
if [[ -n $PPARSE ]] && "$PPARSE" tensors --help > /dev/null 2>&1; then HAVE_TENSORS=1; fi

WARN=()
for v in inline ext; do
  if [[ $v == inline ]]; then f=$INLINE; files=("$INLINE"); else f=$EXT; files=("$EXT" "$EXT_DATA"); fi
  cat "${files[@]}" > /dev/null
  warm "$ONNX_PYTHON" bench/onnx_list.py "$f"
  bench "$v peer" "$ONNX_PYTHON" bench/onnx_list.py "$f"
  n_py=$(awk '$1 == "initializers" { n = $2 } END { print n }' "$BENCH_DIR/err.${v}_peer")
  [[ $n_py == "$NINIT" ]] || WARN+=("$v: onnx lists ${n_py:-no} initializers, the generator wrote $NINIT")
  if (( HAVE_TENSORS )); then
    cat "${files[@]}" > /dev/null
    warm "$PPARSE" tensors "$f"
    for ((i = 1; i <= PPARSE_RUNS; i++)); do bench "$v pparse run$i" "$PPARSE" tensors "$f"; done
    sort -t$'\t' -k2,2n <(grep "^$v pparse run" "$BENCH_DIR/times") | sed -n "$(( (PPARSE_RUNS + 1) / 2 ))p" \
      | sed "s/^$v pparse run[0-9]*/$v pparse/" >> "$BENCH_DIR/times"
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
CMD+=" bench/onnx.sh"
{
  echo "## pparse tensors: a ${ONNX_MB} MiB ONNX model ($(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo
  echo "- \`big.onnx\`: $(stat -c %s "$INLINE") bytes, $NINIT initializers inline (raw_data), written by onnx $ONNX_VERSION \`save_model\` (bench/onnx_gen.py, seed $SEED)"
  echo "- \`ext/big.onnx\`: $(stat -c %s "$EXT") bytes + \`big.onnx.data\` $(stat -c %s "$EXT_DATA") bytes, the same model with \`save_as_external_data=True, all_tensors_to_one_file=True\`"
  if [[ -n ${SKIP_PPARSE:-} ]]; then
    echo "- SKIP_PPARSE=1: the Python side only"
  elif (( ! HAVE_TENSORS )); then
    echo "- \`pparse tensors\` is not available in this binary: no pparse timing"
  fi
  echo
  for w in "${WARN[@]}"; do echo "**WARNING: $w**"; echo; done
  "$ONNX_PYTHON" - "$BENCH_DIR/times" <<'EOF'
import sys
rows = {}
for line in open(sys.argv[1]):
    name, wall, rss, status = line.rstrip("\n").split("\t")
    rows[name] = (wall, rss, status)
def x(r):
    return f"{r:.0f}x" if r >= 10 else f"{r:.2f}x"
def cell(name):
    if name not in rows:
        return "n/a", "n/a", None, None
    wall, rss, status = rows[name]
    if wall == "-":
        return f"failed ({status})", "-", None, None
    w = float(wall)
    shown = f"{w:.2f} s" if w >= 1 else f"{w * 1000:.1f} ms"
    return shown, f"{int(rss) / 1024:.0f} MiB", w, int(rss)
print("| input | `onnx.load(load_external_data=False)` + listing: wall | peak RSS "
      "| `pparse tensors`: wall | peak RSS | time peer/pparse | RSS peer/pparse |")
print("|---|---|---|---|---|---|---|")
for v, label in (("inline", "`big.onnx` (weights inline)"), ("ext", "`ext/big.onnx` (+ `big.onnx.data`)")):
    pw, pr, pv, pm = cell(f"{v} peer")
    qw, qr, qv, qm = cell(f"{v} pparse")
    tr = f"**{x(pv / qv)}**" if pv and qv else "n/a"
    mr = f"{x(pm / qm)}" if pm and qm else "n/a"
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
