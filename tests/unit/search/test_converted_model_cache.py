"""A GGUF model's converted form in the cache (`search.backends.transformers_local`): where it lives, what
its key depends on, and how it is written (atomically, or not at all), with stand-ins for the tokenizer
and model (no model is loaded; the real load is `tests/integration/search/test_packaged_model.py`)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from search.backends import transformers_local
from search.backends.transformers_local import _convert_gguf, converted_dir, model_cache_dir


class _Weight:
    def __init__(self, floating: bool) -> None:
        self.floating = floating

    def is_floating_point(self) -> bool:
        return self.floating


class _Saving:
    """Writes one file named after itself; `seen` records what the model looked like while it saved."""

    def __init__(self, name: str, *, floating: bool = True) -> None:
        self.name = name
        self.floating = floating
        self.hf_quantizer: object | None = "gguf quantizer"
        self.config = SimpleNamespace(quantization_config={"quant_method": "gguf"})
        self.seen: list[tuple[object | None, bool]] = []

    def state_dict(self) -> dict[str, _Weight]:
        return {"w": _Weight(self.floating)}

    def save_pretrained(self, where: Path) -> None:
        self.seen.append((self.hf_quantizer, hasattr(self.config, "quantization_config")))
        (Path(where) / self.name).write_text("saved", encoding="utf-8")


@pytest.fixture
def gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + bytes(100))
    return model


def _stand_ins(monkeypatch: pytest.MonkeyPatch, *, floating: bool = True) -> tuple[_Saving, _Saving]:
    tokenizer, model = _Saving("tokenizer.json"), _Saving("model.safetensors", floating=floating)

    def from_pretrained(
        transformers: Any, named: Path, where: str, dtype: Any, **extra: Any
    ) -> tuple[Any, Any]:
        return tokenizer, model

    monkeypatch.setattr(transformers_local, "_from_pretrained", from_pretrained)
    monkeypatch.setattr(transformers_local, "_import", lambda name: None)
    return tokenizer, model


def test_the_cache_lives_under_regraph_cache_dir_and_its_key_follows_the_file_and_transformers(
    gguf: Path, tmp_path: Path
) -> None:
    assert model_cache_dir() == tmp_path / "cache" / "models"
    first = converted_dir(gguf, "5.23.0")
    assert first.parent == model_cache_dir() and first.name.startswith("m-104-")
    assert converted_dir(gguf, "5.23.0") == first  # same file, same key
    assert converted_dir(gguf, "5.24.0") != first
    stat = gguf.stat()
    gguf.write_bytes(b"GGUF" + bytes(99) + b"\x01")  # same size, other content
    os.utime(gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert converted_dir(gguf, "5.23.0") != first
    content = converted_dir(gguf, "5.23.0")
    os.utime(gguf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))  # touched
    assert converted_dir(gguf, "5.23.0") not in {first, content}


def test_a_conversion_saves_the_model_as_a_plain_checkpoint_in_one_rename(
    gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, model = _stand_ins(monkeypatch)
    target = converted_dir(gguf, "5.23.0")
    assert _convert_gguf(None, SimpleNamespace(float32="f32"), gguf, target) is None
    assert sorted(p.name for p in target.iterdir()) == ["model.safetensors", "tokenizer.json"]
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no staging directory left
    # Saved without transformers' GGUF quantizer (which refuses to serialize), which is put back after.
    assert model.seen == [(None, False)]
    assert model.hf_quantizer == "gguf quantizer" and model.config.quantization_config == {
        "quant_method": "gguf"
    }


def test_a_cache_that_cannot_be_written_leaves_the_model_loaded_from_the_file(
    gguf: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    tokenizer, model = _stand_ins(monkeypatch)
    model_cache_dir().parent.mkdir(parents=True)
    model_cache_dir().write_text("a file where the directory should be", encoding="utf-8")
    target = converted_dir(gguf, "5.23.0")
    with caplog.at_level(logging.WARNING, logger=transformers_local.__name__):
        assert _convert_gguf(None, SimpleNamespace(float32="f32"), gguf, target) == (tokenizer, model)
    assert "cannot cache the converted m.gguf" in caplog.text
    assert model.hf_quantizer == "gguf quantizer"


def test_another_processes_conversion_renamed_first_wins_and_ours_is_removed(
    gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, model = _stand_ins(monkeypatch)
    target = converted_dir(gguf, "5.23.0")

    def theirs_first(where: Path) -> None:
        target.mkdir(parents=True)
        (target / "model.safetensors").write_text("theirs", encoding="utf-8")
        (Path(where) / "model.safetensors").write_text("ours", encoding="utf-8")

    monkeypatch.setattr(model, "save_pretrained", theirs_first)
    assert _convert_gguf(None, SimpleNamespace(float32="f32"), gguf, target) is None
    assert (target / "model.safetensors").read_text(encoding="utf-8") == "theirs"
    assert [p.name for p in target.parent.iterdir()] == [target.name]


def test_weights_transformers_kept_packed_are_not_cached(gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer, model = _stand_ins(monkeypatch, floating=False)
    target = converted_dir(gguf, "5.23.0")
    assert _convert_gguf(None, SimpleNamespace(float32="f32"), gguf, target) == (tokenizer, model)
    assert not model_cache_dir().exists() and model.seen == []
