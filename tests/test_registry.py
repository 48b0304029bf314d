"""Which architectures each engine loads (kvcore/engines/registry.py): a class of its own, its
Transformers backend, the checkpoint's remote code, or nothing, read from the engines' tables
in kvcore/data/registries.json; and what the CLI and the API say for each."""

import json
from dataclasses import replace

import pytest

from app.cli import main
from kvcore import CacheOptions, InputError, find_gpu, load_model, spec_from_config
from kvcore.engines import EngineRequest, engine_plan, registry
from kvcore.engines.registry import Load, load_path
from kvcore.parallel import Parallel

LLAMA_LIKE = {"model_type": "helium", "hidden_size": 2048, "num_hidden_layers": 24,
              "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
              "intermediate_size": 8192, "vocab_size": 64000, "max_position_embeddings": 32768,
              "torch_dtype": "bfloat16"}


def spec_of(arch, **extra):
    return spec_from_config({**LLAMA_LIKE, "architectures": [arch], **extra}, name="t",
                            source="test")


def plan(engine, spec, gpu="h100"):
    return engine_plan(engine, EngineRequest(spec=spec, context=8192, sequences=1,
                                             cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                             gpus=(find_gpu(gpu),)))


def test_tables_hold_each_engine_release_and_known_classes():
    # spot checks against the sources named in each table: vLLM 0.34.0's registry has ZAYA
    # and LFM3 (new in 0.34), SGLang 0.5.23 has no LFM3 module, TensorRT-LLM's index has no
    # MiMo class, Transformers 5.19 exports Helium, llama.cpp's converter LFM2
    assert registry.registry("vllm").release == "0.34.0"
    assert registry.registry("sglang").release == "0.5.23"
    assert {"ZayaForCausalLM", "Lfm3ForCausalLM"} <= registry.registry("vllm").classes
    assert "Lfm3ForCausalLM" not in registry.registry("sglang").classes
    assert "MiMoV2FlashForCausalLM" not in registry.registry("trtllm").classes
    assert "HeliumForCausalLM" in registry.registry("transformers").classes
    assert "Lfm2ForCausalLM" in registry.registry("llama.cpp").classes
    for name in ("vllm", "sglang", "llama.cpp", "trtllm", "transformers"):
        assert len(registry.registry(name).classes) > 50
        assert "LlamaForCausalLM" in registry.registry(name).classes


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_class_nobody_registers_is_refused_where_a_backend_would_be_tried(engine):
    spec = spec_of("FooBarForCausalLM")
    assert load_path(engine, spec) is Load.NONE
    with pytest.raises(InputError, match=r"does not run FooBarForCausalLM: its model registry "
                       r"has no such class, Transformers 5\.19\.0 exports none") as e:
        plan(engine, spec)
    assert e.value.field == "engine"
    assert "--engine raw" in str(e.value)
    # raw sizes it all the same
    assert plan("raw", spec).fits


def test_tensorrt_llm_has_no_backend_to_fall_back_to():
    # Helium is a Transformers class, but TensorRT-LLM's PyTorch backend loads only its index
    spec = spec_of("HeliumForCausalLM")
    assert load_path("trtllm", spec, fallback=False) is Load.NONE
    with pytest.raises(InputError, match=r"PyTorch backend has no HeliumForCausalLM model "
                       r"\(helium; not in tensorrt_llm/_torch/models/_arch_index\.py") as e:
        plan("trtllm", spec)
    assert e.value.field == "engine"


@pytest.mark.parametrize(("engine", "release"), [("vllm", "0.34.0"), ("sglang", "0.5.23")])
def test_a_transformers_class_runs_through_the_backend_with_a_note(engine, release):
    spec = spec_of("HeliumForCausalLM")
    assert load_path(engine, spec) is Load.TRANSFORMERS
    notes = plan(engine, spec).notes
    assert notes[0].startswith(f"{'vLLM' if engine == 'vllm' else 'SGLang'} {release} has no "
                               "model of its own for HeliumForCausalLM: it loads it through its "
                               "Transformers backend, from the class Transformers exports")


