"""Transfer: the whole graph exported and imported."""
