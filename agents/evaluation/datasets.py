"""Loaders for static GUI-agent datasets: AITZ episodes and StaR toggle records.

Pure Python (Pillow for image sizes). Both loaders produce :class:`DatasetEpisode` lists whose
steps carry everything a replay needs: the instruction, the screenshot path, the screen
size, a :class:`~devices.uitree.UINode` list and the gold action as a
:class:`~agents.brain.matching.GoldAction` in the pixels of the screenshot (which plays the
device: an agent is shown that image and answers in its pixels).

Errors are :class:`DatasetError` and name the file and the record, so a broken line in a
thousand-episode dump can be found.

AITZ (Android in the Zoo, the sample in ``shared/datasets/aitz-sample``): one JSON file per
episode, a list of steps. Fields are AITW's: ``result_action_type`` codes (3 TYPE,
4 DUAL_POINT, 5 BACK, 6 HOME, 7 ENTER, 10 COMPLETE, 11 IMPOSSIBLE), ``result_touch_yx`` /
``result_lift_yx`` **y-first and normalised 0–1**, ``ui_positions`` ``[y, x, h, w]`` in
pixels of the saved image, and ``ui_positions``/``ui_text``/``ui_types`` stored as
JSON-encoded strings. A DUAL_POINT whose touch and lift are close is a tap, otherwise a
scroll whose direction is the way the finger moved ("scroll up" = finger moves up).

StaR state-control benchmark records (a JSON list, or ``{"records": [...]}``), in the
benchmark's own layout: ``images`` (paths relative to the dataset's root folder, e.g.
``GUIData/stateControlBenchmark/…``), ``img_filename``, ``image_width``/``image_height``,
``bbox`` ``[x1, y1, x2, y2]`` on the 0–1000 grid, ``useBbox`` (match clicks with the box),
or ``bbox: null`` with ``useBbox: false`` and a ``clickCoordinate`` ``[x, y]`` on the same
grid (such a click is judged by distance alone, StaR App. A.2),
``annotation`` {``is_switch``, ``feature``, ``state_before_action``,
``state_after_action``, ``action_effect``}, ``posInstruction`` / ``negInstruction`` and
their gold actions ``posAtlasAction`` / ``negAtlasAction`` in the OS-Atlas text form.
Kairos's earlier shorthand (``image`` relative to the file, no annotation) still loads.
Each record gives a positive sample (gold: the click, matched with the box and the 4%
rule) and, when ``negInstruction`` is present, a negative one (gold: COMPLETE; the click it
must *not* make is kept as ``inverse`` for N-FPR, StaR App. A.1 Eq. 12).

What the agent is given is what a phone would give: the screenshot, and the elements the
dataset detected on it where it has them (AITZ's ``ui_*`` fields, marked ``detected`` like
the OCR path's own); the replay reads the other screenshots by OCR
(:mod:`devices.screenread`). A record that cannot be read stops nothing when the caller
collects ``problems``: it is reported with its index and reason. Gold information —
the box, the annotated state, the feature — stays on the scoring side.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

from agents.brain.matching import GoldAction
from devices.actions import (
    CLICK, COMPLETE, IMPOSSIBLE, PRESS_BACK, PRESS_ENTER, PRESS_HOME, SCROLL, TYPE, Action,
    ActionError, action_from_text,
)
from devices.screenread import OCR_TEXT
from devices.uitree import Bounds, UINode

# AITW action type codes (AITZ keeps them).
AITW_TYPE = 3
AITW_DUAL_POINT = 4
AITW_BACK = 5
AITW_HOME = 6
AITW_ENTER = 7
AITW_COMPLETE = 10
AITW_IMPOSSIBLE = 11
# AITW's own rule (action_matching.py): a dual point whose touch and lift are within
# 0.04 of the screen is a tap.
TAP_DISTANCE = 0.04


class DatasetError(ValueError):
    """A record that cannot be read; the message names the file and the record."""


@dataclass
class DatasetStep:
    episode: str
    index: int
    instruction: str
    image_path: Path
    width: int  # pixels of the screenshot, which are the "device" pixels of the replay
    height: int
    gold: GoldAction
    nodes: list[UINode] = field(default_factory=list)
    toggle: bool = False  # StaR toggle sample: 4% click distance
    polarity: str | None = None  # "positive" | "negative" for toggle samples
    inverse: GoldAction | None = None  # the wrong toggle click of a negative sample
    source: str = ""  # "file#record" for messages

    def load_image(self) -> Image.Image:
        with Image.open(self.image_path) as image:
            return image.convert("RGB")


@dataclass
class DatasetEpisode:
    id: str
    instruction: str
    steps: list[DatasetStep]


# --- AITZ ------------------------------------------------------------------------------


def load_aitz(path: str | Path, problems: list[dict[str, Any]] | None = None,
              ) -> list[DatasetEpisode]:
    """Every AITZ episode under ``path`` (an episode JSON file, or a folder searched
    recursively for them), sorted by file path. With ``problems``, an episode file that
    cannot be read is left out and reported there (its index, file and reason) instead
    of stopping the load."""
    root = Path(path)
    if root.is_file():
        files = [root]
    elif root.is_dir():
        files = sorted(p for p in root.rglob("*.json") if p.is_file())
    else:
        raise DatasetError(f"{root}: no such file or folder")
    if not files:
        raise DatasetError(f"{root}: no AITZ episode JSON files found")
    episodes = []
    for n, file in enumerate(files):
        try:
            episodes.append(load_aitz_episode(file))
        except DatasetError as exc:
            if problems is None:
                raise
            problems.append({"record": n, "file": str(file), "reason": str(exc)})
    if not episodes:
        raise DatasetError(f"{root}: no AITZ episode could be read "
                           f"({problems[0]['reason'] if problems else 'none found'})")
    return episodes


def load_aitz_episode(file: str | Path) -> DatasetEpisode:
    file = Path(file)
    data = _read_json(file)
    if not isinstance(data, list) or not data:
        raise DatasetError(f"{file}: an AITZ episode is a non-empty JSON list of steps")
    steps = [_aitz_step(file, n, record) for n, record in enumerate(data)]
    steps.sort(key=lambda step: step.index)
    episode_id = str(data[0].get("episode_id", file.stem)) if isinstance(data[0], dict) else file.stem
    return DatasetEpisode(id=episode_id, instruction=steps[0].instruction, steps=steps)


def _aitz_step(file: Path, n: int, record: Any) -> DatasetStep:
    where = f"{file} step {n}"
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: a step must be a JSON object")
    try:
        index = int(record.get("step_id", n))
        where = f"{file} step {index}"
        instruction = str(record["instruction"])
        image_path = _find_image(file, str(record["image_path"]), where)
        width, height = _image_size(image_path, where)
        nodes = _aitz_nodes(record, width, height, where)
        action = _aitz_action(record, width, height, where)
    except KeyError as exc:
        raise DatasetError(f"{where}: missing field {exc.args[0]!r}") from None
    bbox = None
    if action.type == CLICK:
        bbox = _smallest_box_at(nodes, action.x, action.y)  # type: ignore[arg-type]
    return DatasetStep(
        episode=str(record.get("episode_id", file.stem)),
        index=index,
        instruction=instruction,
        image_path=image_path,
        width=width,
        height=height,
        gold=GoldAction(action, bbox),
        nodes=nodes,
        source=where,
    )


def _aitz_action(record: dict[str, Any], width: int, height: int, where: str) -> Action:
    try:
        code = int(record["result_action_type"])
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: result_action_type is not an integer") from None
    if code == AITW_TYPE:
        text = str(record.get("result_action_text", "") or "")
        if not text.strip():
            raise DatasetError(f"{where}: TYPE step without result_action_text")
        return Action(TYPE, text=text)
    if code == AITW_DUAL_POINT:
        touch_y, touch_x = _yx(record, "result_touch_yx", where)
        lift_y, lift_x = _yx(record, "result_lift_yx", where)
        dy, dx = lift_y - touch_y, lift_x - touch_x
        if (dx * dx + dy * dy) ** 0.5 <= TAP_DISTANCE:
            x = min(width - 1, max(0, round(touch_x * width)))
            y = min(height - 1, max(0, round(touch_y * height)))
            return Action(CLICK, x=x, y=y)
        # Finger direction, the CONTRACT's SCROLL meaning: the dominant axis of the drag.
        if abs(dy) >= abs(dx):
            return Action(SCROLL, direction="UP" if dy < 0 else "DOWN")
        return Action(SCROLL, direction="LEFT" if dx < 0 else "RIGHT")
    simple = {
        AITW_BACK: PRESS_BACK, AITW_HOME: PRESS_HOME, AITW_ENTER: PRESS_ENTER,
        AITW_COMPLETE: COMPLETE, AITW_IMPOSSIBLE: IMPOSSIBLE,
    }
    if code in simple:
        return Action(simple[code])
    raise DatasetError(f"{where}: unknown result_action_type {code}")


def _yx(record: dict[str, Any], key: str, where: str) -> tuple[float, float]:
    value = _maybe_json(record.get(key), key, where)
    try:
        y, x = float(value[0]), float(value[1])
    except (TypeError, ValueError, IndexError):
        raise DatasetError(f"{where}: {key} must be [y, x] normalised to 0-1") from None
    if not (0.0 <= y <= 1.0 and 0.0 <= x <= 1.0):
        raise DatasetError(f"{where}: {key} {[y, x]} is outside 0-1")
    return y, x


def _aitz_nodes(record: dict[str, Any], width: int, height: int, where: str) -> list[UINode]:
    positions = _maybe_json(record.get("ui_positions", "[]"), "ui_positions", where) or []
    texts = _maybe_json(record.get("ui_text", "[]"), "ui_text", where) or []
    types = _maybe_json(record.get("ui_types", "[]"), "ui_types", where) or []
    if not isinstance(positions, list) or len(texts) != len(positions):
        raise DatasetError(
            f"{where}: ui_positions and ui_text must be lists of the same length "
            f"({len(positions) if isinstance(positions, list) else '?'} vs {len(texts)})"
        )
    nodes: list[UINode] = []
    for i, box in enumerate(positions):
        try:
            y, x, h, w = (float(v) for v in box)
        except (TypeError, ValueError):
            raise DatasetError(f"{where}: ui_positions[{i}] must be [y, x, h, w]") from None
        left, top = max(0, round(x)), max(0, round(y))
        right, bottom = min(width, round(x + w)), min(height, round(y + h))
        kind = str(types[i]) if i < len(types) else "TEXT"
        text = str(texts[i] or "")
        # OCR'd text becomes node text; detected icons get their type as a description,
        # so an agent and a prompt can still name them ("ICON_GOOGLE" -> "google icon").
        # They are detected elements (OCR text and icon detection, not a UI tree): marked
        # as the OCR path marks its own (devices.screenread), so the evidence says so.
        is_icon = kind.startswith("ICON_")
        nodes.append(UINode(
            index=i,
            cls="ocr.Icon" if is_icon else OCR_TEXT,
            text="" if is_icon else text,
            content_desc=(kind[5:].lower().replace("_", " ") + " icon") if is_icon else "",
            bounds=(left, top, right, bottom),
            clickable=True,
            extra={"ui_type": kind, "detected": True, "source": "aitz"},
        ))
    return nodes


def _smallest_box_at(nodes: list[UINode], x: int, y: int) -> Bounds | None:
    """The gold element of a click: the smallest box containing the point (StaR A.2)."""
    best: UINode | None = None
    for node in nodes:
        left, top, right, bottom = node.bounds
        if right <= left or bottom <= top:
            continue
        if left <= x <= right and top <= y <= bottom and (best is None or node.area < best.area):
            best = node
    return best.bounds if best else None


def _find_image(file: Path, image_path: str, where: str) -> Path:
    """AITZ ``image_path`` is relative to the dataset root (``google_apps/<ep>/<ep>_0.png``);
    a copy may keep only the episode folder. Try the file's folder, then each parent."""
    relative = Path(image_path)
    candidates = [file.parent / relative.name]
    for parent in [file.parent, *file.parent.parents]:
        candidates.append(parent / relative)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise DatasetError(f"{where}: screenshot {image_path!r} not found next to the episode")


