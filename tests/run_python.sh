#!/bin/sh
# Runs a .py test with the Python that has torch and h5py; fails naming the packages when configure
# found none (a missing install step, not a reason to skip).
if [ -z "${PYTHON_TORCH:-}" ]; then
  echo "FAIL: no Python with torch and h5py: install Debian's python3-torch python3-h5py python3-numpy" \
    "(tools/quickstart.sh test installs them), then configure again" >&2
  exit 1
fi
# The MPI jobs a test starts keep their Open MPI session directories under a base of the test's own,
# as in tests/lib.sh (two tests' jobs racing on /tmp/ompi.HOST.UID fail in orte_init).
OMPI_MCA_orte_tmpdir_base=$(mktemp -d /tmp/hs-ompi.XXXXXX) || exit 99
export OMPI_MCA_orte_tmpdir_base
"$PYTHON_TORCH" "$@"
rc=$?
rm -rf "$OMPI_MCA_orte_tmpdir_base"
exit $rc
