"""The writer's store-side writes: each batch's frames, changed exchange
rows and the sessions queued for the deriver, in one transaction; the meta
keys that say how the trace was recorded."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ._caps import Caps
from ._identity import Identity
from ._losses import Losses
from ._recording import Recording
from ._scrub import Scrub

if TYPE_CHECKING:
    from ._config import WriterConfig

__all__ = ["Rows"]


class Rows:
    """One transaction per batch (:meth:`commit`)."""

    def __init__(self, rec: Recording, identity: Identity, scrub: Scrub, losses: Losses, caps: Caps) -> None:
        self.rec = rec
        self.identity = identity
        self.scrub = scrub
        self.losses = losses
        self.caps = caps

    def write_meta(self, config: WriterConfig) -> None:
        """The meta keys readers use (docs/trace-format.md): which profile, protocol and
        capabilities decode this trace, whether it is redacted, where it came from."""
        store = self.rec.store
        profile = config.profile
        if profile is not None:
            store.set_meta("profile", profile.name)
            store.set_meta("protocol", profile.protocol)
            store.set_meta("capabilities", list(profile.capabilities))
            store.set_meta("profile_spec", profile.model_dump(mode="json", by_alias=True))
        store.set_meta("redaction", "off" if self.rec.redactor is None else "on")
        store.set_meta("source", {"kind": "record", **config.recorder_meta})
        if config.derive == "off":
            store.set_meta("derivation", {"mode": "off", "state": "off", "at": time.time()})
        store.commit()

    def commit(self) -> None:
        """Write the batch (frames, changed exchanges, the derivation queue) in
        one transaction.  A busy file (the deriver writes to it too) retries
        the same batch (``TraceStore.when_free``), so nothing is lost to a
        lock; any other error (a full disk) drops this batch's frames, marks
        the loss on each exchange they belonged to and in the trace
        (:class:`~._losses.StoreGap`), and says so in one line."""
        try:
            self.rec.store.when_free(self._write_and_commit)
        except Exception as err:  # noqa: BLE001 - e.g. disk full: mark, say once, go on
            self.losses.store_failed(err)
            return
        self._batch_written(stored=True)
        self.losses.stored()

    def _write_and_commit(self) -> None:
        self.identity.assign_ready()
        self.scrub.scrub()
        self.scrub.share_learned()
        self._write_batch()
        self.rec.store.commit()

    def _write_batch(self) -> None:
        """The batch's rows, inside the open transaction (nothing cleared yet:
        a busy file retries the same batch)."""
        rec = self.rec
        store = rec.store
        if rec.frames and not self.caps.over_cap:
            store.add_frames(rec.frames)
        for st in rec.flows.values():
            if st.dirty:
                store.add_exchange(st.ex, with_frames=False)
        if rec.touched and rec.config.derive != "off":
            store.queue_derivation(rec.touched, rec.seq + 1)

    def _batch_written(self, *, stored: bool) -> None:
        """The batch is committed (or dropped after an error): clear it."""
        rec = self.rec
        if rec.frames:
            self.caps.frames_written(rec.frames, stored=stored)
            rec.frames = []
        for st in rec.flows.values():
            st.dirty = False
        if rec.touched and rec.config.derive != "off" and stored:
            rec.seq += 1
        rec.touched = {}
        if stored:
            done = [fid for fid, st in rec.flows.items() if st.ended and st.assigned]
            for fid in done:
                del rec.flows[fid]
