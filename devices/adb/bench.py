"""``bench observe --device adb-fake``: what an agent's observation of an adb phone costs,
the UI tree and the screenshot timed separately, through the real adb server.

The phone is the fake phone (a simulated screen behind the adb transport), so the times
are adb's and the driver's, not a real phone's: on a phone ``uiautomator dump`` takes
1–3 s and ``screencap`` 0.3–1 s, which is why the screenshot comes from the video.
"""
from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from devices.adb.driver import AdbDevice
from devices.adb.fake.rig import FakeAdbRig
from devices.sim import SimDevice


def _timed(fn: Callable[[], Any], samples: int) -> list[float]:
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return times


def _p(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def bench_adb_observe(samples: int = 20) -> dict[str, Any]:
    rig = FakeAdbRig()
    try:
        phone = rig.attach(SimDevice("bench-adb"))
        still = AdbDevice(phone.serial, rig.client, video=False, timeout=10)
        video = AdbDevice(phone.serial, rig.client, video=True, timeout=10)
        try:
            if not video.session.wait_up(15):
                raise RuntimeError("the fake phone's scrcpy video did not start")
            tree = _timed(still.ui_nodes, samples)
            screencap = _timed(still.screenshot, samples)
            frame = _timed(video.screenshot, samples)
            observe = _timed(video.observe, samples)
        finally:
            video.close()
            still.close()
    finally:
        rig.close()
    return {
        "device": "adb-fake", "samples": len(observe),
        "ui_tree_p50_ms": _p(tree, 0.5), "ui_tree_p95_ms": _p(tree, 0.95),
        "screencap_p50_ms": _p(screencap, 0.5), "screencap_p95_ms": _p(screencap, 0.95),
        "video_frame_p50_ms": _p(frame, 0.5), "video_frame_p95_ms": _p(frame, 0.95),
        "observe_p50_ms": _p(observe, 0.5), "observe_p95_ms": _p(observe, 0.95),
        "observe_mean_ms": round(statistics.fmean(observe), 2) if observe else None,
    }


def bench_ocr_observe(samples: int = 5) -> dict[str, Any]:
    """``bench observe --device adb-fake --ocr``: what reading a screen without a UI tree
    costs (issue 27). The fake phone answers as a real one, its ``uiautomator dump``
    saying "ERROR: could not get idle state.": ``observe`` then reads the screenshot by
    OCR. Timed: OCR alone on a 1080×2400 screenshot (the phone's full ``screencap``, read at
    1280 pixels), the
    whole observation without a tree (failed dump, ``screencap``, ``dumpsys window``, OCR
    of the 800-pixel screenshot the driver keeps) and, for comparison, with one."""
    import io

    from PIL import Image

    from devices.actions import Action
    from devices.adb.fake.phone import IDLE_STATE_ERROR
    from devices.screenread import detect_nodes, ocr_engine

    rig = FakeAdbRig()
    try:
        phone = rig.attach(SimDevice("bench-ocr"), real_phone=True)
        phone.sim.perform(Action("OPENAPP", app="Settings"))
        device = AdbDevice(phone.serial, rig.client, video=False, timeout=30)
        try:
            png = device._shell("screencap -p", binary=True)
            full = Image.open(io.BytesIO(png)).convert("RGB")
            ocr_engine()  # loading the models once per process is not an observation's cost
            ocr_full = _timed(lambda: detect_nodes(full, *full.size), samples)
            found = len(detect_nodes(full, *full.size))
            with_tree = _timed(device.observe, samples)
            phone.dump_error = IDLE_STATE_ERROR
            without_tree = _timed(device.observe, samples)
            nodes = device.observe().nodes
        finally:
            device.close()
    finally:
        rig.close()
    return {
        "device": "adb-fake (dump fails: OCR)", "samples": len(without_tree),
        "screenshot": f"{full.width}x{full.height}", "detected_nodes": found,
        "ocr_1080x2400_p50_ms": _p(ocr_full, 0.5), "ocr_1080x2400_p95_ms": _p(ocr_full, 0.95),
        "observe_no_tree_p50_ms": _p(without_tree, 0.5),
        "observe_no_tree_p95_ms": _p(without_tree, 0.95),
        "observe_no_tree_nodes": len(nodes),
        "observe_tree_p50_ms": _p(with_tree, 0.5), "observe_tree_p95_ms": _p(with_tree, 0.95),
    }
