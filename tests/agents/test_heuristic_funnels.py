"""The offline heuristic backend on errands past the first screen: a shop's funnel,
forms (alarms, sign-in), switches, scrolling in search of a target, and apps named in
the goal."""
from __future__ import annotations

from agents.brain.backends.heuristic import HeuristicBackend, parse_intent
from devices.actions import CLICK, COMPLETE, OPENAPP, PRESS_ENTER, TYPE
from devices.protocol import AppInfo
from tests.agents.screens import (
    CLOCK, MESSAGES, SETTINGS, ScreenBuilder, ctx, entry, settings_screen,
)

backend = HeuristicBackend()
GAMMA = 4.0


SHOP = AppInfo("Shop", "com.example.shop", "Buy products")


def _shop(*texts: str, buttons: tuple[str, ...] = (), search: str | None = None,
          colour: str | None = "Black"):
    """A shop screen: plain texts, an optional search field, a Colour group, buttons."""
    s = ScreenBuilder(SHOP.package)
    top = 60
    if search is not None:
        s.add("android.widget.EditText", bounds=(48, top, 1032, top + 120), clickable=True,
              focusable=True, text=search, content_desc="Search products")
        top += 200
    for text in texts:
        s.text(text, top)
        top += 120
    if colour is not None:
        group = s.add("android.widget.RadioGroup", bounds=(0, top, 1080, top + 360))
        for i, label in enumerate(["Black", "White", "Blue"]):
            s.add("android.widget.RadioButton", parent=group, text=label, checkable=True,
                  clickable=True, checked=label == colour,
                  bounds=(48, top + 120 * i, 700, top + 120 * i + 100))
        top += 400
    for label in buttons:
        s.button(label, top)
        top += 160
    return s.observation()


def _buy(instruction: str, observation, **kwargs):
    return backend.propose(ctx(instruction, observation, apps=(SHOP,), **kwargs))


def test_buying_goes_from_the_product_page_to_add_to_cart_then_on_to_pay() -> None:
    product = _shop("Pulse Sport Earbuds", "$39", buttons=("Add to cart",))
    proposal = _buy("Buy the Pulse Sport Earbuds in black", product)
    assert proposal.action is not None and proposal.action.element == "Add to cart"
    assert proposal.confidence is not None and proposal.confidence >= GAMMA

    cart = _shop("Pulse Sport Earbuds", "Quantity: 1", buttons=("Remove", "Checkout"), colour=None)
    proposal = _buy("Buy the Pulse Sport Earbuds in black", cart)
    assert proposal.action is not None and proposal.action.element == "Checkout"

    pay = _shop("Pulse Sport Earbuds × 1", buttons=("Pay",), colour=None)
    proposal = _buy("Buy the Pulse Sport Earbuds in black", pay,
                    history=[entry(0, {"type": "CLICK", "x": 540, "y": 806}, "CLICK 'Checkout'")])
    assert proposal.action is not None and proposal.action.element == "Pay"


def test_adding_to_the_cart_stops_at_add_to_cart() -> None:
    added = _shop("Added to cart", "Pulse Sport Earbuds (black) is in your cart.",
                  buttons=("Keep shopping", "View cart"), colour=None)
    proposal = _buy("Add the Pulse Sport Earbuds in black to my cart", added,
                    history=[entry(0, {"type": "CLICK", "x": 540, "y": 1347}, "CLICK 'Add to cart'")])
    assert proposal.action is not None and proposal.action.element != "View cart"


def test_the_funnel_waits_for_open_choices_and_doubts_a_page_of_another_item() -> None:
    unchosen = _shop("Pulse Sport Earbuds", buttons=("Add to cart",), colour=None)
    unchosen_group = _shop("Pulse Sport Earbuds", buttons=("Add to cart",), colour="")
    assert _buy("Buy the Pulse Sport Earbuds in black", unchosen_group).action.element == "Black"
    other = _shop("Nimbus Noise Cancelling", "$199", buttons=("Add to cart",))
    proposal = _buy("Buy the Pulse Sport Earbuds in black", other)
    assert proposal.confidence is not None and proposal.confidence < GAMMA
    assert _buy("Buy the Pulse Sport Earbuds", unchosen).action.element == "Add to cart"


