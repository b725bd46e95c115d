"""The writer's secrets step: learned secrets and token shapes masked in
every row before it is written, and shared with the deriver (through the
proxy's pipes, never a file)."""

from __future__ import annotations

import weakref
from typing import Any

from ..wire import Frame
from ._messages import Learned
from ._recording import Flow, Recording

__all__ = ["Scrub"]


class Scrub:
    """Masks what a batch is about to write (route/secrets.py)."""

    def __init__(self, rec: Recording) -> None:
        self.rec = rec
        self.memo: weakref.WeakKeyDictionary[Flow, dict[str, Any]] = weakref.WeakKeyDictionary()
        #: learned values already sent to the deriver (memory only)
        self.shared: set[str] = set()
        self.shared_generation = 0

    def share_learned(self) -> None:
        """Values learned since the last batch go to the deriver (through the
        proxy's pipes, never a file) before the frames they mask are committed:
        it masks what it derives with them (chatkit_trace.masking)."""
        rec = self.rec
        red = rec.redactor
        if red is None or rec.emit is None or red.secrets.generation == self.shared_generation:
            return
        self.shared_generation = red.secrets.generation
        new = [v for v in red.secrets if v not in self.shared]
        if new:
            self.shared.update(new)
            rec.send(Learned(new))

    def scrub(self) -> None:
        """Mask learned secrets and token shapes in every frame and exchange row
        about to be written (route/secrets.py): nothing unmasked reaches the
        file, its WAL or free pages.  Lengths are kept; the exchange notes where."""
        rec = self.rec
        red = rec.redactor
        if red is None:
            return
        from ..route.redact import StreamMasks, note_scrubbed

        frames = rec.frames
        here = {(f.exchange_index, f.index): i for i, f in enumerate(frames)}
        again: dict[tuple[int, int], Frame] = {}  # frames of earlier batches masked again
        for i, f in enumerate(frames):
            new, spans = red.scrub_frame(f)
            st = rec.flow_of_index(f.exchange_index)
            if st is not None:
                # A secret split across events (or escaped) only shows in the
                # decoded, joined text: masked in every frame holding a piece.
                memo = self.memo.setdefault(st, {})
                streams = memo.get("streams")
                if streams is None:
                    streams = memo["streams"] = StreamMasks(red)
                new, more, earlier = streams.add(f, new)
                spans += more
                for index, (version, notes) in earlier.items():
                    key = (f.exchange_index, index)
                    j = here.get(key)
                    if j is not None:
                        frames[j] = version
                    else:
                        again[key] = version
                    note_scrubbed(st.ex.notes, f"frame:{index}", notes)
            if new is f:
                continue
            frames[i] = new
            if st is not None:
                note_scrubbed(st.ex.notes, f"frame:{f.index}", spans)
                st.dirty = True
        if again:
            frames.extend(again.values())
        for st in rec.flows.values():
            if st.dirty:
                memo = self.memo.setdefault(st, {})
                for where, spans in red.scrub_fields(st.ex, memo):
                    note_scrubbed(st.ex.notes, where, spans)
