"""The ``openai`` backend against a real local OpenAI-compatible server (tests/agents/fake_openai.py)."""
from __future__ import annotations

import base64
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from agents.brain.backends import get_backend
from agents.brain.backends.base import HistoryEntry, StepContext
from agents.brain.backends.openai import PROMPTS_DIR, OpenAIBackend, llm_configured
from agents.brain.confidence import Calibration
from devices.actions import Action
from devices.protocol import AppInfo, Observation
from devices.uitree import UINode
from tests.agents.fake_openai import FakeOpenAI, Reply, logprob_tokens

W, H = 1080, 2400
WIFI_ANSWER = (
    "Plan: 1. Tap the Wi-Fi switch 2. Check it is on\n"
    "Step: Tap the Wi-Fi switch\n"
    "Thought: Wi-Fi is off, the goal wants it on.\n"
    "Action: CLICK <point>[[870, 146]]</point>\n"
    "Score: 4"
)


def settings_nodes() -> list[UINode]:
    """A Settings screen: Wi-Fi switch (off), Bluetooth, and unrelated rows."""
    nodes = [UINode(0, cls="android.widget.FrameLayout", bounds=(0, 0, W, H), package="com.android.settings")]
    rows = [
        ("Wi-Fi", "android.widget.Switch", "com.android.settings:id/wifi_switch", True),
        ("Bluetooth", "android.widget.Switch", "com.android.settings:id/bt_switch", True),
        ("Display", "android.widget.TextView", "com.android.settings:id/display", False),
        ("Battery", "android.widget.TextView", "com.android.settings:id/battery", False),
        ("Storage", "android.widget.TextView", "com.android.settings:id/storage", False),
        ("About phone", "android.widget.TextView", "com.android.settings:id/about", False),
    ]
    for i, (text, cls, rid, checkable) in enumerate(rows, start=1):
        top = 300 + (i - 1) * 200
        left = 800 if checkable else 0
        nodes.append(UINode(
            i, cls=cls, text=text, resource_id=rid, package="com.android.settings",
            bounds=(left, top, W, top + 100), clickable=True, checkable=checkable, checked=False,
            parent=0, depth=1,
        ))
    return nodes


def make_ctx(instruction: str = "Turn on Wi-Fi", **kwargs: Any) -> StepContext:
    image = Image.new("RGB", (W // 2, H // 2), "white")  # screenshots may be downscaled already
    ImageDraw.Draw(image).rectangle((10, 10, 60, 40), fill=(0, 128, 0))
    obs = Observation(frame=3, width=W, height=H, app="com.android.settings",
                      nodes=kwargs.pop("nodes", settings_nodes()), image=image, jpeg=b"")
    kwargs.setdefault("history", [
        HistoryEntry(0, {"type": "PRESS_HOME"}),
        HistoryEntry(1, {"type": "OPENAPP", "app": "Settings"}, summary="OPENAPP Settings"),
    ])
    kwargs.setdefault("apps", (AppInfo("Settings", "com.android.settings"), AppInfo("Clock", "com.android.deskclock")))
    return StepContext(instruction, obs, **kwargs)


def backend(fake: FakeOpenAI, **kwargs: Any) -> OpenAIBackend:
    kwargs.setdefault("backoff", 0.001)
    kwargs.setdefault("backoff_max", 0.002)
    kwargs.setdefault("timeout", 5.0)
    return OpenAIBackend("kairos-test-model", base_url=fake.base_url, api_key="k", environ={}, **kwargs)


def prompt_text(body: dict[str, Any]) -> str:
    content = body["messages"][0]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(part["text"] for part in content if part["type"] == "text")


def sent_image(body: dict[str, Any]) -> Image.Image:
    parts = [p for p in body["messages"][0]["content"] if p["type"] == "image_url"]
    assert len(parts) == 1
    url = parts[0]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


# --- what is sent ----------------------------------------------------------------------

def test_it_sends_the_model_a_downscaled_screenshot_and_the_step_context(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER))
    ctx = make_ctx()
    ctx.observation.image = Image.new("RGB", (W, H), "white")  # full device resolution
    backend(fake_openai).propose(ctx)

    body = fake_openai.requests[0]
    assert body["model"] == "kairos-test-model"
    image = sent_image(body)
    assert max(image.size) == 1024 and image.size == (round(W * 1024 / H), 1024)
    text = prompt_text(body)
    assert "Final goal: Turn on Wi-Fi" in text
    # The compact D-PoT history, one line per executed step.
    assert "step 1: PRESS_HOME\nstep 2: OPENAPP Settings" in text
    # The recommended components (RecAgent 3.3), not the whole screen.
    assert '#1 Switch "Wi-Fi" OFF @(870,146)' in text
    assert "About phone" not in text
    assert "Installed apps: Settings, Clock" in text
    assert "score from 1 to 5" in text and "CLICK <point>[[x-axis, y-axis]]</point>" in text


def test_the_image_long_side_is_configurable(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER))
    backend(fake_openai, image_long_side=512).propose(make_ctx())
    assert max(sent_image(fake_openai.requests[0]).size) == 512


