"""Writing the report file: the template, the data blobs as they come, the index.

The page is one file.  Each session's data is written as soon as the
session was analysed (gzip-compressed JSON, base64, in an inert
``<script type="application/x-chatkit-gzip">`` element: the browser neither
runs nor fetches it), so the generator never holds the trace; the run list,
the findings and the static findings summary follow at the end.
"""

from __future__ import annotations

import base64
import gzip
import html
import json
import re
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..masking import mask_derived_doc, mask_derived_json
from ..pipeline import PROBLEM_STATES, FrameState
from ..visible import json_safe, visible, xml_text

__all__ = ["HtmlWriter", "frame_link", "template"]

_MARK = "<!-- chatkit:blobs -->"


def template(name: str) -> str:
    package = __name__.rpartition(".")[0]  # chatkit_trace.report
    return resources.files(package).joinpath("template", name).read_text("utf-8")


def _script_json(value: Any) -> str:
    """JSON safe inside ``<script>``: no ``</script>``, no ``<!--``."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)
    return json_safe(text.replace("<", "\\u003c"))  # C1 controls, line separators, surrogates: \uXXXX


def _e(value: Any) -> str:
    """Text for the page: HTML-escaped, control characters shown as escapes (``\\x1b``)."""
    return html.escape(xml_text(visible("" if value is None else str(value))), quote=True)


def frame_link(session: str | None, run: str | None, frame: str | None = None) -> str:
    """The deep link to a run (and one of its frames): ``#session=S&run=R&frame=12:4``."""
    parts = []
    if session is not None:
        parts.append("session=" + quote(session, safe=""))
    if run is not None:
        parts.append("run=" + quote(run, safe=""))
    if frame is not None:
        parts.append("frame=" + quote(frame, safe=":"))
    return "#" + "&".join(parts)


def _fill(text: str, values: dict[str, str]) -> str:
    """One pass: a value that contains ``{{name}}`` stays as it is."""
    return re.sub(r"\{\{(\w+)\}\}", lambda m: values.get(m.group(1), m.group(0)), text)


class HtmlWriter:
    """Writes the page top to bottom: head, blobs (streamed), body, index, script."""

    def __init__(self, path: Path, *, title: str, generator: str) -> None:
        self.path = path
        page = template("report.html")
        head, _, self.rest = page.partition(_MARK)
        self.title = title
        self.file = path.open("w", encoding="utf-8", newline="\n")
        self.file.write(_fill(head, {"title": _e(title), "generator": _e(generator), "css": template("report.css")}))
        self.file.write(_MARK + "\n")

    def blob(self, name: str, payload: Any) -> None:
        # derived text is masked before it is compressed (chatkit_trace.masking)
        text = mask_derived_json(json.dumps(payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str))
        data = text.encode("utf-8", "surrogatepass")
        packed = base64.b64encode(gzip.compress(data, compresslevel=6, mtime=0)).decode("ascii")
        self.file.write(f'<script type="application/x-chatkit-gzip" id="{name}">{packed}</script>\n')

    def finish(self, index: dict[str, Any]) -> None:
        index = mask_derived_doc(index)
        self.file.write(
            _fill(
                self.rest,
                {
                    "title": _e(self.title),
                    "meta": _meta(index),
                    "counts": _counts(index),
                    "warnings": _warnings(index),
                    "summary": summary_table(index),
                    "index": _script_json(index),
                    "js": _script(),
                },
            )
        )
        self.file.close()

    def abort(self) -> None:
        self.file.close()


def _script() -> str:
    """report.js with the frame states it marks as problems
    (:data:`chatkit_trace.pipeline.PROBLEM_STATES`, in their declared order)."""
    states = [str(s) for s in FrameState if s in PROBLEM_STATES]
    return _fill(template("report.js"), {"problem_states": "[" + ", ".join(f"'{s}'" for s in states) + "]"})


def _meta(index: dict[str, Any]) -> str:
    t, g = index["trace"], index["generated"]
    bits = [
        f"trace <b>{_e(t['name'])}</b> ({_e(t['kind'])})",
        f"profile {_e(t.get('profile') or t.get('protocol') or '-')}",
        f"{t['sessions']} session(s), {len(index['runs'])} run(s), {t['frames']} frame(s), {t['facts']} fact(s)",
        f"generated {_e(g['at'])} by {_e(g['by'])}",
    ]
    if g.get("scrubbed"):
        bits.append("<b>message text scrubbed</b> (--scrub-text)")
    return " · ".join(bits)


def _counts(index: dict[str, Any]) -> str:
    s = index["summary"]
    if not s["total"]:
        text = '<span class="tone-ok">No findings.</span>'
    else:
        text = (
            f"<b>{s['total']}</b> finding(s): "
            f'<span class="sev-error">{s["error"]} error</span>, '
            f'<span class="sev-warning">{s["warning"]} warning</span>, '
            f'<span class="sev-info">{s["info"]} info</span>'
        )
    hidden = index["generated"].get("hidden")
    if hidden:
        text += f' <span class="muted">({hidden} not shown: --select, --ignore or --baseline)</span>'
    return text


def _warnings(index: dict[str, Any]) -> str:
    if not index["warnings"]:
        return ""
    items = "".join(f"<li>{_e(w)}</li>" for w in index["warnings"])
    return f'<div class="notice" role="note"><ul>{items}</ul></div>'


def summary_table(index: dict[str, Any]) -> str:
    """Every finding: severity, code, rule and its text, run, message, decisive frame (a link)."""
    items = index["findings"]
    if not items:
        return '<p class="tone-ok" id="no-findings">No findings in this trace.</p>'
    runs = index["runs"]
    cat = index["catalogue"]
    rows = []
    for i, f in enumerate(items):
        run = runs[f["run"]] if f.get("run") is not None else None
        decisive = f["frames"][0] if f["frames"] else None
        where = f"{_e(f['s'])} / {_e(f['r'])}" if f.get("r") is not None else '<span class="muted">trace-wide</span>'
        if run is not None and decisive is not None:
            frame = f'<a class="frame-link" href="{_e(frame_link(run["s"], run["r"], decisive))}">{_e(decisive)}</a>'
        elif decisive is not None:
            frame = f'<span class="mono">{_e(decisive)}</span>'
        else:
            frame = '<span class="muted">-</span>'
        info = cat.get(f["code"], {})
        rows.append(
            f'<tr data-i="{i}" data-code="{_e(f["code"])}" data-sev="{_e(f["sev"])}">'
            f'<td><span class="sev sev-{_e(f["sev"])}">{_e(f["sev"])}</span></td>'
            f'<td class="code">{_e(f["code"])}</td>'
            f'<td>{_e(f["rule"])}<span class="rule-text">{_e(info.get("when"))}</span></td>'
            f"<td>{where}</td>"
            f"<td>{_e(f['msg'])}</td>"
            f"<td>{frame}</td></tr>"
        )
    return (
        '<table class="findings" id="findings-table"><thead><tr><th scope="col">severity</th><th scope="col">code</th>'
        '<th scope="col">rule</th><th scope="col">session / run</th><th scope="col">finding</th>'
        '<th scope="col">decisive frame</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"
    )
