"""Forms and steppers: sign in, set numbers, fill fields, type and submit.

A sign-in screen waits for a person to type the password; a stepper is tapped until it
shows the number the goal gives (agents/brain/backends/steppers.py reads which); the values an
instruction gives for a form (a time, a label, a body) go into the fields made for them,
and the form's button saves it; the text of a "type" sub-goal goes into the field that
fits it and is submitted.
"""
from __future__ import annotations

import re

from agents.brain.backends.base import StepContext
from agents.brain.backends.heuristic.choice import Choice, match_confidence
from agents.brain.backends.heuristic.history import COMMIT_VERBS, history_labels, typed_texts
from agents.brain.backends.heuristic.intents import Intent, extract_text
from agents.brain.backends.heuristic.progress import remaining_words, sub_goal_status
from agents.brain.backends.heuristic.screen import (
    ScreenView, display_label, field_is_empty, is_system_nav, node_label_text, plain,
)
from agents.brain.backends.heuristic.targets import best_unused, click_best
from agents.brain.backends.steppers import find_steppers, stepper_move, stepper_target
from agents.brain.elements import is_editable
from agents.brain.text import tokens
from devices.actions import CLICK, COMPLETE, PRESS_ENTER, TYPE, WAIT, Action
from devices.uitree import UINode


_TIME_RE = re.compile(r"\b(\d{1,2}:\d{2})(?:\s*([AaPp])\.?\s?[Mm]\b\.?)?")
_HOUR_RE = re.compile(r"\b(\d{1,2})\s*([AaPp])\.?\s?[Mm]\b")  # "6am", "7 p.m."
_MORNING_RE = re.compile(r"\b(?:morning|dawn|sunrise|breakfast)\b", re.I)
_EVENING_RE = re.compile(r"\b(?:afternoon|evening|tonight|night|dinner|bedtime)\b", re.I)
# The label runs to the end, or to where the body begins ("a note called Gate code that
# says 4821#": the title is "Gate code").
_LABEL_RE = re.compile(r"\b(?:(?:labell?ed|named|called|titled)|(?:call|name|label|title)\s+it)\s+"
                       r"[\"'“‘]?(.+?)[\"'”’]?\s*(?:[.!?]?\s*$|,?\s+(?:that|which)\s+says?\b"
                       r"|,?\s+saying\b|,?\s+with\s+(?:the\s+)?(?:text|body|note|message)\b)", re.I)
_SAVE_LABELS = frozenset({"save", "ok", "done", "set", "add"})
# The first words of buttons that save or send what a screen holds (``_commit_buttons``).
_SUBMIT_VERBS = COMMIT_VERBS | _SAVE_LABELS | frozenset(
    "apply update extend start send continue next register request".split())
_SIGN_IN_LABELS = frozenset({"sign in", "log in", "login", "signin", "continue", "next"})
_CREATE_RE = re.compile(r"^\s*(?:please\s+)?(?:set|add|create|make|schedule)\b|\bnew\b", re.I)


# What a titled thing says ("… called Gate code that says 4821#").
_BODY_RE = re.compile(r"\b(?:(?:that|which)\s+says?|saying|with\s+(?:the\s+)?(?:text|body|note|message))"
                      r"\s*:?\s*(.+?)\s*$", re.I)


_SUBMIT_WORDS = frozenset({"send", "search", "save", "ok", "post", "submit", "go", "apply", "confirm"})


def sign_in(view: ScreenView, ctx: StepContext) -> Choice | None:
    """A sign-in screen: the password is the account owner's, so a person types it.

    The agent taps the empty password field (harmless), then asks a person to type —
    never the user through the chat, where a password would end up in the transcript
    and the training data. Once the field is filled, it taps Sign in.
    """
    fields = [n for n in view.editables if n.password]
    if len(fields) != 1:
        return None
    field_node = fields[0]
    if field_is_empty(field_node):
        if not field_node.focused:
            x, y = field_node.center
            return Choice(Action(CLICK, x=x, y=y, element=field_node.label or None), 4.0,
                          "The app asks to sign in; tapping the password field.",
                          [field_node.key])
        return Choice(Action(WAIT), 1.0,
                      "The app asks for the account's password. Only its owner or an "
                      "operator may type it: please enter it (take over, or edit this "
                      "step into TYPE).")
    buttons = [n for n in view.candidates if n.clickable and n.enabled
               and plain(n.label or "") in _SIGN_IN_LABELS]
    last = ctx.history[-1].action.get("type") if ctx.history else None
    if len(buttons) == 1 and last == TYPE:
        x, y = buttons[0].center
        return Choice(Action(CLICK, x=x, y=y, element=buttons[0].label), 4.0,
                      f"The password is entered; tapping '{buttons[0].label}'.",
                      [buttons[0].key])
    return None


