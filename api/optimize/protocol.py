"""Old name of api/optimize/models.py. Re-exports for the modules not yet moved to the feature folders (issue 30); removed once they import the new homes."""

from api.optimize.models import (
    JobEventPublic,
    JobPublic,
    OptimizeCreate,
    OptimizeResult,
)

__all__ = [
    "JobEventPublic",
    "JobPublic",
    "OptimizeCreate",
    "OptimizeResult",
]
