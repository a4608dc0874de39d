"""all-MiniLM-L6-v2 sentence embeddings in plain numpy: no torch, no transformers.

The model (Wang et al. 2020's MiniLM, fine-tuned by sentence-transformers on 1B sentence
pairs) is a 6-layer BERT encoder, 384 wide, followed by mean pooling over the real tokens
and L2 normalisation. This module reads the files that ``sentence-transformers`` would —
``vocab.txt``, ``config.json``, ``sentence_bert_config.json``, ``model.safetensors`` — and
computes the same vectors in float32:

* :class:`BertTokenizer` — BERT's uncased WordPiece: clean the text, space out CJK
  characters, strip accents (NFD, drop non-spacing marks), lower-case, split on whitespace
  and punctuation, then greedy longest-match word pieces with ``##``; ``[UNK]`` for a word
  no pieces cover or longer than 100 characters; ``[CLS] … [SEP]``, truncated at the
  model's ``max_seq_length`` (256).
* :func:`read_safetensors` — the safetensors format read by hand (an 8-byte little-endian
  header length, a JSON header, raw little-endian tensors), memory-mapped, so loading
  costs little and the weights' pages are shared between processes.
* :class:`MiniLM` — the encoder's forward pass (post-LayerNorm BERT, exact erf GELU) over a
  padded batch with an attention mask, then pooling and normalisation.

Nothing here imports Django; nothing is downloaded. ``agents.brain.embeddings`` decides when
this model is used.
"""
from __future__ import annotations

import contextlib
import json
import math
import mmap
import os
import threading
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Callable, ContextManager, Iterable, Mapping, Sequence

import numpy as np

__all__ = ["BertTokenizer", "MiniLM", "read_safetensors", "erf"]

# --- tokenizer ----------------------------------------------------------------------

_MAX_CHARS_PER_WORD = 100  # BERT's WordPiece: a longer "word" is [UNK]


def _is_whitespace(ch: str) -> bool:
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch: str) -> bool:
    if ch in "\t\n\r":
        return False
    # Cc, Cf, Co, Cs — not Cn: the Rust tokenizer that sentence-transformers runs keeps
    # unassigned code points (they become [UNK]), where BERT's Python tokenizer drops them.
    return unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cs")


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    # ASCII symbols count as punctuation for BERT ("$", "+", "^", "`", ...), as do all of
    # Unicode's P* categories.
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    """The CJK Unified Ideographs blocks, as BERT's tokenizer defines "Chinese characters"
    (from 0x2B920 in the last range, not 0x2B820, as the Rust tokenizer has it)."""
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B920 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


