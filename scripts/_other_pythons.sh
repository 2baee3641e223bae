# Sourced by test.sh: the fast tests on the other CPython versions pyproject.toml claims (3.12, 3.13), each in its
# own virtualenv (.venv-3.12, .venv-3.13) made as .venv is. The interpreter is pyenv's newest 3.X, else python3.X on
# PATH; a version not found is said and skipped. `other_pythons_start` installs their venvs in the background (while
# lint and type checks run), `other_pythons_wait` waits for them before the suite starts (so that no install takes
# CPU from the tests that bound a server's answer times), `other_pythons_test` runs their fast tests.
OTHER_PYTHONS=(3.12 3.13)
FAST_TESTS=(
  tests/project/test_python_versions.py tests/threads/test_lent_history.py tests/cli/test_cli.py
  tests/threads/test_threads.py tests/project/test_public_api.py tests/project/test_layers.py tests/agency/test_chart.py
  tests/turn/test_streaming.py tests/turn/test_tools.py tests/turn/test_approvals.py tests/turn/test_hooks.py
  tests/threads/test_file_store.py tests/threads/test_sql_store.py tests/serving/test_serving.py
)
declare -A OTHER_PYTHON_INSTALLS=()

find_python() {  # find_python 3.12 -> the path of an interpreter that is CPython 3.12, or nothing
  local version=$1 candidate
  for candidate in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$version".*/bin/"python$version" 2>/dev/null \
      | sort -V -r) $(command -v "python$version" 2>/dev/null); do
    if [ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$version" ]; then
      echo "$candidate"
      return 0
    fi
  done
}

other_pythons_start() {
  local version python
  trap 'wait' EXIT  # a run that fails earlier still lets the installs finish, so none is left half done
  for version in "${OTHER_PYTHONS[@]}"; do
    python=$(find_python "$version")
    if [ -z "$python" ]; then
      echo "== CPython $version: not found (pyenv's ${PYENV_ROOT:-$HOME/.pyenv}/versions/$version.*, or" \
        "python$version on PATH), so its fast tests are SKIPPED; install it (e.g. \`pyenv install $version\`)" \
        "to run them"
      continue
    fi
    echo "== CPython $version ($python): .venv-$version installs in the background; its fast tests run last"
    make_venv ".venv-$version" "$python" dev > ".venv-$version.log" 2>&1 &
    OTHER_PYTHON_INSTALLS[$version]=$!
  done
}

other_pythons_wait() {
  local version
  for version in "${OTHER_PYTHONS[@]}"; do
    [ -n "${OTHER_PYTHON_INSTALLS[$version]:-}" ] || continue
    if ! wait "${OTHER_PYTHON_INSTALLS[$version]}"; then
      cat ".venv-$version.log"
      echo "== CPython $version: installing .venv-$version failed (above)"
      return 1
    fi
  done
}

other_pythons_test() {
  local version
  for version in "${OTHER_PYTHONS[@]}"; do
    [ -n "${OTHER_PYTHON_INSTALLS[$version]:-}" ] || continue
    echo "== pytest, fast tests on CPython $version (.venv-$version)"
    ".venv-$version/bin/python" -m pytest -q -p no:cacheprovider "${FAST_TESTS[@]}"
  done
}
