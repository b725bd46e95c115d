"""Run the REAL third-party chat servers offline on 127.0.0.1 and drive them.

chatkit-trace's adapters are checked against the actual servers, not against
hand-written imitations.  Each server runs from its OWN virtual environment
(their pins conflict with ours), built by ``.ci/peers.sh`` in
``${CHATKIT_PEERS_HOME:-~/.cache/chatkit-trace/peers}/<name>``, from the recipe
files in ``peers/<name>/`` (requirements, scripted agents / fake model, start
scripts).  No server needs a network, a model or an API key: every model is
scripted.  This module uses only the standard library (plus pytest for
skip/fail) and never touches the network beyond 127.0.0.1.

Servers (context managers; each yields a server object, see below)
------------------------------------------------------------------
``adk_server()``      google-adk ``adk api_server`` with the scripted agent
                      ``chatkit_peer`` (peers/adk)                 -> AdkServer
``a2a_server()``      a2a-sdk 1.3 server, protocol v1.0 AND v0.3 on one
                      endpoint (peers/a2a)                         -> A2AServer
``hermes_server()``   hermes-agent gateway API server + the scripted model
                      ``fake_llm.py`` (peers/hermes, peers/openai) -> HermesServer
``openai_server()``   litellm proxy + ``fake_llm.py`` (peers/openai)
                      (alias ``litellm_server``)                   -> OpenAIServer
``phoenix_server()``  Arize Phoenix, an OTLP receiver (HTTP and gRPC) with
                      its own store and REST API (peers/phoenix)   -> PhoenixServer

Each one: finds its env (``peer_env(name)``), picks a free port on
127.0.0.1, starts the server in a new process group with offline settings
(HOME / XDG dirs / state in a temporary folder, proxies pointed at a closed
loopback port, telemetry off, no API keys inherited), polls readiness with a
bounded timeout (``CHATKIT_PEERS_START_TIMEOUT``, default 120 s), yields, and
always kills the whole process group on exit.  Server output (stdout+stderr)
goes to a temp file; ``srv.log_tail()`` returns its end, and a failed start
raises ``PeerStartError`` with that tail in the message.

Missing env: ``pytest.skip`` with a clear reason, unless
``CHATKIT_REQUIRE_PEERS=1`` (set by CI) - then ``pytest.fail``.

Every server object has ``base_url`` (``http://127.0.0.1:PORT``), ``port``,
``workdir``, ``log_tail(n)``, and the generic HTTP helpers
``request(method, path, body=None, headers=None, timeout=30)`` and
``stream(method, path, body=None, headers=None, max_events=None, timeout=60)``
(both -> ``RawResponse``) and ``open_stream(...)`` (-> ``Stream``, read it
incrementally while you do other calls: ``st.read(max_events=N, timeout=T)``
returns when N events are in, the body ended, or T passed - without closing;
``st.events``, ``st.done``, ``st.body``; ``st.read_all(T)`` / ``st.close()``
-> ``RawResponse``).  ``body`` may be bytes, str, or any
JSON value (encoded compactly).  Auth headers are added for hermes/litellm.

Raw results
-----------
``RawResponse`` holds what was sent and what was received, bytes as received
(after HTTP de-chunking, no decompression is asked for): ``method, url,
request_headers, request_body, status, reason, http_version, headers`` (list of
(name, value) in arrival order), ``body`` (bytes), ``elapsed`` (s),
``ended_by`` ("server": the body ended per its framing; "eof": the server
closed the connection before its framing said the body was complete;
"client": we closed it on purpose, e.g. after ``max_events``; "timeout":
still open when the time ran out, then closed; "error: ..."), and helpers
``header(name)``, ``json()``, ``sse()`` (list of ``SSEEvent(event, data, id,
raw)``, WHATWG parsing), ``sse_json()`` (JSON of every data field that is
JSON, e.g. skipping ``[DONE]``), ``sse_comments()``, ``head_text()``
(status line + headers, like ``curl -i``), ``request_text()``.
``Exchange`` is one named scenario run: ``steps`` (ordered dict name ->
RawResponse) and ``ids`` (session/task/run ids), indexable by step name.

Scenario drivers (each returns an ``Exchange``; the step names are listed)
-------------------------------------------------------------------------
AdkServer (app ``chatkit_peer``, user ``u1``):
  ``create_session(session_id=None, user_id)``, ``run_sse(session_id, text,
  streaming=True, max_events=None, timeout)``, ``run(session_id, text)``
  (blocking /run), ``get_session(session_id)`` = history, ``list_sessions()``.
  ``scenario(name)`` with name in ``ADK_SCENARIOS``:
  "text_tool" (thought + text + get_weather call, tool result, answer),
  "nostream" (same, ``streaming:false``), "error" (finish reason SAFETY ->
  errorCode), "fail" (model raises -> errorCode event + {"error"} frame),
  "slow" (client closes after ``slow_events`` frames; history then holds
  INVOCATION_ABORTED).  Steps: ``create``, ``stream``, ``history``.
  With ``adk_server(a2a_bridge=True)`` ADK's own A2A bridge is mounted too:
  ``a2a_bridge_stream(text, version)``, ``a2a_bridge_get_task(task_id, version)``.

A2AServer (versions "1.0" and "0.3"; v1.0 sends ``A2A-Version: 1.0``):
  ``message(text, version, task_id=None, context_id=None)`` (dict),
  ``rpc(method, params, version)``, ``stream_rpc(method, params, version,
  max_events, timeout)``, ``open_rpc_stream(...)``; ``method`` may be a
  logical name - send, stream, get, cancel, resubscribe, list - mapped per
  version by ``A2A_METHODS`` - or a literal method.  ``agent_card()``,
  ``get_task(task_id, version)``, ``cancel_task``, ``list_tasks``.
  ``A2AServer.task_ids(resp)`` -> (task_id, context_id) from a stream.
  ``scenario(name, version)`` with name in ``A2A_SCENARIOS``:
  "text", "tool", "fail", "crash": steps ``stream``, ``history`` (tasks/get);
  "input": ``stream``, ``history_turn1``, ``stream_turn2``, ``history``;
  "slow_cancel": ``stream`` (main stream), ``resubscribe``, ``cancel``,
  ``history``;  "context": ``send``, ``stream2`` (+ ``list`` on v1.0);
  "errors": ``get_unknown``, ``cancel_terminal``, ``resubscribe_terminal``,
  ``unknown_method``.

HermesServer (bearer key handled; scenario words go to the fake model):
  ``post_run(input, session_id=None, **fields)``, ``run_events(run_id,
  max_events, timeout)``, ``open_run_events(run_id)``, ``get_run(run_id)``,
  ``stop_run(run_id)``, ``wait_run(run_id, timeout)`` (polls until a terminal
  status), ``create_session()``, ``session_chat_stream(session_id, message)``,
  ``session_messages(session_id)`` = history, ``chat_completions(prompt)``,
  ``responses(input)``, ``capabilities()``.
  ``scenario(name)`` with name in ``HERMES_SCENARIOS``:
  "runs_text", "runs_tool", "runs_reasoning", "runs_fail" (model HTTP 400),
  "runs_midstream" (model stream breaks; hermes retries, reports completed):
  steps ``post``, ``events``, ``status``;
  "runs_stop": ``post``, ``events`` (slow run, stopped after a few deltas),
  ``stop``, ``status``;  "runs_session": ``create`` (POST /api/sessions),
  ``post`` (run with that session_id), ``events``, ``status``, ``history``;
  "runs_two_subscribers": ``post``, ``events_a``, ``events_b`` (two concurrent
  subscribers of one slow run; hermes splits the events between them),
  ``stop``, ``status``;
  "session_text", "session_tool", "session_fail": ``create``, ``stream``,
  ``history``;  "chat_text", "chat_tool", "chat_fail": ``stream``;
  "responses_tool", "responses_fail": ``stream``.

OpenAIServer (litellm proxy, key ``sk-chatkit-trace-local``; model names in
peers/openai/litellm_config.yaml: ``mock-*`` answered by litellm itself,
``fake-<scenario>`` forwarded to fake_llm.py, ``bridge-<scenario>`` for the
Responses API bridged onto chat completions):
  ``chat(model, prompt_or_messages, tools=None, stream=True,
  include_usage=True, max_events, timeout, **fields)``, ``responses(model,
  input, tools=None, ...)``, ``models()``.
  ``scenario(name)`` with name in ``OPENAI_SCENARIOS``:
  "text", "mock_text", "reasoning", "length", "midstream" (error frame, no
  [DONE]), "ratelimit" (HTTP 429), "error_before_stream" (HTTP error),
  "slow_stop" (client closes after a few chunks): step ``stream``;
  "tool": ``turn1``, ``turn2`` (the OpenAI tool loop); "responses_text",
  "responses_tool", "responses_reasoning", "responses_midstream": ``stream``.

Use from tests
--------------
Tests under ``tests/realservers/`` get session-scoped fixtures from its
conftest.py (``adk_peer``, ``adk_bridge_peer``, ``a2a_peer``, ``hermes_peer``,
``openai_peer``: one server each per test session, started on first use) and
import this module relatively.  Mark them ``@pytest.mark.realserver``::

    from .harness import A2A_VERSIONS

    @pytest.mark.realserver
    def test_adk_decodes(adk_peer):
        ex = adk_peer.scenario("text_tool")
        frames = ex["stream"].sse_json()      # or ex["stream"].body (raw bytes)
        history = ex["history"].json()

Outside pytest (scripts), put ``tests/`` on sys.path and ``from
realservers.harness import adk_server``; ``with adk_server() as srv: ...``
(see recordings/captures/make_captures.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = REPO_ROOT / "peers"
PEER_NAMES = ("adk", "a2a", "hermes", "openai", "phoenix")
STAMP_FILE = ".chatkit-peer-stamp"

HERMES_API_KEY = "chatkit-trace-local-key-0001"
LITELLM_API_KEY = "sk-chatkit-trace-local"

ADK_SCENARIOS = ("text_tool", "nostream", "error", "fail", "slow")
A2A_SCENARIOS = ("text", "tool", "fail", "crash", "input", "slow_cancel", "context", "errors")
A2A_VERSIONS = ("1.0", "0.3")
HERMES_SCENARIOS = (
    "runs_text", "runs_tool", "runs_reasoning", "runs_fail", "runs_midstream", "runs_stop",
    "runs_session", "runs_two_subscribers", "session_text", "session_tool", "session_fail",
    "chat_text", "chat_tool", "chat_fail", "responses_tool", "responses_fail",
)
OPENAI_SCENARIOS = (
    "text", "mock_text", "reasoning", "length", "midstream", "ratelimit", "error_before_stream",
    "slow_stop", "tool", "responses_text", "responses_tool", "responses_reasoning",
    "responses_midstream",
)

A2A_METHODS = {
    "1.0": {
        "send": "SendMessage", "stream": "SendStreamingMessage", "get": "GetTask",
        "cancel": "CancelTask", "resubscribe": "SubscribeToTask", "list": "ListTasks",
    },
    "0.3": {
        "send": "message/send", "stream": "message/stream", "get": "tasks/get",
        "cancel": "tasks/cancel", "resubscribe": "tasks/resubscribe",
    },
}


# ---------------------------------------------------------------------------
# Environments
# ---------------------------------------------------------------------------
class PeerStartError(RuntimeError):
    """A peer server did not come up (message holds the tail of its log)."""


def peers_home() -> Path:
    """Where .ci/peers.sh keeps the envs."""
    env = os.environ.get("CHATKIT_PEERS_HOME")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "chatkit-trace" / "peers"


def _require_peers() -> bool:
    value = os.environ.get("CHATKIT_REQUIRE_PEERS", "").strip().lower()
    return value not in ("", "0", "false", "no")


def peer_env(name: str) -> Path:
    """Path of a complete env for peer ``name``, or skip/fail the test.

    An env counts as present when it has ``bin/python`` and the stamp file
    .ci/peers.sh writes after a successful install.  Missing: pytest.skip
    with the command to run, or pytest.fail when CHATKIT_REQUIRE_PEERS=1.
    """
    if name not in PEER_NAMES:
        raise ValueError(f"unknown peer {name!r}; expected one of {PEER_NAMES}")
    env = peers_home() / name
    if (env / "bin" / "python").exists() and (env / STAMP_FILE).is_file():
        return env
    reason = (
        f"real-server env for {name!r} not found at {env} "
        f"(build it with `.ci/peers.sh {name}`; CHATKIT_PEERS_HOME overrides the location)"
    )
    if _require_peers():
        pytest.fail(f"CHATKIT_REQUIRE_PEERS is set but {reason}", pytrace=False)
    pytest.skip(reason)
    raise AssertionError("unreachable")  # pragma: no cover


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_timeout() -> float:
    return float(os.environ.get("CHATKIT_PEERS_START_TIMEOUT", "120"))


def offline_env(workdir: Path, **extra: str) -> dict[str, str]:
    """A fresh, minimal environment for a peer process.

    Nothing is inherited but PATH/locale: no API keys, no proxies, no HOME.
    HOME and the XDG folders live in ``workdir``; outbound HTTP(S) is pointed
    at a closed loopback port; telemetry switches are off.
    """
    home = workdir / "home"
    for sub in ("", ".cache", ".config", ".local/share"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(
        HOME=str(home),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local/share"),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        PYTHONNOUSERSITE="1",
        HTTP_PROXY="http://127.0.0.1:9",
        HTTPS_PROXY="http://127.0.0.1:9",
        http_proxy="http://127.0.0.1:9",
        https_proxy="http://127.0.0.1:9",
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        OTEL_SDK_DISABLED="true",
        DO_NOT_TRACK="1",
        ANONYMIZED_TELEMETRY="False",
        HF_HUB_OFFLINE="1",
    )
    env.update(extra)
    return env


class PeerProcess:
    """One server subprocess in its own process group, output to a log file."""

    def __init__(self, label: str, argv: list[str], *, env: dict[str, str], cwd: Path, log: Path):
        self.label = label
        self.argv = argv
        self.log = log
        self._log_fh = open(log, "wb")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
            stdout=self._log_fh, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.pgid = self.proc.pid  # start_new_session: the child leads its own group

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, n: int = 40) -> str:
        try:
            data = self.log.read_bytes()
        except OSError:
            return ""
        lines = data.decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-n:])

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM the whole group, then SIGKILL whatever is left."""
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.pgid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            # the leader is gone; make sure no child of the group survives
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self._log_fh.close()


