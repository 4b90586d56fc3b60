"""One router per feature; each is thin and calls a service that knows nothing of HTTP."""
