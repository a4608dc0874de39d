"""D-PoT references: by sentence embedding (the bundled model by default), else TF-IDF."""
from __future__ import annotations

import logging
import os
import sys
import types
from typing import Any

import pytest

from agents.brain import embeddings
from agents.brain.embeddings import load_embedder
from agents.runtime.models import Task, TaskStatus
from agents.brain.planning import ReferenceIndex
from agents.runtime.services import lifecycle, steps
from devices.models import Device
from tests.agents.fake_openai import FakeOpenAI

QUERY = "Silence my phone"
# TF-IDF sees the shared word "phone"; meaning puts "do not disturb" next to "silence".
WORDY = "Call my phone provider"
MEANT = "Turn on do not disturb"
OTHER = "Set an alarm for 7am"

_AXES = ({"silence", "disturb", "mute", "quiet"}, {"call", "provider", "dial"}, {"alarm", "clock"})


def concept_embed(text: str) -> list[float]:
    """A deterministic stand-in for a sentence-transformer: one axis per concept."""
    words = set(text.lower().split())
    return [float(len(words & axis)) for axis in _AXES]


@pytest.fixture(autouse=True)
def _fresh_loader(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(embeddings.EMBEDDING_MODEL_ENV, raising=False)
    embeddings.clear_cache()
    yield
    embeddings.clear_cache()


# --- ReferenceIndex ----------------------------------------------------------------

def test_the_index_ranks_by_embedding_cosine_when_given_an_embedding() -> None:
    goals = [WORDY, MEANT, OTHER]
    assert ReferenceIndex(goals).most_similar(QUERY, k=2) == [WORDY]  # TF-IDF: the shared word
    assert ReferenceIndex(goals, embed=concept_embed).most_similar(QUERY, k=2) == [MEANT]


def test_embedding_ranking_orders_by_cosine_not_by_insertion() -> None:
    vectors = {"q": [1.0, 0.0], "far": [0.2, 1.0], "near": [1.0, 0.1], "mid": [1.0, 0.6]}
    index = ReferenceIndex(["far", "mid", "near"], embed=lambda text: vectors[text])
    assert index.most_similar("q", k=3) == ["near", "mid", "far"]


# --- load_embedder -----------------------------------------------------------------

def test_none_switches_embeddings_off_and_imports_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # importing would fail
    assert load_embedder({"KAIROS_EMBEDDING_MODEL": "none"}) is None
    assert load_embedder({"KAIROS_EMBEDDING_MODEL": "off"}) is None


def test_minilm_means_the_bundled_model_not_sentence_transformers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # importing would fail
    assert load_embedder({}) is None and load_embedder({"KAIROS_EMBEDDING_MODEL": "  "}) is None
    embed = load_embedder({"KAIROS_EMBEDDING_MODEL": "minilm"})
    assert embed is not None and load_embedder({"KAIROS_EMBEDDING_MODEL": "all-MiniLM-L6-v2"}) is embed
    assert ReferenceIndex([WORDY, MEANT, OTHER], embed=embed).most_similar(QUERY, k=1) == [MEANT]


def test_without_sentence_transformers_installed_it_is_none(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    name = "sentence-transformers/all-mpnet-base-v2"  # not the bundled model: needs the library
    with caplog.at_level(logging.WARNING, logger="agents.brain.embeddings"):
        assert load_embedder({"KAIROS_EMBEDDING_MODEL": name}) is None
        assert load_embedder({"KAIROS_EMBEDDING_MODEL": name}) is None
    assert len([r for r in caplog.records if "TF-IDF" in r.getMessage()]) == 1  # logged once


def test_a_path_that_points_nowhere_is_none(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real package when it is installed, else the import fails: either way None.
    monkeypatch.setenv("KAIROS_EMBEDDING_MODEL", str(tmp_path / "no-such-model"))
    assert load_embedder() is None


class FakeModel:
    """``sentence_transformers.SentenceTransformer`` as far as load_embedder uses it."""

    loads: list[dict[str, Any]] = []
    encoded: list[str] = []

    def __init__(self, name: str, device: str = "cpu", local_files_only: bool = False) -> None:
        FakeModel.loads.append({"name": name, "local_files_only": local_files_only,
                                "offline": os.environ.get("HF_HUB_OFFLINE")})
        if name.endswith("missing"):
            raise OSError(f"{name} is not a local folder and offline mode is on")

    def encode(self, text: str, normalize_embeddings: bool = False) -> Any:
        FakeModel.encoded.append(text)
        return types.SimpleNamespace(tolist=lambda: concept_embed(text))


@pytest.fixture
def fake_sentence_transformers(monkeypatch: pytest.MonkeyPatch):
    FakeModel.loads, FakeModel.encoded = [], []
    module = types.ModuleType("sentence_transformers")
    module.SentenceTransformer = FakeModel  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "sentence_transformers", module)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return FakeModel


def test_a_local_model_is_loaded_offline_once_and_embeds(fake_sentence_transformers) -> None:
    env = {"KAIROS_EMBEDDING_MODEL": "/models/minilm"}
    embed = load_embedder(env)
    assert embed is not None and load_embedder(env) is embed  # cached per process
    assert fake_sentence_transformers.loads == [
        {"name": "/models/minilm", "local_files_only": True, "offline": "1"}]
    assert "HF_HUB_OFFLINE" not in os.environ  # the process environment is restored
    assert embed(MEANT) == concept_embed(MEANT)
    embed(MEANT)
    assert fake_sentence_transformers.encoded.count(MEANT) == 1  # vectors are cached too
    assert ReferenceIndex([WORDY, MEANT], embed=embed).most_similar(QUERY) == [MEANT]


def test_a_model_that_fails_to_load_is_none_not_an_exception(fake_sentence_transformers) -> None:
    assert load_embedder({"KAIROS_EMBEDDING_MODEL": "/models/missing"}) is None
    assert load_embedder({"KAIROS_EMBEDDING_MODEL": "/models/missing"}) is None
    assert len(fake_sentence_transformers.loads) == 1  # the failure is cached as well


# --- the product: references of an openai task ---------------------------------------

@pytest.fixture
def llm_env(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> FakeOpenAI:
    for name in ("KAIROS_LLM_API_KEY", "OPENAI_API_KEY", "KAIROS_LLM_CALIBRATION",
                 "KAIROS_LLM_CONFIDENCE", "KAIROS_LLM_PLANNING", "KAIROS_LLM_CLARIFY",
                 "KAIROS_LLM_RECOMMEND", "KAIROS_PROMPTS_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KAIROS_LLM_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("KAIROS_LLM_MODEL", "fake-model")
    monkeypatch.setenv("KAIROS_LLM_MAX_RETRIES", "0")
    return fake_openai


def earlier_tasks(user) -> None:
    from django.utils import timezone

    device = Device.objects.get(name="sim-1")
    for instruction, status in ((WORDY, TaskStatus.SUCCEEDED), (MEANT, TaskStatus.SUCCEEDED),
                                (OTHER, TaskStatus.SUCCEEDED),
                                ("Silence my phone ringtone", TaskStatus.FAILED)):
        task = lifecycle.create_task(user, device, instruction, backend="heuristic", start=False)
        Task.objects.filter(id=task.id).update(status=status, finished_at=timezone.now())


def reference_lines(fake: FakeOpenAI) -> list[str]:
    content = fake.requests[0]["messages"][0]["content"]
    text = "\n".join(part["text"] for part in content if part["type"] == "text")
    assert "similar goals that were completed before" in text
    block = text.split("completed before, as a reference:", 1)[1]
    return [line for line in block.splitlines() if line.startswith("- ")]


def run_openai_task(user, inline_steps) -> Task:
    task = lifecycle.create_task(user, Device.objects.get(name="sim-1"), QUERY, threshold=4.0,
                                 backend="openai")
    inline_steps.drain()
    return task


@pytest.mark.django_db(transaction=True)
def test_an_openai_task_is_shown_the_closest_earlier_succeeded_goals(demo, phones, inline_steps, llm_env,
                                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KAIROS_EMBEDDING_MODEL", "none")
    earlier_tasks(demo["user"])
    run_openai_task(demo["user"], inline_steps)
    # Embeddings off: TF-IDF; the failed task's goal (closest in words) is never used.
    assert reference_lines(llm_env) == [f"- {WORDY}"]


@pytest.mark.django_db(transaction=True)
def test_the_bundled_model_picks_references_by_meaning(demo, phones, inline_steps, llm_env,
                                                       monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("KAIROS_EMBEDDING_MODEL", "minilm")  # all-MiniLM-L6-v2 in numpy
    earlier_tasks(demo["user"])
    run_openai_task(demo["user"], inline_steps)
    # "do not disturb" first (meaning), then the goal sharing "phone"; never the failed
    # "Silence my phone ringtone", nor the alarm.
    assert reference_lines(llm_env) == [f"- {MEANT}", f"- {WORDY}"]


@pytest.mark.django_db(transaction=True)
def test_with_an_embedding_model_the_references_follow_meaning(demo, phones, inline_steps, llm_env,
                                                               monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(embeddings, "load_embedder", lambda environ=None: concept_embed)
    earlier_tasks(demo["user"])
    run_openai_task(demo["user"], inline_steps)
    assert reference_lines(llm_env) == [f"- {MEANT}"]


@pytest.mark.django_db(transaction=True)
def test_a_model_failing_mid_run_falls_back_to_tfidf(demo, phones, monkeypatch: pytest.MonkeyPatch):
    def broken(text: str) -> list[float]:
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(embeddings, "load_embedder", lambda environ=None: broken)
    monkeypatch.setenv("KAIROS_LLM_BASE_URL", "http://127.0.0.1:9/v1")  # configured, never called
    earlier_tasks(demo["user"])
    task = lifecycle.create_task(demo["user"], Device.objects.get(name="sim-1"), QUERY,
                                 backend="openai", start=False)
    assert steps._references(task) == [WORDY]
