"""Compiles on the cluster's CPU nodes: a pool of compile workers that the replicas send their builds to.

A *compile worker* is a Ray actor that takes one CPU (so Ray runs as many on a node as it has CPUs)
and builds with the executor's own `Compiler` into its node's cache. The router starts them, by
default one per CPU of the nodes that hold no GPU of the fleet (`start_compile_workers`), and hands
their handles to every replica. A replica's compiler asks its local cache first; on a miss it sends the
build to the least busy compile worker (`CompilePool.build`), which answers with the compile result and
the product's bytes, and the replica stores both in its own cache under the same content key, as if it
had built them (`Compiler.store`). So the GPU host's CPUs are left to the replica's workers, and
what the replica runs is byte for byte what its own compiler would have built:

* the worker builds only when its compiler gives the build the same key as the replica's (same
  compiler, version, options and arch; the arch is the replica's GPU's); otherwise it declines and the
  replica builds locally;
* a compile worker that dies (its node lost) is dropped from the pool and the build goes to the next
  one, or is done locally; a compile error or timeout is a result like any other;
* a build whose evaluation is given up (its caller went away, its request limit passed, the replica
  stops) is stopped on the compile worker too: the replica sends the worker a stop for that build
  (on the worker's control lane, which a running build does not hold), the worker's jail kills
  nvcc's process group, and the replica raises what a local build stopped raises; a build the
  replica stops waiting for (its timeout) is stopped the same way before the replica builds locally.
  An NVRTC build (a kernel task's, by default) runs in the worker's own process and is not stopped:
  the replica stops waiting for it, the worker finishes it and keeps it in its cache, as a local
  NVRTC build does;
* the router checks its compile workers every ``fleet_compilers_check_s`` and starts what is missing:
  on a CPU node that joined the cluster (or came back), or in place of workers that died where Ray can
  place them again; the replicas are handed the new workers (`CompilePool.add`).

Nothing here imports Ray at module level: the replica's side runs in a Ray actor, and the router wraps
`CompileWorker` with ``ray.remote`` when it starts one.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import os
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from executor.compile import Compiler
from executor.errors import EvaluationCancelled, ExecutorError
from executor.jail import STOP_POLL_S, STOPPED, StopSignal
from executor.settings import ExecutorSettings
from executor.verdict import CompileResult

logger = logging.getLogger(__name__)

ProductKind = Literal["shared_library", "cubin"]

# A compile worker's lane for stops: its builds run one at a time on the default lane, so a stop sent
# while one runs is taken at once on this one (`CompileWorker.stop`).
CONTROL_GROUP = "control"
# The most stops of builds not started yet that a compile worker remembers (a stop can come before the
# build it stops, which waits in the worker's queue behind others): the oldest are forgotten first.
EARLY_STOPS_KEPT = 4096


def _node_name() -> str:
    import ray

    return f"{socket.gethostname()}/{str(ray.get_runtime_context().get_node_id())[:8]}"


def source_digest(source: str) -> str:
    """What a replica remembers a remote build by (to say in the verdict where it was built)."""
    return hashlib.sha256(source.encode()).hexdigest()[:32]


class CompileWorker:
    """The compile actor's class: builds what a replica sends, with the replica's arch."""

    def __init__(self, settings_json: str) -> None:
        self.settings = ExecutorSettings.model_validate_json(settings_json)
        self.node = _node_name()
        self._compilers: dict[str, Compiler] = {}
        self._lock = threading.Lock()
        # The stop of each build by its ticket: running builds' events, and stops that came first.
        self._stops: dict[str, threading.Event] = {}
        self._early_stops: OrderedDict[str, None] = OrderedDict()

    def _compiler(self, arch: str) -> Compiler:
        with self._lock:
            if arch not in self._compilers:
                compiler = Compiler.from_settings(self.settings, arch)
                if self.settings.timing_cores is None:  # automatic: none here, where nothing is timed
                    compiler.timing_cores = 0
                self._compilers[arch] = compiler
            return self._compilers[arch]

    def describe(self) -> dict[str, str]:
        """Where this compile worker runs: the node's name and its Ray node id."""
        import ray

        return {"node": self.node, "node_id": str(ray.get_runtime_context().get_node_id())}

    def compile(
        self, key: str, source: str, kind: ProductKind, arch: str, ticket: str | None = None
    ) -> tuple[str | None, bytes | None, str]:
        """Build ``source``: (the ``CompileResult`` as JSON, the product's bytes, this node); the result
        is None when this node's compiler would build it under another key (another toolchain), or
        when `stop` was called with its ``ticket`` (before it started or while it ran: its nvcc is
        killed and nothing of it kept)."""
        compiler = self._compiler(arch)
        if compiler.build_key(source, kind) != key:
            logger.warning("compile worker on %s: another toolchain than the replica's; declined", self.node)
            return None, None, self.node
        stop = threading.Event()
        if ticket is not None:
            with self._lock:
                if ticket in self._early_stops:  # stopped while it waited in this worker's queue
                    del self._early_stops[ticket]
                    return None, None, self.node
                self._stops[ticket] = stop
        try:
            result = compiler.compile_source(source, kind, stop)
        except EvaluationCancelled:
            return None, None, self.node
        finally:
            if ticket is not None:
                with self._lock:
                    self._stops.pop(ticket, None)
        product = Path(result.product).read_bytes() if result.ok and result.product else None
        return result.model_dump_json(), product, self.node

    def stop(self, ticket: str) -> bool:
        """Stop the build sent with ``ticket`` (called on the worker's control lane, beside the build):
        True when it was running, False when it is remembered for when it starts (or has ended)."""
        with self._lock:
            running = self._stops.get(ticket)
            if running is not None:
                running.set()
                return True
            self._early_stops[ticket] = None
            while len(self._early_stops) > EARLY_STOPS_KEPT:
                self._early_stops.popitem(last=False)
            return False


