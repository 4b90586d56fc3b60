"""ReGraph's optimization engine: model backends, the step policy, Monte Carlo Graph Search and baselines.

Import from the submodules (`search.baselines.optimize`, `search.mcgs.MCGSConfig`, ...); this package
file stays light so that importing one part never loads another helper's heavy dependencies.
"""
