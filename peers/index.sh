#!/usr/bin/env bash
# The persistent index (issue 14), beside ratarmount's SQLite index.
#
# On peers/run.sh's ~1 GB tar.gz of real files ($BENCH_DIR/real.tar.gz):
#   1. building the index: `pparse tree --index I` (time, peak RSS), with
#      the default threads and with one, vs ratarmountcore building its
#      index (SQLite + indexed_gzip checkpoints);
#   2. index sizes, as a share of the decoded bytes;
#   3. `pparse cat` of the last member, with and without the index
#      (best of RUNS each); the bytes are checked against `tar xzOf`;
#   4. random 64 KiB reads anywhere in the members (members weighted by
#      size, 500 reads, one seed): examples/random_reads.rs through
#      pparse::fs, and the same reads through ratarmountcore's Python API.
# BIG=1 also makes a ~10 GB tar.gz (ten hard-link copies of the same
# folders, tar --hard-dereference | pigz) and times 1, 2 and 4 there.
#
# Needs: peers/run.sh's input (run it first), GNU tar, pigz for BIG=1,
# RATARMOUNT_PY=/path/to/venv/bin/python with ratarmount installed
# (python3 -m venv V && V/bin/pip install ratarmount); SKIP_RATARMOUNT=1
# times pparse only.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench}
RUNS=${RUNS:-3}
RM_PY=${RATARMOUNT_PY:-/tmp/rmvenv/bin/python}
GZ=$BENCH_DIR/real.tar.gz
[[ -s $GZ ]] || { echo "no $GZ: run peers/run.sh first" >&2; exit 1; }
cargo build --release --quiet --bin pparse --example random_reads
PPARSE=$PWD/target/release/pparse
READER=$PWD/target/release/examples/random_reads

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
best() {  # best wall time of RUNS runs of CMD (stdout discarded)
  local b="" t0 t
  for _ in $(seq "$RUNS"); do
    t0=$(now); "$@" > /dev/null; t=$(since "$t0")
    b=$(awk -v a="$b" -v t="$t" 'BEGIN { print (a == "" || t < a) ? t : a }')
  done
  echo "$b"
}

