#!/usr/bin/env bash
# Builds the `enigma` Python package as one abi3 wheel (CPython >= 3.9) with
# maturin, installs it into a fresh virtual environment and runs the pytest
# suite in python/tests against the installed wheel.
#
# Everything it makes lives under target/python/ (git-ignored): venv/ and
# wheels/. Tool versions are pinned. PYTHON picks the interpreter (default
# python3; numpy 2.4 needs 3.11 or newer for the tests).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
OUT=target/python
VENV=$OUT/venv
WHEELS=$OUT/wheels

MATURIN_VERSION=1.16.0
PYTEST_VERSION=9.2.0
NUMPY_VERSION=2.4.6

echo "== python: fresh venv in $VENV ($("$PYTHON" --version)) =="
rm -rf "$VENV" "$WHEELS"
mkdir -p "$OUT"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "maturin==$MATURIN_VERSION" "pytest==$PYTEST_VERSION" "numpy==$NUMPY_VERSION"

echo "== python: maturin build (abi3 wheel) =="
"$VENV/bin/maturin" build --release -m python/Cargo.toml -i "$VENV/bin/python" -o "$WHEELS"
WHEEL=$(ls "$WHEELS"/enigma-*-abi3-*.whl)
echo "built $WHEEL"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$WHEEL"

echo "== python: pytest =="
# Run from python/tests with -p no:cacheprovider so nothing is written into
# the source tree, and with the source package off sys.path: the tests import
# the installed wheel.
cd python/tests
"../../$VENV/bin/python" -m pytest -p no:cacheprovider -q "$@"
