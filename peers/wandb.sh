#!/usr/bin/env bash
# Benchmark: `pparse records` on a large W&B log (.wandb) beside the wandb SDK's own
# Python reader.
#
# Input, generated once into $BENCH_DIR (default /tmp/pparse-bench-wandb) and reused
# while WANDB_MB and the wandb version stay the same:
#   run-bench0001.wandb  ~$WANDB_MB MiB (300 by default) written by wandb's own writer,
#                        `wandb.sdk.internal.datastore.DataStore` (0.17.5 by default),
#                        records built with `wandb.proto.wandb_internal_pb2`: header, run,
#                        telemetry, config, metric, files, then ~87% history (20 items,
#                        a step), output_raw lines, stats, summary, about one record in
#                        1,500 of 50-100 kB (FIRST/MIDDLE/LAST chunks), exit.
#                        Fixed seed: peers/wandb_gen.py (~1 min for 300 MiB).
#
# Timed, one run each on a warm page cache, outputs to /dev/null (peers/wandb_read.py):
#   (a) `wandb_read.py count`: DataStore().open_for_scan, scan_data() until None,
#       Record().ParseFromString, counts per WhichOneof("record_type")
#   (b) `wandb_read.py json`: the same + MessageToDict(preserving_proto_field_name=True)
#       and json.dumps, one line per record
#   (c) `pparse records --count FILE`  beside (a): the same work, every record read,
#       checked and counted per type
#   (d) `pparse records FILE`          beside (a): besides, a one-line summary per record
#   (e) `pparse records --json FILE`   beside (b) (pparse turns the key/value_json item
#       lists into objects of decoded values; (b) prints MessageToDict as it is)
# Python: one run each; pparse: the median of PPARSE_RUNS (default 5) runs.
# Wall seconds from `date +%s%N`, peak RSS from GNU time (%M). Ratios are peer/pparse
# (above 1: pparse is faster / smaller). The record count of (a) is checked against
# `pparse records FILE | wc -l`; a difference is printed as a warning.
# The Markdown table goes to stdout (and to $OUT if set).
#
# Usage: peers/wandb.sh
#   env: PPARSE=/path/to/pparse (default: cargo build --release, target/release/pparse)
#        WANDB_PYTHON=/tmp/wandb-0175/bin/python (a python with wandb, 0.17.x: it has
#          wandb.sdk.internal.datastore; it writes the input and is the peer)
#        WANDB_MB=300   PPARSE_RUNS=5   BENCH_DIR=/tmp/pparse-bench-wandb   OUT
#        SKIP_PPARSE=1 (generate and time the Python side only; no cargo)
set -euo pipefail

cd "$(dirname "$0")/.."
source peers/lib.sh
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench-wandb}
WANDB_DIR_BENCH=$BENCH_DIR
WANDB_MB=${WANDB_MB:-300}
WANDB_PYTHON=${WANDB_PYTHON:-/tmp/wandb-0175/bin/python}
PPARSE_RUNS=${PPARSE_RUNS:-5}
SEED=0
mkdir -p "$BENCH_DIR"

