"""The optimize endpoint: wire models and the job runner."""
