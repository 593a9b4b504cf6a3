# Helpers shared by the benchmark scripts (sourced, not run).
#
# find_pparse        sets PPARSE (built with cargo unless given or SKIP_PPARSE is set)
#                     and PPARSE_GIVEN (what the caller gave).
# bench NAME CMD...   one run under GNU time; appends "NAME<TAB>wall<TAB>rss_kib<TAB>status"
#                     to $BENCH_DIR/times and keeps the run's stderr in
#                     $BENCH_DIR/err.NAME. With WARM set, `cat $WARM` first (page cache).
# warnings MSG...    the report's warnings, each as a bold line.
# no_pparse_note HAVE CMD
#                     the report's line saying why pparse was not timed, if it was not
#                     (SKIP_PPARSE set, or HAVE 0: the binary lacks CMD).
# median NAME RUNS CMD...
#                     RUNS runs of bench as "NAME runK", then the median run as NAME.
# wandb_log          the large W&B log of peers/wandb.sh, made once (see below).
# best_row LABEL THREADS CMD...
#                     RUNS runs under GNU time; one table row with the best wall time,
#                     that run's user CPU and peak RSS, and $decoded bytes per second.
# pparse_rows FILE MEMBER
#                     the table's head, then best_row for `pparse tree` and `pparse cat
#                     MEMBER` of FILE with 1 and 2 threads ($PPARSE).
# ratarmount_rows FILE
#                     best_row for ratarmountcore building FILE's index with
#                     parallelization 1 and 2, when $RM_PY has it.

bench() {
  local name=$1; shift
  local rc=0 err=$BENCH_DIR/err.${name// /_}
  echo "  $name ..." >&2
  if [[ -n ${WARM:-} ]]; then cat "$WARM" > /dev/null; fi
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

median() {
  local name=$1 runs=$2; shift 2
  local i
  for ((i = 1; i <= runs; i++)); do bench "$name run$i" "$@"; done
  sort -t$'\t' -k2,2n <(grep "^$name run" "$BENCH_DIR/times") | sed -n "$(( (runs + 1) / 2 ))p" \
    | sed "s/^$name run[0-9]*/$name/" >> "$BENCH_DIR/times"
}

warnings() {
  echo
  local w
  for w in "$@"; do echo "**WARNING: $w**"; echo; done
}

no_pparse_note() {
  if [[ -n ${SKIP_PPARSE:-} ]]; then
    echo "- SKIP_PPARSE=1: the Python side only"
  elif (( ! $1 )); then
    echo "- \`$2\` is not available in this binary: no pparse timing"
  fi
}

find_pparse() {
  PPARSE_GIVEN=${PPARSE:-}
  if [[ -n ${SKIP_PPARSE:-} ]]; then
    PPARSE=
  elif [[ -z $PPARSE_GIVEN ]]; then
    cargo build --release --quiet
    PPARSE=$PWD/target/release/pparse
  fi
}

# wandb_log          makes (or reuses) the large W&B log of peers/wandb.sh in
#                     $WANDB_DIR_BENCH (default /tmp/pparse-bench-wandb): ~$WANDB_MB MiB
#                     written by $WANDB_PYTHON's DataStore (peers/wandb_gen.py, seed $SEED);
#                     needs WANDB_VERSION; sets F (the log) and NREC (its records).
wandb_log() {
  local dir=${WANDB_DIR_BENCH:-/tmp/pparse-bench-wandb}
  mkdir -p "$dir"
  F=$dir/run-bench0001.wandb
  local meta=$dir/wandb.meta   # "WANDB_MB SEED wandb-version records N bytes B", written last
  local m_mb m_seed m_ver m_bytes
  if [[ -s $F && -s $meta ]] && read -r m_mb m_seed m_ver _ NREC _ m_bytes < "$meta" \
     && [[ $m_mb == "$WANDB_MB" && $m_seed == "$SEED" && $m_ver == "$WANDB_VERSION" \
           && $m_bytes == $(stat -c %s "$F") ]]; then
    echo "reusing $F ($NREC records)"
  else
    echo "writing $F (~$WANDB_MB MiB, wandb $WANDB_VERSION DataStore) ..."
    rm -f "$F" "$meta"
    local t0 t1 gen_out gen
    t0=$(date +%s%N)
    gen_out=$("$WANDB_PYTHON" peers/wandb_gen.py "$F" "$WANDB_MB" "$SEED")
    t1=$(date +%s%N)
    grep '^counts ' <<< "$gen_out" > "$dir/gen.counts" || true
    gen=$(tail -1 <<< "$gen_out")
    echo "$WANDB_MB $SEED $WANDB_VERSION $gen" > "$meta"
    read -r _ _ _ _ NREC _ _ < "$meta"
    echo "  $gen, $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f", (b - a) / 1e9 }') s"
  fi
}

best_row() {
  local label=$1 threads=$2 best="" user="" rss=""
  shift 2
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f "%e %U %M" -o "$BENCH_DIR/time" "$@" > /dev/null 2>&1
    read -r e u m < "$BENCH_DIR/time"
    if [[ -z $best ]] || awk -v a="$e" -v b="$best" 'BEGIN { exit !(a < b) }'; then
      best=$e user=$u rss=$m
    fi
  done
  echo "| $label | $threads | $best s | $user s | $((rss / 1024)) MiB |" \
       "$(awk -v d="$decoded" -v t="$best" 'BEGIN { printf "%.0f", d / t / 1e6 }') |"
}

ratarmount_rows() {
  [[ -x $RM_PY ]] || return 0
  for p in 1 2; do
    best_row "ratarmountcore builds its index" "$p" "$RM_PY" -c "
import os, tempfile
from ratarmountcore.mountsource.formats.tar import SQLiteIndexedTar
d = tempfile.mkdtemp()
SQLiteIndexedTar('$1', writeIndex=True, indexFilePath=os.path.join(d, 'i.sqlite'), parallelization=$p)
"
  done
}

pparse_rows() {
  echo "| command | threads | wall time (best of $RUNS) | user CPU | peak RSS | decoded MB/s |"
  echo "|---|---|---|---|---|---|"
  for t in 1 2; do
    best_row "pparse tree --no-index" "$t" "$PPARSE" tree --no-index --threads "$t" "$1"
  done
  for t in 1 2; do
    best_row "pparse cat --no-index (last member)" "$t" "$PPARSE" cat --no-index --threads "$t" "$1" "$2"
  done
}
