"""R12 conformance of the a2a adapter against a scripted in-memory A2A server.

The backend speaks the real wire shape of a2a-sdk 1.3 (v1.0, and v0.3 too):
JSON-RPC responses as SSE ``data:`` frames (a Task, status and artifact
updates), ``tasks/cancel`` answering the canceled Task, and history from a
task store kept the way the SDK's TaskManager keeps it (status messages move
to ``history``; artifact chunks append parts).  One liberty: the server mints
the taskId from the JSON-RPC request id, i.e. the run id, as a proxy that
unifies ids would (R11.5), so history's run snapshots name the local runs.
A2A cannot truncate tasks, so regenerate/edit are not offered (R10.2).
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from typing import Any

from chatkit_trace.adapters import AbortRequestArgs, HistoryRequestArgs, RunRequest, create_adapter
from chatkit_trace.adapters.a2a import METHODS, A2AProtocol
from chatkit_trace.runtime import Response
from chatkit_trace.testing import ConformanceHarness, run_adapter_conformance

CALL = {"id": "call-1", "name": "get_weather", "args": {"city": "Paris"}}


def script(kind: str) -> list[tuple[str, Any]]:
    """(state | "artifact", message parts | artifact chunk) after the Task frame."""
    working = ("working", [{"text": "Working on it..."}])
    if kind == "tool":
        return [
            working,
            ("working", [{"data": CALL, "metadata": {"adk_type": "function_call"}}]),
            (
                "working",
                [
                    {
                        "data": {
                            "id": "call-1",
                            "name": "get_weather",
                            "response": {"sky": "sunny"},
                        },
                        "metadata": {"adk_type": "function_response"},
                    }
                ],
            ),
            ("artifact", "It is sunny."),
            ("completed", [{"text": "Done."}]),
        ]
    if kind == "fail":
        return [working, ("artifact", "Starting "), ("failed", [{"text": "upstream unavailable"}])]
    if kind == "slow":
        return [working, ("artifact", "tick 0 ")]
    return [working, ("artifact", "This is "), ("artifact", "the answer"), ("completed", None)]


class ScriptedA2A:
    def __init__(self, kind: str, version: str) -> None:
        self.kind, self.version, self.v10 = kind, version, version == "1.0"
        self.tasks: dict[str, dict[str, Any]] = {}
        self.cancel: dict[str, asyncio.Queue[bytes]] = {}
        self.n = 0

    def state(self, s: str) -> str:
        return "TASK_STATE_" + s.upper().replace("-", "_") if self.v10 else s

    def part(self, p: dict[str, Any]) -> dict[str, Any]:
        return dict(p) if self.v10 else {"kind": "text" if "text" in p else "data", **p}

    def event(self, tid: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Apply one event to the stored task (a2a-sdk TaskManager) and wrap it."""
        task = self.tasks[tid]
        obj = {"taskId": tid, "contextId": task["contextId"], **obj}
        if kind == "status":
            if "message" in task["status"]:
                task["history"].append(task["status"]["message"])
            task["status"] = copy.deepcopy(obj["status"])
            if not self.v10:
                obj.update(
                    kind="status-update",
                    final=obj["status"]["state"] in ("completed", "failed", "canceled"),
                )
            return {"statusUpdate": obj} if self.v10 else obj
        art, arts = obj["artifact"], task.setdefault("artifacts", [])
        old = next((a for a in arts if a["artifactId"] == art["artifactId"]), None)
        if obj.get("append") and old is not None:
            old["parts"] += copy.deepcopy(art["parts"])
        else:
            arts.append(copy.deepcopy(art))
        if not self.v10:
            obj.update(kind="artifact-update", append=bool(obj.get("append")), lastChunk=False)
        return {"artifactUpdate": obj} if self.v10 else obj

    def status(self, tid: str, state: str, parts: list[dict[str, Any]] | None) -> dict[str, Any]:
        status: dict[str, Any] = {"state": self.state(state)}
        if parts is not None:
            self.n += 1
            role = "ROLE_AGENT" if self.v10 else "agent"
            msg = {
                "messageId": f"srv-{self.n}",
                "role": role,
                "parts": [self.part(p) for p in parts],
                "taskId": tid,
                "contextId": self.tasks[tid]["contextId"],
            }
            status["message"] = msg if self.v10 else {"kind": "message", **msg}
        return self.event(tid, "status", {"status": status})

    def sse(self, req_id: Any, result: dict[str, Any]) -> bytes:
        return (
            f"data: {json.dumps({'jsonrpc': '2.0', 'id': req_id, 'result': result})}\n\n".encode()
        )

    async def run(self, request: RunRequest) -> Response:
        body = request.body
        assert body["method"] == METHODS[self.version]["stream"]
        message = dict(body["params"]["message"], taskId=request.run_id)
        tid, cid = request.run_id, message["contextId"]
        task = {
            "id": tid,
            "contextId": cid,
            "status": {"state": self.state("submitted")},
            "history": [message],
        }
        self.tasks[tid] = task
        self.cancel[tid] = asyncio.Queue()

        async def stream() -> AsyncIterator[bytes]:
            yield self.sse(
                body["id"], {"task": copy.deepcopy(task)} if self.v10 else {"kind": "task", **task}
            )
            chunks = 0
            for what, payload in script(self.kind):
                await asyncio.sleep(0)
                if what == "artifact":
                    art = {"artifactId": "answer", "parts": [self.part({"text": payload})]}
                    yield self.sse(
                        body["id"],
                        self.event(tid, "artifact", {"artifact": art, "append": chunks > 0}),
                    )
                    chunks += 1
                else:
                    yield self.sse(body["id"], self.status(tid, what, payload))
            if self.kind == "slow":
                yield await self.cancel[tid].get()  # streams until tasks/cancel

        return Response(200, stream(), {"content-type": "text/event-stream"})

    async def abort(self, request: AbortRequestArgs) -> Response:
        tid = request.run_id
        await self.cancel[tid].put(
            self.sse("req-slow", self.status(tid, "canceled", [{"text": "cancelled by request"}]))
        )
        for _ in range(5):
            await asyncio.sleep(0)  # the open stream gets the canceled update before the answer
        return Response(
            200, json.dumps({"jsonrpc": "2.0", "id": "c", "result": self.tasks[tid]}).encode()
        )

    async def history(self, request: HistoryRequestArgs) -> Response:
        mine = [t for t in self.tasks.values() if t["contextId"] == request.session_id]
        if self.v10:  # ListTasks: newest first
            value: Any = {
                "jsonrpc": "2.0",
                "id": "h",
                "result": {"tasks": mine[::-1], "nextPageToken": ""},
            }
        else:  # v0.3 has no ListTasks: one tasks/get per task of the session
            value = [{"jsonrpc": "2.0", "id": f"h{i}", "result": t} for i, t in enumerate(mine)]
        return Response(200, json.dumps(value).encode(), {"content-type": "application/json"})


def harness(version: str) -> ConformanceHarness:
    def make(kind: str):
        server = ScriptedA2A(kind, version)
        return create_adapter(
            A2AProtocol(version), run=server.run, abort=server.abort, history=server.history
        )

    return ConformanceHarness(
        create_adapter=make, make_input=lambda text: {"text": text}, capabilities={"history": True}
    )


run_adapter_conformance("a2a", harness("1.0"), undeclared="omit")  # A2A cannot truncate a task: no regenerate
run_adapter_conformance("a2a-v03", harness("0.3"), undeclared="omit")
