"""Diagnostics of the executor on a GPU host: what its timing depends on, and a cross-check of its build.

Not used by the service. Each module runs on its own on a GPU host:

* ``python -m executor.diagnostics.warmup_trace``: a kernel's trial times from a cold start, in the
  executor's own batches (what the kernel warm-up waits for);
* ``python -m executor.diagnostics.clock_ramp``: the SM clock under load after an idle spell (NVML);
* :mod:`executor.diagnostics.load_inline`: a candidate built through torch's ``load_inline``
  (KernelBench's route) and checked by the executor's rule, run by ``bench.probes.executor_bench --load-inline``.

Their pure parts (tables, windows, the launcher's source) are tested on any machine.
"""
