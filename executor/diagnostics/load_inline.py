"""Building a candidate through ``torch.utils.cpp_extension.load_inline``, KernelBench's route.

A cross-check of the executor's own compile-and-run path on a GPU host (``bench.probes.executor_bench
--load-inline N`` runs it on a few tasks): the candidate is built as a torch extension together with a
small launcher (:func:`launcher_source`), run once at the test size on torch tensors and compared with
the task's reference by the executor's own rule. Needs torch with CUDA, nvcc and ninja; torch is
imported only when a check runs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from executor.checking import compare_output
from executor.inputs import generate_inputs
from executor.reference import build_reference, load_library, reference_on
from executor.taskformat import C_SPELLING, ArrayArg, FunctionTask, KernelTask, ScalarArg


def launcher_source(task: FunctionTask | KernelTask) -> tuple[str, str]:
    """C++ for a function that takes torch tensors and scalars and runs the candidate: a kernel
    launch for kernel tasks, a call of the entry for function tasks. Returns (definition, declaration)."""
    params, call = [], []
    for arg in task.args:
        ctype = C_SPELLING[arg.dtype]
        if isinstance(arg, ScalarArg):
            params.append(f"{'double' if arg.dtype.startswith('float') else 'long long'} {arg.name}")
            call.append(f"({ctype}){arg.name}")
        else:
            params.append(f"torch::Tensor {arg.name}")
            const = "const " if arg.intent == "in" else ""
            call.append(f"static_cast<{const}{ctype}*>({arg.name}.data_ptr())")
    if isinstance(task, KernelTask):
        params = [
            "long long gx, long long gy, long long gz, long long bx, long long by, long long bz, long long smem",
            *params,
        ]
        body = (
            f"  {task.entry}<<<dim3(gx, gy, gz), dim3(bx, by, bz), smem>>>({', '.join(call)});\n"
            "  cudaError_t err = cudaDeviceSynchronize();\n"
            "  TORCH_CHECK(err == cudaSuccess, cudaGetErrorString(err));\n"
        )
    else:
        body = f"  {task.entry}({', '.join(call)});\n"
    signature = f"void bench_launch({', '.join(params)})"
    return f"{signature} {{\n{body}}}\n", signature + ";"


def load_inline_check(
    task: FunctionTask | KernelTask, source: str, build_dir: Path, cache: Path
) -> dict[str, Any]:
    """Build the candidate as a torch extension, run it once at the test size and compare outputs."""
    row: dict[str, Any] = {"task": task.id, "kind": task.kind}
    try:
        import torch
        from torch.utils.cpp_extension import load_inline
    except ImportError as e:
        return {**row, "error": f"torch is not importable: {e}"}
    definition, declaration = launcher_source(task)
    build_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        module = load_inline(
            name=f"bench_{task.id}",
            cpp_sources=[declaration],
            cuda_sources=[source + "\n#include <torch/types.h>\n" + definition],
            functions=["bench_launch"],
            build_directory=str(build_dir),
            extra_cuda_cflags=["-O3"],
            verbose=False,
        )
    except (RuntimeError, OSError, ImportError) as e:
        return {**row, "build_s": time.perf_counter() - start, "error": f"build failed: {str(e)[-600:]}"}
    row["build_s"] = time.perf_counter() - start
    lib = load_library(build_reference(task, cache))
    inputs = generate_inputs(task, "test", 12345, lib)
    expected, _ = reference_on(task, lib, inputs)
    work = inputs.copy()
    device = "cuda" if isinstance(task, KernelTask) else "cpu"
    tensors = {name: torch.from_numpy(array).to(device) for name, array in work.arrays.items()}
    values: list[Any] = []
    if isinstance(task, KernelTask):
        grid, block, shared = task.launch_config("test")
        values.extend([*grid, *block, shared])
    for arg in task.args:
        values.append(tensors[arg.name] if isinstance(arg, ArrayArg) else work.scalars[arg.name])
    start = time.perf_counter()
    try:
        module.bench_launch(*values)
        if device == "cuda":
            torch.cuda.synchronize()
    except RuntimeError as e:
        return {**row, "error": f"run failed: {str(e)[-600:]}"}
    row["run_s"] = time.perf_counter() - start
    problems = []
    for arg in task.outputs:
        got = tensors[arg.name].cpu().numpy()
        failure = compare_output(task, arg, got, expected[arg.name], "test", 12345)
        if failure is not None:
            problems.append(f"{arg.name}: {failure[0].value}")
    row["correct"] = not problems
    if problems:
        row["error"] = "; ".join(problems)
    return row
