"""Re-exports for the /ui pages not yet moved (issue 30); removed once they import the new homes."""

from api.deps import RelabelServiceDep

__all__ = [
    "RelabelServiceDep",
]
