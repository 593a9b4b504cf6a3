#!/usr/bin/env bash
# Benchmark: pparse against GNU tar on a ~1 GB tar.gz of real files.
#
# Measures wall time (median of RUNS alternating runs) and peak RSS of
#   1. listing:  `pparse tree FILE`        vs `tar tzf FILE`
#   2. one file: `pparse cat FILE PATH`    vs `tar xzOf FILE PATH`  (last member; QUICK=1 skips)
# and reports pparse/tar ratios. Requirement: listing keeps pparse under
# 200 MB peak RSS and within 1.5x tar's wall time.
#
# Note on fairness: `tar tzf` runs gzip as a child process, so inflate and tar
# parsing overlap on two cores; pparse inflates and parses on one engine
# thread. tar's %M is the peak over tar and its gzip child (rusage of children).
#
# Usage: peers/run.sh            env: PPARSE=/path/to/binary  RUNS=3  QUICK=1
#        BENCH_DIR=/tmp/pparse-bench  BENCH_SRC="usr/share usr/lib/llvm-14 ..."
# The input is generated here, never committed.
set -euo pipefail

cd "$(dirname "$0")/.."
RUNS=${RUNS:-3}
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench}
# Relative to /; about 1 GB together on this project's machine.
BENCH_SRC=${BENCH_SRC:-usr/share usr/lib/llvm-14 usr/lib/python3.11}
OUT=peers/results.md
GZ=$BENCH_DIR/real.tar.gz
META=$BENCH_DIR/real.meta   # "decoded_bytes members gz_bytes" of $GZ, written last
MIN=950000000 MAX=1100000000

PPARSE_GIVEN=${PPARSE:-}
if [[ -z $PPARSE_GIVEN ]]; then
  cargo build --release --quiet
  PPARSE=$PWD/target/release/pparse
fi

# ---- input ---------------------------------------------------------------
mkdir -p "$BENCH_DIR"
if [[ -s $GZ && -s $META ]] && read -r DECODED MEMBERS GZSIZE < "$META" \
   && (( DECODED >= MIN && DECODED <= MAX )) && [[ $GZSIZE == $(stat -c %s "$GZ") ]]; then
  echo "reusing $GZ"
else
  echo "building $GZ from /{${BENCH_SRC// /,}} ..."
  rm -f "$GZ" "$META"
  # Exit 1 means "some files changed while read": fine for a benchmark input.
  # shellcheck disable=SC2086
  tar -C / --sort=name --ignore-failed-read -cf "$BENCH_DIR/real.tar" $BENCH_SRC \
    || [[ $? == 1 ]]
  DECODED=$(stat -c %s "$BENCH_DIR/real.tar")
  gzip -6 -c "$BENCH_DIR/real.tar" > "$GZ"
  rm -f "$BENCH_DIR/real.tar"
  MEMBERS=$(tar tzf "$GZ" | wc -l)
  if (( DECODED < MIN || DECODED > MAX )); then
    echo "ERROR: decoded tar is $DECODED bytes, outside $MIN..$MAX; set BENCH_SRC" >&2
    exit 1
  fi
  echo "$DECODED $MEMBERS $(stat -c %s "$GZ")" > "$META"
fi
COMPRESSED=$(stat -c %s "$GZ")
echo "input: $DECODED bytes decoded, $COMPRESSED bytes gzip -6, $MEMBERS members"