def test_remote_code_needs_trust_remote_code():
    spec = spec_of("FooBarForCausalLM",
                   auto_map={"AutoConfig": "x--c.FooConfig",
                             "AutoModelForCausalLM": "x--m.FooBarForCausalLM"})
    assert spec.remote_code
    assert load_path("vllm", spec) is Load.REMOTE_CODE
    note = plan("vllm", spec).notes[0]
    assert ("the checkpoint's own modeling code (auto_map; the command passes "
            "--trust-remote-code)") in note
    # and the launch commands trust it
    for engine in ("vllm", "sglang"):
        assert plan(engine, spec).command.endswith(" --trust-remote-code")
    assert "--trust-remote-code" not in plan("vllm", spec_of("HeliumForCausalLM")).command
    # an auto_map without a model class (a tokenizer's, say) is not remote modeling code
    assert not spec_of("FooBarForCausalLM", auto_map={"AutoTokenizer": "x--t.T"}).remote_code


def test_own_classes_get_no_note():
    spec = spec_of("LlamaForCausalLM")
    for engine in ("vllm", "sglang", "llama.cpp", "trtllm"):
        assert load_path(engine, spec) is Load.OWN
        assert not any("has no model of its own" in n or "registers no" in n
                       for n in plan(engine, spec).notes)


def test_sglang_reads_olmo3_as_its_olmo2_class():
    # configs/olmo3.py swaps Olmo3ForCausalLM for Olmo2ForCausalLM before the registry looks
    # it up; 0.5.23 has no Olmo3 module of its own
    assert "Olmo3ForCausalLM" not in registry.registry("sglang").classes
    assert load_path("sglang", load_model("olmo-3.1-32b-instruct")) is Load.OWN


def test_llama_cpp_looks_the_text_model_up_and_notes_a_missing_one():
    # LFM2-VL's top-level class is the mmproj converter's; the text model converts as
    # text_config's Lfm2ForCausalLM
    lfm = load_model("lfm2.5-vl-1.6b")
    assert lfm.architecture == "Lfm2VlForConditionalGeneration"
    assert lfm.text_architecture == "Lfm2ForCausalLM"
    assert load_path("llama.cpp", lfm, fallback=False) is Load.OWN
    # a class the converter table lacks is noted, not refused: its master trails the table
    notes = plan("llama.cpp", spec_of("FooBarForCausalLM")).notes
    assert notes[0].startswith("llama.cpp's converter registers no FooBarForCausalLM in the "
                               "table read (conversion/__init__.py TEXT_MODEL_MAP @00bdaa10)")
    # classes added after that table, which kvplan's llama.cpp rules follow, pass
    assert load_path("llama.cpp", load_model("laguna-xs.2"), fallback=False) is Load.OWN


def test_a_config_without_architectures_is_not_looked_up():
    spec = replace(spec_of("FooBarForCausalLM"), architecture="")
    assert load_path("vllm", spec) is Load.UNKNOWN
    assert plan("vllm", spec).fits


def test_vllm_refuses_the_bundled_step37_flash_config():
    # the bundled (flattened) config names Step3p7FlashForCausalLM: vLLM 0.34 registers only
    # the VLM Step3p7ForConditionalGeneration, Transformers exports neither name, and there is
    # no auto_map; SGLang and TensorRT-LLM refuse it the same way
    with pytest.raises(InputError, match="vLLM 0.34.0 does not run Step3p7FlashForCausalLM"):
        engine_plan("vllm", EngineRequest(spec=load_model("step-3.7-flash"), context=8192,
                                          sequences=1, cache=CacheOptions(kv_k="f16", kv_v="f16"),
                                          gpus=(find_gpu("h200"),) * 4,
                                          parallel=Parallel(tp=4)))


