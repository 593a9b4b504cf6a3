#!/usr/bin/env bash
# Block-compressed tars decoded on 1 and 2 threads (issue 37, item 2),
# beside the decoders people use on the same files.
#
# The input: the tar of parallel.sh (this machine's /usr/lib/x86_64-linux-gnu
# and /usr/lib/python3, about 730 MB), compressed once and kept in
# $BENCH_DIR:
#   usr.tar.bz2   lbzip2 -9 (900 kB blocks, one stream: what bzip2 -9 writes)
#   usr.tar.xz    xz -T2 -6 (blocks of 24 MiB, their sizes in their headers)
#   usr.tar.zst   pzstd -p2 -3 (independent frames)
#   usr.1.tar.zst zstd -T2 -3 (one frame: nothing to decode side by side)
#   usr.bgzf.tar.gz  bgzip -@2 (BGZF: gzip members of 64 KiB that give
#                 their size)
# Each command runs RUNS times; the table has the best wall time, the
# user CPU time of that run, its peak RSS (GNU time) and the decoded rate.
#
#   pparse tree --no-index --threads 1 | 2    list every member
#   pparse cat --no-index --threads 1 | 2     the last member's bytes (checked
#                                             against GNU tar's)
#   the format's decoders to /dev/null, bsdtar -tf, GNU tar -tf,
#   ratarmountcore building its index (parallelization 1 | 2)
#
# Needs: GNU tar, bzip2, xz, zstd, /usr/bin/time; lbzip2, pbzip2, pzstd,
# bgzip (tabix), bsdtar (libarchive-tools) and ratarmount
# (RATARMOUNT_PY=/path/to/python with it installed, default: the bench
# venv's) where installed; rows of missing tools are left out. FORMATS="bz2 xz zst 1.zst bgz" picks the
# files.
set -euo pipefail
cd "$(dirname "$0")/.."
source peers/lib.sh
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench}
RUNS=${RUNS:-3}
RM_PY=${RATARMOUNT_PY:-$PWD/target/bench-venv/bin/python}
FORMATS=${FORMATS:-bz2 xz zst 1.zst bgz}
mkdir -p "$BENCH_DIR"
TAR=$BENCH_DIR/usr.tar
if [[ ! -s $TAR ]]; then
  tar cf "$TAR.part" -C /usr lib/x86_64-linux-gnu lib/python3 2> /dev/null || true
  mv "$TAR.part" "$TAR"
fi
compress_once() {  # FILE COMMAND...
  local f=$1
  shift
  [[ -s $f ]] || { "$@" < "$TAR" > "$f.part" && mv "$f.part" "$f"; }
}
have() { command -v "$1" > /dev/null; }
cargo build --release --quiet --bin pparse
PPARSE=$PWD/target/release/pparse
decoded=$(stat -c %s "$TAR")
last=$(tar tf "$TAR" | grep -v '/$' | tail -1)
want=$(tar xOf "$TAR" "$last" | md5sum | cut -d' ' -f1)

echo "# $(date -u '+%Y-%m-%d %H:%M') UTC, commit $(git rev-parse --short HEAD), $(nproc) cores;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# $TAR: $decoded bytes; last member $last"

for fmt in $FORMATS; do
  case $fmt in
    bz2) f=$BENCH_DIR/usr.tar.bz2
      have lbzip2 && compress_once "$f" lbzip2 -9 -n 2 || compress_once "$f" bzip2 -9 ;;
    xz) f=$BENCH_DIR/usr.tar.xz; compress_once "$f" xz -T2 -6 ;;
    zst) f=$BENCH_DIR/usr.tar.zst; have pzstd && compress_once "$f" pzstd -p 2 -3 -c || continue ;;
    1.zst) f=$BENCH_DIR/usr.1.tar.zst; compress_once "$f" zstd -T2 -3 -c ;;
    bgz) f=$BENCH_DIR/usr.bgzf.tar.gz; have bgzip && compress_once "$f" bgzip -@ 2 -c || continue ;;
  esac
  name=$(basename "$f")
  inner=${name%.*}
  for t in 1 2; do
    got=$("$PPARSE" cat --no-index --threads "$t" "$f" "$inner/$last" | md5sum | cut -d' ' -f1)
    [[ $got == "$want" ]] || { echo "pparse cat --threads $t $name: the last member differs from tar's" >&2; exit 1; }
  done
  cmp <("$PPARSE" tree --no-index --threads 1 "$f") <("$PPARSE" tree --no-index --threads 2 "$f") \
    || { echo "$name: tree differs between 1 and 2 threads" >&2; exit 1; }
  echo
  echo "## $name: $(stat -c %s "$f") bytes"
  echo
  pparse_rows "$f" "$inner/$last"
  case $fmt in
    bz2)
      best_row "bzip2 -d" 1 bzip2 -dc "$f"
      if have lbzip2; then
        for t in 1 2; do best_row "lbzip2 -d -n$t" "$t" lbzip2 -dc -n "$t" "$f"; done
      fi
      if have pbzip2; then
        for t in 1 2; do best_row "pbzip2 -d -p$t" "$t" pbzip2 -dc -p"$t" "$f"; done
      fi
      tarflag=-j ;;
    xz)
      for t in 1 2; do best_row "xz -d -T$t" "$t" xz -dc -T"$t" "$f"; done
      tarflag=-J ;;
    bgz)
      for t in 1 2; do best_row "bgzip -d -@$t" "$t" bgzip -dc -@ "$t" "$f"; done
      best_row "gzip -d" 1 gzip -dc "$f"
      tarflag=-z ;;
    *)
      best_row "zstd -d" 1 zstd -dcq "$f"
      if have pzstd; then
        for t in 1 2; do best_row "pzstd -d -p$t" "$t" pzstd -dcq -p "$t" "$f"; done
      fi
      tarflag=--zstd ;;
  esac
  if have bsdtar; then
    best_row "bsdtar -tf" 1 bsdtar -tf "$f"
  fi
  best_row "GNU tar -tf $tarflag" "1 (+ decoder)" tar "$tarflag" -tf "$f"
  ratarmount_rows "$f"
done
