"""An optional local sentence-embedding model for D-PoT references, loaded offline.

D-PoT §5.5 finds the most similar earlier goals with sentence embeddings (Reimers &
Gurevych 2019). Kairos does the same when a sentence-transformers model is installed
locally and named by ``KAIROS_EMBEDDING_MODEL`` (a folder, or a model id already in the
Hugging Face cache); otherwise :class:`agents.planning.ReferenceIndex` falls back to
TF-IDF. Nothing is ever downloaded: the load runs with ``HF_HUB_OFFLINE=1`` and
``local_files_only``, and any failure — the package missing, the path wrong, a broken
model — gives ``None`` with one log line. The result is cached per process and per model
name, so the import and load happen once.
"""
from __future__ import annotations

import contextlib
import inspect
import logging
import os
import threading
from collections import OrderedDict
from typing import Any, Callable, Iterator, Mapping

__all__ = ["load_embedder", "Embedder", "EMBEDDING_MODEL_ENV"]

log = logging.getLogger(__name__)

EMBEDDING_MODEL_ENV = "KAIROS_EMBEDDING_MODEL"
Embedder = Callable[[str], list[float]]

_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
_CACHE_SIZE = 4096  # goal vectors kept: services rebuild the reference index every step

_lock = threading.Lock()
_loaded: dict[str, Embedder | None] = {}


def load_embedder(environ: Mapping[str, str] | None = None) -> Embedder | None:
    """A ``str -> vector`` function from the local model ``KAIROS_EMBEDDING_MODEL``, or None.

    None when the variable is unset (sentence-transformers is then not even imported),
    when the package is not installed, or when the model cannot be loaded from local
    files. Never raises; never downloads.
    """
    env = os.environ if environ is None else environ
    name = (env.get(EMBEDDING_MODEL_ENV) or "").strip()
    if not name:
        return None
    with _lock:
        if name not in _loaded:
            _loaded[name] = _load(name)
        return _loaded[name]


def clear_cache() -> None:
    """Forget loaded models (tests; or after installing a model into a running process)."""
    with _lock:
        _loaded.clear()


def _load(name: str) -> Embedder | None:
    try:
        with _offline():
            from sentence_transformers import SentenceTransformer

            kwargs: dict[str, Any] = {"device": "cpu"}
            if "local_files_only" in _parameters(SentenceTransformer):
                kwargs["local_files_only"] = True
            model = SentenceTransformer(name, **kwargs)
            embed = _embedder(model)
            embed("warm up")  # a model that loads but cannot encode fails here, not mid-step
    except BaseException as exc:  # noqa: BLE001 — ImportError, OSError, a library's SystemExit
        if isinstance(exc, KeyboardInterrupt):
            raise
        log.warning("sentence-embedding model %r unavailable offline (%s: %s); "
                    "D-PoT references use TF-IDF", name, type(exc).__name__, exc)
        return None
    log.info("D-PoT references use the sentence-embedding model %r", name)
    return embed


def _embedder(model: Any) -> Embedder:
    cache: OrderedDict[str, list[float]] = OrderedDict()
    lock = threading.Lock()

    def embed(text: str) -> list[float]:
        with lock:
            if text in cache:
                cache.move_to_end(text)
                return cache[text]
        vector = model.encode(text, normalize_embeddings=True)
        values = [float(x) for x in (vector.tolist() if hasattr(vector, "tolist") else vector)]
        with lock:
            cache[text] = values
            while len(cache) > _CACHE_SIZE:
                cache.popitem(last=False)
        return values

    return embed


def _parameters(cls: Any) -> set[str]:
    try:
        return set(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        return set()


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """Hugging Face libraries in offline mode for the load; the environment restored after."""
    saved = {key: os.environ.get(key) for key in _OFFLINE_ENV}
    os.environ.update(_OFFLINE_ENV)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
