#!/usr/bin/env bash
# Builds the `enigma` Python package as one abi3 wheel (the package runs on
# CPython >= 3.9) with maturin, installs it into a fresh virtual environment
# and runs the pytest suite in python/tests against the installed wheel.
#
# This script needs Python >= 3.11: its pinned test tools (numpy 2.4.6, which
# needs 3.11; pytest 9.2.0, which needs 3.10) do not install on older ones.
# PYTHON picks the interpreter (default python3); an older one is refused
# before anything is built or removed.
#
# Everything it makes lives under target/python/ (git-ignored). Each run
# builds into a new folder, target/python/builds/<time>-<pid>/ (venv/ and
# wheels/); only when the wheel is built, installed and its tests pass do
# target/python/venv and target/python/wheels (links) switch to it and older
# builds go. A failed run leaves the previous venv and wheel working and says
# where its own build is.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
OUT=target/python
MIN_PYTHON=3.11

MATURIN_VERSION=1.16.0
PYTEST_VERSION=9.2.0
NUMPY_VERSION=2.4.6
# The type checker python/tests/test_typed_surface.py runs on a user's file,
# and the completion library python/tests/test_kernel_language.py asks.
MYPY_VERSION=2.4.1
JEDI_VERSION=0.19.2
MLX_VERSION=0.32.4

if ! "$PYTHON" -c "import sys; sys.exit(0 if sys.version_info >= (${MIN_PYTHON/./, }) else 1)" 2>/dev/null; then
  echo "python/build_and_test.sh: needs Python >= $MIN_PYTHON for its pinned numpy $NUMPY_VERSION and pytest $PYTEST_VERSION;" \
    "$PYTHON is $("$PYTHON" -c 'import sys; print("Python", sys.version.split()[0])' 2>/dev/null || echo 'not a runnable Python'). Set PYTHON to a newer interpreter" \
    "(the package itself runs on 3.9 and later). Nothing was changed." >&2
  exit 2
fi

mkdir -p "$OUT/builds"
BUILD=$OUT/builds/$(date +%Y%m%d-%H%M%S)-$$
VENV=$BUILD/venv
WHEELS=$BUILD/wheels
on_exit() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "python/build_and_test.sh failed (exit $rc); this run's build is in $BUILD;" \
      "$OUT/venv and $OUT/wheels still hold the previous one (if any)." >&2
  fi
}
trap on_exit EXIT

echo "== python: fresh venv in $VENV ($("$PYTHON" --version)) =="
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "maturin==$MATURIN_VERSION" "pytest==$PYTEST_VERSION" "numpy==$NUMPY_VERSION" "mypy==$MYPY_VERSION" "jedi==$JEDI_VERSION"
# MLX's CPU build, for test_mlx.py (mx.array in and out, MLX's call
# convention, the export to mx.fast.metal_kernel); without it those tests
# say they skipped.
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "mlx[cpu]==$MLX_VERSION" \
  || echo "python/build_and_test.sh: mlx[cpu]==$MLX_VERSION did not install; test_mlx.py will skip and say so"

echo "== python: maturin build (abi3 wheel) =="
"$VENV/bin/maturin" build --release -m python/Cargo.toml -i "$VENV/bin/python" -o "$WHEELS"
WHEEL=$(ls "$WHEELS"/enigma-*-abi3-*.whl)
echo "built $WHEEL"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --force-reinstall "$WHEEL"

echo "== python: pytest =="
# Run from python/tests with -p no:cacheprovider so nothing is written into
# the source tree, and with the source package off sys.path: the tests import
# the installed wheel.
(cd python/tests && "../../$VENV/bin/python" -m pytest -p no:cacheprovider -q "$@")

# Switch to the new build: the links are replaced in one rename each, so
# there is always a working venv and wheel at the usual paths. A venv cannot
# be moved (its scripts name its path), so it stays where it was built.
stamp=${BUILD##*/}
for what in venv wheels; do
  if [ -e "$OUT/$what" ] && [ ! -L "$OUT/$what" ]; then
    rm -rf "$OUT/$what"   # a real folder from an older version of this script
  fi
  ln -sfn "builds/$stamp/$what" "$OUT/$what.new"
  mv -T "$OUT/$what.new" "$OUT/$what"
done
for old in "$OUT"/builds/*; do
  [ "$old" = "$BUILD" ] || rm -rf "$old"
done
echo "== python: $OUT/venv and $OUT/wheels now hold this build ($BUILD) =="
