#!/usr/bin/env bash
# One gzip stream decoded on 1 and 2 threads (issue 37), beside the
# decoders people use on the same file.
#
# The input: a tar.gz made here of this machine's /usr/lib/x86_64-linux-gnu
# and /usr/lib/python3 (GNU tar, gzip -6; about 730 MB decoded, 240 MB
# compressed), kept in $BENCH_DIR/usr.tar.gz for later runs. Each command
# runs RUNS times; the table has the best wall time, the user CPU time of
# that run, and its peak RSS (GNU time), and the decoded rate.
#
#   pparse tree --no-index --threads 1 | 2     list every member
#   pparse cat  --no-index --threads 1 | 2     the last member's bytes (checked
#                                              against GNU tar's)
#   rapidgzip -d -P1 | -P2, pigz -d, gzip -d   decode to /dev/null
#   bsdtar -tzf, GNU tar -tzf                  list every member
#   ratarmountcore, parallelization 1 | 2      builds its index (it lists
#                                              every member too)
#
# Needs: GNU tar, gzip, /usr/bin/time; pigz, bsdtar (libarchive-tools) and
# rapidgzip and ratarmount (RAPIDGZIP=/path, RATARMOUNT_PY=/path/to/python;
# default: the bench venv's, pip install rapidgzip ratarmount) where installed;
# rows of missing tools are left out.
set -euo pipefail
cd "$(dirname "$0")/.."
source peers/lib.sh
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench}
RUNS=${RUNS:-3}
RAPIDGZIP=${RAPIDGZIP:-$PWD/target/bench-venv/bin/rapidgzip}
RM_PY=${RATARMOUNT_PY:-$PWD/target/bench-venv/bin/python}
mkdir -p "$BENCH_DIR"
# GZ=/path/to/other.tar.gz times another tar.gz (issue 37 names the 10 GB
# one of `BIG=1 peers/index.sh`, $BENCH_DIR/big10.tar.gz).
GZ=${GZ:-$BENCH_DIR/usr.tar.gz}
TAR=$(basename "$GZ" .gz)
if [[ ! -s $GZ && $GZ == "$BENCH_DIR/usr.tar.gz" ]]; then
  tar cf - -C /usr lib/x86_64-linux-gnu lib/python3 2> /dev/null | gzip -6 > "$GZ.part"
  mv "$GZ.part" "$GZ"
fi
cargo build --release --quiet --bin pparse
PPARSE=$PWD/target/release/pparse
decoded=$(gzip -dc "$GZ" | wc -c)
last=$(tar tzf "$GZ" | grep -v '/$' | tail -1)
want=$(tar xzOf "$GZ" "$last" | md5sum | cut -d' ' -f1)
for t in 1 2; do
  got=$("$PPARSE" cat --no-index --threads "$t" "$GZ" "$TAR/$last" | md5sum | cut -d' ' -f1)
  [[ $got == "$want" ]] || { echo "pparse cat --threads $t: the last member differs from tar's" >&2; exit 1; }
done
cmp <("$PPARSE" tree --no-index --threads 1 "$GZ") <("$PPARSE" tree --no-index --threads 2 "$GZ") \
  || { echo "tree differs between 1 and 2 threads" >&2; exit 1; }

echo "# $(date -u '+%Y-%m-%d %H:%M') UTC, commit $(git rev-parse --short HEAD), $(nproc) cores;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $GZ: $(stat -c %s "$GZ") bytes, $decoded decoded; last member $last"
echo
pparse_rows "$GZ" "$TAR/$last"
if [[ -x $RAPIDGZIP ]]; then
  for t in 1 2; do
    best_row "rapidgzip -d -P$t" "$t" "$RAPIDGZIP" -d -P "$t" -c "$GZ"
  done
fi
if command -v pigz > /dev/null; then
  best_row "pigz -d" "1 (+ 3 for I/O and CRC)" pigz -d -c "$GZ"
fi
best_row "gzip -d" 1 gzip -d -c "$GZ"
if command -v bsdtar > /dev/null; then
  best_row "bsdtar -tzf" 1 bsdtar -tzf "$GZ"
fi
best_row "GNU tar -tzf" "1 (+ gzip)" tar -tzf "$GZ"
ratarmount_rows "$GZ"
