"""Replay real engine logs: llama.cpp sizes exact, capacities within their bound."""

from pathlib import Path

import pytest

from kvcore.accuracy import load_cases, render_markdown, replay

ROOT = Path(__file__).resolve().parent.parent
CASES = load_cases(ROOT / "tests" / "data" / "engine_logs")
ROWS = replay(CASES)


def test_enough_logs_of_every_kind():
    assert len(CASES) >= 30
    engines = {c.data["engine"] for c in CASES}
    assert engines == {"vllm", "llama.cpp", "sglang", "trtllm"}
    kinds = {k for c in CASES for k in c.data["kind"]}
    assert {"dense", "sliding-window", "mla", "hybrid-linear", "tensor-parallel"} <= kinds
    for case in CASES:
        assert case.data["link"].startswith("http")
        assert case.data["excerpt"].strip()
        assert case.skip or case.replay.get("compare")


def test_replayed_engines():
    assert {r.engine for r in ROWS} == {"vllm", "llama.cpp", "sglang", "trtllm"}
    assert len({r.case for r in ROWS}) >= 20


@pytest.mark.parametrize("row", ROWS, ids=[f"{r.case}:{r.field}" for r in ROWS])
def test_within_bound(row):
    assert row.ok, f"{row.case} {row.field}: printed {row.printed}, predicted {row.predicted}"
    if row.bound > 0.03:
        assert row.explain, "a bound over 3% needs an explanation"


def test_accuracy_doc_is_current():
    doc = (ROOT / "docs" / "ACCURACY.md").read_text(encoding="utf-8")
    assert doc == render_markdown(CASES, ROWS), "run: python bench/accuracy.py"


def test_readme_quotes_the_current_summary():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    summary = next(line for line in render_markdown(CASES, ROWS).splitlines()
                   if "within their bound" in line)
    assert summary in readme.replace("\n", " ")
    assert f"holds {len(CASES)} log excerpts" in readme.replace("\n", " ")


def test_sglang_replays_do_not_lean_on_the_default_fraction():
    # kvplan's automatic mem_fraction_static follows SGLang 0.5.23; the logs come from older
    # releases (0.4.3.post4 picked 0.85 by tp size), so each SGLang replay checks the cell
    # for its printed token count or passes the fraction its log printed
    for case in CASES:
        if case.data["engine"] != "sglang" or case.skip:
            continue
        r = case.replay
        assert "tokens" in r or r["sglang_free_gib"]["mem_fraction_static"] == \
            case.data["printed"]["mem_fraction_static"], case.name
