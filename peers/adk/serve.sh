#!/usr/bin/env bash
# Start ADK's own API server (FastAPI/uvicorn) with the scripted agent.
#
#   ./serve.sh PORT [--a2a]     (foreground; binds 127.0.0.1 only)
#
# Sessions, artifacts and memory are in memory (memory://), so nothing is
# written beside the agents.  --a2a also mounts ADK's A2A bridge for the agent
# at /a2a/chatkit_peer.
# PEER_ENV     the venv built by .ci/peers.sh (default
#              ${CHATKIT_PEERS_HOME:-$HOME/.cache/chatkit-trace/peers}/adk)
# AGENTS_DIR   agents folder to serve (default: ./agents beside this script;
#              the test harness passes a temporary copy)
set -euo pipefail
PORT="${1:?usage: serve.sh PORT [--a2a]}"; shift
HERE="$(cd "$(dirname "$0")" && pwd)"
PEER_ENV="${PEER_ENV:-${CHATKIT_PEERS_HOME:-$HOME/.cache/chatkit-trace/peers}/adk}"
AGENTS_DIR="${AGENTS_DIR:-$HERE/agents}"
# any stray outbound HTTP(S) goes to a closed loopback port
export HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9
export http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
export OTEL_SDK_DISABLED=true
export PYTHONDONTWRITEBYTECODE=1
exec "$PEER_ENV/bin/python" -m google.adk.cli api_server \
  --host 127.0.0.1 --port "$PORT" \
  --session_service_uri memory:// \
  --artifact_service_uri memory:// \
  --memory_service_uri memory:// \
  --log_level warning \
  "$@" \
  "$AGENTS_DIR"
