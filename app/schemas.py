"""Pydantic models of the REST API (the only place pydantic is used)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class PlanIn(BaseModel):
    """A plan request. ``model`` (catalog or Hub repo id) or ``config`` (a config.json object)."""

    model_config = ConfigDict(extra="forbid")

    model: str | None = Field(None, max_length=200, examples=["qwen3.5-27b"])
    config: dict[str, Any] | None = Field(None, description="a config.json object")
    gpu: str | None = Field(None, max_length=100, examples=["4090"])
    context: int | str = Field("8k", examples=["128k", 262144])
    sequences: int | str = Field(1, examples=[4])
    kv: str | None = Field(None, max_length=40, examples=["q8_0"])
    kv_k: str | None = Field(None, max_length=40)
    kv_v: str | None = Field(None, max_length=40)
    weights: str | None = Field(None, max_length=40, examples=["q4_k_m"])
    engine: str = Field("raw", max_length=20)
    tp: int = Field(1, ge=1, le=1)
    pp: int = Field(1, ge=1, le=1)
    images: int = Field(1, ge=0, le=1000)
    mtp: bool = False


class ErrorOut(BaseModel):
    ok: bool = False
    error: str
    status: int
    field: str | None = None
