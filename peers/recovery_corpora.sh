#!/usr/bin/env bash
# The gzip half of the recovery report (peers/recovery.sh) on several
# corpora of this machine's files, each damaged with random bytes and with
# zeros: Python's standard library, /usr/include, /usr/share/doc (text with
# nested .gz files) and the installed numpy package.
#
#   peers/recovery_corpora.sh            # HARD=4 SOFT=4 per corpus and fill
#   CORPORA="/usr/include" peers/recovery_corpora.sh
set -euo pipefail
cd "$(dirname "$0")/.."
NUMPY=$(python3 -c 'import numpy, os; print(os.path.dirname(numpy.__file__))' 2>/dev/null || true)
CORPORA=${CORPORA:-"$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])') /usr/include /usr/share/doc $NUMPY"}
BASE=${BENCH_DIR:-/tmp/pparse-bench}/corpora
for dir in $CORPORA; do
  [ -d "$dir" ] || continue
  for fill in random zeros; do
    echo "### $dir, $fill"
    echo
    SOURCE_DIR="$dir" BENCH_DIR="$BASE/$(echo "$dir" | tr / _)" FILL=$fill PARTS=gzip FINDER=0 \
      HARD=${HARD:-4} SOFT=${SOFT:-4} peers/recovery.sh
  done
done
