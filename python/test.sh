#!/usr/bin/env bash
# The Python package's tests: builds the package into a virtual
# environment of its own (target/python-venv), with the libraries the
# tests compare against, and runs pytest.
#
#   python/test.sh              # what .ci/run does, after the Rust tests
#   python/test.sh -k tensors   # pytest's own arguments pass through
#
# The extension is built with the `dev` profile, whose compiled
# dependencies `cargo test` has already made; `pip install ./python` on its
# own builds the optimised release wheel.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-target/python-venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check \
    numpy pandas pytest pillow safetensors onnx ml_dtypes abi3audit vermin fsspec s3fs "dask[distributed]" torch
MATURIN_PEP517_ARGS="--profile dev" "$VENV/bin/pip" install --quiet \
    --disable-pip-version-check --force-reinstall --no-deps ./python
# Only CPython 3.11 is on this machine: what makes the wheel good for 3.9
# and later is checked instead. The extension may use only the stable ABI
# of 3.9 (abi3audit reads its symbols), and the Python half no syntax or
# library newer than 3.9 (vermin).
"$VENV/bin/abi3audit" --strict --summary --assume-minimum-abi3 3.9 \
    "$VENV"/lib/python3*/site-packages/pparse/_pparse*.so
"$VENV/bin/vermin" --quiet --violations --no-tips -t=3.9- python/pparse
exec "$VENV/bin/python" -m pytest -q python/tests "$@"
