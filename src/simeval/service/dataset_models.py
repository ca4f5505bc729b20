"""What the dataset part of the service returns: pydantic models, also the HTTP API's response
models (``.model_dump(mode="json")`` is JSON-ready). Times are timezone-aware UTC."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(frozen=False, extra="forbid")


class DatasetCaseOut(_Model):
    """One case of a dataset version."""

    id: str = Field(description="The case id, unique within a version")
    input: str
    references: list[str] = Field(description="One or more reference answers")
    metadata: dict[str, object] = Field(default_factory=dict)
    draft: bool = Field(
        description="The reference was taken from a captured output and no person has edited "
        "or accepted it yet"
    )
    capture_id: int | None = Field(None, description="The capture the case was made from")
    since_version: int = Field(description="The version this state of the case first appeared in")


class DatasetVersionInfo(_Model):
    """One version of a dataset: when it was made, what changed, how many cases."""

    version: int
    note: str
    cases: int
    drafts: int
    created_at: datetime


class DatasetOut(_Model):
    """A dataset: its newest version and how many cases (and drafts) that version has."""

    name: str
    version: int = Field(description="The newest version")
    cases: int
    drafts: int
    created_at: datetime
    updated_at: datetime


class DatasetChangeOut(DatasetOut):
    """A dataset after cases were added from captures: how many, and the case ids left out
    because the dataset already had them."""

    added: int
    skipped: list[str] = Field(default_factory=list)


class DatasetVersionOut(_Model):
    """One version of a dataset with a page of its cases (in the dataset's order)."""

    name: str
    version: int
    latest: int = Field(description="The dataset's newest version")
    note: str
    created_at: datetime
    total: int = Field(description="Cases in this version")
    drafts: int
    limit: int
    offset: int
    cases: list[DatasetCaseOut]
    versions: list[DatasetVersionInfo] = Field(description="Every version, newest first")
