"""MiniMax-M3 under SGLang 0.5.23 (MiniMaxSparseKVPool: K and V of every layer in the main
pool, one index head a sparse layer in its own pools, 128-token pages) and vLLM 0.34 (one
uniform-type group of 128-token blocks); and what each refuses."""

import json
from pathlib import Path

import pytest

from app.cli import main
from kvcore import CacheOptions, find_gpu, load_model, spec_from_config
from kvcore.engines import EngineRequest, engine_plan
from kvcore.engines.base import EngineSettings
from kvcore.parallel import Parallel

GiB = 1 << 30
VL = Path(__file__).parent / "data" / "configs" / "minimax-m3-vl.json"


def vl_config():
    # MiniMaxAI/MiniMax-M3's config.json as published: MiniMaxM3SparseForConditionalGeneration
    # (minimax_m3_vl), the text model in a text_config that names no model_type, and a
    # 32-layer CLIP-style vision tower
    return json.loads(VL.read_text())


def text_config(**sparse):
    # the text model alone (as the bundled config has it: model_type minimax_m3), under the
    # class the engines register for it
    config = dict(vl_config()["text_config"], torch_dtype="bfloat16", model_type="minimax_m3")
    config["sparse_attention_config"] = dict(config["sparse_attention_config"], **sparse)
    return config


def plan(config, kv="f16", gpu=None, budget=None, tp=8, engine="sglang", **settings):
    spec = spec_from_config(config, name="MiniMaxAI/MiniMax-M3", source="test")
    return engine_plan(engine, EngineRequest(
        spec=spec, context=131072, sequences=1, cache=CacheOptions(kv_k=kv, kv_v=kv),
        gpus=(find_gpu(gpu),) * tp if gpu else (), kv_budget_bytes=budget,
        parallel=Parallel(tp=tp), settings=EngineSettings(**settings)))


@pytest.mark.parametrize("config", [vl_config, text_config])
def test_cell_pages_and_pool_lines(config):
    # a rank at tp 8: 60 layers × 2 × 1 KV head (4 / 8, at least one) × 128 × 2 B = 30,720 in
    # the main pool, 57 sparse layers × one 128-wide index key × 2 B = 14,592 (the index
    # head is not split): 45,312 a token; 40 GiB // 45,312 = 947,866 → 947,840 on 128-token
    # pages. Each pool holds tokens + a page: K 947,968 × 60 × 128 × 2 B = 13.56 GiB (V the
    # same); index K 947,968 × 57 × 128 × 2 B = 12.88 GiB in a K-only pool (V size 0)
    r = plan(config(), budget=40 * GiB)
    assert r.extra["cell_bytes"] == 30_720 + 14_592 == 45_312
    assert r.block_tokens == 128
    assert r.kv_tokens == 40 * GiB // 45_312 // 128 * 128 == 947_840
    assert r.log_lines == (
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 947840, K size: 13.56 GB, "
        "V size: 13.56 GB",
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 947840, K size: 12.88 GB, "
        "V size: 0.00 GB")
    assert any("MiniMax sparse pool: 45,312 bytes a token per rank, 30,720 of them" in n
               for n in r.notes)
    assert "--page-size" not in r.command and "--kv-cache-dtype" not in r.command


@pytest.mark.parametrize(("kv", "gpu", "index", "flag"), [
    # an fp8_e4m3 cache keeps the index keys in fp8 on Hopper (the Triton decode) and on
    # SM100 (trtllm_mha's fp8 attention GEMMs): 15,360 + 7,296
    ("fp8", "h200", 1, "fp8_e4m3"),
    ("fp8", "b200", 1, "fp8_e4m3"),
    # fp8_e5m2 leaves them in the model's dtype: 15,360 + 14,592
    ("fp8_e5m2", "b200", 2, "fp8_e5m2"),
])
def test_index_dtype_follows_the_kv_dtype(kv, gpu, index, flag):
    r = plan(vl_config(), kv=kv, gpu=gpu)
    assert r.extra["cell_bytes"] == 15_360 + 57 * 128 * index
    assert f"--kv-cache-dtype {flag}" in r.command
    # the multimodal class reserves SGLang's 100 MiB before sizing the pools
    assert r.log_lines[1].startswith("Reserving 0.10 GB of the KV budget")
    dtype = "float8_e4m3fn" if index == 1 else "bfloat16"
    assert r.log_lines[-1].startswith(f"KV Cache is allocated. dtype: torch.{dtype}, ")


def test_index_values_get_their_own_pool():
    # layers 3-9 keep index values too (sparse_disable_index_value 0): their K+V index pool
    # comes before the K-only pool of the other 50: 7 × 2 × 128 × 2 + 50 × 128 × 2 B
    flags = [0] * 10 + [1] * 50
    r = plan(text_config(sparse_disable_index_value=flags), budget=40 * GiB)
    assert r.extra["cell_bytes"] == 30_720 + 7 * 2 * 256 + 50 * 256
    n = r.kv_tokens
    kv_idx = (n + 128) * 7 * 128 * 2 / GiB
    k_idx = (n + 128) * 50 * 128 * 2 / GiB
    assert r.log_lines[1:] == (
        f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {n}, K size: {kv_idx:.2f} GB, "
        f"V size: {kv_idx:.2f} GB",
        f"KV Cache is allocated. dtype: torch.bfloat16, #tokens: {n}, K size: {k_idx:.2f} GB, "
        "V size: 0.00 GB")


@pytest.mark.parametrize(("kw", "words"), [
    ({"gpu": "a100"}, "Hopper (sm90, fa3) and SM100"),
    ({"gpu": "h200", "page_size": 64}, "--page-size 64 is not sized"),
])
def test_refusals(kw, words):
    from kvcore import InputError
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        plan(vl_config(), **kw)