if ! WANDB_VERSION=$("$WANDB_PYTHON" -c '
import wandb, wandb.proto.wandb_internal_pb2, wandb.sdk.internal.datastore
print(wandb.__version__)' 2>/dev/null); then
  echo "peers/wandb.sh: skipped: $WANDB_PYTHON cannot import wandb.sdk.internal.datastore" \
       "(set WANDB_PYTHON to a python with wandb 0.17.x, e.g. a venv with pip install wandb==0.17.5)" >&2
  exit 0
fi

find_pparse

# ---- input -------------------------------------------------------------------
wandb_log

# ---- timing ------------------------------------------------------------------
: > "$BENCH_DIR/times"
WARM=$F   # every run on a warm page cache

HAVE_RECORDS=0
if [[ -n $PPARSE ]] && "$PPARSE" records --help > /dev/null 2>&1; then HAVE_RECORDS=1; fi


bench "py count" "$WANDB_PYTHON" peers/wandb_read.py count "$F"
if (( HAVE_RECORDS )); then
  median "pp count" "$PPARSE_RUNS" "$PPARSE" records --count "$F"
  median "pp records" "$PPARSE_RUNS" "$PPARSE" records "$F"
fi
bench "py json" "$WANDB_PYTHON" peers/wandb_read.py json "$F"
if (( HAVE_RECORDS )); then median "pp json" "$PPARSE_RUNS" "$PPARSE" records --json "$F"; fi

WARN=()
PY_COUNT=$(awk '$1 == "records" { n = $2 } END { print n }' "$BENCH_DIR/err.py_count")
[[ $PY_COUNT == "$NREC" ]] || WARN+=("the Python reader counts ${PY_COUNT:-no} records, the writer wrote $NREC")
if (( HAVE_RECORDS )); then
  PP_COUNT=$({ "$PPARSE" records "$F" 2>/dev/null || true; } | wc -l)
  [[ $PP_COUNT == "$PY_COUNT" ]] \
    || WARN+=("\`pparse records\` prints $PP_COUNT lines, the wandb reader counts $PY_COUNT records")
  # The counts per type of (a) and of `--count` must be the same.
  "$WANDB_PYTHON" peers/wandb_read.py count "$F" 2>/dev/null | awk '$1 != "records" { print $2, $1 }' | sort > "$BENCH_DIR/py.types"
  { "$PPARSE" records --count "$F" 2>/dev/null || true; } | awk '$2 != "records" && $2 != "damaged" { print $1, $2 }' | sort > "$BENCH_DIR/pp.types"
  cmp -s "$BENCH_DIR/py.types" "$BENCH_DIR/pp.types" \
    || WARN+=("\`pparse records --count\` and the wandb reader count types differently: $(diff "$BENCH_DIR/py.types" "$BENCH_DIR/pp.types" | tr '\n' ' ')")
fi

# ---- report ------------------------------------------------------------------
CMD="${PPARSE_GIVEN:+PPARSE=$PPARSE_GIVEN }WANDB_MB=$WANDB_MB"
[[ $WANDB_PYTHON != /tmp/wandb-0175/bin/python ]] && CMD+=" WANDB_PYTHON=$WANDB_PYTHON"
[[ $PPARSE_RUNS != 5 ]] && CMD+=" PPARSE_RUNS=$PPARSE_RUNS"
[[ -n ${SKIP_PPARSE:-} ]] && CMD+=" SKIP_PPARSE=1"
CMD+=" peers/wandb.sh"
{
  echo "## pparse records: a ${WANDB_MB} MiB W&B log ($(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo
  echo "- \`$(basename "$F")\`: $(stat -c %s "$F") bytes, $NREC records ($(sed 's/^counts //; s/ /, /g' "$BENCH_DIR/gen.counts" 2>/dev/null || echo "history, output_raw, stats, summary, ..."))," \
       "written by wandb $WANDB_VERSION's \`DataStore\` (peers/wandb_gen.py, seed $SEED)"
  no_pparse_note "$HAVE_RECORDS" "pparse records"
  warnings "${WARN[@]}"
  "$WANDB_PYTHON" - "$BENCH_DIR/times" <<'EOF'
import sys
sys.path.insert(0, "bench")
from times import cells, ratios
cell = cells(sys.argv[1])
print("| task | wandb SDK (Python) | wall | peak RSS | pparse | wall | peak RSS | time peer/pparse | RSS peer/pparse |")
print("|---|---|---|---|---|---|---|---|---|")
for task, py, pp, py_label, pp_label in (
        ("read + count per type", "py count", "pp count",
         "`DataStore.scan_data` + `Record.ParseFromString`", "`pparse records --count FILE`"),
        ("read + list", "py count", "pp records",
         "(the same)", "`pparse records FILE` (a summary line per record)"),
        ("read + JSON", "py json", "pp json",
         "the same + `MessageToDict` + `json.dumps`", "`pparse records --json FILE`")):
    pw, pr, _, _ = cell(py)
    qw, qr, _, _ = cell(pp)
    tr, mr = ratios(cell(py), cell(pp))
    print(f"| {task} | {py_label} | {pw} | {pr} | {pp_label} | {qw} | {qr} | {tr} | {mr} |")
EOF
  echo
  echo "Python: one run each; pparse: median of $PPARSE_RUNS; warm page cache, outputs to /dev/null; ratios above 1 mean pparse is faster / smaller." \
       "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(free -g | awk '/Mem:/{print $2}') GiB RAM."
  echo "Tools: $( [[ -n $PPARSE ]] && { "$PPARSE" --version 2>/dev/null || echo "pparse (no --version)"; } || echo "pparse not run"), wandb $WANDB_VERSION, protobuf $("$WANDB_PYTHON" -c 'import google.protobuf as p; from google.protobuf.internal import api_implementation as a; print(p.__version__, "(" + a.Type() + ")")'), $("$WANDB_PYTHON" --version)."
  echo
  echo "Reproduce: \`$CMD\`"
} | tee ${OUT:+"$OUT"}
