"""Shared fixtures: one real embedded Neo4j for the whole session, migrated to the latest schema.

Under pytest-xdist (`-n 2`) every worker is a session of its own: its own Neo4j (a data directory
under the worker's own temporary directory, a free port), embedder and models. Tests are handed out
a whole module at a time (`--dist loadgroup`, the scheduler below), so a module's fixtures start once;
the modules that share something costly or exclusive go to one worker together (`XDIST_GROUPS`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.raycluster import SHARING as RAY_SHARING

# One thread per math library (torch's intra-op pool, OpenMP, BLAS), for this process and everything it
# starts, unless the run sets its own. By default each starts one thread per core, and every operation
# waits for all of them at a barrier: with this machine's two cores shared by two workers, Neo4j and the
# stacks, a thread that is not scheduled holds up the rest. The packaged model's four answers took 430 s
# in one worker of a two-worker run at load 9-16 (49 s alone); one 72-token answer beside one to four
# busy loops took 21-55 s with two threads and 6-21 s with one (bench/results/2026-11-29_s18/suite_speed.md).
for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")
if "torch" in sys.modules:  # imported before this file (a plugin): the variables came too late for it
    sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
# The test Neo4j servers (the sessions', the tests' own, the stacks' that `regraph up` starts) compile
# with the JVM's quick compiler only, unless the run sets its own options: a test server lives minutes
# and runs short, varied queries, and the optimising compiler's threads spend more CPU than they save
# on two cores shared by two workers. The seed-graph group (start, build, 40 restores) took 108 CPU
# seconds with it and 70 without, in the same wall time when run alone (session 35). Queries answer the
# same. (Session 19 reverted this after test_health_under_load got one 503 in a clean-clone run; that
# test gets such 503s with the default compilers too when the machine is loaded: session 35 saw them
# twice at load 14-20.)
os.environ.setdefault("JDK_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")
# Function candidates in their workers' process (REGRAPH_EXECUTOR_CANDIDATE_PROCESS=0), unless the run
# sets its own or a test does: the executor's default (auto) runs each in a process of its own where it
# can be confined (this host), one more process start per candidate (~0.4 CPU-s), and most tests here
# are not about where it runs. The runner's tests set 1 (tests.support.hostcode.use_candidate_process);
# the default's, and the executor's isolation tests, unset it (use_default_candidate_process); those of
# what a candidate in its worker can do set 0 themselves (use_worker_process). tests/gpu runs without
# this file (--noconftest): the default there.
os.environ.setdefault("REGRAPH_EXECUTOR_CANDIDATE_PROCESS", "0")

if TYPE_CHECKING:
    # Imported lazily below: the GPU host that runs `pytest tests/gpu` has no neo4j driver.
    from neo4j import Driver

    from graphdb.connection import GraphServerOptions, Neo4jTarget, OpenGraph

# Modules that must run on one worker, one after the other: the seed-graph modules build the graph
# once per session and restore it for the others (tests/integration/api/graph_support.py; a module of
# them on the other worker would build it again there: 8 s and the embedder's load); the Ray modules
# share one cluster of several raylets on this host (tests/support/raycluster.py).
XDIST_GROUPS = {
    "seed-graph": (
        "tests/integration/api/test_cypher_api.py",
        "tests/integration/api/test_graph_api.py",
        "tests/integration/api/test_graph_auth.py",
        "tests/integration/api/test_merge_undo.py",  # the graph API module's fixtures
    ),
    "ray-cluster": RAY_SHARING,
}
_GROUP_OF = {path: group for group, paths in XDIST_GROUPS.items() for path in paths}

# Handed out first, longest first (module or group; seconds from the durations of
# bench/results/2026-11-28_s16/suite_speed.md): xdist's own order (most tests first) left the few-test,
# long modules for the end, where one worker ran them while the other had nothing left. A module
# not named here keeps xdist's order after these; a renamed one only loses its place.
SLOW_FIRST = (
    "seed-graph",
    "tests/integration/regraph_cli/test_running_stack.py",
    "tests/unit/bench/test_kernel_tasks.py",
    "ray-cluster",
    "tests/integration/executor/test_executor_prewarm.py",
    "tests/unit/search/test_relabel_precision.py",
    "tests/integration/graphdb/test_embedded_server.py",
    "tests/integration/search/test_packaged_model.py",
    "tests/integration/mcp/test_mcp_stdio.py",
    "tests/integration/api/test_cypher_security.py",
    "tests/e2e/test_workspace.py",
    # Session 27: modules of 10-40 s that xdist's order (most tests first) left to the end, where one
    # of them could keep one worker busy while the other had nothing left (seconds from one process,
    # `--durations=0`, summed per module). Not test_executor_fair_slots.py (40 s): its quick compile must
    # finish in 8 s beside two thrust compiles, which the run's first minutes (Neo4j's start, the
    # embedder's load on the other worker) did not leave it on this 2-core machine (session 27).
    "tests/integration/api/test_neo4j_liveness.py",
    "tests/integration/api/test_optimize_hacks.py",  # 31 s
    "tests/integration/api/test_cypher_answers.py",  # 20 s
    "tests/integration/executor/test_clock_attack.py",  # 16 s
    "tests/integration/api/test_health_under_load.py",  # 14 s
    "tests/integration/api/test_api_fuzz.py",  # 14 s
    "tests/e2e/test_cypher_console_limits.py",  # 12 s
    "tests/integration/executor/test_post_release_allowance_host.py",  # 11 s
)

CLEAR_GRAPH = (
    "MATCH (n) WHERE NOT n:SchemaMigration CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 5000 ROWS"
)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: unknown without the plugin
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist loadgroup`: a whole module (or group of XDIST_GROUPS) per worker at a time.

    xdist's own loadgroup reads `xdist_group` marks by rewriting node ids, which pytest 9's node ids
    no longer allow; its module-scope scheduler is used instead, with the groups as scopes.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):  # type: ignore[misc,unused-ignore]  # xdist is untyped
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return _GROUP_OF.get(module, module)

        def _assign_work_unit(self, node: object) -> None:
            # The next unit handed out is the first of SLOW_FIRST still waiting, else xdist's next.
            # Only the queue's order changes: a unit still names its tests by the worker's own
            # collection (reordering the collections would send the workers the wrong indexes).
            for scope in SLOW_FIRST:
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope, last=False)
                    break
            super()._assign_work_unit(node)

    return ModuleGroups(config, log)


def graph_server_options(data_dir: Path) -> GraphServerOptions:
    """Options for a test server: the embedded one, unless the run points at an external Neo4j."""
    from graphdb.connection import GraphServerOptions
    from graphdb.embedded import free_port

    return GraphServerOptions(
        uri=os.environ.get("REGRAPH_TEST_NEO4J_URI"),
        user=os.environ.get("REGRAPH_TEST_NEO4J_USER", "neo4j"),
        password=os.environ.get("REGRAPH_TEST_NEO4J_PASSWORD"),
        database="neo4j",
        data_dir=data_dir,
        embedded_port=free_port(),
        embedded_heap_mb=1024,
        embedded_pagecache_mb=128,
    )


def _will_embed(session: pytest.Session) -> bool:
    """Whether a test of this session's collection takes the real embedder (a whole-suite run does)."""
    return any("embedder" in getattr(item, "fixturenames", ()) for item in session.items)


