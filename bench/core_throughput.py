"""Core admission throughput, as ratios against ``json.loads`` measured in the same run.

    python bench/core_throughput.py [--repeat 5]

Cases:

* ``text-10k`` / ``text-100k``: one assistant message, one text part, N
  ``emit_delta`` facts (an OpenAI-shaped chunk per delta is the baseline's
  input: parsing that JSON is what every frame costs anyway);
* ``tool-heavy``: 200 tool calls in one answer, each a message fact with a running
  tool-call part, then the whole message replaced with the result (R6.2),
  plus a text delta between tools;
* the growth ratio ``text-100k / text-10k`` (linear growth gives ~10; the
  target is < 12: no quadratic copying of text or message lists per delta).

Targets (issue 2): admitting a delta costs no more than 5x parsing its JSON.
Numbers are medians of ``--repeat`` runs; machines are noisy, so only the
ratios are meaningful.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time

from chatkit_trace.core import ChatCore, RuntimeMessage, TextPart, ToolCallPart

MSG_RATIOS: list[float] = []


def chunk_json(i: int) -> str:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": "scripted",
            "choices": [{"index": 0, "delta": {"content": f"tok{i % 97} "}, "finish_reason": None}],
        }
    )


def fresh() -> ChatCore:
    core = ChatCore("s1", clock=lambda: 0.0)
    core.send("r1", {"text": "go"})
    for req in core.take_requests():
        core.dispatch_settled(req.run_id, True)
    core.emit_message(
        run_id="r1", event_id="start", message=RuntimeMessage("assistant:r1", "assistant", (TextPart("text:0", ""),))
    )
    return core


def bench_text(n: int) -> tuple[float, float]:
    frames = [chunk_json(i) for i in range(n)]
    t0 = time.perf_counter()
    parsed = [json.loads(f) for f in frames]
    t_json = time.perf_counter() - t0
    deltas = [p["choices"][0]["delta"]["content"] for p in parsed]
    ids = [f"e{i}" for i in range(n)]
    core = fresh()
    emit = core.emit_delta
    t0 = time.perf_counter()
    for eid, d in zip(ids, deltas, strict=False):
        emit(run_id="r1", event_id=eid, message_id="assistant:r1", part_id="text:0", delta=d)
    t_admit = time.perf_counter() - t0
    text = core.snapshot.message("assistant:r1").parts[0].text
    assert len(text) == sum(map(len, deltas))
    return t_admit, t_json


def bench_tools(n: int) -> tuple[float, float]:
    frames = []
    for i in range(n):
        frames.append(json.dumps({"type": "tool", "id": f"c{i}", "name": "lookup", "args": {"q": i}}))
        frames.append(json.dumps({"type": "tool_result", "id": f"c{i}", "result": {"hits": i}}))
        frames.append(json.dumps({"type": "text", "text": f"after {i}"}))
    t0 = time.perf_counter()
    for f in frames:
        json.loads(f)
    t_json = time.perf_counter() - t0
    # Build the facts first (that is the adapter's work), then time admission only.
    facts = []
    parts: list = [TextPart("text:0", "")]
    for i in range(n):
        running = ToolCallPart(f"tool:c{i}", f"c{i}", "lookup", args={"q": i})
        facts.append(("m", RuntimeMessage("assistant:r1", "assistant", tuple(parts) + (running,))))
        done = ToolCallPart(f"tool:c{i}", f"c{i}", "lookup", args={"q": i}, result={"hits": i})
        parts.append(done)
        facts.append(("m", RuntimeMessage("assistant:r1", "assistant", tuple(parts))))
        parts.append(TextPart(f"text:{i + 1}", ""))
        facts.append(("m", RuntimeMessage("assistant:r1", "assistant", tuple(parts))))
    # A second baseline: parsing the JSON of the whole message each fact carries
    # (what a protocol that re-sends whole messages, like ADK, costs per frame).
    msg_json = [json.dumps(m.to_json()) for _, m in facts]
    t0 = time.perf_counter()
    for f in msg_json:
        json.loads(f)
    t_msg_json = time.perf_counter() - t0
    core = fresh()
    t0 = time.perf_counter()
    for i, (_, msg) in enumerate(facts):
        core.emit_message(run_id="r1", event_id=f"t{i}", message=msg)
    t_admit = time.perf_counter() - t0
    assert core.emit_completed(run_id="r1", event_id="end").accepted
    MSG_RATIOS.append(t_admit / t_msg_json)
    return t_admit, t_json


def median_run(fn, arg, repeat):
    admits, jsons = [], []
    for _ in range(repeat):
        gc.collect()  # every timed run starts from the same heap state
        a, j = fn(arg)
        admits.append(a)
        jsons.append(j)
    return statistics.median(admits), statistics.median(jsons)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tools", type=int, default=200)
    args = ap.parse_args()
    rows = []
    results = {}
    cases = (("text-10k", bench_text, 10_000), ("text-100k", bench_text, 100_000), ("tool-heavy", bench_tools, args.tools))
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name, _, _ in cases}
    for _ in range(args.repeat):  # interleaved, so drift hits every case alike
        for name, fn, n in cases:
            samples[name].append(median_run(fn, n, 1))
    for name, fn, n in cases:
        admit = statistics.median(a for a, _ in samples[name])
        js = statistics.median(j for _, j in samples[name])
        facts = n if fn is bench_text else 3 * n
        results[name] = admit
        rows.append((name, facts, facts / admit, admit / facts * 1e6, js / facts * 1e6, admit / js))
    print(f"{'case':<12} {'facts':>8} {'facts/s':>12} {'us/fact':>9} {'us/json':>9} {'admit/json':>11}")
    for name, facts, rate, us, jus, ratio in rows:
        print(f"{name:<12} {facts:>8} {rate:>12,.0f} {us:>9.2f} {jus:>9.2f} {ratio:>11.2f}")
    growth = results["text-100k"] / results["text-10k"]
    print(f"growth text-100k / text-10k: {growth:.2f} (linear = 10, target < 12)")
    print(f"tool-heavy admit / json.loads of the whole message each fact carries: {statistics.median(MSG_RATIOS):.2f}")


if __name__ == "__main__":
    main()
