#!/usr/bin/env python3
"""Regenerate the raw captures in recordings/captures/<protocol>/ from the
REAL peer servers, using tests/realservers/harness.py.

    .ci/peers.sh                                   # once: build the envs
    .venv/bin/python recordings/captures/make_captures.py [adk a2a hermes openai]

For every scenario run it writes

    <protocol>/<scenario>.exchange.json   what was sent and received, per step:
                                          method, path, request headers and body,
                                          status, response headers (arrival order),
                                          ended_by, elapsed, and the body file name
    <protocol>/<scenario>.<step>.sse      response body bytes exactly as received
    <protocol>/<scenario>.<step>.json     (.sse for text/event-stream, .json for
    <protocol>/<scenario>.<step>.txt       JSON, .txt otherwise; HTTP de-chunked)

Slow scenarios are cut by the client after a few events. Every file must stay
under 20 KB; the script stops with an error if one does not.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.parse
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "tests"))

from realservers import harness
from realservers.harness import Exchange, RawResponse

MAX_FILE = 20 * 1024
SUFFIXES = (".sse", ".json", ".txt")


def _request_body(r: RawResponse):
    if not r.request_body:
        return None
    try:
        return json.loads(r.request_body)
    except ValueError:
        return r.request_body.decode("utf-8", "replace")


def _ext(r: RawResponse) -> str:
    if r.is_sse:
        return ".sse"
    if r.content_type.endswith("json"):
        return ".json"
    return ".txt"


def _write(path: Path, data: bytes) -> None:
    if len(data) >= MAX_FILE:
        raise SystemExit(f"{path} would be {len(data)} bytes (limit {MAX_FILE}); cut the scenario")
    path.write_bytes(data)


def save(outdir: Path, name: str, ex: Exchange, note: str = "") -> None:
    steps = []
    for step, r in ex.steps.items():
        body_file = f"{name}.{step}{_ext(r)}"
        _write(outdir / body_file, r.body)
        u = urllib.parse.urlsplit(r.url)
        steps.append({
            "step": step,
            "request": {
                "method": r.method,
                "path": u.path + (f"?{u.query}" if u.query else ""),
                "headers": r.request_headers,
                "body": _request_body(r),
            },
            "response": {
                "status": r.status,
                "reason": r.reason,
                "http_version": r.http_version,
                "headers": [[k, v] for k, v in r.headers],
                "body_file": body_file,
                "body_bytes": len(r.body),
                "ended_by": r.ended_by,
                "elapsed_s": round(r.elapsed, 3),
            },
        })
    meta = {"scenario": ex.name, "note": note, "ids": ex.ids, "steps": steps}
    _write(outdir / f"{name}.exchange.json", (json.dumps(meta, indent=1) + "\n").encode())
    print(f"  {name}: " + ", ".join(f"{s['step']}={s['response']['status']}" for s in steps))


def _clean(outdir: Path) -> None:
    outdir.mkdir(parents=True, exist_ok=True)
    for p in outdir.iterdir():
        if p.is_file() and p.suffix in SUFFIXES:
            p.unlink()


def _versions_note(peer: str) -> dict:
    freeze = harness.peer_env(peer) / ".chatkit-peer-freeze.txt"
    keep = ("google-adk", "google-genai", "a2a-sdk", "hermes-agent", "litellm", "openai",
            "aiohttp", "uvicorn", "starlette", "sse-starlette", "fastapi")
    out = {}
    if freeze.exists():
        for line in freeze.read_text().splitlines():
            name, _, ver = line.partition("==")
            if name.lower() in keep:
                out[name.lower()] = ver
    return out


def capture_adk() -> None:
    out = HERE / "adk"
    _clean(out)
    with harness.adk_server() as srv:
        for name in harness.ADK_SCENARIOS:
            save(out, name, srv.scenario(name))
    _write(out / "versions.json", (json.dumps(_versions_note("adk"), indent=1) + "\n").encode())


def capture_a2a() -> None:
    out = HERE / "a2a"
    _clean(out)
    with harness.a2a_server() as srv:
        card = Exchange("a2a-agent-card", steps={"card": srv.agent_card()})
        save(out, "agent-card", card,
             "GET /.well-known/agent-card.json (urls carry the run's port)")
        for version in harness.A2A_VERSIONS:
            tag = "v10" if version == "1.0" else "v03"
            for name in harness.A2A_SCENARIOS:
                save(out, f"{tag}-{name}", srv.scenario(name, version=version))
        mismatch = Exchange("a2a-version-mismatch", steps={
            "v10_method_without_header": srv.rpc("GetTask", {"id": "x"}, version="0.3"),
            "v03_method_with_header": srv.rpc("tasks/get", {"id": "x"}, version="1.0"),
        })
        save(out, "version-mismatch", mismatch)
    _write(out / "versions.json", (json.dumps(_versions_note("a2a"), indent=1) + "\n").encode())


def capture_hermes() -> None:
    out = HERE / "hermes"
    _clean(out)
    with harness.hermes_server() as srv:
        for name in harness.HERMES_SCENARIOS:
            save(out, name, srv.scenario(name))
    _write(out / "versions.json", (json.dumps(_versions_note("hermes"), indent=1) + "\n").encode())


def capture_openai() -> None:
    out = HERE / "openai"
    _clean(out)
    with harness.openai_server() as srv:
        for name in harness.OPENAI_SCENARIOS:
            save(out, name, srv.scenario(name))
    _write(out / "versions.json", (json.dumps(_versions_note("openai"), indent=1) + "\n").encode())


CAPTURES = {"adk": capture_adk, "a2a": capture_a2a, "hermes": capture_hermes,
            "openai": capture_openai}


def main(argv: list[str]) -> int:
    names = argv or list(CAPTURES)
    for n in names:
        if n not in CAPTURES:
            print(f"unknown protocol {n!r}; choose from {list(CAPTURES)}", file=sys.stderr)
            return 2
    for n in names:
        t0 = time.monotonic()
        print(f"{n}:")
        CAPTURES[n]()
        print(f"  done in {time.monotonic() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
