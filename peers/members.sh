#!/usr/bin/env bash
# Memory at millions of members: peak RSS and wall time of `pparse tree`,
# `tree --json` and `nodes --json` on a tar of MEMBERS empty members, beside
# GNU `tar tf` on the same file (which lists and forgets: it keeps nothing).
#
#   peers/members.sh                 # MEMBERS=2000000 (a 1 GB tar)
#   MEMBERS=500000 peers/members.sh
#
# The tar is made at bench time in $BENCH_DIR (default /tmp/pparse-bench)
# by Python's tarfile (GNU format, names dNNNNN/fNNNNNNNN), once. The report
# gives bytes per member and the projection to 10 million members.
set -euo pipefail
cd "$(dirname "$0")/.."

MEMBERS=${MEMBERS:-2000000}
DIR=${BENCH_DIR:-/tmp/pparse-bench}
FILE="$DIR/members-$MEMBERS.tar"
mkdir -p "$DIR"

cargo build --release --quiet
BIN=target/release/pparse

if [ ! -s "$FILE" ]; then
    echo "making $FILE with tarfile ..." >&2
    python3 - "$MEMBERS" "$FILE" <<'PY'
import sys, tarfile
n, out = int(sys.argv[1]), sys.argv[2]
with tarfile.open(out, "w", format=tarfile.GNU_FORMAT) as t:
    ti = tarfile.TarInfo()
    for i in range(n):
        ti.name = f"d{i // 1000:05d}/f{i:08d}"
        t.addfile(ti)
PY
fi

printf '| command | wall s | peak RSS MiB | bytes per member | 10M members, projected |\n'
printf '|---|---|---|---|---|\n'
run() {
    local name=$1; shift
    /usr/bin/time -o "$DIR/t" -f '%e %M' "$@" > /dev/null 2> /dev/null || true
    read -r wall kib < <(tail -1 "$DIR/t")
    awk -v n="$name" -v w="$wall" -v k="$kib" -v m="$MEMBERS" 'BEGIN {
        b = k * 1024 / m
        printf "| %s | %.2f | %.0f | %.0f | %.1f GB |\n", n, w, k / 1024, b, b * 1e7 / 1e9 }'
}
run "tar tf" tar tf "$FILE"
# --no-index: each run parses the tar (a default run writes an index, which
# the next would read instead).
run "pparse tree" "$BIN" tree --no-index "$FILE"
run "pparse tree --json" "$BIN" tree --no-index --json "$FILE"
run "pparse nodes --json" "$BIN" nodes --no-index --json "$FILE"

# The explorer: parse to the end, expand the tar, jump to its last member,
# then read the peak RSS (VmHWM) of the running process. Driven through tmux
# and polled on what the screen shows, not on fixed sleeps.
if command -v tmux > /dev/null; then
    S=pparse-members-$$
    tmux new-session -d -s "$S" -x 150 -y 40 "$BIN --no-index $FILE"
    trap 'tmux kill-session -t "$S" 2> /dev/null || true' EXIT
    until_screen() {
        for _ in $(seq 1 1200); do
            tmux capture-pane -p -t "$S" | grep -q -- "$1" && return 0
            sleep 0.5
        done
        echo "explorer: timed out waiting for '$1'" >&2
        return 1
    }
    start=$(date +%s.%N)
    until_screen " parsed "
    tmux send-keys -t "$S" Right
    tmux send-keys -t "$S" End
    last=$(printf 'f%08d' $((MEMBERS - 1)))
    until_screen "$last"
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    pid=$(tmux list-panes -t "$S" -F '#{pane_pid}')
    kib=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
    tmux send-keys -t "$S" q
    awk -v w="$wall" -v k="$kib" -v m="$MEMBERS" 'BEGIN {
        b = k * 1024 / m
        printf "| pparse FILE (explorer: parsed, tar expanded, End) | %.2f | %.0f | %.0f | %.1f GB |\n", w, k / 1024, b, b * 1e7 / 1e9 }'
fi
