"""The examples' logic: list and read examples, review them (approve, reject, delete, split) and the
review queue's page.

No FastAPI here. It asks the store for its `ExampleStore` only; errors are `api.graph.errors`'.
"""

from __future__ import annotations

from api.examples.models import ExampleList, ExamplePublic, ReviewRequest, SplitRequest
from api.graph.errors import (
    GraphUnavailableError,
    InvalidApiKeyError,
    InvalidGraphRequestError,
    translated,
)
from graphdb.errors import ApiKeyNotFoundError, StoreUnavailableError
from graphdb.models import (
    ExampleSummary,
    ReviewQueueFilter,
    ReviewQueuePage,
    ReviewStatus,
    transition_key,
)
from graphdb.store import ExampleStore


class ExampleService:
    """The examples on the transitions and their review, over an `ExampleStore`."""

    def __init__(self, store: ExampleStore) -> None:
        """Serve `store`."""
        self.store = store

    def list_examples(
        self,
        *,
        source: str | None,
        target: str | None,
        status: ReviewStatus | None,
        limit: int,
        offset: int,
    ) -> ExampleList:
        """Examples of one transition (both ends, optionally a status), or every example in a status."""
        if (source is None) != (target is None) or (source is None and status is None):
            raise InvalidGraphRequestError(
                "list the examples of one transition (source and target) or those in one review status"
            )
        with translated():
            if source is not None and target is not None:
                # An unknown transition is a 404, not an empty page: the caller named something wrong.
                self.store.get_transition(source, target)
            items = self.store.list_examples(
                source=source, target=target, status=status, limit=limit, offset=offset
            )
        return ExampleList(items=[ExamplePublic.of(e) for e in items], limit=limit, offset=offset)

    def list_example_summaries(
        self, *, status: ReviewStatus, limit: int, offset: int
    ) -> list[ExampleSummary]:
        """Examples in one review status, oldest first, without code or reasoning (for lists)."""
        with translated():
            return self.store.list_example_summaries(status=status, limit=limit, offset=offset)

    def review_queue_page(
        self, token: str, *, limit: int, selected: str | None, only: ReviewQueueFilter
    ) -> ReviewQueuePage:
        """The review queue for the holder of `token`, its key checked in the same read."""
        try:
            return self.store.review_queue_page(token, limit=limit, selected=selected, only=only)
        except ApiKeyNotFoundError as e:
            raise InvalidApiKeyError(str(e)) from e
        except StoreUnavailableError as e:
            raise GraphUnavailableError(str(e)) from e

    def get_example(self, example_id: str) -> ExamplePublic:
        """One example."""
        with translated():
            return ExamplePublic.of(self.store.get_example(example_id))

    def review_example(self, example_id: str, request: ReviewRequest, *, actor: str) -> ExamplePublic:
        """Approve or reject an example."""
        status = ReviewStatus.APPROVED if request.decision == "approve" else ReviewStatus.REJECTED
        with translated():
            example = self.store.set_review_status(example_id, status, actor=actor, reason=request.reason)
        return ExamplePublic.of(example)

    def delete_example(self, example_id: str, *, actor: str) -> None:
        """Delete an example (its transition goes too when it was the last one)."""
        with translated():
            self.store.delete_example(example_id, actor=actor)

    def split_example(self, example_id: str, request: SplitRequest, *, actor: str) -> ExamplePublic:
        """Move a mislabeled example to another transition."""
        with translated():
            current = self.store.get_example(example_id)
            source = request.source if request.source is not None else current.source
            if transition_key(source, request.target) == current.transition_key:
                raise InvalidGraphRequestError(
                    f"example {example_id} is already on {current.transition_key!r}"
                )
            return ExamplePublic.of(
                self.store.move_example(example_id, source=source, target=request.target, actor=actor)
            )
