"""Re-exports for the /ui pages not yet moved (issue 30); removed once they import the new homes."""

from api.errors import http_error as api_error
from api.optimize.stream import event_stream_response

__all__ = ["api_error", "event_stream_response"]