def _wait_ready(procs: list[PeerProcess], url: str, timeout: float,
                ok: Callable[[int, bytes], bool] | None = None) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer yet"
    while time.monotonic() < deadline:
        for p in procs:
            if not p.alive():
                raise PeerStartError(
                    f"{p.label} exited with code {p.proc.returncode} before {url} answered; "
                    f"last lines of its log ({p.log}):\n{p.tail()}"
                )
        try:
            r = http_request("GET", url, timeout=2.0)
            if (ok or (lambda s, b: s == 200))(r.status, r.body):
                return
            last = f"HTTP {r.status}: {r.body[:200]!r}"
        except OSError as e:
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.25)
    tails = "\n".join(f"--- {p.label} ({p.log}):\n{p.tail()}" for p in procs)
    raise PeerStartError(f"{url} not ready after {timeout:.0f}s (last: {last}); logs:\n{tails}")


# ---------------------------------------------------------------------------
# HTTP: raw responses and streams
# ---------------------------------------------------------------------------
@dataclasses.dataclass
class SSEEvent:
    """One dispatched server-sent event (WHATWG rules)."""

    event: str | None
    data: str
    id: str | None
    raw: bytes  # the event's lines as received (normalised to \n)

    def json(self) -> Any:
        return json.loads(self.data)