def test_cli_refuses_in_one_line_and_the_api_with_a_json_422(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA_LIKE, "architectures": ["FooBarForCausalLM"]}))
    assert main([str(path), "--engine", "vllm", "--gpu", "h100"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "does not run FooBarForCausalLM" in err
    from fastapi.testclient import TestClient

    from app.web import create_app
    r = TestClient(create_app()).post("/api/v1/plan", json={
        "config": {**LLAMA_LIKE, "architectures": ["FooBarForCausalLM"]},
        "engine": "sglang", "gpu": "h100"})
    assert r.status_code == 422
    assert "SGLang 0.5.23 does not run FooBarForCausalLM" in json.dumps(r.json())


def test_vllm_names_the_classes_its_registry_maps_to_the_transformers_backend():
    # 0.34.0's _TRANSFORMERS_SUPPORTED_MODELS: OLMo 3 has no vLLM model of its own
    assert "Olmo3ForCausalLM" in registry.registry("vllm").backend
    olmo = load_model("olmo-3.1-32b-instruct")
    assert load_path("vllm", olmo) is Load.TRANSFORMERS
    assert load_path("sglang", olmo) is Load.OWN
    notes = plan("vllm", olmo, gpu="h200").notes
    assert ("vLLM 0.34.0 serves Olmo3ForCausalLM through its Transformers backend (its "
            "registry maps the class there, not to a model of its own)") in notes
    assert not any("serves" in n and "Transformers backend" in n
                   for n in plan("vllm", load_model("llama-3.1-8b")).notes)


def test_vllm_lora_wraps_the_input_embedding_of_a_backend_model():
    # transformers/base.py Base.embedding_modules: embed_tokens only, no lm_head, for a class
    # the backend loads for want of vLLM's own (Transformers' class or remote code)
    from kvcore.engines.vllm_lora import embedding_roles
    assert embedding_roles(spec_of("HeliumForCausalLM")) == {"embed"}
    remote = spec_of("FooBarForCausalLM", auto_map={"AutoModelForCausalLM": "x--m.FooBar"})
    assert embedding_roles(remote) == {"embed"}
    # a class vLLM has: its own embedding_modules (Llama: embed_tokens and lm_head)
    assert embedding_roles(load_model("llama-3.1-8b")) == {"embed", "head"}
    assert embedding_roles(spec_of("FooBarForCausalLM")) == frozenset()


def test_vllm_and_sglang_load_any_registered_entry_of_architectures():
    # resolve_model_cls (vLLM) and get_model_architecture (SGLang) try each entry in turn;
    # TensorRT-LLM's index and llama.cpp's converter look the first up
    spec = spec_from_config({**LLAMA_LIKE, "architectures": ["FooBarForCausalLM",
                                                             "LlamaForCausalLM"]},
                            name="t", source="test")
    assert spec.architectures == ("FooBarForCausalLM", "LlamaForCausalLM")
    for engine in ("vllm", "sglang"):
        assert load_path(engine, spec) is Load.OWN
        assert plan(engine, spec).fits
    assert load_path("trtllm", spec, fallback=False) is Load.NONE


def test_the_hand_written_refusals_agree_with_the_engines_tables():
    # a class an engine refuses by name (its own tables of removed or missing models) is not
    # one its registry read from the same release holds
    from kvcore.engines import llamacpp, sglang, trtllm, vllm
    for name, table in (("vllm", vllm.UNSUPPORTED), ("sglang", sglang.UNSUPPORTED),
                        ("llama.cpp", llamacpp.UNSUPPORTED)):
        for arch, _ in table.values():
            assert not registry.registry(name).has(arch), (name, arch)
    for arch in (*trtllm.UNSUPPORTED_TYPES.values(), *trtllm.UNSUPPORTED_ARCHS):
        assert not registry.registry("trtllm").has(arch), arch
    for arch in sglang.UNREGISTERED_ARCHS:
        assert not registry.registry("sglang").has(arch), arch
    for arch in vllm.PREVIOUSLY_SUPPORTED:
        assert not registry.registry("vllm").has(arch), arch
