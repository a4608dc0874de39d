"""Screens without a usable UI tree, read from the screenshot (issue 27).

Pure Python (no Django). Real phones answer ``uiautomator dump`` with "ERROR: could not
get idle state." on animated screens, and games, video, many WebView and Flutter apps
expose no useful nodes. The screenshot still shows everything: as RecAgent and AITZ do,
the screen is then described by *detected* elements — text lines and their boxes by OCR
(``rapidocr-onnxruntime``, whose wheel ships its ONNX models: nothing is downloaded), and
on/off switches found by their shape — as :class:`~devices.uitree.UINode` s of the usual
schema, so every backend, the recommender, the operator's element list and the logs read
them unchanged. Each is marked ``extra["detected"] = True`` with the class ``ocr.Text`` or
``ocr.Switch``; the evidence tells the calibrator a step was decided on them.

OCR costs about a second per observation on two cores (``manage.py bench observe``), so
it runs only when the tree is missing or useless (:func:`tree_is_useful`).
"""
from __future__ import annotations

import threading
from typing import Any

import numpy as np
from PIL import Image

from devices.uitree import UINode

OCR_TEXT = "ocr.Text"
OCR_SWITCH = "ocr.Switch"
MIN_SCORE = 0.5  # OCR lines read with less confidence are dropped
# OCR reads a screenshot at most this long: a phone's text is large enough at 1280 pixels;
# the full 1080×2400 costs ~1.4× the time and only puts a few more spaces between words
# ("Connected devices" for "Connecteddevices"; docs/benchmarks.md, 2026-11-27).
OCR_MAX_SIDE = 1280
USEFUL_AREA = 0.5  # a labelled node covering more of the screen than this labels nothing

_engine: Any = None
_engine_lock = threading.Lock()


def tree_is_useful(nodes: list[UINode], width: int, height: int) -> bool:
    """Does the UI tree name anything a person could tap? False for no tree, a tree
    without labels, or one whose only labelled nodes cover most of the screen (a WebView
    or Flutter view that calls the whole page by one name)."""
    screen = max(1, width * height)
    return any((n.text.strip() or n.content_desc.strip()) and 0 < n.area < USEFUL_AREA * screen
               for n in nodes)


def ocr_engine() -> Any:
    """The OCR engine, loaded once per process (its models ship in the wheel)."""
    global _engine
    with _engine_lock:
        if _engine is None:
            from rapidocr_onnxruntime import RapidOCR

            # Screen text is upright: the angle classifier only costs time.
            _engine = RapidOCR(use_cls=False, print_verbose=False)
        return _engine


def ocr_lines(image: Image.Image) -> list[tuple[tuple[int, int, int, int], str, float]]:
    """Text lines in ``image``: (box in the image's pixels, text, score), top to bottom."""
    engine = ocr_engine()
    array = np.asarray(image.convert("RGB"))[:, :, ::-1]  # the engine reads BGR (OpenCV)
    with _engine_lock:  # one inference at a time: the sessions use every core already
        result, _ = engine(array, use_cls=False)
    lines = []
    for points, text, score in result or []:
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        text = " ".join(str(text).split())
        if text and float(score) >= MIN_SCORE:
            lines.append(((int(min(xs)), int(min(ys)), int(max(xs)) + 1, int(max(ys)) + 1),
                          text, float(score)))
    lines.sort(key=lambda line: (line[0][1], line[0][0]))
    return lines