def stepper(view: ScreenView, ctx: StepContext) -> Choice | None:
    """Tap − or + on a stepper until it shows the number the goal gives for it
    ("set it to 8 servings", "cap her at 3 GB", "an extra hour"); a stepper already
    there joins ``view.settled`` so no later rule taps it again.

    Claimed at 3: the number was said beside the stepper's words or unit
    (agents/brain/backends/steppers.py)."""
    if view.overlay:
        return None
    steppers = find_steppers(view.nodes)
    if not steppers:
        return None
    text = ctx.goal
    typed = extract_text(ctx.instruction)
    if typed:
        text = text.replace(typed, " ")  # a number inside a message is not a setting
    pressed = history_labels(ctx.history)
    for stepper in steppers:
        names = {stepper.decrease.label, stepper.increase.label}
        presses = [i for i, label in enumerate(pressed) if label in names]
        if presses and any(label not in names for label in pressed[presses[-1] + 1:]):
            # Set earlier, then left for the form's button: back at its start after
            # "Pay" ("Amount to add" reads 0 again), it is not asked for twice.
            view.settled |= stepper.keys
            continue
        wanted = stepper_target(text, stepper.label)
        if wanted is None:
            continue
        button = stepper_move(stepper, wanted, pressed)
        if button is None:
            view.settled |= stepper.keys
            if not (pressed and pressed[-1] in names):
                continue
            if not _other_buttons(view):
                # "keep 40% in the battery": the stepper was the whole request, and
                # no button on screen could save it — it is set. (A button of any
                # words may be the one: "List for sale" after a price stepper.)
                return Choice(Action(COMPLETE), 3.0,
                              f"'{stepper.label}' shows {wanted:g}, as the goal asks, "
                              "and nothing on screen saves it: done.")
            commits = _commit_buttons(view)
            if len(commits) == 1:
                # "20 bucks" set: "Pay" is how it goes on, whatever its words — once
                # nothing else on screen is named by the goal (``click_best``)
                view.stepper_done = commits[0]
            continue
        x, y = button.center
        return Choice(Action(CLICK, x=x, y=y, element=button.label or None), 3.0,
                      f"'{stepper.label}' shows {stepper.value:g}; the goal wants "
                      f"{wanted:g}.", [button.key])
    return None


