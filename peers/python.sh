#!/usr/bin/env bash
# Benchmark: the Python package (issue 18) beside the Python libraries its users call,
# each timed inside its interpreter (no start-up; peers/python_bench.py):
#   (a) every record of a large W&B log as a dict: `pparse.open(F).records()` beside
#       wunderbar's `parse_filepath` (both: `data` as MessageToDict with the key/value_json
#       items decoded). Input: the ~$WANDB_MB MiB log of peers/wandb.sh (same generator,
#       shared file). pparse: median of RUNS; wunderbar: one run.
#   (b) the tensor list of a ~1 GB safetensors checkpoint (made by the safetensors package,
#       the file of peers/safetensors.sh): `pparse.open(F).tensors()` (open included)
#       beside `safe_open` keys/get_dtype/get_shape; median of RUNS each. The 1 GB inputs
#       of peers/npy.sh, gguf.sh, msgpack.sh and pickle.sh too, when they are there.
#   (c) the memory `numpy()` of one 512 MiB float32 tensor costs: growth of anonymous RSS
#       (/proc/self/status RssAnon; pages of a mapped file are not anonymous) beside
#       safetensors' `get_tensor`, each in a fresh interpreter, with a sum over the array.
#
# Usage: peers/python.sh
#   env: PPARSE_PYTHON (a python with pparse, numpy and safetensors; default: a venv made
#          in target/bench-venv with the release build `pip install ./python`)
#        WANDB_PYTHON=/tmp/wandb-0175/bin/python (wandb 0.17.x: writes the log; runs wunderbar)
#        WUNDERBAR=/path/to/a/wunderbar/checkout (put on its PYTHONPATH; wunderbar is not on
#          PyPI: github.com/matomatical/wunderbar; without it, (a) has no peer)
#        WANDB_MB=300  RUNS=5  TENSORS=200  BENCH_DIR=/tmp/pparse-bench  OUT
set -euo pipefail
cd "$(dirname "$0")/.."
source peers/lib.sh
RUNS=${RUNS:-5}
WANDB_MB=${WANDB_MB:-300}
TENSORS=${TENSORS:-200}
SEED=0
WANDB_PYTHON=${WANDB_PYTHON:-/tmp/wandb-0175/bin/python}
DIR=${BENCH_DIR:-/tmp/pparse-bench}
mkdir -p "$DIR"