bench() {  # GZ LABEL
  local gz=$1 label=$2 idx=$BENCH_DIR/$(basename "$1").pidx
  local decoded; decoded=$(gzip -l "$gz" | awk 'NR == 2 { print $2 }')
  # gzip -l wraps at 4 GiB; the tree's root size is exact.
  echo "## $label: $(stat -c %s "$gz") bytes compressed"
  rm -f "$idx"
  local t0; t0=$(now)
  /usr/bin/time -f "%M" -o "$BENCH_DIR/rss" "$PPARSE" tree "$gz" --index "$idx" > "$BENCH_DIR/tree.txt"
  local build; build=$(since "$t0")
  decoded=$(sed -n 2p "$BENCH_DIR/tree.txt" | grep -o '[0-9,]* B' | tr -d ', B')
  echo "pparse builds its index (tree): $build s, peak RSS $(( $(cat "$BENCH_DIR/rss") / 1024 )) MiB;" \
       "index $(stat -c %s "$idx") bytes = $(awk -v a="$(stat -c %s "$idx")" -v b="$decoded" 'BEGIN { printf "%.3f", 100 * a / b }')% of $decoded decoded bytes"
  # The same on one thread: what parallel decoding adds to the peak.
  rm -f "$idx.1"
  t0=$(now)
  /usr/bin/time -f "%M" -o "$BENCH_DIR/rss" "$PPARSE" tree "$gz" --threads 1 --index "$idx.1" > /dev/null
  local build1; build1=$(since "$t0")
  cmp -s "$idx" "$idx.1" && local same="the same index" || local same="an index in another order"
  echo "the same with --threads 1: $build1 s, peak RSS $(( $(cat "$BENCH_DIR/rss") / 1024 )) MiB ($same)"
  rm -f "$idx.1"
  local tarname; tarname=$(basename "$gz" .gz)
  local last; last=$(tail -1 "$BENCH_DIR/tree.txt" | sed 's/^[│├└─ ]*//; s/  .*//')
  local member="$tarname/$last"
  local want; want=$(tar xzOf "$gz" "$last" 2>/dev/null | md5sum | cut -d' ' -f1 || true)
  local got; got=$("$PPARSE" cat "$gz" "$member" --index "$idx" | md5sum | cut -d' ' -f1)
  [[ $got == "$want" ]] || echo "!!!!! the last member ($member) differs from tar xzOf" >&2
  local slow fast
  slow=$(RUNS=1 best "$PPARSE" cat "$gz" "$member" --no-index)
  fast=$(RUNS=5 best "$PPARSE" cat "$gz" "$member" --index "$idx")
  echo "cat of the last member ($member): --no-index $slow s, through the index $fast s:" \
       "$(awk -v a="$slow" -v b="$fast" 'BEGIN { printf "%.0fx", a / b }') faster"
  echo "pparse::fs random reads: $("$READER" "$gz" 500 65536 "$idx")"
  if [[ -z ${SKIP_RATARMOUNT:-} ]]; then
    local rmidx=$BENCH_DIR/$(basename "$gz").rm.sqlite
    rm -f "$rmidx"
    "$RM_PY" - "$gz" "$rmidx" "$BENCH_DIR/rss" <<'PYEOF'
import bisect, os, random, resource, stat, sys, time
from ratarmountcore.mountsource.formats.tar import SQLiteIndexedTar
gz, idx, _ = sys.argv[1:4]
t0 = time.time()
tar = SQLiteIndexedTar(gz, indexFilePath=idx, writeIndex=True)
built = time.time() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
print(f"ratarmountcore builds its index: {built:.3f} s, peak RSS {rss} MiB; index {os.path.getsize(idx)} bytes")
del tar
t0 = time.time()
tar = SQLiteIndexedTar(gz, indexFilePath=idx, writeIndex=False)
opened = time.time() - t0
files = []
stack = ["/"]
while stack:
    d = stack.pop()
    for name, info in (tar.list(d) or {}).items():
        p = d.rstrip("/") + "/" + name
        if stat.S_ISDIR(info.mode):
            stack.append(p)
        elif stat.S_ISREG(info.mode) and info.size > 0:
            files.append((p, info))
files.sort(key=lambda x: x[0])
ends, acc = [], 0
for _, fi in files:
    acc += fi.size
    ends.append(acc)
rnd = random.Random(42)
times = []
for _ in range(500):
    at = rnd.randrange(acc)
    i = bisect.bisect_right(ends, at)
    p, fi = files[i]
    off = at - (ends[i] - fi.size)
    t = time.time()
    with tar.open(fi) as fh:
        fh.seek(off)
        fh.read(65536)
    times.append((time.time() - t) * 1e3)
times.sort()
pct = lambda q: times[round((len(times) - 1) * q)]
print(f"ratarmountcore random reads: open {opened:.3f} s; 500 reads of 65536 B in {len(files)} files: mean {sum(times)/len(times):.2f} ms, p50 {pct(0.5):.2f} ms, p90 {pct(0.9):.2f} ms, p99 {pct(0.99):.2f} ms, max {pct(1.0):.2f} ms", flush=True)
os._exit(0)  # rapidgzip's threads abort a normal interpreter exit
PYEOF
  fi
}

bench "$GZ" "real.tar.gz (peers/run.sh)"

if [[ -n ${BIG:-} ]]; then
  BIG_GZ=$BENCH_DIR/big10.tar.gz
  if [[ ! -s $BIG_GZ ]]; then
    SRC=$BENCH_DIR/big10
    rm -rf "$SRC"; mkdir -p "$SRC"
    for i in $(seq 0 9); do
      mkdir -p "$SRC/copy$i/usr/lib"
      cp -al /usr/share "$SRC/copy$i/usr/"
      cp -al /usr/lib/llvm-14 /usr/lib/python3.11 "$SRC/copy$i/usr/lib/"
    done
    tar -C "$SRC" --hard-dereference -cf - . 2>/dev/null | pigz -6 > "$BIG_GZ.part" || true
    mv "$BIG_GZ.part" "$BIG_GZ"
    rm -rf "$SRC"
  fi
  bench "$BIG_GZ" "big10.tar.gz (10 copies)"
fi
