# Sourced by the other scripts: `make_venv DIR PYTHON EXTRAS` creates the virtualenv DIR with PYTHON and installs the
# project into it, editable, with EXTRAS ("dev" for the tests; "" for the package alone), when pyproject.toml changes.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"

make_venv() {
  local dir=$1 python=$2 extras=$3 hash
  hash=$(sha256sum pyproject.toml | cut -c1-16)
  if [ -f "$dir/.installed-$hash-dev" ] || [ -f "$dir/.installed-$hash-${extras:-package}" ]; then
    return 0  # installed already (the dev extras hold everything the package alone needs)
  fi
  if [ ! -x "$dir/bin/python" ]; then
    "$python" -m venv "$dir"
  fi
  "$dir/bin/python" -m pip install --quiet --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
  "$dir/bin/python" -m pip install --quiet -e ".${extras:+[$extras]}" 2>&1 | grep -v "^WARNING: Location" || true
  "$dir/bin/python" -c "import agency_swarm" # fail here, loudly, if the install did not work
  rm -f "$dir"/.installed-* && touch "$dir/.installed-$hash-${extras:-package}"
}
