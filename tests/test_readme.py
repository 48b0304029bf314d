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


def test_gpu_table_is_the_committed_results():
    # the README's kernel speed table quotes the one results file it names, every column
    name = re.search(r"`bench/results/(decode-h200-v\d+(?:-\w+)?)\.md`", README).group(1)
    import json

    root = Path(__file__).resolve().parent.parent
    rows = json.loads((root / "bench" / "results" / f"{name}.json").read_text())["rows"]
    got = {(r["format"], r["batch"], r["tokens"]): r for r in rows}
    table = re.findall(r"^\| (\w+) \| ([\d,]+) µs \| ([\d,]+) µs \| ([\d,]+) µs \| "
                       r"(\d+)%–(\d+)% \| ([\d.]+)(?:–([\d.]+))?× \| (\d+)% \|$", README, re.M)
    assert len(table) == 10
    for fmt, b1, b8, m1, lo, hi, s1, s2, app in table:
        for shown, key in ((b1, (1, 131072)), (b8, (8, 131072)), (m1, (1, 1 << 20))):
            assert int(shown.replace(",", "")) == round(got[(fmt, *key)]["seconds"] * 1e6), (fmt, key)
        share = [r["fraction_of_read_bw"] * 100 for k, r in got.items()
                 if k[0] == fmt and k[2] >= 32768]
        assert (int(lo), int(hi)) == (round(min(share)), round(max(share))), fmt
        speed = sorted(round(got[(fmt, b, 131072)]["speedup_vs_sdpa"], 2) for b in (1, 8))
        assert [float(s1), float(s2 or s1)] == speed, fmt
        assert int(app) == round(got[(fmt, 8, 32768)]["append_fraction_of_bw"] * 100), fmt


def test_catalog_counts_are_the_catalogs():
    import kvcore

    entries = kvcore.model_catalog()
    models, twins, gpus = re.search(
        r"Catalogs: (\d+) real `config.json` files.*?; (\d+) more repositories whose "
        r"config.json\s+equals an entry's.*?\) and (\d+) GPUs", README, re.S).groups()
    assert int(models) == len(entries)
    assert int(twins) == sum(len(e.aliases) for e in entries)
    assert int(gpus) == len(kvcore.gpu_catalog())
