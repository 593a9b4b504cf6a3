#!/usr/bin/env bash
# Benchmark (issue 36, item 4): `pparse query` beside jq reading `pparse tree --json`, on the
# tar.gz of 1,000,000 small files that peers/training.sh makes: the wall time and peak
# memory of one selection over every member, both starting from pparse's index of the file.
# `pparse query` reads the members from the index's records one at a time; jq reads the
# whole tree document first.
#
# Usage: peers/query.sh
#   env: PPARSE (default: target/release/pparse, built if missing)
#        BENCH_DIR=/tmp/pparse-bench  FILES=1000000 (the archive peers/training.sh made:
#        `PARTS=memory FILES=1000000 peers/training.sh` makes it)
#   needs: jq, GNU time (/usr/bin/time).
set -euo pipefail
cd "$(dirname "$0")/.."
PPARSE=${PPARSE:-target/release/pparse}
[[ -x $PPARSE ]] || cargo build --release --bin pparse
DIR=${BENCH_DIR:-/tmp/pparse-bench}
N=${FILES:-1000000}
TGZ=$DIR/small-$N.tar.gz
[[ -f $TGZ ]] || { echo "no $TGZ: make it with PARTS=memory FILES=$N peers/training.sh" >&2; exit 2; }
IDX=$DIR/query-$N.pidx
[[ -f $IDX ]] || "$PPARSE" tree "$TGZ" --index "$IDX" > /dev/null
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
"$PPARSE" tree --json "$TGZ" --index "$IDX" > "$OUT/tree.json"

echo "# $(date -u '+%F %H:%M') UTC, commit $(git rev-parse --short HEAD), $(nproc) cores;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg); $(jq --version)"
echo "# $TGZ: $N members; tree --json is $(stat -c %s "$OUT/tree.json") bytes"
FILTER='select(.kind == "file" and .size > 1990) | .path'
echo "# the selection: $FILTER"
echo
echo "| what | wall time | peak RSS | lines out |"
echo "|---|---|---|---|"
measure() {
  local label=$1
  shift
  /usr/bin/time -f "%e %M" -o "$OUT/time" "$@" > "$OUT/out"
  read -r secs kib < "$OUT/time"
  echo "| $label | $secs s | $((kib / 1024)) MiB | $(wc -l < "$OUT/out") |"
  sort "$OUT/out" | md5sum | cut -c1-8 >> "$OUT/sums"
}
measure "pparse query over \`members\` (from its index)" \
  "$PPARSE" query "$TGZ" "members | $FILTER" --index "$IDX"
measure "pparse tree --json (from its index), piped to jq over \`recurse(.children[]?)\`" \
  bash -c "\"\$0\" tree --json \"\$1\" --index \"\$2\" | jq -c '.children[] | recurse(.children[]?) | $FILTER'" \
  "$PPARSE" "$TGZ" "$IDX"
measure "jq alone over the saved \`tree --json\`" \
  jq -c ".children[] | recurse(.children[]?) | $FILTER" "$OUT/tree.json"
if [[ $(sort -u "$OUT/sums" | wc -l) != 1 ]]; then
  echo "the outputs differ" >&2
  exit 1
fi