@pytest.fixture(scope="session")
def open_test_graph(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OpenGraph]:
    """The session's Neo4j server, started once and migrated to the latest schema, with its driver.

    When the session will embed, the embedding model (~5 CPU seconds of imports) starts loading in a
    thread first, as the API does at its start-up: it loads while this worker waits for the JVM, not
    after it (the seed-graph setup took 13-23 s with, 18-25 s without, session 27).
    """
    from graphdb.connection import open_graph

    if _will_embed(request.session):
        from search.embeddings import shared_embedder

        shared_embedder(background=True)
    with open_graph(graph_server_options(tmp_path_factory.mktemp("neo4j-session"))) as graph:
        yield graph


@pytest.fixture(scope="session")
def neo4j_target(open_test_graph: OpenGraph) -> Neo4jTarget:
    return open_test_graph.target


@pytest.fixture(scope="session")
def neo4j_driver(open_test_graph: OpenGraph) -> Driver:
    return open_test_graph.driver


@pytest.fixture()
def clean_graph(neo4j_driver: Driver, neo4j_target: Neo4jTarget) -> Driver:
    """The session driver over a graph emptied of everything but the schema bookkeeping."""
    with neo4j_driver.session(database=neo4j_target.database) as session:
        session.run(CLEAR_GRAPH).consume()
    return neo4j_driver


@pytest.fixture(autouse=True)
def _sse_streams_not_drained_by_an_earlier_test() -> Iterator[None]:
    """A test that stops a uvicorn server through its signal path (`Server.handle_exit`, as
    tests/unit/executor/test_executor_server_signal.py and the fleet's stop test do) also sets
    sse-starlette's process-wide `AppStatus.should_exit` (its patch of `handle_exit`), which nothing
    resets: every server-sent-event answer later in that pytest process, the MCP transport's among
    them, then ends at once without its body (CI of 2026-11-30: two MCP tests failed when they ran on
    the same xdist worker after the fleet's stop test). In a real process the signal ends the process;
    here the flag is put back after each test."""
    yield
    sse = sys.modules.get("sse_starlette.sse")
    if sse is not None and sse.AppStatus.should_exit:
        sse.AppStatus.should_exit = False
