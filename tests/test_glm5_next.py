"""GLM-5.3-Flash (glm5_next): Kimi Delta Attention layers beside NoPE MLA layers whose DSA
indexer pools each index_kpool tokens' keys into one, hyper-connections around every block.
The config (tests/data) holds the text geometry of zai-org/GLM-5.3-Flash as public config
parsers' fixtures copy it (34 KDA and 11 DSA layers, index_kpool 4)."""

import copy
import json
from pathlib import Path

import pytest
from rawonly import ENGINES, refusal_and_raw, text_variant

from kvcore import CacheOptions, ConfigError, InputError, cache_size, find_gpu, get_format
from kvcore.engines import EngineRequest, engine_plan
from kvcore.engines.base import GiB, MiB
from kvcore.hf import spec_from_config
from kvcore.kv import bytes_per_token
from kvcore.model import LayerKind
from kvcore.parallel import Parallel

CONFIG = json.loads((Path(__file__).parent / "data" / "glm-5.3-flash-config.json").read_text())
MLA = tuple(range(3, 45, 4))
KDA = tuple(i for i in range(45) if i not in MLA)


def spec(cfg=CONFIG):
    return spec_from_config(cfg, name="g", source="test")


def with_text(**over):
    return text_variant(CONFIG, **over)


def without(*names):
    return text_variant(CONFIG, *names)


def test_mla_layers_keep_the_latent_and_pooled_index_keys_and_kda_layers_their_state():
    s = spec()
    by_kind = {g.kind: g for g in s.groups if not g.mtp}
    mla = by_kind[LayerKind.MLA]
    # NoPE: the latent is kv_lora_rank alone; a decode step reads the 2,048 selected tokens
    assert (mla.layers, mla.head_dim_k, mla.head_dim_v, mla.read_limit) == (MLA, 512, 0, 2048)
    index = by_kind[LayerKind.INDEX]
    assert (index.layers, index.n_kv_heads, index.head_dim_k, index.head_dim_v,
            index.ratio) == (MLA, 1, 128, 0, 4)
    tail = by_kind[LayerKind.COMPRESSOR]
    # the pool not yet complete: 4 tokens' raw index keys and gate scores
    assert tail.layers == MLA and tail.state_values == 4 * 2 * 128
    kda = by_kind[LayerKind.LINEAR]
    assert kda.layers == KDA
    assert kda.state_values == 64 * 128 * 128 + 3 * (3 * 64 * 128)
    assert LayerKind.INDEXER not in by_kind
    # the next-n layer after them: an MLA layer with its own pooled indexer
    drafts = {g.kind: g.layers for g in s.groups if g.mtp}
    assert drafts == {LayerKind.MLA: (45,), LayerKind.INDEX: (45,),
                      LayerKind.COMPRESSOR: (45,)}


