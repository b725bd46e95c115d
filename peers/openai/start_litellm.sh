#!/usr/bin/env bash
# Start the litellm proxy (a real OpenAI-compatible server) on loopback.
#
#   ./start_litellm.sh PROXY_PORT FAKE_LLM_PORT     (foreground)
#
# Uses litellm_config.yaml beside this script.  "mock-*" models need nothing
# else; "fake-*"/"bridge-*" models are forwarded to fake_llm.py, which must be
# running on FAKE_LLM_PORT.  Bearer key: sk-chatkit-trace-local.
# PEER_ENV  the venv built by .ci/peers.sh (default
#           ${CHATKIT_PEERS_HOME:-$HOME/.cache/chatkit-trace/peers}/openai)
set -euo pipefail
PORT="${1:?usage: start_litellm.sh PROXY_PORT FAKE_LLM_PORT}"
FAKE_PORT="${2:?usage: start_litellm.sh PROXY_PORT FAKE_LLM_PORT}"
HERE="$(cd "$(dirname "$0")" && pwd)"
PEER_ENV="${PEER_ENV:-${CHATKIT_PEERS_HOME:-$HOME/.cache/chatkit-trace/peers}/openai}"
export FAKE_LLM_BASE="http://127.0.0.1:${FAKE_PORT}/v1"
# use the model price map shipped inside the package instead of fetching one
export LITELLM_LOCAL_MODEL_COST_MAP=True
export LITELLM_TELEMETRY=False
export DISABLE_SCHEMA_UPDATE=True
# any stray outbound HTTP(S) goes to a closed loopback port
export HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9
export http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
export PYTHONDONTWRITEBYTECODE=1
exec "$PEER_ENV/bin/litellm" --config "$HERE/litellm_config.yaml" \
  --host 127.0.0.1 --port "${PORT}" --num_workers 1
