"""A function candidate's GPU turn ends when its GPU work does (setting ``release_gpu_early``, issue 33's
cost): its worker says so once the trials are over (device synchronised, outputs on the host), the
evaluator ends the turn while holding the device's locks shared for that worker until it is gone, and
the host checks after the trials (every copy's ``in`` arrays, the last calls' outputs, the spot checks)
run outside the turn, with the same verdicts. In the test-only ``host`` runtime: real worker processes,
candidates compiled by the real nvcc and run on the CPU."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from executor.errors import EvaluationCancelled
from executor.evaluate import Evaluator
from executor.gpulock import held_elsewhere, hold, hold_now
from executor.protocol import CandidateSource
from executor.settings import ExecutorSettings
from executor.taskformat import FunctionTask, KernelTask, load_task
from executor.verdict import ErrorKind, Verdict
from executor.worker.runner import SEAL_ENV
from tests.support.buildcache import sharing_builds
from tests.support.hostcode import (
    FIVE_CHECKED,
    FIXTURE_TASKS,
    SAXPY_HEAD,
    STUB,
    use_candidate_process,
    use_worker_process,
)

HEAD = SAXPY_HEAD
BODY = "for (int i = 0; i < n; ++i) y[i] = a * x[i] + y[i];\n"
HONEST = HEAD + BODY + "}" + STUB
OPTIONS = FIVE_CHECKED
CHECKED_CALLS = 5  # what the correctness calls and the warm-up make; the timed calls come after
# Right on every call, but from the first timed call on it also changes its const input: caught by the
# check of the copies after the trials, which now runs outside the turn.
MUTATES_WHEN_TIMED = (
    "static int calls = 0;\n"
    + HEAD
    + BODY
    + f"if (++calls > {CHECKED_CALLS}) const_cast<float*>(x)[0] += 1.0f;\n}}"
    + STUB
)
# Right on the checked calls, wrong on every timed one: caught by the last calls' check after the trials.
WRONG_WHEN_TIMED = (
    "static int calls = 0;\n" + HEAD + BODY + f"if (++calls > {CHECKED_CALLS}) y[n / 2] += 1.0f;\n}}" + STUB
)


@pytest.fixture(scope="module")
def saxpy() -> FunctionTask | KernelTask:
    return load_task(FIXTURE_TASKS / "saxpy")


def _evaluator(cache: Path, early: bool) -> Evaluator:
    return Evaluator(
        ExecutorSettings(cache_dir=cache, runtime="host", run_timeout_s=60, release_gpu_early=early)
    )


@pytest.fixture(scope="module")
def evaluator(tmp_path_factory: pytest.TempPathFactory, shared_builds: Path) -> Iterator[Evaluator]:
    # The run's builds (tests.support.buildcache): the honest candidate and the one that changes its
    # input are built once for this module's three evaluators; nothing here examines building.
    built = _evaluator(sharing_builds(tmp_path_factory.mktemp("release-cache"), shared_builds), early=True)
    yield built
    built.close()


def _evaluate_watched(
    evaluator: Evaluator, task: FunctionTask | KernelTask, source: str
) -> tuple[Verdict, float]:
    """The verdict, and how long the candidates' GPU turns were held meanwhile, by the turns' own count."""
    before = evaluator.turns.usage()["held_s"]
    verdict = evaluator.evaluate(task, CandidateSource(source=source), OPTIONS)
    after = evaluator.turns.usage()["held_s"]
    assert isinstance(before, dict) and isinstance(after, dict)
    return verdict, after["candidate"] - before["candidate"]


def test_the_turn_ends_before_the_host_checks(evaluator: Evaluator, saxpy: FunctionTask | KernelTask) -> None:
    """(a) The honest candidate passes; its turn ends before its run does (the turn is taken before the
    hand-over, so a turn held to the outcome is at least the run), the host checks after the trials
    run in the rest (``after_release``)."""
    verdict, held = _evaluate_watched(evaluator, saxpy, HONEST)
    assert verdict.passed, verdict.message
    seconds = verdict.seconds
    assert "release_refused" not in seconds, str(seconds)
    # The turn ended at the release (the turns' own count is the evaluator's ``gpu_held``, not the run
    # to its outcome), and before the outcome came (``after_release``). No bound against ``run`` (the
    # hand-over to the outcome): the evaluator's work around it in the turn is load's to stretch
    # (``held <= run - after_release + 0.02`` failed at load 20 by 17 to 100 ms, without a fault).
    assert abs(held - seconds["gpu_held"]) < 0.02, (held, str(seconds))
    assert seconds["after_release"] > 0, str(seconds)
    # The checks that follow the trials ran in the worker after it released the GPU: their time is in
    # the part of the run after the turn (the note is read within milliseconds).
    checks = seconds["input_check"] + seconds["last_check"]
    assert checks > 0 and seconds["after_release"] + 0.05 >= checks, str(seconds)
    assert not evaluator.turns.locked()


def test_the_release_waits_out_requests_passing_the_turnstiles(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    """Requests that pass the uploads lock's turnstile one after another (9 ms in, 1 ms out, as
    prepared workers' upload chunks and spares' context creations do right after a run lets its locks
    go) do not keep a released worker's turn: the evaluator's hold for it tries again within its bound
    (session 32; seen failing with one try, as before: ``release_refused``, the checks under the turn)."""
    import fcntl

    from executor.gpulock import lock_path, open_lock, turnstile_path

    stop = threading.Event()

    def pass_again_and_again() -> None:
        with open_lock(turnstile_path(lock_path(evaluator.pool.gpu_lock, "uploads"))) as turnstile:
            while not stop.is_set():
                fcntl.flock(turnstile, fcntl.LOCK_EX)
                time.sleep(0.009)
                fcntl.flock(turnstile, fcntl.LOCK_UN)
                time.sleep(0.001)

    passers = threading.Thread(target=pass_again_and_again, daemon=True)
    passers.start()
    try:
        verdict = evaluator.evaluate(saxpy, CandidateSource(source=HONEST + "// passers\n"), OPTIONS)
    finally:
        stop.set()
        passers.join(timeout=5.0)
    assert verdict.passed, verdict.message
    assert "release_refused" not in verdict.seconds, str(verdict.seconds)
    assert verdict.seconds.get("after_release", 0.0) > 0, str(verdict.seconds)


def test_the_wait_watches_its_worker_between_the_tries_for_the_locks(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The evaluator's tries for the device's locks at the release run in the worker's wait loop, one
    tick at most per call (review 33 F8): here every try is refused (the test holds the uploads lock's
    turnstile from the trials on) and the tries may go on for 30 s (RELEASE_TRY_S), yet the wait sees
    the worker's result between two of them and the evaluation ends as it would have, not 30 s later
    (seen failing with the tries made in one call: it took the 30 s)."""
    import fcntl

    from executor import evaluate as evaluate_module
    from executor.gpulock import lock_path, open_lock, turnstile_path

    monkeypatch.setattr(evaluate_module, "RELEASE_TRY_S", 30.0)
    stop, held = threading.Event(), threading.Event()
    lock = evaluator.pool.gpu_lock

    def hold_the_turnstile_from_the_trials_on() -> None:
        while not held_elsewhere(lock, "uploads"):  # the trials hold the uploads' lock alone
            if stop.wait(0.001):
                return
        with open_lock(turnstile_path(lock_path(lock, "uploads"))) as turnstile:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            held.set()
            stop.wait(120.0)

    holder = threading.Thread(target=hold_the_turnstile_from_the_trials_on, daemon=True)
    holder.start()
    began = time.monotonic()
    try:
        verdict = evaluator.evaluate(saxpy, CandidateSource(source=HONEST + "// refused\n"), OPTIONS)
    finally:
        took = time.monotonic() - began
        stop.set()
        holder.join(timeout=5.0)
    assert held.is_set(), "the trials were never seen holding the uploads' lock"
    assert verdict.passed, verdict.message
    seconds = verdict.seconds
    assert seconds.get("release_hold_wait", 0.0) > 0 and "after_release" not in seconds, str(seconds)
    assert "release_refused" not in seconds, str(seconds)  # the result came before the 30 s were up
    assert took < 20.0, (took, str(seconds))