def parse_sse(body: bytes) -> tuple[list[SSEEvent], list[str]]:
    """Split an SSE body into events and comments (WHATWG parsing rules).

    Only complete events (ended by a blank line) are returned.  Events with no
    data field are not dispatched, as in a browser's EventSource.
    """
    text = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    events: list[SSEEvent] = []
    comments: list[str] = []
    blocks = text.split(b"\n\n")
    for block in blocks[:-1]:  # the last piece is unterminated
        ev_name = None
        ev_id = None
        data: list[str] = []
        for line in block.split(b"\n"):
            s = line.decode("utf-8", "replace")
            if not s:
                continue
            if s.startswith(":"):
                comments.append(s[1:].lstrip(" "))
                continue
            field, sep, value = s.partition(":")
            if sep and value.startswith(" "):
                value = value[1:]
            if field == "data":
                data.append(value)
            elif field == "event":
                ev_name = value
            elif field == "id":
                ev_id = value
        if data:
            events.append(SSEEvent(ev_name, "\n".join(data), ev_id, block + b"\n\n"))
    return events, comments


def _count_events(body: bytes) -> int:
    text = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    n = 0
    for block in text.split(b"\n\n")[:-1]:
        if any(line.startswith(b"data") for line in block.split(b"\n")):
            n += 1
    return n


@dataclasses.dataclass
class RawResponse:
    """One HTTP exchange, with the response exactly as received (de-chunked)."""

    method: str
    url: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int
    reason: str
    http_version: str
    headers: list[tuple[str, str]]
    body: bytes
    elapsed: float
    ended_by: str  # "server" | "client" | "timeout" | "error: ..."

    def header(self, name: str) -> str | None:
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    @property
    def content_type(self) -> str:
        return (self.header("content-type") or "").split(";")[0].strip().lower()

    @property
    def is_sse(self) -> bool:
        return self.content_type == "text/event-stream"

    def json(self) -> Any:
        return json.loads(self.body)

    def sse(self) -> list[SSEEvent]:
        return parse_sse(self.body)[0]

    def sse_comments(self) -> list[str]:
        return parse_sse(self.body)[1]

    def sse_json(self) -> list[Any]:
        """The JSON value of every event whose data is JSON (skips ``[DONE]``)."""
        out = []
        for ev in self.sse():
            try:
                out.append(json.loads(ev.data))
            except ValueError:
                continue
        return out

    def head_text(self) -> str:
        lines = [f"{self.http_version} {self.status} {self.reason}"]
        lines += [f"{k}: {v}" for k, v in self.headers]
        return "\r\n".join(lines) + "\r\n\r\n"

    def request_text(self) -> str:
        """The request as text: request line, headers, blank line, body."""
        head = [f"{self.method} {self.url}"]
        head += [f"{k}: {v}" for k, v in self.request_headers.items()]
        return "\n".join(head) + "\n\n" + self.request_body.decode("utf-8", "replace") + "\n"

    def summary(self) -> str:
        return (f"{self.method} {self.url} -> {self.status} {self.content_type or '-'} "
                f"{len(self.body)}B ended_by={self.ended_by} in {self.elapsed:.2f}s")


def _encode_body(body: Any) -> bytes:
    if body is None:
        return b""
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return json.dumps(body, separators=(",", ":")).encode()


class _ChunkedDecoder:
    """Incremental decoder for ``Transfer-Encoding: chunked`` bodies."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._left = 0  # bytes of chunk data still expected
        self._state = "size"  # size | data | data_crlf | trailer | done

    @property
    def done(self) -> bool:
        return self._state == "done"

    def feed(self, data: bytes) -> bytes:
        self._buf += data
        out = bytearray()
        while True:
            if self._state == "size":
                i = self._buf.find(b"\r\n")
                if i < 0:
                    break
                line = bytes(self._buf[:i]).split(b";", 1)[0].strip()
                del self._buf[:i + 2]
                size = int(line, 16)
                if size == 0:
                    self._state = "trailer"
                else:
                    self._left, self._state = size, "data"
            elif self._state == "data":
                if not self._buf:
                    break
                take = bytes(self._buf[:self._left])
                del self._buf[:len(take)]
                out += take
                self._left -= len(take)
                if self._left == 0:
                    self._state = "data_crlf"
            elif self._state == "data_crlf":
                if len(self._buf) < 2:
                    break
                del self._buf[:2]
                self._state = "size"
            elif self._state == "trailer":
                i = self._buf.find(b"\r\n")
                if i < 0:
                    break
                line = bytes(self._buf[:i])
                del self._buf[:i + 2]
                if not line:
                    self._state = "done"
            else:
                break
        return bytes(out)


class Stream:
    """An HTTP/1.1 response read incrementally (for SSE and long bodies).

    A tiny client on a plain socket, so that waiting is never destructive:
    ``read(max_events=N, timeout=T)`` returns as soon as the body holds at
    least N complete SSE events (counted from the start), the body ended, or
    T seconds passed - and the stream stays open, so you can do other calls
    and read on.  ``read_all(T)`` reads to the end and, if T runs out first,
    closes it (``ended_by`` "timeout").  ``close()`` ends it from the client
    side (``ended_by`` "client") and returns the ``RawResponse``; use the
    Stream as a context manager to always close it.

    ``ended_by``: None while open; "server" when the body ended per its
    framing (chunked terminator, Content-Length, or EOF for an unframed
    body); "eof" when the server closed the connection before its framing
    said the body was complete; "client"; "timeout"; "error: ...".
    The body is de-chunked; no compression is asked for.
    """

    MAX_BYTES = 4 * 1024 * 1024

    def __init__(self, method: str, url: str, *, body: Any = None,
                 headers: dict[str, str] | None = None, timeout: float = 30.0):
        self.method = method
        self.url = url
        u = urllib.parse.urlsplit(url)
        if u.hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"harness only talks to loopback, not {url}")
        path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self.request_body = _encode_body(body)
        hdrs = dict(headers or {})
        if self.request_body and not any(k.lower() == "content-type" for k in hdrs):
            hdrs["Content-Type"] = "application/json"
        wire = {"Host": f"{u.hostname}:{u.port}", "Accept-Encoding": "identity", **hdrs}
        if self.request_body or method in ("POST", "PUT", "PATCH"):
            wire["Content-Length"] = str(len(self.request_body))
        self.request_headers = wire  # exactly what is sent, in order
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in wire.items())
        self._t0 = time.monotonic()
        self._elapsed: float | None = None
        self.body = bytearray()
        self.ended_by: str | None = None
        self._sock = socket.create_connection((u.hostname, u.port), timeout=timeout)
        try:
            self._sock.sendall(head.encode("latin-1") + b"\r\n" + self.request_body)
            self._read_head(time.monotonic() + timeout)
        except BaseException:
            self._sock.close()
            raise

    def _recv(self, deadline: float) -> bytes | None:
        """Bytes from the socket; b"" at EOF; None if nothing came by ``deadline``."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        ready, _, _ = select.select([self._sock], [], [], remaining)
        if not ready:
            return None
        return self._sock.recv(65536)

    def _read_head(self, deadline: float) -> None:
        buf = bytearray()
        while b"\r\n\r\n" not in buf:
            data = self._recv(deadline)
            if data is None:
                raise TimeoutError(f"no response head from {self.url} in time")
            if not data:
                raise ConnectionError(f"{self.url} closed the connection before a response head")
            buf += data
        head, _, rest = bytes(buf).partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        version, _, status_reason = lines[0].partition(" ")
        status, _, reason = status_reason.partition(" ")
        self.http_version = version
        self.status = int(status)
        self.reason = reason
        self.headers: list[tuple[str, str]] = []
        for line in lines[1:]:
            k, _, v = line.partition(":")
            self.headers.append((k.strip(), v.strip()))
        hmap = {k.lower(): v for k, v in self.headers}
        self._chunked: _ChunkedDecoder | None = None
        self._length: int | None = None
        if self.method == "HEAD" or self.status in (204, 304) or 100 <= self.status < 200:
            self._length = 0
        elif "chunked" in hmap.get("transfer-encoding", "").lower():
            self._chunked = _ChunkedDecoder()
        elif "content-length" in hmap:
            self._length = int(hmap["content-length"])
        self._feed(rest)

    def _feed(self, data: bytes) -> None:
        if self._chunked is not None:
            self.body += self._chunked.feed(data)
            if self._chunked.done:
                self._finish("server")
        else:
            self.body += data
            if self._length is not None and len(self.body) >= self._length:
                del self.body[self._length:]
                self._finish("server")
        if self.ended_by is None and len(self.body) > self.MAX_BYTES:
            self._finish("client")

    @property
    def events(self) -> int:
        """Complete SSE events (with data) received so far."""
        return _count_events(bytes(self.body))

    @property
    def done(self) -> bool:
        return self.ended_by is not None

    def read(self, *, max_events: int | None = None, timeout: float = 30.0,
             until: Callable[[Stream], bool] | None = None) -> Stream:
        """Read until the body ends, holds ``max_events`` events, ``until(self)``
        is true, or ``timeout`` seconds pass.  Never closes on timeout."""
        deadline = time.monotonic() + timeout
        while self.ended_by is None:
            if max_events is not None and self.events >= max_events:
                break
            if until is not None and until(self):
                break
            try:
                data = self._recv(deadline)
            except OSError as e:
                self._finish(f"error: {type(e).__name__}: {e}")
                break
            if data is None:
                break
            if not data:
                framed = self._chunked is not None or self._length is not None
                self._finish("eof" if framed else "server")
                break
            self._feed(data)
        return self

    def read_all(self, timeout: float = 60.0) -> RawResponse:
        """Read to the end of the body; close with ended_by "timeout" if it takes longer."""
        self.read(timeout=timeout)
        if self.ended_by is None:
            self._finish("timeout")
        return self.result()

    def _finish(self, how: str) -> None:
        if self.ended_by is None:
            self.ended_by = how
            self._elapsed = time.monotonic() - self._t0
        with contextlib.suppress(OSError):
            self._sock.close()

    def close(self) -> RawResponse:
        self._finish("client")
        return self.result()

    def result(self) -> RawResponse:
        return RawResponse(
            method=self.method, url=self.url, request_headers=dict(self.request_headers),
            request_body=self.request_body, status=self.status, reason=self.reason,
            http_version=self.http_version, headers=list(self.headers), body=bytes(self.body),
            elapsed=self._elapsed if self._elapsed is not None else time.monotonic() - self._t0,
            ended_by=self.ended_by or "open",
        )

    def __enter__(self) -> Stream:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self._finish("client")


