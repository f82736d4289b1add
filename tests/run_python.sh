#!/bin/sh
# Runs a .py test with the Python that has torch and h5py; skips (77) loudly when there is none.
if [ -z "${PYTHON_TORCH:-}" ]; then
  echo "SKIP: no Python with torch and h5py (apt-get install python3-torch python3-h5py)" >&2
  exit 77
fi
exec "$PYTHON_TORCH" "$@"
