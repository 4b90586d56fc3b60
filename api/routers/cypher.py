"""Re-exports for the /ui pages not yet moved (issue 30); removed once they import the new homes."""

from api.cypher.run import run_reader_cypher
from api.errors import http_error as cypher_api_error

__all__ = ["cypher_api_error", "run_reader_cypher"]
