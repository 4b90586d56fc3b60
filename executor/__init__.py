"""ReGraph's GPU executor: static checks, compilation and isolated correctness/timing of CUDA candidates.

The package imports nothing from the rest of ReGraph so that it can run alone on a GPU host
(tests/unit/executor/test_executor_layering.py keeps it so). Its wire contract is :mod:`executor.protocol`.
"""

from executor.errors import ExecutorError, TaskFormatError
from executor.taskformat import FunctionTask, KernelTask, Task, dump_task, load_task

__all__ = [
    "ExecutorError",
    "FunctionTask",
    "KernelTask",
    "Task",
    "TaskFormatError",
    "dump_task",
    "load_task",
]
