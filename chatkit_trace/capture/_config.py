"""The recorder's options as the writer and the deriver need them
(:class:`WriterConfig`; ``Recorder.configure`` builds it, :class:`~._messages.Configure`
carries it to the children).  A leaf: the writer's parts import it, it imports none of them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..route import make_redactor
from ..route.profiles import Profile
from ..wire import DEFAULT_MAX_LINE

__all__ = ["WriterConfig"]


@dataclass(frozen=True)
class WriterConfig:
    """What the writer needs from the options (``Recorder.configure`` builds it)."""

    db: str
    profile: Profile | None = None  # loaded once from chatkit_profile; None: record without identity
    redact: str = ""  # chatkit_redact: extra names, comma-separated
    keep_secrets: bool = False  # chatkit_keep_secrets
    queue_limit: int = 20000
    max_db_bytes: int = 0  # 0: no cap
    max_age: float = 0.0  # seconds, 0: no cap
    derive: str = "live"  # live | end | off
    derive_wait: float = 30.0  # seconds a clean stop waits for the deriver
    #: longest SSE event line / NDJSON line kept whole (chatkit_max_event_mb);
    #: a longer one is kept as its head, length and SHA-256 (CK703)
    max_event_bytes: int = DEFAULT_MAX_LINE
    test_raise: frozenset[str] = frozenset()
    #: the live spans' settings (chatkit_otlp*: chatkit_trace.export.live.OTLPSettings), or None
    otlp: Any = None
    #: what to store in the meta table about this recording
    recorder_meta: dict[str, Any] = field(default_factory=dict)
    #: module constants of the writer and the deriver, as the proxy has them
    tuning: dict[str, Any] = field(default_factory=dict)

    def make_redactor(self) -> Any:
        """The redactor of these options (None: secrets are kept)."""
        if self.keep_secrets:
            return None
        return make_redactor(self.profile, self.redact)
