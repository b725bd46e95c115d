#!/usr/bin/env bash
# Build (or reuse) one virtual environment per real third-party peer server
# used by tests/realservers (see peers/README.md):
#
#   adk     google-adk api_server          peers/adk/requirements.txt
#   a2a     a2a-sdk server (v0.3 + v1.0)   peers/a2a/requirements.txt
#   hermes  hermes-agent API server        peers/hermes/requirements.txt
#   openai  litellm proxy                  peers/openai/requirements.txt
#   phoenix Arize Phoenix (OTLP receiver)  peers/phoenix/requirements.txt
#
# Each env lives OUTSIDE the clone, in
#   ${CHATKIT_PEERS_HOME:-$HOME/.cache/chatkit-trace/peers}/<name>
# and is reused when its stamp file (.chatkit-peer-stamp) holds the hash of
# its requirements file plus the interpreter version; otherwise it is rebuilt
# from scratch.  Their pins conflict with chatkit-trace's own dependencies, so
# they must never share the project's venv.
#
# Usage: .ci/peers.sh [NAME...]        (default: all five)
# Env:   CHATKIT_PEERS_HOME    where the envs go
#        CHATKIT_PEERS_PYTHON  interpreter for the envs (default python3.11,
#                              else python3)
#        CHATKIT_PEERS_FORCE=1 rebuild even when the stamp matches
# Exits non-zero (and says which env and why) when any install fails.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
USER_HOME="${HOME:-$(getent passwd "$(id -u)" | cut -d: -f6)}"
PEERS_HOME="${CHATKIT_PEERS_HOME:-$USER_HOME/.cache/chatkit-trace/peers}"
PY="${CHATKIT_PEERS_PYTHON:-python3.11}"
if ! "$PY" -c 'import sys' >/dev/null 2>&1; then PY=python3; fi
PY_VERSION="$("$PY" -c 'import sys; print(sys.version.split()[0])')"
# bump to force every env to rebuild when the build procedure itself changes
RECIPE_VERSION=1

# the module each env must be able to import once installed
declare -A CHECK=(
  [adk]="import google.adk.cli, a2a"
  [a2a]="import a2a.server.routes, uvicorn"
  [hermes]="import aiohttp, gateway.platforms.api_server"
  [openai]="import litellm.proxy.proxy_server"
  [phoenix]="import phoenix.server.main"
)

names=("$@")
[ ${#names[@]} -eq 0 ] && names=(adk a2a hermes openai phoenix)

mkdir -p "$PEERS_HOME"
echo "peers: envs in $PEERS_HOME (python $PY_VERSION from $(command -v "$PY"))"

summary=()
total_start=$SECONDS
for name in "${names[@]}"; do
  req="$ROOT/peers/$name/requirements.txt"
  if [ ! -f "$req" ]; then
    echo "peers: unknown peer '$name' (no $req)" >&2
    exit 2
  fi
  env="$PEERS_HOME/$name"
  stamp_file="$env/.chatkit-peer-stamp"
  want="$( { cat "$req"; echo "python=$PY_VERSION recipe=$RECIPE_VERSION"; } | sha256sum | cut -d' ' -f1)"
  t0=$SECONDS
  if [ "${CHATKIT_PEERS_FORCE:-0}" != 1 ] && [ -x "$env/bin/python" ] \
      && [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$want" ]; then
    echo "peers: $name: reusing $env (stamp matches)"
    summary+=("$name reused 0s $(du -sh "$env" | cut -f1)")
    continue
  fi
  echo "peers: $name: building $env from $req"
  rm -rf "$env"
  "$PY" -m venv "$env"
  log="$PEERS_HOME/$name.install.log"
  # the full pip log goes to $log; its tail is shown on failure
  if ! "$env/bin/pip" install --no-input -r "$req" >"$log" 2>&1; then
    echo "peers: $name: pip install FAILED; last lines of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  if ! "$env/bin/python" -c "${CHECK[$name]}" >>"$log" 2>&1; then
    echo "peers: $name: installed, but '${CHECK[$name]}' FAILED; last lines of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  "$env/bin/pip" freeze >"$env/.chatkit-peer-freeze.txt" 2>/dev/null || true
  echo "$want" >"$stamp_file"   # written last: a half-built env has no stamp
  dt=$((SECONDS - t0))
  size="$(du -sh "$env" | cut -f1)"
  echo "peers: $name: built in ${dt}s, $size"
  summary+=("$name built ${dt}s $size")
done
echo "peers: done in $((SECONDS - total_start))s"
for line in "${summary[@]}"; do echo "peers:   $line"; done
