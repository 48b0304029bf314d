"""Weights of ModelOpt and compressed-tensors checkpoints, module by module.

The configs in tests/data/quant are verbatim copies of github.com/ai-dynamo/aiconfigurator at
095f58a51c4ca8e61b66ec108d86f223f8d559ce, aic-core/src/aiconfigurator_core/model_configs/
(<owner>--<name>_config.json: huggingface.co/<owner>/<name> config.json;
<owner>--<name>_hf_quant_config.json: its hf_quant_config.json).
"""

import json
import shutil
import sys
from pathlib import Path

import pytest

from app.cli import main
from kvcore import load_model, model_catalog, weights_for
from kvcore.quant import NVFP4, W4A16_NVFP4, parse_quant

DATA = Path(__file__).parent / "data" / "quant"
QWEN3_235B = "nvidia--Qwen3-235B-A22B-NVFP4"


def pair(tmp_path, stem, *, sidecar=True):
    """A checkpoint folder: config.json, and hf_quant_config.json where asked."""
    folder = tmp_path / stem
    folder.mkdir()
    shutil.copy(DATA / f"{stem}_config.json", folder / "config.json")
    if sidecar:
        shutil.copy(DATA / f"{stem}_hf_quant_config.json", folder / "hf_quant_config.json")
    return folder


def rule_of(spec, name):
    module = next(m for m in spec.params.modules if name in m.names)
    return spec.quant.rule_for(module)


def test_rule_bytes_count_every_stored_tensor():
    # a 4096 × 4096 NVFP4 matrix: 8,388,608 B of e2m1 pairs, one e4m3 scale per 16 weights
    # (1,048,576 B), fp32 weight_scale_2 and input_scale (8 B)
    assert NVFP4.bytes(4096 * 4096, 4096, 1) == 8_388_608 + 1_048_576 + 8
    # weight-only NVFP4 has no input_scale
    assert W4A16_NVFP4.bytes(4096 * 4096, 4096, 1) == 8_388_608 + 1_048_576 + 4


def test_modules_add_up_to_the_parameter_counts():
    configs = [e.id for e in model_catalog()] + [str(p) for p in DATA.glob("*_config.json")
                                                 if "hf_quant" not in p.name]
    for ref in configs:
        spec = load_model(ref)
        p = spec.params
        if not p.modules:
            continue
        assert sum(m.params for m in p.modules) == p.total, ref
        assert sum(m.active for m in p.modules) == p.active, ref


def test_qwen3_235b_nvfp4_from_hf_quant_config(tmp_path):
    spec = load_model(str(pair(tmp_path, QWEN3_235B)))
    w = weights_for(spec)
    # hidden 4096, 94 layers, 64 query / 4 KV heads of 128, 128 experts of 1536, vocab 151,936,
    # untied; NVFP4 everywhere but the routers and lm_head (exclude_modules), embeddings and
    # norms (not linear layers). Per layer:
    #   q, o 4096×8192: 16,777,216 + 2,097,152 + 8 = 18,874,376 B each
    #   k, v 4096×512:   1,048,576 +   131,072 + 8 =  1,179,656 B each
    #   experts 128×3×4096×1536 = 2,415,919,104 weights:
    #     1,207,959,552 + 150,994,944 + 384×8 = 1,358,957,568 B
    #   router 4096×128 in bf16: 1,048,576 B; two norms: 16,384 B
    layer = 2 * 18_874_376 + 2 * 1_179_656 + 1_358_957_568 + 1_048_576 + 16_384
    assert layer == 1_400_130_592
    # embed_tokens and lm_head, 151,936×4096 in bf16 each
    assert w.bytes == 94 * layer + 2 * 151_936 * 4096 * 2 == 134_101_595_072
    assert (w.format, w.source) == ("nvfp4 (modelopt)", "config estimate")
    assert w.head_bytes == 151_936 * 4096 * 2
    # a public design note that loads nvidia/Qwen3-235B-A22B-NVFP4 at revision
    # 21cfa2c9e152032eb60647ee7b46a2bbcd8d76d2 tensor by tensor (uint8 weight, e4m3
    # weight_scale, fp32 weight_scale_2 and input_scale) calls it "the complete 134 GB model"
    assert abs(w.bytes / 134e9 - 1) < 0.005
    # the same pair named as aiconfigurator names it, side by side
    named = load_model(str(DATA / f"{QWEN3_235B}_config.json"))
    assert weights_for(named).bytes == w.bytes
    # the routed experts in NVFP4, 8 of 128 read a token: a step of 16 tokens reads the
    # share of them any token routes to
    assert w.expert_bytes == 94 * 1_358_957_568
    assert w.active_expert_bytes == pytest.approx(w.expert_bytes * 8 / 128, rel=1e-6)
    assert w.step_bytes(16) - w.active_bytes == pytest.approx(
        w.expert_bytes * (1 - (120 / 128) ** 16) - w.active_expert_bytes, rel=1e-6)