def test_excluded_elements_never_reach_the_prompt(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER))
    proposal = backend(fake_openai).propose(
        make_ctx(excluded_elements={"com.android.settings:id/wifi_switch"}))
    assert '"Wi-Fi"' not in prompt_text(fake_openai.requests[0])
    assert "com.android.settings:id/wifi_switch" not in proposal.candidates


def test_references_from_similar_goals_are_in_the_prompt_only_when_given(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER), Reply.completion(WIFI_ANSWER))
    b = backend(fake_openai)
    b.propose(make_ctx(references=["Turn off Bluetooth", "Enable airplane mode"]))
    b.propose(make_ctx())
    with_refs, without = (prompt_text(body) for body in fake_openai.requests)
    assert "similar goals that were completed before" in with_refs
    assert "- Turn off Bluetooth\n- Enable airplane mode" in with_refs
    assert "similar goals" not in without


def test_the_toggle_note_is_added_only_for_toggle_work(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER), Reply.completion("Action: WAIT\nScore: 3"))
    b = backend(fake_openai)
    b.propose(make_ctx("Turn on Wi-Fi"))
    plain = [UINode(0, bounds=(0, 0, W, H)), UINode(1, cls="android.widget.Button", text="Send",
                                                   bounds=(0, 0, 500, 100), clickable=True)]
    b.propose(make_ctx("Send the draft", nodes=plain))
    toggle, other = (prompt_text(body) for body in fake_openai.requests)
    assert "Toggle State Reasoning" in toggle
    assert "Toggle State Reasoning" not in other


def test_set_of_mark_boxes_are_drawn_when_enabled(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER), Reply.completion(WIFI_ANSWER))
    backend(fake_openai).propose(make_ctx())
    backend(fake_openai, set_of_mark=True).propose(make_ctx())
    plain, marked = (sent_image(body).convert("RGB") for body in fake_openai.requests)
    # The Wi-Fi switch's box edge, in the sent image's pixels (device / 2 here).
    x, y = 800 * plain.width // W + 1, 350 * plain.height // H
    assert plain.getpixel((x, y)) == pytest.approx((255, 255, 255), abs=8)
    # JPEG smears a thin line over a few pixels; look for red across the edge.
    redness = max(marked.getpixel((x + dx, y))[0] - marked.getpixel((x + dx, y))[1] for dx in range(-4, 5))
    assert redness > 100
    far = marked.getpixel((x - 200, y))  # outside every recommended element
    assert far == pytest.approx((255, 255, 255), abs=8)


