"""What recording costs the user's stream: the same SSE workload three ways.

    python bench/proxy_overhead.py [--reps 9] [--paced 200] [--burst 5000]

Configurations (all on 127.0.0.1, mitmdump in reverse mode):

* ``direct``: the client talks to the backend;
* ``mitmdump``: plain mitmdump with ``--set stream_large_bodies=1`` and no
  addon (plain mitmdump buffers SSE, which is no fair baseline);
* ``addon``: mitmdump with ``chatkit_trace/addon.py`` recording (profile
  ``myproto``: the run is matched, redacted, every event stored, facts derived
  after the stream).

Workloads: ``paced``, 200 events 5 ms apart (chat-like), and ``burst``,
5,000 events written back to back.  Every event carries the backend's send
time, so the client measures per-event latency (arrival minus send), time
to first event (TTFE, from sending the request) and total time.  Runs are
interleaved (rep by rep: every configuration, every workload), and the
table shows medians over the reps; the ratios compare ``addon`` with
``mitmdump``.  Targets (issue 4): TTFE within 1.10x, burst total within
1.25x.  After the runs the addon's trace is checked: every event of every
run must be in it.

The backend and the proxy run in their own processes (the client runs
here), so nothing shares a GIL with the proxy.

Load (issue 21): ``--concurrency 50,100,150,200`` runs waves of N
concurrent paced streams (``--load-events`` 100 events ``--load-gap`` 20 ms
apart each) instead, interleaved wave by wave through streaming mitmdump
and mitmdump with the addon (and, with ``--baseline TREE``, with the addon
of another checkout, e.g. a worktree of main: ``addon@base``), in one run.
Per configuration and N: TTFE median and p95 over the wave's streams,
the p99 of every event's latency, medians over ``--waves`` waves, their
ratios to streaming mitmdump, the events every client received, the frames
each trace stored, and how long after the wave's last event its facts were
derived (every run of the wave ``completed`` in the ``runs`` table).
Targets (issue 21): TTFE median within 1.10x, p99 latency within 1.25x,
nothing lost, facts derived within a few seconds of the last event.

Live spans (issue 34): ``--otlp`` adds ``addon+otlp``, the same addon with
``chatkit_otlp`` pointing at an OTLP/HTTP receiver started here (its own
process: the standard library's HTTP server decoding each request with
opentelemetry-proto and counting the spans), interleaved with the others;
the spans it received and the recorder's ``otlp`` counts are printed after
the table.  Target: the same bar as recording (TTFE median within 1.10x of
streaming mitmdump).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ADDON = REPO / "chatkit_trace" / "addon.py"
CONFIGS = ("direct", "mitmdump", "addon")


# -- the backend (run as a subprocess: ``--serve PORT``) ---------------------------------


def serve(port: int) -> None:
    from aiohttp import web

    async def runs(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        run_id = body["runId"]
        n = int(request.query["n"])
        gap = float(request.query.get("gap", 0))
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for i in range(n):
            if i == 0:
                ev = {"type": "started", "run": run_id, "t": time.time()}
            elif i == n - 1:
                ev = {"type": "done", "t": time.time()}
            else:
                ev = {"type": "text", "text": f"token {i} ", "t": time.time()}
            await resp.write(f"id: e{i}\ndata: {json.dumps(ev)}\n\n".encode())
            if gap:
                await asyncio.sleep(gap)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/sessions/{sid}/runs", runs)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def receive(port: int, out: Path) -> None:
    """An OTLP/HTTP receiver (``--receive PORT FILE``): counts the spans it is sent into FILE."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    counts = {"spans": 0, "requests": 0, "bytes": 0}
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            req = ExportTraceServiceRequest()
            req.ParseFromString(body)
            with lock:
                counts["spans"] += sum(len(ss.spans) for rs in req.resource_spans for ss in rs.scope_spans)
                counts["requests"] += 1
                counts["bytes"] += len(body)
                out.write_text(json.dumps(counts))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


# -- processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"process exited early ({proc.returncode}): {proc.args}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"port {port} not listening after {timeout}s")


