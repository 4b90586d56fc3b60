"""One replica of the fleet: an executor (`executor.evaluate.Evaluator`) inside a Ray actor on one GPU.

Ray gives the actor one unit of the fleet's GPU resource and sets ``CUDA_VISIBLE_DEVICES`` to that GPU,
which the evaluator's worker processes inherit; the evaluator's own GPU lock still lets one candidate at
a time run on it, while ``compile_workers`` requests are in the actor at once so that compiles overlap
the run. Requests and verdicts cross the actor boundary as JSON text: the wire format, validated on
both sides, and cheaper for Ray to move than pickled pydantic models.

This module does not import Ray: the router wraps the class with ``ray.remote`` when it starts one.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from executor.app import query_gpu
from executor.errors import EvaluationCancelled, EvaluationExpired, ToolchainError
from executor.evaluate import Evaluator, evaluate_safely
from executor.fleet.compilers import CompilePool
from executor.fleet.pinning import format_cpulist, pin_replica
from executor.protocol import BaselineState, EvaluateRequest, FleetRecord, PrepareRequest
from executor.settings import ExecutorSettings

logger = logging.getLogger(__name__)

# A CUDA context, an allocation, a memset and a synchronize in a fresh process: what every candidate
# worker needs from the GPU. A GPU left with a sticky error, or held by a process that would not die,
# fails this or hangs past the probe's limit.
_GPU_PROBE = (
    "import pycuda.driver as d; d.init(); c = d.Device(0).make_context(); n = 1 << 20; "
    "a = d.mem_alloc(n); d.memset_d8(a, 0, n); c.synchronize(); a.free(); c.pop()"
)


# What `ExecutorReplica.evaluate` answers for an evaluation that its caller stopped (not a verdict).
CANCELLED = "cancelled"
# What it answers for an evaluation dropped unrun because its deadline (its request's limit) passed
# (not a verdict: the router raises `EvaluationExpired`, answered 504 / ``batch_timeout``).
EXPIRED = "expired"

# The most cancels a replica remembers for evaluations it has not started (`ExecutorReplica.cancel`);
# past it, the oldest are forgotten.
MAX_EARLY_CANCELS = 4096

# The environment variable that names the replica to its probe command.
PROBE_REPLICA_ENV = "REGRAPH_FLEET_REPLICA"


def _ray_node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def replica_settings(settings: ExecutorSettings, pinned: bool) -> ExecutorSettings:
    """A replica's settings: an unpinned replica (its set of cores is every other replica's too) takes
    no automatic timing cores, so that replicas sharing one set do not reserve the same ones (review
    43); a value set, 0 included, stands. The evaluator hands the value to its workers and builds
    (review 45 F4: it was written into this process's environment, for the workers to read there)."""
    if pinned or settings.timing_cores is not None:
        return settings
    return settings.model_copy(update={"timing_cores": 0})


class EarlyCancels:
    """The cancels of evaluations a replica has not started (queued behind ``compile_workers`` others
    in the actor, or not yet arrived): token -> when it came, by ``clock``. One is forgotten ``keep_s``
    after it came, and past ``cap`` the oldest are forgotten. Not locked: the replica holds its lock."""

    def __init__(
        self, keep_s: float, cap: int = MAX_EARLY_CANCELS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.keep_s = keep_s
        self.cap = cap
        self.clock = clock
        self._when: OrderedDict[str, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self._when)

    def remember(self, token: str) -> None:
        """Remember a cancel of ``token`` now (a second one counts from now: the newest)."""
        self.forget_old()
        self._when.pop(token, None)
        self._when[token] = self.clock()
        while len(self._when) > self.cap:
            self._when.popitem(last=False)

    def take(self, token: str) -> bool:
        """Whether a cancel of ``token`` is remembered (not yet forgotten); it is forgotten now."""
        self.forget_old()
        return self._when.pop(token, None) is not None

    def forget_old(self) -> None:
        """Forget the cancels that came ``keep_s`` ago or more (the oldest first)."""
        old = self.clock() - self.keep_s
        while self._when and next(iter(self._when.values())) <= old:
            self._when.popitem(last=False)


def local_deadline(deadline: float, wall: float, monotonic: float) -> float:
    """``deadline`` on this host's wall clock (the router converted it with its measure of this host's
    clock, `executor.fleet.router.replica_deadline`), in this process's monotonic clock, given both
    clocks' readings now (``wall``, ``monotonic``): from here on the wall clock may be set meanwhile."""
    return monotonic + (deadline - wall)


def skipped_answer(early: EarlyCancels, token: str | None, deadline: float | None) -> str | None:
    """What an evaluation answers when its turn comes on a replica, without running: :data:`CANCELLED`
    when a cancel of its token is remembered, :data:`EXPIRED` when its ``deadline`` (by ``early``'s
    clock) has passed, None when it is to run. An evaluation whose cancel was forgotten (it came
    ``keep_s``, twice the request limit, ago or more) has long passed its deadline (the request limit
    from when it was accepted, which was before its cancel): it is dropped as :data:`EXPIRED`."""
    if token is not None and early.take(token):
        return CANCELLED
    if deadline is not None and early.clock() >= deadline:
        return EXPIRED
    return None


class ExecutorReplica:
    """The actor's class: evaluate requests given as JSON, describe the GPU, probe its health."""

    def __init__(self, settings_json: str, replica: str, compilers: list[Any] | None = None) -> None:
        """``compilers``: handles of the fleet's compile workers (`executor.fleet.compilers`); without
        any (until the router adds some), the replica compiles on its own host."""
        self.settings = ExecutorSettings.model_validate_json(settings_json)
        self.replica = replica
        self.node = f"{socket.gethostname()}/{_ray_node_id()[:8]}"
        self.gpu_ids = os.environ.get("CUDA_VISIBLE_DEVICES", "")
        # Before any worker starts: they inherit the cores (executor.fleet.pinning).
        self.cores = pin_replica(self.gpu_ids) if self.settings.fleet_pin_cores else None
        self.settings = replica_settings(self.settings, pinned=self.cores is not None)
        if self.settings.timing_cores == 0 and self.cores is None:
            logger.info("replica %s is not pinned: no timing cores unless set", replica)
        # A build waits for a free compile worker behind others' builds: allow for a queue.
        self.compile_pool = CompilePool(compilers or [], timeout_s=4 * self.settings.compile_timeout_s)
        self.evaluator = Evaluator(self.settings, remote_builds=self.compile_pool)
        # The evaluations that a caller may stop (`cancel`), by the token the router gave them.
        self._cancels: dict[str, threading.Event] = {}
        # The cancels of evaluations not started yet, kept for twice the request limit, so that such an
        # evaluation, once its turn comes, ends at once instead of running for a caller long gone.
        self._early_cancels = EarlyCancels(2 * self.settings.request_timeout_s)
        self._cancels_lock = threading.Lock()
        logger.info("replica %s on %s (GPU %s, runtime %s)", replica, self.node, self.gpu_ids, self.runtime)

    @property
    def runtime(self) -> str:
        """The evaluator's runtime (``gpu``, ``host`` or ``none``)."""
        return self.evaluator.runtime

    def describe(self) -> dict[str, object]:
        """Who this replica is (a ``ReplicaDevice``): id, node, its GPU, runtime, arch, nvcc."""
        try:
            nvcc: str | None = self.evaluator.compiler.toolchain.release
        except ToolchainError:  # described, not raised
            nvcc = None
        return {
            **query_gpu(self.gpu_ids.split(",")[0] or None),
            "replica": self.replica,
            "node": self.node,
            "gpu_ids": self.gpu_ids,
            "cores": format_cpulist(self.cores) if self.cores else None,
            "runtime": self.runtime,
            "arch": self.evaluator.arch,
            "runtime_checks_available": self.evaluator.runtime_checks_available,
            "nvcc": nvcc,
            "candidate_process": self.evaluator.candidate_process,
            "memory_cgroups": self.evaluator.memory_cgroups,
            "turns": self.evaluator.turns.usage(),
        }

    def evaluate(self, request_json: str, token: str | None = None, deadline: float | None = None) -> str:
        """Evaluate one request (``EvaluateRequest`` as JSON); the verdict as JSON. With ``token``, a
        `cancel` of that token stops the evaluation (its worker killed, the GPU freed): then the answer
        is :data:`CANCELLED`, also when the cancel came before the evaluation started (nothing runs).
        ``deadline`` (``time.time()`` of this host: the router converts its own deadline with the
        offset of this host's clock that it measured, `clock`): its request's limit; an evaluation
        whose deadline passed before it started (it waited in the actor's queue), or before its run
        (after its compile, before and once granted its GPU turn), is dropped and answers
        :data:`EXPIRED`, cancelled or not."""
        request = EvaluateRequest.model_validate_json(request_json)
        local = None if deadline is None else local_deadline(deadline, time.time(), time.monotonic())
        cancelled = None
        with self._cancels_lock:
            skipped = skipped_answer(self._early_cancels, token, local)
            if skipped is None and token is not None:
                cancelled = threading.Event()
                self._cancels[token] = cancelled
        if skipped is not None:
            logger.info("replica %s: an evaluation not started (%s)", self.replica, skipped)
            return skipped
        try:
            verdict = evaluate_safely(self.evaluator, request, cancelled, local)
        except EvaluationExpired as e:
            logger.info("replica %s: %s", self.replica, e)
            return EXPIRED
        except EvaluationCancelled as e:
            logger.info("replica %s: %s", self.replica, e)
            return CANCELLED
        finally:
            if token is not None:
                with self._cancels_lock:
                    self._cancels.pop(token, None)
        record = FleetRecord(
            replica=self.replica,
            node=self.node,
            compiled_on=self.compile_pool.take_built_on(request.candidate.source),
        )
        return verdict.model_copy(update={"fleet": record}).model_dump_json()

    def clock(self) -> float:
        """This host's wall clock (``time.time()``): the router measures its offset from its own
        (`executor.fleet.router.clock_offset`), so that a deadline it sends means the same instant here
        whatever the two hosts' clocks say. Called in the router's own concurrency group, not queued
        behind evaluations."""
        return time.time()

    def cancel(self, token: str) -> bool:
        """Stop the evaluation started with ``token`` (its caller went away); False when none runs:
        then the token is remembered (for twice the request limit, at most :data:`MAX_EARLY_CANCELS`
        of them), and an evaluation with it that starts later answers :data:`CANCELLED` at once. Called
        by the router in its own concurrency group, so it is not queued behind evaluations."""
        with self._cancels_lock:
            event = self._cancels.get(token)
            if event is None:
                self._early_cancels.remember(token)
                return False
        event.set()
        return True

    def prepare(self, request_json: str) -> None:
        """Start preparing the request's task (`Evaluator.prepare_task`) and return at once; called by
        the router in its own concurrency group, so it is not queued behind the evaluations."""
        request = PrepareRequest.model_validate_json(request_json)  # an EvaluateRequest's JSON is one too
        self.evaluator.prepare_task(request.task, request.options)

    def preparation(self, request_json: str) -> tuple[bool, BaselineState]:
        """`prepare` (nothing new when under way or done), then how far the task's preparation is
        (`Evaluator.task_preparation`): the router asks this while a ``POST /v1/prepare`` waits."""
        request = PrepareRequest.model_validate_json(request_json)
        self.evaluator.prepare_task(request.task, request.options)
        return self.evaluator.task_preparation(request.task, request.options)

    def add_compilers(self, handles: list[Any]) -> int:
        """Send builds to these compile workers too (started by the router); the pool's size after."""
        self.compile_pool.add(handles)
        return self.compile_pool.size

    def probe(self) -> bool:
        """Whether the GPU still serves a fresh process: the configured probe command, else the
        built-in CUDA probe (always True without a GPU runtime and without a command)."""
        command = self.settings.fleet_probe_command
        if command is None:
            if self.runtime != "gpu":
                return True
            command = [sys.executable, "-c", _GPU_PROBE]
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=self.settings.fleet_probe_timeout_s,
                check=False,
                env={**os.environ, PROBE_REPLICA_ENV: self.replica},
            )
        except subprocess.TimeoutExpired:
            logger.error("replica %s: the GPU probe hung", self.replica)
            return False
        except OSError as e:  # the command itself cannot start: the replica cannot be trusted
            logger.error("replica %s: the GPU probe did not start: %s", self.replica, e)
            return False
        if done.returncode != 0:
            logger.error("replica %s: the GPU probe failed: %s", self.replica, done.stderr[-500:])
        return done.returncode == 0

    def close(self) -> None:
        """Stop the evaluator's spare workers (before the actor is killed)."""
        self.evaluator.close()
