"""LongCat-Flash: two MLA attentions and two dense MLPs in every layer beside a MoE whose router
also scores zero-computation experts (identity, no weights)."""

import pytest

from kvcore import CacheOptions, ConfigError, InputError, find_gpu, get_format, model_catalog
from kvcore.engines import EngineRequest, EngineSettings, engine_plan
from kvcore.engines.vllm_lora import LoRA
from kvcore.hf import spec_from_config
from kvcore.model import LayerKind
from kvcore.parallel import Parallel

H, VOCAB, LAYERS = 6144, 131072, 28
LATENT = 512 + 64


def config(**over):
    """LongCat-Flash-Chat's config.json (the catalog's copy), with fields replaced."""
    cfg = next(e for e in model_catalog() if e.id == "longcat-flash-chat").config()
    cfg.update(over)
    return {k: v for k, v in cfg.items() if v is not None}


def spec(**over):
    return spec_from_config(config(**over), name="longcat", source="test")


def test_each_layer_caches_two_latents_and_the_mtp_layer_one():
    s = spec()
    main = [g for g in s.groups if not g.mtp]
    assert [g.kind for g in main] == [LayerKind.MLA]
    (mla,) = main
    # layer i's two attentions: i twice
    assert mla.layers == tuple(i for i in range(LAYERS) for _ in range(2))
    assert mla.count == 56 and mla.values_per_token == LATENT
    assert s.num_layers == LAYERS and s.decoder_layers == LAYERS
    # the checkpoint's MTP layer (num_nextn_predict_layers defaults to 1): one latent
    (draft,) = [g for g in s.groups if g.mtp]
    assert draft.kind is LayerKind.MLA and draft.layers == (LAYERS,)
    assert spec(num_nextn_predict_layers=0).mtp_layers == 0
    assert spec(num_nextn_predict_layers=2).mtp_layers == 2


def test_parameters_follow_the_checkpoint_and_transformers():
    p = spec().params
    heads, q_rank, kv_rank, rope, nope, v = 64, 1536, 512, 64, 128, 128
    mla = (H * q_rank + q_rank + q_rank * heads * (nope + rope) + H * (kv_rank + rope) + kv_rank
           + kv_rank * heads * (nope + v) + heads * v * H)
    dense = 3 * H * 12288
    experts = 512 * 3 * H * 2048
    router = H * 768 + 768
    layer = 2 * mla + 2 * dense + router + 4 * H
    assert p.total == LAYERS * (layer + experts) + 2 * VOCAB * H + H
    # transformers' LongcatFlashForCausalLM (5.25) built on the meta device has 560,664,958,976
    # parameters: the router's score-correction bias, a buffer there, is 768 a layer more here
    assert p.total == 560_664_958_976 + LAYERS * 768
    # the MTP layer: an MLA, a dense MLP, its norms, eh_proj and its own embedding; with it
    # the checkpoint is the published 562B
    assert p.mtp == mla + dense + 2 * H + 2 * H + 2 * H * H + H + VOCAB * H
    assert round((p.total + p.mtp) / 1e9) == 562
    assert p.experts == LAYERS * experts


def test_zero_computation_experts_leave_a_token_eight_real_experts_on_average():
    p = spec().params
    # 12 slots over 512 real and 256 identity experts: 8 real experts a token
    assert p.active_experts * 768 == p.experts * 12
    assert p.active_experts == LAYERS * 8 * 3 * H * 2048
    # the published average activation, about 27B
    assert 26.5e9 < p.active < 27.5e9
    # without zero experts all 12 slots are real
    assert spec(zero_expert_num=None).params.active_experts == LAYERS * 12 * 3 * H * 2048


def test_modules_carry_the_checkpoint_names():
    names = {n for m in spec().params.modules for n in m.names}
    for name in ("layers.0.self_attn.0.q_a_proj", "layers.27.self_attn.1.kv_b_proj",
                 "layers.3.mlps.1.down_proj", "layers.3.mlp.router.classifier",
                 "layers.3.mlp.router.e_score_correction_bias", "layers.3.mlp.experts",
                 "lm_head", "embed_tokens"):
        assert name in names


def test_a_config_without_num_layers_is_a_one_line_error():
    with pytest.raises(ConfigError) as e:
        spec(num_layers=None, num_hidden_layers=56)
    assert e.value.field == "num_layers" and "\n" not in str(e.value)


def request(s, *, tp=8, pp=1, mtp=False, lora=None):
    # its FP8 checkpoints are what fits one 8-GPU node
    return EngineRequest(spec=s, context=32768, sequences=1, weights="fp8",
                         cache=CacheOptions(kv_k=get_format("f16"), kv_v=get_format("f16"),
                                            mtp=mtp),
                         gpus=(find_gpu("h200"),), parallel=Parallel(tp=tp, pp=pp),
                         settings=EngineSettings() if lora is None else EngineSettings(lora=lora))


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_vllm_and_sglang_pools_hold_fifty_six_latents_a_token(engine):
    r = engine_plan(engine, request(spec(), tp=8))
    per_token = 56 * LATENT * 2
    # every tensor-parallel rank holds the whole latent of every layer
    assert r.kv_tokens * per_token <= r.kv_pool_bytes
    # vLLM's extensible cache commits each of the 56 layer regions in whole 2 MiB granules
    rounding = 56 * (2 << 20) if engine == "vllm" else 0
    assert (r.kv_tokens + (r.block_tokens or 1)) * per_token > r.kv_pool_bytes - rounding


