"""Export the whole reasoning graph to one JSON file and import it back (the round trip is exact).

API keys are not part of the graph: an export holds none and an import creates none."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pydantic import ValidationError

from graphdb.errors import ExportFormatError
from graphdb.models import GraphExport
from graphdb.store import TransferStore

logger = logging.getLogger(__name__)


def export_to_file(store: TransferStore, path: Path) -> GraphExport:
    """Write the graph to `path` (atomically: a temporary file renamed into place) and return it."""
    export = store.export_graph()
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(export.model_dump_json(indent=1))
    os.replace(tmp, path)
    logger.info("graph exported", extra={"path": str(path), "examples": len(export.examples)})
    return export


def read_export(path: Path) -> GraphExport:
    """Parse an export file; raises `ExportFormatError` for anything that is not one."""
    try:
        return GraphExport.model_validate_json(path.read_text())
    except (OSError, ValidationError) as e:
        raise ExportFormatError(f"{path}: not a regraph.graph/v1 export: {e}") from e


def import_from_file(store: TransferStore, path: Path, *, actor: str) -> GraphExport:
    """Load an export file into an empty graph (one transaction) and return what was read; its API keys,
    if any (files from before exports left them out), are not loaded."""
    export = read_export(path)
    store.import_graph(export, actor=actor)
    return export
