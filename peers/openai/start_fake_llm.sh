#!/usr/bin/env bash
# Start the scripted OpenAI-compatible "model" (stdlib only, any python3).
#
#   ./start_fake_llm.sh PORT [extra fake_llm.py args]   (foreground)
#
# PYTHON  interpreter to use (default python3)
set -euo pipefail
PORT="${1:?usage: start_fake_llm.sh PORT [args]}"; shift
HERE="$(cd "$(dirname "$0")" && pwd)"
export PYTHONDONTWRITEBYTECODE=1
exec "${PYTHON:-python3}" "$HERE/fake_llm.py" --host 127.0.0.1 --port "${PORT}" "$@"
