"""The fault-injection addon: ``Faults`` (loaded by ``addons/faults.py``).

Options (real mitmproxy options, ``--set``):

* ``chatkit_fault``: rules, one per ``--set chatkit_fault=…`` (or ``;``
  separated); syntax in :mod:`chatkit_trace.addons.fault_rules` and
  docs/faults.md.  Empty (the default): the addon does nothing at all and
  the traffic is byte-for-byte what it would be without it.
* ``chatkit_fault_seed``: the seed of everything random (``p=``,
  ``jitter=``).  Unset: a seed is drawn at start, logged and written into
  every faulted exchange's notes, so any run can be replayed exactly.
* ``chatkit_profile``: the recording addon's option (shared, same
  signature): the route profile that gives ``capability=``, ``route=``,
  ``session=`` and ``run=`` their meaning.

In the ``request`` hook each rule is tried against the exchange (target
keys, then ``nth`` counted per rule in request order, then ``p`` with the
rule's seeded generator).  An ``http`` rule answers at once
(``flow.response``: the backend is never called).  Stream rules redirect the
exchange to the relay (:mod:`chatkit_trace.addons.fault_relay`); the request
line is put back in ``responseheaders`` so mitmweb and the trace show the
real destination.

What was done is in ``flow.metadata["chatkit_fault"]`` (the recording addon
stores it as the exchange's ``notes.fault``), in the ``X-Chatkit-Fault``
response header of a faulted exchange, and in one log line per fault.

Nothing here raises into mitmproxy: a failure is logged once and the
exchange goes on unfaulted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections.abc import Sequence
from typing import Any, Optional

from mitmproxy import ctx, exceptions, http

from chatkit_trace.capture._lines import install
from chatkit_trace.route import Router

from .fault_relay import FLOW_HEADER, MARK_HEADER, Plan, Relay
from .fault_rules import FaultRuleError, Rule, parse_rules

__all__ = ["Faults"]

logger = install(logging.getLogger("chatkit_trace.faults"))  # lines masked, control characters shown

FAULT_HELP = (
    "chatkit-trace fault injection: one rule per --set (or ';'-separated), e.g. "
    "cut:after=5,mode=reset,capability=run,nth=1 | delay:by=200ms,jitter=50ms | stall:for=2s,after=3 | "
    "dup:at=3 | drop:at=2 | swap:at=2 | corrupt:at=2,how=utf8 | http:status=429,retry_after=2. "
    "Targets: capability=, route=, path=, method=, session=, run=, nth=, p=. See docs/faults.md."
)
SEED_HELP = (
    "chatkit-trace fault injection: seed for p= and jitter= (unset: drawn at start and logged)."
)


def _profile_option() -> tuple[type, Any, str]:
    from chatkit_trace.capture.recorder import OPTIONS

    return OPTIONS["chatkit_profile"]


class Faults:
    """Injects faults into chat traffic by rule (module docstring)."""

    def __init__(self) -> None:
        self.rules: list[Rule] = []
        self.profile: Any = None
        self.router = Router(None)
        self.seed = 0
        self.counts: list[int] = []
        self.relay: Relay | None = None
        self.plans: dict[str, Plan] = {}
        self.targets: dict[
            str, tuple[str, str, int]
        ] = {}  # flow id -> (scheme, host, port) before redirect
        self._logged: set[str] = set()

    # ------------------------------------------------------------------ options

    def load(self, loader: Any) -> None:
        loader.add_option("chatkit_fault", Sequence[str], [], FAULT_HELP)
        loader.add_option("chatkit_fault_seed", Optional[int], None, SEED_HELP)  # noqa: UP045 - mitmproxy's typespec
        typ, default, help_ = _profile_option()
        loader.add_option("chatkit_profile", typ, default, help_)

    def configure(self, updated: set[str]) -> None:
        if not {"chatkit_fault", "chatkit_fault_seed", "chatkit_profile"} & updated:
            return
        opts = ctx.options
        try:
            rules = parse_rules(list(opts.chatkit_fault))
        except FaultRuleError as err:
            raise exceptions.OptionsError(f"chatkit_fault: {err}") from None
        profile = None
        name = (opts.chatkit_profile or "").strip()
        needs = [r.text for r in rules if r.target.needs_profile]
        if name and rules:
            try:
                from chatkit_trace.route.profiles import load_profile

                profile = load_profile(name)
            except Exception as err:  # noqa: BLE001 - ProfileError, a missing file …
                if needs:
                    raise exceptions.OptionsError(
                        f"chatkit_fault: {needs[0]!r} needs a route profile: {err}"
                    ) from None
        elif needs:
            raise exceptions.OptionsError(
                f"chatkit_fault: {needs[0]!r} targets a capability, route, session or run: set chatkit_profile"
            )
        seed = opts.chatkit_fault_seed
        if seed is None:
            seed = random.SystemRandom().randrange(2**31) if rules else 0
        changed = [r.text for r in rules] != [r.text for r in self.rules] or seed != self.seed
        self.rules, self.profile, self.seed = rules, profile, seed
        self.router = Router(profile)  # the recorder's matching (chatkit_trace.route)
        if changed:
            self.counts = [0] * len(rules)
        if rules and changed:
            fixed = (
                ""
                if opts.chatkit_fault_seed is not None
                else f" (replay with --set chatkit_fault_seed={seed})"
            )
            logger.info(
                f"chatkit-trace faults: {len(rules)} rule(s), seed {seed}{fixed}: "
                + "; ".join(r.text for r in rules)
            )

    # ------------------------------------------------------------------ lifecycle

    def done(self) -> None:
        relay, self.relay = self.relay, None
        if relay is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        loop.create_task(relay.stop())

    def _once(self, where: str, err: BaseException) -> None:
        if where not in self._logged:
            self._logged.add(where)
            logger.warning(
                f"chatkit-trace faults: error in {where} (logged once; that exchange goes on unfaulted): "
                f"{type(err).__name__}: {err}",
                exc_info=err,
            )

    # ------------------------------------------------------------------ choosing

    def select(self, flow: http.HTTPFlow) -> list[tuple[Rule, random.Random, int]]:
        """The rules that apply to this exchange, each with its generator and ordinal.

        Counting ``nth`` happens here, so call it once per exchange.
        """
        req = flow.request
        path = req.path.split("?", 1)[0]
        match = None
        if self.profile is not None:
            try:
                body = req.get_content(strict=False) if req.raw_content is not None else None
                match = self.router.match(req.method, req.path, req.headers.fields, body)
            except Exception:  # noqa: BLE001 - an odd request: no identity
                match = None
        upgrade = req.headers.get("upgrade", "").lower() == "websocket"
        out = []
        for i, rule in enumerate(self.rules):
            t = rule.target
            if not t.matches(req.method, path, match):
                continue
            if rule.acts_on_stream and match is not None and match.stream is False and not upgrade:
                continue  # the route never streams (history, stop …): nothing to act on
            self.counts[i] += 1
            ordinal = self.counts[i]
            if t.nth is not None and ordinal != t.nth:
                continue
            rng = random.Random(f"{self.seed}:{i}:{ordinal}")
            if t.p is not None and rng.random() >= t.p:
                continue
            out.append((rule, rng, ordinal))
        return out

    # ------------------------------------------------------------------ hooks

    async def request(self, flow: http.HTTPFlow) -> None:
        if not self.rules or flow.response is not None or flow.error is not None:
            return
        try:
            chosen = self.select(flow)
            if not chosen:
                return
            notes: dict[str, Any] = {
                "rules": [r.text for r, _, _ in chosen],
                "seed": self.seed,
                "matched": [{"rule": r.text, "nth": n} for r, _, n in chosen],
            }
            answer = next((r for r, _, _ in chosen if r.kind == "http"), None)
            if answer is not None:
                self._answer(flow, answer, chosen, notes)
                return
            await self._redirect(flow, chosen, notes)
        except Exception as err:  # noqa: BLE001 - never raise into mitmproxy
            self._once("request", err)

    def _answer(
        self,
        flow: http.HTTPFlow,
        rule: Rule,
        chosen: list[tuple[Rule, random.Random, int]],
        notes: dict[str, Any],
    ) -> None:
        body = {
            "error": {
                "message": f"chatkit-trace fault injection: HTTP {rule.status} instead of calling the backend",
                "type": "chatkit_trace_fault",
                "code": rule.status,
                "rule": rule.text,
            }
        }
        headers = {"Content-Type": "application/json", MARK_HEADER: rule.text}
        if rule.retry_after is not None:
            headers["Retry-After"] = str(rule.retry_after)
        flow.response = http.Response.make(rule.status, json.dumps(body).encode(), headers)
        notes["via"] = "proxy"
        entry: dict[str, Any] = {"rule": rule.text, "kind": "http", "status": rule.status}
        if rule.retry_after is not None:
            entry["retry_after"] = rule.retry_after
        notes["applied"] = [entry]
        others = [r.text for r, _, _ in chosen if r is not rule]
        if others:
            notes["not_applied"] = [
                {"rule": t, "why": f"{rule.text} answered instead of the backend"} for t in others
            ]
        flow.metadata["chatkit_fault"] = notes
        self._log(flow, entry)

    async def _redirect(
        self,
        flow: http.HTTPFlow,
        chosen: list[tuple[Rule, random.Random, int]],
        notes: dict[str, Any],
    ) -> None:
        if self.relay is None:
            self.relay = Relay(ssl_insecure=bool(getattr(ctx.options, "ssl_insecure", False)))
        relay = self.relay
        await relay.start()
        req = flow.request
        notes["via"] = "relay"
        flow.metadata["chatkit_fault"] = notes
        plan = Plan(
            token=flow.id,
            scheme=req.scheme,
            host=req.host,
            port=req.port,
            rules=[(r, g) for r, g, _ in chosen],
            notes=notes,
            describe=", ".join(notes["rules"]),
            on_applied=lambda entry: self._log(flow, entry),
        )
        relay.plans[flow.id] = plan
        self.plans[flow.id] = plan
        self.targets[flow.id] = (req.scheme, req.host, req.port)
        req.headers[FLOW_HEADER] = flow.id
        # The request line and Host header stay as they are; only where
        # mitmproxy connects changes (data.*: the setters would rewrite Host).
        req.scheme = "http"
        req.data.host = "127.0.0.1"
        req.data.port = relay.port

    def _restore(self, flow: http.HTTPFlow) -> None:
        target = self.targets.pop(flow.id, None)
        if target is None:
            return
        req = flow.request
        req.scheme = target[0]
        req.data.host = target[1]
        req.data.port = target[2]
        req.headers.pop(FLOW_HEADER, None)

    def _finish(self, flow: http.HTTPFlow) -> None:
        self._restore(flow)
        plan = self.plans.pop(flow.id, None)
        if plan is not None and self.relay is not None:
            self.relay.plans.pop(flow.id, None)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        try:
            self._restore(flow)
        except Exception as err:  # noqa: BLE001 - a fault addon never fails the flow it rides on: said once
            self._once("responseheaders", err)

    def response(self, flow: http.HTTPFlow) -> None:
        try:
            if flow.websocket is None:
                self._finish(flow)
            else:
                self._restore(flow)
        except Exception as err:  # noqa: BLE001 - a fault addon never fails the flow it rides on: said once
            self._once("response", err)

    def error(self, flow: http.HTTPFlow) -> None:
        try:
            self._finish(flow)
        except Exception as err:  # noqa: BLE001 - a fault addon never fails the flow it rides on: said once
            self._once("error", err)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        try:
            self._finish(flow)
        except Exception as err:  # noqa: BLE001 - a fault addon never fails the flow it rides on: said once
            self._once("websocket_end", err)

    # ------------------------------------------------------------------ log

    def _log(self, flow: http.HTTPFlow, entry: dict[str, Any]) -> None:
        try:
            req = flow.request
            where = f"{req.method} {req.path.split('?', 1)[0]}"
            what = ", ".join(
                f"{k}={v}" for k, v in entry.items() if k not in ("rule", "kind", "at_s")
            )
            logger.info(f"chatkit-trace fault: {entry.get('rule')} on {where}: {what}")
        except Exception:  # noqa: BLE001, S110 - a log line is not worth a failure
            pass