def test_prompt_templates_can_be_edited_without_code(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    for template in PROMPTS_DIR.glob("*.txt"):
        (tmp_path / template.name).write_text(template.read_text())
    (tmp_path / "action.txt").write_text("HOUSE PROMPT for $goal\n$elements\n")
    fake_openai.script(Reply.completion(WIFI_ANSWER))
    backend(fake_openai, prompts_dir=tmp_path).propose(make_ctx())
    assert prompt_text(fake_openai.requests[0]).startswith("HOUSE PROMPT for Turn on Wi-Fi\n#1 Switch")


# --- what comes back -------------------------------------------------------------------

def test_the_answer_becomes_a_proposal_in_device_pixels(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER, usage={"prompt_tokens": 812, "completion_tokens": 41}))
    proposal = backend(fake_openai).propose(make_ctx())
    assert proposal.action == Action("CLICK", x=940, y=350, element="com.android.settings:id/wifi_switch")
    assert proposal.confidence == 4.0
    assert proposal.thought == "Wi-Fi is off, the goal wants it on."
    assert proposal.plan == ["Tap the Wi-Fi switch", "Check it is on"]
    assert proposal.current_step == "Tap the Wi-Fi switch"
    assert proposal.raw == WIFI_ANSWER
    assert proposal.error is None and proposal.model_error is None
    assert (proposal.prompt_tokens, proposal.completion_tokens) == (812, 41)
    assert proposal.extra["token_source"] == "endpoint"
    assert "com.android.settings:id/wifi_switch" in proposal.candidates


def test_an_answer_without_a_score_has_no_confidence_so_the_gate_asks(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion("Action: PRESS_BACK"))
    proposal = backend(fake_openai).propose(make_ctx())
    assert proposal.action == Action("PRESS_BACK")
    assert proposal.confidence is None
    assert "no score in the answer" in proposal.extra["notes"]


def test_a_malformed_answer_is_a_parse_error_without_an_action(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion("I would probably tap something nice. 🙂"))
    proposal = backend(fake_openai).propose(make_ctx())
    assert proposal.action is None
    assert proposal.error and "no action" in proposal.error
    assert proposal.model_error is None
    assert proposal.raw.startswith("I would probably")


def test_without_usage_the_tokens_are_counted_locally(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER, usage=None))
    proposal = backend(fake_openai).propose(make_ctx())
    assert proposal.prompt_tokens > 500  # the action prompt plus an image estimate
    assert 20 < proposal.completion_tokens < 80
    assert proposal.extra["token_source"] in ("approx", "tiktoken:o200k_base")


# --- failures and retries --------------------------------------------------------------

def test_a_rate_limit_is_retried_then_succeeds(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.error(429, "slow down", {"Retry-After": "0"}), Reply.completion(WIFI_ANSWER))
    proposal = backend(fake_openai).propose(make_ctx())
    assert len(fake_openai.requests) == 2
    assert proposal.action is not None and proposal.model_error is None


def test_server_errors_exhaust_the_retries_into_a_model_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = Reply.error(500, "boom")
    proposal = backend(fake_openai, max_retries=2).propose(make_ctx())
    assert len(fake_openai.requests) == 3
    assert proposal.action is None and proposal.error is None
    assert "HTTP 500" in proposal.model_error and "3 attempts" in proposal.model_error


