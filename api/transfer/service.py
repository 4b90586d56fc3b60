"""The transfer's logic: the whole graph exported, and an export checked and imported into an empty graph.

No FastAPI here. It asks the store for its `TransferStore` only; errors are `api.graph.errors`'.
"""

from __future__ import annotations

import logging
from collections import Counter

from pydantic import ValidationError

from api.graph.errors import InvalidExportError, InvalidGraphRequestError, translated
from api.transfer.models import ImportSummary
from graphdb.models import GraphExport, check_name, transition_key
from graphdb.store import TransferStore

logger = logging.getLogger(__name__)


class TransferService:
    """The whole graph out and in, over a `TransferStore`."""

    def __init__(self, store: TransferStore) -> None:
        """Serve `store`."""
        self.store = store

    def counts(self) -> dict[str, int]:
        """How many records of each kind the graph holds (techniques, transitions, examples, ...)."""
        with translated():
            return self.store.counts()

    def export_graph(self) -> GraphExport:
        """The whole graph as one `regraph.graph/v1` document."""
        with translated():
            return self.store.export_graph()

    def import_graph(self, export: GraphExport, *, actor: str) -> ImportSummary:
        """Load an export into an empty graph, after checking that it is self-consistent. API keys in
        the file are never imported (the summary counts them); the import is in the audit log."""
        check_export(export)
        with translated():
            self.store.import_graph(export, actor=actor)
        logger.info("graph imported over the API", extra={"actor": actor, "examples": len(export.examples)})
        return ImportSummary(
            techniques=len(export.techniques),
            transitions=len(export.transitions),
            examples=len(export.examples),
            decisions=len(export.decisions),
            audit=len(export.audit),
            trajectories=len(export.trajectories),
            api_keys_ignored=len(export.api_keys),
        )

    def import_upload(self, raw: bytes, *, actor: str) -> ImportSummary:
        """Parse an uploaded export file and import it (`import_graph`); raises `InvalidExportError`
        for a file that is not an export."""
        return self.import_graph(parse_export(raw), actor=actor)


def parse_export(raw: bytes) -> GraphExport:
    """The export a file holds; raises `InvalidExportError` naming the first problems otherwise."""
    try:
        return GraphExport.model_validate_json(raw)
    except ValidationError as e:
        shown = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'file'}: {err['msg']}" for err in e.errors()[:5]
        )
        raise InvalidExportError(
            f"that file is not a regraph.graph/v1 export ({e.error_count()} problem(s)): {shown}"
        ) from e


def _duplicates(values: list[str]) -> list[str]:
    return sorted(v for v, n in Counter(values).items() if n > 1)


def check_export(export: GraphExport) -> None:
    """Refuse an export whose parts do not fit together (the store would silently drop such records),
    or whose technique names or aliases could not be created through the API (`check_name`).

    Raises `InvalidExportError` for names, `InvalidGraphRequestError` for the rest, naming the first
    problems found.
    """
    bad_names = []
    for technique in export.techniques:
        for label in (technique.name, *technique.aliases):
            try:
                check_name(label)
            except ValueError as refused:
                bad_names.append(f"{label[:60]!r}: {refused}")
    if bad_names:
        raise InvalidExportError(
            f"the export names techniques with refused names: {'; '.join(bad_names[:5])}"
        )
    problems: list[str] = []
    names = [t.name for t in export.techniques]
    for kind, values in (
        ("technique name", names),
        ("transition key", [t.key for t in export.transitions]),
        ("example id", [e.id for e in export.examples]),
        ("decision id", [d.id for d in export.decisions]),
        ("audit id", [a.id for a in export.audit]),
        ("trajectory id", [t.id for t in export.trajectories]),
    ):
        dupes = _duplicates(values)
        if dupes:
            problems.append(f"duplicate {kind}(s): {', '.join(dupes[:5])}")
    known = set(names)
    keys: set[str] = set()
    for t in export.transitions:
        if t.key != transition_key(t.source, t.target):
            problems.append(f"transition {t.key!r} does not join {t.source!r} and {t.target!r}")
        missing = {t.source, t.target} - known
        if missing:
            problems.append(f"transition {t.key!r} names unknown technique(s) {sorted(missing)}")
        keys.add(t.key)
    for e in export.examples:
        if e.transition_key not in keys:
            problems.append(f"example {e.id} belongs to no transition ({e.transition_key!r})")
    if problems:
        shown = "; ".join(problems[:10]) + (f"; and {len(problems) - 10} more" if len(problems) > 10 else "")
        raise InvalidGraphRequestError(f"the export is inconsistent, nothing was imported: {shown}")