def http_request(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None,
                 *, timeout: float = 30.0, max_events: int | None = None) -> RawResponse:
    """Send one request and read the response to its end, or to ``max_events``
    SSE events (then close from the client side), or to ``timeout`` (then
    close; ended_by "timeout")."""
    with Stream(method, url, body=body, headers=headers, timeout=timeout) as s:
        if max_events is None:
            return s.read_all(timeout=timeout)
        s.read(max_events=max_events, timeout=timeout)
        if s.done:
            return s.result()
        if s.events >= max_events:
            return s.close()
        return s.read_all(timeout=0)


@dataclasses.dataclass
class Exchange:
    """One scenario run: ordered named steps plus the ids it produced."""

    name: str
    steps: dict[str, RawResponse] = dataclasses.field(default_factory=dict)
    ids: dict[str, str] = dataclasses.field(default_factory=dict)

    def __getitem__(self, step: str) -> RawResponse:
        return self.steps[step]

    def __contains__(self, step: str) -> bool:
        return step in self.steps

    def describe(self) -> str:
        lines = [f"scenario {self.name} ids={self.ids}"]
        lines += [f"  {k}: {v.summary()}" for k, v in self.steps.items()]
        return "\n".join(lines)


# ---------------------------------------------------------------------------
# Server base
# ---------------------------------------------------------------------------
class PeerServer:
    """A running peer: base URL, its processes, and generic HTTP helpers."""

    name = "peer"

    def __init__(self, *, port: int, workdir: Path, procs: list[PeerProcess]):
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}"
        self.workdir = workdir
        self.procs = procs

    def default_headers(self) -> dict[str, str]:
        return {}

    def url(self, path: str) -> str:
        return self.base_url + (path if path.startswith("/") else "/" + path)

    def _headers(self, headers: dict[str, str] | None) -> dict[str, str]:
        h = self.default_headers()
        h.update(headers or {})
        return h

    def request(self, method: str, path: str, body: Any = None,
                headers: dict[str, str] | None = None, *, timeout: float = 30.0) -> RawResponse:
        return http_request(method, self.url(path), body, self._headers(headers), timeout=timeout)

    def stream(self, method: str, path: str, body: Any = None,
               headers: dict[str, str] | None = None, *, max_events: int | None = None,
               timeout: float = 60.0) -> RawResponse:
        h = {"Accept": "text/event-stream", **self._headers(headers)}
        return http_request(method, self.url(path), body, h, timeout=timeout, max_events=max_events)

    def open_stream(self, method: str, path: str, body: Any = None,
                    headers: dict[str, str] | None = None, *, timeout: float = 30.0) -> Stream:
        h = {"Accept": "text/event-stream", **self._headers(headers)}
        return Stream(method, self.url(path), body=body, headers=h, timeout=timeout)

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(f"--- {p.label}:\n{p.tail(n)}" for p in self.procs)

    def check_alive(self) -> None:
        for p in self.procs:
            if not p.alive():
                raise PeerStartError(f"{p.label} died (code {p.proc.returncode}):\n{p.tail()}")


@contextlib.contextmanager
def _peer_workdir(name: str) -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix=f"chatkit-peer-{name}-"))
    try:
        yield d
    finally:
        if os.environ.get("CHATKIT_PEERS_KEEP_WORKDIR"):
            print(f"[harness] kept {d}")
        else:
            shutil.rmtree(d, ignore_errors=True)


@contextlib.contextmanager
def _running(procs: list[PeerProcess]) -> Iterator[list[PeerProcess]]:
    try:
        yield procs
    finally:
        for p in reversed(procs):
            p.stop()


def _script(peer: str, script: str) -> str:
    return str(PEERS_DIR / peer / script)


