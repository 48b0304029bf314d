"""The README's CLI examples are real output: every line it shows, the command prints."""

import re
import shlex
from pathlib import Path

import pytest

from app.cli import main

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
EXAMPLES = [(cmd, out) for cmd, out in re.findall(r"```\n\$ (kvplan [^\n]+)\n(.*?)```", README,
                                                 re.S) if " measure " not in cmd]


def test_readme_has_examples():
    assert len(EXAMPLES) >= 8


@pytest.mark.parametrize(("cmd", "shown"), EXAMPLES, ids=[c for c, _ in EXAMPLES])
def test_example_output_is_current(cmd, shown, capsys):
    main(shlex.split(cmd)[1:])
    captured = capsys.readouterr()
    # abridged JSON drops keys, so a shown line may lose its trailing comma
    real = {line.rstrip().rstrip(",") for line in (captured.out + captured.err).splitlines()}
    for line in shown.rstrip().splitlines():
        if line.strip() in ("", "...") or line.startswith("..."):
            continue
        assert line.rstrip().rstrip(",") in real, \
            f"README line no longer printed by `{cmd}`: {line!r}"
