#!/usr/bin/env bash
# Zip damage sweep beside 7-Zip and unzip (see peers/zip_recovery.py):
# a zip of Python's standard library (SOURCE_DIR to change it), COPIES
# damaged copies with 4 KiB of random bytes at PLACES offsets each.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_DIR=${BENCH_DIR:-/tmp/pparse-bench}/zip-recovery
mkdir -p "$BENCH_DIR"
cargo build --release --quiet --bin pparse
STDLIB=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
python3 peers/zip_recovery.py "$PWD/target/release/pparse" "$BENCH_DIR" "${SOURCE_DIR:-$STDLIB}"
