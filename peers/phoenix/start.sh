#!/usr/bin/env bash
# Start Arize Phoenix as an OTLP receiver with its own store and API.
#
#   ./start.sh HTTP_PORT GRPC_PORT WORKDIR     (foreground; binds 127.0.0.1 only)
#
# OTLP over HTTP: http://127.0.0.1:HTTP_PORT/v1/traces; over gRPC:
# 127.0.0.1:GRPC_PORT; REST API http://127.0.0.1:HTTP_PORT/v1, GraphQL
# /graphql.  Its SQLite store lives in WORKDIR.  Offline: no telemetry, no
# external resources, no sandbox providers (nothing is downloaded).
#
# PEER_ENV  the venv built by .ci/peers.sh (default
#           ${CHATKIT_PEERS_HOME:-$HOME/.cache/chatkit-trace/peers}/phoenix)
set -euo pipefail
HTTP_PORT="${1:?usage: start.sh HTTP_PORT GRPC_PORT WORKDIR}"
GRPC_PORT="${2:?usage: start.sh HTTP_PORT GRPC_PORT WORKDIR}"
WORKDIR="${3:?usage: start.sh HTTP_PORT GRPC_PORT WORKDIR}"
PEER_ENV="${PEER_ENV:-${CHATKIT_PEERS_HOME:-$HOME/.cache/chatkit-trace/peers}/phoenix}"
export HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9
export http_proxy=http://127.0.0.1:9 https_proxy=http://127.0.0.1:9
export NO_PROXY=127.0.0.1,localhost no_proxy=127.0.0.1,localhost
export PYTHONDONTWRITEBYTECODE=1
export PHOENIX_HOST=127.0.0.1 PHOENIX_PORT="$HTTP_PORT" PHOENIX_GRPC_PORT="$GRPC_PORT"
export PHOENIX_WORKING_DIR="$WORKDIR"
export PHOENIX_TELEMETRY_ENABLED=false PHOENIX_ALLOW_EXTERNAL_RESOURCES=false
export PHOENIX_ALLOWED_SANDBOX_PROVIDERS=NONE
exec "$PEER_ENV/bin/arize-phoenix" serve
