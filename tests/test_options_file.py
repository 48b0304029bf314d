"""An engine's options file (--config, --extra_llm_api_options) read with its command: the
YAML subset kvplan reads, and each engine's options as it takes them."""

import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import main
from app.web import create_app
from kvcore.command import read_command
from kvcore.errors import InputError
from kvcore.yamlish import parse_yaml

yaml = pytest.importorskip("yaml")

RECIPE = """\
# a DeepSeek-R1 recipe's options
enable_attention_dp: true
cuda_graph_config:
  enable_padding: true
  batch_sizes: [1, 2, 4, 8]
kv_cache_config:
  dtype: fp8            # the latent in 8 bits
  free_gpu_memory_fraction: 0.85
  enable_block_reuse: false
moe_config: {backend: CUTLASS}
print_iter_log: true
mystery_key: 3
"""


def test_the_subset_reads_as_yaml_reads_it():
    text = RECIPE + 'name: "a # b"\nlist:\n  - 1\n  - two\n  - key: v\n    other: 2.5\nnone: ~\n'
    assert parse_yaml(text) == yaml.safe_load(text)


_key = st.text("abcdefghij_", min_size=1, max_size=8)
_scalar = (st.booleans() | st.none() | st.integers(-10**9, 10**9)
           | st.floats(allow_nan=False, allow_infinity=False, width=32)
           | st.text("abcxyz-/._ ", min_size=1, max_size=10))
_tree = st.recursive(st.dictionaries(_key, _scalar, min_size=1, max_size=4),
                     lambda inner: st.dictionaries(_key, inner | st.lists(_scalar, max_size=4),
                                                   min_size=1, max_size=4), max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(_tree, st.booleans())
def test_what_yaml_writes_reads_back_the_same(tree, flow):
    # block style, or YAML's own mix (flow collections for the innermost ones)
    text = yaml.safe_dump(tree, default_flow_style=None if flow else False, sort_keys=False,
                          width=1000)
    assert parse_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize(("text", "needle"), [
    ("a: &x 1\nb: *x\n", "anchors"),
    ("a: |\n  text\n", "multi-line"),
    ("a: 1\na: 2\n", "given twice"),
    ("a:\n\tb: 1\n", "spaces"),
    ("a: 1\n---\nb: 2\n", "one YAML document"),
    ("a: [1, 2\n", "missing"),
    ("- 1\n- 2\n", "mapping of option names"),
])
def test_yaml_outside_the_subset_is_refused_in_one_line(text, needle):
    with pytest.raises(InputError, match=needle) as e:
        parse_yaml(text)
    assert "\n" not in str(e.value)


def test_trtllm_options_are_read_over_its_flags():
    launch = read_command("trtllm-serve deepseek-ai/DeepSeek-V3 --tp_size 8 --max_batch_size 8 "
                          "--max_seq_len 32768 --extra_llm_api_options r1.yml", RECIPE)
    s = launch.settings
    # enable_attention_dp: a group a rank, max_batch_size a rank's
    assert (s["tp"], s["attn_dp"], s["sequences"]) == (8, 8, 64)
    assert s["kv"] == "fp8_e4m3" and s["free_gpu_memory_fraction"] == 0.85
    assert "kv_cache_config.enable_block_reuse: false" in launch.unread
    assert "print_iter_log: true" in launch.unread
    assert launch.unknown == ["mystery_key: 3"]
    # the file's values win over the flags (update_llm_args_with_extra_dict)
    launch = read_command("trtllm-serve Qwen/Qwen3-8B --max_batch_size 4 --config o.yml",
                          "max_batch_size: 16\nkv_cache_config:\n  tokens_per_block: 64\n"
                          "  host_cache_size: 4000000000\n")
    assert launch.settings["sequences"] == 16 and launch.settings["tokens_per_block"] == 64
    assert launch.settings["offload"] == "4000000000"


@pytest.mark.parametrize(("options", "needle"), [
    ("kv_cache_config:\n  dtype: int4\n", "kv_cache_config.dtype takes one of auto, fp8, nvfp4"),
    ("kv_cache_config:\n  free_gpu_memory_fraction: 1.5\n", "number in (0, 1]"),
    ("max_batch_size: many\n", "max_batch_size must be a whole number"),
])
def test_bad_trtllm_options_are_refused_in_one_line(options, needle):
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace("]", r"\]")):
        read_command("trtllm-serve Qwen/Qwen3-8B --config o.yml", options)