def test_the_catalog_class_is_not_registered(capsys):
    # the catalog's config names MiniMaxM3ForCausalLM, which SGLang 0.5.23 registers nowhere
    assert load_model("minimax-m3").architecture == "MiniMaxM3ForCausalLM"
    code = main(["minimax-m3", "--ctx", "128k", "--engine", "sglang", "--gpu", "h200"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "MiniMaxM3ForCausalLM" in err and "MiniMaxM3SparseForCausalLM" in err


def test_mtp_draft_is_refused(capsys):
    code = main([str(VL), "--ctx", "128k", "--engine", "sglang", "--gpu", "h200", "--tp", "8",
                 "--gpus", "8", "--mtp"])
    err = capsys.readouterr().err
    assert code == 2 and "index layers is not sized" in err and err.count("\n") == 1


# --- vLLM 0.34: one uniform-type group (FullAttentionSpec K/V and MLAAttentionSpec index keys)

def vllm_plan(config, **kw):
    return plan(config, engine="vllm", **kw)


@pytest.mark.parametrize(("kv", "main_bytes"), [("f16", 2), ("fp8", 1)])
def test_vllm_one_group_of_128_token_blocks(kv, main_bytes):
    # MLAAttentionSpec is a FullAttentionSpec, so the 60 layers' K/V pages and the 57 index
    # pages (one bfloat16 head whatever --kv-cache-dtype) form one group whose block is the
    # sum of their pages: at tp 8, 60 × 128 × 1 × 256 × B + 57 × 128 × 128 × 2
    r = vllm_plan(vl_config(), kv=kv, budget=40 * GiB)
    per_block = 60 * 128 * 256 * main_bytes + 57 * 128 * 128 * 2
    assert r.block_tokens == 128
    assert r.blocks == 40 * GiB // per_block
    assert r.kv_tokens == r.blocks * 128
    assert "--block-size" not in r.command


@pytest.mark.parametrize(("kw", "words"), [
    ({"block_size": 64}, "128-token blocks only"),
    ({"kv": "nvfp4"}, "bf16, fp8_e4m3 or fp8_e5m2, not nvfp4"),
    ({"gpu": "mi300x"}, "ROCm"),
])
def test_vllm_refusals(kw, words):
    from kvcore import InputError
    with pytest.raises(InputError, match=words):
        vllm_plan(vl_config(), **kw)


def test_vllm_refuses_index_values_and_the_draft(capsys):
    from kvcore import InputError
    with pytest.raises(InputError, match="index keys only"):
        vllm_plan(text_config(sparse_disable_index_value=[0] * 10 + [1] * 50), budget=GiB)
    code = main([str(VL), "--ctx", "128k", "--engine", "vllm", "--kv-budget", "40GiB", "--tp",
                 "8", "--mtp"])
    err = capsys.readouterr().err
    assert code == 2 and "MTP draft" in err and err.count("\n") == 1


def test_mxfp8_checkpoint_is_priced_per_module():
    # MiniMax-M3-MXFP8: quant_method mxfp8, weight_block_size [1, 32], the routers, the head,
    # the embeddings and the vision tower left in bfloat16 (ignored_layers)
    from kvcore.quant import MXFP8
    from kvcore.weights import weights_for
    config = vl_config()
    config["quantization_config"] = {
        "quant_method": "mxfp8", "activation_scheme": "dynamic", "weight_block_size": [1, 32],
        "ignored_layers": ["lm_head", "model.embed_tokens", "vision_tower",
                           "multi_modal_projector", "patch_merge_mlp",
                           *(f"language_model.model.layers.{i}.block_sparse_moe.gate"
                             for i in range(3, 60))]}
    spec = spec_from_config(config, name="MiniMaxAI/MiniMax-M3-MXFP8", source="test")
    assert spec.quant is not None and spec.quant.label == "mxfp8"
    by_name = {m.names[0]: m for m in spec.params.modules}
    assert spec.quant.rule_for(by_name["layers.3.self_attn.q_proj"]) is MXFP8
    assert spec.quant.rule_for(by_name["layers.3.block_sparse_moe.gate"]) is None
    # a linear weight of n values costs n bytes and n / 32 scale bytes
    bf16 = weights_for(spec_from_config(vl_config(), name="bf16", source="test"))
    w = weights_for(spec)
    assert w.format == "mxfp8"
    quantized = sum(m.params for m in spec.params.modules
                    if spec.quant.rule_for(m) is MXFP8)
    assert w.bytes == bf16.bytes - 2 * quantized + quantized + quantized // 32


def test_nvfp4_experts_are_not_priced_as_mxfp8_and_sglang_refuses_their_pool():
    # MiniMax-M3.1's NVFP4 export declares mxfp8 with NVFP4 experts (moe_quant_algo): its
    # weights are not read (a note says so) and SGLang, which builds a packed pool for it on
    # Blackwell, is refused in one line
    from kvcore import InputError
    config = vl_config()
    config["quantization_config"] = {"quant_method": "mxfp8", "moe_quant_algo": "NVFP4",
                                     "moe_quant_format": "nvfp4-pack-quantized"}
    spec = spec_from_config(config, name="MiniMaxAI/MiniMax-M3.1-NVFP4", source="test")
    assert spec.quant is None
    assert any("moe_quant_algo NVFP4) is not understood" in n for n in spec.weight_notes)
    with pytest.raises(InputError, match="by the checkpoint's quantization"):
        plan(config, gpu="b200")
