"""The ``openai`` backend: any OpenAI-compatible chat endpoint with images.

Pure Python (no Django). One step, with the papers each part comes from:

1. plan — D-PoT (App. A.1): a plan from the current screen, the goal and the compact
   execution history ("step i: action"), and the step to do now. By default the plan is
   asked for inside the action answer (one call per step); ``planning="separate"`` makes
   the D-PoT planning call first, as the paper does.
2. recommend — RecAgent §3.3: only the recommended UI elements go into the prompt, with
   the elements that failed earlier (``ctx.excluded_elements``, §3.5) removed. With
   ``llm_recommend`` on, a short extra call (RecAgent's LLM intent pathway) names the
   relevant element ids; they join the keyword and semantic pathways' union.
3. clarify — RecAgent App. D: the model may answer ``{"need_clarification": true,
   "clarification_question": ...}`` instead of acting (inline, or a separate call).
4. act and score — OS-Kairos App. C.1 Fig. 14 extended with the 1–5 score of Eq. 3; the
   StaR toggle note (Fig. 12) is added when the goal or the screen involves toggles.
5. confidence — by the deployment's estimator (``agents.brain.confidence``), optionally
   calibrated, then compared with γ by the loop (Eq. 4).

The backend's parts live next to it and are re-exported here: :mod:`.openai_client` (the
endpoint: retries, deadlines, what a call cost), :mod:`.openai_prompts` (rendering the
prompts, the screenshot as the model sees it) and :mod:`.openai_parsing` (the LLM
recommendation pathway's answer).

Prompts are the text files in ``agents/brain/prompts/`` (``$name`` placeholders), read on every
call so they can be edited without a restart. :meth:`OpenAIBackend.propose` never
raises: endpoint failures after bounded retries give ``model_error``, unreadable answers
``error``, and neither carries an action, so nothing executes.
"""
from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any, Mapping

import openai

from agents.brain.backends.base import (
    Clarification, Proposal, StepContext, clamp_confidence,
)
from agents.brain.backends.evidence import context_evidence
from agents.brain.backends.openai_client import (
    RETRY_STATUSES, EndpointMixin, ModelCallError, RetryPolicy, _StepState,
)
from agents.brain.backends.openai_parsing import parse_element_ids
from agents.brain.backends.openai_prompts import PromptMixin, screenshot_for_prompt
from agents.brain.confidence import (
    Calibration, check_estimator, consistency_vote, logprob_score,
)
from agents.brain.planning import compact_history
from agents.brain.prompting import PROMPTS_DIR
from agents.brain.recommend import format_elements, recommend
from agents.brain.scoring import (
    ParseError, ScoredAction, find_score_span, parse_clarification, parse_plan, parse_score,
    parse_scored_action, with_element,
)
from agents.brain.tokens import TokenUsage
from devices.actions import POINT_TYPES, Action, Screen, action_to_text
from devices.uitree import UINode, node_at

__all__ = [
    "OpenAIBackend", "ModelCallError", "RetryPolicy", "llm_configured", "parse_element_ids",
    "PROMPTS_DIR",
    # re-exported from .openai_client and .openai_prompts
    "RETRY_STATUSES", "screenshot_for_prompt",
]

log = logging.getLogger(__name__)

DEFAULT_MODEL = "gpt-4o"
PLANNING_MODES = ("inline", "separate")
CLARIFY_MODES = ("inline", "separate", "off")
TOGGLE_NOTE_MODES = ("auto", "always", "never")
# The LLM recommendation pathway answers a short list of ids; a cap keeps a rambling
# model from making that call as costly as the action call.
RECOMMEND_MAX_TOKENS = 256


