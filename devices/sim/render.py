"""Draw a laid-out screen (``View.ops``) with Pillow, at a reduced scale for speed.

Only Pillow's bundled scalable font is used (``ImageFont.load_default(size=N)``), so frames
look the same on every machine. What a person must be able to read at a glance: text,
ON/OFF switches (a filled, right-hand knob vs a grey left-hand one), checked boxes, the
selected radio button, a focus ring on the focused field, dialogs over a dimmed screen.
"""
from __future__ import annotations

import io
from functools import lru_cache
from typing import Any

from PIL import Image, ImageDraw, ImageFont

ACCENT = "#1A73E8"
TEXT = "#202124"
MUTED = "#5F6368"
DISABLED = "#BDBDBD"


@lru_cache(maxsize=64)
def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=max(6, size))


# What to draw for a character the bundled font has no glyph for (it would show a box):
# dashes and minus as a hyphen, typographic symbols as their plain forms.
_FALLBACK = {
    "\u2014": "-", "\u2013": "-", "\u2012": "-", "\u2010": "-", "\u2011": "-", "\u2212": "-",
    "\u00d7": "x", "\u2022": "\u00b7", "\u2713": "v", "\u2715": "x", "\u20ac": "EUR",
    "\u00a3": "GBP", "\u00a0": " ", "\u2009": " ", "\u202f": " ",
}


@lru_cache(maxsize=1)
def _missing_mask() -> bytes:
    # The font's .notdef glyph, drawn for anything it lacks (a private-use code point).
    return bytes(font(20).getmask("\ue000"))


@lru_cache(maxsize=4096)
def _has_glyph(ch: str) -> bool:
    if ch.isascii() or ch.isspace():
        return True
    return bytes(font(20).getmask(ch)) != _missing_mask()


def drawable(text: str) -> str:
    """``text`` with every character the font cannot draw replaced by a plain one (the
    UI tree keeps the real text; only the pixels change), so "Wi-Fi — On" never shows
    a box for its dash."""
    if text.isascii():
        return text
    out = []
    for ch in text:
        if _has_glyph(ch):
            out.append(ch)
        else:
            out.append(_FALLBACK.get(ch, "?"))
    return "".join(out)


def _fit(draw: ImageDraw.ImageDraw, text: str, f: Any, width: float) -> str:
    if width <= 0 or draw.textlength(text, font=f) <= width:
        return text
    while text and draw.textlength(text + "…", font=f) > width:
        text = text[:-1]
    return text + "…"