def find_switches(image: Image.Image) -> list[tuple[tuple[int, int, int, int], bool]]:
    """On/off switches drawn in ``image``: (box, on). A switch is a pill — a filled
    rounded track about twice as wide as high — with its round thumb at one end; it is
    on when the track is coloured (Material and iOS draw "off" in grey)."""
    import cv2

    rgb = np.asarray(image.convert("RGB")).astype(np.int16)
    h_img, w_img = rgb.shape[:2]
    flat = rgb.reshape(-1, 3)
    colours, counts = np.unique(flat[:: max(1, len(flat) // 50000)], axis=0, return_counts=True)
    background = colours[np.argmax(counts)]
    mask = (np.abs(rgb - background).sum(axis=2) > 40).astype(np.uint8)
    count, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    found = []
    for n in range(1, count):
        x, y, w, h, _ = (int(v) for v in stats[n])
        # Material 2/3 and iOS switches are 4–10 % of the screen's width high, ~2× wide.
        if not (0.04 * w_img <= h <= 0.1 * w_img and 1.5 <= w / h <= 3.2):
            continue
        component = (labels[y:y + h, x:x + w] == n).astype(np.uint8)
        contours, _ = cv2.findContours(component, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_SIMPLE)
        outline = max(contours, key=cv2.contourArea)
        if cv2.contourArea(outline) / float(w * h) < 0.7:  # a pill fills ~85 % of its box
            continue
        hull = cv2.convexHull(outline)
        if cv2.contourArea(outline) < 0.9 * cv2.contourArea(hull):
            continue  # a pill is convex; words and icons are not
        # The track's colour (the median of the shape: the thumb is the smaller part).
        inside = rgb[y:y + h, x:x + w][component.astype(bool)]
        r, g, b = (float(v) for v in np.median(inside, axis=0))
        saturation = (max(r, g, b) - min(r, g, b)) / max(1.0, max(r, g, b))
        found.append(((x, y, x + w, y + h), saturation > 0.35))
    return found


def detect_nodes(image: Image.Image, width: int, height: int, *, package: str = "",
                 start: int = 0) -> list[UINode]:
    """Detected elements of the screen in ``image`` (any size), as nodes in the screen's
    ``width`` × ``height`` pixels, indexed from ``start``: every OCR text line, and every
    switch labelled by the text line level with it on its left."""
    if max(image.size) > OCR_MAX_SIDE:
        scale = OCR_MAX_SIDE / max(image.size)
        image = image.resize((round(image.width * scale), round(image.height * scale)))
    sx, sy = width / image.width, height / image.height

    def scaled(box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        left, top, right, bottom = box
        return (max(0, round(left * sx)), max(0, round(top * sy)),
                min(width, round(right * sx)), min(height, round(bottom * sy)))

    lines = ocr_lines(image)
    nodes: list[UINode] = []
    for box, text, score in lines:
        nodes.append(UINode(
            index=start + len(nodes), cls=OCR_TEXT, text=text, package=package,
            bounds=scaled(box), clickable=True,
            extra={"detected": True, "source": "ocr", "score": round(score, 3)},
        ))
    for box, on in find_switches(image):
        if any(box[0] <= (b[0] + b[2]) / 2 <= box[2] and box[1] <= (b[1] + b[3]) / 2 <= box[3]
               for b, _, _ in lines):
            continue  # text inside: a pill-shaped button or chip, not a switch
        cy = (box[1] + box[3]) / 2
        level = [(b, t) for b, t, _ in lines
                 if b[2] <= box[0] and b[1] - (box[3] - box[1]) <= cy <= b[3] + (box[3] - box[1])]
        label = ""
        if level:
            label = min(level, key=lambda bt: abs((bt[0][1] + bt[0][3]) / 2 - cy))[1]
        nodes.append(UINode(
            index=start + len(nodes), cls=OCR_SWITCH, text=label, package=package,
            bounds=scaled(box), clickable=True, checkable=True, checked=on,
            extra={"detected": True, "source": "shape"},
        ))
    return nodes


def merge(tree: list[UINode], detected: list[UINode]) -> list[UINode]:
    """The tree's nodes, then the detected ones it does not already name (a detected line
    whose text a tree node at the same place has is left out), indexed after the tree."""
    named = [(n.label.lower(), n) for n in tree if n.label]
    out = list(tree)
    for node in detected:
        cx, cy = node.center
        if node.cls == OCR_TEXT and any(
                text and node.text.lower() in text and other.contains(cx, cy)
                for text, other in named):
            continue
        out.append(UINode(**{**node.__dict__, "index": len(out), "parent": None}))
    return out


def read_screen(tree: list[UINode] | None, image: Image.Image, width: int, height: int,
                *, package: str = "") -> tuple[list[UINode], bool]:
    """The nodes an agent is given: the tree when it is useful, else the tree merged with
    what the screenshot shows. Returns (nodes, detected: whether OCR ran)."""
    tree = list(tree or [])
    if tree_is_useful(tree, width, height):
        return tree, False
    return merge(tree, detect_nodes(image, width, height, package=package)), True
