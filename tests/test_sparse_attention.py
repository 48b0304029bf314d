"""DeepSeek-V4 (compressed sparse attention) and MiniMax-M3 (block-sparse attention with index
heads): configs whose cache is not that of a plainer kind."""

import json
from pathlib import Path

import pytest

from app.cli import main
from kvcore import ConfigError, spec_from_config

CONFIGS = Path(__file__).parent / "data" / "configs"
ENGINES = ("raw", "vllm", "sglang", "llama.cpp", "trtllm")


def config(name):
    return json.loads((CONFIGS / f"{name}.json").read_text())


def run(capsys, *args):
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("name", "words"), [
    ("deepseek-v4-flash", "DeepSeek-V4 compressed sparse attention"),
    ("deepseek-v4-pro", "DeepSeek-V4 compressed sparse attention"),
    ("deepseek-v4-pro-fp8-sgl", "DeepSeek-V4 compressed sparse attention"),
    ("minimax-m3", "MiniMax-M3 block-sparse attention with index heads"),
])
def test_unsized_attention_is_refused_not_read_as_sliding(name, words, capsys):
    # before: V4 read as 43/61 sliding-window layers of one 512-wide K and V head (a wrong
    # figure); M3 failed on its list moe_layer_freq
    with pytest.raises(ConfigError, match=words):
        spec_from_config(config(name), name=name, source="test")
    for engine in ENGINES:
        code, out, err = run(capsys, str(CONFIGS / f"{name}.json"), "--ctx", "128k",
                             "--engine", engine, "--gpu", "h200")
        assert code == 2 and out == ""
        assert words in err and err.count("\n") == 1