def test_without_the_setting_every_check_is_under_the_turn(
    saxpy: FunctionTask | KernelTask, tmp_path: Path, shared_builds: Path
) -> None:
    built = _evaluator(sharing_builds(tmp_path / "cache", shared_builds), early=False)
    try:
        verdict = built.evaluate(saxpy, CandidateSource(source=HONEST), OPTIONS)
    finally:
        built.close()
    assert verdict.passed, verdict.message
    assert (
        "after_release" not in verdict.seconds
        and verdict.seconds["gpu_held"] >= verdict.seconds["input_check"]
    )
    # Review 24a, LOW 6: the worker as before too: no note (``release``), no lock of its own for the
    # checks after the trials (``checks_lock_wait``): they run under the trials' locks.
    assert "release" not in verdict.seconds and "checks_lock_wait" not in verdict.seconds, str(
        verdict.seconds
    )


@pytest.mark.parametrize(
    ("source", "says"),
    [
        (MUTATES_WHEN_TIMED, "changed its input 'x'"),
        (WRONG_WHEN_TIMED, "differ from the reference"),
    ],
    ids=["const_input_changed_when_timed", "wrong_when_timed"],
)
def test_a_candidate_caught_by_the_checks_after_the_turn_is_still_refused(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask, source: str, says: str
) -> None:
    """(b) Caught only by the host checks after the trials: refused at the timing stage as before, the
    worker released the GPU before those checks ran."""
    verdict = evaluator.evaluate(saxpy, CandidateSource(source=source), OPTIONS)
    assert not verdict.passed and verdict.error is ErrorKind.WRONG_OUTPUT, verdict.message
    assert verdict.stage.value == "timing" and says in verdict.message, verdict.message
    # The turn's end is (a)'s to show; here only that the checks ran after the release and still refused.
    _released_before_its_checks(verdict.seconds)


