"""Shared test stand-ins (only for things we cannot run in tests, such as an LLM)."""
