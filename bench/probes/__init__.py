"""Probes and tools beside the benchmark: one-off measurements of a service's behaviour (start-up,
liveness under load, hang cost, page times, throughput, engine overhead, ...) and checks of the
committed data, each run as ``python -m bench.probes.<name>``. The benchmark product itself (runner,
metrics, report, split, sweep, ParEval) is the ``bench`` package around this folder; no module of it
imports a probe."""
