"""Server settings, read from the environment by a cached function (tests override it)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from kvcore.store import default_db

__all__ = ["Settings", "get_settings"]


@dataclass(frozen=True)
class Settings:
    #: POST /api/v1/measure runs jobs on this server's GPU only when enabled
    measure_enabled: bool
    #: when set, POST /api/v1/measure also needs ``Authorization: Bearer <token>``
    measure_token: str | None
    #: seconds one measurement may run
    measure_timeout_s: int
    db_path: Path


@cache
def get_settings() -> Settings:
    token = os.environ.get("KVPLAN_MEASURE_TOKEN") or None
    return Settings(
        measure_enabled=os.environ.get("KVPLAN_ALLOW_MEASURE") == "1" or token is not None,
        measure_token=token,
        measure_timeout_s=int(os.environ.get("KVPLAN_MEASURE_TIMEOUT", "600")),
        db_path=default_db(),
    )