# ---------------------------------------------------------------------------
# Google ADK
# ---------------------------------------------------------------------------
class AdkServer(PeerServer):
    name = "adk"
    app = "chatkit_peer"
    user = "u1"
    slow_events = 4

    def create_session(self, session_id: str | None = None, *, user_id: str | None = None,
                       state: dict | None = None) -> RawResponse:
        body: dict[str, Any] = {}
        if session_id:
            body["sessionId"] = session_id
        if state is not None:
            body["state"] = state
        return self.request("POST", f"/apps/{self.app}/users/{user_id or self.user}/sessions", body)

    def run_body(self, session_id: str, text: str, *, user_id: str | None = None,
                 streaming: bool = True) -> dict:
        return {"appName": self.app, "userId": user_id or self.user, "sessionId": session_id,
                "newMessage": {"role": "user", "parts": [{"text": text}]}, "streaming": streaming}

    def run_sse(self, session_id: str, text: str, *, user_id: str | None = None,
                streaming: bool = True, max_events: int | None = None,
                timeout: float = 60.0) -> RawResponse:
        body = self.run_body(session_id, text, user_id=user_id, streaming=streaming)
        return self.stream("POST", "/run_sse", body, max_events=max_events, timeout=timeout)

    def run(self, session_id: str, text: str, *, user_id: str | None = None,
            timeout: float = 60.0) -> RawResponse:
        body = self.run_body(session_id, text, user_id=user_id, streaming=False)
        return self.request("POST", "/run", body, timeout=timeout)

    def get_session(self, session_id: str, *, user_id: str | None = None) -> RawResponse:
        user = user_id or self.user
        return self.request("GET", f"/apps/{self.app}/users/{user}/sessions/{session_id}")

    def list_sessions(self, *, user_id: str | None = None) -> RawResponse:
        return self.request("GET", f"/apps/{self.app}/users/{user_id or self.user}/sessions")

    TEXTS: ClassVar[dict[str, str]] = {
        "text_tool": "What is the weather in Paris?",
        "nostream": "What is the weather in Paris?",
        "error": "please trigger an error code",
        "fail": "please fail",
        "slow": "be slow",
    }

    def scenario(self, name: str, *, session_id: str | None = None) -> Exchange:
        if name not in ADK_SCENARIOS:
            raise ValueError(f"unknown ADK scenario {name!r}; expected one of {ADK_SCENARIOS}")
        sid = session_id or f"s-{name}-{uuid.uuid4().hex[:8]}"
        ex = Exchange(f"adk-{name}", ids={"session_id": sid, "user_id": self.user, "app": self.app})
        ex.steps["create"] = self.create_session(sid)
        text = self.TEXTS[name]
        if name == "slow":
            ex.steps["stream"] = self.run_sse(sid, text, max_events=self.slow_events, timeout=30)
            ex.steps["history"] = self._wait_history(
                sid, lambda evs: any(e.get("errorCode") == "INVOCATION_ABORTED" for e in evs))
        else:
            ex.steps["stream"] = self.run_sse(sid, text, streaming=(name != "nostream"))
            ex.steps["history"] = self.get_session(sid)
        frames = ex.steps["stream"].sse_json()
        inv = next((f.get("invocationId") for f in frames if f.get("invocationId")), None)
        if inv:
            ex.ids["invocation_id"] = inv
        return ex

    # --- ADK's A2A bridge (only when started with adk_server(a2a_bridge=True))
    bridge_path = "/a2a/chatkit_peer"

    def a2a_bridge_stream(self, text: str, *, version: str = "1.0",
                          max_events: int | None = None, timeout: float = 60.0) -> RawResponse:
        """message/stream (v0.3) or SendStreamingMessage (v1.0) on ADK's A2A bridge."""
        body = {"jsonrpc": "2.0", "id": f"req-{uuid.uuid4().hex[:8]}",
                "method": A2AServer.method_name("stream", version),
                "params": {"message": A2AServer.message(text, version)}}
        return self.stream("POST", self.bridge_path, body, A2AServer.version_headers(version),
                           max_events=max_events, timeout=timeout)

    def a2a_bridge_get_task(self, task_id: str, *, version: str = "1.0") -> RawResponse:
        body = {"jsonrpc": "2.0", "id": f"req-{uuid.uuid4().hex[:8]}",
                "method": A2AServer.method_name("get", version), "params": {"id": task_id}}
        return self.request("POST", self.bridge_path, body, A2AServer.version_headers(version))

    def _wait_history(self, sid: str, ok: Callable[[list], bool],
                      timeout: float = 10.0) -> RawResponse:
        deadline = time.monotonic() + timeout
        while True:
            r = self.get_session(sid)
            if r.status == 200 and ok(r.json().get("events", [])):
                return r
            if time.monotonic() > deadline:
                return r
            time.sleep(0.2)


@contextlib.contextmanager
def adk_server(*, a2a_bridge: bool = False, timeout: float | None = None) -> Iterator[AdkServer]:
    """google-adk ``adk api_server`` serving the scripted agent ``chatkit_peer``.

    ``a2a_bridge=True`` also mounts ADK's A2A bridge at /a2a/chatkit_peer.
    """
    env_dir = peer_env("adk")
    with _peer_workdir("adk") as wd:
        agents = wd / "agents"  # a private copy: nothing is written into the repo
        shutil.copytree(PEERS_DIR / "adk" / "agents", agents,
                        ignore=shutil.ignore_patterns("__pycache__", ".adk"))
        port = free_port()
        argv = ["bash", _script("adk", "serve.sh"), str(port)] + (["--a2a"] if a2a_bridge else [])
        env = offline_env(wd, PEER_ENV=str(env_dir), AGENTS_DIR=str(agents),
                          GOOGLE_GENAI_USE_VERTEXAI="0")
        proc = PeerProcess("adk api_server", argv, env=env, cwd=wd, log=wd / "adk.log")
        with _running([proc]) as procs:
            srv = AdkServer(port=port, workdir=wd, procs=procs)
            _wait_ready(procs, srv.url("/list-apps"), timeout or start_timeout(),
                        ok=lambda s, b: s == 200 and b"chatkit_peer" in b)
            if a2a_bridge:
                _wait_ready(procs, srv.url(srv.bridge_path + "/.well-known/agent-card.json"), 30)
            yield srv