def test_an_item_not_on_screen_is_searched_for_by_name() -> None:
    home = _shop("Deals of the day", search="", colour=None)
    proposal = _buy("Add the Stride Runner shoes in black to my cart", home)
    assert proposal.action is not None and proposal.action.type == TYPE
    assert proposal.action.text == "Stride Runner shoes"

    typed = _shop("Deals of the day", search="Stride Runner shoes", colour=None)
    proposal = _buy("Add the Stride Runner shoes in black to my cart", typed,
                    history=[entry(0, {"type": "TYPE", "text": "Stride Runner shoes"})])
    assert proposal.action is not None and proposal.action.type == PRESS_ENTER
    assert proposal.confidence is not None and proposal.confidence >= GAMMA


def _alarm_form(time: str = "", label: str = "", focused: str = ""):
    s = ScreenBuilder(CLOCK.package)
    s.text("Add alarm", 60)
    s.add("android.widget.EditText", bounds=(48, 400, 1032, 500), clickable=True, text=time,
          content_desc="Alarm time", focused=focused == "time")
    s.add("android.widget.EditText", bounds=(48, 560, 1032, 660), clickable=True, text=label,
          content_desc="Label (optional)", focused=focused == "label")
    s.button("Save", 760)
    s.button("Cancel", 920)
    return s.observation()


def _alarm_list(*times: str, add: bool = True):
    s = ScreenBuilder(CLOCK.package)
    s.text("Alarms", 60)
    if add:
        s.add("android.widget.ImageButton", bounds=(940, 120, 1060, 220), clickable=True,
              content_desc="Add alarm")
    for i, time in enumerate(times):
        s.switch_row(time, 300 + 180 * i, False)
    return s.observation()


GYM = "Add a 7:15 AM alarm labelled Gym"


def test_a_new_alarm_is_made_by_filling_its_form_and_saving() -> None:
    opened = backend.propose(ctx("Set an alarm for 6:45 AM", _alarm_list("7:00 AM")))
    assert opened.action is not None and opened.action.element == "Add alarm"
    assert opened.confidence is not None and opened.confidence >= GAMMA

    tap = backend.propose(ctx(GYM, _alarm_form()))
    assert tap.action is not None and (tap.action.type, tap.action.element) == (CLICK, "Alarm time")
    typed = backend.propose(ctx(GYM, _alarm_form(focused="time")))
    assert typed.action is not None and (typed.action.type, typed.action.text) == (TYPE, "7:15 AM")
    label = backend.propose(ctx(GYM, _alarm_form("7:15 AM", focused="label"),
                                history=[entry(0, {"type": "TYPE", "text": "7:15 AM"})]))
    assert label.action is not None and (label.action.type, label.action.text) == (TYPE, "Gym")

    history = [entry(0, {"type": "TYPE", "text": "7:15 AM"}), entry(1, {"type": "TYPE", "text": "Gym"})]
    save = backend.propose(ctx(GYM, _alarm_form("7:15 AM", "Gym"), history=history))
    assert save.action is not None and save.action.element == "Save"
    assert save.confidence is not None and save.confidence >= GAMMA

    history.append(entry(2, {"type": "CLICK", "x": 540, "y": 820, "element": "Save"}, "CLICK 'Save'"))
    finished = backend.propose(ctx(GYM, _alarm_list("7:00 AM", "7:15 AM"), history=history))
    assert finished.action is not None and finished.action.type == COMPLETE


def test_turning_an_alarm_off_does_not_open_a_new_one() -> None:
    proposal = backend.propose(ctx("Turn off the 7:00 AM alarm", _alarm_list("6:30 AM", "7:00 AM")))
    assert proposal.action is not None and proposal.action.element != "Add alarm"


def test_a_control_already_showing_the_wanted_value_is_not_tapped_again() -> None:
    s = ScreenBuilder(SHOP.package)
    s.button("Filters", 300)
    s.button("Sort: lowest price", 450)
    for i, name in enumerate(["Classic Wired Earphones", "Kids Safe Headphones"]):
        s.text(name, 700 + 200 * i)
    goal = "In the Shop, search for headphones, sort them by lowest price and add the cheapest pair to the cart"
    proposal = _buy(goal, s.observation(), history=[
        entry(0, {"type": "TYPE", "text": "headphones"}), entry(1, {"type": "PRESS_ENTER"})])
    assert proposal.action is not None and proposal.action.element != "Sort: lowest price"


def _sign_in_screen(password: str = "", focused: bool = False):
    s = ScreenBuilder(SHOP.package)
    s.text("Sign in to check out", 200)
    s.add("android.widget.EditText", bounds=(48, 400, 1032, 500), clickable=True,
          text="me@example.com", content_desc="Email")
    s.add("android.widget.EditText", bounds=(48, 560, 1032, 660), clickable=True,
          text=password, content_desc="Password", password=True, focused=focused)
    s.button("Sign in", 760)
    return s.observation()


