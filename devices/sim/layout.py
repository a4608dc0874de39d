"""Laying out a whole screen: ``World.view(state)`` in device pixels — the status bar, the
app bar with its toolbar, the content and its scrolling lists, the tab bar, the on-screen
keyboard, dialogs, the launcher and the navigation bar — with the caches that let phones
and the oracle's search share layouts.

:class:`_Layout` is mixed into :class:`~devices.sim.world.World`; it uses the world's
lookups (``screen``, ``dialog``, ``app``, ``env``, ``displayed_screen``, ``package_of``), its
size and its caches.
"""
from __future__ import annotations

import devices.sim.expr as expr_mod
from devices.sim.model import (
    LAUNCHER, LAUNCHER_PACKAGE, SYSTEMUI_PACKAGE, Dialog, Effect, Element, Screen, fill_template,
    template_names,
)
from devices.sim.state import HOME_SCREEN, SimState
from devices.sim.widgets import (
    APPBAR_H, CLOCK_TEXT, FONT, KEY_ROWS, KEYBOARD_H, MARGIN, NAV_H, STATUS_H, TAB_H, Target, View,
    _Builder, _fmt, _ident, _Widgets, _wrap,
)
from devices.uitree import Bounds


class _Layout(_Widgets):
    """Screen layout (a mixin of :class:`~devices.sim.world.World`)."""

    # --- layout ---------------------------------------------------------------------
    def _layout_deps(self, app_id: str, shown: str, dialog_id: str | None) -> tuple[int, ...]:
        """Indices of the variables that can change the touch targets of a screen: those in
        visibility/enabled conditions and in display texts (labels). Switch and radio
        values only change how targets look, not what they do."""
        key = (app_id, shown, dialog_id)
        deps = self._deps.get(key)
        if deps is not None:
            return deps
        names: set[str] = set()

        def element(el: Element) -> None:
            for cond in (el.visible, el.enabled):
                if cond is not None:
                    names.update(cond.names)
            names.update(template_names(el.text + el.subtitle))
            for item in el.items:
                element(item)

        if app_id != LAUNCHER:
            scr = self.screen(app_id, shown)
            names.update(template_names(scr.title))
            for el in scr.elements + scr.toolbar:
                element(el)
        if dialog_id is not None:
            dialog = self.dialog(app_id, dialog_id)
            names.update(template_names(dialog.title + dialog.text))
            for el in dialog.elements + dialog.buttons:
                element(el)
        deps = tuple(sorted(self.var_index[n] for n in names if n in self.var_index))
        self._deps[key] = deps
        return deps

    def view(self, state: SimState, full: bool = True) -> View:
        if not full:
            # Touch targets depend on far less than the picture does, so the oracle's
            # search shares one layout between many states.
            shown = self.displayed_screen(state)
            values = state.values
            key = (state.app, shown, state.dialog, state.focus, state.scroll,
                   tuple(values[i] for i in self._layout_deps(state.app, shown, state.dialog)))
            with self._views_lock:
                cached = self._lite.get(key)
            if cached is None:
                cached = self._layout(state, False)
                with self._views_lock:
                    self._lite[key] = cached
                    if len(self._lite) > 4096:
                        self._lite.popitem(last=False)
            return cached
        key = (state, full)
        with self._views_lock:
            cached = self._views.get(key)
        if cached is not None:
            return cached
        view = self._layout(state, full)
        with self._views_lock:
            self._views[key] = view
            if len(self._views) > 4096:
                self._views.popitem(last=False)
        return view

    def text(self, template: str, env: expr_mod.Env) -> str:
        return fill_template(template, env, _fmt)

    def _layout(self, state: SimState, full: bool) -> View:
        u, W, H = self.u, self.width, self.height
        b = _Builder(full)
        env = self.env(state)
        app_id = state.app
        package = self.package_of(app_id)
        root = b.node(None, "android.widget.FrameLayout", (0, 0, W, H), package)
        b.op("fill", (0, 0, W, H), "#FAFAFA" if app_id != LAUNCHER else "#1E3A5F")
        self._status_bar(b, env, app_id == LAUNCHER)
        fields: list[tuple[Element, Target]] = []
        lists: list[tuple[str, int, int, int]] = []
        keyboard = False
        bottom = H - int(NAV_H * u)
        if app_id == LAUNCHER:
            shown = HOME_SCREEN
            self._launcher(b, root)
        else:
            shown = self.displayed_screen(state)
            scr = self.screen(app_id, shown)
            app = self.app(app_id)
            top = int((STATUS_H + APPBAR_H) * u)
            # App bar: title, "Navigate up" arrow, toolbar icons.
            bar = (0, int(STATUS_H * u), W, top)
            b.op("fill", bar, app.icon_color)
            up = scr.up if scr.up is not None else (shown != app.start and len(state.stack) > 1)
            title_x = int(MARGIN * u)
            if up:
                ub = (int(12 * u), bar[1] + int(24 * u), int(132 * u), bar[3] - int(24 * u))
                b.node(root, "android.widget.ImageButton", ub, package, content_desc="Navigate up",
                       clickable=True, focusable=True)
                b.target(ub, special="back", label="Navigate up", node=len(b.nodes) - 1)
                b.op("arrow_left", ub, "#FFFFFF")
                title_x = int(156 * u)
            title = self.text(scr.title or app.name, env)
            b.node(root, "android.widget.TextView", (title_x, bar[1], W - int(300 * u), bar[3]),
                   package, text=title, resource_id=f"{package}:id/toolbar_title")
            b.op("text", (title_x, (bar[1] + bar[3]) // 2), title, int(FONT["appbar"] * u),
                 "#FFFFFF", "lm", True)
            x = W - int(24 * u)
            for el in reversed(scr.toolbar):
                if el.visible is not None and not el.visible(env):
                    continue
                size = int(120 * u)
                ib = (x - size, bar[1] + int(24 * u), x, bar[3] - int(24 * u))
                self._icon(b, root, el, ib, package, env, on_bar=True)
                x -= size + int(12 * u)
            tabs = next((e for e in scr.elements if e.kind == "tabs" and
                         (e.visible is None or e.visible(env))), None)
            content_bottom = bottom - (int(TAB_H * u) if tabs else 0)
            keyboard = state.focus is not None
            if keyboard:
                content_bottom = min(content_bottom, bottom - int(KEYBOARD_H * u))
            self._content(b, root, state, scr, env, package, top, content_bottom, fields, lists)
            if tabs:
                self._tabs(b, root, tabs, shown, package, (0, bottom - int(TAB_H * u), W, bottom),
                           env)
            if keyboard:
                self._keyboard(b, (0, bottom - int(KEYBOARD_H * u), W, bottom))
        dialog_box = None
        if state.dialog is not None:
            dialog = self.dialog(app_id, state.dialog)
            dialog_box = self._dialog(b, state, dialog, env, package, fields)
        self._nav_bar(b, (0, bottom, W, H))
        return View(package, shown, b.targets, b.nodes, tuple(b.ops), fields, lists, keyboard,
                    dialog_box)

    def _status_bar(self, b: _Builder, env: expr_mod.Env, dark: bool) -> None:
        u, W = self.u, self.width
        box = (0, 0, W, int(STATUS_H * u))
        b.op("fill", box, "#0F2540" if dark else "#E8EAF0")
        color = "#FFFFFF" if dark else "#202124"
        b.node(None, "android.widget.TextView", (int(36 * u), 0, int(200 * u), box[3]),
               SYSTEMUI_PACKAGE, text=CLOCK_TEXT, resource_id=f"{SYSTEMUI_PACKAGE}:id/clock")
        b.op("text", (int(36 * u), box[3] // 2), CLOCK_TEXT, int(FONT["status"] * u), color, "lm", True)
        # System indicators mirror the Settings app when it is installed.
        icons = []
        if env("settings.airplane"):
            icons.append("airplane")
        if env("settings.wifi"):
            icons.append("wifi")
        if env("settings.bluetooth"):
            icons.append("bluetooth")
        if env("settings.dnd"):
            icons.append("dnd")
        b.op("status_icons", box, tuple(icons), color)

    def _nav_bar(self, b: _Builder, box: Bounds) -> None:
        u = self.u
        b.op("fill", box, "#000000")
        cy, w = (box[1] + box[3]) // 2, self.width
        for special, desc, cx in (("back", "Back", w // 4), ("home", "Home", w // 2)):
            hb = (cx - int(90 * u), box[1], cx + int(90 * u), box[3])
            b.node(None, "android.widget.ImageView", hb, SYSTEMUI_PACKAGE, content_desc=desc,
                   resource_id=f"{SYSTEMUI_PACKAGE}:id/{special}", clickable=True)
            b.target(hb, special=special, label=desc, node=len(b.nodes) - 1)
            b.op("nav_" + special, (cx, cy), int(34 * u))

    def _launcher(self, b: _Builder, root: int) -> None:
        u, W = self.u, self.width
        b.op("text", (W // 2, int(330 * u)), CLOCK_TEXT, int(FONT["clock"] * u), "#FFFFFF", "mm", False)
        b.op("text", (W // 2, int(480 * u)), "Monday, June 2", int(FONT["body"] * u), "#DDE6F0",
             "mm", False)
        cell_w, cell_h, top = W // 4, int(330 * u), int(620 * u)
        for i, app in enumerate(self.bundle.apps):
            col, row = i % 4, i // 4
            cell = (col * cell_w, top + row * cell_h, (col + 1) * cell_w, top + (row + 1) * cell_h)
            b.node(root, "android.widget.TextView", cell, LAUNCHER_PACKAGE, text=app.name,
                   content_desc=app.name, resource_id=f"{LAUNCHER_PACKAGE}:id/icon",
                   clickable=True, focusable=True, long_clickable=True)
            b.target(cell, tap=(Effect("open_app", app.id),), label=app.name,
                     node=len(b.nodes) - 1)
            b.op("app_icon", cell, app.icon_glyph, app.icon_color, app.name,
                 int(FONT["launcher"] * u))

    def _content(self, b: _Builder, root: int, state: SimState, scr: Screen, env: expr_mod.Env,
                 package: str, top: int, bottom: int, fields: list, lists: list) -> None:
        u, W = self.u, self.width
        visible = [e for e in scr.elements if e.kind != "tabs" and
                   (e.visible is None or e.visible(env))]
        y = top + int(24 * u)
        fixed = sum(self._height(e, W - 2 * int(MARGIN * u)) for e in visible if e.kind != "list")
        n_lists = sum(1 for e in visible if e.kind == "list")
        spare = max(0, bottom - y - fixed)
        scroll = dict(state.scroll)
        for el in visible:
            if el.kind == "list":
                h = spare // max(1, n_lists)
                if el.rows:
                    h = min(h, int(el.rows * 176 * u)) if h else int(el.rows * 176 * u)
                box = (0, y, W, min(bottom, y + h))
                self._list(b, root, state, el, env, package, box, scroll.get(el.id, 0), fields,
                           lists)
                y += h
                continue
            h = self._height(el, W - 2 * int(MARGIN * u))
            if y + h > bottom:
                break  # hidden behind the keyboard or the tab bar
            self._element(b, root, state, el, env, package, (0, y, W, y + h), fields)
            y += h

    def _list(self, b: _Builder, root: int, state: SimState, el: Element, env: expr_mod.Env,
              package: str, box: Bounds, offset: int, fields: list, lists: list) -> None:
        items = [it for it in el.items if it.visible is None or it.visible(env)]
        heights = [self._height(it, self.width - 2 * int(MARGIN * self.u)) for it in items]
        space = box[3] - box[1]
        # The largest offset at which the last item is fully visible.
        max_offset, used = len(items), 0
        while max_offset > 0 and used + heights[max_offset - 1] <= space:
            max_offset -= 1
            used += heights[max_offset]
        offset = max(0, min(offset, max_offset))
        lid = b.node(root, "androidx.recyclerview.widget.RecyclerView", box, package,
                     resource_id=f"{package}:id/{el.id}", scrollable=bool(max_offset),
                     focusable=True)
        y, shown = box[1], 0
        for it, h in zip(items[offset:], heights[offset:]):
            if y + h > box[3]:
                break
            self._element(b, lid, state, it, env, package, (0, y, self.width, y + h), fields)
            b.op("line", (int(MARGIN * self.u), y + h - 1, self.width, y + h - 1), "#E0E0E0")
            y += h
            shown += 1
        lists.append((el.id, offset, max_offset, max(1, shown - 1)))
        if max_offset:
            b.op("scrollbar", box, offset, max_offset)

    def _tabs(self, b: _Builder, root: int, tabs: Element, shown: str, package: str,
              box: Bounds, env: expr_mod.Env) -> None:
        b.op("fill", box, "#FFFFFF")
        b.op("line", (0, box[1], self.width, box[1]), "#D0D0D0")
        bar = b.node(root, "android.widget.TabWidget", box, package,
                     resource_id=f"{package}:id/{tabs.id}")
        w = self.width // len(tabs.items)
        for i, tab in enumerate(tabs.items):
            tb = (i * w, box[1], (i + 1) * w, box[3])
            selected = tab.screen == shown
            n = b.node(bar, "android.widget.TextView", tb, package, text=tab.text,
                       content_desc=tab.text, resource_id=f"{package}:id/{tab.id}",
                       clickable=True, selected=selected, focusable=True)
            b.target(tb, tap=tab.on_tap, label=tab.text, node=n)
            b.op("tab", tb, tab.text, selected, int(FONT["caption"] * self.u))

    def _keyboard(self, b: _Builder, box: Bounds) -> None:
        # The on-screen keyboard is another window (an IME), so, as in a uiautomator dump,
        # its keys are touch targets but not nodes.
        u, W = self.u, self.width
        b.op("fill", box, "#D5D8DE")
        key_h = (box[3] - box[1] - int(24 * u)) // 4
        y = box[1] + int(12 * u)
        for row in KEY_ROWS:
            kw = W // 10
            x = (W - kw * len(row)) // 2
            for ch in row:
                kb = (x + int(6 * u), y + int(8 * u), x + kw - int(6 * u), y + key_h - int(8 * u))
                b.target(kb, special="key", arg=ch, label=ch)
                b.op("key", kb, "DEL" if ch == "<" else ch, int(FONT["key"] * u))
                x += kw
            y += key_h
        for ch, left, right, label in ((" ", W * 2 // 10, W * 7 // 10, "space"),
                                       ("\n", W * 7 // 10, W * 9 // 10, "enter")):
            kb = (left + int(6 * u), y + int(8 * u), right - int(6 * u), y + key_h - int(8 * u))
            b.target(kb, special="key", arg=ch, label=label)
            b.op("key", kb, label, int(FONT["caption"] * u))

    def _dialog(self, b: _Builder, state: SimState, dialog: Dialog, env: expr_mod.Env,
                app_package: str, fields: list) -> Bounds:
        u, W, H = self.u, self.width, self.height
        package = dialog.package or app_package
        m = int(72 * u)
        inner = W - 2 * m - 2 * int(MARGIN * u)
        title = self.text(dialog.title, env)
        text = self.text(dialog.text, env)
        title_lines = _wrap(title, FONT["heading"], int(inner / u)) if title else []
        text_lines = _wrap(text, FONT["body"], int(inner / u)) if text else []
        els = [e for e in dialog.elements if e.visible is None or e.visible(env)]
        heights = [self._height(e, inner) for e in els]
        buttons = [bt for bt in dialog.buttons if bt.visible is None or bt.visible(env)]
        btn_h = int(140 * u)
        side_by_side = len(buttons) <= 2
        h = (int(48 * u) + int(len(title_lines) * FONT["heading"] * 1.3 * u)
             + int(len(text_lines) * FONT["body"] * 1.35 * u) + int(24 * u) + sum(heights)
             + (btn_h if side_by_side else btn_h * len(buttons)) + int(24 * u))
        top = max(int(STATUS_H * u), (H - h) // 2)
        box = (m, top, W - m, top + h)
        # Everything behind the dialog is dimmed and unreachable; a tap outside it
        # cancels it when it is cancelable, as Android's AlertDialog does.
        b.targets.append(Target((0, 0, W, H), special="outside"))
        b.op("dim", (0, 0, W, H))
        b.op("card", box)
        d = b.node(None, "android.widget.FrameLayout", box, package,
                   resource_id=f"{package}:id/dialog_{_ident(dialog.id)}")
        b.targets.append(Target(box, special="inside"))
        x0 = m + int(MARGIN * u)
        y = top + int(48 * u)
        if title_lines:
            th = int(len(title_lines) * FONT["heading"] * 1.3 * u)
            b.node(d, "android.widget.TextView", (x0, y, W - x0, y + th), package, text=title,
                   resource_id="android:id/alertTitle")
            b.op("lines", (x0, y), tuple(title_lines), int(FONT["heading"] * u), "#202124", True)
            y += th
        if text_lines:
            th = int(len(text_lines) * FONT["body"] * 1.35 * u)
            b.node(d, "android.widget.TextView", (x0, y, W - x0, y + th), package, text=text,
                   resource_id="android:id/message")
            b.op("lines", (x0, y + int(8 * u)), tuple(text_lines), int(FONT["body"] * u),
                 "#5F6368", False)
            y += th
        y += int(24 * u)
        for el, eh in zip(els, heights):
            self._element(b, d, state, el, env, package, (m, y, W - m, y + eh), fields)
            y += eh
        if side_by_side:
            bw = (W - 2 * m - 2 * int(24 * u)) // max(1, len(buttons))
            for i, bt in enumerate(reversed(buttons)):  # Android puts the positive button right
                right = W - m - int(24 * u) - i * bw
                bb = (right - bw + int(8 * u), y, right, y + btn_h - int(16 * u))
                self._dialog_button(b, d, bt, bb, package, env, dialog)
        else:
            for bt in buttons:
                bb = (m + int(24 * u), y, W - m - int(24 * u), y + btn_h - int(16 * u))
                self._dialog_button(b, d, bt, bb, package, env, dialog)
                y += btn_h
        return box

    def _dialog_button(self, b: _Builder, parent: int, bt: Element, bb: Bounds, package: str,
                       env: expr_mod.Env, dialog: Dialog) -> None:
        text = self.text(bt.text, env)
        rid = f"{package}:id/{bt.id}"
        n = b.node(parent, "android.widget.Button", bb, package, text=text, resource_id=rid,
                   clickable=True, focusable=True)
        # Dialog buttons dismiss the dialog first, then run their own effects.
        b.target(bb, tap=(Effect("close"),) + bt.on_tap, label=text, node=n)
        b.op("button", bb, text, "text", True, int(FONT["button"] * self.u))
