"""Token accounting for model calls: what each step cost, and a counter for benchmarks.

Pure Python. The endpoint's own ``usage`` is the truth and is used whenever it is
returned. Otherwise tokens are counted locally: with tiktoken when its encoding file is
already on disk, else with a deterministic approximation.

tiktoken downloads its BPE files from the internet on first use. Kairos never triggers
that download implicitly (a worker on an air-gapped network would stall on it), so an
encoding is used only when it is cached under ``TIKTOKEN_CACHE_DIR`` (or tiktoken's
default ``<tmp>/data-gym-cache``), or when ``KAIROS_TIKTOKEN_DOWNLOAD=1`` allows the
download. The fallback counts word pieces the way BPE vocabularies tend to split them:
a word of up to 7 letters is one token and each further 5 letters one more, digits go in
groups of three (as cl100k/o200k split numbers), every other non-space character is one
token, and spaces ride along with the next word. It is an approximation — absolute
counts can be off by a fair margin on unusual text — but it is exactly reproducible, so
ratios between two prompts (what ``bench tokens`` reports) stay meaningful.
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import tempfile
import threading
from dataclasses import dataclass
from typing import Any, Iterable

DEFAULT_ENCODING = "o200k_base"
_ENCODING_URLS = {
    # tiktoken_ext/openai_public.py; the cache key is the SHA-1 of this URL.
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
}
_PIECE_RE = re.compile(r"[^\W\d_]+|\d+|[^\w\s]|_", re.UNICODE)
# Per-message overhead of the chat format (role and separators), as OpenAI documents it.
MESSAGE_OVERHEAD_TOKENS = 4
REPLY_PRIMING_TOKENS = 3

_lock = threading.Lock()
_encodings: dict[str, Any] = {}


@dataclass(frozen=True)
class TokenUsage:
    """Tokens one or more calls cost; ``source`` says how they were obtained."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    source: str = "endpoint"  # "endpoint" | "tiktoken:<encoding>" | "approx"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: "TokenUsage") -> "TokenUsage":
        source = self.source if self.source == other.source else "mixed"
        if not self.total_tokens:
            source = other.source
        elif not other.total_tokens:
            source = self.source
        return TokenUsage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            source,
        )


def _cache_path(encoding_name: str) -> str | None:
    url = _ENCODING_URLS.get(encoding_name)
    if url is None:
        return None
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if not cache_dir:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    return os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest())


def _encoding_for(model: str | None) -> Any | None:
    """The tiktoken encoding for ``model`` if it can be had offline, else ``None``."""
    name = DEFAULT_ENCODING
    try:
        import tiktoken
    except ImportError:
        return None
    if model:
        try:
            name = tiktoken.encoding_name_for_model(model)
        except KeyError:
            name = DEFAULT_ENCODING  # non-OpenAI models: o200k is the closest general BPE
    with _lock:
        if name in _encodings:
            return _encodings[name]
        encoding = None
        path = _cache_path(name)
        allowed = os.environ.get("KAIROS_TIKTOKEN_DOWNLOAD", "").strip().lower() in ("1", "true")
        if allowed or (path is not None and os.path.exists(path)):
            try:
                encoding = tiktoken.get_encoding(name)
            except Exception:  # noqa: BLE001 — offline, corrupt cache: use the fallback
                encoding = None
        _encodings[name] = encoding
        return encoding


def tokenizer_name(model: str | None = None) -> str:
    """``tiktoken:<encoding>`` when tiktoken is usable offline, else ``approx``."""
    encoding = _encoding_for(model)
    return f"tiktoken:{encoding.name}" if encoding is not None else "approx"


def approx_token_count(text: str) -> int:
    """Deterministic stand-in for a BPE count (see the module docstring)."""
    count = 0
    for piece in _PIECE_RE.findall(text):
        if piece[0].isdigit():
            count += math.ceil(len(piece) / 3)
        elif piece[0].isalpha():
            count += 1 + math.ceil(max(0, len(piece) - 7) / 5)
        else:
            count += 1
    return count


def count_tokens(text: str, model: str | None = None) -> int:
    """Tokens in ``text``: tiktoken when its encoding is available offline, else approximate."""
    if not text:
        return 0
    encoding = _encoding_for(model)
    if encoding is not None:
        return len(encoding.encode(text, disallowed_special=()))
    return approx_token_count(text)


def image_tokens(width: int, height: int, detail: str = "high") -> int:
    """OpenAI's published cost of one image: 85 + 170 per 512-pixel tile (high detail).

    Other servers (vLLM, Ollama) count images their own way and report it in ``usage``;
    this is only the estimate used when they do not.
    """
    if detail == "low" or width <= 0 or height <= 0:
        return 85
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    return 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)


def count_message_tokens(
    messages: Iterable[dict[str, Any]],
    model: str | None = None,
    image_sizes: Iterable[tuple[int, int]] = (),
) -> int:
    """Estimated prompt tokens of chat ``messages`` (text parts plus image estimates)."""
    total = REPLY_PRIMING_TOKENS
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS
        content = message.get("content")
        if isinstance(content, str):
            total += count_tokens(content, model)
        elif isinstance(content, list):
            for part in content:
                if isinstance(part, dict) and part.get("type") == "text":
                    total += count_tokens(str(part.get("text", "")), model)
    for width, height in image_sizes:
        total += image_tokens(width, height)
    return total


def usage_from_response(response: Any) -> TokenUsage | None:
    """The ``usage`` block of a chat completion, when the endpoint sent one."""
    usage = getattr(response, "usage", None)
    if usage is None:
        return None
    prompt = getattr(usage, "prompt_tokens", None)
    completion = getattr(usage, "completion_tokens", None)
    if not isinstance(prompt, int) or not isinstance(completion, int):
        return None
    return TokenUsage(prompt, completion, "endpoint")


def measure_call(
    response: Any,
    messages: list[dict[str, Any]],
    completions: Iterable[str],
    model: str | None = None,
    image_sizes: Iterable[tuple[int, int]] = (),
) -> TokenUsage:
    """What one call cost: the endpoint's usage, else a local count of prompt and answers."""
    reported = usage_from_response(response)
    if reported is not None:
        return reported
    prompt = count_message_tokens(messages, model, image_sizes)
    completion = sum(count_tokens(text or "", model) for text in completions)
    return TokenUsage(prompt, completion, tokenizer_name(model))