if [[ -z ${PPARSE_PYTHON:-} ]]; then
  VENV=target/bench-venv
  [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check numpy safetensors
  echo "building the release wheel into $VENV ..." >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps ./python
  PPARSE_PYTHON=$VENV/bin/python
fi
PB=peers/python_bench.py

# ---- inputs ------------------------------------------------------------------
HAVE_WANDB=0
if WANDB_VERSION=$("$WANDB_PYTHON" -c '
import wandb, wandb.sdk.internal.datastore
print(wandb.__version__)' 2>/dev/null); then
  HAVE_WANDB=1
  wandb_log
else
  echo "no wandb 0.17.x at $WANDB_PYTHON: no W&B log, (a) is skipped" >&2
fi
ST=$DIR/model-${TENSORS}x5MiB.safetensors
if [[ ! -s $ST ]]; then
  echo "making $ST with the safetensors package ..." >&2
  "$PPARSE_PYTHON" - "$ST" "$TENSORS" <<'PY'
import sys
import numpy as np
from safetensors.numpy import save_file
path, n = sys.argv[1], int(sys.argv[2])
base = np.arange(1310720, dtype=np.float32)
save_file({f"model.layers.{i // 8}.block{i % 8}.weight": base for i in range(n)}, path,
          metadata={"format": "pt"})
PY
fi

# ---- timing ------------------------------------------------------------------
cat "$ST" > /dev/null
field() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' <<< "$2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1fx", a / b; else print "-" }'; }

rows=()
if (( HAVE_WANDB )); then
  cat "$F" > /dev/null
  pp=$("$PPARSE_PYTHON" $PB records "$F" "$RUNS")
  if [[ -n ${WUNDERBAR:-} ]]; then
    wb=$(PYTHONPATH=$WUNDERBAR "$WANDB_PYTHON" $PB wunderbar "$F")
    [[ $(field n "$pp") == $(field n "$wb") ]] \
      || echo "**WARNING: pparse gave $(field n "$pp") records, wunderbar $(field n "$wb")**"
    rows+=("| every record of a $(( $(stat -c %s "$F") >> 20 )) MiB W&B log ($NREC records) as dicts | \`for r in wunderbar.parse_filepath(F)\` | $(field ms "$wb") ms | \`for r in pparse.open(F).records()\` | $(field ms "$pp") ms | **$(ratio "$(field ms "$wb")" "$(field ms "$pp")")** |")
  else
    rows+=("| every record of a $(( $(stat -c %s "$F") >> 20 )) MiB W&B log ($NREC records) as dicts | (WUNDERBAR not set) | - | \`for r in pparse.open(F).records()\` | $(field ms "$pp") ms | - |")
  fi
fi
pp=$("$PPARSE_PYTHON" $PB tensors "$ST" "$RUNS")
st=$("$PPARSE_PYTHON" $PB safe_open "$ST" "$RUNS")
rows+=("| the tensor list of a $(( $(stat -c %s "$ST") / 1000000 )) MB safetensors file ($(field n "$pp") tensors) | \`safe_open\`: keys, dtype, shape | $(field ms "$st") ms | \`pparse.open(F).tensors()\` | $(field ms "$pp") ms | $(ratio "$(field ms "$st")" "$(field ms "$pp")") |")
# The 1 GB inputs of peers/npy.sh, gguf.sh and msgpack.sh and the torch checkpoint of
# peers/pickle.sh, when they were made: the same listing from Python (their peers are
# timed in those scripts).
for other in "$DIR/arrays-200x5MiB.npz" "$DIR/model-200xQ8_0.gguf" "$DIR/flax-200x5MiB.msgpack" \
             /tmp/pparse-bench-pickle/state_1g.pt; do
  [[ -s $other ]] || continue
  cat "$other" > /dev/null
  pp=$("$PPARSE_PYTHON" $PB tensors "$other" "$RUNS")
  rows+=("| the tensor list of \`$(basename "$other")\` ($(( $(stat -c %s "$other") / 1000000 )) MB, $(field n "$pp") tensors) | (see its own benchmark) | | \`pparse.open(F).tensors()\` | $(field ms "$pp") ms | |")
done
# One big tensor: what a copy costs shows.
BIG=$DIR/one-512MiB.safetensors
if [[ ! -s $BIG ]]; then
  "$PPARSE_PYTHON" -c '
import sys, numpy as np
from safetensors.numpy import save_file
save_file({"big": np.arange(1 << 27, dtype=np.float32), "small": np.ones(3, np.float32)}, sys.argv[1])' "$BIG"
fi
cat "$BIG" > /dev/null
NAME=big
pn=$("$PPARSE_PYTHON" $PB numpy "$BIG" "$NAME")
gt=$("$PPARSE_PYTHON" $PB get_tensor "$BIG" "$NAME")
[[ $(field sum "$pn") == $(field sum "$gt") ]] || echo "**WARNING: the sums differ: $pn / $gt**"
rows+=("| memory of one $(( $(field bytes "$pn") >> 20 )) MiB tensor as a numpy array, summed | \`get_tensor\` (a copy) | +$(field rss_anon_mib "$gt") MiB | \`tensor.numpy()\` (a view on the mapped file) | +$(field rss_anon_mib "$pn") MiB | |")

# ---- report ------------------------------------------------------------------
{
  echo "## The Python package beside Python libraries ($(date -u +%F), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?'))"
  echo
  echo "| task | peer | peer | pparse (Python) | pparse | peer/pparse |"
  echo "|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "Timed inside each interpreter (no start-up), warm page cache; pparse: median of $RUNS, wunderbar: one run; memory: growth of anonymous RSS in a fresh interpreter." \
       "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(free -g | awk '/Mem:/{print $2}') GiB RAM."
  echo "Tools: $("$PPARSE_PYTHON" --version), pparse $("$PPARSE_PYTHON" -c 'import pparse; print(pparse.__version__)'), safetensors $("$PPARSE_PYTHON" -c 'import safetensors; print(safetensors.__version__)')$( (( HAVE_WANDB )) && echo ", wandb $WANDB_VERSION" )$( [[ -n ${WUNDERBAR:-} ]] && echo ", wunderbar $(git -C "$WUNDERBAR" rev-parse --short HEAD 2>/dev/null || echo checkout)" )."
  echo
  echo "Reproduce: \`WUNDERBAR=/path/to/wunderbar peers/python.sh\`"
} | tee ${OUT:+"$OUT"}
