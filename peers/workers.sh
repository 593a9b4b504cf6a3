#!/usr/bin/env bash
# Benchmark (issue 35): random members of a zip of many small files and of the same
# files as a tar.gz, read by 2 worker processes (spawn, the reader pickled or opened in
# each, as a DataLoader's workers get a dataset) through pparse (its index written once
# beforehand), fsspec's zip:// and tar://, ratarmount's ratar:// (when ratarmount is
# installed) and Python's zipfile and tarfile; members/s for the whole job and a
# worker's peak RSS (peers/workers_bench.py).
#
# Usage: peers/workers.sh
#   env: PPARSE_PYTHON (a python with pparse and fsspec; default: a venv made in
#          target/bench-venv with the release build `pip install ./python`)
#        FILES=100000  READS=5000  WORKERS=2  BENCH_DIR=/tmp/pparse-bench
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z ${PPARSE_PYTHON:-} ]]; then
  VENV=target/bench-venv
  [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check fsspec
  echo "building the release wheel into $VENV ..." >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps ./python
  PPARSE_PYTHON=$VENV/bin/python
fi
echo "# $(date -u +%F) commit $(git rev-parse --short HEAD), $(nproc) cores"
"$PPARSE_PYTHON" peers/workers_bench.py --dir "${BENCH_DIR:-/tmp/pparse-bench}" \
  --files "${FILES:-100000}" --reads "${READS:-5000}" --workers "${WORKERS:-2}"
