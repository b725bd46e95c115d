#!/usr/bin/env bash
# Start the scripted a2a-sdk server (protocol v1.0 and v0.3 on one endpoint).
#
#   ./start.sh PORT            (foreground; binds 127.0.0.1 only)
#
# PEER_ENV  the venv built by .ci/peers.sh (default
#           ${CHATKIT_PEERS_HOME:-$HOME/.cache/chatkit-trace/peers}/a2a)
set -euo pipefail
PORT="${1:?usage: start.sh PORT}"
HERE="$(cd "$(dirname "$0")" && pwd)"
PEER_ENV="${PEER_ENV:-${CHATKIT_PEERS_HOME:-$HOME/.cache/chatkit-trace/peers}/a2a}"
export HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9
export http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
export PYTHONDONTWRITEBYTECODE=1
exec "$PEER_ENV/bin/python" "$HERE/server.py" "$PORT"
