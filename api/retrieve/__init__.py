"""Retrieval: the techniques to try next and the examples closest to a code."""
