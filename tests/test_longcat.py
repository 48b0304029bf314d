"""LongCat-Flash: two MLA attentions and two dense MLPs in every layer beside a MoE whose router
also scores zero-computation experts (identity, no weights)."""

import json
from pathlib import Path

import pytest

from kvcore import CacheOptions, ConfigError, InputError, find_gpu, get_format
from kvcore.engines import EngineRequest, EngineSettings, engine_plan
from kvcore.engines.vllm_lora import LoRA
from kvcore.hf import spec_from_config
from kvcore.model import LayerKind
from kvcore.parallel import Parallel

#: LongCat-Flash-Chat's config.json as mlx-community/LongCat-Flash-Chat-bf16 republishes it
CONFIG = Path(__file__).parent / "data" / "longcat-flash-chat-config.json"
H, VOCAB, LAYERS = 6144, 131072, 28
LATENT = 512 + 64


def config(**over):
    cfg = json.loads(CONFIG.read_text())
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
    assert (r.kv_tokens + (r.block_tokens or 1)) * per_token > r.kv_pool_bytes


def test_pipeline_stages_split_the_decoder_layers_with_both_their_attentions():
    one = engine_plan("vllm", request(spec(), tp=4, pp=2))
    # each stage caches 14 layers × 2 latents
    assert one.kv_tokens * 28 * LATENT * 2 <= one.kv_pool_bytes
    assert (one.kv_tokens + one.block_tokens) * 28 * LATENT * 2 > one.kv_pool_bytes


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
