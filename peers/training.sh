#!/usr/bin/env bash
# Benchmark (issue 35, item 8): training-style reads side by side, one machine, the
# same files. A zip of FILES small files (100-2,000 bytes, Python's zipfile, deflate)
# and the same files as a tar.gz (tarfile, gzip -6), read by PyTorch DataLoaders of
# WORKERS spawned workers through pparse (pparse.torch.MemberDataset and a plain
# dataset calling pparse.open, their index written once beforehand), fsspec's zip://
# and tar://, ratarmount (ratar://, its index written once beforehand too) and
# zipfile/tarfile opened per worker: random members locally and on an S3 server
# (moto, started here), a webdataset-style pass in archive order over the tar.gz
# (pparse.torch.MemberStream, tarfile "r|gz", webdataset), epochs 1 and 2 with
# pparse's shared cache over S3, and pparse.manifest over archives on S3 with a Dask
# LocalCluster of 1 and 2 workers (peers/training_bench.py).
#
# Usage: peers/training.sh
#   env: PPARSE_PYTHON (a python with pparse, torch, fsspec, s3fs, ratarmountcore,
#          dask[distributed], webdataset; default: a venv made in target/bench-venv
#          with the release build `pip install ./python`)
#        FILES=1000000  READS=50000  MID_READS=2000 (ratar:// on the tar.gz)
#        SLOW_READS=16 (tarfile, fsspec tar:// on the tar.gz)
#        S3_FILES=100000 (the first of the same files, in the S3 parts: moto reads the whole
#          object for every range request)  S3_READS=2000
#        S3_SLOW_READS=500 (fsspec zip:// over s3fs)  S3_TAR_READS=4 (fsspec tar://
#          over s3fs)  S3_RATAR_READS=200  WORKERS=2  BATCH=32
#        DASK_ARCHIVES=8  DASK_MEMBERS=20000  PARTS=local,memory,stream,s3,cache,dask
#        BENCH_DIR=/tmp/pparse-bench
#   needs: a system python3 with moto[server] and boto3 (the S3 server and uploads).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/target}
SYSTEM_PYTHON=$(command -v python3)
if [[ -z ${PPARSE_PYTHON:-} ]]; then
  VENV=target/bench-venv
  [[ -x $VENV/bin/python ]] || python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check \
    torch fsspec s3fs ratarmountcore rapidgzip indexed_gzip 'dask[distributed]' webdataset numpy
  echo "building the release wheel into $VENV ..." >&2
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --force-reinstall --no-deps ./python
  PPARSE_PYTHON=$VENV/bin/python
fi
"$SYSTEM_PYTHON" -c 'import moto.server, boto3' \
  || { echo "the system python3 needs moto[server] and boto3 for the S3 parts" >&2; exit 2; }
echo "# $(date -u '+%F %H:%M') UTC, commit $(git rev-parse --short HEAD), $(nproc) cores," \
  "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM"
echo "# load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PPARSE_PYTHON" - <<'EOF'
import importlib.metadata as m
names = ["pparse", "torch", "fsspec", "s3fs", "ratarmountcore", "rapidgzip", "indexed_gzip", "dask", "distributed", "webdataset"]
vers = []
for n in names:
    try:
        vers.append(f"{n} {m.version(n)}")
    except m.PackageNotFoundError:
        vers.append(f"{n} (not installed)")
import platform
print(f"# Python {platform.python_version()}; " + ", ".join(vers))
EOF
echo "# moto $("$SYSTEM_PYTHON" -c 'import moto; print(moto.__version__)') (system python3)"
"$PPARSE_PYTHON" peers/training_bench.py --dir "${BENCH_DIR:-/tmp/pparse-bench}" \
  --files "${FILES:-1000000}" --reads "${READS:-50000}" --mid-reads "${MID_READS:-2000}" \
  --slow-reads "${SLOW_READS:-16}" --s3-files "${S3_FILES:-100000}" --s3-reads "${S3_READS:-2000}" \
  --s3-slow-reads "${S3_SLOW_READS:-500}" --s3-tar-reads "${S3_TAR_READS:-4}" \
  --s3-ratar-reads "${S3_RATAR_READS:-200}" --workers "${WORKERS:-2}" --batch "${BATCH:-32}" \
  --dask-archives "${DASK_ARCHIVES:-8}" --dask-members "${DASK_MEMBERS:-20000}" \
  --parts "${PARTS:-local,memory,stream,s3,cache,dask}" --system-python "$SYSTEM_PYTHON"
echo
echo "# load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
