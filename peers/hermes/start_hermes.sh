#!/usr/bin/env bash
# Start hermes-agent's gateway with ONLY the API server platform enabled,
# bound to 127.0.0.1, its LLM provider pointed at a local OpenAI-compatible
# server (normally ../openai/fake_llm.py).
#
#   ./start_hermes.sh HERMES_PORT LLM_PORT [STATE_DIR]     (foreground)
#
# STATE_DIR (default: a new temporary folder) becomes HOME and holds
# HERMES_HOME=<STATE_DIR>/.hermes with a generated config.yaml, so nothing in
# the real home directory or in the repository is read or written.
# PEER_ENV         the venv built by .ci/peers.sh (default
#                  ${CHATKIT_PEERS_HOME:-$HOME/.cache/chatkit-trace/peers}/hermes)
# HERMES_API_KEY   bearer key (>= 16 chars or hermes refuses to start)
# HERMES_TOOLSETS  server-side toolsets (default: todo, which is harmless)
set -euo pipefail
HERMES_PORT="${1:?usage: start_hermes.sh HERMES_PORT LLM_PORT [STATE_DIR]}"
LLM_PORT="${2:?usage: start_hermes.sh HERMES_PORT LLM_PORT [STATE_DIR]}"
STATE_DIR="${3:-$(mktemp -d -t chatkit-hermes-XXXXXX)}"
PEER_ENV="${PEER_ENV:-${CHATKIT_PEERS_HOME:-$HOME/.cache/chatkit-trace/peers}/hermes}"
API_KEY="${HERMES_API_KEY:-chatkit-trace-local-key-0001}"
TOOLSETS="${HERMES_TOOLSETS:-todo}"

mkdir -p "${STATE_DIR}/.hermes"
STATE_DIR="$(cd "${STATE_DIR}" && pwd)"
cat > "${STATE_DIR}/.hermes/config.yaml" <<CFG
model:
  provider: custom
  default: fake-model
  base_url: http://127.0.0.1:${LLM_PORT}/v1
  api_key: sk-fake-local
  # an explicit context length stops hermes from asking a public model
  # catalogue for metadata (it would fail offline, slowly)
  context_length: 131072
security:
  # tirith is an optional pre-exec scanner that hermes downloads on first
  # start; offline that download just fails, so switch it off
  tirith_enabled: false
platform_toolsets:
  api_server: [${TOOLSETS}]
CFG

export HOME="${STATE_DIR}"
export HERMES_HOME="${STATE_DIR}/.hermes"
export TIRITH_ENABLED=false
export API_SERVER_ENABLED=true
export API_SERVER_HOST=127.0.0.1
export API_SERVER_PORT="${HERMES_PORT}"
export API_SERVER_KEY="${API_KEY}"
# belt and braces: any stray outbound HTTP(S) goes to a closed loopback port
export HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9
export http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
export PYTHONDONTWRITEBYTECODE=1
cd "${STATE_DIR}"
exec "$PEER_ENV/bin/hermes" gateway run -v
