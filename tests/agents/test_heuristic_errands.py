"""The heuristic on two-app errands, on the simulator: which part comes next when a person
did some of it, in another order, or left an app.

Found on the fresh_errands suite (development material since 2026-11-25): with the
operator doing the text first, the agent declared "book a ride and text Alex" done at
confidence 5 with no ride booked; and after confirming the ride it tapped the Ride tab
alone instead of moving on.
"""
from __future__ import annotations

from typing import Any

import pytest

from agents.brain import loop
from agents.brain.backends.heuristic import HeuristicBackend
from agents.evaluation.episode import EpisodeMemory
from agents.evaluation.suites import _find_task, _load_suite, _sim_device
from devices.actions import CLICK, COMPLETE, OPENAPP, TYPE, Action

GAMMA = 4.0
backend = HeuristicBackend()


class Phone:
    """A simulated phone on one task, with the episode's history as the runner keeps it."""

    def __init__(self, suite: str, task: str) -> None:
        suite_obj = _load_suite(suite)
        self.task = _find_task(suite_obj, task)
        self.device = _sim_device(suite_obj, self.task)
        self.device.reset(self.task)
        self.memory = EpisodeMemory(instruction=self.task.instruction)

    def tap(self, label: str, by: str = "operator") -> None:
        node = next(n for n in self.device.observe().nodes if n.label == label)
        x, y = node.center
        self.do(Action(CLICK, x=x, y=y, element=label), by)

    def do(self, action: Action, by: str = "operator") -> None:
        target = loop.target_node(action, self.device.observe().nodes)
        outcome = self.device.perform(action)
        assert outcome.changed or action.type == TYPE, action
        self.memory.history.append(loop.history_entry(
            len(self.memory.history) + 1, action, by, outcome.changed, target))

    def propose(self) -> Any:
        return backend.propose(self.memory.context(self.device.observe(), self.device.info.apps))

    def done(self) -> bool:
        return bool(self.device.check(self.task))


def _text_alex(phone: Phone, by: str = "operator") -> None:
    phone.tap("Messages", by)
    phone.tap("Alex Chen", by)
    phone.tap("Text message", by)
    phone.do(Action(TYPE, text="I'm on my way"), by)
    phone.tap("Send", by)


def test_a_part_of_the_errand_in_an_app_never_opened_is_still_to_do() -> None:
    phone = Phone("fresh_errands", "fe_airport_ride_text_alex")
    _text_alex(phone)
    proposal = phone.propose()
    assert proposal.action is not None
    assert (proposal.action.type, proposal.action.app) == (OPENAPP, "RideNow")
    assert not phone.done()


def test_the_part_begun_in_the_app_on_screen_is_finished_first() -> None:
    phone = Phone("fresh_errands", "fe_airport_ride_text_alex")
    phone.tap("Messages")
    phone.tap("Alex Chen")
    proposal = phone.propose()
    assert proposal.action is not None and proposal.action.type != OPENAPP
    assert proposal.action.element == "Text message" or proposal.action.type == TYPE


def test_a_confirmed_booking_moves_the_errand_on() -> None:
    phone = Phone("fresh_errands", "fe_airport_ride_text_alex")
    phone.do(Action(OPENAPP, app="RideNow"), "agent")
    phone.tap("City Airport, Terminal 2", "agent")
    phone.tap("Standard", "agent")
    phone.tap("Confirm ride", "operator")
    proposal = phone.propose()
    assert proposal.action is not None
    assert (proposal.action.type, proposal.action.app) == (OPENAPP, "Messages")
    # and once the text is sent too, the errand is done
    phone.do(proposal.action, "agent")
    phone.tap("Alex Chen")
    phone.tap("Text message")
    phone.do(Action(TYPE, text="I'm on my way"))
    phone.tap("Send")
    final = phone.propose()
    assert final.action is not None and final.action.type == COMPLETE and phone.done()


@pytest.mark.parametrize("leave_by", ["operator", "agent"])
def test_a_cancellation_is_confirmed_in_its_own_dialog(leave_by: str) -> None:
    """"Cancel ride" → "Cancel ride?" [Keep ride] [Cancel ride]: the button that repeats the
    tap goes ahead (the agent chose "Keep ride", a way out, because "cancel" dismisses)."""
    phone = Phone("fresh_errands", "fe_cancel_hotel_text_priya")
    phone.do(Action(OPENAPP, app="RideNow"), "agent")
    phone.tap("Activity", leave_by)
    phone.tap("Airport Hotel", leave_by)
    phone.tap("Cancel ride", leave_by)
    proposal = phone.propose()
    assert proposal.action is not None and proposal.action.element == "Cancel ride"
    phone.do(proposal.action, "agent")
    after = phone.propose()
    assert after.action is not None
    assert (after.action.type, after.action.app) == (OPENAPP, "Messages")


