"""What the features' wire models share: the strict request base and a technique's name as a lookup."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, StringConstraints

TechniqueName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)]
"""An existing technique's exact name (a lookup; names that enter the graph are `TechniqueLabel`s)."""


class WireRequest(BaseModel):
    """Base of the request bodies: unknown fields are refused, so that a typo does not silently do nothing."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)
