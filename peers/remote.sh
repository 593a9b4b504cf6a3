#!/usr/bin/env bash
# Remote files: pparse reading over HTTP (range requests) beside the usual
# way, downloading first.
#
# A range-capable server on loopback (peers/range_server.py) serves
# peers/run.sh's 1 GB tar.gz and peers/safetensors.sh's 1 GB safetensors.
# For each: `pparse tensors URL` / `pparse tree URL` with --io-stats (wall
# time, bytes fetched, requests, from the server's own counts too) beside
# `curl -s URL | tar tz` (streaming) and `curl -o` + the local command.
# Needs: python3, curl, a release build; BENCH_DIR as the other scripts.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench}
GZ=$BENCH_DIR/real.tar.gz
ST=$BENCH_DIR/model-200x5MiB.safetensors
[[ -s $GZ && -s $ST ]] || { echo "run peers/run.sh and peers/safetensors.sh first" >&2; exit 1; }
cargo build --release --quiet --bin pparse
PPARSE=$PWD/target/release/pparse
PORT=${PORT:-18765}
python3 peers/range_server.py "$BENCH_DIR" "$PORT" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/_stats" > /dev/null && break; sleep 0.1; done
URL=http://127.0.0.1:$PORT
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
served() { curl -s "$URL/_stats"; }

t0=$(now); "$PPARSE" tensors "$URL/$(basename "$ST")" --io-stats > "$BENCH_DIR/remote.out" 2> "$BENCH_DIR/remote.err"; t=$(since "$t0")
echo "pparse tensors over HTTP ($(stat -c %s "$ST") B file): $t s, $(wc -l < "$BENCH_DIR/remote.out") lines; $(tail -1 "$BENCH_DIR/remote.err" | grep -o 'fetched.*'); server: $(served)"
t0=$(now); curl -s -o "$BENCH_DIR/dl.safetensors" "$URL/$(basename "$ST")"; "$PPARSE" tensors "$BENCH_DIR/dl.safetensors" > /dev/null; t=$(since "$t0")
echo "curl -o, then pparse tensors: $t s"
rm -f "$BENCH_DIR/dl.safetensors"
t0=$(now); "$PPARSE" tree "$URL/$(basename "$GZ")" --io-stats > "$BENCH_DIR/remote.out" 2> "$BENCH_DIR/remote.err"; t=$(since "$t0")
echo "pparse tree over HTTP ($(stat -c %s "$GZ") B tar.gz): $t s; $(tail -1 "$BENCH_DIR/remote.err" | grep -o 'fetched.*'); server: $(served)"
t0=$(now); curl -s "$URL/$(basename "$GZ")" | tar tz > /dev/null; t=$(since "$t0")
echo "curl | tar tz: $t s"
t0=$(now); "$PPARSE" tree "$GZ" --no-index > /dev/null; t=$(since "$t0")
echo "pparse tree of the local file: $t s"
