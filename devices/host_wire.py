"""What crosses between device hosts and their clients: the Redis keys, the JSON form of
observations, device infos and action outcomes, and the packed frame blob.

Split out of :mod:`devices.host`, which still exports every name here.
"""
from __future__ import annotations

import base64
import io
import json
from typing import Any

from PIL import Image

from devices.actions import ActionOutcome
from devices.protocol import AppInfo, DeviceInfo, Frame, Observation
from devices.uitree import nodes_from_json, nodes_to_json

REQUEST_KEY = "kairos:devhost:requests:{name}"
REPLY_KEY = "kairos:devhost:reply:{id}"
FRAME_KEY = "kairos:devhost:frame:{name}"
ALIVE_KEY = "kairos:devhost:alive:{name}"
OWNER_KEY = "kairos:devhost:owner:{name}"
HOST_KEY = "kairos:devhost:host:{id}"
HOSTS_KEY = "kairos:devhost:hosts"
OWNER_TTL = 5  # seconds a dead host's phones stay claimed


# --- serialisation -------------------------------------------------------------------

def observation_to_json(obs: Observation) -> dict[str, Any]:
    return {
        "frame": obs.frame, "width": obs.width, "height": obs.height, "app": obs.app,
        "nodes": nodes_to_json(obs.nodes), "jpeg": base64.b64encode(obs.jpeg).decode(),
    }


def observation_from_json(data: dict[str, Any]) -> Observation:
    jpeg = base64.b64decode(data["jpeg"])
    image = Image.open(io.BytesIO(jpeg))
    image.load()
    return Observation(
        frame=int(data["frame"]), width=int(data["width"]), height=int(data["height"]),
        app=data.get("app", ""), nodes=nodes_from_json(data["nodes"]), image=image, jpeg=jpeg,
    )


def info_to_json(info: DeviceInfo) -> dict[str, Any]:
    return {"name": info.name, "width": info.width, "height": info.height, "kind": info.kind,
            "apps": [app.to_json() for app in info.apps]}


def info_from_json(data: dict[str, Any]) -> DeviceInfo:
    return DeviceInfo(
        name=data["name"], width=int(data["width"]), height=int(data["height"]),
        kind=data.get("kind", "sim"),
        apps=tuple(AppInfo(a["name"], a["package"], a.get("description", ""))
                   for a in data.get("apps", [])),
    )


def _outcome_to_json(outcome: ActionOutcome) -> dict[str, Any]:
    return {"ok": outcome.ok, "changed": outcome.changed, "error": outcome.error,
            "details": outcome.details}


def _pack_frame(frame: Frame) -> bytes:
    header = json.dumps({"number": frame.number, "width": frame.width,
                         "height": frame.height}).encode()
    return len(header).to_bytes(4, "big") + header + frame.jpeg


def _unpack_frame(blob: bytes) -> Frame:
    size = int.from_bytes(blob[:4], "big")
    header = json.loads(blob[4:4 + size])
    return Frame(number=header["number"], jpeg=blob[4 + size:], width=header["width"],
                 height=header["height"])