# ---- correctness, once ----------------------------------------------------
# Children of the tar extraction (root -> decoded .tar -> members) against
# tar's listing; also picks the last regular file for the `cat` benchmark.
MISMATCH=()
rc=0
"$PPARSE" tree --json "$GZ" > "$BENCH_DIR/tree.json" || rc=$?
[[ $rc == 0 ]] || MISMATCH+=("pparse tree exited $rc (expected 0)")
read -r P_MEMBERS TARNAME LAST < <(python3 -c '
import json, sys
t = json.load(open(sys.argv[1]))["children"][0]
files = [c for c in t["children"] if c["kind"] == "file"]
print(len(t["children"]), t["name"], files[-1]["name"])' "$BENCH_DIR/tree.json")
rm -f "$BENCH_DIR/tree.json"
if [[ $P_MEMBERS != "$MEMBERS" ]]; then
  MISMATCH+=("pparse lists $P_MEMBERS tar members, tar tzf lists $MEMBERS")
fi
if [[ $(tar xzOf "$GZ" "$LAST" | md5sum) != $("$PPARSE" cat "$GZ" "$TARNAME/$LAST" | md5sum) ]]; then
  MISMATCH+=("pparse cat and tar xzOf differ on $LAST")
fi
for m in "${MISMATCH[@]}"; do echo "!!!!! MISMATCH: $m" >&2; done

# ---- timing ----------------------------------------------------------------
# bench NAME CMD...: one run under GNU time; appends "NAME wall_s maxrss_kib".
bench() {
  local name=$1; shift
  /usr/bin/time -o "$BENCH_DIR/t" -f '%e %M' "$@" > /dev/null \
    || echo "!!!!! $name exited with status $?" >&2
  echo "$name $(tail -1 "$BENCH_DIR/t")" >> "$BENCH_DIR/times"
}
: > "$BENCH_DIR/times"
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
for ((i = 1; i <= RUNS; i++)); do
  echo "run $i/$RUNS"
  bench "list tar" tar tzf "$GZ"
  bench "list pparse" "$PPARSE" tree "$GZ"
  if [[ -z ${QUICK:-} ]]; then
    bench "cat tar" tar xzOf "$GZ" "$LAST"
    bench "cat pparse" "$PPARSE" cat "$GZ" "$TARNAME/$LAST"
  fi
done

# ---- report ----------------------------------------------------------------
CMD="${PPARSE_GIVEN:+PPARSE=$PPARSE }RUNS=$RUNS${QUICK:+ QUICK=1} peers/run.sh"
{
  echo "## pparse vs GNU tar ($(date -u +%F), commit $(git rev-parse --short HEAD))"
  echo
  echo "Input: $(( DECODED / 1000000 )) MB decoded tar ($DECODED B) of /{${BENCH_SRC// /,}},"
  echo "$(( COMPRESSED / 1000000 )) MB gzip -6 ($COMPRESSED B), $MEMBERS members."
  echo "Last regular member (cat benchmark): \`$LAST\`."
  echo
  for m in "${MISMATCH[@]}"; do echo "**MISMATCH: $m**"; echo; done
  python3 - "$BENCH_DIR/times" <<'EOF'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    *name, wall, rss = line.split()
    runs.setdefault(" ".join(name), []).append((float(wall), int(rss)))
print("| benchmark | tar wall (median) | pparse wall (median) | pparse/tar | tar peak RSS | pparse peak RSS | runs |")
print("|---|---|---|---|---|---|---|")
labels = {"list": "list (`tree` vs `tzf`)", "cat": "last member (`cat` vs `xzOf`)"}
for b in ("list", "cat"):
    if f"{b} tar" not in runs:
        continue
    t, p = runs[f"{b} tar"], runs[f"{b} pparse"]
    tw = statistics.median(w for w, _ in t)
    pw = statistics.median(w for w, _ in p)
    trss = max(r for _, r in t) / 1024
    prss = max(r for _, r in p) / 1024
    print(f"| {labels[b]} | {tw:.2f} s | {pw:.2f} s | **{pw / tw:.2f}x** | "
          f"{trss:.1f} MiB | {prss:.1f} MiB | {len(p)} |")
t, p = runs["list tar"], runs["list pparse"]
ratio = statistics.median(w for w, _ in p) / statistics.median(w for w, _ in t)
rss = max(r for _, r in p) * 1024
print()
print(f"Requirement (list): wall <= 1.5x tar: {'PASS' if ratio <= 1.5 else 'FAIL'} ({ratio:.2f}x); "
      f"peak RSS < 200 MB: {'PASS' if rss < 200e6 else 'FAIL'} ({rss / 1e6:.1f} MB = {rss / 2**20:.1f} MiB).")
print()
print("All runs (wall s, max RSS KiB):", "; ".join(
    f"{k}: " + ", ".join(f"{w:.2f}/{r}" for w, r in v) for k, v in runs.items()))
EOF
  echo
  echo "Machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs),"
  echo "$(free -g | awk '/Mem:/{print $2}') GiB RAM, load average $LOAD0 before, $(cut -d' ' -f1-3 /proc/loadavg) after."
  echo "Tools: $("$PPARSE" --version), $(tar --version | head -1), $(gzip --version | head -1)."
  echo
  echo "Reproduce: \`$CMD\`"
} | tee "$OUT"
(( ${#MISMATCH[@]} == 0 ))
