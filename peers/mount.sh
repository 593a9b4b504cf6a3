#!/usr/bin/env bash
# Mounting a ~1 GB tar.gz of real files: pparse mount beside ratarmount.
#
# For each tool: time until the mount is there, time to list every file
# (`find -type f`), time to read the last member, 200 random 64 KiB reads
# across the members (one seed for both), the server's peak RSS. ratarmount
# runs twice: building its SQLite index (kept in BENCH_DIR, not beside the
# archive) and reusing it; so does pparse (its index in BENCH_DIR too). The
# last member's bytes are checked against `tar xzOf`.
#
# SKIP_RATARMOUNT=1 times pparse only.
# Needs: peers/run.sh's input ($BENCH_DIR/real.tar.gz; run it first),
# RATARMOUNT=/path/to/venv/bin/ratarmount (pip install ratarmount), root
# or FUSE permissions, a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench}
GZ=$BENCH_DIR/real.tar.gz
PPARSE=${PPARSE:-$PWD/target/release/pparse}
RATARMOUNT=${RATARMOUNT:-ratarmount}
PY=${PYTHON:-python3}
[[ -s $GZ ]] || { echo "no $GZ: run peers/run.sh first" >&2; exit 1; }
MNT=$BENCH_DIR/mnt
mkdir -p "$MNT"
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
wait_mounted() {
  local deadline=$(( $(date +%s) + 600 ))
  until grep -q " $MNT " /proc/mounts; do
    (( $(date +%s) < deadline )) || { echo "not mounted" >&2; exit 1; }
    sleep 0.02
  done
}
LAST=$(tar tzf "$GZ" | grep -v '/$' | tail -1)
WANT=$(tar xzOf "$GZ" "$LAST" | md5sum | cut -d' ' -f1)
echo "input: $(stat -c %s "$GZ") bytes; last member: $LAST"

run() {  # NAME PREFIX CMD...: mount with CMD, where files are at $MNT/$PREFIX
  local name=$1 prefix=$2; shift 2
  local t0 pid
  t0=$(now)
  "$@" > "$BENCH_DIR/mount.log" 2>&1 &
  wait_mounted
  local up; up=$(since "$t0")
  pid=$(pgrep -f -n -- "$MNT") || pid=""
  t0=$(now); local files; files=$(find "$MNT/$prefix" -type f | wc -l); local list; list=$(since "$t0")
  t0=$(now); local got; got=$(md5sum < "$MNT/$prefix$LAST" | cut -d' ' -f1); local last; last=$(since "$t0")
  [[ $got == "$WANT" ]] || echo "!!!!! $name: the last member differs from tar xzOf" >&2
  t0=$(now)
  "$PY" - "$MNT/$prefix" <<'PYEOF'
import os, random, sys
root = sys.argv[1]
paths = []
for d, _, fs in os.walk(root):
    for f in fs:
        p = os.path.join(d, f)
        if not os.path.islink(p) and os.path.getsize(p) > 0:
            paths.append(p)
paths.sort()
rnd = random.Random(42)
for _ in range(200):
    p = rnd.choice(paths)
    size = os.path.getsize(p)
    with open(p, "rb") as fh:
        fh.seek(rnd.randrange(size))
        fh.read(65536)
PYEOF
  local rand; rand=$(since "$t0")
  local rss="-"
  [[ -n $pid ]] && rss=$(awk '/VmHWM/ { printf "%d MiB", $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || echo "-")
  umount "$MNT"
  sleep 0.5
  printf '| %s | %s s | %s s (%s files) | %s s | %s s | %s |\n' "$name" "$up" "$list" "$files" "$last" "$rand" "$rss"
}

echo "| run | mounted after | list every file | read the last member | 200 random 64 KiB reads | server peak RSS |"
echo "|---|---|---|---|---|---|"
if [[ -z ${SKIP_RATARMOUNT:-} ]]; then
rm -f "$BENCH_DIR/rm.index.sqlite"
for i in 1 2; do
  label="ratarmount $( [[ $i == 1 ]] && echo '(builds its index)' || echo '(index reused)')"
  run "$label" "" "$RATARMOUNT" -f --index-file "$BENCH_DIR/rm.index.sqlite" "$GZ" "$MNT"
done
echo "ratarmount index: $(stat -c %s "$BENCH_DIR/rm.index.sqlite") bytes"
fi
TARNAME=$(basename "$GZ" .gz)
rm -f "$BENCH_DIR/real.mount.pidx"
for i in 1 2; do
  label="pparse mount $( [[ $i == 1 ]] && echo '(builds its index)' || echo '(index reused)')"
  run "$label" "$TARNAME/" "$PPARSE" mount "$GZ" "$MNT" --index "$BENCH_DIR/real.mount.pidx"
done
echo "pparse index: $(stat -c %s "$BENCH_DIR/real.mount.pidx") bytes"
