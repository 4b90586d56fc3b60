"""Relabeling and graph construction: the step names of trajectories onto the graph's techniques.

The border to the MCGS core is this folder: the core (`search/` outside it) never imports it, and it is
the part of `search/` that writes the graph (`graphdb`). Its modules: `taxonomy` (the packaged technique
taxonomy), `evidence` (what a step's code change shows), `scoring` (the calibrated scorer and its
separation gate), `relabeler` (the decision rule, the relabel session, the likely-duplicate pairs),
`construction` (trajectories into the graph) and `teacher` (a teacher model's trajectories). Import from
the submodules; this file stays light.
"""
