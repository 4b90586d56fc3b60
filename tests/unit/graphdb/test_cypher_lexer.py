"""Layer 1 of the Cypher guard on its own: the tokenizer and the lexical check (issue 15: S1, S2, S6)."""

from __future__ import annotations

import pytest

from graphdb.cypher_guard import (
    MAX_QUERY_NESTING,
    MAX_VALUE_DEPTH,
    check_parameters,
    check_read_only,
    tokenize,
)
from graphdb.errors import CypherRefusedError


def test_tokens_keep_strings_comments_and_quoted_names_apart() -> None:
    tokens = tokenize("WITH '//' AS a /* x */ MATCH (`t x`:Technique) // LOAD CSV\nRETURN a")
    kinds = [(t.kind, t.text) for t in tokens]
    assert ("string", "'//'") in kinds
    assert ("name", "t x") in kinds
    assert ("word", "LOAD") not in kinds  # inside a comment
    assert kinds[-2:] == [("word", "RETURN"), ("word", "a")]
    assert [t.text for t in tokenize("RETURN 'it\\'s' AS `a``b`")] == ["RETURN", "'it\\'s'", "AS", "a`b"]


@pytest.mark.parametrize(
    ("query", "found"),
    [
        # S1: a comment marker inside a string used to hide the rest of the query from the guard.
        ("WITH '//' AS a LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row[0] LIMIT 2", "LOAD CSV"),
        ('WITH "/*" AS a LOAD CSV FROM "http://127.0.0.1:8081/v1/device" AS r RETURN r //*/', "LOAD CSV"),
        ("RETURN '\\\\' AS a LOAD CSV FROM 'file:///x' AS r RETURN r", "LOAD CSV"),
        # S2: backtick-quoted procedure names.
        ("CALL `dbms`.`listConfig`() YIELD name RETURN name", "dbms.listConfig"),
        ("CALL `dbms`.`queryJmx`('*:*')", "dbms.queryJmx"),
        ("CALL `dbms`.`killConnections`(['x'])", "dbms.killConnections"),
        ("CALL `db`.`clearQueryCaches`()", "db.clearQueryCaches"),
        ("CALL `db`.`stats`.`stop`('QUERIES')", "db.stats.stop"),
        ("CALL db /* hidden */ . labels2()", "db.labels2"),
        ("CALL `dbms.showCurrentUser`()", "dbms.showCurrentUser"),
        ("MATCH (n:Technique) CALL (n) { DELETE n }", "DELETE"),
        ("explain MATCH (n:Technique) RETURN n", "EXPLAIN"),
        ("CYPHER runtime=interpreted MATCH (n:Technique) RETURN n", "CYPHER"),
    ],
)
def test_hidden_writes_and_procedures_are_refused(query: str, found: str) -> None:
    with pytest.raises(CypherRefusedError, match="refused") as refused:
        check_read_only(query)
    assert found.lower() in str(refused.value).lower()


def test_unicode_escapes_and_open_literals_are_refused() -> None:
    # Neo4j decodes \u0027 before it tokenizes: it would close the string this lexer saw open.
    with pytest.raises(CypherRefusedError, match="unicode escapes"):
        check_read_only("RETURN '\\u0027 LOAD CSV FROM x AS y RETURN y //' AS a")
    for query in ("RETURN 'open", "RETURN `open", "RETURN 1 /* open"):
        with pytest.raises(CypherRefusedError, match="never closed"):
            check_read_only(query)


@pytest.mark.parametrize(
    "query",
    [
        "RETURN " + "[" * 300 + "1" + "]" * 300 + " AS x",  # S6
        "RETURN " + "NOT " * 300 + "true AS x",
        "RETURN " + "- " * 300 + "1 AS x",
        "RETURN " + "CASE WHEN true THEN " * 60 + "1" + " END" * 60 + " AS x",
    ],
)
def test_deep_nesting_is_refused_before_neo4j_parses_it(query: str) -> None:
    with pytest.raises(CypherRefusedError, match="nests"):
        check_read_only(query)


def test_reads_pass() -> None:
    check_read_only(
        "MATCH (t:Technique) WHERE t.description CONTAINS 'CREATE INDEX; DELETE' RETURN t.name // SET"
    )
    check_read_only("MATCH (e:Example) RETURN e.created_at, e.review_status, {set: 1, delete: 2} AS m")
    check_read_only(
        "CALL db.index.fulltext.queryNodes('technique_text', 'tiling') YIELD node RETURN node.name"
    )
    check_read_only("MATCH (t:Technique) CALL (t) { RETURN t.name AS n } RETURN n")
    check_read_only("RETURN " + "[" * MAX_QUERY_NESTING + "1" + "]" * MAX_QUERY_NESTING + " AS x")
    check_read_only("RETURN " + " - ".join(["1"] * 200) + " AS x")


def test_parameters_are_bounded() -> None:
    deep: object = 1
    for _ in range(900):
        deep = [deep]
    with pytest.raises(CypherRefusedError, match="nest"):
        check_parameters({"p": deep})
    with pytest.raises(CypherRefusedError, match="larger"):
        check_parameters({"p": "x" * 2_000_000})
    shallow: object = 1
    for _ in range(MAX_VALUE_DEPTH - 1):
        shallow = {"k": shallow}
    check_parameters({"p": shallow, "q": ["a", "b"]})


def test_parameter_integers_must_fit_in_64_bits() -> None:
    # Found by the fuzz run: a JSON integer past int64 reached the driver, whose OverflowError was a 500.
    for too_big in (2**63, -(2**63) - 1, -7462068205495234068480):
        with pytest.raises(CypherRefusedError, match="64 bits"):
            check_parameters({"p": {"q": [1, too_big]}})
    check_parameters({"p": [2**63 - 1, -(2**63), True, 1.5e308]})
