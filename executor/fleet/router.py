"""The fleet's router: starts one executor replica per GPU of a Ray cluster and sends each evaluation to
one of them (`executor.fleet.routing`), retrying once elsewhere when its replica is lost.

Faults. An evaluation whose replica dies under it (the actor's process, or its whole node) is sent once
more, to another replica, and its verdict says so (``fleet.attempts == 2`` with the reason in
``fleet.lost``); the dead attempt never produced a verdict, so nothing is counted twice. A verdict that
may come from a sick GPU (a timeout, a crash, a CUDA error or an internal error) has the replica probe
its GPU in a fresh process; a GPU that fails the probe (a sticky error, a process that would not die)
has its replica taken out, the evaluation retried elsewhere, and a replacement started, which joins
only once its own probe passes. Lost replicas are replaced the same way: Ray places the replacement
wherever a unit of the GPU resource is free. Compile workers that are missing (their node lost, or a CPU
node new to the cluster) are started by a check every ``fleet_compilers_check_s`` and handed to every
replica (`Fleet.check_compilers`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from executor.app import wait_prepared
from executor.errors import EvaluationCancelled, EvaluationExpired, ExecutorError
from executor.fleet.compilers import start_compile_workers
from executor.fleet.replica import CANCELLED, EXPIRED, ExecutorReplica
from executor.fleet.routing import RoutingTable, task_key
from executor.protocol import (
    BaselineState,
    ErrorKind,
    EvaluateRequest,
    FleetRecord,
    PrepareRequest,
    PrepareResponse,
    Stage,
    Verdict,
)
from executor.settings import ExecutorSettings

logger = logging.getLogger(__name__)

NAMESPACE = "regraph-executor"
# The replicas' concurrency group for `ExecutorReplica.prepare` (it returns at once, but must not wait
# behind the evaluations that fill the default group).
PREPARE_GROUP = "prepare"
# How often a router waiting for a replica's answer looks whether its caller has gone away.
CANCEL_POLL_S = 0.1

# How long a measured offset of a replica's wall clock (`clock_offset`) is used before it is measured
# again; a replica that drops an evaluation as expired early has it measured again at once.
CLOCK_MEASURE_S = 300.0
# A replica's EXPIRED with this much or more of the request's limit left on the router's own clock came
# early: its clock was set since it was measured (logged, measured again, the evaluation sent once more).
EARLY_EXPIRED_S = 1.0

# Verdicts after which the replica's GPU is probed before the next candidate is trusted to it.
SUSPECT_ERRORS = frozenset(
    {ErrorKind.TIMEOUT, ErrorKind.CRASH, ErrorKind.CUDA_ERROR, ErrorKind.INTERNAL_ERROR}
)


def _unless_skipped(answer: str, name: str) -> str:
    """A replica's answer, a verdict's JSON; raise for an evaluation it stopped or dropped unrun."""
    if answer == CANCELLED:  # stopped by a cancel of its token: never for a live caller
        raise EvaluationCancelled(f"{name} stopped the evaluation")
    if answer == EXPIRED:
        raise EvaluationExpired(f"dropped unrun on {name}: its request's limit passed before it was run")
    return answer


def clock_offset(sent: float, their: float, answered: float) -> float:
    """How far a replica's wall clock is ahead of this host's (negative: behind): its reading ``their``
    against the midpoint of this host's wall clock when the question was ``sent`` and when it was
    ``answered``; off by half the round trip at most."""
    return their - (sent + answered) / 2


def replica_deadline(deadline: float, offset: float, monotonic: float, wall: float) -> float:
    """``deadline`` (this process's ``time.monotonic()``) on the wall clock of a replica whose clock is
    ``offset`` ahead of this host's (`clock_offset`), given this host's clocks' readings now
    (``monotonic``, ``wall``): the replica turns it into its own monotonic deadline
    (`executor.fleet.replica.local_deadline`). Measured, not assumed: hosts' clocks need not agree."""
    return wall + offset + (deadline - monotonic)


class FleetUnavailableError(ExecutorError):
    """The fleet has no live replica (the cluster has no free GPU, or every replica was lost)."""


@dataclass
class Replica:
    """A started replica: its actor and what it said about itself."""

    name: str
    handle: Any  # ray.actor.ActorHandle of ExecutorReplica
    info: dict[str, Any]
    offset_s: float | None = None  # how far its wall clock is ahead of the router's (`clock_offset`)
    offset_at: float = 0.0  # when that was measured (time.monotonic())

    @property
    def node(self) -> str | None:
        """The host the replica runs on."""
        value = self.info.get("node")
        return str(value) if value is not None else None


class Fleet:
    """One router over the cluster's replicas. ``start()`` connects and starts them; ``evaluate`` is a
    coroutine (it awaits Ray's object references in the caller's event loop)."""

    def __init__(self, settings: ExecutorSettings) -> None:
        self.settings = settings
        self.table = RoutingTable(depth=settings.fleet_affinity_depth)
        self.replicas: dict[str, Replica] = {}
        self.retired: list[str] = []
        self._names = itertools.count()
        self._replacing: set[asyncio.Task[None]] = set()
        self._actor_class: Any = None
        self.compilers: list[Any] = []  # handles of the compile workers (executor.fleet.compilers)
        self._prepared: set[tuple[str, str]] = set()  # (replica, task key) told to prepare the task
        self._compiler_numbers = itertools.count()  # numbers for the compile workers' names
        self._compiler_nodes: dict[int, str] = {}  # id(handle) -> the Ray node it runs on
        self._compilers_lock = threading.Lock()
        self._stop_checks = threading.Event()
        self._checker: threading.Thread | None = None

    # -- start and stop -------------------------------------------------------------------------
    def start(self) -> None:
        """Connect to the cluster (``settings.ray``: ``auto`` or an address) and start the replicas."""
        import ray

        address = self.settings.ray or "auto"
        if not ray.is_initialized():
            try:
                ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level="warning")
            except ConnectionError:
                if address != "auto":
                    raise
                logger.info("no running Ray cluster found: starting one on this machine")
                ray.init(namespace=NAMESPACE, log_to_driver=False, logging_level="warning")
        count = self.settings.fleet_replicas or int(
            ray.cluster_resources().get(self.settings.fleet_gpu_resource, 0)
        )
        if count < 1:
            raise FleetUnavailableError(
                f"the Ray cluster has no {self.settings.fleet_gpu_resource!r} resource to run a replica on"
            )
        self.compilers = self._start_compilers({})
        self._actor_class = ray.remote(concurrency_groups={PREPARE_GROUP: 1})(ExecutorReplica)
        handles = [self._spawn() for _ in range(count)]
        infos = ray.get([h.describe.remote() for _, h in handles], timeout=600)
        for (name, handle), info in zip(handles, infos, strict=True):
            self._join(Replica(name=name, handle=handle, info=info))
        logger.info("fleet of %d replicas: %s", len(self.replicas), ", ".join(self.replicas))
        if self.settings.fleet_compilers != 0 and self.settings.fleet_compilers_check_s > 0:
            self._checker = threading.Thread(target=self._check_compilers_now_and_then, daemon=True)
            self._checker.start()

    # -- compile workers ------------------------------------------------------------------------
    def _start_compilers(self, have: dict[str, int], timeout_s: float = 600.0) -> list[Any]:
        started = start_compile_workers(self.settings, have, self._compiler_numbers, timeout_s)
        self._compiler_nodes.update({id(handle): node for handle, node in started})
        return [handle for handle, _ in started]

    def check_compilers(self) -> int:
        """Drop the compile workers that died, start those missing (see `start_compile_workers`) and
        hand the new ones to every replica; how many were started. A worker busy with a build (it
        does not answer within the check's few seconds) counts as alive."""
        import ray

        with self._compilers_lock:
            pings = {id(h): h.describe.remote() for h in self.compilers}
            ready = ray.wait(list(pings.values()), num_returns=len(pings), timeout=5)[0] if pings else []
            answered = {ref.hex() for ref in ready}
            alive: list[Any] = []
            have: dict[str, int] = {}
            for handle in self.compilers:
                ref = pings[id(handle)]
                if ref.hex() in answered:
                    try:
                        ray.get(ref, timeout=1)
                    except ray.exceptions.RayError:
                        self._compiler_nodes.pop(id(handle), None)
                        continue  # dead: its replicas' pools drop it at their next build
                alive.append(handle)
                node = self._compiler_nodes[id(handle)]
                have[node] = have.get(node, 0) + 1
            new = self._start_compilers(have, timeout_s=60.0)
            self.compilers = alive + new
        if new:
            for replica in list(self.replicas.values()):
                with contextlib.suppress(ray.exceptions.RayError):
                    replica.handle.add_compilers.options(concurrency_group=PREPARE_GROUP).remote(new)
            logger.info("%d compile workers started; %d in all", len(new), len(self.compilers))
        return len(new)

    def _check_compilers_now_and_then(self) -> None:
        while not self._stop_checks.wait(self.settings.fleet_compilers_check_s):
            try:
                self.check_compilers()
            except Exception:  # logged: the next check tries again; builds fall back to the replicas
                logger.exception("checking the compile workers failed")

    def _spawn(self) -> tuple[str, Any]:
        name = f"replica-{next(self._names)}"
        resource = self.settings.fleet_gpu_resource
        placement: dict[str, Any] = {"num_gpus": 1} if resource == "GPU" else {"resources": {resource: 1}}
        handle = self._actor_class.options(
            name=name,
            num_cpus=0,  # the CPUs stay free for compiles; the GPU resource places the replica
            max_concurrency=self.settings.compile_workers,
            max_restarts=0,
            **placement,
        ).remote(self.settings.model_dump_json(), name, self.compilers)
        return name, handle

    def _join(self, replica: Replica) -> None:
        self.replicas[replica.name] = replica
        self.table.add_replica(replica.name)

    def close(self) -> None:
        """Stop the replicas (their spare workers first) and leave the cluster."""
        import ray

        self._stop_checks.set()
        if self._checker is not None:
            self._checker.join(timeout=60)
        for task in list(self._replacing):
            task.cancel()
        # A copy: an evaluation still in flight may retire a replica meanwhile.
        for replica in list(self.replicas.values()):
            with contextlib.suppress(ray.exceptions.RayError):
                ray.get(replica.handle.close.remote(), timeout=30)
            ray.kill(replica.handle, no_restart=True)
        self.replicas.clear()
        for compiler in self.compilers:
            with contextlib.suppress(ray.exceptions.RayError):
                ray.kill(compiler, no_restart=True)
        self.compilers.clear()
        if ray.is_initialized():
            ray.shutdown()

    # -- evaluation -----------------------------------------------------------------------------
    async def evaluate(
        self,
        request: EvaluateRequest,
        cancelled: threading.Event | None = None,
        deadline: float | None = None,
    ) -> Verdict:
        """Evaluate on a replica chosen for the task; once more elsewhere if that replica is lost.
        Once ``cancelled`` is set (the caller went away), the replica is told to stop the evaluation
        (its worker killed, its GPU freed) and :class:`EvaluationCancelled` is raised. ``deadline``
        (``time.monotonic()``, `executor.app.request_deadline`): the replica drops the evaluation
        unrun once it has passed (still queued there, or not yet on the GPU), whether a cancel came
        or not, and :class:`EvaluationExpired` is raised."""
        import ray

        body = request.model_dump_json()
        key = task_key(request.task.model_dump_json())
        lost: list[str] = []
        failed: frozenset[str] = frozenset()
        verdict: Verdict | None = None
        for attempt in (1, 2):
            name = self.table.choose(key, exclude=failed)
            if name is None:
                if verdict is not None:  # the only replica left is the one that just failed
                    break
                raise FleetUnavailableError("the fleet has no live replica")
            replica = self.replicas[name]
            if self.settings.fleet_prepare_tasks:
                # The task is new to this replica: its reference, timing set and reference timing are
                # made now, while this request may still wait behind the replica's evaluations.
                self._prepare_on(name, key, body)
            self.table.started(name)
            try:
                answer = await self._answer(replica, body, cancelled, deadline)
            except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as e:
                lost.append(f"{name} on {replica.node} was lost: {type(e).__name__}")
                self._retire(name)
                failed = frozenset({name})
                continue
            verdict = Verdict.model_validate_json(answer)
            compiled_on = verdict.fleet.compiled_on if verdict.fleet is not None else None
            record = FleetRecord(
                replica=name, node=replica.node, attempts=attempt, lost=list(lost), compiled_on=compiled_on
            )
            verdict = verdict.model_copy(update={"fleet": record})
            if verdict.error in SUSPECT_ERRORS and attempt == 1 and not await self._healthy(replica):
                lost.append(f"{name}: its GPU failed the probe after a {verdict.error} verdict")
                self._retire(name)
                failed = frozenset({name})
                continue
            return verdict
        if verdict is not None:
            return verdict
        return Verdict(
            task_id=request.task.id,
            stage=Stage.STATIC,
            passed=False,
            error=ErrorKind.INTERNAL_ERROR,
            message="; ".join(lost),
            fleet=FleetRecord(replica="none", attempts=2, lost=lost),
        )

    def _prepare_on(self, name: str, key: str, body: str) -> bool:
        """Tell replica ``name`` to prepare the task ``key`` of the request ``body`` (JSON with a
        ``task`` and ``options``) unless it was told already; whether it was told now."""
        if (name, key) in self._prepared:
            return False
        self._prepared.add((name, key))
        self.replicas[name].handle.prepare.options(concurrency_group=PREPARE_GROUP).remote(body)
        return True

    async def prepare(
        self, request: PrepareRequest, stopping: threading.Event | None = None
    ) -> PrepareResponse:
        """Prepare the task on the replica that its candidates will go to (its home, chosen now when it
        has none, as for its first candidate): ``POST /v1/prepare``, a job that starts. With
        ``wait_s``, answer once that replica says the task is prepared and its naive baseline's
        measurement ended (the host's store then has it for every replica), after ``wait_s``, or once
        ``stopping`` is set (the service's stop: the wait ends there, as on one executor)."""
        import ray

        key = task_key(request.task.model_dump_json())
        name = self.table.choose(key)
        if name is None:
            raise FleetUnavailableError("the fleet has no live replica")
        body = request.model_dump_json()
        started = self._prepare_on(name, key, body)
        if request.wait_s <= 0:
            return PrepareResponse(task_id=request.task.id, started=started, replica=name)
        handle = self.replicas[name].handle

        async def look() -> tuple[bool, BaselineState]:
            done, baseline = await handle.preparation.options(concurrency_group=PREPARE_GROUP).remote(body)
            return bool(done), baseline

        try:
            ready, baseline, waited = await wait_prepared(look, request.wait_s, stopping)
        except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as e:
            # the replica was lost meanwhile: not prepared there (its evaluations are retried elsewhere)
            logger.warning("preparing %s on %s: the replica was lost: %s", request.task.id, name, e)
            return PrepareResponse(task_id=request.task.id, started=started, replica=name, ready=False)
        return PrepareResponse(
            task_id=request.task.id,
            started=started,
            replica=name,
            ready=ready,
            baseline=baseline,
            waited_s=waited,
        )

    async def _answer(
        self, replica: Replica, body: str, cancelled: threading.Event | None, deadline: float | None = None
    ) -> str:
        """The replica's answer to ``body``; with ``cancelled``, the evaluation carries a token, and
        once the event is set the replica is told to stop it and :class:`EvaluationCancelled` raised.
        With ``deadline`` (monotonic), the replica is given it on its own wall clock (converted with
        the offset of its clock measured by :meth:`_clock_offset`) and :class:`EvaluationExpired` is
        raised when it dropped the evaluation unrun. A replica that answers so while
        :data:`EARLY_EXPIRED_S` or more of the limit is left on the router's clock (its clock was set
        since it was measured) is named in a warning, its clock measured again, and the evaluation sent
        to it once more. The evaluation counts in the replica's load until the replica's call ends: a
        stopped one still holds its place there until the replica has stopped it (or, still queued,
        skipped it)."""
        answer = await self._send(replica, body, cancelled, deadline)
        if answer == EXPIRED and deadline is not None and deadline - time.monotonic() >= EARLY_EXPIRED_S:
            logger.warning(
                "replica %s dropped an evaluation as expired with %.1f s of its limit left here (its "
                "clock measured %+.1f s ahead of this host's, %.0f s ago): measuring it again and "
                "sending the evaluation once more",
                replica.name,
                deadline - time.monotonic(),
                replica.offset_s or 0.0,
                time.monotonic() - replica.offset_at,
            )
            self.table.started(replica.name)  # its place in the load, given back when this call ends
            answer = await self._send(replica, body, cancelled, deadline, measure=True)
            if answer == EXPIRED and deadline - time.monotonic() >= EARLY_EXPIRED_S:
                logger.warning(
                    "replica %s dropped it early again (its clock now measured %+.1f s ahead)",
                    replica.name,
                    replica.offset_s or 0.0,
                )
        return _unless_skipped(answer, replica.name)

    async def _clock_offset(self, replica: Replica, measure: bool = False) -> float:
        """How far ``replica``'s wall clock is ahead of this host's: measured (its `clock`, in the
        concurrency group not queued behind evaluations; `clock_offset`) when never measured, when
        measured :data:`CLOCK_MEASURE_S` ago or more, or with ``measure``."""
        if measure or replica.offset_s is None or time.monotonic() - replica.offset_at >= CLOCK_MEASURE_S:
            sent = time.time()
            their = float(await replica.handle.clock.options(concurrency_group=PREPARE_GROUP).remote())
            replica.offset_s = clock_offset(sent, their, time.time())
            replica.offset_at = time.monotonic()
            if abs(replica.offset_s) >= EARLY_EXPIRED_S:
                logger.info(
                    "replica %s: its clock is %+.1f s ahead of this host's", replica.name, replica.offset_s
                )
        return replica.offset_s

    async def _send(
        self,
        replica: Replica,
        body: str,
        cancelled: threading.Event | None,
        deadline: float | None,
        measure: bool = False,
    ) -> str:
        """One call of the replica's `evaluate` (see :meth:`_answer`); its answer as it came."""

        def ended(_: object) -> None:
            self.table.finished(replica.name)

        token = None if cancelled is None else secrets.token_hex(8)
        try:
            there = None
            if deadline is not None:
                offset = await self._clock_offset(replica, measure)
                there = replica_deadline(deadline, offset, time.monotonic(), time.time())
            answer = asyncio.ensure_future(replica.handle.evaluate.remote(body, token, there))
        except BaseException:
            ended(None)  # never sent: its place in the load is given back here, as no call will end it
            raise
        answer.add_done_callback(ended)
        if cancelled is None:
            return str(await answer)

        def stop_there() -> None:
            replica.handle.cancel.options(concurrency_group=PREPARE_GROUP).remote(token)
            answer.add_done_callback(lambda done: done.cancelled() or done.exception())  # nobody reads it

        try:
            while not cancelled.is_set():
                done, _ = await asyncio.wait({answer}, timeout=CANCEL_POLL_S)
                if done:
                    return str(answer.result())
        except asyncio.CancelledError:
            # the awaiting request given up (a batch past its limit, a request past its limit): the
            # replica stops the evaluation too, instead of running it to its limits for nobody
            stop_there()
            raise
        stop_there()
        raise EvaluationCancelled(f"stopped on {replica.name}: its caller went away")

    async def _healthy(self, replica: Replica) -> bool:
        import ray

        try:
            return bool(
                await asyncio.wait_for(
                    replica.handle.probe.remote(), self.settings.fleet_probe_timeout_s + 10
                )
            )
        except (TimeoutError, ray.exceptions.RayActorError):
            return False

    # -- replacing replicas ---------------------------------------------------------------------
    def _retire(self, name: str) -> None:
        """Take a replica out (idempotent) and start its replacement in the background."""
        import ray

        replica = self.replicas.pop(name, None)
        if replica is None:
            return
        self.table.remove_replica(name)
        self.retired.append(name)
        logger.warning("replica %s on %s taken out; starting a replacement", name, replica.node)
        with contextlib.suppress(ray.exceptions.RayError):
            ray.kill(replica.handle, no_restart=True)
        task = asyncio.get_running_loop().create_task(self._replace())
        self._replacing.add(task)
        task.add_done_callback(self._replacing.discard)

    async def _replace(self) -> None:
        import ray

        name, handle = self._spawn()
        started = time.monotonic()
        try:
            info = await handle.describe.remote()  # waits until Ray finds a free GPU for it
            healthy = await handle.probe.remote()
        except ray.exceptions.RayError as e:  # logged: the fleet goes on with the replicas it has
            logger.error("replacement %s did not start: %s", name, e)
            return
        if not healthy:
            logger.error("replacement %s failed its GPU probe; the fleet goes on without it", name)
            ray.kill(handle, no_restart=True)
            return
        self._join(Replica(name=name, handle=handle, info=info))
        logger.info("replacement %s joined after %.1fs", name, time.monotonic() - started)

    async def describe(self) -> list[dict[str, Any]]:
        """What every live replica says about itself (see `ExecutorReplica.describe`)."""
        replicas = list(self.replicas.values())
        return list(await asyncio.gather(*(r.handle.describe.remote() for r in replicas)))
