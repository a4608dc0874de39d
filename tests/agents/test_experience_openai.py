"""The openai backend's planning prompt carries the most similar earlier episodes — goal,
start screen and the person-verified actions (D-PoT §5.5; issue 25) — through the
experience layer, against the local OpenAI-compatible test server."""
from __future__ import annotations

from agents.brain.experience.layer import ExperienceBackend
from agents.brain.experience.memory import Episode, MemoryStore
from tests.agents.fake_openai import FakeOpenAI, Reply
from tests.agents.test_openai_backend import backend, make_ctx, prompt_text


def test_the_planning_prompt_carries_earlier_episodes_verified_actions(
        fake_openai: FakeOpenAI) -> None:
    store = MemoryStore()
    store.add_episode(Episode("com.android.settings", "turn on the Wi-Fi at home",
                              "Wi-Fi, Bluetooth, Display",
                              ("CLICK 'Wi-Fi'", "COMPLETE")))
    store.add_episode(Episode("com.android.settings", "set an alarm for 7", "Alarms",
                              ("CLICK 'Add alarm'",)))
    store.add_episode(Episode("com.other.app", "turn on the Wi-Fi hotspot", "Hotspot",
                              ("CLICK 'Hotspot'",)))
    fake_openai.script(
        Reply.completion("{'plan': '1. Tap Wi-Fi 2. Done', 'step': 'Tap Wi-Fi'}"),
        Reply.completion("Action: CLICK <point>[[870, 146]]</point>\nScore: 4"),
    )
    layered = ExperienceBackend(backend(fake_openai, planning="separate"), store)
    proposal = layered.propose(make_ctx("Turn on Wi-Fi please"))
    plan_prompt, action_prompt = (prompt_text(body) for body in fake_openai.requests)
    for prompt in (plan_prompt, action_prompt):
        assert "Goal: turn on the Wi-Fi at home" in prompt
        assert "Start screen: Wi-Fi, Bluetooth, Display" in prompt
        assert "Verified actions: 1. CLICK 'Wi-Fi'; 2. COMPLETE" in prompt
        assert "set an alarm" not in prompt  # not similar
        assert "Hotspot" not in prompt  # another app's episode
    assert proposal.action is not None  # no remembered step here: the model's own proposal


def test_without_experience_the_prompt_has_no_episodes(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion("Action: CLICK <point>[[870, 146]]</point>\nScore: 4"))
    ExperienceBackend(backend(fake_openai), MemoryStore()).propose(make_ctx("Turn on Wi-Fi"))
    assert "Verified actions" not in prompt_text(fake_openai.requests[0])
