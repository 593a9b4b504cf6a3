#!/usr/bin/env bash
# A real-world sweep (issue 31): pparse beside the reference tools on every
# file of nine kinds under DIR (default /usr), then DIR packed as one tar.gz
# and listed by pparse beside bsdtar, GNU tar and ratarmount.
#
#  1. sweep (peers/realworld.py says how kinds are found and how each is
#     checked): gzip, zip/jar/whl, xz, bz2, zst, tar, json, npy and pickle
#     files, each read by its reference tool (Python's gzip, zipfile, lzma,
#     bz2, tarfile, json, numpy.load, pickletools; `zstd -t`) and by
#     `pparse tree --no-index --json FILE` under a timeout, JOBS files at a
#     time. Reported: files per kind, false alarms (the reference reads the
#     file cleanly, pparse exits 1), misses (the reference fails, pparse
#     exits 0), files over SLOW seconds, crashes (any other exit, a signal,
#     a timeout), with the offenders.
#  2. pack: DIR as a tar.gz (GNU tar | pigz -6, made here in BENCH_DIR,
#     never committed; reused while it is of the same DIR, FRESH=1 packs it
#     again), listed in the same run by `pparse tree --no-index --io-stats`
#     (it must exit 0: no damage), `bsdtar -tzf`, GNU `tar tzf` and
#     ratarmountcore building its index (as peers/index.sh does): wall time,
#     peak RSS, ratios, entries listed, pparse's I/O statistics.
#
# Usage: peers/realworld.sh [DIR]
# env: PPARSE=/path/to/pparse (else `cargo build --release`),
#      BENCH_DIR (default /tmp/pparse-bench/realworld; not under DIR),
#      PARTS="sweep pack" (or one of them), JOBS=2, TIMEOUT=60 (per file and
#      tool), SLOW=5, RUNS=1 (the median of RUNS runs of each listing),
#      PYTHON=python3 (with numpy), RATARMOUNT_PY=/tmp/peervenv/bin/python
#      (a venv with ratarmount: python3 -m venv V && V/bin/pip install
#      ratarmount), SKIP_RATARMOUNT=1 leaves ratarmount out.
# Needs: GNU tar, pigz, bsdtar (libarchive-tools), zstd, python3 with numpy.
# Exit status 0 when the sweep found no false alarm, miss, slow file or
# crash and pparse listed the tar.gz with exit 0; 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
. peers/lib.sh

