from collections.abc import Iterator

import pytest

from tests.agents.fake_openai import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A real OpenAI-compatible server on 127.0.0.1 (see tests/agents/fake_openai.py)."""
    with FakeOpenAI() as server:
        yield server
