"""The ``openai`` backend's prompt building: rendering the prompt files, the reference goals
and verified episodes (D-PoT §5.5), the StaR toggle note's trigger, and the screenshot as
the model sees it (:func:`screenshot_for_prompt`, optional Set-of-Mark boxes).

Split out of :mod:`agents.brain.backends.openai`, which re-exports the public names here;
:class:`agents.brain.backends.openai.OpenAIBackend` inherits :class:`PromptMixin`.
Pure Python (no Django).
"""
from __future__ import annotations

import base64
import io
from typing import Any

from PIL import Image, ImageDraw

from agents.brain.backends.base import StepContext
from agents.brain.prompting import TOGGLE_GOAL_RE, render_prompt
from devices.uitree import UINode


class PromptMixin:
    """The prompt half of :class:`agents.brain.backends.openai.OpenAIBackend`: it reads the
    settings the backend's ``__init__`` sets (``prompts_dir``, ``toggle_note``,
    ``image_long_side``, ``set_of_mark``, ``image_detail``)."""

    # --- prompts ------------------------------------------------------------------------

    def render(self, template: str, **values: Any) -> str:
        return render_prompt(template, self.prompts_dir, **values)

    def _references(self, ctx: StepContext) -> str:
        goals = [g.strip() for g in ctx.references if g and g.strip()]
        parts = []
        if goals:
            parts.append(self.render("references",
                                     reference_goals="\n".join(f"- {g}" for g in goals)))
        episodes = self._episodes(ctx)
        if episodes:
            parts.append(self.render("experience", episodes=episodes))
        return "\n".join(parts)

    @staticmethod
    def _episodes(ctx: StepContext) -> str:
        """D-PoT §5.5 in full: the most similar earlier episodes' goals, start screens and
        their person-verified actions (``StepContext.experience``, from the installation's
        experience memory, ``agents.brain.experience.layer``)."""
        blocks = []
        for n, episode in enumerate(ctx.experience, 1):
            if not isinstance(episode, dict) or not episode.get("goal"):
                continue
            actions = "; ".join(f"{i}. {a}" for i, a in enumerate(episode.get("actions") or [], 1))
            blocks.append(f"Example {n}. Goal: {episode['goal']}\n"
                          f"   Start screen: {episode.get('start') or '(unknown)'}\n"
                          f"   Verified actions: {actions or '(none)'}")
        return "\n".join(blocks)

    def _wants_toggle_note(self, ctx: StepContext, nodes: list[UINode]) -> bool:
        if self.toggle_note != "auto":
            return self.toggle_note == "always"
        return bool(TOGGLE_GOAL_RE.search(ctx.goal)) or any(n.checkable for n in nodes)

    def _image_part(self, ctx: StepContext, nodes: list[UINode]) -> tuple[dict[str, Any], tuple[int, int]]:
        image = screenshot_for_prompt(
            ctx.observation.image, ctx.observation.width, ctx.observation.height,
            long_side=self.image_long_side, marks=nodes if self.set_of_mark else (),
        )
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=90)
        url = "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
        part: dict[str, Any] = {"type": "image_url", "image_url": {"url": url}}
        if self.image_detail:
            part["image_url"]["detail"] = self.image_detail
        return part, image.size


def screenshot_for_prompt(
    image: Image.Image, width: int, height: int, *, long_side: int = 1024,
    marks: list[UINode] | tuple[UINode, ...] = (),
) -> Image.Image:
    """The screenshot as the model sees it: RGB, optional Set-of-Mark boxes, downscaled.

    ``width``/``height`` are device pixels (node bounds); the observation's image may be
    smaller, so boxes are scaled. Marks are labelled ``#<node index>``, the ids the
    element list uses (RecAgent Fig. 4's SoM view of the recommended elements).
    """
    out = image.convert("RGB")
    if marks:
        out = out.copy()
        draw = ImageDraw.Draw(out)
        sx, sy = out.width / max(1, width), out.height / max(1, height)
        for node in marks:
            left, top, right, bottom = node.bounds
            box = (left * sx, top * sy, max(left * sx, right * sx - 1), max(top * sy, bottom * sy - 1))
            draw.rectangle(box, outline=(255, 0, 64), width=max(2, round(3 * max(sx, sy))))
            label = f"#{node.index}"
            text_box = draw.textbbox((box[0], box[1]), label)
            draw.rectangle(text_box, fill=(255, 0, 64))
            draw.text((box[0], box[1]), label, fill=(255, 255, 255))
    longest = max(out.size)
    if long_side > 0 and longest > long_side:
        scale = long_side / longest
        size = (max(1, round(out.width * scale)), max(1, round(out.height * scale)))
        out = out.resize(size, Image.Resampling.LANCZOS)
    return out