@pytest.mark.parametrize("suite, task, taps", [
    ("home", "backyard_recording_on",
     ["Home", "cameras row", "backyard camera row", "backyard clip row", "Delete recording"]),
    ("fresh_apps", "jo_pin_party", ["Jotter", "party row", "Delete note"]),
])
def test_a_confirmation_the_goal_never_asked_for_is_not_confirmed_alone(
        suite: str, task: str, taps: list[str]) -> None:
    """Someone tapped "Delete recording" while the goal was to start recording: the app
    asks "Delete this recording?". That the dialog confirms the last tap does not make
    going ahead part of the task — the goal never asked to delete — so a person decides."""
    phone = Phone(suite, task)
    for label in taps:
        phone.tap(label, "operator")
    proposal = phone.propose()
    assert proposal.action is not None and proposal.confidence is not None
    assert any("?" in n.text for n in phone.device.observe().nodes)  # the app asks
    goes_ahead = proposal.action.type == CLICK and "Delete" in (proposal.action.element or "")
    assert not goes_ahead or proposal.confidence < GAMMA, proposal.thought


def test_a_switch_in_the_right_state_does_not_finish_a_goal_that_names_an_option_too() -> None:
    """"Turn on the living room lights at high brightness": with the lights on at Medium,
    the agent declared the task done at confidence 5."""
    phone = Phone("home", "lights_high")
    for label in ("Home", "lights row", "Lights"):
        phone.tap(label)
    proposal = phone.propose()
    assert proposal.action is not None and proposal.action.element == "High"
    phone.do(proposal.action, "agent")
    final = phone.propose()
    assert final.action is not None and final.action.type == COMPLETE and phone.done()


def test_an_option_the_goal_names_on_another_items_page_is_not_chosen_alone() -> None:
    """"Add the Aurora Wireless Headphones … in black": on the Pulse Sport Earbuds' page
    (a person opened the wrong result) the agent picked Black at confidence 5."""
    phone = Phone("everyday", "shop_headphones_black")
    phone.tap("Shop")
    page = phone.device.observe()
    search = next(n for n in page.nodes if n.cls.endswith("EditText"))
    phone.tap(search.label)
    phone.do(Action(TYPE, text="headphones"))
    phone.do(Action("PRESS_ENTER"))
    wrong = next(n.label for n in phone.device.observe().nodes
                 if "pulse" in n.label.lower() and n.clickable)
    phone.tap(wrong)
    proposal = phone.propose()
    assert proposal.action is not None and proposal.confidence is not None
    picks_colour = proposal.action.element in ("Black", "White", "Blue")
    assert not picks_colour or proposal.confidence < GAMMA, proposal.thought


def test_a_title_stops_where_the_body_begins() -> None:
    """"Make a note called Gate code that says 4821#": the agent typed the whole of
    "Gate code that says 4821#" into the title, at confidence 5."""
    phone = Phone("fresh_apps", "jo_gate_code_note")
    for label in ("Jotter", "New note", "Title"):
        phone.tap(label)
    proposal = phone.propose()
    assert proposal.action is not None
    assert (proposal.action.type, proposal.action.text) == (TYPE, "Gate code")
    for _ in range(6):  # and the body goes into the note before it is saved
        phone.do(proposal.action, "agent")
        proposal = phone.propose()
        assert proposal.action is not None
        if proposal.action.type == COMPLETE:
            break
    assert phone.done()


def test_the_lookalike_of_an_item_already_chosen_is_not_opened_as_the_item() -> None:
    """"Pay for my rides with the business Visa …, the one ending 9021": after the
    agent chose "Visa ending 9021", it tapped "Visa ending 4417" at confidence 4 as "the
    item the goal names" — the only Visa row not yet tapped."""
    phone = Phone("fresh_apps", "rn_business_card")
    for label in ("RideNow", "Wallet"):
        phone.tap(label)
    phone.tap("Visa ending 9021", "agent")
    proposal = phone.propose()
    assert proposal.action is not None and proposal.confidence is not None
    assert proposal.action.element != "Visa ending 4417" or proposal.confidence < GAMMA, \
        proposal.thought


def test_a_saved_form_does_not_finish_an_errand_whose_other_part_is_untouched() -> None:
    """"star the barcelona booking email …, and set an alarm for 5:45 am": the alarm saved,
    the agent declared the errand done at confidence 4 with the email never starred."""
    phone = Phone("fresh3_errands", "fe3_star_bcn_alarm")
    phone.do(Action(OPENAPP, app="Clock"))
    for _ in range(8):  # the operator approves the agent's steps in the Clock
        proposal = phone.propose()
        assert proposal.action is not None
        if proposal.action.type in (COMPLETE, OPENAPP):
            break
        phone.do(proposal.action, "agent")
    assert proposal.action.type != COMPLETE, proposal.thought
    assert (proposal.action.type, proposal.action.app) == (OPENAPP, "Postbox")


