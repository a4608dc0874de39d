"""Agent backends and the registry the loop, ``run_task`` and ``evaluate`` pick them from.

``heuristic`` is the offline default; ``openai`` and ``oracle`` are imported only when
asked for, so the pure core never pulls in a model client or the simulator.
"""
from __future__ import annotations

import importlib
from typing import Any, Callable

from agents.brain.backends.base import Backend

# name → "module:attribute"; imported lazily (the openai client and the simulator are
# heavy, optional, and absent from some installations).
_REGISTRY: dict[str, str] = {
    "heuristic": "agents.brain.backends.heuristic:HeuristicBackend",
    "openai": "agents.brain.backends.openai:OpenAIBackend",
    "oracle": "agents.brain.backends.oracle:OracleBackend",
}


class UnknownBackend(ValueError):
    pass


def backend_names() -> list[str]:
    return sorted(_REGISTRY)


def register_backend(name: str, target: str | Callable[..., Backend]) -> None:
    """Add a backend under ``name``: a ``"module:attribute"`` path or a factory."""
    _REGISTRY[name] = target  # type: ignore[assignment]


def get_backend(name: str, **kwargs: Any) -> Backend:
    """Build the backend called ``name`` with ``kwargs`` (raises :class:`UnknownBackend`)."""
    key = (name or "heuristic").strip().lower()
    target: Any = _REGISTRY.get(key)
    if target is None:
        raise UnknownBackend(
            f"unknown backend '{name}'; expected one of {', '.join(backend_names())}"
        )
    if isinstance(target, str):
        module_name, _, attribute = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise UnknownBackend(f"backend '{key}' is not available: {exc}") from exc
        target = getattr(module, attribute)
    return target(**kwargs)


__all__ = ["Backend", "UnknownBackend", "backend_names", "get_backend", "register_backend"]
