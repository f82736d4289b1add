#!/bin/sh
# Runs a .py test with the Python that has torch and h5py; fails naming the packages when configure
# found none (a missing install step, not a reason to skip).
if [ -z "${PYTHON_TORCH:-}" ]; then
  echo "FAIL: no Python with torch and h5py: install Debian's python3-torch python3-h5py python3-numpy" \
    "(tools/quickstart.sh test installs them), then configure again" >&2
  exit 1
fi
exec "$PYTHON_TORCH" "$@"
