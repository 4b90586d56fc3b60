"""The techniques' pages of the curation workspace: the list, a technique's page, its edit and merge, and
the graph view with the data and the examples it draws."""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from pydantic import ValidationError

from api.deps import ExampleServiceDep, TechniqueServiceDep, TransferServiceDep
from api.graph.errors import GraphServiceError
from api.techniques.models import MergeRequest, TechniqueUpdate, TransitionPublic
from api.ui.render import fmt_speedup, speedup_colour
from api.ui.visitor import (
    PAGE,
    UNDO_NOTE,
    VisitDep,
    WriteDep,
    confirm,
    in_thread,
    problem,
    see,
    what_moves,
)
from graphdb.models import Role
from search.protocols import INITIAL_TECHNIQUE

GRAPH_EDGE_LIMIT = 3000  # transitions drawn by the graph view, the busiest first
GRAPH_TOP_EXAMPLES = 5  # examples of a transition listed in the graph's side panel
BEST_SHOWN = 6  # a technique page's best verified examples

router = APIRouter(prefix="/ui", include_in_schema=False)


# -- the techniques ---------------------------------------------------------------------------------


@router.get("/techniques")
async def techniques(visit: VisitDep, service: TechniqueServiceDep, q: str = "") -> HTMLResponse:
    def load() -> dict[str, Any]:
        items = []
        offset = 0
        while True:
            page = service.list_techniques(PAGE, offset).items
            items.extend(page)
            if len(page) < PAGE:
                break
            offset += PAGE
        links = service.technique_links()
        out_n = Counter({n: k.out_n for n, k in links.items()})
        in_n = Counter({n: k.in_n for n, k in links.items()})
        examples = Counter({n: k.examples_in for n, k in links.items()})
        needle = q.lower()
        shown = [
            t
            for t in items
            if not needle or needle in t.name.lower() or any(needle in a.lower() for a in t.aliases)
        ]
        return {"items": shown, "out_n": out_n, "in_n": in_n, "examples": examples, "q": q}

    return visit.render("techniques.html", nav="techniques", **await in_thread(load))


@router.get("/technique")
async def technique(visit: VisitDep, service: TechniqueServiceDep, name: str) -> Response:
    def load() -> dict[str, Any] | None:
        with visit.reported():
            found = service.get_technique(name)
            transitions = service.transitions_of(found.name)
            into = sorted(
                (t for t in transitions if t.target == found.name),
                key=lambda t: (-t.stats.n_examples, t.source),
            )
            out = sorted(
                (t for t in transitions if t.source == found.name),
                key=lambda t: (-t.stats.n_examples, t.target),
            )
            best = service.best_examples_into(found.name, BEST_SHOWN)
            return {
                "technique": found,
                "predecessors": into,
                "successors": out,
                "best": best,
                "names": [n for n in service.technique_names() if n != found.name],
            }
        return None

    context = await in_thread(load)
    if context is None:
        return see("/ui/techniques")
    return visit.render("technique.html", nav="techniques", **context)


@router.post("/technique/edit")
async def edit_technique(visit: WriteDep, service: TechniqueServiceDep) -> RedirectResponse:
    visit.require(Role.CURATOR)
    name, new_name, description = visit.field("name"), visit.field("new_name"), visit.field("description")
    try:
        body = TechniqueUpdate(name=new_name or None, description=description)
    except ValidationError as e:
        visit.flash("error", str(e.errors()[0]["msg"]))
        return see(f"/ui/technique?{urlencode({'name': name})}")
    landed = name
    with visit.reported("Saved."):
        landed = (await in_thread(lambda: service.update_technique(name, body, actor=visit.caller.name))).name
    return see(f"/ui/technique?{urlencode({'name': landed})}")