def _released_before_its_checks(seconds: dict[str, float]) -> None:
    """The worker released the GPU (its note, ``release``) before the checks that refused it. The turn
    ended then unless its outcome was there before the evaluator read the note: these checks fail
    within milliseconds, and at load 20 the outcome came first in 2 runs of 3 (no ``after_release``;
    the turn then ends with the run, as without the setting: ``WorkerProcess.wait``'s ``on_release``)."""
    assert "release" in seconds and "release_refused" not in seconds, str(seconds)
    assert seconds.get("after_release", 1.0) > 0, str(seconds)


def test_the_evaluators_hold_never_waits_for_an_exclusive_holder(tmp_path: Path) -> None:
    """``hold_now`` takes the locks shared at once or not at all: the evaluator's wait loop must not
    block on what a worker (a candidate's, say) holds alone."""
    lock = tmp_path / "gpu.lock"
    lock.touch()
    with hold(lock, "exclusive", "uploads"):
        assert hold_now(lock, ("gpu", "uploads")) is None
        with hold(lock, "exclusive"):  # the GPU's lock was let go when the uploads' could not be had
            pass
    held = hold_now(lock, ("gpu", "uploads"))
    assert held is not None
    with hold(lock, "shared"):  # shared holders go on beside it
        pass
    held.close()
    with hold(lock, "exclusive"):
        pass