def test_a_sign_in_asks_a_person_for_the_password_never_guesses_it() -> None:
    goal = "Check out the headphones in my cart"
    tap = _buy(goal, _sign_in_screen())
    assert tap.action is not None and (tap.action.type, tap.action.element) == (CLICK, "Password")
    ask = _buy(goal, _sign_in_screen(focused=True))
    assert ask.action is not None and ask.action.type not in (TYPE, CLICK)
    assert ask.confidence is not None and ask.confidence < GAMMA and "password" in ask.thought
    typed = _buy(goal, _sign_in_screen("••••••••"), history=[
        entry(0, {"type": "TYPE", "text": "secret"}, by="operator")])
    assert typed.action is not None and typed.action.element == "Sign in"
    assert typed.confidence is not None and typed.confidence >= GAMMA


def test_a_results_row_naming_the_item_opens_it() -> None:
    s = ScreenBuilder(SHOP.package)
    s.button("Filters", 300)
    s.add("android.widget.ImageButton", bounds=(940, 120, 1060, 220), clickable=True,
          content_desc="Cart")
    for i, name in enumerate(["Echo Studio Headphones", "Nimbus Noise Cancelling"]):
        top = 500 + 220 * i
        row = s.add("android.widget.LinearLayout", bounds=(0, top, 1080, top + 200), clickable=True)
        s.text(name, top + 20, parent=row)
    proposal = _buy("Add the Nimbus Noise Cancelling headphones in black to my cart", s.observation(),
                    history=[entry(0, {"type": "TYPE", "text": "Nimbus Noise Cancelling headphones"}),
                             entry(1, {"type": "PRESS_ENTER"})])
    assert proposal.action is not None and proposal.action.element == "Nimbus Noise Cancelling"
    assert proposal.confidence is not None and proposal.confidence >= GAMMA


def test_check_out_is_not_ticking_a_box() -> None:
    assert parse_intent("Check out the headphones in my cart").kind != "toggle"
    assert parse_intent("Check the Wireless only box").kind == "toggle"


def test_switches_asked_for_without_on_or_off() -> None:
    """People's wordings (reworded2 suite): the state is in the verb, or a typo."""
    cases = {
        "can you put my phone in aeroplane mode": ("aeroplane mode", True),
        "Take the phone off flight mode please": ("flight mode", False),
        "you can take do not disturb off now, I'm expecting a call": ("do not disturb", False),
        "kill the wifi": ("wifi", False),
        "turn of bluetoth": ("bluetoth", False),
        "I don't need wifi right now": ("wifi", False),
    }
    for goal, (target, desired) in cases.items():
        intent = parse_intent(goal)
        assert (intent.kind, intent.target, intent.desired) == ("toggle", target, desired), goal
    # A longer wish is not read as a switch to flip.
    assert parse_intent("I don't want any notifications bugging me tonight").kind != "toggle"


def test_a_tap_on_a_switch_for_a_goal_that_says_no_state_is_asked() -> None:
    """A tap flips a switch: "Bluetooth please" does not say which way."""
    observation = settings_screen(wifi_on=False, bluetooth_on=True)
    proposal = backend.propose(ctx("Bluetooth please", observation))
    assert proposal.action is not None and proposal.action.element == "Bluetooth"
    assert proposal.confidence is not None and proposal.confidence < GAMMA
    flip = backend.propose(ctx("Turn bluetooth off", observation))
    assert flip.action is not None and flip.action.element == "Bluetooth"
    assert flip.confidence is not None and flip.confidence >= GAMMA


def test_the_day_part_of_a_time_is_typed() -> None:
    """reworded2: "up at 6:45 tomorrow morning" typed "6:45", which the alarm took as wrong."""
    up = "I need to be up at 6:45 tomorrow morning, can you set an alarm?"
    typed = backend.propose(ctx(up, _alarm_form(focused="time")))
    assert typed.action is not None and (typed.action.type, typed.action.text) == (TYPE, "6:45 AM")
    run = "going for a run first thing tomorrow, so set an alarm for 5am and call it Run"
    first = backend.propose(ctx(run, _alarm_form(focused="time")))
    assert first.action is not None and first.action.text == "5:00 AM"
    label = backend.propose(ctx(run, _alarm_form("5:00 AM", focused="label"),
                                history=[entry(0, {"type": "TYPE", "text": "5:00 AM"})]))
    assert label.action is not None and (label.action.type, label.action.text) == (TYPE, "Run")