DIR=$(realpath "${1:-/usr}")
BENCH_DIR=$(realpath -m "${BENCH_DIR:-/tmp/pparse-bench/realworld}")
PARTS=${PARTS:-sweep pack}
RUNS=${RUNS:-1}
PYTHON=${PYTHON:-python3}
RM_PY=${RATARMOUNT_PY:-/tmp/peervenv/bin/python}
export JOBS=${JOBS:-2} TIMEOUT=${TIMEOUT:-60} SLOW=${SLOW:-5}
[[ -d $DIR && $DIR != / ]] || { echo "DIR must be a folder other than /: $DIR" >&2; exit 2; }
case $BENCH_DIR/ in "$DIR"/*)
  echo "BENCH_DIR ($BENCH_DIR) is under DIR ($DIR): the sweep would read its own scratch files" >&2
  exit 2 ;;
esac
mkdir -p "$BENCH_DIR"
find_pparse
REPORT=$BENCH_DIR/report.md
FAILED=()
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
CMD="${PPARSE_GIVEN:+PPARSE=$PPARSE_GIVEN }RUNS=$RUNS peers/realworld.sh $DIR"
[[ $PARTS == "sweep pack" ]] || CMD="PARTS=\"$PARTS\" $CMD"
: > "$REPORT"
say() { echo "$@" | tee -a "$REPORT"; }

say "## pparse on the files of $DIR ($(date -u +%F), commit $(git rev-parse --short HEAD))"
say

# ---- 1. sweep ------------------------------------------------------------------
if [[ " $PARTS " == *" sweep "* ]]; then
  say "### Every file of nine kinds, beside its reference tool"
  say
  rc=0
  "$PYTHON" peers/realworld.py "$PPARSE" "$DIR" "$BENCH_DIR" > "$BENCH_DIR/sweep.md" || rc=$?
  tee -a "$REPORT" < "$BENCH_DIR/sweep.md"
  say
  say "Per file: \`$BENCH_DIR/sweep.tsv\`."
  case $rc in
    0) ;;
    1) FAILED+=("the sweep found false alarms, misses, slow files or crashes (above)") ;;
    *) FAILED+=("the sweep itself failed (exit $rc)") ;;
  esac
  say
fi

# ---- 2. pack and list ------------------------------------------------------------
if [[ " $PARTS " == *" pack "* ]]; then
  NAME=$(basename "$DIR")
  GZ=$BENCH_DIR/$NAME.tar.gz
  META=$BENCH_DIR/$NAME.meta   # "DIR gz_bytes tar_bytes date", written last
  if [[ -z ${FRESH:-} && -s $GZ && -s $META ]] && read -r m_dir m_size TARBYTES PACKED < "$META" \
     && [[ $m_dir == "$DIR" && $m_size == $(stat -c %s "$GZ") ]]; then
    echo "reusing $GZ (packed $PACKED)" >&2
  else
    echo "packing $DIR into $GZ (GNU tar | pigz -6) ..." >&2
    rm -f "$GZ" "$META"
    t0=$(date +%s)
    # tar's exit 1 is "a file changed as we read it": fine for this input.
    ( tar -C "$(dirname "$DIR")" --ignore-failed-read --totals -cf - "$NAME" 2> "$BENCH_DIR/pack.err" \
        || [[ $? == 1 ]] ) | pigz -6 > "$GZ.part"
    mv "$GZ.part" "$GZ"
    TARBYTES=$(sed -n 's/^Total bytes written: \([0-9]*\).*/\1/p' "$BENCH_DIR/pack.err")
    PACKED=$(date -u +%FT%TZ)
    echo "$DIR $(stat -c %s "$GZ") $TARBYTES $PACKED" > "$META"
    echo "  packed in $(( $(date +%s) - t0 )) s" >&2
  fi
  GZBYTES=$(stat -c %s "$GZ")

  : > "$BENCH_DIR/times"
  RM_CODE='
import os, sqlite3, sys
from ratarmountcore.mountsource.formats.tar import SQLiteIndexedTar
gz, idx, out = sys.argv[1:4]
if os.path.exists(idx):
    os.remove(idx)