def start(argv: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    out = log.open("wb")
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    wait_port(port, proc)
    return proc


def stop(proc: subprocess.Popen[bytes], timeout: float = 60.0) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    return int(proc.returncode)


# -- the client ------------------------------------------------------------------------------


def cpu_ms(pid: int | None) -> float:
    """CPU time (user + system, all threads) of a process so far, in ms (Linux)."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000.0 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


async def one_run(session, url: str, run_id: str, n: int, gap: float) -> dict[str, float]:
    t0 = time.time()
    first = None
    lat: list[float] = []
    buf = b""
    async with session.post(f"{url}/sessions/{run_id}/runs?n={n}&gap={gap}", json={"runId": run_id, "text": "go"}) as r:
        async for chunk in r.content.iter_any():
            now = time.time()
            buf += chunk
            *events, buf = buf.split(b"\n\n")
            for ev in events:
                i = ev.find(b'"t": ')
                if i < 0:
                    continue
                sent = float(ev[i + 5 : ev.index(b"}", i)])
                lat.append((now - sent) * 1000.0)
                if first is None:
                    first = (now - t0) * 1000.0
    end = time.time()
    total = (end - t0) * 1000.0
    assert len(lat) == n, f"{run_id}: {len(lat)} events of {n}"
    lat.sort()
    return {
        "ttfe": first or 0.0,
        "p50": lat[len(lat) // 2],
        "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
        "total": total,
        "end": end,
    }


async def wait_derived(db: Path, run_id: str, since: float, timeout: float = 60.0) -> float:
    """Wait until the recorder has derived ``run_id``'s facts; the lag after the stream ended (ms)."""
    import sqlite3

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
            try:
                row = conn.execute("SELECT status FROM runs WHERE run_id = ?", [run_id]).fetchone()
            finally:
                conn.close()
            if row and row[0] == "completed":
                return (time.time() - since) * 1000.0
        except sqlite3.Error:
            pass
        await asyncio.sleep(0.01)
    raise RuntimeError(f"{run_id}: facts not derived after {timeout}s")


async def bench(
    urls: dict[str, str],
    reps: int,
    workloads: dict[str, tuple[int, float]],
    db: Path | None,
    pids: dict[str, int | None],
) -> dict[tuple[str, str], list[dict[str, float]]]:
    import aiohttp

    results: dict[tuple[str, str], list[dict[str, float]]] = {}
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False) as session:
        # warm-up: one run per configuration and workload
        for cfg, url in urls.items():
            for wl, (n, gap) in workloads.items():
                await one_run(session, url, f"warm-{cfg}-{wl}", n, gap)
        for rep in range(reps):
            order = list(urls.items())
            if rep % 2:
                order.reverse()  # interleave: no configuration always runs right after another
            for cfg, url in order:
                for wl, (n, gap) in workloads.items():
                    run_id = f"{cfg}-{wl}-{rep}"
                    c0 = cpu_ms(pids[cfg])
                    res = await one_run(session, url, run_id, n, gap)
                    res["cpu"] = cpu_ms(pids[cfg]) - c0
                    if cfg == "addon" and db is not None:
                        # Facts are derived after the stream (as between chat turns): wait for
                        # them, so derivation neither slows nor flatters the next run.
                        res["derived"] = await wait_derived(db, run_id, res["end"])
                        res["cpu_all"] = cpu_ms(pids[cfg]) - c0
                    results.setdefault((cfg, wl), []).append(res)
                    await asyncio.sleep(0.1)
            print(f"rep {rep + 1}/{reps} done", file=sys.stderr)
    return results


# -- load: N concurrent paced streams per wave ---------------------------------------------------


async def one_stream(session, url: str, run_id: str, n: int, gap: float) -> tuple[float, list[float], float]:
    """(TTFE ms, per-event latencies ms, time of the last event) of one stream; never raises."""
    t0 = time.time()
    first = 0.0
    lat: list[float] = []
    buf = b""
    now = t0
    try:
        async with session.post(f"{url}/sessions/{run_id}/runs?n={n}&gap={gap}", json={"runId": run_id, "text": "go"}) as r:
            async for chunk in r.content.iter_any():
                now = time.time()
                buf += chunk
                *events, buf = buf.split(b"\n\n")
                for ev in events:
                    i = ev.find(b'"t": ')
                    if i < 0:
                        continue
                    lat.append((now - float(ev[i + 5 : ev.index(b"}", i)])) * 1000.0)
                    if not first:
                        first = (now - t0) * 1000.0
    except Exception as err:  # noqa: BLE001 - counted as lost events below
        print(f"{run_id}: {type(err).__name__}: {err}", file=sys.stderr)
    return first, lat, now


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))] if values else float("nan")