def test_pipeline_stages_split_the_decoder_layers_with_both_their_attentions():
    one = engine_plan("vllm", request(spec(), tp=4, pp=2))
    # each stage caches 14 layers × 2 latents
    assert one.kv_tokens * 28 * LATENT * 2 <= one.kv_pool_bytes
    assert ((one.kv_tokens + one.block_tokens) * 28 * LATENT * 2
            > one.kv_pool_bytes - 28 * (2 << 20))


def test_vllm_with_mtp_names_the_draft_in_its_command_and_caches_its_latent():
    s = spec()
    plain = engine_plan("vllm", request(s))
    draft = engine_plan("vllm", request(s, mtp=True))
    assert "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'" \
        in draft.command
    assert "--speculative-config" not in plain.command
    # 57 latents a token instead of 56
    assert draft.kv_tokens < plain.kv_tokens


def test_vllm_sizes_lora_slots_for_its_linear_layers_and_experts():
    r = engine_plan("vllm", request(spec(), lora=LoRA(1, 16)))
    lora = r.extra["lora"]
    assert lora["bytes_per_card"] > 0
    # most of the slot is the 512 experts' adapters
    assert 0.9 < lora["expert_bytes_per_stage"][0] / lora["bytes_per_card"] < 1


@pytest.mark.parametrize(("engine", "needle"), [
    ("llama.cpp", "llama.cpp has no LongCat-Flash architecture"),
    ("trtllm", "no LongcatFlashForCausalLM model"),
])
def test_engines_without_a_longcat_model_refuse_it(engine, needle):
    with pytest.raises(InputError, match=needle) as e:
        engine_plan(engine, request(spec()))
    assert e.value.field == "engine"


def test_vllm_refuses_mtp_for_a_model_without_next_n_layers():
    with pytest.raises(InputError, match="has no MTP / next-n layers") as e:
        engine_plan("vllm", request(spec(num_nextn_predict_layers=0), mtp=True))
    assert e.value.field == "mtp"


def lite(**over):
    """LongCat-Flash-Lite's geometry (its FP8 and int4 republications' configs: 14 layers of
    hidden 3072, 256 experts beside 128 zero-computation ones, the n-gram embedding fields)."""
    fields = dict(model_type="longcat_flash_ngram",
                  architectures=["LongcatFlashNgramForCausalLM"], hidden_size=3072,
                  num_layers=14, num_hidden_layers=28, num_attention_heads=32,
                  ffn_hidden_size=6144, expert_ffn_hidden_size=1024, n_routed_experts=256,
                  zero_expert_num=128, max_position_embeddings=327680,
                  ngram_vocab_size_ratio=78, emb_neighbor_num=4, emb_split_num=4)
    return config(**{**fields, **over})


def test_lite_counts_its_n_gram_tables_beside_the_token_embedding():
    s = spec_from_config(lite(), name="lite", source="test")
    (mla,) = s.groups
    assert mla.count == 28 and s.num_layers == 14 and s.mtp_layers == 0
    p = s.params
    # 4 × (4 − 1) tables of 3072 / 12 = 256 values, table i of 78 × vocab + 2i + 1 rows
    rows = sum(78 * VOCAB + 2 * i + 1 for i in range(12))
    assert p.per_layer_embedding == rows * 256
    names = {n for m in p.modules for n in m.names}
    assert {"ngram_embeddings.embedders", "ngram_embeddings.post_projs"} <= names
    # the published 68.5B, 31.4B of them the n-gram tables
    assert round(p.total / 1e9, 1) == 68.6 and round(p.per_layer_embedding / 1e9, 1) == 31.4
    # a token reads a row of each table, not the tables
    without = spec_from_config(lite(ngram_vocab_size_ratio=None), name="l", source="t").params
    assert p.active - without.active == 12 * 256 * 3072


def test_lite_runs_on_vllm_and_the_other_engines_refuse_it():
    s = spec_from_config(lite(), name="lite", source="test")
    r = engine_plan("vllm", request(s, tp=2))
    assert r.kv_tokens > 0 and any("n-gram input buffer" in n for n in r.notes)
    for engine, needle in (("sglang", "could not establish"),
                           ("llama.cpp", "no LongCat-Flash-Lite architecture"),
                           ("trtllm", "no LongcatFlashNgramForCausalLM model")):
        with pytest.raises(InputError, match=needle):
            engine_plan(engine, request(s, tp=2))


def test_lite_tables_that_do_not_split_the_hidden_size_are_refused():
    with pytest.raises(ConfigError) as e:
        spec_from_config(lite(emb_split_num=5), name="lite", source="test")
    assert e.value.field == "emb_split_num" and "\n" not in str(e.value)


def test_sglangs_draft_layer_adds_one_latent_to_the_cell_of_fifty_six():
    r = engine_plan("sglang", request(spec(), mtp=True))
    # model_config's num_attention_layers is 2 × num_layers for LongCat-Flash: the NEXTN
    # draft's one layer adds 1/56 of the 56 latents' cell (576 values × 2 bytes)
    assert any("cell pays for 1 draft layer(s): 65,664 bytes a token per rank, 1,152 of them"
               in n for n in r.notes)
