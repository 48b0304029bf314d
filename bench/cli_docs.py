"""Write docs/CLI.md from the commands' own --help text (a test checks it is current)."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from app.cli import _list_parser, _measure_parser, _plan_parser, _serve_parser  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def render() -> str:
    parts = ["# kvplan command line", "",
             "Generated from `--help` by `python bench/cli_docs.py`.", ""]
    for title, parser in (("kvplan MODEL", _plan_parser()), ("kvplan models", _list_parser("models")),
                          ("kvplan gpus", _list_parser("gpus")),
                          ("kvplan formats", _list_parser("formats")),
                          ("kvplan measure", _measure_parser()), ("kvplan serve", _serve_parser())):
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            parser.print_help()
        parts += [f"## {title}", "", "```", buf.getvalue().rstrip(), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    (ROOT / "docs" / "CLI.md").write_text(render(), encoding="utf-8")