def derived_count(db: Path, run_ids: list[str]) -> int:
    """How many of ``run_ids`` the recorder has derived as completed (read-only)."""
    import sqlite3

    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            marks = ",".join("?" * len(run_ids))
            row = conn.execute(f"SELECT COUNT(*) FROM runs WHERE status = 'completed' AND run_id IN ({marks})", run_ids).fetchone()
        finally:
            conn.close()
        return int(row[0])
    except sqlite3.Error:
        return 0


async def wait_wave_derived(db: Path, run_ids: list[str], since: float, timeout: float) -> float | None:
    """Seconds from ``since`` (the wave's last event) until every run is derived; None: not within ``timeout``."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if derived_count(db, run_ids) == len(run_ids):
            return time.time() - since
        await asyncio.sleep(0.05)
    return None


async def load(
    urls: dict[str, str], dbs: dict[str, Path], levels: list[int], waves: int, n: int, gap: float,
    pids: dict[str, int | None], derive_timeout: float,
) -> dict[tuple[str, int], list[dict[str, float]]]:
    import aiohttp

    results: dict[tuple[str, int], list[dict[str, float]]] = {}
    timeout = aiohttp.ClientTimeout(total=600)
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(timeout=timeout, auto_decompress=False, connector=connector) as session:
        for cfg, url in urls.items():  # warm-up
            await asyncio.gather(*(one_stream(session, url, f"warm-{cfg}-{i}", 5, 0.001) for i in range(10)))
            if cfg in dbs:
                await wait_wave_derived(dbs[cfg], [f"warm-{cfg}-{i}" for i in range(10)], time.time(), derive_timeout)
        for level in levels:
            for wave in range(waves):
                order = list(urls.items())
                k = wave % len(order)
                order = order[k:] + order[:k]  # interleave: each configuration takes each position in turn
                for cfg, url in order:
                    ids = [f"{cfg}-c{level}-w{wave}-s{i}" for i in range(level)]
                    c0 = {p: cpu_ms(pid) for p, pid in pids_of(cfg, pids).items()}
                    out = await asyncio.gather(*(one_stream(session, url, rid, n, gap) for rid in ids))
                    ttfe = [o[0] for o in out if o[1]]
                    lat = [x for o in out for x in o[1]]
                    last = max(o[2] for o in out)
                    res = {
                        "ttfe_med": statistics.median(ttfe) if ttfe else float("nan"),
                        "ttfe_p95": pct(ttfe, 0.95),
                        "p99": pct(lat, 0.99),
                        "received": float(len(lat)),
                        "expected": float(level * n),
                    }
                    cpu = {p: cpu_ms(pid) - c0[p] for p, pid in pids_of(cfg, pids).items()}
                    res["cpu_proxy"] = cpu.get("proxy", 0.0)
                    if cfg in dbs:
                        lag = await wait_wave_derived(dbs[cfg], ids, last, derive_timeout)
                        res["derived"] = float("nan") if lag is None else lag
                        cpu = {p: cpu_ms(pid) - c0[p] for p, pid in pids_of(cfg, pids).items()}
                        res["cpu_recorder"] = sum(v for p, v in cpu.items() if p != "proxy")
                        res["cpu_proxy_all"] = cpu.get("proxy", 0.0)
                    results.setdefault((cfg, level), []).append(res)
                    await asyncio.sleep(0.5)
                print(f"{level} streams: wave {wave + 1}/{waves} done", file=sys.stderr)
    return results


def pids_of(cfg: str, pids: dict[str, int | None]) -> dict[str, int]:
    """The proxy's pid and its children's (the recorder's own processes, if any)."""
    pid = pids.get(cfg)
    if pid is None:
        return {}
    out = {"proxy": pid}
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    for c in children:
        out[f"child-{c}"] = int(c)
    return out


def load_table(results: dict[tuple[str, int], list[dict[str, float]]], configs: list[str], levels: list[int],
               stored: dict[str, tuple[int, int]], gap: float) -> str:
    med = {k: {m: statistics.median(r[m] for r in v) for m in v[0]} for k, v in results.items()}
    lines = [
        "| streams | events/s | config | TTFE median | TTFE p95 | p99 latency | received | x TTFE median | x TTFE p95 | x p99 | derived after | proxy CPU | recorder CPU |",  # noqa: E501 - a table row
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for level in levels:
        base = med.get(("mitmdump", level))
        for cfg in configs:
            m = med.get((cfg, level))
            if m is None:
                continue
            rs = results[(cfg, level)]
            received = f"{sum(r['received'] for r in rs):.0f}/{sum(r['expected'] for r in rs):.0f}"
            ratios = ["-", "-", "-"]
            if base is not None and cfg != "mitmdump":
                ratios = [f"x{m[k] / base[k]:.2f}" for k in ("ttfe_med", "ttfe_p95", "p99")]
            derived = f"{m['derived']:.1f} s" if "derived" in m else "-"
            rcpu = f"{m['cpu_recorder']:.0f}" if "cpu_recorder" in m else "-"
            lines.append(
                f"| {level} | {level / gap:,.0f} | {cfg} | {m['ttfe_med']:.1f} | {m['ttfe_p95']:.1f} | "
                f"{m['p99']:.1f} | {received} | {' | '.join(ratios)} | {derived} | {m['cpu_proxy']:.0f} | {rcpu} |"
            )
    lines.append("")
    for cfg, (got, want) in stored.items():
        lines.append(f"{cfg}: {got} of {want} events stored as frames")
    return "\n".join(lines)


def table(results: dict[tuple[str, str], list[dict[str, float]]], workloads: dict[str, tuple[int, float]]) -> str:
    metrics = ("ttfe", "p50", "p99", "total", "cpu")
    med = {k: {m: statistics.median(r[m] for r in v) for m in metrics} for k, v in results.items()}
    lines = []
    for wl, (n, gap) in workloads.items():
        what = f"{n} events {gap * 1000:g} ms apart" if gap else f"{n} events back to back"
        lines.append(f"\n{wl}: {what} (medians of {len(next(iter(results.values())))} runs, ms)\n")
        lines.append("| config | TTFE | p50 | p99 | total | proxy CPU |")
        lines.append("|---|---|---|---|---|---|")
        for cfg in CONFIGS:
            if (cfg, wl) in med:
                m = med[(cfg, wl)]
                cpu = f"{m['cpu']:.0f}" if cfg != "direct" else "-"
                lines.append(f"| {cfg} | {m['ttfe']:.2f} | {m['p50']:.2f} | {m['p99']:.2f} | {m['total']:.1f} | {cpu} |")
        if ("addon", wl) in med and ("mitmdump", wl) in med:
            a, b = med[("addon", wl)], med[("mitmdump", wl)]
            lines.append(
                "| addon/mitmdump | "
                + " | ".join(f"{a[m] / b[m]:.2f}x" if b[m] else "-" for m in metrics)
                + " |"
            )
        derived = [r["derived"] for r in results.get(("addon", wl), []) if "derived" in r]
        if derived:
            cpu_all = statistics.median(r["cpu_all"] for r in results[("addon", wl)])
            lines.append(f"\naddon: facts derived {statistics.median(derived):.0f} ms (median) after the stream ended; "
                         f"proxy CPU including parsing and deriving after the stream: {cpu_all:.0f} ms")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=9, help="interleaved runs per configuration and workload (default 9)")
    ap.add_argument("--paced", type=int, default=200, help="events of the paced workload (5 ms apart)")
    ap.add_argument("--burst", type=int, default=5000, help="events of the burst workload (back to back)")
    ap.add_argument("--mitmdump", default=str(Path(sys.executable).parent / "mitmdump"), help="the mitmdump to run")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--addon", default=str(ADDON), help=argparse.SUPPRESS)  # experiments: another script
    ap.add_argument("--keep", action="store_true", help="keep the work directory (trace and logs)")
    ap.add_argument("--set", dest="sets", action="append", default=[], metavar="OPTION=VALUE",
                    help="an extra option for the recording mitmdump (e.g. chatkit_derive=off)")
    ap.add_argument("--concurrency", help="load mode: comma-separated numbers of concurrent paced streams per wave (e.g. 50,100,150,200)")
    ap.add_argument("--waves", type=int, default=3, help="load mode: waves per configuration and concurrency (default 3)")
    ap.add_argument("--load-events", type=int, default=100, help="load mode: events per stream (default 100)")
    ap.add_argument("--load-gap", type=float, default=0.02, help="load mode: seconds between a stream's events (default 0.02)")
    ap.add_argument("--baseline", help="load mode: another checkout whose addon runs too, as addon@base (e.g. a worktree of main)")
    ap.add_argument("--derive-timeout", type=float, default=120.0, help="load mode: longest wait for a wave's facts (s)")
    ap.add_argument("--otlp", action="store_true", help="load mode: also addon+otlp, live spans to a receiver started here")
    ap.add_argument("--receive", nargs=2, metavar=("PORT", "FILE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    if args.receive:
        receive(int(args.receive[0]), Path(args.receive[1]))
        return 0
    if args.concurrency:
        return main_load(args)
    workloads = {"paced": (args.paced, 0.005), "burst": (args.burst, 0.0)}
    work = Path(tempfile.mkdtemp(prefix="chatkit-bench-"))
    db = work / "bench.db"
    up, p_plain, p_addon = free_port(), free_port(), free_port()
    procs = []
    try:
        procs.append(start([sys.executable, __file__, "--serve", str(up)], up, work / "backend.log"))
        common = [args.mitmdump, "-q", "--listen-host", "127.0.0.1", "--mode", f"reverse:http://127.0.0.1:{up}"]
        procs.append(start([*common, "-p", str(p_plain), "--set", "stream_large_bodies=1"], p_plain, work / "mitmdump.log"))
        addon = start(
            [*common, "-p", str(p_addon), "-s", args.addon, "--set", f"chatkit_db={db}", "--set", "chatkit_profile=myproto",
             *(x for kv in args.sets for x in ("--set", kv))],
            p_addon,
            work / "addon.log",
        )
        procs.append(addon)
        time.sleep(1.0)  # the script loads after the port opens
        urls = {
            "direct": f"http://127.0.0.1:{up}",
            "mitmdump": f"http://127.0.0.1:{p_plain}",
            "addon": f"http://127.0.0.1:{p_addon}",
        }
        t0 = time.time()
        pids = {"direct": None, "mitmdump": procs[1].pid, "addon": addon.pid}
        results = asyncio.run(bench(urls, args.reps, workloads, db if args.addon == str(ADDON) else None, pids))
        elapsed = time.time() - t0
        rc = stop(addon)
        procs.remove(addon)
        if args.addon != str(ADDON):  # an experiment: no trace to check
            print(table(results, workloads))
            return 0
        from chatkit_trace.store import TraceStore

        store = TraceStore(db, readonly=True)
        runs = [e for e in store.exchanges() if e.capability == "run"]
        want = (args.reps + 1) * (args.paced + args.burst)
        got = store.frame_count()
        drops = store.get_meta("capture_stats", {}).get("queue_dropped", {})
        import mitmproxy.version

        print(f"chatkit-trace proxy overhead: mitmproxy {mitmproxy.version.VERSION}, Python {sys.version.split()[0]}, "
              f"{os.cpu_count()} CPUs, {elapsed:.0f} s")
        print(table(results, workloads))
        print(f"\ntrace: {len(runs)} runs, {got} of {want} events recorded, queue drops {drops}, "
              f"{len(store.capture_errors())} capture errors, addon exit code {rc}")
        if args.keep:
            print(f"work directory: {work}")
        return 0 if got == want else 1
    finally:
        for p in procs:
            stop(p)


def main_load(args: argparse.Namespace) -> int:
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    work = Path(tempfile.mkdtemp(prefix="chatkit-load-"))
    up = free_port()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(start([sys.executable, __file__, "--serve", str(up)], up, work / "backend.log"))
        common = [args.mitmdump, "-q", "--listen-host", "127.0.0.1", "--mode", f"reverse:http://127.0.0.1:{up}"]
        urls: dict[str, str] = {}
        dbs: dict[str, Path] = {}
        pids: dict[str, int | None] = {}
        addons: dict[str, subprocess.Popen[bytes]] = {}
        port = free_port()
        p = start([*common, "-p", str(port), "--set", "stream_large_bodies=1"], port, work / "mitmdump.log")
        procs.append(p)
        urls["mitmdump"], pids["mitmdump"] = f"http://127.0.0.1:{port}", p.pid
        trees: dict[str, tuple[Path, str | None, list[str]]] = {"addon": (REPO, None, [])}
        if args.baseline:
            base = Path(args.baseline).resolve()
            trees["addon@base"] = (base, str(base), [])
        received = work / "otlp.json"
        if args.otlp:
            rx = free_port()
            procs.append(start([sys.executable, __file__, "--receive", str(rx), str(received)], rx, work / "receiver.log"))
            trees["addon+otlp"] = (REPO, None, ["--set", f"chatkit_otlp=http://127.0.0.1:{rx}"])
        for cfg, (tree, pythonpath, more) in trees.items():
            port = free_port()
            db = work / f"{cfg.replace('@', '-').replace('+', '-')}.db"
            env = dict(os.environ)
            if pythonpath:
                env["PYTHONPATH"] = pythonpath  # its chatkit_trace before the installed one
            out = (work / f"{cfg.replace('@', '-')}.log").open("wb")
            proc = subprocess.Popen(
                [*common, "-p", str(port), "-s", str(tree / "chatkit_trace" / "addon.py"), "--set", f"chatkit_db={db}",
                 "--set", "chatkit_profile=myproto", *(x for kv in args.sets for x in ("--set", kv)), *more],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env,
            )
            wait_port(port, proc)
            procs.append(proc)
            addons[cfg] = proc
            urls[cfg], pids[cfg], dbs[cfg] = f"http://127.0.0.1:{port}", proc.pid, db
        time.sleep(1.5)  # the scripts load after the ports open
        t0 = time.time()
        results = asyncio.run(load(urls, dbs, levels, args.waves, args.load_events, args.load_gap, pids, args.derive_timeout))
        elapsed = time.time() - t0
        stored: dict[str, tuple[int, int]] = {}
        codes = {}
        for cfg, proc in addons.items():
            codes[cfg] = stop(proc)
            procs.remove(proc)
            from chatkit_trace.store import TraceStore

            store = TraceStore(dbs[cfg], readonly=True)
            want = 10 * 5 + sum(level * args.load_events * args.waves for level in levels)
            stored[cfg] = (store.frame_count(), want)
        import mitmproxy.version

        print(f"chatkit-trace proxy load: mitmproxy {mitmproxy.version.VERSION}, Python {sys.version.split()[0]}, "
              f"{os.cpu_count()} CPUs, {elapsed:.0f} s; {args.waves} interleaved waves per configuration; "
              f"{args.load_events} events {args.load_gap * 1000:g} ms apart per stream; ms unless stated; CPU in ms per wave")
        print(load_table(results, list(urls), levels, stored, args.load_gap))
        print(f"addon exit codes: {codes}")
        if args.otlp:
            from chatkit_trace.store import TraceStore

            with TraceStore(dbs["addon+otlp"], readonly=True) as store:
                counts = store.get_meta("otlp")
            got = json.loads(received.read_text()) if received.exists() else {}
            print(f"live spans: the recorder's counts {counts}; the receiver got {got}")
        if args.keep:
            print(f"work directory: {work}")
        lost = any(got != want for got, want in stored.values()) or any(
            r["received"] != r["expected"] for rs in results.values() for r in rs
        )
        return 1 if lost else 0
    finally:
        for proc in procs:
            stop(proc)
        if not args.keep:
            import shutil

            shutil.rmtree(work, ignore_errors=True)  # the traces of a run are hundreds of MB


if __name__ == "__main__":
    sys.exit(main())