def fill_form(view: ScreenView, ctx: StepContext) -> Choice | None:
    """Enter the values the instruction gives into the fields made for them.

    "Add a 7:15 AM alarm labelled Gym": a time goes into a field labelled like a time,
    a "labelled/named/called X" into a label or name field. Each empty field that fits
    is tapped, then typed into; with all of them filled by us, the form's Save/OK/Done
    button is tapped; once saved, the values showing on screen finish the task.
    """
    values = _form_values(ctx.instruction)
    if not values:
        return None
    typed = typed_texts(ctx.history)
    fitting = [(node, value) for node in view.editables
               for kind, value in values if _field_kind(node) == kind]
    for node, value in fitting:
        if not field_is_empty(node):
            continue
        if node.focused:
            return Choice(Action(TYPE, text=value, element=node.label or None), 5.0,
                          f"Typing '{value}' into '{node.label}'.", [node.key])
        x, y = node.center
        return Choice(Action(CLICK, x=x, y=y, element=node.label or None), 4.0,
                      f"'{node.label}' is where '{value}' goes; tapping it.", [node.key])
    ours = [value for _, value in values if value.lower() in typed]
    if not fitting and not ours and _CREATE_RE.search(ctx.instruction):
        # No form yet: the "Add alarm" / "New alarm" control of the thing the goal makes.
        goal_words = set(tokens(ctx.instruction))
        makers = []
        for n in view.candidates:
            verb, _, thing = plain(n.label or "").partition(" ")
            if n.clickable and n.enabled and verb in ("add", "new", "create") \
                    and set(tokens(thing)) & goal_words:
                makers.append(n)
        if len(makers) == 1:
            x, y = makers[0].center
            return Choice(Action(CLICK, x=x, y=y, element=makers[0].label), 4.0,
                          f"'{makers[0].label}' opens the form for what the goal adds.",
                          [makers[0].key])
    if fitting and len(ours) == len(values) and ctx.history and \
            ctx.history[-1].action.get("type") == TYPE:
        buttons = [n for n in view.candidates if n.clickable and n.enabled
                   and plain(n.label or "") in _SAVE_LABELS]
        if len(buttons) == 1:
            x, y = buttons[0].center
            return Choice(Action(CLICK, x=x, y=y, element=buttons[0].label), 4.0,
                          f"Every value is entered; '{buttons[0].label}' saves the form.",
                          [buttons[0].key])
    if not fitting and len(ours) == len(values) and any(
            plain(label) in _SAVE_LABELS for label in history_labels(ctx.history)):
        shown = " ".join(n.text.lower() for n in view.nodes if n.text and not is_editable(n))
        if all(value.lower() in shown for _, value in values):
            return Choice(Action(COMPLETE), 5.0,
                          "The form is saved and its values show on this screen.")
        return Choice(Action(COMPLETE), 4.0,
                      "The form closed on Save without an error; the goal is done.")
    return None


def type_text(intent: Intent, view: ScreenView, ctx: StepContext) -> Choice:
    """Type the sub-goal's text into the field that fits it: tap an empty field first,
    or open what the goal names when no field is on screen yet; submit once typed.

    Its choices name their rule "type" (the evidence the calibrator reads), as the
    method ``_type`` they came from did: a function may not be called ``type``."""
    typed = intent.typed or ""
    status = sub_goal_status(intent, view, ctx)
    if status == "typed":
        return submit(intent, view, ctx)
    if status == "more":
        rest = Intent(intent.text, "click", target=" ".join(remaining_words(intent)),
                      app=intent.app, app_named=intent.app_named)
        choice = click_best(rest, view, ctx)
        choice.confidence = min(choice.confidence, 4.0)
        return choice
    empty = [n for n in view.editables if field_is_empty(n)]
    field_node = view.focused_editable
    if field_node is not None and (field_is_empty(field_node) or len(view.editables) == 1):
        others = [n for n in empty if n.index != field_node.index]
        sure = not others or (_field_fits(field_node, intent) and not any(
            _field_fits(n, intent) for n in others))
        return Choice(Action(TYPE, text=typed, element=field_node.label or None),
                      5.0 if sure else 3.0,
                      f"The text field '{field_node.label}' is focused; typing '{typed}'.",
                      [field_node.key], rule="type")
    if len(view.editables) == 1:
        # One field on screen: TYPE goes into it without a tap first (as adb input does).
        only = view.editables[0]
        return Choice(Action(TYPE, text=typed, element=only.label or None), 5.0,
                      f"'{only.label}' is the only text field; typing '{typed}'.", [only.key],
                      rule="type")
    if empty:
        fitting = [n for n in empty if _field_fits(n, intent)]
        choice = fitting[0] if len(fitting) == 1 else empty[0]
        confidence = 5.0 if len(empty) == 1 or len(fitting) == 1 else 2.0
        if choice.key in ctx.excluded_elements:
            confidence = 2.0
        x, y = choice.center
        return Choice(Action(CLICK, x=x, y=y, element=choice.label or None), confidence,
                      f"Clicking the empty text field '{choice.label}' to type '{typed}'.",
                      [choice.key], rule="type")
    # No field yet: open what the goal names first ("to Alice" → Alice's conversation).
    entity = best_unused(intent, view, ctx, exclude_text=typed, editable_ok=False)
    if entity is not None:
        node, score, second = entity
        x, y = node.center
        label = display_label(node, view.nodes)
        return Choice(Action(CLICK, x=x, y=y, element=label or None),
                      match_confidence(score, second),
                      f"'{label}' is named by the goal; opening it before typing.",
                      [node.key], rule="type").matched(score, second)
    return click_best(intent, view, ctx, navigating=True)


