#!/usr/bin/env bash
# Recovery report (issue 15): damaged copies of a single-member tar.gz of
# real files (/usr/include unless SOURCE_DIR is given), read back by pparse
# and by GNU gzip + GNU tar, gzrecover (Debian's gzrt) + GNU tar, 7-Zip +
# GNU tar and bsdtar; see peers/recovery.py for what is counted. Then the
# deflate block finder's speed on bytes that hold no block: a gzip member
# whose deflate data turns into 64 MiB of random bytes, read by `pparse
# tree` (the finder scans every bit of them).
#
# Needs: GNU tar, gzip, python3; optional: gzrecover (apt install gzrt),
# 7z (apt install 7zip), bsdtar (apt install libarchive-tools).
# HARD=N and SOFT=N: damaged copies of each kind (default 5 each).
# Then the same tar as `bzip2 -9`, HARD+SOFT damaged copies, read back by
# pparse, bzip2 + GNU tar, bzip2recover + bzip2 + GNU tar, bsdtar and
# 7-Zip. PARTS="gzip" or PARTS="bzip2" runs one part only (PARTS=finder:
# the finder only); FILL=zeros damages with zeros instead of random bytes;
# FINDER=0 skips the finder. The finder alone, without the parse around
# it: `cargo bench --bench finder`.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench}/recovery
mkdir -p "$BENCH_DIR"
cargo build --release --quiet --bin pparse
PPARSE=$PWD/target/release/pparse
HARD=${HARD:-5} SOFT=${SOFT:-5} python3 peers/recovery.py "$PPARSE" "$BENCH_DIR" "${SOURCE_DIR:-/usr/include}"

[ "${FINDER:-1}" = 1 ] || exit 0
# Block finder speed: 1 MiB of real deflate data, then random bytes.
F=$BENCH_DIR/finder.gz
python3 - "$F" <<'PY'
import os, random, sys, zlib
rng = random.Random(1)
head = bytes(rng.getrandbits(8) for _ in range(1 << 20))
c = zlib.compressobj(6, zlib.DEFLATED, -15)
body = c.compress(head)  # no flush: the stream goes on into the noise
noise = os.urandom(64 << 20)
open(sys.argv[1], "wb").write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + body + noise)
PY
t0=$(date +%s%N)
"$PPARSE" tree "$F" --no-index > /dev/null 2>&1 || true
t1=$(date +%s%N)
awk -v a="$t0" -v b="$t1" 'BEGIN { s = (b - a) / 1e9; printf "Block finder on 64 MiB that hold no block: %.1f s, %.1f MB/s scanned\n", s, 67.1 / s }'
