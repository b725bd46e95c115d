"""The R12 conformance suite on the seed's "my protocol" example adapter."""

from __future__ import annotations

from chatkit_trace.adapters import create_adapter
from chatkit_trace.examples.my_backend import create_backend
from chatkit_trace.examples.my_protocol import MyProtocol
from chatkit_trace.testing import ConformanceHarness, run_adapter_conformance

HARNESS = ConformanceHarness(
    create_adapter=lambda kind: create_adapter(MyProtocol(), **create_backend(kind)),
    make_input=lambda text: {"text": text},
    capabilities={"regenerate": True, "history": True},
)

NAMES = run_adapter_conformance("my-protocol", HARNESS)


def test_the_suite_defined_one_test_per_scenario():
    assert NAMES == [
        f"test_conformance_my_protocol_{k}" for k in ("text", "tool", "fail", "slow", "regenerate", "history")
    ]
    assert all(callable(globals()[n]) for n in NAMES)
