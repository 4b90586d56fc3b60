"""Techniques: the graph's nodes and transitions (list, search, create, edit, merge, the graph view)."""
