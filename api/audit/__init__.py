"""Audit: who changed what and when, and the undo of a change."""
