"""A handoff or an executed step as a fine-tuning sample: the model's prompt and its target.

Pure Python. The prompt is the openai backend's own action prompt (``agents/brain/prompts/
action.txt``) filled from what was stored at that step, so a model trained on the export
is prompted at run time as it was trained. The target is OS-Kairos Eq. 3's
``action || score`` (Sec. 4.2), written in the prompt's output format::

    Action: CLICK <point>[[884, 117]]</point>
    Score: 5

which ``agents.brain.scoring.parse_scored_action`` reads back to the same action and score.
"""
from __future__ import annotations

import string
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Sequence

from agents.brain.prompting import PROMPTS_DIR, TOGGLE_GOAL_RE, render_prompt
from agents.brain.recommend import format_elements
from agents.runtime.training.labels import SCORE_RIGHT, score_label
from devices.actions import Action, action_to_text, validate_action
from devices.uitree import nodes_from_json

IMAGE_TAG = "<image>"  # LLaMA-Factory's placeholder: one per entry of a sample's images


@dataclass(frozen=True)
class Sample:
    """One (prompt, target) pair. ``source`` says whose action the target is."""

    prompt: str
    target: str
    image: str  # path of the screenshot inside the export ("" when there is none)
    source: str  # "agent" | "human"
    score: int


def target_text(action: Action, score: int, screen: tuple[int, int]) -> str:
    """OS-Kairos Eq. 3 ``action || score`` in the action prompt's output format."""
    return f"Action: {action_to_text(action, screen)}\nScore: {int(score)}"


def prompt_text(*, goal: str, history: Sequence[str], ui_nodes: Iterable[dict[str, Any]],
                screen: tuple[int, int], apps: Sequence[str] = ()) -> str:
    """The action prompt as the openai backend renders it, with the screenshot's tag."""
    nodes = nodes_from_json(list(ui_nodes or []))
    wants_toggle_note = bool(TOGGLE_GOAL_RE.search(goal)) or any(n.checkable for n in nodes)
    text = _action_prompt(wants_toggle_note, _mtime("action"), _mtime("toggle_note")) \
        .safe_substitute(
            goal=goal,
            history="\n".join(f"step {i}: {h}" for i, h in enumerate(history, 1)) or "(none)",
            apps=", ".join(apps) or "(unknown)",
            elements=format_elements(nodes, screen[0], screen[1]) or "(no elements)")
    # The prompt ends with "Screenshot:"; the image goes right after it.
    return text.rstrip() + "\n" + IMAGE_TAG


def _mtime(template: str) -> int:
    return (PROMPTS_DIR / f"{template}.txt").stat().st_mtime_ns


@lru_cache(maxsize=8)
def _action_prompt(toggle_note: bool, *_mtimes: int) -> string.Template:
    """The action prompt with what an exported sample leaves empty (references, the
    separate plan's step section, the inline clarification) already rendered: only the
    goal, history, apps and elements change from one sample to the next. The files'
    modification times are part of the key, so an edited prompt is read again."""
    return string.Template(render_prompt(
        "action", toggle_note=render_prompt("toggle_note") if toggle_note else "",
        references="", step_section="", clarification_section=""))


def _action(data: Any, screen: tuple[int, int]) -> Action | None:
    checked = validate_action(data, screen) if isinstance(data, dict) else None
    return checked if isinstance(checked, Action) else None


def handoff_samples(*, decision: str, agent_action: Any, human_action: Any, prompt: str,
                    screen: tuple[int, int], image: str,
                    label: int | None | str = "from decision") -> list[Sample]:
    """What one resolved intervention teaches (OS-Kairos Eq. 3, Sec. 4.2).

    The agent's own action with the person's verdict as its score (5 approved, 1 edited
    or taken over) teaches the model when to ask; an edit's replacement, with score 5,
    is a teacher demonstration (the probing framework's teacher action, Sec. 4.1).
    Answers and aborts judge no action and give no sample. ``label`` is the stored one
    (``TrainingRecord.score_label``): an edit that changed nothing, or a take-over whose
    first input was the proposal, scores 5 (issue 24); without it, the decision's.
    A take-over's first input is its teacher action, as an edit's is.
    """
    if label == "from decision":
        label = score_label(decision)
    agent = _action(agent_action, screen)
    if label is None or agent is None:
        return []
    out = [Sample(prompt, target_text(agent, label, screen), image, "agent", label)]
    human = _action(human_action, screen) if decision in ("edit", "takeover") else None
    if human is not None and not human.same_as(agent):
        out.append(Sample(prompt, target_text(human, SCORE_RIGHT, screen), image, "human",
                          SCORE_RIGHT))
    return out


def step_sample(*, executed_action: Any, decided_by: str, decision: str | None,
                task_succeeded: bool | None, prompt: str, screen: tuple[int, int],
                image: str, right: bool | None = None,
                learnable: bool = True) -> Sample | None:
    """One executed step of a trajectory (``export_training --episodes``).

    A person's action (an edit or a take-over input) is a score-5 demonstration; an
    approved agent action scores 5; an agent action that ran alone scores 5 only when
    the episode reached its goal — nobody judged it otherwise, so it gives no sample.
    """
    action = _action(executed_action, screen)
    if action is None:
        return None
    if decided_by == "operator" or decision == "approve" or right is True:
        return Sample(prompt, target_text(action, SCORE_RIGHT, screen), image,
                      "human" if decided_by == "operator" else "agent", SCORE_RIGHT)
    if task_succeeded and learnable:
        # ``learnable`` False: the owner said the task was not what they asked (a "no"
        # verdict), so its acted-alone steps teach nothing (issue 24, item 3).
        return Sample(prompt, target_text(action, SCORE_RIGHT, screen), image, "agent",
                      SCORE_RIGHT)
    return None


def sharegpt_record(sample: Sample) -> dict[str, Any]:
    """A LLaMA-Factory multimodal ShareGPT record: user prompt with one ``<image>`` per
    image, then the assistant's target."""
    prompt = sample.prompt if sample.image else sample.prompt.replace(IMAGE_TAG, "").rstrip()
    return {
        "messages": [{"role": "user", "content": prompt},
                     {"role": "assistant", "content": sample.target}],
        "images": [sample.image] if sample.image else [],
    }


def dataset_info(name: str, file_name: str) -> dict[str, Any]:
    """``dataset_info.json`` that LLaMA-Factory loads as is (``dataset_dir`` = the export)."""
    return {name: {
        "file_name": file_name, "formatting": "sharegpt",
        "columns": {"messages": "messages", "images": "images"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                 "assistant_tag": "assistant", "system_tag": "system"},
    }}