def test_trtllm_options_kvplan_does_not_plan_are_noted():
    launch = read_command("trtllm-serve Qwen/Qwen3-8B --config o.yml",
                          "speculative_config:\n  decoding_type: MTP\nkv_cache_config:\n"
                          "  max_attention_window: [4096]\nmoe_expert_parallel_size: 8\n"
                          "context_parallel_size: 2\n")
    said = " ".join(launch.notes)
    for what in ("speculative_config", "kv_cache_config.max_attention_window [4096]",
                 "moe_expert_parallel_size 8", "context_parallel_size 2"):
        assert what in said
    assert said.count("not planned (the plan is without") == 4


def test_vllm_and_sglang_config_keys_are_their_flags_and_the_commands_own_win():
    launch = read_command("vllm serve meta-llama/Llama-3.1-8B --config v.yaml "
                          "--gpu-memory-utilization 0.9",
                          "max-model-len: 32768\ntensor_parallel_size: 2\nkv-cache-dtype: fp8\n"
                          "enable-prefix-caching: false\nport: 8000\n"
                          "gpu-memory-utilization: 0.8\n")
    s = launch.settings
    assert (s["context"], s["tp"], s["kv"], s["gpu_memory_utilization"]) == (32768, 2,
                                                                            "fp8_e4m3", 0.9)
    assert s["no_prefix_caching"] is True and launch.unread == ["--port 8000"]
    launch = read_command("python -m sglang.launch_server --model-path Qwen/Qwen3-32B "
                          "--config s.yaml --tp 2", "context-length: 65536\ntp-size: 4\n"
                          "mem-fraction-static: 0.8\nenable-metrics: true\n")
    s = launch.settings
    assert (s["context"], s["tp"], s["mem_fraction_static"]) == (65536, 2, 0.8)
    assert launch.unread == ["--enable-metrics"]


def test_the_cli_reads_the_file_where_it_is_and_says_so_where_it_is_not(tmp_path, capsys):
    path = tmp_path / "r1.yml"
    path.write_text(RECIPE)
    cmd = ("trtllm-serve deepseek-ai/DeepSeek-V3 --tp_size 8 --max_batch_size 8 "
           "--max_seq_len 32768 --extra_llm_api_options {}")
    assert main(["--command", cmd.format(path), "--gpu", "8xh200", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["parallel"]["attn_dp"] == 8 and data["fits"] is True
    assert "--attn-dp 8" in data["command"]["read_as"]
    assert main(["--command", cmd.format(tmp_path / "missing.yml"), "--gpu", "8xh200"]) == 0
    out = capsys.readouterr().out
    assert "the file is not on this machine (or not given)" in out
    # the API reads the text given beside the command
    body = {"command": cmd.format("r1.yml"), "gpu": "8xh200", "options": RECIPE}
    api = TestClient(create_app()).post("/api/v1/command", json=body).json()
    assert api["parallel"]["attn_dp"] == 8
    assert api["engine_report"]["max_context"] == data["engine_report"]["max_context"]
    bad = TestClient(create_app()).post("/api/v1/command", json={**body, "options": "a: |\n x"})
    assert bad.status_code == 422 and "multi-line" in bad.text


def test_the_page_reads_the_options_beside_the_command():
    client = TestClient(create_app())
    cmd = ("trtllm-serve deepseek-ai/DeepSeek-V3 --tp_size 8 --max_batch_size 8 "
           "--max_seq_len 32768 --config r1.yml")
    page = client.get("/", params={"command": cmd, "gpu": "8xh200", "options": RECIPE})
    assert page.status_code == 200
    assert "(attention dp 8)" in page.text and "mystery_key: 3" in page.text
    assert 'name="options"' in page.text
    # text given for a command that names no file is said to be unread
    page = client.get("/", params={"command": "vllm serve Qwen/Qwen3-8B", "gpu": "h100",
                                   "options": "max-model-len: 4096"})
    assert "is not read: the command names no file (--config)" in page.text


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=" \n\t-:#[]{},'\"&*|>~abk01.", max_size=120))
def test_any_text_reads_or_is_refused_in_one_line(text):
    try:
        value = parse_yaml(text)
    except InputError as e:
        assert "\n" not in str(e)
    else:
        assert isinstance(value, dict)


@pytest.mark.parametrize("text", ["a: " + "[" * 500 + "]" * 500,
                                  "".join(" " * i + f"k{i}:\n" for i in range(200))])
def test_deep_nesting_is_refused_not_a_crash(text):
    with pytest.raises(InputError, match="nested deeper than"):
        parse_yaml(text)
