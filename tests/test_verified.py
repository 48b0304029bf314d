"""docs/VERIFIED.md is the page bench/verify.py renders from the measurements kvplan ships."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _verify():
    spec = importlib.util.spec_from_file_location("verify_bench", ROOT / "bench" / "verify.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_verified_page_is_the_bundled_measurements_rendered():
    rows = json.loads((ROOT / "kvcore/data/measurements/h200-verify.json").read_text())
    tp = sorted((ROOT / "bench" / "results").glob("measure-tp2-*.json"))
    page = (ROOT / "docs" / "VERIFIED.md").read_text()
    assert _verify().render(rows, tp) == page
    # every plan byte-exact, and a plan measured again after the run says so on the page
    assert all(r["allocated_bytes"] == r["predicted_bytes"] for r in rows)
    again = [r for r in rows if r.get("remeasured")]
    assert all(f"on {r['env']['date']} ({r['remeasured']})" in page for r in again)
    assert again or "Measured again after that run" not in page


def test_remeasured_rows_are_named_and_others_are_not():
    verify = _verify()
    row = {"model": "m", "kv_k": "q8_0", "kv_v": "q8_0", "context": 4096, "sequences": 2,
           "env": {"date": "2026-12-01T10:00:00+00:00"}}
    assert verify.remeasured([row]) == []
    line = verify.remeasured([{**row, "remeasured": "why"}])[0]
    assert line == ("Measured again after that run: m q8_0/q8_0 4,096 × 2 on "
                    "2026-12-01T10:00:00+00:00 (why).")