def test_cache_bytes_per_token_and_sequence():
    s = spec()
    f16 = get_format("f16")
    opts = CacheOptions(kv_k=f16, kv_v=f16)
    # 11 layers × (a 512-wide latent, and a 128-wide index key every 4 tokens)
    assert bytes_per_token(s, opts) == 11 * (512 * 2 + 128 * 2 // 4)
    one, two = cache_size(s, 32768, 1, opts), cache_size(s, 65536, 1, opts)
    assert two.kv_bytes - one.kv_bytes == 32768 * 11 * (512 * 2 + 128 * 2 // 4)
    # a pool of 4 is kept once complete: 10 tokens leave 2 pools
    assert cache_size(s, 10, 1, opts).kv_bytes == 11 * (10 * 512 * 2 + 2 * 128 * 2)
    # the state (here in f32) does not grow with the context and scales with the sequences
    state = 34 * (64 * 128 * 128 + 3 * 3 * 64 * 128) + 11 * 4 * 2 * 128
    assert one.state_bytes == two.state_bytes == 4 * state
    assert cache_size(s, 32768, 3, opts).state_bytes == 3 * 4 * state


def test_layers_from_kda_layers_layer_types_or_the_default_agree():
    listed = spec()
    # transformers' re-saved config: layer_types ("indexed_attention") and linear_* fields
    resaved = copy.deepcopy(CONFIG)
    text = resaved["text_config"]
    del text["linear_attn_config"]
    text["layer_types"] = ["indexed_attention" if t != "linear_attention" else t
                           for t in text["layer_types"]]
    text.update(linear_num_heads=64, linear_head_dim=128, linear_conv_kernel_dim=4)
    # neither: every fourth layer from 3 (Glm5NextTextConfig's default)
    default = without("linear_attn_config", "layer_types")
    flat = {**CONFIG["text_config"], "model_type": "glm5_next"}
    for other in (resaved, default, flat):
        s = spec(other)
        assert s.groups == listed.groups


def test_an_indexer_list_marking_layers_shared_drops_their_index_keys():
    types = ["full"] * 45
    types[7] = types[11] = "shared"
    s = spec(with_text(indexer_types=types))
    index = next(g for g in s.groups if g.kind is LayerKind.INDEX and not g.mtp)
    assert index.layers == tuple(i for i in MLA if i not in (7, 11))
    full = spec()
    # and their indexer's weights: wq_b, wk, k_norm, weights_proj and the pooling pair
    per = 1536 * 32 * 128 + 4096 * 128 + 2 * 128 + 4096 * 32 + 4 * 128 + 128 * 4096
    assert full.params.total - s.params.total == 2 * per


def test_kda_and_hyper_connection_weights():
    s = spec()
    projections = next(m for m in s.params.modules
                       if m.names[0] == "layers.0.self_attn.projections")
    # q, k, v, o; the convs of q, k, v (kernel 4); the forget gate's and output gate's
    # hidden→128→8192 pairs, dt_bias, A_log, beta and the output norm
    assert projections.params == (4 * 4096 * 8192 + 3 * 8192 * 4 + 2 * 4096 * 128
                                  + 2 * 128 * 8192 + 8192 + 64 + 4096 * 64 + 128)
    plain = spec(with_text(hc_mult=1))
    # two hyper-connections a layer, each a 24 × 16,384 projection, its bias, three scales
    assert s.params.total - plain.params.total == 45 * 2 * (24 * 4 * 4096 + 24 + 3)


@pytest.mark.parametrize(("cfg", "field"), [
    (without("index_kpool"), "index_kpool"),
    (with_text(layer_types=["sliding_attention"] * 45), "layer_types"),
    (with_text(layer_types=["linear_attention"] * 44), "layer_types"),
    (with_text(linear_attn_config={**CONFIG["text_config"]["linear_attn_config"],
                                   "kda_layers": list(range(1, 45))}), "layer_types"),
    (with_text(linear_attn_config={**CONFIG["text_config"]["linear_attn_config"],
                                   "kda_layers": [0, 0, 45]}), "linear_attn_config"),
    (with_text(linear_attn_config="kda"), "linear_attn_config"),
])
def test_bad_layout_fields_are_one_line_errors(cfg, field):
    with pytest.raises(ConfigError) as e:
        spec(cfg)
    assert e.value.field == field and "\n" not in str(e.value)


def test_a_latent_without_rotary_part_is_glm5_next_only():
    text = {k: v for k, v in CONFIG["text_config"].items()
            if k not in ("linear_attn_config", "layer_types", "index_kpool", "hc_mult",
                         "mhc", "indexer_types")}
    with pytest.raises(ConfigError) as e:
        spec({**text, "model_type": "deepseek_v32"})
    assert e.value.field == "qk_rope_head_dim"


def sglang_plan(cfg=CONFIG, kv="f16", tp=8, **settings):
    f = get_format(kv)
    req = EngineRequest(spec=spec(cfg), context=32768, sequences=4,
                        cache=CacheOptions(kv_k=f, kv_v=f), gpus=(find_gpu("h200"),) * tp,
                        parallel=Parallel(tp=tp), **settings)
    return engine_plan("sglang", req)


@pytest.mark.parametrize(("kv", "row", "flag"), [
    # auto on Hopper: bfloat16, the 512-value latent in 2 bytes
    ("f16", 512 * 2, None),
    # fp8_e4m3: FlashMLA's row without a rotary part, 512 fp8 values and 4 float32 scales
    ("fp8", 512 + 4 * 4, "fp8_e4m3"),
])
def test_sglang_pools_the_latent_and_a_key_a_pool_beside_the_kda_state_slots(kv, row, flag):
    r = sglang_plan(kv=kv)
    # the cell: 11 MLA layers' rows and 132 / 4 = 33 bytes of index key a token in each
    cell = 11 * row + 11 * 33
    assert r.extra["cell_bytes"] == cell
    # pages of 64 × index_kpool tokens, so that a page holds whole pools
    assert r.block_tokens == 256
    tokens = r.kv_tokens
    assert tokens % 256 == 0 and tokens == (r.kv_pool_bytes // cell) // 256 * 256
    # the pool: tokens + a page of latent rows, and (tokens + 257) // 256 pages of 64 index
    # rows of 132 bytes, in each layer
    pool = 11 * (tokens + 256) * row + 11 * ((tokens + 257) // 256) * 64 * 132
    dtype = "float8_e4m3fn" if flag else "bfloat16"
    assert (f"KV Cache is allocated. dtype: torch.{dtype}, #tokens: {tokens}, KV size: "
            f"{pool / GiB:.2f} GB" in r.log_lines)
    assert (f"--kv-cache-dtype {flag}" in r.command) == (flag is not None)
    notes = " ".join(r.notes)
    # Kimi-Linear's state slots a KDA layer per rank (8 heads of 64): three convolutions of
    # 3 columns in bf16, the 128 × 128 states in f32; 3 + 2 extra-buffer slots a request
    slot = 34 * (3 * 3 * 8 * 128 * 2 + 8 * 128 * 128 * 4)
    assert f"slots of {slot / MiB:.1f} MiB" in notes and "(5 slots a request)" in notes
    # the open pools beside the DSA pool (index_kpool_compress): 2 × 4 × 128 bf16 a layer
    assert f"index_kpool_compress: {2 * 4 * 128 * 2 * 11 / 1024:,.0f} KiB a request slot" in notes


def test_sglang_refuses_what_it_does_not_run_as_sized():
    types = ["full"] * 45
    types[7] = "shared"
    flat = {**CONFIG["text_config"], "model_type": "glm5_next",
            "architectures": ["Glm5NextForCausalLM"]}
    for cfg, says in ((with_text(indexer_types=types), "shared"),
                      (flat, "Glm5NextForConditionalGeneration only")):
        with pytest.raises(InputError) as e:
            sglang_plan(cfg)
        assert says in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(InputError, match="Glm5NextForConditionalGenerationNextN"):
        f16 = get_format("f16")
        engine_plan("sglang", EngineRequest(
            spec=spec(), context=32768, sequences=4, cache=CacheOptions(kv_k=f16, kv_v=f16,
                                                                         mtp=True),
            gpus=(find_gpu("h200"),) * 8, parallel=Parallel(tp=8)))


@pytest.mark.parametrize("engine", [e for e in ENGINES if e != "sglang"])
def test_engines_are_refused_until_their_pools_are_modelled(engine):
    error, raw = refusal_and_raw(spec(), engine, "h200")
    assert "GLM-5.3-Flash's pooled DSA index keys" in str(error) and error.field == "engine"
    assert "--engine raw" in str(error)
    # raw sizes it: its weights are more than four H200s hold
    assert raw.weights_bytes > 4 * 141 * 10**9