def test_a_saved_setting_is_a_finished_part_of_the_errand() -> None:
    """"Turn on my email out of office with: … and put the phone on do not disturb": the
    reply saved and Settings opened for the second part, the agent went back to Postbox
    at confidence 4."""
    phone = Phone("fresh3_errands", "fe3_out_of_office_dnd")
    phone.do(Action(OPENAPP, app="Postbox"))
    for label in ("Open navigation drawer", "settings row", "ooo row",
                  "Out of office auto-reply", "Message"):
        phone.tap(label)
    phone.do(Action(TYPE, text="Away until Jan 2, no access to email."))
    phone.tap("Save")
    phone.do(Action(OPENAPP, app="Settings"))
    proposal = phone.propose()
    assert proposal.action is not None
    assert proposal.action.app != "Postbox", proposal.thought


def test_the_option_the_goal_says_as_a_phrase_is_the_one_meant() -> None:
    """"Give yesterday's driver 5 stars and a $2 tip": "2 stars" and "5 stars" are both
    named word by word; the agent picked 2 stars at confidence 4."""
    phone = Phone("fresh_apps", "rn_rate_yesterday")
    for label in ("RideNow", "Activity", "past yday"):
        phone.tap(label)
    proposal = phone.propose()
    assert proposal.action is not None
    assert proposal.action.element == "5 stars" or proposal.confidence < GAMMA, proposal.thought


def test_an_emails_own_confirmed_is_not_the_agents_doing() -> None:
    """"star the barcelona booking email …, and set an alarm": on the email, which says
    "Your booking in Barcelona is confirmed", the agent took the star as done ("booking"
    read as the verb "book") and opened the Clock at confidence 4."""
    phone = Phone("fresh3_errands", "fe3_star_bcn_alarm")
    phone.do(Action(OPENAPP, app="Postbox"))
    phone.do(Action("SCROLL", direction="UP"))
    phone.tap("sb bcn mail row")
    proposal = phone.propose()
    assert proposal.action is not None
    assert proposal.action.type != OPENAPP, proposal.thought
    # once starred ("Not starred" now reads "Starred"), that part is done for good
    phone.tap("Not starred", "operator")
    following = phone.propose()
    assert following.action is not None
    assert (following.action.type, following.action.app) == (OPENAPP, "Clock")
    phone.do(following.action, "agent")
    assert phone.propose().action.app != "Postbox"


@pytest.mark.parametrize("suite, task, app, meant", [
    ("fresh10_apps", "tp_kayak_alerts_off", "Tradepost", "Saved searches"),
    ("fresh9_apps", "wh_end_trip", "Wheelo", "Gray Toyota Corolla - 6WBK 319"),
    ("fresh9_apps", "hp_skating_slip_not_yet", "Hallpass", "Mila Quinn"),
])
def test_where_nothing_matches_well_the_closest_entry_is_proposed_not_back(
        suite: str, task: str, app: str, meant: str) -> None:
    """Found on fresh9 / fresh10 (development material since 2026-11-25's fifth session):
    on a new app's first screen, where no entry matches the goal well, the agent proposed
    PRESS_BACK — right 5 times in 160 there, and 29 in 630 on the development suites — so
    the operator had to find the way every time. The closest entry is a better guess (right
    about one time in three; 60 of 130 on the development suites); still a guess, so it
    asks."""
    phone = Phone(suite, task)
    phone.do(Action(OPENAPP, app=app))
    proposal = phone.propose()
    assert proposal.action is not None and proposal.action.type == CLICK
    assert proposal.action.element == meant
    assert proposal.confidence is not None and proposal.confidence < GAMMA


def test_after_its_own_wrong_turn_the_agent_still_goes_back() -> None:
    # The agent's own tap led to a screen with nothing of the goal: back is the way.
    phone = Phone("fresh10_apps", "tp_kayak_alerts_off")
    phone.do(Action(OPENAPP, app="Tradepost"))
    phone.tap("Inbox", by="agent")
    proposal = phone.propose()
    assert proposal.action is not None and proposal.action.type == "PRESS_BACK"


def test_an_app_named_only_as_an_everyday_word_does_not_pull_the_phone_out() -> None:
    # "in the charger settings": Voltnest's own settings, not the phone's Settings app —
    # the agent proposed leaving for Settings at every step of the person's way (2.0),
    # development suite fresh7_apps (2026-11-26).
    phone = Phone("fresh7_apps", "vn_garage_limit_80")
    phone.tap("Voltnest")
    proposal = phone.propose()
    assert proposal.action is not None and proposal.action.type != OPENAPP
    assert proposal.action.element == "Chargers"
