"""A step proposed by the openai backend keeps what the model call cost, and its raw score."""
from __future__ import annotations

import json

import pytest

from agents.runtime.models import Step, StepStatus
from agents.runtime.services import lifecycle
from devices.models import Device
from tests.agents.fake_openai import Reply

LLM_ENV = ("KAIROS_LLM_API_KEY", "OPENAI_API_KEY", "KAIROS_LLM_CALIBRATION",
           "KAIROS_LLM_CONFIDENCE", "KAIROS_LLM_PLANNING", "KAIROS_LLM_CLARIFY",
           "KAIROS_PROMPTS_DIR")


@pytest.fixture
def llm_env(fake_openai, monkeypatch: pytest.MonkeyPatch):
    """The openai backend pointed at the local fake server through the environment."""
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("KAIROS_LLM_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("KAIROS_LLM_MODEL", "fake-model")
    monkeypatch.setenv("KAIROS_LLM_MAX_RETRIES", "0")
    return fake_openai


def create_openai_task(user):
    device = Device.objects.get(name="sim-1")
    return lifecycle.create_task(user, device, "Open the settings", threshold=4.0, backend="openai")


@pytest.mark.django_db(transaction=True)
def test_an_openai_step_stores_the_endpoints_usage_tokens(demo, phones, inline_steps, llm_env):
    llm_env.script(Reply.completion("Thought: go home first\nAction: PRESS_HOME\nScore: 2",
                                    usage={"prompt_tokens": 812, "completion_tokens": 41}))
    task = create_openai_task(demo["user"])
    assert inline_steps.drain() == ["waiting"]  # score 2 < γ 4: a person decides

    step = Step.objects.get(task=task, index=0)
    assert (step.prompt_tokens, step.completion_tokens) == (812, 41)
    assert step.status == StepStatus.WAITING and step.proposed_action == {"type": "PRESS_HOME"}
    assert step.confidence == 2.0
    assert step.extra["raw_confidence"] == 2.0 and step.extra["model"] == "fake-model"
    assert step.extra["estimator"] == "self" and step.extra["token_source"] == "endpoint"
    assert llm_env.requests[0]["model"] == "fake-model"


@pytest.mark.django_db(transaction=True)
def test_a_calibrated_step_keeps_the_raw_score_next_to_the_calibrated_one(
        demo, phones, inline_steps, llm_env, tmp_path, monkeypatch):
    calibration = {"points": [[1, 0.1], [5, 0.5]], "method": "binned", "estimator": "self"}
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(calibration))
    monkeypatch.setenv("KAIROS_LLM_CALIBRATION", str(path))
    llm_env.script(Reply.completion("Action: PRESS_HOME\nScore: 5"))
    task = create_openai_task(demo["user"])
    inline_steps.drain()

    step = Step.objects.get(task=task, index=0)
    assert step.confidence == pytest.approx(1 + 4 * 0.5)  # what the gate compared with γ
    assert step.extra["raw_confidence"] == 5.0 and step.extra["p_right"] == pytest.approx(0.5)
    assert (step.prompt_tokens, step.completion_tokens) == (1000, 20)  # the fake's default usage
