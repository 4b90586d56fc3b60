"""Health: liveness and readiness."""