class CompilePool:
    """A replica's view of the compile workers: sends a build to the one with the fewest builds in
    flight from this replica, and remembers (for a while) which node built which source."""

    def __init__(self, handles: list[Any], timeout_s: float, remember: int = 4096) -> None:
        self._handles: dict[int, Any] = dict(enumerate(handles))
        self._in_flight: dict[int, int] = dict.fromkeys(self._handles, 0)
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._built_on: OrderedDict[str, str] = OrderedDict()
        self._remember = remember

    def add(self, handles: list[Any]) -> None:
        """Take more compile workers (started by the router after some were lost or a node joined)."""
        with self._lock:
            start = max(self._handles, default=-1) + 1
            for offset, handle in enumerate(handles):
                self._handles[start + offset] = handle
                self._in_flight[start + offset] = 0

    @property
    def size(self) -> int:
        """Compile workers this pool still sends builds to."""
        with self._lock:
            return len(self._handles)

    def take_built_on(self, source: str) -> str | None:
        """The node whose compile worker built ``source`` for this replica since it was last asked
        (None: built here, or answered from this replica's cache)."""
        with self._lock:
            return self._built_on.pop(source_digest(source), None)

    def _take(self, tried: set[int]) -> tuple[int, Any] | None:
        with self._lock:
            free = [i for i in self._handles if i not in tried]
            if not free:
                return None
            index = min(free, key=lambda i: (self._in_flight[i], i))
            self._in_flight[index] += 1
            return index, self._handles[index]

    def _done(self, index: int, lost: bool) -> None:
        with self._lock:
            if index in self._in_flight:
                self._in_flight[index] -= 1
            if lost:
                self._handles.pop(index, None)
                self._in_flight.pop(index, None)

    def build(
        self,
        compiler: Compiler,
        key: str,
        source: str,
        kind: ProductKind,
        stop: StopSignal | None = None,
    ) -> CompileResult | None:
        """Have a compile worker build ``source`` and store it in ``compiler``'s cache; None when no
        worker could (then the replica builds it itself). Once ``stop`` is set, the worker's build is
        stopped and :class:`EvaluationCancelled` raised."""
        import ray

        tried: set[int] = set()
        while (taken := self._take(tried)) is not None:
            index, handle = taken
            if stop is not None and stop.is_set():  # given up before it was sent: nothing is started
                self._done(index, lost=False)
                raise EvaluationCancelled(STOPPED)
            tried.add(index)
            lost = False
            try:
                answer, product, node = self._wait(handle, key, source, kind, compiler.arch, stop)
            except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as e:
                lost = True
                logger.warning("a compile worker was lost (%s); trying another", type(e).__name__)
                continue
            except (ray.exceptions.RayError, TimeoutError) as e:  # its node is slow or its build broke
                logger.warning("a compile worker failed to build (%s); building locally", e)
                return None
            finally:
                self._done(index, lost)
            if answer is None:
                return None
            try:
                stored = compiler.store(key, CompileResult.model_validate_json(answer), product)
            except (ValueError, OSError) as e:
                raise ExecutorError(f"could not store a build from {node}: {e}") from e
            with self._lock:
                self._built_on[source_digest(source)] = node
                while len(self._built_on) > self._remember:
                    self._built_on.popitem(last=False)
            return stored
        return None

    def _wait(
        self, handle: Any, key: str, source: str, kind: ProductKind, arch: str, stop: StopSignal | None
    ) -> tuple[str | None, bytes | None, str]:
        """``handle``'s answer to the build, looking at ``stop`` every `STOP_POLL_S` meanwhile; the
        worker is told to stop the build when ``stop`` is set (then :class:`EvaluationCancelled`) or
        when its answer does not come in this pool's time (then `TimeoutError`)."""
        import ray

        ticket = uuid.uuid4().hex
        answer = handle.compile.remote(key, source, kind, arch, ticket)
        deadline = time.monotonic() + self._timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                ready, _ = ray.wait([answer], timeout=max(0.0, min(left, STOP_POLL_S)))
            except OSError as e:
                # This process's connection to its node's raylet is gone (its node is being killed):
                # the replica ends here, as Ray ends a worker that loses its raylet, so that the router
                # sees a lost replica and retries the evaluation elsewhere, instead of an error from it
                # (session 35's rehearsal: "Broken pipe" from this wait answered 500 for a killed node).
                logger.error("lost this node's raylet while waiting for a compile worker (%s); exiting", e)
                os._exit(1)
            if ready:
                built: tuple[str | None, bytes | None, str] = ray.get(answer)
                return built
            stopped = stop is not None and stop.is_set()
            if stopped or left <= 0:
                # Fire and forget: a worker that is gone needs no stop.
                with contextlib.suppress(ray.exceptions.RayError):
                    handle.stop.options(concurrency_group=CONTROL_GROUP).remote(ticket)
                if stopped:
                    raise EvaluationCancelled(STOPPED)
                raise TimeoutError(f"no answer from a compile worker in {self._timeout_s:.0f} s")


