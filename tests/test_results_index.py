"""bench/results/README.md indexes every results file: each row's first cell names its files
(`NAME.ext`, then `.ext2` for NAME with another extension, `-suffix.ext` for NAME with its last
dash-part replaced; `*` as in a glob), and every name there is a file."""

import fnmatch
import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results"


def indexed(text: str) -> set[str]:
    """The file names (or globs) the index rows' first cells give."""
    names: set[str] = set()
    for line in text.splitlines():
        if not line.startswith("| `"):
            continue
        prev = None
        for tok in re.findall(r"`([^`]+)`", line.split(" | ")[0]):
            if tok.startswith(".") and prev:
                name = prev.rsplit(".", 1)[0] + tok
            elif tok.startswith("-") and prev:
                name = prev.rsplit("-", 1)[0] + tok
            else:
                name = tok
            names.add(name)
            prev = name
    return names


def test_index_reads_companions_and_suffixes():
    row = "| `a-v1.md`, `.json`, `-v1b.json`, `b-*.json` | what | card | date | how |"
    assert indexed(row) == {"a-v1.md", "a-v1.json", "a-v1b.json", "b-*.json"}


def test_every_results_file_is_indexed_and_every_indexed_name_exists():
    names = indexed((RESULTS / "README.md").read_text(encoding="utf-8"))
    files = {p.name for p in RESULTS.iterdir() if p.is_file() and p.name != "README.md"}
    assert not [f for f in sorted(files) if not any(fnmatch.fnmatch(f, n) for n in names)]
    assert not [n for n in sorted(names) if not any(fnmatch.fnmatch(f, n) for f in files)]


def test_every_results_file_the_docs_name_exists():
    # the README and docs/ cite measurements by file name: each must be a committed result
    root = RESULTS.parent.parent
    cited = set()
    for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
        text = doc.read_text(encoding="utf-8")
        cited |= {(doc.name, n) for n in re.findall(
            r"`(?:bench/results/)?((?:decode|verify|launch|step|append|kivi|ncu|fewrows|"
            r"words|parts|lazy|wide|pdl|byte|rotation|catalog)[\w.-]*\.(?:json|md|txt))`",
            text)}
    assert len(cited) > 40
    files = {p.name for p in RESULTS.iterdir()}
    assert not sorted((doc, n) for doc, n in cited if n not in files)
