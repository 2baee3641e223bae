# Sourced by test.sh: tests/agency/test_visualize.py draws the chart in a headless Chromium. As root on a Debian-like
# machine without it, install it with apt-get, and say so first; AGENCY_SWARM_SKIP_CHROMIUM=1 skips the install.
if command -v chromium >/dev/null || command -v chromium-browser >/dev/null; then
  :
elif [ "${AGENCY_SWARM_SKIP_CHROMIUM:-}" = 1 ]; then
  echo "== chromium: not installed, and AGENCY_SWARM_SKIP_CHROMIUM=1: tests/agency/test_visualize.py skips its browser test"
elif command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "== installing chromium with apt-get (running as root; tests/agency/test_visualize.py renders the chart in it)"
  echo "   set AGENCY_SWARM_SKIP_CHROMIUM=1 to skip this install (the browser test is then skipped)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1 \
    || echo "   could not install chromium; tests/agency/test_visualize.py will say what to do"
fi