def test_a_timeout_is_retried_then_reported(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = Reply.hanging(30)
    proposal = backend(fake_openai, timeout=0.3, max_retries=1).propose(make_ctx())
    assert len(fake_openai.requests) == 2
    assert proposal.action is None
    assert "timed out" in proposal.model_error


def test_a_timeout_then_an_answer_succeeds(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.hanging(30), Reply.completion(WIFI_ANSWER))
    proposal = backend(fake_openai, timeout=0.3).propose(make_ctx())
    assert proposal.action is not None


def test_a_client_error_is_not_retried(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = Reply.error(401, "bad key")
    proposal = backend(fake_openai).propose(make_ctx())
    assert len(fake_openai.requests) == 1
    assert proposal.model_error == "HTTP 401: bad key"


def test_a_body_that_is_not_json_is_a_model_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = Reply.malformed()
    proposal = backend(fake_openai).propose(make_ctx())
    assert proposal.action is None and proposal.model_error


def test_an_unreachable_endpoint_is_a_model_error_not_an_exception() -> None:
    with FakeOpenAI() as fake:
        url = fake.base_url
    b = OpenAIBackend("m", base_url=url, environ={}, max_retries=1, backoff=0.001, timeout=2)
    proposal = b.propose(make_ctx())
    assert proposal.action is None and "connection failed" in proposal.model_error


def test_a_missing_api_key_is_a_model_error() -> None:
    proposal = OpenAIBackend(environ={}).propose(make_ctx())
    assert proposal.action is None and "KAIROS_LLM_API_KEY" in proposal.model_error


# --- estimators ------------------------------------------------------------------------

def test_the_logprob_estimator_uses_the_score_token_distribution(fake_openai: FakeOpenAI) -> None:
    entries = logprob_tokens(WIFI_ANSWER, {"4": math.log(0.5), "5": math.log(0.25), "2": math.log(0.25)})
    fake_openai.script(Reply.completion(WIFI_ANSWER, logprobs=[entries]))
    proposal = backend(fake_openai, estimator="logprob", top_logprobs=7).propose(make_ctx())
    body = fake_openai.requests[0]
    assert body["logprobs"] is True and body["top_logprobs"] == 7
    assert proposal.confidence == pytest.approx(0.5 * 4 + 0.25 * 5 + 0.25 * 2)
    assert proposal.extra["self_score"] == 4.0 and proposal.extra["estimator"] == "logprob"


def test_the_logprob_estimator_falls_back_to_the_stated_score(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER))
    proposal = backend(fake_openai, estimator="logprob").propose(make_ctx())
    assert proposal.confidence == 4.0
    assert any("no logprobs" in note for note in proposal.extra["notes"])


def test_a_server_refusing_logprobs_is_asked_again_without_them(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.error(400, "logprobs are not supported"), Reply.completion(WIFI_ANSWER))
    proposal = backend(fake_openai, estimator="logprob").propose(make_ctx())
    assert "logprobs" not in fake_openai.requests[1]
    assert proposal.confidence == 4.0


def test_the_critic_estimator_scores_the_action_with_a_second_call(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER), Reply.completion("{score: 2}"))
    proposal = backend(fake_openai, estimator="critic", critic_model="critic-model").propose(make_ctx())
    assert len(fake_openai.requests) == 2
    critic = fake_openai.requests[1]
    assert critic["model"] == "critic-model"
    text = prompt_text(critic)
    assert "student action: CLICK <point>[[870, 146]]</point>" in text
    assert "current goal: Tap the Wi-Fi switch" in text
    assert "teacher action" not in text  # no teacher at run time
    assert sent_image(critic).size == sent_image(fake_openai.requests[0]).size
    assert proposal.confidence == 2.0 and proposal.extra["self_score"] == 4.0
    assert proposal.prompt_tokens == 2000  # both calls are accounted


def test_an_unreadable_critic_falls_back_to_the_stated_score(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER), Reply.completion("hmm"))
    proposal = backend(fake_openai, estimator="critic").propose(make_ctx())
    assert proposal.confidence == 4.0
    assert any("critic answer unreadable" in note for note in proposal.extra["notes"])


def test_critic_score_with_a_teacher_is_the_collaborative_probing_prompt(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion("{score: 5}"))
    score, usage, error = backend(fake_openai).critic_score(
        make_ctx(), Action("CLICK", x=940, y=350), teacher=Action("CLICK", x=905, y=352))
    assert (score, error) == (5.0, None) and usage.prompt_tokens == 1000
    text = prompt_text(fake_openai.requests[0])
    assert "teacher action: CLICK <point>[[838, 147]]</point>" in text
    assert "different types, the score should only be between 1 and 3" in text