# --- StaR toggle records ---------------------------------------------------------------


def load_star(path: str | Path, problems: list[dict[str, Any]] | None = None,
              ) -> list[DatasetEpisode]:
    """StaR toggle samples as one-step episodes: ``<id>+`` (positive) and ``<id>-``
    (negative) for each record, in file order. With ``problems``, a record that cannot be
    read is left out and reported there (its index and reason), and the rest load."""
    file = Path(path)
    if not file.is_file():
        raise DatasetError(f"{file}: no such file")
    data = _read_json(file)
    if isinstance(data, dict) and isinstance(data.get("records"), list):
        data = data["records"]
    if not isinstance(data, list):
        raise DatasetError(f"{file}: expected a JSON list of toggle records")
    episodes: list[DatasetEpisode] = []
    for n, record in enumerate(data):
        try:
            episodes.extend(_star_samples(file, n, record))
        except DatasetError as exc:
            if problems is None:
                raise
            problems.append({"record": n, "file": str(file), "reason": str(exc)})
    if not episodes:
        raise DatasetError(f"{file}: no toggle records"
                           + (f" could be read ({problems[0]['reason']})" if problems else ""))
    return episodes


def _star_samples(file: Path, n: int, record: Any) -> list[DatasetEpisode]:
    where = f"{file} record {n}"
    if not isinstance(record, dict):
        raise DatasetError(f"{where}: a record must be a JSON object")
    real = "images" in record or "img_filename" in record  # the benchmark's own layout
    record_id = str(record.get("id", n))
    if "id" in record:
        where = f"{file} record {n} (id {record_id})"
    try:
        positive = str(record["posInstruction"]).strip()
        raw_box = record["bbox"] if not real else record.get("bbox")
        image_path = _star_image(file, record, where) if real else _legacy_image(file, record, where)
    except KeyError as exc:
        raise DatasetError(f"{where}: missing field {exc.args[0]!r}") from None
    width, height = _image_size(image_path, where)
    if real:
        _check_declared_size(record, width, height, where)
    bbox: Bounds | None = None
    if raw_box is not None:
        try:
            x1, y1, x2, y2 = (float(v) for v in raw_box)
        except (TypeError, ValueError):
            raise DatasetError(f"{where}: bbox must be [x1, y1, x2, y2] on the 0-1000 grid") from None
        if not (0 <= x1 < x2 <= 1000 and 0 <= y1 < y2 <= 1000):
            raise DatasetError(f"{where}: bbox {raw_box} is not [x1, y1, x2, y2] within 0-1000")
        bbox = (
            round(x1 * width / 1000), round(y1 * height / 1000),
            round(x2 * width / 1000), round(y2 * height / 1000),
        )
    annotation = record.get("annotation") if real else None
    if annotation is not None and not isinstance(annotation, dict):
        raise DatasetError(f"{where}: annotation must be an object")
    annotation = annotation or {}
    # StaR App. A.2: the 4% distance rule is for toggles; a non-switch target (a row that
    # navigates) keeps the usual 14%.
    is_toggle = bool(annotation.get("is_switch", True))
    use_box = bool(record.get("useBbox", True)) if real else True
    click_action: Action | None = None
    if bbox is not None:
        click_action = Action(
            CLICK,
            x=min(width - 1, (bbox[0] + bbox[2]) // 2),
            y=min(height - 1, (bbox[1] + bbox[3]) // 2),
        )
    if real and record.get("posAtlasAction"):
        click_action = _atlas_action(record["posAtlasAction"], width, height,
                                     f"{where}: posAtlasAction")
    elif real and record.get("clickCoordinate") is not None:
        click_action = _click_coordinate(record["clickCoordinate"], width, height, where)
    if click_action is None:
        raise DatasetError(f"{where}: bbox is null and the record has no clickCoordinate "
                           "or posAtlasAction: nothing says where the click goes")
    # StaR App. A.2: with no box (``bbox: null``, ``useBbox: false``) the click is judged
    # by its distance from the gold point alone (4 % for toggles, 14 % otherwise).
    click = GoldAction(click_action, bbox if (use_box and bbox is not None) else None)
    negative_gold = GoldAction(Action(COMPLETE))
    if real and record.get("negAtlasAction"):
        negative_gold = GoldAction(_atlas_action(record["negAtlasAction"], width, height,
                                                 f"{where}: negAtlasAction"))
    # No UI tree: the benchmark has only the screenshot. The agent gets exactly that —
    # never a node built from the gold box (that would hand it the grounding answer),
    # and never the annotated state (reading it from the pixels is the StaR task).
    common = dict(image_path=image_path, width=width, height=height, toggle=is_toggle,
                  nodes=[])
    samples = [DatasetEpisode(
        id=f"{record_id}+", instruction=positive, steps=[DatasetStep(
            episode=f"{record_id}+", index=0, instruction=positive, gold=click,
            polarity="positive", source=where, **common,
        )],
    )]
    negative = record.get("negInstruction")
    if isinstance(negative, str) and negative.strip():
        negative = negative.strip()
        samples.append(DatasetEpisode(
            id=f"{record_id}-", instruction=negative, steps=[DatasetStep(
                episode=f"{record_id}-", index=0, instruction=negative,
                gold=negative_gold, polarity="negative", inverse=click, source=where,
                **common,
            )],
        ))
    return samples


def _click_coordinate(value: Any, width: int, height: int, where: str) -> Action:
    """The benchmark's ``clickCoordinate``: ``[x, y]`` (or ``{"x":, "y":}``) on the 0–1000
    grid, as its boxes and OS-Atlas actions are, in pixels of the screenshot."""
    if isinstance(value, dict):
        value = [value.get("x"), value.get("y")]
    try:
        x, y = (float(v) for v in value)
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: clickCoordinate must be [x, y] on the 0-1000 grid") from None
    if not (0 <= x <= 1000 and 0 <= y <= 1000):
        raise DatasetError(f"{where}: clickCoordinate {value} is outside the 0-1000 grid")
    return Action(CLICK, x=min(width - 1, round(x * width / 1000)),
                  y=min(height - 1, round(y * height / 1000)))


def _legacy_image(file: Path, record: dict[str, Any], where: str) -> Path:
    """Kairos's earlier shorthand: ``image``, a path relative to the file."""
    image_path = (file.parent / str(record["image"])).resolve()
    if not image_path.is_file():
        raise DatasetError(f"{where}: image {record['image']!r} not found")
    return image_path


def _star_image(file: Path, record: dict[str, Any], where: str) -> Path:
    """The benchmark's ``images[0]`` is relative to the dataset's root folder
    (``GUIData/stateControlBenchmark/…``): try the file's folder and each parent, then
    ``img_filename`` next to the file (a copy that kept only the images)."""
    images = record.get("images")
    if images is not None and (not isinstance(images, list) or not images
                               or not all(isinstance(i, str) for i in images)):
        raise DatasetError(f"{where}: images must be a non-empty list of paths")
    wanted = str(images[0]) if images else str(record["img_filename"])
    relative = Path(wanted)
    candidates = [parent / relative for parent in [file.parent, *file.parent.parents]]
    if record.get("img_filename"):
        candidates.append(file.parent / str(record["img_filename"]))
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise DatasetError(f"{where}: image {wanted!r} not found under {file.parent} or its parents")


def _check_declared_size(record: dict[str, Any], width: int, height: int, where: str) -> None:
    declared = (record.get("image_width"), record.get("image_height"))
    if declared == (None, None):
        return
    try:
        w, h = int(declared[0]), int(declared[1])  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise DatasetError(f"{where}: image_width and image_height must be integers") from None
    if (w, h) != (width, height):
        raise DatasetError(f"{where}: the record says the image is {w}x{h} but the file is "
                           f"{width}x{height}")


def _atlas_action(text: Any, width: int, height: int, where: str) -> Action:
    """A gold action in the OS-Atlas text form (``CLICK <point>[[x, y]]</point>`` on the
    0–1000 grid, ``COMPLETE``), in pixels of the screenshot."""
    parsed = action_from_text(text, (width, height))
    if isinstance(parsed, ActionError):
        raise DatasetError(f"{where}: {parsed.message}")
    return parsed


# --- shared helpers --------------------------------------------------------------------


def load_dataset(format: str, path: str | Path,
                 problems: list[dict[str, Any]] | None = None) -> list[DatasetEpisode]:
    """``format`` is ``"aitz"`` or ``"star"``; with ``problems``, unreadable records are
    reported there and skipped (see :func:`load_star`, :func:`load_aitz`)."""
    if format == "aitz":
        return load_aitz(path, problems)
    if format == "star":
        return load_star(path, problems)
    raise DatasetError(f"unknown dataset format {format!r}; expected 'aitz' or 'star'")


def _read_json(file: Path) -> Any:
    try:
        with open(file, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{file}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except OSError as exc:
        raise DatasetError(f"{file}: {exc.strerror or exc}") from None


def _maybe_json(value: Any, key: str, where: str) -> Any:
    """AITZ stores lists as JSON strings inside the JSON; accept both forms."""
    if isinstance(value, str):
        try:
            return json.loads(value) if value.strip() else None
        except json.JSONDecodeError:
            raise DatasetError(f"{where}: {key} is not valid JSON") from None
    return value


def _image_size(path: Path, where: str) -> tuple[int, int]:
    try:
        with Image.open(path) as image:
            return image.size
    except OSError as exc:
        raise DatasetError(f"{where}: cannot read image {path}: {exc}") from None
