#!/usr/bin/env bash
# Zips of many entries: `pparse tree` beside `unzip -l`, `bsdtar -tf`,
# `7zz l` and Python's zipfile (reading the directory) on zips of 10k, 100k
# and 1M small deflated entries written by Python's zipfile (the writer of
# wheels and most datasets), and on a real jar when one is given or found.
# pparse does more than the others here: it checks every entry (CRC of its
# decoded bytes) and looks into each one for a format, as `7zz t` and
# `unzip -t` do; those are timed too.
#
#   peers/zips.sh                      # COUNTS="10000 100000 1000000"
#   COUNTS=10000 JAR=/path/to/big.jar peers/zips.sh
#
# env: PPARSE=/path/to/binary  BENCH_DIR=/tmp/pparse-bench  RUNS=3
# The zips are made at bench time in $BENCH_DIR, once; never committed.
# Reported: median wall time of RUNS runs, peak RSS, bytes of RSS per entry,
# and each tool's time over pparse's.
set -euo pipefail
cd "$(dirname "$0")/.."
source peers/lib.sh

COUNTS=${COUNTS:-10000 100000 1000000}
RUNS=${RUNS:-3}
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench}
mkdir -p "$BENCH_DIR"
find_pparse
# The biggest jar of the machine's Google Cloud SDK, else of the JDK.
JAR=${JAR:-$(find /usr/lib/google-cloud-sdk /usr/lib/jvm -name '*.jar' -size +20M 2>/dev/null \
               | xargs -r ls -S 2>/dev/null | head -1 || true)}

make_zip() {
  local n=$1 out=$BENCH_DIR/entries-$1.zip
  if [[ ! -s $out ]]; then
    echo "making $out with zipfile ..." >&2
    python3 - "$n" "$out" <<'PY'
import sys, zipfile
n, out = int(sys.argv[1]), sys.argv[2]
with zipfile.ZipFile(out + ".part", "w", zipfile.ZIP_DEFLATED) as z:
    for i in range(n):
        z.writestr(f"dir{i % 1000}/file{i}.txt", f"entry {i}\n" * (1 + i % 7))
PY
    mv "$out.part" "$out"
  fi
  echo "$out"
}

entries() {
  python3 -c 'import sys, zipfile; print(len(zipfile.ZipFile(sys.argv[1]).infolist()))' "$1"
}

: > "$BENCH_DIR/times"
inputs=()
for n in $COUNTS; do inputs+=("$(make_zip "$n")"); done
[[ -n $JAR && -s $JAR ]] && inputs+=("$JAR")

have() { command -v "$1" > /dev/null; }
for f in "${inputs[@]}"; do
  b=$(basename "$f")
  median "$b pparse tree" "$RUNS" "$PPARSE" tree --no-index "$f"
  have unzip && median "$b unzip -l" "$RUNS" unzip -l "$f"
  have bsdtar && median "$b bsdtar -tf" "$RUNS" bsdtar -tf "$f"
  have 7zz && median "$b 7zz l" "$RUNS" 7zz l "$f"
  median "$b zipfile" "$RUNS" python3 -c \
    'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); [i.CRC for i in z.infolist()]' "$f"
  have 7zz && median "$b 7zz t" "$RUNS" 7zz t "$f"
  have unzip && median "$b unzip -tq" "$RUNS" unzip -tq "$f"
done

echo
echo "| zip | entries | tool | wall s | peak RSS MiB | RSS bytes per entry | tool / pparse |"
echo "|---|---|---|---|---|---|---|"
for f in "${inputs[@]}"; do
  b=$(basename "$f")
  n=$(entries "$f")
  base=$(awk -F'\t' -v k="$b pparse tree" '$1 == k { print $2 }' "$BENCH_DIR/times")
  grep -P "^\Q$b\E [^\t]*\t" "$BENCH_DIR/times" | grep -v ' run[0-9]*	' \
    | while IFS=$'\t' read -r name wall rss status; do
        tool=${name#"$b "}
        awk -v b="$b" -v n="$n" -v t="$tool" -v w="$wall" -v r="$rss" -v p="$base" 'BEGIN {
          printf "| %s | %d | %s | %.2f | %.0f | %.0f | %s |\n", b, n, t, w, r / 1024, r * 1024 / n,
            (t == "pparse tree" ? "1" : sprintf("%.2f", w / p)) }'
      done
done
echo
echo "(\`pparse tree\` checks every entry's CRC and looks into it for a format;"
echo " \`7zz t\` and \`unzip -tq\` check CRCs; the others read the directory only.)"