def test_the_consistency_estimator_votes_over_k_samples(fake_openai: FakeOpenAI) -> None:
    other = "Action: CLICK <point>[[500, 900]]</point>\nScore: 5"
    fake_openai.script(Reply.completion(other, WIFI_ANSWER, WIFI_ANSWER, "garbage", WIFI_ANSWER))
    proposal = backend(fake_openai, estimator="consistency", consistency_samples=5).propose(make_ctx())
    body = fake_openai.requests[0]
    assert body["n"] == 5 and body["temperature"] == 0.7
    assert proposal.action == Action("CLICK", x=940, y=350, element="com.android.settings:id/wifi_switch")
    assert proposal.confidence == pytest.approx(1 + 4 * 3 / 5)
    assert proposal.raw == WIFI_ANSWER


def test_consistency_asks_again_when_the_server_ignores_n(fake_openai: FakeOpenAI) -> None:
    fake_openai.default = Reply.completion(WIFI_ANSWER)  # one choice per call, like Ollama
    proposal = backend(fake_openai, estimator="consistency", consistency_samples=3).propose(make_ctx())
    assert [body.get("n") for body in fake_openai.requests] == [3, 2, None]
    assert proposal.confidence == 5.0 and proposal.extra["calls"] == 3


def test_a_calibration_maps_the_raw_score_to_a_probability(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER))
    calibration = Calibration(points=[(1.0, 0.1), (5.0, 0.9)])
    proposal = backend(fake_openai, calibration=calibration).propose(make_ctx())
    assert proposal.extra["raw_confidence"] == 4.0
    assert proposal.extra["p_right"] == pytest.approx(0.7)
    assert proposal.confidence == pytest.approx(1 + 4 * 0.7)


def test_a_calibration_file_is_loaded_from_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(Calibration(points=[(1.0, 0.2), (5.0, 0.8)]).to_json()))
    b = OpenAIBackend(environ={"KAIROS_LLM_CALIBRATION": str(path), "KAIROS_LLM_MODEL": "m"})
    assert b.calibration is not None and b.calibration.probability(5) == 0.8


# --- planning and clarification --------------------------------------------------------

def test_separate_planning_makes_the_dpot_call_first(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        Reply.completion("{'plan': '1. Tap Wi-Fi 2. Done', 'step': 'Tap Wi-Fi'}"),
        Reply.completion("Action: CLICK <point>[[870, 146]]</point>\nScore: 5"),
    )
    proposal = backend(fake_openai, planning="separate").propose(make_ctx(references=["Turn off Bluetooth"]))
    plan_prompt, action_prompt = (prompt_text(body) for body in fake_openai.requests)
    assert "Your ultimate goal is: Turn on Wi-Fi" in plan_prompt
    assert "step 2: OPENAPP Settings" in plan_prompt and "Turn off Bluetooth" in plan_prompt
    assert "About phone" in plan_prompt  # the planner sees the whole screen
    assert "current goal: Tap Wi-Fi" in action_prompt
    assert 'step list: ["Tap Wi-Fi", "Done"]' in action_prompt
    assert proposal.plan == ["Tap Wi-Fi", "Done"] and proposal.current_step == "Tap Wi-Fi"
    assert proposal.confidence == 5.0


def test_an_inline_clarification_request_becomes_a_question(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(
        '```json\n{"need_clarification": true, "clarification_question": "Which network?"}\n```'))
    proposal = backend(fake_openai).propose(make_ctx("Connect to Wi-Fi"))
    assert proposal.action is None and proposal.error is None
    assert proposal.clarification is not None and proposal.clarification.question == "Which network?"
    assert "need_clarification" in prompt_text(fake_openai.requests[0])


def test_a_question_already_asked_is_not_asked_again(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(
        '{"need_clarification": true, "clarification_question": "Which network?"}'))
    proposal = backend(fake_openai).propose(
        make_ctx("Connect to Wi-Fi", asked=["Which network?"], answers=["HomeNet"]))
    assert proposal.clarification is None
    assert proposal.action is None and proposal.error  # nothing to execute: a parse_error ticket
    assert "Questions already asked: Which network?" in prompt_text(fake_openai.requests[0])
    assert "Final goal: Connect to Wi-Fi (HomeNet)" in prompt_text(fake_openai.requests[0])