def submit(intent: Intent, view: ScreenView, ctx: StepContext) -> Choice:
    """Send what was typed: the one commit button on screen, else Enter."""
    buttons = [
        n for n in view.candidates
        if n.clickable and n.enabled and not is_editable(n) and not is_system_nav(n)
        and set(tokens(n.label, keep_stopwords=True)) & _SUBMIT_WORDS
    ]
    if len(buttons) == 1:
        best = buttons[0]
        x, y = best.center
        # A form with a field still empty (an alarm's time) is not ready to submit.
        ready = not any(field_is_empty(n) for n in view.editables)
        return Choice(Action(CLICK, x=x, y=y, element=best.label), 4.0 if ready else 3.0,
                      f"The text is typed; clicking '{best.label}' to submit it.", [best.key])
    if "search" in set(tokens(intent.text, keep_stopwords=True)) or any(
        "search" in node_label_text(n).lower() for n in view.editables
    ):
        return Choice(Action(PRESS_ENTER), 4.0 if not buttons else 2.0,
                      "The search text is typed; pressing Enter.")
    return Choice(Action(PRESS_ENTER), 2.0, "The text is typed; pressing Enter to submit.")


def _commit_buttons(view: ScreenView) -> list[UINode]:
    """The buttons on screen that save or send what the screen holds ("Add to trip",
    "Extend", "Pay"), stepper buttons aside."""
    found = []
    for node in view.candidates:
        if not node.clickable or not node.enabled or node.key in view.settled:
            continue
        words = plain(node.label or "").split()
        if words and words[0] in _SUBMIT_VERBS:
            found.append(node)
    return found


def _other_buttons(view: ScreenView) -> bool:
    """A button on screen besides the steppers' and the ways out (up, back, home)."""
    return any(node.clickable and node.enabled and "Button" in node.cls
               and node.key not in view.settled and not is_system_nav(node)
               for node in view.candidates)


def _field_fits(node: UINode, intent: Intent) -> bool:
    """The field's label fits what is typed: a search box for a search, a message body
    for a message."""
    words = set(tokens(node_label_text(node), keep_stopwords=True))
    goal = set(tokens(intent.text, keep_stopwords=True))
    if "search" in goal:
        return "search" in words
    if goal & {"message", "text", "say", "saying", "send", "tell", "reply"}:
        return bool(words & {"message", "text", "body", "reply"})
    if goal & {"label", "labell", "labelled", "labeled", "named", "titled"}:
        return bool(words & {"label", "name", "title"})
    return False


def _form_values(instruction: str) -> list[tuple[str, str]]:
    """The (kind, value) pairs an instruction gives for a form: a time, a label."""
    values: list[tuple[str, str]] = []
    time = _TIME_RE.search(instruction)
    hour = _HOUR_RE.search(instruction)
    if time:
        meridiem = f" {time.group(2).upper()}M" if time.group(2) else ""
        if not meridiem and int(time.group(1).split(":")[0]) <= 12:
            # "up at 6:45 tomorrow morning": the day part says which half of the clock
            meridiem = (" AM" if _MORNING_RE.search(instruction)
                        else " PM" if _EVENING_RE.search(instruction) else "")
        values.append(("time", time.group(1) + meridiem))
    elif hour and 1 <= int(hour.group(1)) <= 12:
        values.append(("time", f"{int(hour.group(1))}:00 {hour.group(2).upper()}M"))
    label = _LABEL_RE.search(instruction)
    if label:
        values.append(("label", label.group(1).strip()))
        body = _BODY_RE.search(instruction, label.end(1))
        if body and body.group(1).strip(" \"'“”‘’"):
            values.append(("body", body.group(1).strip().strip("\"'“”‘’").rstrip(".!?").strip()))
    return values


def _field_kind(node: UINode) -> str:
    words = set(re.findall(r"[a-z]+", node_label_text(node).lower()))
    if "time" in words:
        return "time"
    if words & {"label", "name", "title"}:
        return "label"
    if words & {"body", "note", "content", "description"}:
        return "body"
    return ""