def test_config_alone_says_nothing_of_the_quantization(tmp_path):
    # config.json of a ModelOpt checkpoint carries no quantization_config: without its
    # hf_quant_config.json the checkpoint is what torch_dtype says
    spec = load_model(str(pair(tmp_path, QWEN3_235B, sidecar=False)))
    assert spec.quant is None
    assert weights_for(spec).format == "bf16"


def test_fp8_kv_calibration_is_noted(tmp_path, capsys):
    folder = pair(tmp_path, QWEN3_235B)
    assert main([str(folder), "--ctx", "8k"]) == 0
    out = capsys.readouterr().out
    assert "nvfp4 (modelopt), config estimate" in out
    assert "calibrated for an FP8 KV cache" in out and "--kv fp8" in out
    assert main([str(folder), "--ctx", "8k", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["weights"]["format"] == "nvfp4 (modelopt)"
    assert any("FP8 KV cache" in n for n in data["notes"])


def test_qwen36_27b_mixed_precision_from_quantized_layers():
    spec = load_model(str(DATA / "nvidia--Qwen3.6-27B-NVFP4_config.json"))
    w = weights_for(spec)
    assert w.format == "mixed fp8+nvfp4 w4a16 (modelopt)"
    # hidden 5120, 64 layers (48 Gated DeltaNet, 16 attention), MLP 17,408, vocab 248,320.
    # MLP gate/up/down in W4A16 NVFP4, 5120×17408 = 89,128,960 weights each:
    #   44,564,480 + 5,570,560 + 4 = 50,135,044 B; × 3 × 64 layers
    mlp = 3 * 64 * 50_135_044
    # DeltaNet: in_proj_qkv 5120×10240, in_proj_z and out_proj 5120×6144 in FP8 (+ 8 B each);
    # in_proj_b, in_proj_a 5120×48 and conv1d 10240×4 not listed: bf16
    gdn = 48 * ((52_428_800 + 8) + 2 * (31_457_280 + 8) + 2 * 2 * 245_760 + 2 * 40_960)
    # attention (output gate: q has 2×24×256 rows): q 5120×12288, k, v 5120×1024, o 6144... FP8
    attn = 16 * ((62_914_560 + 8) + 2 * (5_242_880 + 8) + (31_457_280 + 8))
    norms = 64 * 2 * 5120 * 2
    embed = 248_320 * 5120 * 2
    # lm_head is listed too: W4A16 NVFP4
    head = 1_271_398_400 // 2 + 1_271_398_400 // 16 + 4
    vision = 2 * spec.params.encoder
    assert w.bytes == mlp + gdn + attn + norms + embed + head + vision == 21_071_410_564
    assert rule_of(spec, "layers.0.linear_attn.in_proj_b") is None
    assert rule_of(spec, "layers.3.self_attn.q_proj").name == "fp8"


def test_qwen36_35b_matches_the_model_card():
    # NVIDIA's model card for nvidia/Qwen3.6-35B-A3B-NVFP4 (as quoted by
    # https://www.creeta.com/en/qwen3-6-35b-nvfp4-vllm-guide-2026/): "3.06× reduction in disk
    # footprint ... from roughly 71 GB to ~23 GB". The checkpoint holds its MTP layer (bf16,
    # excluded by 'mtp*'), so it is counted here.
    spec = load_model(str(DATA / "nvidia--Qwen3.6-35B-A3B-NVFP4_config.json"))
    nvfp4 = weights_for(spec, mtp=True).bytes
    bf16 = weights_for(spec, "bf16", mtp=True).bytes
    assert abs(nvfp4 / 23e9 - 1) < 0.025
    assert abs(bf16 / nvfp4 / 3.06 - 1) < 0.01


def test_deepseek_v32_exclusions_reach_single_projections(tmp_path):
    spec = load_model(str(pair(tmp_path, "nvidia--DeepSeek-V3.2-NVFP4")))
    # exclude_modules names q_a, q_b, kv_a, kv_b and indexer* of every layer, not o_proj
    assert rule_of(spec, "layers.5.self_attn.kv_b_proj") is None
    assert rule_of(spec, "layers.5.self_attn.q_a_proj") is None
    assert rule_of(spec, "layers.5.self_attn.indexer.wk") is None
    assert rule_of(spec, "layers.5.self_attn.o_proj") is NVFP4
    assert rule_of(spec, "layers.5.mlp.experts") is NVFP4
    assert rule_of(spec, "layers.5.mlp.shared_experts") is NVFP4
    assert rule_of(spec, "layers.0.mlp.gate_proj") is NVFP4
    # DeepSeek's router is a bare weight, no linear layer
    assert rule_of(spec, "layers.5.mlp.gate") is None
    # model.layers.61* is the next-n layer: excluded (bf16), no note about it
    assert not any("exclusions" in n for n in spec.weight_notes)


def test_nemotron_nano_exclusions_by_block(tmp_path):
    spec = load_model(str(pair(tmp_path, "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4")))
    assert rule_of(spec, "layers.4.mixer.in_proj") is None
    assert rule_of(spec, "layers.5.mixer.q_proj") is None
    assert rule_of(spec, "layers.0.mixer.in_proj") is NVFP4
    assert rule_of(spec, "layers.1.mixer.experts") is NVFP4


def test_llama_fp8_per_tensor(tmp_path):
    spec = load_model(str(pair(tmp_path, "nvidia--Llama-3.1-70B-Instruct-FP8")))
    p = spec.params
    vocab_hidden = 128_256 * 8192
    # every linear layer but lm_head in FP8 with an fp32 weight_scale and input_scale
    # (80 layers × 7 matrices); embeddings, lm_head and norms (80 × 2 × 8192) in bf16
    norms = 80 * 2 * 8192
    linear = p.total - 2 * vocab_hidden - norms
    assert weights_for(spec).bytes == linear + 80 * 7 * 8 + 2 * (2 * vocab_hidden + norms)
    assert weights_for(spec).format == "fp8 (modelopt)"


def test_kimi_k25_int4_experts_compressed_tensors():
    spec = load_model(str(DATA / "moonshotai--Kimi-K2.5_config.json"))
    w = weights_for(spec)
    assert w.format == "int4 g32 (compressed-tensors)"
    # only the routed experts are int4 (ignore: lm_head, self_attn, shared_experts and the
    # dense MLP's projections): 60 MoE layers × 384 experts × 3 × 7168×2048 weights, packed
    # 8 to an int32 (0.5 B), a bf16 scale per 32 (symmetric: no zero point) and an int64[2]
    # weight_shape per matrix; everything else stays bf16
    experts = 384 * 3 * 7168 * 2048
    quantized = experts // 2 + experts // 32 * 2 + 384 * 3 * 16
    assert w.bytes == 60 * quantized + 2 * (spec.params.total - 60 * experts)
    # what the checkpoint keeps for its FP8 KV cache: nothing (kv_cache_scheme null)
    assert not spec.weight_notes


def test_glm51_modelopt_in_config_json():
    spec = load_model(str(DATA / "nvidia--GLM-5.1-NVFP4_config.json"))
    assert spec.quant.label == "nvfp4 (modelopt)" and spec.quant.kv_cache == "fp8"
    # 'model.layers.0*' and 'model.layers.1.*' exclude the dense layers whole
    assert rule_of(spec, "layers.0.mlp.gate_proj") is None
    assert rule_of(spec, "layers.1.self_attn.o_proj") is None
    assert rule_of(spec, "layers.10.mlp.experts") is NVFP4
    assert rule_of(spec, "layers.10.mlp.shared_experts") is None


def test_unknown_algorithms_are_said_not_guessed():
    scheme, note = parse_quant({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"})
    assert scheme is None and "not understood" in note
    scheme, note = parse_quant(None, {"producer": {"name": "modelopt"},
                                      "quantization": {"quant_algo": "INT8_SQ"}})
    assert scheme is None and "hf_quant_config.json" in note
    # plain fp8 blocks and mxfp4 stay with the per-weight formats
    assert parse_quant({"quant_method": "fp8", "weight_block_size": [128, 128]}) == (None, None)


def fake_hub(monkeypatch, tmp_path, files):
    import types

    import kvcore.hub

    errors = types.SimpleNamespace(**{
        name: type(name, (Exception,), {}) for name in (
            "GatedRepoError", "RepositoryNotFoundError", "RevisionNotFoundError",
            "EntryNotFoundError", "LocalEntryNotFoundError")})
    asked = []

    def download(repo, filename, revision=None):
        asked.append(filename)
        if filename not in files:
            raise errors.EntryNotFoundError()
        path = tmp_path / filename.replace("/", "_")
        path.write_text(files[filename])
        return str(path)

    monkeypatch.setitem(sys.modules, "huggingface_hub",
                        types.SimpleNamespace(hf_hub_download=download, errors=errors))
    monkeypatch.setitem(sys.modules, "huggingface_hub.errors", errors)
    kvcore.hub._fetch.cache_clear()
    return asked


def test_hub_reads_hf_quant_config(monkeypatch, tmp_path):
    files = {"config.json": (DATA / f"{QWEN3_235B}_config.json").read_text(),
             "hf_quant_config.json": (DATA / f"{QWEN3_235B}_hf_quant_config.json").read_text()}
    fake_hub(monkeypatch, tmp_path, files)
    w = weights_for(load_model("someone/Qwen3-235B-A22B-NVFP4-copy"))
    assert (w.bytes, w.format) == (134_101_595_072, "nvfp4 (modelopt)")
    # with an index, its total is the weights; the label stays the quantization's
    files["model.safetensors.index.json"] = json.dumps({"metadata": {"total_size": 134_000_000_000}})
    fake_hub(monkeypatch, tmp_path, files)
    w = weights_for(load_model("someone/Qwen3-235B-A22B-NVFP4-copy"))
    assert (w.bytes, w.format, w.source) == (134_000_000_000, "nvfp4 (modelopt)",
                                             "safetensors index")


def test_hub_asks_for_hf_quant_config_only_without_quantization_config(monkeypatch, tmp_path):
    config = (DATA / "nvidia--GLM-5.1-NVFP4_config.json").read_text()
    asked = fake_hub(monkeypatch, tmp_path, {"config.json": config})
    assert weights_for(load_model("nvidia/GLM-5.1-NVFP4")).format == "nvfp4 (modelopt)"
    assert "hf_quant_config.json" not in asked
    plain = next(e for e in model_catalog() if e.id == "qwen3-8b").config()
    asked = fake_hub(monkeypatch, tmp_path, {"config.json": json.dumps(plain)})
    assert weights_for(load_model("someone/Qwen3-8B-copy")).format == "bf16"
    assert "hf_quant_config.json" in asked


def test_api_labels_the_quantization(tmp_path):
    from fastapi.testclient import TestClient

    from app.web import create_app

    config = json.loads((DATA / "nvidia--GLM-5.1-NVFP4_config.json").read_text())
    r = TestClient(create_app()).post("/api/v1/plan", json={"config": config, "context": 8192})
    assert r.status_code == 200, r.text
    assert r.json()["weights"]["format"] == "nvfp4 (modelopt)"


def _fp8_calibrated_plans(tmp_path, capsys, engine):
    """An engine's JSON reports for a ModelOpt checkpoint calibrated for an FP8 KV cache, in 16
    bits and in fp8, and for the same model without the calibration, in 16 bits."""
    folder = str(pair(tmp_path, "nvidia--Llama-3.1-70B-Instruct-FP8"))
    args = ["--ctx", "32k", "--engine", engine, "--gpu", "h200", "--json"]
    reports = []
    for model, kv in ((folder, []), (folder, ["--kv", "fp8"]), ("llama-3.1-70b", [])):
        assert main([model, *args, *kv]) == 0
        reports.append(json.loads(capsys.readouterr().out)["engine_report"])
    return reports


def test_vllm_names_a_16_bit_cache_for_fp8_calibrated_checkpoints(tmp_path, capsys):
    # vLLM resolves --kv-cache-dtype auto to fp8_e4m3 for a ModelOpt checkpoint whose
    # kv_cache_quant_algo is FP8 (utils/torch_utils.py resolve_kv_cache_dtype_string): the
    # 16-bit plan must say bfloat16, and its bytes are the 16-bit ones
    report, fp8, plain = _fp8_calibrated_plans(tmp_path, capsys, "vllm")
    assert "--kv-cache-dtype bfloat16" in report["command"]
    assert any("kv_cache_quant_algo FP8" in n for n in report["notes"])
    assert "--kv-cache-dtype fp8" in fp8["command"]
    # Llama-3.1-70B: 80 layers × 8 KV heads × 128 × (K + V): 327,680 B a token in 16 bits,
    # 163,840 in fp8; vLLM's pool holds whole pages of 64 tokens, each layer's region in whole
    # 2 MiB granules
    from kvcore.engines.vllm import blocks_within
    for r, row in ((report, 327_680), (fp8, 163_840)):
        page = row // 80 * 64
        assert r["kv_tokens"] == blocks_within(r["kv_pool_bytes"], page * 80, [page] * 80) * 64
    # a checkpoint without the calibration keeps auto
    assert "--kv-cache-dtype" not in plain["command"]


def test_sglang_names_a_16_bit_cache_for_fp8_calibrated_checkpoints(tmp_path, capsys):
    # SGLang's configure_kv_cache_dtype turns auto into float8_e4m3fn where the loaded
    # ModelOpt quant config's kv_cache_quant_algo is FP8: a 16-bit plan passes bf16 and logs a
    # bfloat16 pool of 16-bit rows; --kv fp8 passes fp8_e4m3 and half the bytes a token
    report, fp8, plain = _fp8_calibrated_plans(tmp_path, capsys, "sglang")
    assert "--kv-cache-dtype bf16" in report["command"]
    assert any("SGLang's --kv-cache-dtype auto an fp8 cache" in n for n in report["notes"])
    assert report["extra"]["cell_bytes"] == 327_680
    assert "dtype: torch.bfloat16, #tokens: " in report["log_lines"][-1]
    assert "--kv-cache-dtype fp8_e4m3" in fp8["command"]
    assert fp8["extra"]["cell_bytes"] == 163_840
    assert "dtype: torch.float8_e4m3fn, #tokens: " in fp8["log_lines"][-1]
    assert not any("auto an fp8 cache" in n for n in fp8["notes"])
    # a checkpoint without the calibration keeps auto
    assert "--kv-cache-dtype" not in plain["command"]


def test_trtllm_refuses_a_16_bit_cache_for_fp8_calibrated_checkpoints(tmp_path, capsys):
    # TensorRT-LLM keeps the checkpoint's kv_cache_quant_algo under kv_cache_config.dtype auto
    # and has no 16-bit dtype to override it: a 16-bit plan is refused in one line, fp8 plans
    folder = str(pair(tmp_path, "nvidia--Llama-3.1-70B-Instruct-FP8"))
    args = [folder, "--ctx", "32k", "--engine", "trtllm", "--gpu", "h200"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "kv_cache_quant_algo FP8" in err and "--kv fp8" in err
    assert main([*args, "--kv", "fp8", "--json"]) == 0
    fp8 = json.loads(capsys.readouterr().out)["engine_report"]
    assert fp8["fits"] and fp8["kv_tokens"] > 0


def test_catalog_bundles_the_hf_quant_config():
    # the catalog's copy prices as the Hub's pair does
    w = weights_for(load_model("nvidia/Qwen3-235B-A22B-NVFP4"))
    assert (w.bytes, w.format) == (134_101_595_072, "nvfp4 (modelopt)")


def test_web_page_labels_the_quantization():
    from fastapi.testclient import TestClient

    from app.web import create_app

    r = TestClient(create_app()).get("/?model=qwen3-235b-a22b-nvfp4&context=8k")
    assert r.status_code == 200
    assert "nvfp4 (modelopt)" in r.text and "FP8 KV cache" in r.text


def test_compressed_tensors_groups_by_regex_target():
    # an llm-compressor recipe as RedHatAI publishes them: NVFP4 MLPs, FP8 128×128-block
    # attention, lm_head ignored; on Qwen3-8B (hidden 4096, 36 layers, 32 query / 8 KV heads
    # of 128, MLP 12,288, vocab 151,936 untied, bf16)
    config = next(e for e in model_catalog() if e.id == "qwen3-8b").config()
    nvfp4 = {"num_bits": 4, "type": "float", "group_size": 16, "strategy": "tensor_group"}
    config["quantization_config"] = {
        "quant_method": "compressed-tensors", "format": "mixed-precision",
        "config_groups": {
            "group_0": {"targets": ["re:.*mlp.*proj"], "weights": nvfp4,
                        "input_activations": nvfp4, "format": "nvfp4-pack-quantized"},
            "group_1": {"targets": ["re:.*self_attn.*proj"], "format": "float-quantized",
                        "weights": {"num_bits": 8, "type": "float", "strategy": "block",
                                    "block_structure": [128, 128]}}},
        "ignore": ["lm_head"], "kv_cache_scheme": None}
    w = weights_for(load_model(config))
    assert w.format == "nvfp4+fp8 block 128 (compressed-tensors)"
    # MLP 3 × 4096×12288: 25,165,824 + 3,145,728 (e4m3 per 16) + 8 (weight and input
    # global scales, fp32)
    mlp = 3 * (25_165_824 + 3_145_728 + 8)
    # attention in fp8 with a bf16 scale per 128×128 block: q, o 4096×4096 (1,024 blocks),
    # k, v 4096×1024 (256 blocks)
    attn = 2 * (16_777_216 + 1024 * 2) + 2 * (4_194_304 + 256 * 2)
    norms = 2 * 4096 * 2
    assert w.bytes == 36 * (mlp + attn + norms) + 2 * 151_936 * 4096 * 2


def test_gemma4_experts_sit_beside_the_dense_mlp(tmp_path):
    spec = load_model(str(pair(tmp_path, "nvidia--Gemma-4-26B-A4B-NVFP4")))
    # enable_moe_block: every layer runs its dense MLP (2816 × 2112, gated) beside 128
    # experts of 704; the exclusions name the MLP (mlp*) and the router, not the experts
    dense = [m for m in spec.params.modules if m.names[0].startswith("layers.0.mlp.")]
    assert sum(m.params for m in dense) == 3 * 2816 * 2112
    assert rule_of(spec, "layers.0.mlp.down_proj") is None
    assert rule_of(spec, "layers.0.router") is None
    assert rule_of(spec, "layers.0.experts") is NVFP4
    assert not any("exclusions" in n for n in spec.weight_notes)


def test_deepseek_v4_nvfp4_experts_only():
    # quant_method fp8 with MIXED_PRECISION quantized_layers: the routed experts (layers.N.
    # ffn.experts) NVFP4; attention, shared experts and head ignored; the router a bare weight
    spec = load_model(str(DATA / "nvidia--DeepSeek-V4-Flash-NVFP4_config.json"))
    assert rule_of(spec, "layers.3.ffn.experts") is NVFP4
    assert rule_of(spec, "layers.3.attn") is None
    assert rule_of(spec, "layers.3.ffn.shared_experts") is None
    assert rule_of(spec, "head") is None
    p = spec.params
    # experts: 4 bits + an e4m3 scale per 16 + 8 B per matrix; the rest bf16
    experts = sum(m.params for m in p.modules if m.role == "experts")
    matrices = sum(m.matrices for m in p.modules if m.role == "experts")
    assert weights_for(spec).bytes == (experts // 2 + experts // 16 + 8 * matrices
                                       + 2 * (p.total - experts))


def test_catalog_original_weights_ignore_the_copied_quantization():
    # gemma-4-31b-it is Google's bf16 model, its config copied from NVIDIA's NVFP4 checkpoint
    spec = load_model("gemma-4-31b-it")
    assert spec.quant is None and weights_for(spec).format == "bf16"


def test_hunyuan_shared_mlp_is_named_as_its_checkpoint_names_it():
    # HunYuan's shared MLP is layers.N.mlp.shared_mlp (vLLM hunyuan_v1.py): an exclusion
    # list naming it keeps it bf16. Hunyuan-A13B: 32 layers, hidden 4096, a shared MLP of
    # 3 × 4096 × 3072 (intermediate_size × num_shared_expert 1)
    def spec(ignore):
        config = next(e for e in model_catalog() if e.id == "hunyuan-a13b-instruct").config()
        nvfp4 = {"num_bits": 4, "type": "float", "group_size": 16, "strategy": "tensor_group"}
        config["quantization_config"] = {
            "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": nvfp4,
                                          "input_activations": nvfp4}},
            "ignore": ["lm_head", "re:.*mlp.gate$", *ignore], "kv_cache_scheme": None}
        return load_model(config)

    kept, quantized = spec(["re:.*shared_mlp.*"]), spec([])
    assert rule_of(kept, "layers.0.mlp.shared_mlp") is None
    assert rule_of(quantized, "layers.0.mlp.shared_mlp") == NVFP4
    assert rule_of(kept, "layers.0.mlp.experts") == NVFP4
    assert not any("exclusions" in n for n in kept.weight_notes)
    shared = 3 * 4096 * 3072
    assert weights_for(kept).bytes - weights_for(quantized).bytes \
        == 32 * (2 * shared - NVFP4.bytes(shared, 2 * 3072 + 4096, 3))