@router.post("/technique/merge")
async def merge_technique(visit: WriteDep, service: TechniqueServiceDep) -> Response:
    visit.require(Role.CURATOR)
    source, into = visit.field("source"), visit.field("into")
    try:
        body = MergeRequest(source=source, into=into)
    except ValidationError:
        visit.flash("error", "name both techniques to merge")
        return see(f"/ui/technique?{urlencode({'name': source})}")
    moves = await in_thread(lambda: what_moves(service, source))
    asked = confirm(
        visit,
        "Merge",
        f"Merge {source!r} into {into!r}: {moves} move to {into!r}; {source!r} and its aliases "
        f"become aliases of {into!r}.",
        f"/ui/technique?{urlencode({'name': source})}",
        undo_note=UNDO_NOTE,
    )
    if asked is not None:
        return asked
    landed = source
    with visit.reported(f"Merged {source!r} into {into!r}; its names are now aliases."):
        landed = (await in_thread(lambda: service.merge_techniques(body, actor=visit.caller.name))).name
    return see(f"/ui/technique?{urlencode({'name': landed})}")


# -- the graph --------------------------------------------------------------------------------------


@router.get("/graph")
def graph_page(visit: VisitDep) -> HTMLResponse:
    return visit.render("graph.html", nav="graph")


def _edge(t: TransitionPublic, top: int) -> dict[str, Any]:
    """One transition as the graph view draws it: its width by examples, its colour by speedup."""
    speedup = t.stats.mean_speedup if t.stats.n_verified else None
    return {
        "data": {
            "id": t.key,
            "source": t.source,
            "target": t.target,
            "examples": t.stats.n_examples,
            "verified": t.stats.n_verified,
            "rejected": t.stats.n_rejected,
            "success": t.stats.success_rate,
            "median": t.stats.median_speedup if t.stats.n_verified else None,
            "speedup": speedup,
            "label": f"{t.stats.n_examples} ex · {fmt_speedup(speedup)}",
            "width": 1 + 7 * (t.stats.n_examples / top) ** 0.5,
            "colour": speedup_colour(speedup),
        }
    }


@router.get("/graph/data")
async def graph_data(
    visit: VisitDep, service: TechniqueServiceDep, transfer: TransferServiceDep
) -> JSONResponse:
    def load() -> dict[str, Any]:
        names = service.technique_names()
        # Past a few thousand edges a browser drawing them all stops being usable: the thinnest go.
        transitions = service.busiest_transitions(GRAPH_EDGE_LIMIT)
        total = transfer.counts()["transitions"]
        degree = Counter[str]()
        for t in transitions:
            degree[t.source] += t.stats.n_examples
            degree[t.target] += t.stats.n_examples
        top = max((t.stats.n_examples for t in transitions), default=1) or 1
        linked = {t.source for t in transitions} | {t.target for t in transitions}
        return {
            "initial": INITIAL_TECHNIQUE,
            "transitions_total": total,
            "nodes": [{"data": {"id": n, "weight": degree[n]}} for n in names if n in linked],
            # Drawn apart (a collapsed list), not in the layered layout: they have no place in it.
            "unlinked": [n for n in names if n not in linked],
            "edges": [_edge(t, top) for t in transitions],
        }

    return JSONResponse(await in_thread(load))


@router.get("/graph/examples")
async def graph_examples(
    visit: VisitDep, examples: ExampleServiceDep, source: str, target: str
) -> JSONResponse:
    """A transition's best examples for the graph's side panel: the fastest verified first."""

    def load() -> list[dict[str, Any]]:
        found = examples.list_examples(source=source, target=target, status=None, limit=200, offset=0)
        best = sorted(found.items, key=lambda e: (e.speedup is None, -(e.speedup or 0.0)))
        return [
            {
                "id": e.id,
                "task": e.task_id,
                "speedup": fmt_speedup(e.speedup),
                "status": e.review_status.value,
            }
            for e in best[:GRAPH_TOP_EXAMPLES]
        ]

    try:
        return JSONResponse(await in_thread(load))
    except GraphServiceError as e:
        error = problem(e)
        return JSONResponse({"error": error.message}, status_code=error.status_code)