def start_compile_workers(
    settings: ExecutorSettings,
    have: dict[str, int] | None = None,
    names: Iterator[int] | None = None,
    timeout_s: float = 600.0,
) -> list[tuple[Any, str]]:
    """Start the fleet's compile workers (``settings.fleet_compilers``: -1 one per CPU of the nodes
    without the fleet's GPU resource, 0 none, N that many wherever Ray finds a CPU), less those alive
    already (``have``: live workers per Ray node id); each one's handle and Ray node id once it has
    started. A worker that dies before it answers (its node lost meanwhile) or does not start within
    ``timeout_s`` is left out (and killed). Workers are named ``compiler-<n>`` with ``n`` from ``names``
    (a name is never used twice: Ray keeps a dead actor's name for a while)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    have = have or {}
    actor = ray.remote(concurrency_groups={CONTROL_GROUP: 1})(CompileWorker)
    body = settings.model_dump_json()
    handles: list[Any] = []
    names = names if names is not None else itertools.count()
    if settings.fleet_compilers > 0:
        for _ in range(settings.fleet_compilers - sum(have.values())):
            name = f"compiler-{next(names)}"
            handles.append(actor.options(name=name, num_cpus=1, max_restarts=0).remote(body))
    elif settings.fleet_compilers < 0:
        for node in ray.nodes():
            resources = node.get("Resources", {})
            if not node.get("Alive") or resources.get(settings.fleet_gpu_resource, 0) > 0:
                continue
            missing = int(resources.get("CPU", 0)) - have.get(str(node["NodeID"]), 0)
            for _ in range(missing):
                strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
                handles.append(
                    actor.options(
                        name=f"compiler-{next(names)}",
                        num_cpus=1,
                        max_restarts=0,
                        scheduling_strategy=strategy,
                    ).remote(body)
                )
    if not handles:
        return []
    pings = [h.describe.remote() for h in handles]
    ray.wait(pings, num_returns=len(pings), timeout=timeout_s)
    started: list[tuple[Any, str]] = []
    for handle, ping in zip(handles, pings, strict=True):
        try:
            where = ray.get(ping, timeout=0.1)
        except (ray.exceptions.RayError, TimeoutError) as e:
            logger.warning("a compile worker did not start (%s); left out", type(e).__name__)
            with contextlib.suppress(ray.exceptions.RayError):
                ray.kill(handle, no_restart=True)
            continue
        started.append((handle, where["node_id"]))
    logger.info("%d of %d compile workers started", len(started), len(handles))
    return started
