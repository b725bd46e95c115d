"""A deliberately naive WHATWG event-stream interpreter, to check SSEParser against.

It reads the whole body at once, one byte at a time, exactly in the order
the HTML standard gives ("Interpreting an event stream"), with no attention
to speed. It returns only dispatched events, as tuples
``(data, event, id, last_event_id, retry, start, end)``.
"""

from __future__ import annotations

BOM = b"\xef\xbb\xbf"


def _lines(body: bytes) -> list[tuple[int, bytes]]:
    """Complete lines as (start offset, content without its line end)."""
    i = 3 if body.startswith(BOM) else 0
    out = []
    n = len(body)
    while i < n:
        j = i
        while j < n and body[j] not in (10, 13):
            j += 1
        if j == n:  # an incomplete last line is discarded
            break
        out.append((i, body[i:j]))
        i = j + 2 if body[j] == 13 and j + 1 < n and body[j + 1] == 10 else j + 1
    return out


def reference_events(body: bytes) -> list[tuple[object, ...]]:
    events: list[tuple[object, ...]] = []
    data, event_type, last_id = "", "", ""
    this_id: str | None = None
    retry: int | None = None
    block_start: int | None = None
    for start, raw in _lines(body):
        line = raw.decode("utf-8", "replace")
        if line == "":
            if data != "":
                if data.endswith("\n"):
                    data = data[:-1]
                events.append(
                    (data, event_type or None, this_id, last_id, retry, block_start, start)
                )
            data, event_type, this_id, retry, block_start = "", "", None, None, None
            continue
        if block_start is None:
            block_start = start
        if line.startswith(":"):
            continue
        if ":" in line:
            field, value = line.split(":", 1)
            if value.startswith(" "):
                value = value[1:]
        else:
            field, value = line, ""
        if field == "event":
            event_type = value
        elif field == "data":
            data += value + "\n"
        elif field == "id":
            if "\x00" not in value:
                last_id = this_id = value
        elif field == "retry":
            if value and all(c in "0123456789" for c in value):
                retry = int(value)
    return events