# ---------------------------------------------------------------------------
# A2A (a2a-sdk), protocol v1.0 and v0.3
# ---------------------------------------------------------------------------
class A2AServer(PeerServer):
    name = "a2a"
    rpc_path = "/"
    slow_events = 4

    @staticmethod
    def version_headers(version: str) -> dict[str, str]:
        if version not in A2A_VERSIONS:
            raise ValueError(f"A2A version must be one of {A2A_VERSIONS}, not {version!r}")
        return {"A2A-Version": "1.0"} if version == "1.0" else {}

    @staticmethod
    def method_name(method: str, version: str) -> str:
        return A2A_METHODS[version].get(method, method)

    @staticmethod
    def message(text: str, version: str, *, message_id: str | None = None,
                task_id: str | None = None, context_id: str | None = None) -> dict:
        mid = message_id or f"m-{uuid.uuid4().hex[:12]}"
        if version == "1.0":
            msg: dict[str, Any] = {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": text}]}
        else:
            msg = {"kind": "message", "messageId": mid, "role": "user",
                   "parts": [{"kind": "text", "text": text}]}
        if task_id:
            msg["taskId"] = task_id
        if context_id:
            msg["contextId"] = context_id
        return msg

    def rpc_body(self, method: str, params: Any, version: str, req_id: str | None = None) -> dict:
        return {"jsonrpc": "2.0", "id": req_id or f"req-{uuid.uuid4().hex[:8]}",
                "method": self.method_name(method, version), "params": params}

    def rpc(self, method: str, params: Any, *, version: str, req_id: str | None = None,
            timeout: float = 30.0) -> RawResponse:
        return self.request("POST", self.rpc_path, self.rpc_body(method, params, version, req_id),
                            self.version_headers(version), timeout=timeout)

    def stream_rpc(self, method: str, params: Any, *, version: str, req_id: str | None = None,
                   max_events: int | None = None, timeout: float = 60.0) -> RawResponse:
        return self.stream("POST", self.rpc_path, self.rpc_body(method, params, version, req_id),
                           self.version_headers(version), max_events=max_events, timeout=timeout)

    def open_rpc_stream(self, method: str, params: Any, *, version: str,
                        req_id: str | None = None, timeout: float = 30.0) -> Stream:
        body = self.rpc_body(method, params, version, req_id)
        return self.open_stream("POST", self.rpc_path, body, self.version_headers(version),
                                timeout=timeout)

    def agent_card(self) -> RawResponse:
        return self.request("GET", "/.well-known/agent-card.json")

    def send_stream(self, text: str, *, version: str, task_id: str | None = None,
                    context_id: str | None = None, max_events: int | None = None,
                    timeout: float = 60.0) -> RawResponse:
        params = {"message": self.message(text, version, task_id=task_id, context_id=context_id)}
        return self.stream_rpc("stream", params, version=version, max_events=max_events,
                               timeout=timeout)

    def get_task(self, task_id: str, *, version: str) -> RawResponse:
        return self.rpc("get", {"id": task_id}, version=version)

    def cancel_task(self, task_id: str, *, version: str) -> RawResponse:
        return self.rpc("cancel", {"id": task_id}, version=version)

    def list_tasks(self, context_id: str, *, include_artifacts: bool = True) -> RawResponse:
        return self.rpc("list", {"contextId": context_id, "includeArtifacts": include_artifacts},
                        version="1.0")

    @staticmethod
    def task_ids(resp: RawResponse | Stream) -> tuple[str | None, str | None]:
        """(task_id, context_id) from the first stream frame that names them."""
        body = resp.body if isinstance(resp, RawResponse) else bytes(resp.body)
        for ev in parse_sse(body)[0]:
            try:
                r = json.loads(ev.data).get("result") or {}
            except ValueError:
                continue
            if len(r) == 1 and isinstance(next(iter(r.values())), dict):
                r = next(iter(r.values()))  # v1.0 wrapper {task|statusUpdate|...: {...}}
            tid = r.get("taskId") or (r.get("id") if "contextId" in r else None)
            if tid:
                return tid, r.get("contextId")
        return None, None

    TEXTS: ClassVar[dict[str, str]] = {
        "text": "hello", "tool": "use the tool please", "fail": "please fail",
        "crash": "please crash", "input": "input please", "slow_cancel": "be slow",
    }

    def scenario(self, name: str, *, version: str) -> Exchange:
        if name not in A2A_SCENARIOS:
            raise ValueError(f"unknown A2A scenario {name!r}; expected one of {A2A_SCENARIOS}")
        self.version_headers(version)
        tag = "v10" if version == "1.0" else "v03"
        ex = Exchange(f"a2a-{tag}-{name}", ids={"version": version})
        if name in ("text", "tool", "fail", "crash"):
            ex.steps["stream"] = self.send_stream(self.TEXTS[name], version=version)
            tid, cid = self.task_ids(ex.steps["stream"])
            ex.ids.update(task_id=tid or "", context_id=cid or "")
            if tid:
                ex.steps["history"] = self._settled_task(tid, version)
        elif name == "input":
            ex.steps["stream"] = self.send_stream(self.TEXTS[name], version=version)
            tid, cid = self.task_ids(ex.steps["stream"])
            ex.ids.update(task_id=tid or "", context_id=cid or "")
            ex.steps["history_turn1"] = self.get_task(tid, version=version)
            ex.steps["stream_turn2"] = self.send_stream("Paris", version=version, task_id=tid,
                                                        context_id=cid)
            ex.steps["history"] = self._settled_task(tid, version)
        elif name == "slow_cancel":
            self._slow_cancel(ex, version)
        elif name == "context":
            send = self.rpc("send", {"message": self.message("hello", version)}, version=version)
            ex.steps["send"] = send
            res = send.json()["result"]
            task = res.get("task", res)
            cid = task["contextId"]
            ex.ids.update(context_id=cid, task_id=task["id"])
            ex.steps["stream2"] = self.send_stream("hello again", version=version, context_id=cid)
            if version == "1.0":
                ex.steps["list"] = self.list_tasks(cid)
        elif name == "errors":
            done = self.send_stream("hello", version=version)
            tid, _ = self.task_ids(done)
            ex.ids["task_id"] = tid or ""
            ex.steps["get_unknown"] = self.rpc("get", {"id": "no-such-task"}, version=version)
            ex.steps["cancel_terminal"] = self.cancel_task(tid, version=version)
            ex.steps["resubscribe_terminal"] = self.stream_rpc("resubscribe", {"id": tid},
                                                               version=version, timeout=10)
            ex.steps["unknown_method"] = self.rpc("no/such/method", {}, version=version)
        return ex

    def _settled_task(self, task_id: str, version: str, timeout: float = 5.0) -> RawResponse:
        """tasks/get, re-read briefly until the stored state stops being 'working'."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.get_task(task_id, version=version)
            try:
                state = r.json()["result"]["status"]["state"]
            except (ValueError, KeyError, TypeError):
                return r
            if "working" not in state.lower() and "submitted" not in state.lower():
                return r
            if time.monotonic() > deadline:
                return r
            time.sleep(0.1)

    def _slow_cancel(self, ex: Exchange, version: str) -> None:
        params = {"message": self.message(self.TEXTS["slow_cancel"], version)}
        with self.open_rpc_stream("stream", params, version=version, req_id="req-slow") as main:
            main.read(max_events=self.slow_events, timeout=20)
            tid, cid = self.task_ids(main)
            if not tid:
                ex.steps["stream"] = main.close()
                return
            ex.ids.update(task_id=tid, context_id=cid or "")
            with self.open_rpc_stream("resubscribe", {"id": tid}, version=version,
                                      req_id="req-resub") as resub:
                resub.read(max_events=2, timeout=10)
                ex.steps["cancel"] = self.cancel_task(tid, version=version)
                # both streams should now get the canceled update and close
                ex.steps["resubscribe"] = resub.read_all(10)
                ex.steps["stream"] = main.read_all(10)
        ex.steps = {k: ex.steps[k] for k in ("stream", "resubscribe", "cancel") if k in ex.steps}
        ex.steps["history"] = self.get_task(tid, version=version)


@contextlib.contextmanager
def a2a_server(*, timeout: float | None = None) -> Iterator[A2AServer]:
    """a2a-sdk server with the scripted executor; v1.0 and v0.3 on ``/``."""
    env_dir = peer_env("a2a")
    with _peer_workdir("a2a") as wd:
        port = free_port()
        argv = ["bash", _script("a2a", "start.sh"), str(port)]
        env = offline_env(wd, PEER_ENV=str(env_dir))
        proc = PeerProcess("a2a server", argv, env=env, cwd=wd, log=wd / "a2a.log")
        with _running([proc]) as procs:
            srv = A2AServer(port=port, workdir=wd, procs=procs)
            _wait_ready(procs, srv.url("/.well-known/agent-card.json"), timeout or start_timeout())
            yield srv


# ---------------------------------------------------------------------------
# fake_llm.py (the scripted model behind hermes and litellm)
# ---------------------------------------------------------------------------
def _start_fake_llm(wd: Path, python: Path, *, slow_count: int = 20) -> tuple[int, PeerProcess]:
    port = free_port()
    argv = ["bash", _script("openai", "start_fake_llm.sh"), str(port),
            "--slow-count", str(slow_count), "--log", str(wd / "fake_llm.requests.jsonl")]
    env = offline_env(wd, PYTHON=str(python))
    proc = PeerProcess("fake_llm.py", argv, env=env, cwd=wd, log=wd / "fake_llm.log")
    return port, proc


# ---------------------------------------------------------------------------
# hermes-agent
# ---------------------------------------------------------------------------
HERMES_TERMINAL = ("completed", "failed", "cancelled")


class HermesServer(PeerServer):
    name = "hermes"
    api_key = HERMES_API_KEY
    stop_after_events = 3

    def __init__(self, *, llm_port: int, **kw: Any):
        super().__init__(**kw)
        self.llm_url = f"http://127.0.0.1:{llm_port}"

    def default_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    # --- /v1/runs
    def post_run(self, input: Any, *, session_id: str | None = None, **fields: Any) -> RawResponse:
        body = {"input": input, **fields}
        if session_id:
            body["session_id"] = session_id
        return self.request("POST", "/v1/runs", body)

    def run_events(self, run_id: str, *, max_events: int | None = None,
                   timeout: float = 60.0) -> RawResponse:
        return self.stream("GET", f"/v1/runs/{run_id}/events", max_events=max_events,
                           timeout=timeout)

    def open_run_events(self, run_id: str, *, timeout: float = 30.0) -> Stream:
        return self.open_stream("GET", f"/v1/runs/{run_id}/events", timeout=timeout)

    def get_run(self, run_id: str) -> RawResponse:
        return self.request("GET", f"/v1/runs/{run_id}")

    def stop_run(self, run_id: str) -> RawResponse:
        return self.request("POST", f"/v1/runs/{run_id}/stop")

    def wait_run(self, run_id: str, *, timeout: float = 15.0) -> RawResponse:
        """GET /v1/runs/{id} until its status is terminal (bounded)."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.get_run(run_id)
            if r.status == 200 and r.json().get("status") in HERMES_TERMINAL:
                return r
            if time.monotonic() > deadline:
                return r
            time.sleep(0.2)

    # --- sessions
    def create_session(self, **body: Any) -> RawResponse:
        return self.request("POST", "/api/sessions", body)

    def session_chat_stream(self, session_id: str, message: str, *, max_events: int | None = None,
                            timeout: float = 60.0) -> RawResponse:
        return self.stream("POST", f"/api/sessions/{session_id}/chat/stream", {"message": message},
                           max_events=max_events, timeout=timeout)

    def session_messages(self, session_id: str) -> RawResponse:
        return self.request("GET", f"/api/sessions/{session_id}/messages")

    # --- OpenAI-compatible surfaces
    def chat_completions(self, prompt: str, *, max_events: int | None = None,
                         timeout: float = 60.0) -> RawResponse:
        body = {"model": "hermes-agent", "stream": True,
                "messages": [{"role": "user", "content": prompt}]}
        return self.stream("POST", "/v1/chat/completions", body, max_events=max_events,
                           timeout=timeout)

    def responses(self, input: Any, *, max_events: int | None = None,
                  timeout: float = 60.0) -> RawResponse:
        body = {"model": "hermes-agent", "stream": True, "input": input}
        return self.stream("POST", "/v1/responses", body, max_events=max_events, timeout=timeout)

    def capabilities(self) -> RawResponse:
        return self.request("GET", "/v1/capabilities")

    TEXTS: ClassVar[dict[str, str]] = {
        "text": "Say hello. scenario:text",
        "tool": "Plan one task with a tool. scenario:tool",
        "reasoning": "Think, then answer. scenario:reason",
        "fail": "Fail at once. scenario:http400",
        "midstream": "Fail mid-stream every time. scenario:midstream!",
        "stop": "Talk slowly. scenario:slow",
        "session": "Say hello. scenario:text",
        "two_subscribers": "Talk slowly. scenario:slow",
    }

    def scenario(self, name: str) -> Exchange:
        if name not in HERMES_SCENARIOS:
            raise ValueError(f"unknown hermes scenario {name!r}; "
                             f"expected one of {HERMES_SCENARIOS}")
        ex = Exchange(f"hermes-{name}")
        kind, _, what = name.partition("_")
        if kind == "runs":
            sid = None
            if what == "session":
                create = self.create_session()
                ex.steps["create"] = create
                sid = create.json()["session"]["id"]
                ex.ids["session_id"] = sid
            post = self.post_run(self.TEXTS[what], session_id=sid)
            ex.steps["post"] = post
            rid = post.json()["run_id"]
            ex.ids["run_id"] = rid
            if what == "two_subscribers":
                self._two_subscribers(ex, rid)
            elif what == "stop":
                with self.open_run_events(rid) as ev:
                    ev.read(max_events=self.stop_after_events, timeout=20)
                    ex.steps["stop"] = self.stop_run(rid)
                    ex.steps["events"] = ev.read_all(20)
                ex.steps = {k: ex.steps[k] for k in ("post", "events", "stop")}
            else:
                ex.steps["events"] = self.run_events(rid, timeout=60)
            ex.steps["status"] = self.wait_run(rid)
            if sid:
                ex.steps["history"] = self.session_messages(sid)
        elif kind == "session":
            create = self.create_session()
            ex.steps["create"] = create
            sid = create.json()["session"]["id"]
            ex.ids["session_id"] = sid
            ex.steps["stream"] = self.session_chat_stream(sid, self.TEXTS[what])
            ex.steps["history"] = self.session_messages(sid)
        elif kind == "chat":
            ex.steps["stream"] = self.chat_completions(self.TEXTS[what])
        elif kind == "responses":
            ex.steps["stream"] = self.responses(self.TEXTS[what])
        return ex

    def _two_subscribers(self, ex: Exchange, rid: str, *, min_events: int = 4,
                         linger: float = 2.0) -> None:
        """Two concurrent GET .../events on one slow run, then stop.

        Waits until the two subscribers together got ``min_events`` events,
        stops the run, reads both for ``linger`` more seconds, then closes
        whichever is still open (hermes leaves one hanging on keepalives).
        """
        def pump(*streams: Stream) -> None:
            for st in streams:
                st.read(timeout=0.05)

        with self.open_run_events(rid) as a:
            a.read(max_events=1, timeout=20)
            with self.open_run_events(rid) as b:
                deadline = time.monotonic() + 15
                while (a.events + b.events < min_events and time.monotonic() < deadline
                       and not (a.done and b.done)):
                    pump(a, b)
                stop = self.stop_run(rid)
                deadline = time.monotonic() + linger
                while time.monotonic() < deadline and not (a.done and b.done):
                    pump(a, b)
                ex.steps["events_a"] = a.result() if a.done else a.close()
                ex.steps["events_b"] = b.result() if b.done else b.close()
                ex.steps["stop"] = stop


@contextlib.contextmanager
def hermes_server(*, timeout: float | None = None,
                  toolsets: str = "todo") -> Iterator[HermesServer]:
    """hermes-agent gateway (API server platform only) + scripted fake_llm."""
    env_dir = peer_env("hermes")
    with _peer_workdir("hermes") as wd:
        llm_port, llm = _start_fake_llm(wd, env_dir / "bin" / "python")
        with _running([llm]) as procs:
            _wait_ready(procs, f"http://127.0.0.1:{llm_port}/health", 30)
            port = free_port()
            argv = ["bash", _script("hermes", "start_hermes.sh"), str(port), str(llm_port),
                    str(wd / "state")]
            env = offline_env(wd, PEER_ENV=str(env_dir), HERMES_API_KEY=HERMES_API_KEY,
                              HERMES_TOOLSETS=toolsets)
            hermes = PeerProcess("hermes gateway", argv, env=env, cwd=wd, log=wd / "hermes.log")
            procs.append(hermes)
            srv = HermesServer(port=port, llm_port=llm_port, workdir=wd, procs=procs)
            _wait_ready([hermes, llm], srv.url("/health"), timeout or start_timeout())
            yield srv


# ---------------------------------------------------------------------------
# OpenAI-compatible: litellm proxy
# ---------------------------------------------------------------------------
TODO_TOOL_CHAT = {"type": "function", "function": {
    "name": "todo", "description": "plan tasks",
    "parameters": {"type": "object", "properties": {"todos": {"type": "array"}}}}}
TODO_TOOL_RESPONSES = {"type": "function", "name": "todo", "description": "plan tasks",
                       "parameters": {"type": "object", "properties": {"todos": {"type": "array"}}}}


class OpenAIServer(PeerServer):
    name = "openai"
    api_key = LITELLM_API_KEY
    slow_events = 4

    def __init__(self, *, llm_port: int, **kw: Any):
        super().__init__(**kw)
        self.llm_url = f"http://127.0.0.1:{llm_port}"

    def default_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def chat(self, model: str, prompt: str | list[dict], *, tools: list[dict] | None = None,
             stream: bool = True, include_usage: bool = True, max_events: int | None = None,
             timeout: float = 60.0, **fields: Any) -> RawResponse:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        body: dict[str, Any] = {"model": model, "stream": stream, "messages": messages}
        if stream and include_usage:
            body["stream_options"] = {"include_usage": True}
        if tools:
            body["tools"] = tools
        body.update(fields)
        if not stream:
            return self.request("POST", "/v1/chat/completions", body, timeout=timeout)
        return self.stream("POST", "/v1/chat/completions", body, max_events=max_events,
                           timeout=timeout)

    def responses(self, model: str, input: Any, *, tools: list[dict] | None = None,
                  stream: bool = True, max_events: int | None = None, timeout: float = 60.0,
                  **fields: Any) -> RawResponse:
        body: dict[str, Any] = {"model": model, "stream": stream, "input": input}
        if tools:
            body["tools"] = tools
        body.update(fields)
        if not stream:
            return self.request("POST", "/v1/responses", body, timeout=timeout)
        return self.stream("POST", "/v1/responses", body, max_events=max_events, timeout=timeout)

    def models(self) -> RawResponse:
        return self.request("GET", "/v1/models")

    def scenario(self, name: str) -> Exchange:
        if name not in OPENAI_SCENARIOS:
            raise ValueError(f"unknown openai scenario {name!r}; "
                             f"expected one of {OPENAI_SCENARIOS}")
        ex = Exchange(f"openai-{name}")
        s = ex.steps
        if name == "text":
            s["stream"] = self.chat("fake-text", "Say hello.")
        elif name == "mock_text":
            s["stream"] = self.chat("mock-text", "Say hello.")
        elif name == "reasoning":
            s["stream"] = self.chat("fake-reason", "Think first.")
        elif name == "length":
            s["stream"] = self.chat("fake-length", "Long answer.")
        elif name == "midstream":
            s["stream"] = self.chat("fake-midstream", "Break.")
        elif name == "ratelimit":
            s["stream"] = self.chat("mock-ratelimit", "Say hello.")
        elif name == "error_before_stream":
            s["stream"] = self.chat("mock-midstream", "Say hello.")
        elif name == "slow_stop":
            s["stream"] = self.chat("fake-slow", "Talk slowly.", max_events=self.slow_events,
                                    timeout=30)
        elif name == "tool":
            s["turn1"] = self.chat("fake-tool", "Plan one task.", tools=[TODO_TOOL_CHAT])
            call = _first_tool_call(s["turn1"])
            call_id = call.get("id") or "call_1"
            args = call.get("arguments") or "{}"
            ex.ids["tool_call_id"] = call_id
            messages = [
                {"role": "user", "content": "Plan one task."},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": call.get("name") or "todo", "arguments": args}}]},
                {"role": "tool", "tool_call_id": call_id, "content": "{\"ok\": true}"},
            ]
            s["turn2"] = self.chat("fake-tool", messages, tools=[TODO_TOOL_CHAT])
        elif name == "responses_text":
            s["stream"] = self.responses("bridge-text", "Say hello.")
        elif name == "responses_tool":
            s["stream"] = self.responses("bridge-tool", "Plan one task.",
                                         tools=[TODO_TOOL_RESPONSES])
        elif name == "responses_reasoning":
            s["stream"] = self.responses("bridge-reason", "Think first.")
        elif name == "responses_midstream":
            s["stream"] = self.responses("bridge-midstream", "Break.")
        return ex


def _first_tool_call(resp: RawResponse) -> dict[str, str]:
    """Assemble tool call 0 of choice 0 from chat-completion chunks."""
    out: dict[str, str] = {}
    for chunk in resp.sse_json():
        for choice in chunk.get("choices") or []:
            for tc in (choice.get("delta") or {}).get("tool_calls") or []:
                if tc.get("index", 0) != 0:
                    continue
                if tc.get("id") and "id" not in out:
                    out["id"] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name") and "name" not in out:
                    out["name"] = fn["name"]
                out["arguments"] = out.get("arguments", "") + (fn.get("arguments") or "")
    return out


@contextlib.contextmanager
def openai_server(*, timeout: float | None = None) -> Iterator[OpenAIServer]:
    """litellm proxy (real OpenAI-compatible server) + scripted fake_llm."""
    env_dir = peer_env("openai")
    with _peer_workdir("openai") as wd:
        llm_port, llm = _start_fake_llm(wd, env_dir / "bin" / "python")
        with _running([llm]) as procs:
            _wait_ready(procs, f"http://127.0.0.1:{llm_port}/health", 30)
            port = free_port()
            argv = ["bash", _script("openai", "start_litellm.sh"), str(port), str(llm_port)]
            env = offline_env(wd, PEER_ENV=str(env_dir))
            proxy = PeerProcess("litellm proxy", argv, env=env, cwd=wd, log=wd / "litellm.log")
            procs.append(proxy)
            srv = OpenAIServer(port=port, llm_port=llm_port, workdir=wd, procs=procs)
            _wait_ready([proxy, llm], srv.url("/health/liveliness"), timeout or start_timeout())
            yield srv


litellm_server = openai_server


# ---------------------------------------------------------------------------
# Arize Phoenix: an OTLP receiver with its own store and API (issue 34)
# ---------------------------------------------------------------------------
class PhoenixServer(PeerServer):
    """``otlp_http`` (base URL for HTTP/protobuf), ``otlp_grpc`` (host:port),
    and the REST API: ``spans(project)`` (every span, paged)."""

    name = "phoenix"

    def __init__(self, *, port: int, grpc_port: int, workdir: Path, procs: list[PeerProcess]):
        super().__init__(port=port, workdir=workdir, procs=procs)
        self.grpc_port = grpc_port

    @property
    def otlp_http(self) -> str:
        return self.base_url

    @property
    def otlp_grpc(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def spans(self, project: str = "default", *, limit: int = 1000) -> list[dict]:
        """Every span Phoenix stored in ``project`` (REST ``/v1/projects/{p}/spans``)."""
        out: list[dict] = []
        cursor = None
        while True:
            query = f"limit={limit}" + (f"&cursor={cursor}" if cursor else "")
            r = self.request("GET", f"/v1/projects/{project}/spans?{query}")
            if r.status == 404:
                return out
            assert r.status == 200, r.summary()
            data = r.json()
            out += data.get("data", [])
            cursor = data.get("next_cursor")
            if not cursor:
                return out

    def wait_spans(self, count: int, project: str = "default", *, timeout: float = 30.0,
                   where: Callable[[dict], bool] | None = None) -> list[dict]:
        """The project's spans (those ``where`` keeps) once there are at least
        ``count`` (Phoenix inserts what it received in batches, a moment later)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = [s for s in self.spans(project) if where is None or where(s)]
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.3)


@contextlib.contextmanager
def phoenix_server(*, timeout: float | None = None) -> Iterator[PhoenixServer]:
    """Arize Phoenix (``arize-phoenix serve``) on free loopback ports, its store in a temp folder."""
    env_dir = peer_env("phoenix")
    with _peer_workdir("phoenix") as wd:
        port, grpc_port = free_port(), free_port()
        store = wd / "store"
        store.mkdir()
        argv = ["bash", _script("phoenix", "start.sh"), str(port), str(grpc_port), str(store)]
        env = offline_env(wd, PEER_ENV=str(env_dir))
        env.pop("OTEL_SDK_DISABLED", None)
        proc = PeerProcess("phoenix", argv, env=env, cwd=wd, log=wd / "phoenix.log")
        with _running([proc]) as procs:
            srv = PhoenixServer(port=port, grpc_port=grpc_port, workdir=wd, procs=procs)
            _wait_ready(procs, srv.url("/healthz"), timeout or start_timeout())
            yield srv


SERVERS: dict[str, Callable[..., contextlib.AbstractContextManager]] = {
    "adk": adk_server, "a2a": a2a_server, "hermes": hermes_server, "openai": openai_server,
    "phoenix": phoenix_server,
}
