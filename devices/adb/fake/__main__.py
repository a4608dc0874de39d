"""A fake adb phone in a process of its own: ``python -m devices.adb.fake``.

It stands for the phone in ``bench stream --device adb-fake`` so that the phone's work
(rendering, H.264 encoding) is not charged to the server being measured. It listens for
the adb server (``adb connect`` the serial it prints), keeps a text field focused and,
with ``--drive-hz``, types a new text that many times a second. On stdout: ``serial S``
first, then ``sent PTS T`` for every encoded frame (T: ``time.perf_counter()``, the
system-wide monotonic clock on Linux, comparable across processes). A line ``stop`` on
stdin stops the typing; once the last change is encoded it prints ``last PTS``.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time

from devices.actions import Action
from devices.adb.fake.phone import FakePhone
from devices.focus import focus_text_field
from devices.sim import SimDevice


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--drive-hz", type=float, default=0.0)
    args = parser.parse_args()
    sim = SimDevice("fake-adb-phone")
    phone = FakePhone(sim, port=args.port)
    out_lock = threading.Lock()

    def say(line: str) -> None:
        with out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    phone.on_sent = lambda pts, at: say(f"sent {pts} {at:.6f}")
    focus_text_field(sim)
    say(f"serial {phone.serial}")
    stop = threading.Event()

    def drive() -> None:
        n = 0
        next_at = time.perf_counter()
        while args.drive_hz > 0 and not stop.is_set():
            n += 1
            sim.perform(Action("TYPE", text=f"bench {n}"))
            next_at += 1 / args.drive_hz
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)  # the driver paces the screen

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    for line in sys.stdin:
        if line.strip() == "stop":
            stop.set()
            driver.join()
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                server = next(iter(phone.servers.values()), None)
                if server is not None and server.encoded_frame >= sim.frame_number:
                    say(f"last {server.last_sent_pts}")
                    break
                time.sleep(0.01)
            else:
                say("last none")
    phone.close()


if __name__ == "__main__":
    main()