def llm_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment names a model endpoint (else the heuristic backend runs)."""
    env = os.environ if environ is None else environ
    return bool(env.get("KAIROS_LLM_BASE_URL") or env.get("KAIROS_LLM_MODEL"))


def configuration_problem(environ: Mapping[str, str] | None = None) -> str:
    """Why this process cannot call a model endpoint, in words naming the setting; "" when
    it can (an endpoint, or a key for the default OpenAI endpoint)."""
    env = os.environ if environ is None else environ
    if env.get("KAIROS_LLM_BASE_URL") or env.get("KAIROS_LLM_API_KEY") or \
            env.get("OPENAI_API_KEY"):
        return ""
    return ("the openai backend is not configured on this server: set KAIROS_LLM_BASE_URL "
            "(an OpenAI-compatible endpoint; KAIROS_LLM_API_KEY for a hosted one) and "
            "restart it, or leave 'backend' out for the default")


def _env(environ: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    value = environ.get(name)
    return value if value not in (None, "") else default


def _env_float(environ: Mapping[str, str], name: str, default: float) -> float:
    value = _env(environ, name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"{name} must be a number, got '{value}'") from None


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    key = (value or "").strip().lower()
    if key not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got '{value}'")
    return key


def _normalise_question(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


class OpenAIBackend(PromptMixin, EndpointMixin):
    """Proposes actions with an OpenAI-compatible multimodal chat model.

    Every argument defaults to its environment variable (docs/models.md), then to the
    value shown. ``estimator`` picks how confidence is obtained: ``self`` | ``logprob``
    | ``critic`` | ``consistency``. A ``calibration`` (``agents.brain.confidence.Calibration``)
    maps the raw confidence to 1 + 4 · P(right) before the gate sees it.
    """

    name = "openai"

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | None = None,
        deadline: float | None = None,
        max_retries: int | None = None,
        backoff: float = 0.5,
        backoff_max: float = 8.0,
        image_long_side: int | None = None,
        image_detail: str | None = None,
        estimator: str | None = None,
        critic_model: str | None = None,
        consistency_samples: int = 5,
        consistency_temperature: float = 0.7,
        top_logprobs: int = 5,
        temperature: float = 0.0,
        max_tokens: int = 600,
        planning: str | None = None,
        clarify: str | None = None,
        set_of_mark: bool | None = None,
        llm_recommend: bool | None = None,
        recommend_k: int = 12,
        toggle_note: str = "auto",
        calibration: Calibration | None = None,
        prompts_dir: str | Path | None = None,
        extra_body: dict[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        self.base_url = base_url or _env(env, "KAIROS_LLM_BASE_URL")
        self.api_key = api_key or _env(env, "KAIROS_LLM_API_KEY") or _env(env, "OPENAI_API_KEY")
        if self.api_key is None and self.base_url:
            # vLLM and Ollama accept any key; the openai client insists on one.
            self.api_key = "not-needed"
        self.model = model or _env(env, "KAIROS_LLM_MODEL", DEFAULT_MODEL) or DEFAULT_MODEL
        self.critic_model = critic_model or _env(env, "KAIROS_LLM_CRITIC_MODEL") or self.model
        # Deadlines, not per-read timeouts (issue 11, item 9): an endpoint that trickles a
        # byte now and then never trips a read timeout. ``timeout`` bounds one request as a
        # whole; ``deadline`` the whole call, retries and backoff included.
        self.timeout = timeout if timeout is not None else _env_float(env, "KAIROS_LLM_TIMEOUT", 60.0)
        retries = max_retries if max_retries is not None else int(
            _env_float(env, "KAIROS_LLM_MAX_RETRIES", 3))
        self.retry = RetryPolicy(max(0, retries), max(0.0, backoff), max(0.0, backoff_max))
        every_attempt = self.timeout * (self.retry.max_retries + 1) + \
            self.retry.backoff_max * self.retry.max_retries
        self.deadline = deadline if deadline is not None else _env_float(
            env, "KAIROS_LLM_DEADLINE", every_attempt)
        self.image_long_side = int(image_long_side if image_long_side is not None
                                   else _env_float(env, "KAIROS_LLM_IMAGE_SIDE", 1024))
        self.image_detail = image_detail or _env(env, "KAIROS_LLM_IMAGE_DETAIL")
        self.estimator = check_estimator(estimator or _env(env, "KAIROS_LLM_CONFIDENCE", "self") or "self")
        self.consistency_samples = max(2, int(consistency_samples))
        self.consistency_temperature = float(consistency_temperature)
        self.top_logprobs = max(1, min(20, int(top_logprobs)))
        self.temperature = float(temperature)
        self.max_tokens = int(max_tokens)
        self.planning = _check_choice(
            "planning", planning or _env(env, "KAIROS_LLM_PLANNING", "inline") or "inline",
            PLANNING_MODES)
        self.clarify = _check_choice(
            "clarify", clarify or _env(env, "KAIROS_LLM_CLARIFY", "inline") or "inline",
            CLARIFY_MODES)
        if set_of_mark is None:
            set_of_mark = (_env(env, "KAIROS_LLM_SET_OF_MARK", "0") or "0").lower() in ("1", "true", "yes")
        self.set_of_mark = bool(set_of_mark)
        if llm_recommend is None:
            llm_recommend = (_env(env, "KAIROS_LLM_RECOMMEND", "0") or "0").lower() in ("1", "true", "yes")
        self.llm_recommend = bool(llm_recommend)
        self.recommend_k = max(1, int(recommend_k))
        self.toggle_note = _check_choice("toggle_note", toggle_note, TOGGLE_NOTE_MODES)
        if calibration is None and _env(env, "KAIROS_LLM_CALIBRATION"):
            path = Path(str(_env(env, "KAIROS_LLM_CALIBRATION")))
            calibration = Calibration.from_json(json.loads(path.read_text()))
        self.calibration = calibration
        self.prompts_dir = Path(prompts_dir or _env(env, "KAIROS_PROMPTS_DIR") or PROMPTS_DIR)
        self.extra_body = dict(extra_body or {})
        self._client: openai.OpenAI | None = None

    # --- one step -----------------------------------------------------------------------

    def propose(self, ctx: StepContext) -> Proposal:
        """Propose the next action with a 1–5 confidence. Never raises."""
        state = _StepState()
        try:
            return self._propose(ctx, state)
        except ModelCallError as exc:
            return self._finish(Proposal(action=None, model_error=str(exc)), state)
        except Exception as exc:  # noqa: BLE001 — a step must end in a ticket, not a crash
            log.exception("openai backend failed")
            return self._finish(
                Proposal(action=None, model_error=f"backend failure: {type(exc).__name__}: {exc}"),
                state)

    def _finish(self, proposal: Proposal, state: _StepState) -> Proposal:
        proposal.prompt_tokens = state.usage.prompt_tokens
        proposal.completion_tokens = state.usage.completion_tokens
        proposal.extra.setdefault("model", self.model)
        proposal.extra.setdefault("estimator", self.estimator)
        proposal.extra["token_source"] = state.usage.source
        proposal.extra["calls"] = state.calls
        for key, value in state.extra.items():
            proposal.extra.setdefault(key, value)
        if state.notes:
            proposal.extra["notes"] = list(state.notes)
        return proposal

    def _propose(self, ctx: StepContext, state: _StepState) -> Proposal:
        obs = ctx.observation
        screen = Screen(obs.width, obs.height)
        history = compact_history(ctx.history) or "(none)"
        references = self._references(ctx)
        excluded = set(ctx.excluded_elements)

        plan: list[str] = []
        current_step = ""
        if self.planning == "separate":
            all_elements = format_elements(
                [n for n in obs.nodes if n.key not in excluded], obs.width, obs.height)
            plan, current_step = self._plan(ctx, state, history, references, all_elements)

        # RecAgent §3.3 uses the current sub-goal as the query when there is one.
        pathway = self._llm_pathway(ctx, state) if self.llm_recommend else None
        rec = recommend(obs.nodes, current_step or ctx.goal, k=self.recommend_k,
                        excluded=excluded, llm_pathway=pathway)
        nodes = [n for n in rec.nodes if n.key not in excluded]
        elements = format_elements(nodes, obs.width, obs.height) or "(no elements)"
        candidates = [n.key for n in nodes]
        image_part, image_size = self._image_part(ctx, nodes)

        if self.clarify == "separate":
            question = self._clarify_separately(ctx, state, history, elements)
            if question:
                return self._finish(Proposal(
                    action=None, clarification=Clarification(question), plan=plan,
                    current_step=current_step, candidates=candidates), state)

        asked = "; ".join(ctx.asked) if ctx.asked else "(none)"
        prompt = self.render(
            "action",
            goal=ctx.goal,
            toggle_note=self.render("toggle_note") if self._wants_toggle_note(ctx, nodes) else "",
            references=references,
            step_section=self.render("step_section", current_step=current_step,
                                     step_list=json.dumps(plan, ensure_ascii=False))
            if self.planning == "separate" and (plan or current_step) else "",
            history=history,
            apps=", ".join(app.name for app in ctx.apps) or "(unknown)",
            elements=elements,
            clarification_section=self.render("clarify_inline", asked=asked)
            if self.clarify == "inline" else "",
        )
        messages = [{"role": "user", "content": [{"type": "text", "text": prompt}, image_part]}]

        if self.estimator == "consistency":
            samples = self._sample(state, messages, image_size)
        else:
            call = self._call(state, messages, logprobs=self.estimator == "logprob",
                              image_sizes=(image_size,))
            samples = [(call.contents[0], call.logprobs[0])]

        raw = samples[0][0]
        if self.clarify == "inline":
            request = parse_clarification(raw)
            if request is not None and request.need:
                if not self._already_asked(ctx, request.question):
                    return self._finish(Proposal(
                        action=None, clarification=Clarification(request.question), raw=raw,
                        plan=plan, current_step=current_step, candidates=candidates), state)
                state.notes.append(f"dropped a repeated question: {request.question}")

        parsed: list[ScoredAction | ParseError] = [
            self._attribute(parse_scored_action(content, screen), obs.nodes) for content, _ in samples
        ]
        index = 0
        vote: float | None = None
        if self.estimator == "consistency":
            actions = [p.action if isinstance(p, ScoredAction) else None for p in parsed]
            best, vote = consistency_vote(actions, obs.width, obs.height)
            index = best if best is not None else 0
            raw = samples[index][0]
        chosen = parsed[index]
        if isinstance(chosen, ParseError):
            return self._finish(Proposal(
                action=None, error=chosen.message, raw=raw, plan=plan,
                current_step=current_step, candidates=candidates), state)
        state.notes.extend(chosen.notes)

        raw_confidence = self._raw_confidence(
            ctx, state, chosen, samples[index][1], raw, vote, history, elements, image_part,
            image_size, current_step or chosen.current_step)
        proposal = Proposal(
            action=chosen.action,
            thought=chosen.thought,
            plan=chosen.plan or plan,
            current_step=chosen.current_step or current_step,
            raw=raw,
            candidates=candidates,
        )
        proposal.extra["self_score"] = chosen.score
        proposal.extra["raw_confidence"] = raw_confidence
        # Evidence for the calibrator (issue 12): the stated score, the estimator's score
        # (expected score under the token log-probs, the critic's, or the vote share),
        # and the context features every backend states.
        proposal.evidence = context_evidence(chosen.action, ctx)
        proposal.evidence.update(
            rule=f"model:{self.estimator}", stated=float(chosen.score) if chosen.score is not None else 0.0,
            raw=float(raw_confidence) if raw_confidence is not None else 0.0,
            scored=raw_confidence is not None)
        if raw_confidence is None:
            proposal.confidence = None  # no score: the gate asks a person
        elif self.calibration is not None:
            probability = self.calibration.probability(raw_confidence)
            proposal.extra["p_right"] = round(probability, 4)
            proposal.confidence = round(self.calibration.confidence(raw_confidence), 4)
        else:
            proposal.confidence = clamp_confidence(raw_confidence)
        if self.estimator == "consistency":
            proposal.extra["samples"] = len(samples)
        return self._finish(proposal, state)

    # --- the parts of a step ------------------------------------------------------------

    def _plan(self, ctx: StepContext, state: _StepState, history: str, references: str,
              elements: str) -> tuple[list[str], str]:
        prompt = self.render("plan", goal=ctx.goal, references=references,
                             elements=elements or "(no elements)", history=history)
        image_part, size = self._image_part(ctx, [])
        call = self._call(state, [{"role": "user", "content": [
            {"type": "text", "text": prompt}, image_part]}], image_sizes=(size,))
        result = parse_plan(call.contents[0])
        if isinstance(result, ParseError):
            state.notes.append(f"plan unreadable: {result.message}")
            return [], ""
        return result

    def _llm_pathway(self, ctx: StepContext, state: _StepState):
        """RecAgent §3.3's LLM intent pathway as :func:`recommend` wants it."""
        def pathway(pool: list[UINode], query: str) -> list[str]:
            return self._recommend_with_llm(ctx, state, pool, query)
        return pathway

    def _recommend_with_llm(self, ctx: StepContext, state: _StepState, pool: list[UINode],
                            query: str) -> list[str]:
        """Ask the model which of all the screen's elements the step needs; their keys.

        One text-only call with the whole element list (``recommend.txt``); its tokens
        count towards the step. Ids that do not exist are ignored; an unreadable answer
        or a failed call leaves the other pathways to it — never an exception.
        """
        obs = ctx.observation
        elements = format_elements(pool, obs.width, obs.height)
        if not elements:
            return []
        step = query.strip() if query and query.strip() != ctx.goal.strip() else ""
        prompt = self.render("recommend", goal=ctx.goal, elements=elements,
                             current_step=f"Current step: {step}" if step else "",
                             max_ids=self.recommend_k)
        try:
            call = self._call(state, [{"role": "user", "content": prompt}], temperature=0.0,
                              max_tokens=min(self.max_tokens, RECOMMEND_MAX_TOKENS))
        except ModelCallError as exc:
            state.notes.append(f"LLM recommendation failed ({exc}); keyword and semantic pathways only")
            return []
        by_index = {node.index: node for node in pool}
        ids = parse_element_ids(call.contents[0], set(by_index))
        keys = list(dict.fromkeys(by_index[i].key for i in ids))
        state.extra["llm_recommended"] = keys
        if not keys:
            state.notes.append("LLM recommendation named no element on the screen")
        return keys

    def _clarify_separately(self, ctx: StepContext, state: _StepState, history: str,
                            elements: str) -> str:
        prompt = self.render("clarify", goal=ctx.goal, history=history, elements=elements,
                             asked="\n".join(f"- {q}" for q in ctx.asked) or "(none)")
        call = self._call(state, [{"role": "user", "content": prompt}])
        request = parse_clarification(call.contents[0])
        if request is None or not request.need:
            return ""
        if self._already_asked(ctx, request.question):
            state.notes.append(f"dropped a repeated question: {request.question}")
            return ""
        return request.question

    @staticmethod
    def _already_asked(ctx: StepContext, question: str) -> bool:
        key = _normalise_question(question)
        return any(_normalise_question(q) == key for q in ctx.asked)

    @staticmethod
    def _attribute(result: ScoredAction | ParseError, nodes: list[UINode]) -> ScoredAction | ParseError:
        """Name the element a click lands on, so retrospection can exclude it (RecAgent §3.5)."""
        if isinstance(result, ParseError) or result.action.type not in POINT_TYPES:
            return result
        action = result.action
        assert action.x is not None and action.y is not None
        node = node_at(nodes, action.x, action.y, clickable_only=True) or node_at(nodes, action.x, action.y)
        return with_element(result, node.key if node is not None else None)

    def _sample(self, state: _StepState, messages: list[dict[str, Any]],
                image_size: tuple[int, int]) -> list[tuple[str, Any]]:
        """k answers at a sampling temperature; servers that ignore ``n`` are asked again."""
        samples: list[tuple[str, Any]] = []
        for _ in range(self.consistency_samples):
            need = self.consistency_samples - len(samples)
            if need <= 0:
                break
            call = self._call(state, messages, n=need, temperature=self.consistency_temperature,
                              image_sizes=(image_size,))
            samples.extend(zip(call.contents, call.logprobs))
        return samples[: self.consistency_samples]

    def _raw_confidence(
        self, ctx: StepContext, state: _StepState, chosen: ScoredAction, logprobs: Any,
        raw: str, vote: float | None, history: str, elements: str,
        image_part: dict[str, Any], image_size: tuple[int, int], current_step: str,
    ) -> float | None:
        if self.estimator == "consistency":
            return vote
        if self.estimator == "logprob":
            value = logprob_score(logprobs, find_score_span(raw))
            if value is None:
                state.notes.append("no logprobs for the score token; used the stated score")
                return chosen.score
            return value
        if self.estimator == "critic":
            try:
                score = self._critic(ctx, state, chosen.action, history, elements, image_part,
                                     image_size, current_step)
            except ModelCallError as exc:
                state.notes.append(f"critic call failed ({exc}); used the stated score")
                return chosen.score
            if isinstance(score, ParseError):
                state.notes.append(f"critic answer unreadable ({score.message}); used the stated score")
                return chosen.score
            return score
        return chosen.score

    def _critic(self, ctx: StepContext, state: _StepState, action: Action, history: str,
                elements: str, image_part: dict[str, Any], image_size: tuple[int, int],
                current_step: str, teacher: Action | None = None) -> float | ParseError:
        screen = Screen(ctx.observation.width, ctx.observation.height)
        teacher_values: dict[str, str] = {"teacher_mention": "", "teacher_block": "", "teacher_rules": ""}
        if teacher is not None:
            teacher_values = {
                "teacher_mention": " and the teacher action",
                "teacher_block": self.render("critic_teacher", teacher_action=action_to_text(teacher, screen)),
                "teacher_rules": self.render("critic_teacher_rules"),
            }
        prompt = self.render(
            "critic", goal=ctx.goal, current_step=current_step or ctx.goal,
            student_action=action_to_text(action, screen), history=history,
            elements=elements, **teacher_values)
        call = self._call(state, [{"role": "user", "content": [
            {"type": "text", "text": prompt}, image_part]}], model=self.critic_model,
            temperature=0.0, image_sizes=(image_size,))
        return parse_score(call.contents[0])

    def critic_score(self, ctx: StepContext, action: Action, *, teacher: Action | None = None,
                     current_step: str = "") -> tuple[float | None, TokenUsage, str | None]:
        """Score ``action`` with the OS-Kairos critic prompt (App. C.1, Fig. 16).

        With ``teacher`` (an operator's or the oracle's action) this is the paper's
        collaborative probing, used to label training data. Returns (score or None,
        tokens, error or None); never raises.
        """
        state = _StepState()
        try:
            rec = recommend(ctx.observation.nodes, current_step or ctx.goal, k=self.recommend_k,
                            excluded=set(ctx.excluded_elements))
            elements = format_elements(rec.nodes, ctx.observation.width, ctx.observation.height)
            image_part, size = self._image_part(ctx, rec.nodes)
            result = self._critic(ctx, state, action, compact_history(ctx.history) or "(none)",
                                  elements, image_part, size, current_step, teacher)
        except Exception as exc:  # noqa: BLE001
            return None, state.usage, str(exc)
        if isinstance(result, ParseError):
            return None, state.usage, result.message
        return result, state.usage, None

