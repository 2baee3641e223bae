# Sourced by test.sh: tests/protocols/test_ag_ui_js.py runs the official AG-UI client (@ag-ui/client, pinned in
# tests/js/package-lock.json) under node. Installs it with `npm ci` when the lock file changed; says so, loudly,
# when node or npm is missing or the install fails (the test then skips, naming what is missing).
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "== node/npm not found: tests/protocols/test_ag_ui_js.py (the official AG-UI client) will SKIP; install nodejs and npm"
else
  lock_stamp=tests/js/node_modules/.installed-$(sha256sum tests/js/package-lock.json | cut -c1-16)
  if [ ! -f "$lock_stamp" ]; then
    echo "== npm ci in tests/js (the AG-UI client for tests/protocols/test_ag_ui_js.py)"
    if (cd tests/js && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null); then
      touch "$lock_stamp"
    else
      echo "   npm ci failed: tests/protocols/test_ag_ui_js.py will SKIP"
    fi
  fi
fi
