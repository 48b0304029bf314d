"""Write docs/ACCURACY.md from the engine logs under tests/data/engine_logs/."""

from pathlib import Path

from kvcore.accuracy import load_cases, render_markdown, replay

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    cases = load_cases(ROOT / "tests" / "data" / "engine_logs")
    rows = replay(cases)
    (ROOT / "docs" / "ACCURACY.md").write_text(render_markdown(cases, rows), encoding="utf-8")
    bad = [r for r in rows if not r.ok]
    print(f"{len(rows) - len(bad)}/{len(rows)} within bound")
