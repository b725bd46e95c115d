"""Session-scoped fixtures: one real server per protocol per test session.

Each fixture starts its server lazily, the first time a test asks for it, and
stops it (whole process group) at the end of the session.  A missing env
skips the tests that need it, or fails them when CHATKIT_REQUIRE_PEERS=1
(see harness.peer_env).  Fixtures:

  adk_peer     -> harness.AdkServer     (google-adk api_server)
  adk_bridge_peer -> harness.AdkServer  (same, started with --a2a: ADK's A2A bridge)
  a2a_peer     -> harness.A2AServer     (a2a-sdk, v1.0 and v0.3)
  hermes_peer  -> harness.HermesServer  (hermes-agent + fake_llm.py)
  openai_peer  -> harness.OpenAIServer  (litellm proxy + fake_llm.py)
  phoenix_peer -> harness.PhoenixServer (Arize Phoenix: an OTLP receiver with its own store and API)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .harness import (
    A2AServer,
    AdkServer,
    HermesServer,
    OpenAIServer,
    PhoenixServer,
    a2a_server,
    adk_server,
    hermes_server,
    openai_server,
    phoenix_server,
)


@pytest.fixture(scope="session")
def adk_peer() -> Iterator[AdkServer]:
    with adk_server() as srv:
        yield srv


@pytest.fixture(scope="session")
def adk_bridge_peer() -> Iterator[AdkServer]:
    with adk_server(a2a_bridge=True) as srv:
        yield srv


@pytest.fixture(scope="session")
def a2a_peer() -> Iterator[A2AServer]:
    with a2a_server() as srv:
        yield srv


@pytest.fixture(scope="session")
def hermes_peer() -> Iterator[HermesServer]:
    with hermes_server() as srv:
        yield srv


@pytest.fixture(scope="session")
def openai_peer() -> Iterator[OpenAIServer]:
    with openai_server() as srv:
        yield srv


@pytest.fixture(scope="session")
def phoenix_peer() -> Iterator[PhoenixServer]:
    with phoenix_server() as srv:
        yield srv
