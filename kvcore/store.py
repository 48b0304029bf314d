"""Measurements kept in SQLite (standard library): every run with its card, versions and date.

The default database is ``$KVPLAN_DB`` or ``~/.local/share/kvplan/measurements.sqlite3``.
Writes are single transactions, so a failed write loses no earlier measurement. The measurements
behind docs/VERIFIED.md ship with kvplan (``kvcore/data/measurements/``, read-only): they are
listed after the local ones with ``"source": "bundled"`` and have no id.
"""

from __future__ import annotations

import copy
import json
import os
import sqlite3
from functools import cache
from pathlib import Path
from typing import Any

from .errors import KvplanError

__all__ = ["bundled_measurements", "default_db", "find_measurement", "list_measurements",
           "save_measurement"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created TEXT NOT NULL,
    model TEXT NOT NULL,
    kv_k TEXT NOT NULL,
    kv_v TEXT NOT NULL,
    context INTEGER NOT NULL,
    sequences INTEGER NOT NULL,
    device TEXT NOT NULL,
    predicted_bytes INTEGER NOT NULL,
    allocated_bytes INTEGER NOT NULL,
    data TEXT NOT NULL
)
"""


def default_db() -> Path:
    env = os.environ.get("KVPLAN_DB")
    if env:
        return Path(env)
    return Path.home() / ".local" / "share" / "kvplan" / "measurements.sqlite3"


def _connect(path: Path) -> sqlite3.Connection:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        con = sqlite3.connect(path, timeout=5)
        con.execute(_SCHEMA)
        return con
    except (OSError, sqlite3.Error) as exc:
        raise KvplanError(f"the measurement database {path} cannot be opened: {exc}") from None


def save_measurement(data: dict[str, Any], path: Path | None = None) -> int:
    """Store one measurement (``Measurement.to_dict()``); returns its id."""
    path = path or default_db()
    con = _connect(path)
    try:
        with con:
            cur = con.execute(
                "INSERT INTO measurements (created, model, kv_k, kv_v, context, sequences, "
                "device, predicted_bytes, allocated_bytes, data) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (data.get("env", {}).get("date", ""), data["model"], data["kv_k"], data["kv_v"],
                 data["context"], data["sequences"], data["device"], data["predicted_bytes"],
                 data["allocated_bytes"], json.dumps(data)))
        return int(cur.lastrowid or 0)
    except sqlite3.Error as exc:
        raise KvplanError(f"the measurement could not be stored in {path}: {exc}") from None
    finally:
        con.close()


@cache
def _bundled() -> tuple[dict[str, Any], ...]:
    from importlib import resources

    out: list[dict[str, Any]] = []
    folder = resources.files("kvcore") / "data" / "measurements"
    for item in sorted(folder.iterdir(), key=lambda f: f.name):
        if not item.name.endswith(".json"):
            continue
        for row in json.loads(item.read_text(encoding="utf-8")):
            if "error" not in row:
                out.append({**row, "id": None, "source": "bundled"})
    return tuple(out)


def bundled_measurements() -> list[dict[str, Any]]:
    """The GPU measurements shipped with kvplan, oldest file first (read once per process;
    each call gets its own copies)."""
    return [copy.deepcopy(row) for row in _bundled()]


def list_measurements(path: Path | None = None, *,
                      bundled: bool = False) -> list[dict[str, Any]]:
    """Local measurements in the order they were stored (each with its id), then, with
    ``bundled``, the ones shipped with kvplan."""
    path = path or default_db()
    extra = bundled_measurements() if bundled else []
    if not path.exists():
        return extra
    con = _connect(path)
    try:
        rows = con.execute("SELECT id, data FROM measurements ORDER BY id").fetchall()
    except sqlite3.Error as exc:
        raise KvplanError(f"the measurement database {path} cannot be read: {exc}") from None
    finally:
        con.close()
    out = []
    for row_id, data in rows:
        try:
            item = json.loads(data)
        except ValueError:
            continue
        item["id"] = row_id
        item["source"] = "local"
        out.append(item)
    return out + extra


def _on_gpu(item: dict[str, Any]) -> bool:
    """A measurement made on a GPU ("cpu" and a tensor-parallel "2 × cpu" are not)."""
    return str(item.get("device", "cpu")).split("× ")[-1] != "cpu"


def _whole_cache(item: dict[str, Any]) -> int:
    """The bytes a measurement predicted for the whole model's cache (it may have measured
    a subset of the layers: ``scale`` is the whole over the measured)."""
    return round(int(item["predicted_bytes"]) * float(item.get("scale") or 1.0))


def find_measurement(model: str, kv_k: str, kv_v: str, context: int, sequences: int,
                     path: Path | None = None,
                     cache_bytes: int | None = None) -> dict[str, Any] | None:
    """The newest local GPU measurement of exactly this plan, else a bundled one, if any.
    ``cache_bytes``: the plan's whole cache (KV and state), which the measurement's prediction
    must equal (a plan with other options than the measured one, such as token eviction, a
    hot/cold mix, MTP layers or another state dtype, holds other bytes)."""
    local = list_measurements(path)
    for item in [*reversed(local), *_bundled()]:
        if cache_bytes is not None and _whole_cache(item) != cache_bytes:
            continue
        if (item["model"], item["kv_k"], item["kv_v"], item["context"], item["sequences"]) == (
                model, kv_k, kv_v, context, sequences) and _on_gpu(item):
            found: dict[str, Any] = copy.deepcopy(item)
            return found
    return None
