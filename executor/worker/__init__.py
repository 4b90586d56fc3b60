"""The isolated worker: runs a candidate's runtime stages (or a task's reference) in its own process.

Started by :mod:`executor.sandbox` as ``python -m executor.worker serve ROLE RUNTIME`` in a new process
group (:mod:`executor.worker.process`). A worker does its start-up first (imports; for a GPU candidate
worker also the CUDA context and the L2-flush buffer), then reads job files named on its stdin, one job per process:

* role ``reference``: one line, a :class:`ReferenceJob`. It generates the evaluation's input sets, runs
  the task's serial reference on them, writes the expected outputs as ``.npy`` files, stores the
  task's timing set with its outputs when it is not stored yet (:mod:`executor.timingset`), times the
  reference when asked, writes a :class:`ReferenceOutcome` and exits.
* role ``candidate``: a first line names a :class:`WorkerJob` (task, seeds, options); the worker
  generates the same input sets while the candidate is still compiling, loads (or draws) the task's
  timing set and makes the rotated copies the trials run on (on the device, for kernel tasks). A
  second line names a :class:`CandidateRun` (the compiled product); the worker checks correctness,
  times, writes a :class:`WorkerOutcome` and exits. An empty line or end of input instead of the
  second line cancels.
* ``baseline candidate RUNTIME`` (not ``serve``): the same two lines, the second naming the task's naive
  baseline (``baseline_product``); it times that baseline and nothing else, in a process that never
  loads a candidate's code, and writes a :class:`BaselineOutcome` (:mod:`~executor.worker.baseline`).

Each candidate gets a fresh process, so a crash, hang, runaway allocation or sticky CUDA error costs
only that process; the parent turns its fate into a verdict. A call that hangs costs seconds: the
worker announces each candidate call with its limit (:mod:`executor.runlimit`), and the parent kills
it when the call runs past that limit. The expected outputs of an input set are
read from the reference's files only after the candidate has produced its own outputs for that set,
so the candidate never runs while the answer to its current inputs is in its process.

Two runtimes share the same flow:

* ``gpu``: pycuda with the device's primary context; function-task candidates are .so files called
  through ctypes on host pointers and timed one call at a time on the host clock (in a process of their
  own, a runner with its own context, when ``REGRAPH_EXECUTOR_CANDIDATE_PROCESS`` is on); kernel-task
  candidates are cubins launched here and timed with CUDA events, in batches of trials enqueued on a
  stream with one wait per batch.
* ``host``: function-task .so files called on the CPU (in a runner too, when it is on). No CUDA is involved; it exists to exercise the
  isolation and checking machinery on machines without a GPU, and is never used to pass a candidate
  in the service unless explicitly enabled.

The package's modules, one concern each:

* :mod:`~executor.worker.messages`: what parent and worker tell each other (jobs, outcomes, progress,
  the result file and the "done" pipe, on which each candidate call is also announced with its limit)
  and the input-set plan both derive from the seeds;
* :mod:`~executor.worker.process`: the process's start-up and entry point (``__main__``);
* :mod:`~executor.worker.reference` and :mod:`~executor.worker.candidate`: the two roles' flows, and
  :mod:`~executor.worker.baseline` the naive baseline's;
* :mod:`~executor.worker.runtime`: the interface of a runtime, the failure signal of a check and the
  announcement of each candidate call to the parent (:class:`~executor.worker.runtime.CallWatch`);
* :mod:`~executor.worker.host` and :mod:`~executor.worker.gpu`: the host and GPU runtimes;
* :mod:`~executor.worker.runner`: a function candidate's own process (``python -m executor.worker
  runner candidate RUNTIME``), which the candidate worker starts when the operator asks for it, hands
  each call's inputs and times from outside: the candidate's library is then never loaded by the
  worker that checks it.

The package imports none of its modules itself, so the parent's ``import executor.worker.messages``
loads neither pycuda nor the runtimes.
"""
