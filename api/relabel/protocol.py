"""Old name of api/relabel/models.py. Re-exports for the modules not yet moved to the feature folders (issue 30); removed once they import the new homes."""

from api.relabel.models import (
    DuplicateList,
    DuplicateMerge,
    DuplicatePair,
    KeptSeparateList,
    KeptSeparatePublic,
    PairReview,
    QueueItemPublic,
    QueueList,
    QueueMerge,
    QueueResolution,
)

__all__ = [
    "DuplicateList",
    "DuplicateMerge",
    "DuplicatePair",
    "KeptSeparateList",
    "KeptSeparatePublic",
    "PairReview",
    "QueueItemPublic",
    "QueueList",
    "QueueMerge",
    "QueueResolution",
]
