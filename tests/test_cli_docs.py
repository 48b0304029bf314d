"""docs/CLI.md is the commands' current --help text."""

import importlib.util
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_cli_docs_current(monkeypatch):
    # argparse wraps help to the terminal width: pin it as the generator saw it
    monkeypatch.setenv("COLUMNS", "100")
    spec = importlib.util.spec_from_file_location("cli_docs", ROOT / "bench" / "cli_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (ROOT / "docs" / "CLI.md").read_text(encoding="utf-8") == mod.render(), \
        "run: COLUMNS=100 python bench/cli_docs.py"
    assert os.environ["COLUMNS"] == "100"
