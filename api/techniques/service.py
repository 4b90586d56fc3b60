"""The techniques' logic: list, create, edit and merge techniques, and the graph view of transitions.

No FastAPI here. It asks the store for its `TechniqueStore` only; errors are `api.graph.errors`'
(free-text technique search ranks, so it is retrieval's: `api.retrieve.service`).
"""

from __future__ import annotations

from api.examples.models import ExamplePublic
from api.graph.errors import GraphConflictError, InvalidGraphRequestError, translated
from api.techniques.models import (
    MergeRequest,
    TechniqueCreate,
    TechniqueList,
    TechniquePublic,
    TechniqueUpdate,
    TransitionList,
    TransitionPublic,
)
from graphdb.models import Technique, TechniqueLinks, utc_now
from graphdb.store import TechniqueStore
from search.embeddings import Embedder, technique_text
from search.protocols import INITIAL_TECHNIQUE


def _refuse_initial(name: str, what: str) -> None:
    # The search starts every path at this node by name; renaming or merging it would orphan the graph.
    if name == INITIAL_TECHNIQUE:
        raise InvalidGraphRequestError(f"the initial technique {INITIAL_TECHNIQUE!r} cannot be {what}")


class TechniqueService:
    """Techniques and the transitions between them, over a `TechniqueStore` and the embedding model."""

    def __init__(self, store: TechniqueStore, embedder: Embedder) -> None:
        """Serve `store`, embedding technique texts with `embedder`."""
        self.store = store
        self.embedder = embedder

    def _technique_vector(self, name: str, description: str) -> list[float]:
        with translated():
            return self.embedder.embed_one(technique_text(name, description))

    def list_techniques(self, limit: int, offset: int) -> TechniqueList:
        """A page of techniques by name."""
        with translated():
            items = self.store.list_techniques(limit=limit, offset=offset)
        return TechniqueList(items=[TechniquePublic.of(t) for t in items], limit=limit, offset=offset)

    def technique_names(self) -> list[str]:
        """Every technique's name, sorted (for pickers: nothing else is read)."""
        with translated():
            return self.store.technique_names()

    def get_technique(self, name: str) -> TechniquePublic:
        """One technique by exact name."""
        with translated():
            return TechniquePublic.of(self.store.get_technique(name))

    def create_technique(self, request: TechniqueCreate, *, actor: str) -> TechniquePublic:
        """Add a technique (embedded from "name: description")."""
        technique = Technique(
            name=request.name,
            description=request.description,
            aliases=request.aliases,
            embedding=self._technique_vector(request.name, request.description),
            created_at=utc_now(),
            created_by=actor,
        )
        with translated():
            return TechniquePublic.of(self.store.create_technique(technique, actor=actor))

    def update_technique(self, name: str, request: TechniqueUpdate, *, actor: str) -> TechniquePublic:
        """Rename and/or describe a technique; its embedding follows the new "name: description"."""
        with translated():
            current = self.store.get_technique(name)
            new_name = request.name if request.name is not None and request.name != name else None
            if new_name is not None:
                _refuse_initial(name, "renamed")
                # Checked before anything is written, so a clash leaves the description untouched too.
                clash = self.store.find_technique_by_label(new_name)
                if clash is not None and clash.name != name:
                    raise GraphConflictError(f"{new_name!r} already names or aliases {clash.name!r}")
            description = request.description if request.description is not None else current.description
            vector = self._technique_vector(new_name or name, description)
            if new_name is not None:
                self.store.rename_technique(name, new_name, actor=actor, embedding=vector)
            if request.description is not None and request.description != current.description:
                self.store.describe_technique(new_name or name, description, actor=actor, embedding=vector)
            return TechniquePublic.of(self.store.get_technique(new_name or name))

    def merge_techniques(self, request: MergeRequest, *, actor: str) -> TechniquePublic:
        """Fold one technique into another."""
        if request.source == request.into:
            raise InvalidGraphRequestError("cannot merge a technique into itself")
        _refuse_initial(request.source, "merged away")
        _refuse_initial(request.into, "merged into")
        with translated():
            return TechniquePublic.of(self.store.merge_techniques(request.source, request.into, actor=actor))

    # -- transitions: the graph view ------------------------------------------------------------------

    def list_transitions(
        self, *, source: str | None, target: str | None, limit: int, offset: int
    ) -> TransitionList:
        """A page of transitions, or the one transition source -> target when both ends are given."""
        if (source is None) != (target is None):
            raise InvalidGraphRequestError("give both source and target, or neither")
        with translated():
            if source is not None and target is not None:
                items = [self.store.get_transition(source, target)]
            else:
                items = self.store.list_transitions(limit=limit, offset=offset)
        return TransitionList(items=[TransitionPublic.of(t) for t in items], limit=limit, offset=offset)

    def best_examples_into(self, name: str, limit: int) -> list[ExamplePublic]:
        """The fastest verified examples of the transitions into a technique (a technique page)."""
        with translated():
            return [ExamplePublic.of(e) for e in self.store.best_examples_into(name, limit)]

    def busiest_transitions(self, limit: int) -> list[TransitionPublic]:
        """The transitions with the most examples (the graph view's edges)."""
        with translated():
            return [TransitionPublic.of(t) for t in self.store.busiest_transitions(limit)]

    def technique_links(self) -> dict[str, TechniqueLinks]:
        """Every technique's transitions out and in and the examples into it, by name."""
        with translated():
            return self.store.technique_links()

    def transitions_of(self, name: str) -> list[TransitionPublic]:
        """The transitions into and out of one technique (a technique page)."""
        with translated():
            return [TransitionPublic.of(t) for t in self.store.transitions_of(name)]
