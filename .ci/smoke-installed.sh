#!/usr/bin/env bash
# The product as a user installs it (issue 31): build the wheel and the sdist,
# install each one non-editable into a fresh virtual environment OUTSIDE the
# checkout, and run it from a folder outside the checkout, so nothing can
# come from the tree (no `chatkit_trace/` next to the working directory, no
# editable path hook):
#
#   demo --no-view                       the whole product on its built-in default
#   check  recordings/traces/*.db        a committed trace
#   mitmdump -s "$(chatkit-trace addon-path)" --listen-host 127.0.0.1 ...
#                                        one real stream of a real local backend
#                                        (chatkit-trace demo-backend) recorded in
#                                        reverse mode, then `check` and `runs` of it
#   report                               the HTML report of that recording
#   new-adapter my-proto                 the skeleton, installed, its tests run
#
# Usage: .ci/smoke-installed.sh [PYTHON]   (default python3.11, else python3)
# Every process it starts is stopped on the way out; the scratch folder is
# removed unless KEEP_SMOKE=1.
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
PY="${1:-${PYTHON:-python3.11}}"
command -v "$PY" >/dev/null || PY=python3
WORK="$(mktemp -d /tmp/chatkit-smoke.XXXXXX)"
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${PIDS[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ "${KEEP_SMOKE:-0}" != 1 ]; then rm -rf "$WORK"; else echo "smoke: kept $WORK"; fi
}
trap cleanup EXIT
fail() { echo "smoke: FAILED: $*" >&2; exit 1; }
say() { echo "smoke: $*"; }

# --- build both distributions from the checkout (isolated build, as pip does)
say "building the wheel and the sdist"
"$PY" -m venv "$WORK/build-env"
"$WORK/build-env/bin/python" -m pip install -q --upgrade pip build
"$WORK/build-env/bin/python" -m build --outdir "$WORK/dist" "$REPO" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log"; fail "python -m build"; }
# setuptools' own warnings (deprecated configuration, a license classifier
# ...) are Python warnings: "SetuptoolsDeprecationWarning", "_BetaConfiguration"
if grep -E "[A-Za-z]+Warning\b|!!" "$WORK/build.log" >&2; then
  fail "setuptools warns while building (above)"
fi
WHEEL="$(ls "$WORK"/dist/*.whl)"
SDIST="$(ls "$WORK"/dist/*.tar.gz)"

