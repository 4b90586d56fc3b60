"""Old home of the graph's wire models, now in api/<feature>/models.py. Re-exports for the modules not yet moved to the feature folders (issue 30); removed once they import the new homes."""

from api.audit.models import (
    AuditEntryPublic,
    AuditList,
)
from api.cypher.models import (
    CypherRequest,
    CypherResponse,
)
from api.examples.models import (
    ExampleList,
    ExamplePublic,
    ReviewRequest,
    ScoredExamplePublic,
    SplitRequest,
)
from api.keys.models import (
    ApiKeyCreate,
    ApiKeyCreated,
    ApiKeyPublic,
)
from api.relabel.models import (
    DecisionList,
    DecisionPublic,
)
from api.retrieve.models import (
    RetrieveRequest,
    RetrieveResponse,
    SuccessorPublic,
)
from api.techniques.models import (
    MergeRequest,
    TechniqueCreate,
    TechniqueHit,
    TechniqueList,
    TechniquePublic,
    TechniqueSearchResponse,
    TechniqueUpdate,
    TransitionList,
    TransitionPublic,
)
from api.transfer.models import (
    ImportSummary,
)

__all__ = [
    "ApiKeyCreate",
    "ApiKeyCreated",
    "ApiKeyPublic",
    "AuditEntryPublic",
    "AuditList",
    "CypherRequest",
    "CypherResponse",
    "DecisionList",
    "DecisionPublic",
    "ExampleList",
    "ExamplePublic",
    "ImportSummary",
    "MergeRequest",
    "RetrieveRequest",
    "RetrieveResponse",
    "ReviewRequest",
    "ScoredExamplePublic",
    "SplitRequest",
    "SuccessorPublic",
    "TechniqueCreate",
    "TechniqueHit",
    "TechniqueList",
    "TechniquePublic",
    "TechniqueSearchResponse",
    "TechniqueUpdate",
    "TransitionList",
    "TransitionPublic",
]
