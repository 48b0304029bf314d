"""DeepSeek-V4 (compressed sparse attention) and MiniMax-M3 (block-sparse attention with index
heads): raw sizes their caches layer kind by layer kind; the engines refuse them until their
allocation is modelled."""

import json
from pathlib import Path

import pytest

from app.cli import main
from kvcore import CacheOptions, LayerKind, cache_size, model_catalog, spec_from_config
from kvcore.kv import bytes_per_token, marginal_bytes_per_token

CONFIGS = Path(__file__).parent / "data" / "configs"
ENGINES = ("vllm", "sglang", "llama.cpp", "trtllm")
L = 131_072


def config(name):
    entry = next((e for e in model_catalog() if e.id == name), None)
    if entry is not None:
        return entry.config()
    return json.loads((CONFIGS / f"{name}.json").read_text())


def spec(name):
    return spec_from_config(config(name), name=name, source="test")


def ref(name):
    """A catalog id, or the path of a config kept among the test data."""
    path = CONFIGS / f"{name}.json"
    return str(path) if path.exists() else name


def run(capsys, *args):
    try:
        code = main(list(args))
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def by_kind(size):
    out = {}
    for g in size.groups:
        key = (g.group.kind, g.group.ratio)
        out[key] = out.get(key, 0) + g.total_bytes
    return out


def test_v4_flash_raw_f16_per_kind():
    # compress_ratios (43 layers + 1 MTP): 0 at 0, 1; 4 at 2, 4, ..., 42 (21); 128 at 3, ...,
    # 41 (20); the 44th entry (0) is the MTP layer. Every layer keeps a 128-token window of
    # one 512-value latent (K = V); f16 = 2 B a value; the compressor state is float32.
    s = spec("deepseek-v4-flash")
    assert s.num_layers == 43
    size = cache_size(s, L, 1, CacheOptions())
    kinds = by_kind(size)
    assert kinds[(LayerKind.SLIDING, 1)] == 43 * 128 * 512 * 2 == 5_636_096
    assert kinds[(LayerKind.COMPRESSED, 4)] == 21 * (L // 4) * 512 * 2 == 704_643_072
    assert kinds[(LayerKind.COMPRESSED, 128)] == 20 * (L // 128) * 512 * 2 == 20_971_520
    # the indexer's key: index_head_dim 128 per 4 tokens
    assert kinds[(LayerKind.INDEX, 4)] == 21 * (L // 4) * 128 * 2 == 176_160_768
    # ratio 4: kv + score rows of two overlapping blocks, 2 × 8 × (2·512), and the indexer's
    # compressor 2 × 8 × (2·128); ratio 128: 2 × 128 × 512; 4 bytes each
    assert kinds[(LayerKind.COMPRESSOR, 4)] == 21 * (2 * 8 * 1024 + 2 * 8 * 256) * 4 == 1_720_320
    assert kinds[(LayerKind.COMPRESSOR, 128)] == 20 * 2 * 128 * 512 * 4 == 10_485_760
    # past the window a token adds 21 × (1024 + 256) / 4 + 20 × 1024 / 128
    assert marginal_bytes_per_token(s) == 21 * 320 + 20 * 8 == 6_880
    assert bytes_per_token(s) == 6_880 + 43 * 1024
    # a block is folded only when whole: 130 tokens hold 32 ratio-4 entries, no ratio-128 one
    assert by_kind(cache_size(s, 130, 1))[(LayerKind.COMPRESSED, 4)] == 21 * 32 * 1024
    assert (LayerKind.COMPRESSED, 128) not in {k for k, v in by_kind(cache_size(s, 127, 1)).items()
                                               if v}


def test_v4_pro_raw_fp8_and_block_formats():
    # Pro: 61 layers: 128 at 0, 1 and the odd layers to 59 (31), 4 at 2, 4, ..., 60 (30)
    s = spec("deepseek-v4-pro")
    fp8 = CacheOptions(kv_k="fp8", kv_v="fp8")
    assert marginal_bytes_per_token(s, fp8) == 30 * (512 + 128) // 4 + 31 * 512 // 128 == 4_924
    # q8_0 latents (544 B) over 128 tokens are not whole bytes: 30 × (544 + 136) / 4 = 5,100
    # and 31 × 544 / 128 = 131.75, rounded up once to 5,232
    q8 = CacheOptions(kv_k="q8_0", kv_v="q8_0")
    assert marginal_bytes_per_token(s, q8) == 5_232
    # the cache itself is exact: whole entries
    assert cache_size(s, 1280, 1, q8).kv_bytes == (61 * 128 * 544 + 30 * 320 * (544 + 136)
                                                   + 31 * 10 * 544)


def test_v4_sglang_fp8_checkpoint_config_reads_the_same():
    # SGLang's FP8 repack names the model_type deepseek_ref; the cache is the same
    assert spec("deepseek-v4-pro-fp8-sgl").groups == spec("deepseek-v4-pro").groups


def test_v4_parameters_and_checkpoint_format():
    # published: Flash 284B total / 13B active, Pro 1.6T / 49B
    flash, pro = spec("deepseek-v4-flash"), spec("deepseek-v4-pro")
    assert round(flash.params.total / 1e9) == 284 and round(flash.params.active / 1e9) == 13
    assert round(pro.params.total / 1e11) == 16 and round(pro.params.active / 1e9) == 49
    assert flash.checkpoint_weights == "fp8_mxfp4_moe"


def test_m3_raw_f16_per_kind():
    # 60 layers of 4 KV heads × 128 for K and V; the 57 sparse layers (3..59) add one index
    # key head of sparse_index_dim 128 (sparse_disable_index_value 1: no index value)
    s = spec("minimax-m3")
    size = cache_size(s, L, 1, CacheOptions())
    kinds = by_kind(size)
    assert kinds[(LayerKind.FULL, 1)] == 60 * 4 * (128 + 128) * 2 * L
    assert kinds[(LayerKind.INDEX, 1)] == 57 * 128 * 2 * L
    assert bytes_per_token(s) == marginal_bytes_per_token(s) == 122_880 + 14_592 == 137_472
    # an index value where the layer keeps one
    cfg = config("minimax-m3")
    cfg["sparse_attention_config"]["sparse_disable_index_value"][3] = 0
    s2 = spec_from_config(cfg, name="m3", source="test")
    assert bytes_per_token(s2) == 137_472 + 128 * 2


def test_m3_parameters_moe_pattern():
    s = spec("minimax-m3")
    # 3 dense layers of dense_intermediate_size 12288, 57 MoE layers of 128 experts × 3072
    assert s.params.experts == 57 * 128 * 3 * 6144 * 3072


@pytest.mark.parametrize(("name", "words"), [
    ("deepseek-v4-flash", "DeepSeek-V4's compressed sparse attention"),
    ("deepseek-v4-pro-fp8-sgl", "DeepSeek-V4's compressed sparse attention"),
    ("minimax-m3", "MiniMax-M3's block-sparse attention index cache"),
])
def test_engines_refuse_what_they_do_not_model(name, words, capsys):
    for engine in ENGINES:
        code, out, err = run(capsys, ref(name), "--ctx", "128k", "--engine", engine,
                             "--gpu", "h200")
        assert code == 2 and out == ""
        assert words in err and engine in err and err.count("\n") == 1
    code, out, _ = run(capsys, ref(name), "--ctx", "128k", "--gpu", "h200")
    assert code == 0 and "index" in out
