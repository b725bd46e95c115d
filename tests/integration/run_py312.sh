#!/usr/bin/env bash
# The capture tests under Python 3.12+, where pip installs mitmproxy 12 (Python
# 3.11 gets 11.0.2: docs mitmproxy.md "Versions").  The virtual environment
# lives outside the clone and is reused:
#   ${CHATKIT_PY312_HOME:-$HOME/.cache/chatkit-trace/py312}/venv
# Python: $PYTHON312, else python3.12 on PATH, else pyenv's 3.12.x.  No Python
# 3.12 on the machine: says so and exits 0.  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/../.."
HOME312="${CHATKIT_PY312_HOME:-$HOME/.cache/chatkit-trace/py312}"

works() { [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 12))' >/dev/null 2>&1; }
PY=""
for cand in "${PYTHON312:-}" python3.12 \
    $(ls -d "$(pyenv root 2>/dev/null || echo /nonexistent)"/versions/3.12*/bin/python3.12 2>/dev/null) \
    /usr/bin/python3.12 /usr/local/bin/python3.12; do
  if works "$cand"; then PY="$cand"; break; fi
done
if [ -z "$PY" ]; then
  echo "run_py312.sh: no Python 3.12 found (set PYTHON312): capture tests under mitmproxy 12 skipped"
  exit 0
fi

VENV="$HOME312/venv"
if ! works "$VENV/bin/python"; then
  rm -rf "$VENV"
  mkdir -p "$HOME312"
  "$PY" -m venv "$VENV"
fi
if ! { "$VENV/bin/python" -m pip install -q --upgrade pip && "$VENV/bin/python" -m pip install -q -e '.[test]'; } \
    >"$HOME312/pip.log" 2>&1; then
  cat "$HOME312/pip.log"
  exit 1
fi
"$VENV/bin/python" - <<'PYEOF'
import sys
import mitmproxy.version as v
print(f"run_py312.sh: Python {sys.version.split()[0]}, mitmproxy {v.VERSION}")
if not v.VERSION.startswith("12."):
    sys.exit(f"expected mitmproxy 12 under Python 3.12, got {v.VERSION}")
PYEOF
exec "$VENV/bin/python" -m pytest tests/integration tests/capture tests/route -m "mitmdump or not mitmdump" -p no:cacheprovider "$@"
