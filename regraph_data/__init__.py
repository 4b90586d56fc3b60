"""The service's runtime data: the task library and the seed reasoning graph, installed with the package.

The API names these in its settings (`ApiSettings.tasks_dir`, `ApiSettings.seed_graph`, overridden by
REGRAPH_TASKS_DIR and REGRAPH_SEED_GRAPH); the benchmark reads the same tasks. Nothing here imports the
project's other packages.
"""

from __future__ import annotations

from pathlib import Path

HOME = Path(__file__).resolve().parent
# The function-form tasks (`regraph.task/v1`, one directory per task): `task_ref` ids, the benchmark's tasks.
TASKS_DIR = HOME / "tasks"
# The kernel-form tasks (a CUDA kernel of a given signature against a serial reference).
KERNEL_TASKS_DIR = HOME / "kernel_tasks"
# The seed reasoning graph's export (built by `python -m bench.seed_graph`), loaded into an empty graph.
SEED_GRAPH_DIR = HOME / "seed_graph"
SEED_GRAPH_PATH = SEED_GRAPH_DIR / "seed_graph.json"
