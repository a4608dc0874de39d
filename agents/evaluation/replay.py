"""Dataset replay (AITZ, StaR toggles): a static dataset scored step by step with the gold
history, as :func:`agents.evaluation.suites.evaluate_dataset` (``manage.py evaluate_dataset``).

Split out of :mod:`agents.evaluation.suites`, which still exports every name here.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from agents.brain import loop
from agents.brain.backends.base import (
    Backend, HistoryEntry, Proposal, StepContext, needs_ui_tree,
)
from agents.evaluation.datasets import DatasetStep, load_dataset
from agents.brain.matching import actions_match
from agents.brain.metrics import (
    StepLabel, TaskRecord, ToggleOutcome, step_metrics, task_metrics, toggle_metrics,
)
from devices.actions import Action
from devices.protocol import Observation
from devices.screenread import detect_nodes

# γ used when replaying a dataset: the product's default (CONTRACT KAIROS_DEFAULT_THRESHOLD)
# and OS-Kairos C.4 ("if not specifically mentioned, the threshold γ is set to 4").
DEFAULT_THRESHOLD = 4.0

ProgressCallback = Callable[[int, int], None]


# --- dataset replay --------------------------------------------------------------------


def evaluate_dataset(
    format: str,
    path: str | Path,
    backend: Backend | str,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    progress: ProgressCallback | None = None,
) -> dict[str, Any]:
    """Replay a static dataset step by step with the **gold** history (teacher forcing).

    At each step the backend sees the screenshot, the dataset's detected elements where it
    has them (AITZ's), else the elements OCR reads on the screenshot (StaR:
    :mod:`devices.screenread`), the instruction and the gold actions of the earlier steps, and its proposal is scored against the gold action with the
    StaR App. A.2 rules (a StaR click without a box by distance alone). A backend that
    ``needs_ui_tree`` is not replayed on steps where nothing could be read;
    ``unscored_steps`` counts them and ``unsupported`` says why. A record that cannot be
    read is skipped and listed under ``unreadable`` (index and reason), counted in
    ``unreadable_records``. Reported: ``type_acc``, ``sr``, ``tsr`` (an
    episode succeeds when every one of its steps matched), the HSR family at ``threshold``
    (``needed`` = the prediction does not match, ``asked`` = the confidence gate of
    :func:`agents.brain.loop.decide` would open a ticket) and, for ``star``, the toggle metrics
    of StaR App. A.1 under ``"toggle"``. ``backend`` is an object or a backend name.
    """
    problems: list[dict[str, Any]] = []
    episodes = load_dataset(format, path, problems)
    if isinstance(backend, str):
        backend = _backend_by_name(backend)
    # A screenshot the dataset detected nothing on (StaR: all of them) is read as a phone
    # without a UI tree is (issue 27): OCR text and switches, marked as detected. Only
    # pixels go in — never the gold box or the annotated state.
    read: dict[Path, list[Any]] = {}
    ocr_steps = 0
    for episode in episodes:
        for step in episode.steps:
            if not step.nodes:
                if step.image_path not in read:
                    read[step.image_path] = detect_nodes(step.load_image(), step.width,
                                                         step.height)
                step.nodes = list(read[step.image_path])
                ocr_steps += 1
    # A backend that reads only UI trees gets no made-up tree where the dataset has none
    # (StaR: screenshots only); those steps are left unscored and the report says so.
    unscored = 0
    if needs_ui_tree(backend):
        kept = [episode for episode in episodes if all(step.nodes for step in episode.steps)]
        unscored = sum(len(e.steps) for e in episodes) - sum(len(e.steps) for e in kept)
        episodes = kept
    total = sum(len(episode.steps) for episode in episodes)
    done = 0
    records: list[TaskRecord] = []
    per_step: list[dict[str, Any]] = []
    toggles: list[ToggleOutcome] = []
    for episode in episodes:
        labels: list[StepLabel] = []
        history: list[HistoryEntry] = []
        for step in episode.steps:
            outcome = _replay_step(backend, step, history, threshold)
            labels.append(outcome.label)
            per_step.append(outcome.to_json())
            if step.toggle:
                toggles.append(outcome.toggle)
            gold = step.gold.action
            history.append(loop.history_entry(len(history) + 1, gold, "agent", True))
            done += 1
            if progress is not None:
                progress(done, total)
        records.append(TaskRecord(
            task=episode.id,
            success=all(label.action_match for label in labels),
            steps=len(labels),
            labels=tuple(labels),
        ))
    steps = [label for record in records for label in record.labels]
    result: dict[str, Any] = {
        "format": format,
        "path": str(path),
        "backend": getattr(backend, "name", type(backend).__name__),
        "threshold": threshold,
        "episodes": len(records),
        "steps": len(steps),
        "tsr": task_metrics(records)["tsr"],
        **step_metrics(steps),
        "per_episode": [
            {
                "episode": record.task,
                "steps": record.steps,
                "type_matches": sum(1 for label in record.labels if label.type_match),
                "matches": sum(1 for label in record.labels if label.action_match),
                "success": record.success,
            }
            for record in records
        ],
        "per_step": per_step,
        "input": ("screenshot (read by OCR)" if format == "star" else
                  "screenshot + the dataset's detected elements (OCR where it has none)"),
        "ocr_steps": ocr_steps,
        "unscored_steps": unscored,
        # records that could not be read: reported, not fatal (their index and reason)
        "unreadable_records": len(problems),
        "unreadable": problems,
    }
    if unscored:
        name = getattr(backend, "name", type(backend).__name__)
        result["unsupported"] = (
            f"backend '{name}' cannot act on a screenshot alone and {unscored} step(s) of this "
            f"dataset have no UI tree: they were not scored (no tree is made up from the gold "
            f"box). Use a backend that reads screenshots, e.g. openai.")
    if format == "star":
        result["toggle"] = toggle_metrics(toggles)
    return result


@dataclass
class _StepOutcome:
    step: DatasetStep
    predicted: Action | None
    confidence: float | None
    label: StepLabel
    toggle: ToggleOutcome

    def to_json(self) -> dict[str, Any]:
        return {
            "episode": self.step.episode,
            "step": self.step.index,
            "gold": self.step.gold.action.to_json(),
            "predicted": self.predicted.to_json() if self.predicted else None,
            "confidence": self.confidence,
            "type_match": self.label.type_match,
            "match": self.label.action_match,
            "asked": self.label.asked,
        }


def _replay_step(
    backend: Backend, step: DatasetStep, history: list[HistoryEntry], threshold: float
) -> _StepOutcome:
    observation = dataset_observation(step)
    ctx = StepContext(
        instruction=step.instruction, observation=observation, history=list(history),
        step_index=len(history),
    )
    try:
        proposal = backend.propose(ctx)
    except Exception as exc:  # Backend.propose must not raise; one that does scores a miss
        proposal = Proposal(action=None, error=f"backend failed: {exc!r}")
    predicted = proposal.action if isinstance(proposal.action, Action) else None
    screen = (step.width, step.height)
    type_match, match = actions_match(predicted, step.gold, screen=screen, toggle=step.toggle)
    decision = loop.decide(proposal, ctx, threshold)
    label = StepLabel(
        needed=not match, asked=decision.outcome != loop.EXECUTE,
        type_match=type_match, action_match=match,
    )
    inverse = False
    if step.inverse is not None and predicted is not None:
        inverse = actions_match(predicted, step.inverse, screen=screen, toggle=True)[1]
    toggle = ToggleOutcome(
        positive=step.polarity != "negative",
        predicted_type=predicted.type if predicted else None,
        type_match=type_match, match=match, inverse_match=inverse,
    )
    return _StepOutcome(step, predicted, proposal.confidence, label, toggle)


def dataset_observation(step: DatasetStep) -> Observation:
    """The screenshot plays the device: its pixels are the replay's device pixels."""
    image = step.load_image()
    buffer = io.BytesIO()
    image.save(buffer, "JPEG", quality=85)
    return Observation(
        frame=step.index, width=step.width, height=step.height, app="",
        nodes=list(step.nodes), image=image, jpeg=buffer.getvalue(),
        extra={"source": step.source},
    )


def _backend_by_name(name: str) -> Backend:
    from agents.brain.backends import get_backend

    return get_backend(name)
