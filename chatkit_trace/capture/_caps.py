"""The writer's caps (``chatkit_max_db_mb``, ``chatkit_max_age``): the
oldest finished exchanges dropped, counted in meta ``dropped``."""

from __future__ import annotations

import logging
import time
from typing import Any

from ..trace import Exchange
from ..wire import Frame
from ._recording import Recording

__all__ = ["Caps", "exchange_size", "frame_size"]

_FRAME_ROW = 64  # bytes counted per frame row besides its text and raw bytes
_EXCHANGE_ROW = 256  # per exchange row besides its bodies, headers and URL


def exchange_size(ex: Exchange) -> int:
    headers = sum(len(k) + len(v) + 6 for k, v in (*ex.request_headers, *ex.response_headers))
    return _EXCHANGE_ROW + len(ex.request_body or b"") + len(ex.response_body or b"") + headers + len(ex.url)


def frame_size(frame: Frame) -> int:
    return _FRAME_ROW + len(frame.text or "") + len(frame.raw or b"")


class Caps:
    """The recorded data's size, kept up to date, and the caps applied to it."""

    def __init__(self, rec: Recording) -> None:
        self.rec = rec
        self.capped = {"exchanges": 0, "frames": 0, "by_age": 0, "by_size": 0, "frames_over_cap": 0}
        self.over_cap = False
        self.last_check = 0.0
        self.recorded_bytes = 0  # the recorded data's size (chatkit_max_db_mb), kept up to date

    @property
    def on(self) -> bool:
        cfg = self.rec.config
        return bool(cfg.max_age or cfg.max_db_bytes)

    def due(self) -> bool:
        return self.on and time.time() - self.last_check > self.rec.tuning.cap_interval

    def measure(self) -> None:
        """The size of what the file holds (at the start)."""
        self.recorded_bytes = self._recorded_bytes()

    def check(self, *, force: bool = False) -> None:
        rec = self.rec
        cfg = rec.config
        if not (cfg.max_age or cfg.max_db_bytes):
            return
        if not force and time.time() - self.last_check < rec.tuning.cap_interval:
            return
        self.last_check = time.time()
        store = rec.store
        dropped_before = self.capped["exchanges"]
        if cfg.max_age:
            rows = [r for r in store.exchange_ages(ended_before=time.time() - cfg.max_age) if r[0] not in rec.open_indexes]
            if rows:
                self._prune(rows, "by_age")
        if cfg.max_db_bytes:
            self.over_cap = False
            for _ in range(50):
                if self.recorded_bytes <= cfg.max_db_bytes:
                    break
                rows = [r for r in store.exchange_ages() if r[0] not in rec.open_indexes]
                if not rows:
                    self.over_cap = True
                    break
                self._prune(rows[: max(1, len(rows) // 10)], "by_size")
        if self.capped["exchanges"] != dropped_before:
            store.set_meta("dropped", self.dropped())
            store.commit()
            n = self.capped["exchanges"] - dropped_before
            rec.log(logging.INFO, f"chatkit-trace: recording cap reached: dropped the {n} oldest exchange(s) "
                    f"({self.capped['exchanges']} so far, {self.capped['frames']} frames); see meta 'dropped'")

    def dropped(self) -> dict[str, Any]:
        """Meta ``dropped``: what the caps dropped, and the chunks the proxy could not hand off."""
        return dict(self.capped, queue=self.rec.drops)

    def frames_written(self, frames: list[Frame], *, stored: bool) -> None:
        """A batch's frames were committed (or dropped after an error)."""
        if self.over_cap:
            self.capped["frames_over_cap"] += len(frames)
        elif stored:
            self.recorded_bytes += sum(map(frame_size, frames))

    def _recorded_bytes(self, ids: list[int] | None = None) -> int:
        """The size of recorded exchanges and frames (all, or of exchanges ``ids``), as counted for the cap."""
        frames, frame_bytes, exchanges, exchange_bytes = self.rec.store.recorded_sizes(ids)
        return int(frames * _FRAME_ROW + frame_bytes + exchanges * _EXCHANGE_ROW + exchange_bytes)

    def _prune(self, rows: list[tuple[int, str | None]], why: str) -> None:
        rec = self.rec
        ids = [r[0] for r in rows]
        for i in range(0, len(ids), 500):
            self.recorded_bytes -= self._recorded_bytes(ids[i : i + 500])
        frames = rec.store.delete_exchanges(ids)
        self.capped["exchanges"] += len(ids)
        self.capped["frames"] += frames
        self.capped[why] += len(ids)
        for i in ids:
            rec.flow_of.pop(i, None)
        for _, sid in rows:
            rec.touch(sid)
        rec.queue_touched()
