"""What a run is in the OpenTelemetry GenAI semantic conventions.

chatkit-trace sees a protocol, not a model API: the operation and the
provider follow from the adapter (:func:`operation_of`); the model, the
response id, the finish reasons and the token usage come from the wire where
the protocol carries them (:class:`GenAIReader`: the run's request body and
its frames, read as JSON once more; nothing is guessed).  The attribute names
are the conventions' (``gen_ai.*``, docs/export.md "OpenTelemetry").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

__all__ = ["GenAI", "GenAIReader", "operation_of", "PROTOCOL_OPERATIONS"]

#: adapter name -> (gen_ai.operation.name, gen_ai.provider.name).  A chat
#: completions API is ``chat``; an agent protocol (the backend runs an agent
#: that may call models and tools) is ``invoke_agent``.  The provider is the
#: API the chatkit UI speaks (decision 292): only ``openai`` is also one of the
#: conventions' well-known providers.
PROTOCOL_OPERATIONS: dict[str, tuple[str, str]] = {
    "openai": ("chat", "openai"),
    "adk": ("invoke_agent", "adk"),
    "a2a": ("invoke_agent", "a2a"),
    "hermes": ("invoke_agent", "hermes"),
    "agui": ("invoke_agent", "agui"),
    "myproto": ("invoke_agent", "myproto"),
}


def operation_of(protocol: str | None) -> tuple[str, str]:
    """(operation, provider) of a protocol; a custom adapter (``pkg.mod:Class``
    or a registered name) is an agent behind its own protocol name."""
    name = (protocol or "unknown").rsplit(":", 1)[-1]
    if protocol in PROTOCOL_OPERATIONS:
        return PROTOCOL_OPERATIONS[protocol]
    return "invoke_agent", name.lower() or "unknown"


@dataclass
class GenAI:
    """The conventions' facts of one run that the wire carried (None: not carried)."""

    request_model: str | None = None
    response_model: str | None = None
    response_id: str | None = None
    finish_reasons: list[str] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    agent_name: str | None = None

    def attributes(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in (
            ("gen_ai.request.model", self.request_model),
            ("gen_ai.response.model", self.response_model),
            ("gen_ai.response.id", self.response_id),
            ("gen_ai.usage.input_tokens", self.input_tokens),
            ("gen_ai.usage.output_tokens", self.output_tokens),
            ("gen_ai.agent.name", self.agent_name),
        ):
            if value is not None:
                out[key] = value
        if self.finish_reasons:
            out["gen_ai.response.finish_reasons"] = list(self.finish_reasons)
        return out


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _loads(text: str | bytes | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except (ValueError, UnicodeDecodeError):
        return None


class GenAIReader:
    """Reads one run's request body and frames into a :class:`GenAI`.

    The keys looked for are the APIs' own: ``model`` (request and response),
    ``modelVersion`` (Gemini/ADK), ``choices[].finish_reason`` and ``usage``
    (``prompt_tokens``/``completion_tokens`` or ``input_tokens``/``output_tokens``:
    OpenAI chat completions, Responses, hermes), ``finishReason`` and
    ``usageMetadata`` (Gemini/ADK), a Responses API ``response`` object, and
    ``appName`` (an ADK request: the agent).  A frame is parsed only when its
    text names one of them."""

    def __init__(self, protocol: str | None) -> None:
        self.protocol = protocol
        self.info = GenAI()
        self._reasons: dict[str, None] = {}

    def request(self, body: bytes | None) -> None:
        doc = _loads(body)
        if not isinstance(doc, dict):
            return
        model = doc.get("model")
        if isinstance(model, str) and self.info.request_model is None:
            self.info.request_model = model
        app = doc.get("appName", doc.get("app_name"))
        if isinstance(app, str) and self.info.agent_name is None:
            self.info.agent_name = app

    def frame(self, text: str | None) -> None:
        if not text:
            return
        if self.info.response_model is None:
            if "odel" not in text and "sage" not in text and "inish" not in text:
                return
        elif "sage" not in text and "inish" not in text:
            return
        doc = _loads(text)
        if isinstance(doc, dict):
            self._read(doc)
            response = doc.get("response")
            if isinstance(response, dict):  # OpenAI Responses: response.completed …
                self._read(response, responses=True)

    def result(self) -> GenAI:
        self.info.finish_reasons = list(self._reasons)
        return self.info

    def _read(self, doc: dict[str, Any], *, responses: bool = False) -> None:
        info = self.info
        model = doc.get("model", doc.get("modelVersion"))
        if isinstance(model, str) and info.response_model is None:
            info.response_model = model
        rid = doc.get("id")
        if isinstance(rid, str) and info.response_id is None and (
            responses or str(doc.get("object", "")).startswith("chat.completion")
        ):
            info.response_id = rid
        choices = doc.get("choices")
        if isinstance(choices, list):
            for c in choices:
                if isinstance(c, dict) and isinstance(c.get("finish_reason"), str) and c["finish_reason"]:
                    self._reasons.setdefault(c["finish_reason"], None)
        for key in ("finishReason", "finish_reason"):
            if isinstance(doc.get(key), str) and doc[key]:
                self._reasons.setdefault(doc[key], None)
        if responses and isinstance(doc.get("status"), str) and doc["status"] not in ("in_progress", "queued"):
            details = doc.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            self._reasons.setdefault(reason if isinstance(reason, str) else doc["status"], None)
        self._usage(doc.get("usage"), ("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens"))
        self._usage(doc.get("usageMetadata"), ("promptTokenCount",), ("candidatesTokenCount",))

    def _usage(self, usage: Any, inputs: tuple[str, ...], outputs: tuple[str, ...]) -> None:
        if not isinstance(usage, dict):
            return
        for key in inputs:
            if _int(usage.get(key)) is not None:
                self.info.input_tokens = usage[key]
                break
        for key in outputs:
            if _int(usage.get(key)) is not None:
                self.info.output_tokens = usage[key]
                break