def test_a_switchs_name_stops_at_a_colon() -> None:
    out = parse_intent("Turn on my email out of office with: Away until Jan 2")
    assert (out.kind, out.target, out.desired) == ("toggle", "my email out of office", True)
    dnd = parse_intent("put the phone on do not disturb")
    assert (dnd.kind, dnd.target, dnd.desired) == ("toggle", "do not disturb", True)
    assert "9:00" in parse_intent("Turn on the alarm at 9:00 AM").target



def test_a_label_stating_the_opposite_state_does_not_finish_the_step() -> None:
    """A control that states the sub-goal's verb as done finishes it ("Starred" for
    "star the email"); "Signed in" does not finish "sign my Pixel out" — the particle is
    part of the verb (cloud's sign-out failed on it, alone, while the rule was new)."""
    from agents.brain.backends.heuristic import read_screen
    from agents.brain.backends.heuristic.toggles import state_shows

    def shows(goal: str, *labels: str) -> bool:
        s = ScreenBuilder("com.example.mail")
        for n, label in enumerate(labels):
            s.button(label, 300 + 150 * n)
        return state_shows(parse_intent(goal), read_screen(ctx(goal, s.observation())))

    assert shows("star the booking email", "Reply", "Starred")
    assert not shows("star the booking email", "Reply", "Not starred")
    assert shows("pin the party note", "Pinned")
    assert not shows("sign my Pixel 7 out of Cloud", "Signed in as Sam")
    assert shows("sign my Pixel 7 out of Cloud", "Signed out")


def test_a_second_scroll_in_search_of_the_target_is_a_guess() -> None:
    """Nothing on a list of contacts matches "Zed": the first scroll down the list is
    sure; after one scroll that did not bring it, another is a guess (on the development
    suites a repeated scroll at 4 was right once in six)."""
    s = ScreenBuilder(MESSAGES.package)
    lst = s.add("androidx.recyclerview.widget.RecyclerView", bounds=(0, 200, 1080, 2200),
                scrollable=True)
    for i, name in enumerate(["Alice", "Bob", "Carol", "Dave", "Erin", "Frank"]):
        row = s.add("android.widget.LinearLayout", parent=lst, clickable=True,
                    bounds=(0, 200 + 300 * i, 1080, 480 + 300 * i))
        s.text(name, 240 + 300 * i, parent=row)
    goal = "Text Zed that I'm on my way"
    first = backend.propose(ctx(goal, s.observation()))
    assert first.action is not None and first.action.type == "SCROLL"
    assert first.confidence is not None and first.confidence >= GAMMA
    again = backend.propose(ctx(goal, s.observation(), history=[
        entry(1, {"type": "SCROLL", "direction": "UP"}, summary="SCROLL UP")]))
    assert again.action is not None and again.action.type == "SCROLL"
    assert again.confidence is not None and again.confidence < GAMMA


# --- two apps named in one goal --------------------------------------------------------

LOCKBOX = AppInfo("Lockbox", "com.example.lockbox", "Passwords and secure notes")
TALLY = AppInfo("Tally", "com.example.tally", "Budgets and spending")


def launcher_screen(apps: tuple[AppInfo, ...]):
    s = ScreenBuilder("com.android.launcher3")
    for i, app in enumerate(apps):
        s.add("android.widget.TextView", text=app.name, clickable=True,
              bounds=(40 + 260 * i, 300, 260 + 260 * i, 520))
    return s.observation()


def test_an_app_said_as_a_name_beats_one_said_as_an_everyday_word() -> None:
    # Found on fresh8_apps (Keyring, development material since 2026-11-25's fifth
    # session): "in keyring settings make it lock after 5 min" opened Settings at 5 — the
    # longer name won — though "settings" there is Keyring's own page.
    apps = (SETTINGS, CLOCK, LOCKBOX, TALLY)
    for goal, meant in [
        ("in lockbox settings make it lock after 5 min instead of 15", LOCKBOX),
        ("go to the tally settings and turn off the weekly summary", TALLY),
        ("open settings and turn off the lockbox autofill service", SETTINGS),
        ("in Settings, let Tally send notifications", SETTINGS),
    ]:
        intent = parse_intent(goal, apps)
        assert intent.app is meant, (goal, intent.app)
        proposal = backend.propose(ctx(goal, launcher_screen(apps), apps=apps))
        assert proposal.action is not None and proposal.action.type == OPENAPP
        assert proposal.action.app == meant.name, goal