def test_with_the_candidate_process_the_turn_ends_once_it_is_stopped(
    saxpy: FunctionTask | KernelTask, tmp_path: Path, shared_builds: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the candidate in a process of its own, that process is stopped before the release (its
    runtime's ``calls_done``): the turn ends, and the checks after it still refuse a const-input change.
    The runner's const inputs unsealed (as on a kernel older than 5.1): sealed, the change is refused
    at once, the runner dead from SIGSEGV (tests/integration/executor/test_const_input_seal.py)."""
    use_candidate_process(monkeypatch)
    monkeypatch.setenv(SEAL_ENV, "0")
    built = _evaluator(sharing_builds(tmp_path / "cache", shared_builds), early=True)
    try:
        honest, held = _evaluate_watched(built, saxpy, HONEST)
        assert honest.passed, honest.message
        seconds = honest.seconds
        assert seconds["after_release"] > 0, str(seconds)
        assert abs(held - seconds["gpu_held"]) < 0.02, (held, str(seconds))  # no bound on ``run``: (a)
        mutates, _ = _evaluate_watched(built, saxpy, MUTATES_WHEN_TIMED)
    finally:
        built.close()
    assert not mutates.passed and mutates.error is ErrorKind.WRONG_OUTPUT, mutates.message
    assert "changed its input 'x'" in mutates.message, mutates.message
    _released_before_its_checks(mutates.seconds)


def test_a_function_run_waits_for_another_gpus_trials_before_its_turn(evaluator: Evaluator) -> None:
    """``host_gate_before_turn``: while another process holds the host memory's lock alone (another
    GPU's function trials), a function run waits before it asks for its turn, which stays free."""
    seconds: dict[str, float] = {}
    with _trials_elsewhere(evaluator) as let_go:
        gate = threading.Thread(target=evaluator.pass_host_gate, args=(seconds,), daemon=True)
        gate.start()
        time.sleep(0.3)
        assert gate.is_alive() and not evaluator.turns.locked()  # waiting, and not in a turn
        let_go.set()
        gate.join(10)
    assert not gate.is_alive() and seconds["host_gate_wait"] >= 0.3, seconds


@contextlib.contextmanager
def _trials_elsewhere(evaluator: Evaluator) -> Iterator[threading.Event]:
    """Another GPU's function trials: a thread holds the host memory's lock alone until the yielded
    event is set (or the block ends)."""
    holding, let_go = threading.Event(), threading.Event()

    def trials() -> None:
        with hold(evaluator.pool.gpu_lock, "exclusive", "host"):
            holding.set()
            let_go.wait(10)

    other = threading.Thread(target=trials, daemon=True)
    other.start()
    try:
        assert holding.wait(10)
        yield let_go
    finally:
        let_go.set()
        other.join(10)


def test_while_the_released_worker_checks_the_devices_locks_stay_held_for_it(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    """After the turn ends, the evaluator holds the device's GPU lock for the worker (no other run's
    trials begin beside it): sampled while the evaluation is in flight, the turn free and the lock held
    are seen together. Up to three evaluations: the released phase lasts the honest checks' 40-170 ms,
    and at load 16-18 two module runs in six had one evaluation with no sample in it, or with no such
    phase (its outcome read before the note: no ``after_release``, the turn held to the end); with the
    lock let go with the turn, no evaluation can show the pair."""
    tried = []
    for attempt in range(3):
        samples, seconds = _sampled_evaluation(evaluator, saxpy, f"\n// watched {attempt}\n")
        turn_seen = next((i for i, (free, _) in enumerate(samples) if not free), len(samples))
        if "after_release" in seconds and any(free and held for free, held in samples[turn_seen:]):
            return
        tried.append((len(samples) - turn_seen, seconds.get("after_release")))
    raise AssertionError(
        f"the lock was let go with the turn (samples after the turn, after_release): {tried}"
    )


def _sampled_evaluation(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask, mark: str
) -> tuple[list[tuple[bool, bool]], dict[str, float]]:
    """An honest evaluation, sampled every half millisecond meanwhile (the turn free; the GPU lock held);
    the samples and the verdict's seconds."""
    samples: list[tuple[bool, bool]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            free = not evaluator.turns.locked()
            samples.append((free, held_elsewhere(evaluator.pool.gpu_lock, "gpu")))
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    verdict = evaluator.evaluate(saxpy, CandidateSource(source=HONEST + mark), OPTIONS)
    done.set()
    watcher.join(timeout=5)
    assert verdict.passed, verdict.message
    return samples, verdict.seconds


# Review 24a's attack: a POSIX timer (no thread, no handler) whose signal is SIGSTOP, armed again on every
# timing-size call to fire just after the last one, so that it stops the worker once its turn is released.
STOPS_AFTER_RELEASE = (
    "#include <time.h>\n"
    "struct stop_event { void* value; int signo; int notify; int pad[12]; };\n"
    "static timer_t timer; static int armed = 0, streak = 0; static double last = -1, widest = 0;\n"
    "static double now_ms() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t);"
    " return t.tv_sec * 1e3 + t.tv_nsec / 1e6; }\n"
    + HEAD
    + "if (!armed) { stop_event ev = {}; ev.signo = 19;"
    " timer_create(CLOCK_MONOTONIC, (struct sigevent*)&ev, &timer); armed = 1; }\n"
    "itimerspec off = {}; timer_settime(timer, 0, &off, 0);\n"
    "double start = now_ms(); double gap = last > 0 ? start - last : 1e9;\n"
    "if (n >= 1000000) ++streak;\n"
    "if (streak >= 4 && gap > widest) widest = gap;\n" + BODY + "last = now_ms();\n"
    "if (streak >= 4) { itimerspec on = {}; double d = 3 * widest + 5; if (d > 200) d = 200;"
    " on.it_value.tv_nsec = (long)(d * 1e6); timer_settime(timer, 0, &on, 0); }\n}" + STUB
)


def test_a_worker_that_stops_itself_never_costs_the_next_run_its_limit(
    saxpy: FunctionTask | KernelTask, tmp_path: Path
) -> None:
    """Review 24a, HIGH 1: a candidate whose worker stops itself after its trials (a SIGSTOP timer) is
    refused at once; the honest run that gets the turn next is not killed by its run limit while the
    stopped worker lives (before: ``timeout`` after its 5 s limit, the attacker's limit being 17 s)."""
    settings = ExecutorSettings(
        cache_dir=tmp_path / "cache",
        runtime="host",
        run_timeout_s=60,
        prepare_next=False,
        prewarm_workers=False,
    )
    evaluator = Evaluator(settings)
    try:
        _stopping_attacker_then_honest(evaluator, saxpy)
    finally:
        evaluator.close()


def _stopping_attacker_then_honest(evaluator: Evaluator, saxpy: FunctionTask | KernelTask) -> None:
    warm = evaluator.evaluate(saxpy, CandidateSource(source=HONEST + "\n// warm\n"), OPTIONS)
    assert warm.passed, warm.message
    out: dict[str, Verdict] = {}

    def attacker() -> None:
        attack = OPTIONS.model_copy(update={"parent_ms": 300.0})  # a long run limit of its own
        out["attacker"] = evaluator.evaluate(saxpy, CandidateSource(source=STOPS_AFTER_RELEASE), attack)

    def honest() -> None:
        turns = evaluator.turns.usage()["turns"]
        assert isinstance(turns, dict)
        taken = turns["candidate"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the attacker's turn taken: this run comes next
            now = evaluator.turns.usage()["turns"]
            assert isinstance(now, dict)
            if now["candidate"] != taken:
                break
            time.sleep(0.001)
        out["honest"] = evaluator.evaluate(saxpy, CandidateSource(source=HONEST + "\n// next\n"), OPTIONS)

    started = time.monotonic()
    runs = [threading.Thread(target=attacker, daemon=True), threading.Thread(target=honest, daemon=True)]
    for run in runs:
        run.start()
    for run in runs:
        run.join(60)
    assert out["honest"].passed, (out["honest"].message, str(out["honest"].seconds))
    attacker_verdict = out["attacker"]
    # Its answers are right: when its worker is gone before the timer fires (seen 1 run in 12 under
    # load), it passes at honest speed and stopped nothing. When the timer fires, it is refused.
    if not attacker_verdict.passed:
        assert attacker_verdict.error in (ErrorKind.CRASH, ErrorKind.TIMEOUT), attacker_verdict.message
    assert time.monotonic() - started < 15, (attacker_verdict.message, str(attacker_verdict.seconds))


# Right on every call, and it makes a POSIX timer that signals nothing (SIGEV_NONE) on its first call.
MAKES_A_TIMER = (
    "#include <time.h>\n"
    "struct none_event { void* value; int signo; int notify; int pad[12]; };\n"
    "static int made = 0; static timer_t timer;\n" + HEAD + "if (!made) { none_event ev = {}; ev.notify = 1;"
    " timer_create(CLOCK_MONOTONIC, (struct sigevent*)&ev, &timer); made = 1; }\n" + BODY + "}" + STUB
)


def test_a_timer_made_by_the_candidate_keeps_the_turn(
    saxpy: FunctionTask | KernelTask, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 24a, HIGH 1 (c): a POSIX timer made since the load could run the candidate's will after
    the release (a SIGSTOP, say): the release is refused, the checks run under the turn, the verdict
    as before. (An evaluator of its own: the module's may hold spare workers started with the candidate
    process on, whose timer goes with that process before the release.)"""
    use_worker_process(monkeypatch)  # the timer made in the worker's own process
    built = _evaluator(tmp_path / "cache", early=True)
    try:
        verdict, _held = _evaluate_watched(built, saxpy, MAKES_A_TIMER)
    finally:
        built.close()
    assert verdict.passed, verdict.message
    seconds = verdict.seconds
    assert seconds.get("release_refused") == 1.0 and seconds.get("release_new_timers") == 1.0, str(seconds)
    assert "after_release" not in seconds, str(seconds)


def test_a_run_is_not_charged_for_the_hold_for_a_released_worker(
    evaluator: Evaluator, saxpy: FunctionTask | KernelTask
) -> None:
    """Review 24a, HIGH 1 (b): while the evaluator holds the device's GPU lock for a released worker
    (here: held, and counted as such, for 8 s), the next run's trials wait for it; that wait moves its
    run limit's end on (``released_hold_credit``) instead of killing it (before: ``timeout`` after its
    5 s limit)."""
    holding, let_go = threading.Event(), threading.Event()

    def released_worker() -> None:
        with hold(evaluator.pool.gpu_lock, "shared"), evaluator._released_holds.held():
            holding.set()
            let_go.wait(8)

    other = threading.Thread(target=released_worker, daemon=True)
    other.start()
    assert holding.wait(10)
    try:
        # No confirming calls: their fresh runners' allowance (session 40) would lift the run limit past
        # the 8-s hold this test needs it to be shorter than.
        no_confirm = OPTIONS.model_copy(update={"repeat_confirm": False})
        verdict = evaluator.evaluate(saxpy, CandidateSource(source=HONEST + "\n// held\n"), no_confirm)
    finally:
        let_go.set()
        other.join(10)
    assert verdict.run_limit is not None and verdict.run_limit.seconds < 8, str(verdict.run_limit)
    assert verdict.passed, (verdict.message, str(verdict.seconds))
    assert verdict.seconds["released_hold_credit"] > verdict.seconds["run"] - verdict.run_limit.seconds


def test_the_pass_before_the_turn_can_be_cancelled_and_gives_up(tmp_path: Path) -> None:
    """Review 24a, MEDIUM 2: while another process holds the host memory's lock alone, the pass before
    a function run's turn ends when the evaluation is cancelled, and gives up after ``run_timeout_s``
    (then the run goes on without it); before, it waited as long as the lock was held."""
    settings = ExecutorSettings(
        cache_dir=tmp_path / "cache",
        runtime="host",
        run_timeout_s=1.0,
        prepare_next=False,
        prewarm_workers=False,
    )
    built = Evaluator(settings)
    try:
        with _trials_elsewhere(built):
            seconds: dict[str, float] = {}
            started = time.monotonic()
            built.pass_host_gate(seconds)
            assert time.monotonic() - started < 4 and seconds["host_gate_gave_up"] == 1.0, seconds
            cancelled = threading.Event()
            threading.Timer(0.2, cancelled.set).start()
            started = time.monotonic()
            with pytest.raises(EvaluationCancelled):
                built.pass_host_gate({}, cancelled)
            assert time.monotonic() - started < 0.9
    finally:
        built.close()


def test_the_hold_for_a_released_worker_is_let_go_when_no_thread_starts(
    evaluator: Evaluator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review 24a, LOW 4: when the thread that waits for a released worker cannot start, the worker is
    stopped and the evaluator's hold let go at once (before: the error came out and the lock stayed
    held)."""
    worker = evaluator.pool.take("candidate")
    held = hold_now(evaluator.pool.gpu_lock, ("gpu",))
    assert held is not None

    def no_thread(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    try:
        with monkeypatch.context() as patched:
            patched.setattr(threading.Thread, "start", no_thread)
            Evaluator._let_go_when_gone(worker, held)
        assert not held_elsewhere(evaluator.pool.gpu_lock, "gpu")
    finally:
        held.close()
        worker.close()