class _Canvas:
    def __init__(self, width: int, height: int, scale: float):
        self.s = scale
        self.img = Image.new("RGB", (max(1, round(width * scale)), max(1, round(height * scale))),
                             "#FAFAFA")
        self.d = ImageDraw.Draw(self.img)

    def box(self, b: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        s = self.s
        return round(b[0] * s), round(b[1] * s), round(b[2] * s) - 1, round(b[3] * s) - 1

    def pt(self, x: float, y: float) -> tuple[int, int]:
        return round(x * self.s), round(y * self.s)

    def text(self, x: float, y: float, text: str, size: int, color: str, anchor: str = "lm",
             max_w: float | None = None) -> None:
        f = font(round(size * self.s))
        text = drawable(text)
        if max_w is not None:
            text = _fit(self.d, text, f, max_w * self.s)
        self.d.text(self.pt(x, y), text, fill=color, font=f, anchor=anchor)


def render_ops(ops: tuple[Any, ...], width: int, height: int, scale: float) -> Image.Image:
    """Draw ``ops`` (device pixels) into an image of ``width*scale`` x ``height*scale``."""
    c = _Canvas(width, height, scale)
    d, s = c.d, scale
    for op in ops:
        kind = op[0]
        if kind == "fill":
            d.rectangle(c.box(op[1]), fill=op[2])
        elif kind == "line":
            x0, y0, x1, y1 = op[1]
            d.line([c.pt(x0, y0), c.pt(x1, y1)], fill=op[2], width=1)
        elif kind == "text":
            (x, y), text, size, color, anchor = op[1], op[2], op[3], op[4], op[5]
            c.text(x, y, text, size, color, anchor)
        elif kind == "lines":
            (x, y), lines, size, color = op[1], op[2], op[3], op[4]
            for i, line in enumerate(lines):
                c.text(x, y + i * size * 1.3, line, size, color, "lt", width - 2 * x)
        elif kind == "status_icons":
            _status_icons(c, op[1], op[2], op[3], width)
        elif kind in ("nav_back", "nav_home"):
            (cx, cy), r = op[1], op[2]
            if kind == "nav_back":
                d.polygon([c.pt(cx + r * 0.6, cy - r), c.pt(cx + r * 0.6, cy + r),
                           c.pt(cx - r * 0.8, cy)], outline="#FFFFFF", width=max(1, round(2 * s * 3)))
            else:
                x0, y0 = c.pt(cx - r, cy - r)
                x1, y1 = c.pt(cx + r, cy + r)
                d.ellipse((x0, y0, x1, y1), outline="#FFFFFF", width=max(1, round(2 * s * 3)))
        elif kind == "arrow_left":
            l, t, r, b = op[1]
            cy, w = (t + b) / 2, (r - l)
            pts = [c.pt(l + w * 0.7, cy), c.pt(l + w * 0.3, cy)]
            d.line(pts, fill=op[2], width=max(2, round(8 * s)))
            d.line([c.pt(l + w * 0.5, cy - w * 0.2), c.pt(l + w * 0.3, cy),
                    c.pt(l + w * 0.5, cy + w * 0.2)], fill=op[2], width=max(2, round(8 * s)))
        elif kind == "app_icon":
            (l, t, r, b), glyph, color, name, size = op[1:6]
            cx, r0 = (l + r) / 2, 78
            top = t + 40
            d.rounded_rectangle(c.box((cx - r0, top, cx + r0, top + 2 * r0)), radius=round(40 * s),
                                fill=color)
            c.text(cx, top + r0, glyph, 80, "#FFFFFF", "mm")
            c.text(cx, top + 2 * r0 + 50, name, size, "#FFFFFF", "mm", r - l - 10)
        elif kind == "button":
            box, text, style, enabled, size = op[1:6]
            l, t, r, b = box
            if style == "primary":
                d.rounded_rectangle(c.box(box), radius=round(60 * s),
                                    fill=ACCENT if enabled else DISABLED)
                color = "#FFFFFF"
            elif style == "secondary":
                d.rounded_rectangle(c.box(box), radius=round(60 * s), outline=ACCENT,
                                    width=max(1, round(4 * s)))
                color = ACCENT if enabled else DISABLED
            else:
                color = ACCENT if enabled else DISABLED
            c.text((l + r) / 2, (t + b) / 2, text.upper() if style == "text" else text, size,
                   color, "mm", r - l - 20)
        elif kind == "image":
            box, color, desc = op[1], op[2], op[3]
            d.rounded_rectangle(c.box(box), radius=round(24 * s), fill=color)
            l, t, r, b = box
            if desc:
                c.text((l + r) / 2, (t + b) / 2, desc, 40, "#455A64", "mm", r - l - 20)
        elif kind == "spinner":
            l, t, r, b = c.box(op[1])
            d.arc((l, t, r, b), 0, 270, fill=ACCENT, width=max(2, round(12 * s)))
        elif kind == "row":
            (l, t, r, b), text, sub, size, subsize, m, enabled = op[1:8]
            color = TEXT if enabled else DISABLED
            if sub:
                c.text(m, t + (b - t) * 0.36, text, size, color, "lm", r - 2 * m)
                c.text(m, t + (b - t) * 0.70, sub, subsize, MUTED, "lm", r - 2 * m)
            else:
                c.text(m, (t + b) / 2, text, size, color, "lm", r - 2 * m)
        elif kind == "stepper":
            (l, t, r, b), text, shown, enabled, size, m, centres, value_x, half = op[1:10]
            color = TEXT if enabled else DISABLED
            cy = (t + b) / 2
            c.text(m, cy, text, size, color, "lm", centres[0] - half - 2 * m)
            c.text(value_x, cy, shown, size, color, "mm")
            for cx, sign in zip(centres, ("-", "+")):
                x0, y0 = c.pt(cx - half, cy - half)
                x1, y1 = c.pt(cx + half, cy + half)
                d.ellipse((x0, y0, x1, y1), outline=ACCENT if enabled else DISABLED,
                          width=max(2, round(6 * s)))
                c.text(cx, cy, sign, size, ACCENT if enabled else DISABLED, "mm")
        elif kind in ("switch", "checkbox"):
            (l, t, r, b), text, sub, checked, enabled, size, subsize, m = op[1:9]
            color = TEXT if enabled else DISABLED
            if sub:
                c.text(m, t + (b - t) * 0.36, text, size, color, "lm", r - 2 * m - 200)
                c.text(m, t + (b - t) * 0.70, sub, subsize, MUTED, "lm", r - 2 * m - 200)
            else:
                c.text(m, (t + b) / 2, text, size, color, "lm", r - 2 * m - 200)
            cy = (t + b) / 2
            if kind == "switch":
                _switch(c, r - m - 150, cy, checked, enabled)
            else:
                _checkbox(c, r - m - 80, cy, checked, enabled)
        elif kind == "radio":
            (l, t, r, b), text, checked, enabled, size, m = op[1:7]
            cy = (t + b) / 2
            rad = 30
            color = ACCENT if checked else "#757575"
            x0, y0 = c.pt(m, cy - rad)
            x1, y1 = c.pt(m + 2 * rad, cy + rad)
            d.ellipse((x0, y0, x1, y1), outline=color, width=max(2, round(6 * s)))
            if checked:
                x0, y0 = c.pt(m + 14, cy - rad + 14)
                x1, y1 = c.pt(m + 2 * rad - 14, cy + rad - 14)
                d.ellipse((x0, y0, x1, y1), fill=color)
            c.text(m + 2 * rad + 36, cy, text, size, TEXT if enabled else DISABLED, "lm",
                   r - 3 * m - 2 * rad)
        elif kind == "field":
            box, shown, hint, focused, size = op[1:6]
            l, t, r, b = box
            d.rounded_rectangle(c.box(box), radius=round(16 * s), fill="#FFFFFF",
                                outline=ACCENT if focused else "#9E9E9E",
                                width=max(2, round((9 if focused else 3) * s)))
            if focused:  # the focus ring: a second, outer outline
                ring = (l - 9, t - 9, r + 9, b + 9)
                d.rounded_rectangle(c.box(ring), radius=round(22 * s), outline="#8AB4F8",
                                    width=max(1, round(6 * s)))
            if shown:
                c.text(l + 30, (t + b) / 2, shown + ("|" if focused else ""), size, TEXT, "lm",
                       r - l - 60)
            else:
                c.text(l + 30, (t + b) / 2, ("|" if focused else "") + hint, size, "#9E9E9E", "lm",
                       r - l - 60)
        elif kind == "icon":
            box, glyph, color, on_bar = op[1:5]
            l, t, r, b = box
            if not on_bar:
                x0, y0, x1, y1 = c.box(box)
                d.ellipse((x0, y0, x1, y1), fill=color)
                color = "#FFFFFF"
            c.text((l + r) / 2, (t + b) / 2, glyph, round((b - t) * 0.6), color, "mm")
        elif kind == "tab":
            (l, t, r, b), text, selected, size = op[1:5]
            color = ACCENT if selected else MUTED
            if selected:
                d.rectangle(c.box((l + 40, t, r - 40, t + 10)), fill=ACCENT)
            c.text((l + r) / 2, (t + b) / 2, text, size, color, "mm", r - l - 10)
        elif kind == "key":
            box, label, size = op[1:4]
            l, t, r, b = box
            d.rounded_rectangle(c.box(box), radius=round(12 * s), fill="#FFFFFF")
            c.text((l + r) / 2, (t + b) / 2, label, size, TEXT, "mm", r - l)
        elif kind == "dim":
            overlay = Image.new("RGB", c.img.size, "#000000")
            c.img = Image.blend(c.img, overlay, 0.55)
            c.d = d = ImageDraw.Draw(c.img)
        elif kind == "card":
            d.rounded_rectangle(c.box(op[1]), radius=round(36 * s), fill="#FFFFFF")
        elif kind == "scrollbar":
            (l, t, r, b), offset, max_offset = op[1:4]
            span = b - t
            thumb = max(60, span / (max_offset + 1))
            top = t + (span - thumb) * offset / max_offset
            d.rounded_rectangle(c.box((r - 16, top, r - 6, top + thumb)), radius=2, fill="#9E9E9E")
    return c.img


def _switch(c: _Canvas, x: float, cy: float, on: bool, enabled: bool) -> None:
    # ON: a blue track with the white knob on the right; OFF: a grey track, knob left.
    s, d = c.s, c.d
    w, h = 130, 64
    track = ACCENT if on else "#BDBDBD"
    if not enabled:
        track = "#E0E0E0"
    d.rounded_rectangle(c.box((x, cy - h / 2, x + w, cy + h / 2)), radius=round(h / 2 * s),
                        fill=track)
    kx = x + w - h / 2 if on else x + h / 2
    r = h / 2 + 6
    x0, y0 = c.pt(kx - r, cy - r)
    x1, y1 = c.pt(kx + r, cy + r)
    d.ellipse((x0, y0, x1, y1), fill="#FFFFFF" if on else "#F5F5F5",
              outline=ACCENT if on else "#9E9E9E", width=max(1, round(3 * s)))


def _checkbox(c: _Canvas, x: float, cy: float, checked: bool, enabled: bool) -> None:
    s, d = c.s, c.d
    size = 60
    box = (x, cy - size / 2, x + size, cy + size / 2)
    color = ACCENT if enabled else DISABLED
    if checked:
        d.rounded_rectangle(c.box(box), radius=round(8 * s), fill=color)
        d.line([c.pt(x + 12, cy), c.pt(x + 26, cy + 14), c.pt(x + 48, cy - 14)], fill="#FFFFFF",
               width=max(2, round(8 * s)))
    else:
        d.rounded_rectangle(c.box(box), radius=round(8 * s), outline="#757575",
                            width=max(2, round(6 * s)))


def _status_icons(c: _Canvas, box: tuple[int, int, int, int], icons: tuple[str, ...],
                  color: str, width: int) -> None:
    d, s = c.d, c.s
    cy = (box[1] + box[3]) / 2
    x = width - 40
    # battery
    d.rectangle(c.box((x - 60, cy - 20, x, cy + 20)), outline=color, width=max(1, round(3 * s)))
    d.rectangle(c.box((x - 54, cy - 14, x - 14, cy + 14)), fill=color)
    x -= 90
    for icon in reversed(icons):
        if icon == "wifi":
            for i, rad in enumerate((36, 24, 12)):
                x0, y0 = c.pt(x - 36 + (36 - rad), cy + 16 - rad)
                x1, y1 = c.pt(x - 36 + (36 - rad) + 2 * rad, cy + 16 + rad)
                d.arc((x0, y0, x1, y1), 225, 315, fill=color, width=max(1, round(5 * s)))
            x -= 84
        else:
            label = {"bluetooth": "BT", "airplane": "AIR", "dnd": "DND"}.get(icon, icon)
            c.text(x, cy, label, 30, color, "rm")
            x -= 30 * 0.7 * len(label) + 30


def encode_jpeg(image: Image.Image, quality: int = 80) -> bytes:
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=quality)
    return out.getvalue()
