"""The guard reads a query's text as Neo4j does (issue 27): a `//` comment that Neo4j ends earlier than
a newline (at CR, which Neo4j's lexer ends a line comment at, or another line separator) could hide
text from the lexical check, so only comments ending at LF or CR LF pass; and the schema procedures,
which list internal labels and property keys too, are refused to readers."""

from __future__ import annotations

import pytest

from graphdb.cypher_guard import check_plan, check_read_only
from graphdb.errors import CypherRefusedError

DEEP = "RETURN " + "[" * 300 + "1" + "]" * 300 + " AS x"  # Neo4j's parser recurses on each level


@pytest.mark.parametrize("ending", ["\r", "\u2028", "\u2029", "\x85", "\x0b", "\x0c"])
def test_a_comment_ending_anywhere_but_at_a_newline_is_refused(ending: str) -> None:
    for hidden in (
        DEEP,
        "CREATE (n:Technique {name: 'x'}) RETURN n",
        "CALL dbms.killQueries([]) YIELD queryId",
    ):
        with pytest.raises(CypherRefusedError, match="end // comments with a newline"):
            check_read_only(f"//x{ending}{hidden}")


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_comments_ending_at_a_newline_pass_and_what_follows_is_checked(newline: str) -> None:
    check_read_only(f"// names{newline}MATCH (t:Technique) RETURN t.name // last line")
    with pytest.raises(CypherRefusedError, match="nests"):
        check_read_only(f"//x{newline}{DEEP}")
    with pytest.raises(CypherRefusedError, match="CREATE"):
        check_read_only(f"//x{newline}CREATE (n:Technique) RETURN n")


@pytest.mark.parametrize(
    "query",
    [
        "CALL db.labels() YIELD label RETURN label",
        "CALL `db`.`labels`() YIELD label RETURN label",
        "CALL db.propertyKeys()",
        "CALL db.relationshipTypes()",
        "CALL db.schema.visualization()",
        "CALL db.schema.nodeTypeProperties() YIELD nodeLabels RETURN nodeLabels",
        "CALL db.schema.relTypeProperties()",
    ],
)
def test_schema_procedures_are_refused_to_readers(query: str) -> None:
    with pytest.raises(CypherRefusedError, match="regraph://schema"):
        check_read_only(query)


def test_schema_procedures_are_refused_in_the_plan_too() -> None:
    plan = {
        "operatorType": "ProcedureCall@pipelined",
        "args": {"Details": "db.labels() :: (label :: STRING)"},
    }
    with pytest.raises(CypherRefusedError, match="not allowed"):
        check_plan("r", plan)