def test_separate_clarification_uses_the_recagent_prompt_first(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        Reply.completion('{"need_clarification": false, "clarification_question": ""}'),
        Reply.completion(WIFI_ANSWER),
        Reply.completion('{"need_clarification": true, "clarification_question": "Which one?"}'),
    )
    b = backend(fake_openai, clarify="separate")
    first = b.propose(make_ctx())
    second = b.propose(make_ctx())
    clarify_body = fake_openai.requests[0]
    assert isinstance(clarify_body["messages"][0]["content"], str)  # text only: no image tokens
    assert "intelligent clarification module" in clarify_body["messages"][0]["content"]
    assert "need_clarification" not in prompt_text(fake_openai.requests[1])
    assert first.action is not None and first.extra["calls"] == 2
    assert second.clarification is not None and second.clarification.question == "Which one?"
    assert len(fake_openai.requests) == 3


# --- configuration ---------------------------------------------------------------------

def test_configuration_comes_from_the_environment(fake_openai: FakeOpenAI) -> None:
    env = {"KAIROS_LLM_BASE_URL": fake_openai.base_url, "KAIROS_LLM_API_KEY": "sk-env",
           "KAIROS_LLM_MODEL": "env-model", "KAIROS_LLM_CONFIDENCE": "critic"}
    b = OpenAIBackend(environ=env)
    assert (b.model, b.api_key, b.estimator, b.base_url) == ("env-model", "sk-env", "critic", fake_openai.base_url)
    fake_openai.script(Reply.completion(WIFI_ANSWER), Reply.completion("{score: 3}"))
    b.propose(make_ctx())
    assert fake_openai.headers[0]["authorization"] == "Bearer sk-env"
    assert fake_openai.requests[0]["model"] == "env-model"
    assert OpenAIBackend(environ={"OPENAI_API_KEY": "sk-openai"}).api_key == "sk-openai"
    assert OpenAIBackend("explicit", environ=env).model == "explicit"


def test_llm_configured_follows_the_contract_variables() -> None:
    assert not llm_configured({})
    assert not llm_configured({"OPENAI_API_KEY": "x"})
    assert llm_configured({"KAIROS_LLM_BASE_URL": "http://127.0.0.1:11434/v1"})
    assert llm_configured({"KAIROS_LLM_MODEL": "gpt-4o"})


def test_bad_settings_are_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="estimator"):
        OpenAIBackend(estimator="vibes", environ={})
    with pytest.raises(ValueError, match="planning"):
        OpenAIBackend(planning="never", environ={})


def test_the_registry_builds_the_openai_backend(fake_openai: FakeOpenAI) -> None:
    b = get_backend("openai", base_url=fake_openai.base_url, environ={})
    assert isinstance(b, OpenAIBackend) and b.name == "openai"


# --- property: whatever the model says, a step ends in a proposal --------------------

@pytest.fixture(scope="module")
def shared_fake() -> Any:
    with FakeOpenAI() as server:
        yield server


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(
    st.text(max_size=200),
    st.sampled_from(["", "{", "Action:", "score: 4", '{"need_clarification": "maybe"}', "CLICK <point>[[0,0]]</point>"]),
))
def test_any_answer_ends_in_an_action_an_error_or_a_question(shared_fake: FakeOpenAI, content: str) -> None:
    shared_fake.script(Reply.completion(content))
    proposal = backend(shared_fake, clarify="inline").propose(make_ctx())
    outcomes = [proposal.action is not None, proposal.error is not None,
                proposal.clarification is not None, proposal.model_error is not None]
    assert sum(outcomes) == 1, proposal
    assert proposal.model_error is None
    if proposal.action is not None:
        assert proposal.confidence is None or 1.0 <= proposal.confidence <= 5.0