free_port() { "$VPY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

wait_listening() {  # wait_listening PORT PID LOG
  local i
  for i in $(seq 1 300); do
    if "$VPY" -c "import socket,sys; socket.create_connection(('127.0.0.1', $1), 0.2)" 2>/dev/null; then return 0; fi
    kill -0 "$2" 2>/dev/null || { cat "$3"; fail "process $2 exited before listening on $1"; }
    sleep 0.1
  done
  cat "$3"; fail "nothing listens on port $1 after 30 s"
}

smoke() {  # smoke NAME ARTIFACT
  local name="$1" artifact="$2"
  local env="$WORK/venv-$name" run="$WORK/run-$name"
  say "[$name] fresh venv, pip install $(basename "$artifact")"
  "$PY" -m venv "$env"
  "$env/bin/python" -m pip install -q --upgrade pip
  "$env/bin/python" -m pip install -q "$artifact"
  VPY="$env/bin/python"
  local ct="$env/bin/chatkit-trace"
  mkdir -p "$run"
  cd "$run"
  # the package imported is the installed one, not the checkout
  local where
  where="$("$VPY" -c 'import chatkit_trace, os; print(os.path.dirname(chatkit_trace.__file__))')"
  case "$where" in "$env"/*) ;; *) fail "[$name] chatkit_trace imported from $where, not from $env";; esac
  [ -f "$("$ct" addon-path)" ] || fail "[$name] addon-path names no file"

  say "[$name] demo --no-view"
  "$ct" demo --no-view --db "$run/demo.db" >"$run/demo.log" 2>&1 || { cat "$run/demo.log"; fail "[$name] demo --no-view"; }
  grep -q "recorded 11 sessions" "$run/demo.log" || { cat "$run/demo.log"; fail "[$name] demo recorded no sessions"; }

  say "[$name] check of a committed trace"
  local rc=0
  "$ct" check "$REPO/recordings/traces/openai.db" --format json -o "$run/openai.json" --fail-on never || rc=$?
  [ "$rc" = 0 ] || fail "[$name] check recordings/traces/openai.db exited $rc"
  "$VPY" - "$run/openai.json" <<'EOF' || fail "[$name] check's JSON"
import json, sys
summary = json.load(open(sys.argv[1]))["summary"]
assert summary["facts"] > 0, summary
EOF

  say "[$name] mitmdump -s \$(chatkit-trace addon-path) in reverse mode, one real stream"
  local bport pport
  bport="$(free_port)"
  "$ct" demo-backend --port "$bport" >"$run/backend.log" 2>&1 &
  PIDS+=($!)
  local backend=$!
  wait_listening "$bport" "$backend" "$run/backend.log"
  pport="$(free_port)"
  "$env/bin/mitmdump" -s "$("$ct" addon-path)" --listen-host 127.0.0.1 -p "$pport" \
    --mode "reverse:http://127.0.0.1:$bport" --set connection_strategy=lazy \
    --set chatkit_profile=myproto --set chatkit_db="$run/rec.db" >"$run/mitmdump.log" 2>&1 &
  PIDS+=($!)
  local proxy=$!
  wait_listening "$pport" "$proxy" "$run/mitmdump.log"
  "$VPY" - "$pport" <<'EOF' || { cat "$run/mitmdump.log"; fail "[$name] the stream through mitmdump"; }
import json, sys, urllib.request
req = urllib.request.Request(
    f"http://127.0.0.1:{sys.argv[1]}/sessions/smoke/runs",
    data=json.dumps({"runId": "run-1", "text": "hello"}).encode(),
    headers={"content-type": "application/json", "accept": "text/event-stream"},
)
body = urllib.request.urlopen(req, timeout=30).read().decode()
assert '"type": "done"' in body or '"type":"done"' in body, body
EOF
  kill -INT "$proxy"
  wait "$proxy" || fail "[$name] mitmdump exited $? on Ctrl-C"
  "$ct" check "$run/rec.db" --format json -o "$run/rec.json" --fail-on never || fail "[$name] check of the recording"
  "$VPY" - "$run/rec.json" <<'EOF' || fail "[$name] the recording's check"
import json, sys
summary = json.load(open(sys.argv[1]))["summary"]
assert summary["facts"] > 0 and summary["error"] == 0, summary
EOF
  "$ct" runs "$run/rec.db" --format json >"$run/runs.json" || fail "[$name] runs"
  "$VPY" - "$run/runs.json" <<'EOF' || { cat "$run/runs.json"; fail "[$name] the recorded run is not completed"; }
import json, sys
rows = json.load(open(sys.argv[1]))
assert [(r["session"], r["run"], r["status"]) for r in rows] == [("smoke", "run-1", "completed")], rows
EOF

  say "[$name] report"
  "$ct" report "$run/rec.db" -o "$run/report.html" >/dev/null || fail "[$name] report"
  grep -q "run-1" "$run/report.html" || fail "[$name] the report does not show run-1"

  say "[$name] new-adapter my-proto, installed, its tests"
  "$ct" new-adapter my-proto --dir "$run/my-proto" >/dev/null 2>&1 || fail "[$name] new-adapter"
  (cd "$run/my-proto" && "$VPY" -m pip install -q -e '.[test]' && "$env/bin/python" -m pytest -q -p no:cacheprovider) \
    >"$run/adapter.log" 2>&1 || { cat "$run/adapter.log"; fail "[$name] the new adapter's tests"; }
  tail -1 "$run/adapter.log"
  cd "$WORK"
  say "[$name] ok"
}

smoke wheel "$WHEEL"
smoke sdist "$SDIST"
say "ok: the wheel and the sdist install and run outside the checkout"