class BertTokenizer:
    """BERT's uncased tokenizer (``BertNormalizer`` + ``BertPreTokenizer`` + WordPiece)."""

    def __init__(self, vocab: Mapping[str, int], *, max_length: int = 256,
                 lowercase: bool = True, unk: str = "[UNK]", cls: str = "[CLS]",
                 sep: str = "[SEP]", pad: str = "[PAD]") -> None:
        if max_length < 2:
            raise ValueError(f"max_length must leave room for [CLS] and [SEP], got {max_length}")
        for token in (unk, cls, sep, pad):
            if token not in vocab:
                raise ValueError(f"the vocabulary has no {token!r} token")
        self.vocab = dict(vocab)
        self.max_length = max_length
        self.lowercase = lowercase
        self.unk_id, self.cls_id = self.vocab[unk], self.vocab[cls]
        self.sep_id, self.pad_id = self.vocab[sep], self.vocab[pad]
        self._unk = unk
        self._pieces = lru_cache(maxsize=65536)(self._wordpiece)

    @classmethod
    def from_vocab_file(cls, path: str | os.PathLike[str], **kwargs) -> "BertTokenizer":
        """One token a line; the line number is the id (``vocab.txt``)."""
        with open(path, encoding="utf-8") as fh:
            vocab = {line.rstrip("\n"): i for i, line in enumerate(fh)}
        return cls(vocab, **kwargs)

    # The steps, in the order of the Rust ``tokenizers`` BertNormalizer.
    def normalize(self, text: str) -> str:
        out: list[str] = []
        for ch in text:
            cp = ord(ch)
            if cp == 0 or cp == 0xFFFD or _is_control(ch):
                continue
            if _is_whitespace(ch):
                out.append(" ")
            elif _is_cjk(cp):
                out.append(f" {ch} ")
            else:
                out.append(ch)
        text = "".join(out)
        if self.lowercase:  # accents are stripped whenever text is lower-cased (uncased BERT)
            text = "".join(ch for ch in unicodedata.normalize("NFD", text)
                           if unicodedata.category(ch) != "Mn")
            text = text.lower()
        return text

    @staticmethod
    def pre_tokenize(text: str) -> list[str]:
        """Split on whitespace; each punctuation character is a word of its own."""
        words: list[str] = []
        for chunk in text.split():
            current: list[str] = []
            for ch in chunk:
                if _is_punctuation(ch):
                    if current:
                        words.append("".join(current))
                        current = []
                    words.append(ch)
                else:
                    current.append(ch)
            if current:
                words.append("".join(current))
        return words

    def _wordpiece(self, word: str) -> tuple[str, ...]:
        if len(word) > _MAX_CHARS_PER_WORD:
            return (self._unk,)
        pieces: list[str] = []
        start = 0
        while start < len(word):
            end = len(word)
            piece = None
            while start < end:
                candidate = word[start:end] if start == 0 else "##" + word[start:end]
                if candidate in self.vocab:
                    piece = candidate
                    break
                end -= 1
            if piece is None:
                return (self._unk,)
            pieces.append(piece)
            start = end
        return tuple(pieces)

    def tokenize(self, text: str) -> list[str]:
        """Word pieces of ``text``, without the special tokens and untruncated."""
        return [piece for word in self.pre_tokenize(self.normalize(text))
                for piece in self._pieces(word)]

    def encode(self, text: str) -> list[int]:
        """``[CLS] pieces [SEP]`` ids, truncated to ``max_length`` in all."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, not {type(text).__name__}")
        ids = [self.vocab[piece] for piece in self.tokenize(text)][: self.max_length - 2]
        return [self.cls_id, *ids, self.sep_id]


# --- safetensors ---------------------------------------------------------------------

_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4",
           "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


def read_safetensors(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every tensor of a ``.safetensors`` file, as read-only numpy arrays over a memory map.

    Floating tensors stay in their stored dtype (F32, F16, F64; BF16 is widened to F32);
    a malformed file raises ``ValueError`` naming what is wrong.
    """
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size < 8:
            raise ValueError(f"{path}: too short for a safetensors file ({size} bytes)")
        buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    (header_len,) = np.frombuffer(buf, dtype="<u8", count=1)
    header_len = int(header_len)
    if 8 + header_len > size:
        raise ValueError(f"{path}: header length {header_len} runs past the end of the file")
    try:
        header = json.loads(bytes(buf[8:8 + header_len]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: unreadable safetensors header ({exc})") from exc
    base = 8 + header_len
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype_name, shape = info.get("dtype"), [int(d) for d in info.get("shape", ())]
        begin, end = (int(x) for x in info["data_offsets"])
        count = math.prod(shape)
        if dtype_name == "BF16":
            raw = np.frombuffer(buf, dtype="<u2", count=count, offset=base + begin)
            array = (raw.astype(np.uint32) << 16).view(np.float32)
        elif dtype_name in _DTYPES:
            dtype = np.dtype(_DTYPES[dtype_name])
            if end - begin != count * dtype.itemsize or base + end > size:
                raise ValueError(f"{path}: tensor {name!r} has offsets {begin}..{end} that do "
                                 f"not fit its shape {shape} of {dtype_name}")
            array = np.frombuffer(buf, dtype=dtype, count=count, offset=base + begin)
            if not array.flags.aligned:
                array = array.copy()
        else:
            raise ValueError(f"{path}: tensor {name!r} has unsupported dtype {dtype_name!r}")
        tensors[name] = array.reshape(shape)
    return tensors


# --- the encoder ----------------------------------------------------------------------

def _erf_numpy(x: np.ndarray) -> np.ndarray:
    """erf to within 1.5e-7 (Abramowitz & Stegun 7.1.26), below float32's resolution of
    GELU's output; used only where scipy is missing."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741
                                                       + t * (-1.453152027 + t * 1.061405429))))
    return (sign * (1.0 - poly * np.exp(-a * a))).astype(x.dtype, copy=False)


def _pick_erf() -> Callable[[np.ndarray], np.ndarray]:
    try:
        from scipy.special import erf as scipy_erf  # scikit-learn's dependency, so installed
    except ImportError:  # pragma: no cover - scipy is in requirements via scikit-learn
        return _erf_numpy
    return scipy_erf


erf = _pick_erf()
_SQRT_HALF = np.float32(1.0 / math.sqrt(2.0))


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's "gelu": x·Φ(x) with the exact erf, in place on ``x``'s dtype."""
    return x * (np.float32(0.5) * (np.float32(1.0) + erf(x * _SQRT_HALF)))


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    return centred / np.sqrt(var + np.float32(eps)) * weight + bias


def _single_blas_thread() -> Callable[[], ContextManager]:
    """A context that runs BLAS on one thread (threadpoolctl, scikit-learn's dependency).

    Sentences are short: the products are small, and a second BLAS thread gains little
    while its spin-waiting costs a lot on a busy two-core machine (a 19-token sentence took
    35 ms on one thread and 200 ms on two, with the other processes of a test run about).
    """
    try:
        from threadpoolctl import ThreadpoolController

        controller = ThreadpoolController()
    except Exception:  # noqa: BLE001 — not installed, or a library it cannot inspect
        return contextlib.nullcontext
    return lambda: controller.limit(limits=1, user_api="blas")


class _Layer:
    __slots__ = ("qkv_w", "qkv_b", "out_w", "out_b", "ln1_w", "ln1_b",
                 "up_w", "up_b", "down_w", "down_b", "ln2_w", "ln2_b")


class MiniLM:
    """A BERT sentence encoder (all-MiniLM-L6-v2) in numpy float32.

    ``MiniLM.load(folder)`` reads a sentence-transformers model folder. :meth:`encode`
    takes a list of texts and returns a ``(n, 384)`` float32 array of unit vectors;
    :meth:`embed` is one text's vector, cached. Safe to call from several threads (forward
    passes take turns, each on one BLAS thread).
    """

    def __init__(self, tensors: Mapping[str, np.ndarray], config: Mapping, tokenizer: BertTokenizer,
                 *, batch_size: int = 32, cache_size: int = 4096) -> None:
        self.tokenizer = tokenizer
        self.batch_size = max(1, int(batch_size))
        self.hidden = int(config["hidden_size"])
        self.heads = int(config["num_attention_heads"])
        if self.hidden % self.heads:
            raise ValueError(f"hidden_size {self.hidden} is not a multiple of "
                             f"num_attention_heads {self.heads}")
        self.head_dim = self.hidden // self.heads
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        act = config.get("hidden_act", "gelu")
        if act != "gelu":
            raise ValueError(f"unsupported hidden_act {act!r} (this encoder implements 'gelu')")
        prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""

        def get(name: str) -> np.ndarray:
            key = prefix + name
            if key not in tensors:
                raise ValueError(f"the model has no tensor {key!r}")
            array = tensors[key]
            return array if array.dtype == np.float32 else array.astype(np.float32)

        self.word = get("embeddings.word_embeddings.weight")
        self.position = get("embeddings.position_embeddings.weight")
        # Every token is segment 0 for a single sentence: its type embedding is a constant.
        self.type0 = np.array(get("embeddings.token_type_embeddings.weight")[0])
        self.emb_ln = (get("embeddings.LayerNorm.weight"), get("embeddings.LayerNorm.bias"))
        if self.word.shape[1] != self.hidden:
            raise ValueError(f"word embeddings are {self.word.shape[1]} wide, the config "
                             f"says {self.hidden}")
        if tokenizer.max_length > self.position.shape[0]:
            raise ValueError(f"max_length {tokenizer.max_length} exceeds the model's "
                             f"{self.position.shape[0]} positions")
        self.layers: list[_Layer] = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."
            layer = _Layer()
            # Weights stored (out, in) as torch's Linear; kept as (in, out) views of the map,
            # except Q, K and V, joined into one matrix so a layer makes one product for them.
            layer.qkv_w = np.ascontiguousarray(np.concatenate(
                [get(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")]).T)
            layer.qkv_b = np.concatenate(
                [get(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")])
            layer.out_w = get(p + "attention.output.dense.weight").T
            layer.out_b = get(p + "attention.output.dense.bias")
            layer.ln1_w = get(p + "attention.output.LayerNorm.weight")
            layer.ln1_b = get(p + "attention.output.LayerNorm.bias")
            layer.up_w = get(p + "intermediate.dense.weight").T
            layer.up_b = get(p + "intermediate.dense.bias")
            layer.down_w = get(p + "output.dense.weight").T
            layer.down_b = get(p + "output.dense.bias")
            layer.ln2_w = get(p + "output.LayerNorm.weight")
            layer.ln2_b = get(p + "output.LayerNorm.bias")
            self.layers.append(layer)
        self._cached = lru_cache(maxsize=cache_size)(self._embed_uncached)
        # One forward pass at a time: the BLAS thread limit is process-wide state, and two
        # passes at once on a small machine would only share the same cores.
        self._forward_lock = threading.Lock()
        self._blas_limit = _single_blas_thread()

    @classmethod
    def load(cls, folder: str | os.PathLike[str], **kwargs) -> "MiniLM":
        """The model in a sentence-transformers folder (``config.json``, ``vocab.txt``,
        ``model.safetensors``, optionally ``sentence_bert_config.json``)."""
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"no model folder at {folder}")
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        max_length = 512
        sbert = folder / "sentence_bert_config.json"
        if sbert.is_file():
            max_length = int(json.loads(sbert.read_text(encoding="utf-8")).get("max_seq_length",
                                                                               max_length))
        max_length = min(max_length, int(config.get("max_position_embeddings", max_length)))
        lowercase = True
        tok_config = folder / "tokenizer_config.json"
        if tok_config.is_file():
            lowercase = bool(json.loads(tok_config.read_text(encoding="utf-8"))
                             .get("do_lower_case", True))
        tokenizer = BertTokenizer.from_vocab_file(folder / "vocab.txt", max_length=max_length,
                                                  lowercase=lowercase)
        return cls(read_safetensors(folder / "model.safetensors"), config, tokenizer, **kwargs)

    @property
    def dimension(self) -> int:
        return self.hidden

    def encode(self, texts: str | Sequence[str], normalize_embeddings: bool = True) -> np.ndarray:
        """Sentence vectors: ``(len(texts), dim)`` for a list, ``(dim,)`` for one string.

        Texts are batched by length (``batch_size`` a batch), so padding stays small;
        the attention mask keeps padding out of every result. The keyword matches
        sentence-transformers' ``encode``; the vectors are unit length unless it is False.
        """
        if isinstance(texts, str):
            return self.encode([texts], normalize_embeddings)[0]
        texts = list(texts)
        for text in texts:
            if not isinstance(text, str):
                raise TypeError(f"texts must be strings, not {type(text).__name__}")
        out = np.zeros((len(texts), self.hidden), dtype=np.float32)
        if not texts:
            return out
        ids = [self.tokenizer.encode(text) for text in texts]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        with self._forward_lock, self._blas_limit():
            for start in range(0, len(order), self.batch_size):
                chunk = order[start:start + self.batch_size]
                out[chunk] = self._forward([ids[i] for i in chunk])
        if normalize_embeddings:
            norms = np.linalg.norm(out, axis=1, keepdims=True)
            out /= np.maximum(norms, np.float32(1e-12))  # torch's F.normalize
        return out

    def embed(self, text: str) -> np.ndarray:
        """One text's unit vector, cached (a read-only array shared between callers)."""
        return self._cached(text)

    def _embed_uncached(self, text: str) -> np.ndarray:
        vector = self.encode([text])[0]
        vector.setflags(write=False)
        return vector

    def _forward(self, batch: Sequence[Sequence[int]]) -> np.ndarray:
        """Mean-pooled last hidden states (not yet normalised) of a batch of id lists."""
        n, length = len(batch), max(len(ids) for ids in batch)
        ids = np.full((n, length), self.tokenizer.pad_id, dtype=np.int64)
        mask = np.zeros((n, length), dtype=np.float32)
        for row, seq in enumerate(batch):
            ids[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1.0
        x = self.word[ids] + self.position[:length] + self.type0
        # Dense layers run on (n·T, hidden) matrices: one BLAS product each, where numpy's
        # (n, T, hidden) @ matrix would loop over the batch outside BLAS, ten times slower.
        x = _layer_norm(x.reshape(n * length, self.hidden), *self.emb_ln, self.eps)
        # Padding keys get a large negative score, so softmax gives them no weight.
        key_bias = ((mask - 1.0) * np.float32(1e9))[:, None, None, :] if n > 1 else None
        scale = np.float32(1.0 / math.sqrt(self.head_dim))
        h, d = self.heads, self.head_dim
        for layer in self.layers:
            qkv = x @ layer.qkv_w + layer.qkv_b                    # (n·T, 3·hidden)
            qkv = qkv.reshape(n, length, 3, h, d).transpose(2, 0, 3, 1, 4)  # (3, n, h, T, d)
            q, k, v = (np.ascontiguousarray(part) for part in qkv)
            scores = (q * scale) @ k.transpose(0, 1, 3, 2)         # (n, h, T, T)
            if key_bias is not None:
                scores += key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(n * length, self.hidden)
            x = _layer_norm(context @ layer.out_w + layer.out_b + x,
                            layer.ln1_w, layer.ln1_b, self.eps)
            inner = _gelu(x @ layer.up_w + layer.up_b)
            x = _layer_norm(inner @ layer.down_w + layer.down_b + x,
                            layer.ln2_w, layer.ln2_b, self.eps)
        summed = np.einsum("ntc,nt->nc", x.reshape(n, length, self.hidden), mask)
        return summed / np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))


def cosine(a: Iterable[float], b: Iterable[float]) -> float:
    """Cosine of two vectors (0.0 when either is all zeros)."""
    va = np.asarray(a if isinstance(a, np.ndarray) else list(a), dtype=np.float64)
    vb = np.asarray(b if isinstance(b, np.ndarray) else list(b), dtype=np.float64)
    denom = float(np.linalg.norm(va) * np.linalg.norm(vb))
    return float(va @ vb / denom) if denom else 0.0
