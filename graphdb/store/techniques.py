"""Techniques: the graph's nodes (create, rename, describe; find by name, embedding or text; merges: curation)."""

from __future__ import annotations

from neo4j import ManagedTransaction

from graphdb import store_queries as q
from graphdb.errors import TechniqueExistsError, TechniqueNotFoundError
from graphdb.models import ScoredTechnique, Technique, transition_key
from graphdb.store.base import StoreBase
from graphdb.store.records import _props, _similarity, _technique

NEAREST_OVERSAMPLING = 64  # candidates asked of the approximate vector index beyond the k kept


class Neo4jTechniques(StoreBase):
    """The technique part of `Neo4jGraphStore`."""

    def get_technique(self, name: str) -> Technique:
        """The technique called exactly `name`; raises `TechniqueNotFoundError`."""
        rows = self._rows(q.GET_TECHNIQUE, name=name)
        if not rows:
            raise TechniqueNotFoundError(f"no technique is called {name!r}")
        return _technique(rows[0]["t"])

    def find_technique_by_label(self, label: str) -> Technique | None:
        """The technique whose name or one of whose aliases equals `label` ignoring case, if any."""
        rows = self._rows(q.FIND_TECHNIQUE_BY_LABEL, label=label)
        return _technique(rows[0]["t"]) if rows else None

    def list_techniques(self, *, limit: int = 100, offset: int = 0) -> list[Technique]:
        """Techniques by name, without their embeddings."""
        return [_technique(r["t"]) for r in self._rows(q.LIST_TECHNIQUES, limit=limit, offset=offset)]

    def technique_names(self) -> list[str]:
        """Every technique's name, sorted (nothing else is read)."""
        return [r["name"] for r in self._rows(q.TECHNIQUE_NAMES)]

    def create_technique(self, technique: Technique, *, actor: str) -> Technique:
        """Add a technique node; raises `TechniqueExistsError` when the name (or an alias) is taken."""

        def work(tx: ManagedTransaction) -> None:
            for label in (technique.name, *technique.aliases):
                if list(tx.run(q.FIND_TECHNIQUE_BY_LABEL, label=label)):
                    raise TechniqueExistsError(f"a technique is already called (or aliased) {label!r}")
            tx.run(q.CREATE_TECHNIQUES, rows=[_props(technique.model_dump())]).consume()
            self._audit_in(tx, actor, "technique.create", f"technique:{technique.name}")

        self._write(work)
        return self.get_technique(technique.name)

    def rename_technique(
        self, old: str, new: str, *, actor: str, embedding: list[float] | None = None
    ) -> Technique:
        """Rename a technique, keeping the old name as an alias and re-keying its transitions and examples.

        Pass the embedding of the new "name: description" so that relabeling matches the new name.
        """

        def work(tx: ManagedTransaction) -> None:
            self._require_techniques(tx, [old])
            clash = list(tx.run(q.FIND_TECHNIQUE_BY_LABEL, label=new))
            if clash and clash[0]["t"]["name"] != old:
                raise TechniqueExistsError(f"{new!r} already names or aliases {clash[0]['t']['name']!r}")
            edges = [r.data() for r in tx.run(q.TRANSITIONS_OF_TECHNIQUE, name=old)]
            tx.run(q.RENAME_TECHNIQUE, old=old, new=new, embedding=embedding).consume()
            rows = []
            for edge in edges:
                source = new if edge["source"] == old else edge["source"]
                target = new if edge["target"] == old else edge["target"]
                rows.append(
                    {
                        "old": edge["key"],
                        "new": transition_key(source, target),
                        "source": source,
                        "target": target,
                    }
                )
            tx.run(q.RENAME_TRANSITION_KEYS, rows=rows).consume()
            self._audit_in(tx, actor, "technique.rename", f"technique:{new}", old=old, new=new)

        self._write(work)
        return self.get_technique(new)

    def describe_technique(
        self, name: str, description: str, *, actor: str, embedding: list[float] | None
    ) -> Technique:
        """Replace a technique's description (and the embedding of its "name: description")."""

        def work(tx: ManagedTransaction) -> None:
            self._require_techniques(tx, [name])
            tx.run(
                q.SET_TECHNIQUE_DESCRIPTION, name=name, description=description, embedding=embedding
            ).consume()
            self._audit_in(tx, actor, "technique.describe", f"technique:{name}", description=description)

        self._write(work)
        return self.get_technique(name)

    def nearest_techniques(self, embedding: list[float], k: int) -> list[ScoredTechnique]:
        """The `k` techniques whose embedding is closest (plain cosine, best first)."""
        rows = self._rows(q.NEAREST_TECHNIQUES, embedding=embedding, candidates=k + NEAREST_OVERSAMPLING, k=k)
        return [ScoredTechnique(technique=_technique(r["t"]), score=_similarity(r["score"])) for r in rows]

    def search_techniques_text(self, query: str, k: int) -> list[ScoredTechnique]:
        """Full-text (Lucene) search over names, aliases and descriptions; `query` is escaped, not parsed."""
        if not any(ch.isalnum() for ch in query):
            return []
        escaped = _lucene_escape(query)
        rows = self._rows(q.FULLTEXT_TECHNIQUES, query=escaped, k=k)
        return [ScoredTechnique(technique=_technique(r["t"]), score=float(r["score"])) for r in rows]


_LUCENE_SPECIAL = set('+-&|!(){}[]^"~*?:\\/')


def _lucene_escape(text: str) -> str:
    return "".join("\\" + ch if ch in _LUCENE_SPECIAL else ch for ch in text)
