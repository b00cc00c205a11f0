"""The base of every config section model (:mod:`.config`, :mod:`.config_mm2`): unknown keys are errors and a
loaded config never changes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