SQLiteIndexedTar(gz, indexFilePath=idx, writeIndex=True)
rows = sqlite3.connect(idx).execute("SELECT COUNT(*) FROM files").fetchone()[0]
open(out, "w").write(f"{rows}\n")
os._exit(0)  # rapidgzip threads abort a normal interpreter exit'
  HAVE_RM=0
  if [[ -z ${SKIP_RATARMOUNT:-} ]] && "$RM_PY" -c 'import ratarmountcore' 2> /dev/null; then HAVE_RM=1; fi
  for ((i = 1; i <= RUNS; i++)); do
    echo "listing, run $i of $RUNS" >&2
    bench "pparse run$i" bash -c '"$1" tree --no-index --io-stats "$2" > "$3"' _ \
      "$PPARSE" "$GZ" "$BENCH_DIR/list.pparse"
    cp "$BENCH_DIR/err.pparse_run$i" "$BENCH_DIR/err.pparse"
    bench "bsdtar run$i" bash -c 'bsdtar -tzf "$1" > "$2"' _ "$GZ" "$BENCH_DIR/list.bsdtar"
    bench "tar run$i" bash -c 'tar tzf "$1" > "$2"' _ "$GZ" "$BENCH_DIR/list.tar"
    if (( HAVE_RM )); then
      bench "ratarmount run$i" "$RM_PY" -c "$RM_CODE" "$GZ" "$BENCH_DIR/$NAME.rm.sqlite" "$BENCH_DIR/list.ratarmount"
    fi
  done
  TOOLS="pparse bsdtar tar"
  (( HAVE_RM )) && TOOLS+=" ratarmount"
  for t in $TOOLS; do
    sort -t$'\t' -k2,2n <(grep "^$t run" "$BENCH_DIR/times") | sed -n "$(( (RUNS + 1) / 2 ))p" \
      | sed "s/^$t run[0-9]*/$t/" >> "$BENCH_DIR/times"
  done
  P_STATUS=$(awk -F'\t' '$1 == "pparse" { print $4 }' "$BENCH_DIR/times")
  P_DAMAGE=$(grep -v '^pparse: io:' "$BENCH_DIR/err.pparse" | grep -v '^pparse: note:' | head -20 || true)
  [[ $P_STATUS == "exit 0" ]] || FAILED+=("pparse tree of $GZ: $P_STATUS")
  [[ -z $P_DAMAGE ]] || FAILED+=("pparse reported damage in $GZ")
  IO=$(grep '^pparse: io:' "$BENCH_DIR/err.pparse" || echo "(no io line)")
  # Entries each tool listed: pparse's tar members are the tree's lines at depth 2.
  count() {
    case $1 in
      pparse) grep -c '^   [├└]─ ' "$BENCH_DIR/list.pparse" ;;
      ratarmount) cat "$BENCH_DIR/list.ratarmount" ;;
      *) wc -l < "$BENCH_DIR/list.$1" ;;
    esac
  }
  N_TAR=$(count tar)
  N_P=$(count pparse)
  [[ $N_P == "$N_TAR" ]] || FAILED+=("pparse lists $N_P members, tar tzf $N_TAR")
  N_NESTED=$(( $(wc -l < "$BENCH_DIR/list.pparse") - N_P - 2 ))

  say "### $NAME.tar.gz listed beside bsdtar, GNU tar and ratarmount"
  say
  say "Input: \`tar -C $(dirname "$DIR") -cf - $NAME | pigz -6\`, packed $PACKED: $TARBYTES B of tar ($(( TARBYTES / 1000000 )) MB), $GZBYTES B compressed ($(( GZBYTES / 1000000 )) MB), $N_TAR members."
  say
  say "| tool | command | wall | peak RSS | pparse / tool | listed |"
  say "|---|---|---|---|---|---|"
  PW=$(awk -F'\t' '$1 == "pparse" { print $2 }' "$BENCH_DIR/times")
  for t in $TOOLS; do
    IFS=$'\t' read -r _ wall rss status < <(grep -P "^$t\t" "$BENCH_DIR/times")
    case $t in
      pparse) c="\`pparse tree --no-index --io-stats\`"; what="$N_P members, and $N_NESTED extractions inside them" ;;
      bsdtar) c="\`bsdtar -tzf\`"; what="$(count bsdtar) members" ;;
      tar) c="\`tar tzf\`"; what="$N_TAR members" ;;
      ratarmount) c="ratarmountcore \`SQLiteIndexedTar(writeIndex=True)\` (index build)"; what="$(count ratarmount) rows in its index" ;;
    esac
    if [[ $wall == - ]]; then
      say "| $t | $c | $status | | | |"
      FAILED+=("$t: $status")
    else
      say "| $t | $c | $wall s | $(( rss / 1024 )) MiB | $(awk -v p="$PW" -v w="$wall" 'BEGIN { printf "%.2fx", p / w }') | $what |"
    fi
  done
  say
  say "pparse exited ${P_STATUS#exit }${P_DAMAGE:+ and reported damage:}"
  [[ -z $P_DAMAGE ]] || { say; say '```'; say "$P_DAMAGE"; say '```'; }
  say
  say "\`$IO\`"
  say
  say "All runs (wall s, peak RSS KiB): $(grep ' run' "$BENCH_DIR/times" | awk -F'\t' '{ printf "%s %s/%s; ", $1, $2, $3 }')"
  say
fi

# ---- report ------------------------------------------------------------------------
say "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs),"
say "$(free -g | awk '/Mem:/{print $2}') GiB RAM, load average $LOAD0 before, $(cut -d' ' -f1-3 /proc/loadavg) after."
say "Tools: $("$PPARSE" --version), $(tar --version | head -1), $(bsdtar --version), pigz $(pigz --version 2>&1 | cut -d' ' -f2),"
say "$("$PYTHON" -c 'import sys, numpy; print(f"Python {sys.version.split()[0]}, numpy {numpy.__version__}")')$( (( ${HAVE_RM:-0} )) && echo ", ratarmountcore $("$RM_PY" -c 'import importlib.metadata as m; print(m.version("ratarmountcore"))')")."
say
say "Reproduce: \`$CMD\`"
if (( ${#FAILED[@]} )); then
  warnings "${FAILED[@]}" | tee -a "$REPORT"
  exit 1
fi
