"""The virtual phone: a data-driven Android simulator with a shortest-path oracle.

Pure Python (no Django). Apps and task suites are YAML/JSON files; see docs/simulator.md.
"""
from devices.sim.device import SimDevice, Snapshot
from devices.sim.oracle import NoPathError, Oracle
from devices.sim.loader import AppBundle, bundled_apps, load_app, load_apps
from devices.sim.reader import SimLoadError
from devices.sim.state import SimState
from devices.sim.suite import SimTask, Suite, bundled_suite_names, find_suite, load_suite
from devices.sim.world import World, world_for

__all__ = [
    "AppBundle", "NoPathError", "Oracle", "SimDevice", "SimLoadError", "SimState", "SimTask", "Snapshot", "Suite", "World",
    "bundled_apps", "bundled_suite_names", "find_suite", "load_app", "load_apps", "load_suite",
    "world_for",
]
