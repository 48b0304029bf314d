"""GGUF files as models: the header read into the config it stands for, the weights exact from
the tensor table, and clear refusals of what is not read."""

import io
import json
import struct
import sys
import types

import pytest
from ggufmake import U64, dense_model, nbytes, write_gguf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvcore
from app.cli import main
from kvcore import ConfigError, InputError, KvplanError, load_model
from kvcore.gguf import FILE_TYPES, GGML_TYPES, tensor_bytes
from kvcore.weights import weights_for


def run(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def qwen3_8b(tmp_path, name="qwen3-8b-q4_k_m.gguf", **kw):
    meta, tensors = dense_model("qwen3", layers=36, hidden=4096, heads=32, kv_heads=8,
                                head_dim=128, ffn=12288, vocab=151936, ctx=40960, **kw)
    path = tmp_path / name
    return path, write_gguf(path, meta, tensors), tensors


def test_a_dense_gguf_has_its_config_cache_and_exact_weights(tmp_path):
    path, total, tensors = qwen3_8b(tmp_path)
    spec, catalog = load_model(str(path)), load_model("qwen3-8b")
    # the cache of the config the file was converted from, to the byte
    assert spec.groups == catalog.groups
    for ctx in (1, 4097, 131072):
        assert (kvcore.cache_size(spec, ctx, 3).total_bytes
                == kvcore.cache_size(catalog, ctx, 3).total_bytes)
    w = weights_for(spec)
    embd = nbytes((4096, 151936), 12)
    head = nbytes((4096, 151936), 14)
    assert (w.bytes, w.source) == (total, f"GGUF tensors ({path.name})")
    assert w.format == "q4_k_m"
    # the output tensor (Q6_K) is larger than the token embedding (Q4_K): each is its own
    assert (w.input_bytes, w.head_bytes) == (embd, head)
    assert w.active_bytes == total - embd
    assert w.params == sum(_elements(s) for _, s, _ in tensors)


def _elements(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def test_a_moe_gguf_reads_only_the_routed_share_per_token(tmp_path):
    meta, tensors = dense_model("qwen3moe", layers=4, hidden=2048, heads=32, kv_heads=4,
                                head_dim=128, ffn=6144, vocab=1000, ctx=40960, experts=128,
                                used=8, expert_ffn=768)
    path = tmp_path / "moe.gguf"
    total = write_gguf(path, meta, tensors)
    w = weights_for(load_model(str(path)))
    experts = sum(nbytes(s, t) for n, s, t in tensors if "_exps." in n)
    assert experts == 4 * 3 * nbytes((2048, 768, 128), 12)
    assert w.bytes == total
    assert w.active_bytes == total - experts + experts * 8 // 128 - nbytes((2048, 1000), 12)
    # a step of several tokens reads the experts any of them routes to
    assert (w.expert_bytes, w.active_expert_bytes) == (experts, experts * 8 // 128)
    assert w.step_bytes(3) == (w.active_bytes - experts * 8 // 128
                               + round(experts * (1 - (1 - (experts * 8 // 128) / experts) ** 3)))


@pytest.mark.parametrize("arch,catalog,extra", [
    # Gemma 3: five sliding layers, then one full
    ("gemma3", "gemma-3-27b-it", {"gemma3.attention.sliding_window": 1024}),
    # gpt-oss: sliding and full in turn
    ("gpt-oss", "gpt-oss-20b", {"gpt-oss.attention.sliding_window": 128}),
    ("gemma2", "gemma-2-9b", {"gemma2.attention.sliding_window": 4096}),
])
def test_sliding_window_layers_follow_llama_cpp_s_pattern(tmp_path, arch, catalog, extra):
    cat = load_model(catalog)
    entry = next(e for e in kvcore.model_catalog() if e.id == catalog)
    cfg = entry.config()
    cfg = cfg.get("text_config", cfg)
    experts = cfg.get("num_local_experts", 0)
    meta, tensors = dense_model(
        arch, layers=cfg["num_hidden_layers"], hidden=cfg["hidden_size"],
        heads=cfg["num_attention_heads"], kv_heads=cfg["num_key_value_heads"],
        head_dim=cfg["head_dim"], ffn=cfg["intermediate_size"], vocab=256, ctx=131072,
        extra=extra, experts=experts, used=cfg.get("num_experts_per_tok", 0),
        expert_ffn=cfg["intermediate_size"] if experts else 0, quant=0, head_type=0)
    path = tmp_path / f"{arch}.gguf"
    write_gguf(path, meta, tensors)
    spec = load_model(str(path))
    assert spec.groups == cat.groups
    assert (kvcore.cache_size(spec, 50000, 2).total_bytes
            == kvcore.cache_size(cat, 50000, 2).total_bytes)


def test_an_mla_gguf_caches_the_latent(tmp_path):
    cat = load_model("deepseek-v2-lite-chat")
    meta, tensors = dense_model("deepseek2", layers=27, hidden=2048, heads=16, kv_heads=16,
                                head_dim=192, ffn=10944, vocab=102400, ctx=163840, quant=8,
                                head_type=8, extra={
                                    "deepseek2.attention.kv_lora_rank": 512,
                                    "deepseek2.rope.dimension_count": 64,
                                    "deepseek2.attention.value_length": 128,
                                    "deepseek2.leading_dense_block_count": 1})
    path = tmp_path / "dsv2.gguf"
    write_gguf(path, meta, tensors)
    spec = load_model(str(path))
    assert spec.model_type == "deepseek_v2"
    assert spec.groups == cat.groups
    # 576 values a token and layer, one "head"
    assert kvcore.cache_size(spec, 1000, 1).total_bytes == 27 * 576 * 2 * 1000


def test_a_split_model_sums_its_parts_from_any_part(tmp_path):
    meta, tensors = dense_model("llama", layers=4, hidden=512, heads=8, kv_heads=2,
                                head_dim=64, ffn=1024, vocab=1000, ctx=8192, quant=8)
    half = len(tensors) // 2
    base = {**meta, "split.count": 2}
    a = write_gguf(tmp_path / "m-00001-of-00002.gguf", {**base, "split.no": 0}, tensors[:half])
    b = write_gguf(tmp_path / "m-00002-of-00002.gguf", {"split.count": 2, "split.no": 1},
                   tensors[half:])
    # the output tensor is in the second part: the head is untied all the same
    assert tensors[-1][0] == "output.weight"
    for name in ("m-00001-of-00002.gguf", "m-00002-of-00002.gguf"):
        w = weights_for(load_model(str(tmp_path / name)))
        assert w.bytes == a + b and "2 files" in w.source
        assert w.lm_head_separate and w.head_bytes == nbytes((512, 1000), 14)
    # a folder with one model (its parts) and no config.json reads it
    assert weights_for(load_model(str(tmp_path))).bytes == a + b
    # vLLM reads a GGUF from one file only
    with pytest.raises(InputError, match="vLLM loads a GGUF model from a single file; this one "
                                         "is split in 2: merge it with llama-gguf-split"):
        kvcore.engines.engine_plan("vllm", kvcore.engines.EngineRequest(
            spec=load_model(str(tmp_path)), context=4096, sequences=1,
            cache=kvcore.CacheOptions(kv_k="f16", kv_v="f16"), gpus=(kvcore.find_gpu("4090"),)))
    (tmp_path / "m-00002-of-00002.gguf").unlink()
    with pytest.raises(InputError, match="part 2 of 2 of the split model is missing: "
                                         "m-00002-of-00002.gguf"):
        load_model(str(tmp_path / "m-00001-of-00002.gguf"))


def test_tensor_bytes_follow_the_block_layouts():
    # Q4_K: 144 bytes per 256 values; Q8_0: 34 per 32; MXFP4: 17 per 32
    assert tensor_bytes((4096, 11008), 12) == 11008 * 16 * 144
    assert tensor_bytes((4096, 3), 8) == 3 * 128 * 34
    assert tensor_bytes((2880, 2880, 32), 39) == 2880 * 32 * 90 * 17
    assert GGML_TYPES[30] == ("BF16", 1, 2)
    # the newer types (ggml-common.h): NVFP4 36 bytes per 64, Q1_0 18 per 128, Q2_0 18 per 64
    assert tensor_bytes((4096, 2), 40) == 2 * 64 * 36
    assert tensor_bytes((4096, 2), 41) == 2 * 32 * 18
    assert tensor_bytes((4096, 2), 42) == 2 * 64 * 18
    # general.file_type of those mixes (llama.h's llama_ftype)
    assert [FILE_TYPES[i] for i in (38, 39, 40, 41)] == ["mxfp4_moe", "nvfp4", "q1_0", "q2_0"]
    with pytest.raises(ConfigError, match="a row of 100 values is not a whole number of Q4_K"):
        tensor_bytes((100, 2), 12)
    with pytest.raises(ConfigError, match="ggml type 99"):
        tensor_bytes((32,), 99)


def test_the_cli_plans_a_gguf_and_llama_cpp_loads_that_file(capsys, tmp_path):
    path, total, _ = qwen3_8b(tmp_path, name="my model.gguf")
    code, out, _ = run(capsys, str(path), "--gpu", "4090", "--engine", "llama.cpp", "--ctx",
                       "32k")
    assert code == 0
    assert "q4_k_m, GGUF tensors (my model.gguf)" in out
    assert f"llama-server -m '{path}' -c 32768" in out
    code, out, _ = run(capsys, str(path), "--gpu", "4090", "--engine", "llama.cpp", "--json")
    data = json.loads(out)
    assert data["weights_bytes"] == total
    # llama.cpp keeps the token embedding in host memory: the card holds the rest
    embd = nbytes((4096, 151936), 12)
    assert data["engine_report"]["weights_bytes"] == total - embd
    # TensorRT-LLM does not load GGUF files
    code, out, err = run(capsys, str(path), "--gpu", "4090", "--engine", "trtllm")
    assert code == 2 and "TensorRT-LLM loads Hugging Face checkpoints, not GGUF files" in err


def _bad(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    return path


@pytest.mark.parametrize("make,line", [
    (lambda p: _bad(p, "x.gguf", b"PK\x03\x04" + bytes(60)),
     "x.gguf is not a GGUF file (it does not begin with 'GGUF')"),
    (lambda p: _bad(p, "v1.gguf", b"GGUF" + struct.pack("<I", 1) + bytes(16)),
     "v1.gguf is GGUF version 1; versions 2 and 3 are read (re-convert the model with a "
     "current llama.cpp)"),
    (lambda p: _bad(p, "short.gguf", b"GGUF" + struct.pack("<IQ", 3, 1)),
     "short.gguf ends inside its header: the file is truncated or not a GGUF file"),
])
def test_files_that_are_not_readable_ggufs_say_so(capsys, tmp_path, make, line):
    path = make(tmp_path)
    code, out, err = run(capsys, str(path))
    assert (code, out, err) == (2, "", f"kvplan: error: {line}\n")


def test_a_truncated_download_and_an_unread_architecture_are_refused(capsys, tmp_path):
    meta, tensors = dense_model("llama", layers=2, hidden=256, heads=4, kv_heads=4,
                                head_dim=64, ffn=512, vocab=100, ctx=4096, quant=8)
    need = write_gguf(tmp_path / "cut.gguf", meta, tensors, cut=1000)
    assert need
    code, _, err = run(capsys, str(tmp_path / "cut.gguf"))
    assert code == 2 and "cut.gguf is truncated: its tensors need" in err
    assert "(an incomplete download?)" in err and err.count("\n") == 1
    hybrid = {**meta, "general.architecture": "mamba2"}
    write_gguf(tmp_path / "next.gguf", hybrid, tensors)
    code, _, err = run(capsys, str(tmp_path / "next.gguf"))
    assert code == 2 and err.startswith("kvplan: error: next.gguf is a 'mamba2' model; "
                                        "kvplan reads the GGUFs of axk2, bailingmoe3, deepseek2, "
                                        "deepseek32, deepseek4, gemma2")
    assert "pass the model's config.json (or its Hub id) instead" in err


def test_a_folder_of_several_ggufs_asks_which(capsys, tmp_path):
    qwen3_8b(tmp_path, name="a.gguf")
    qwen3_8b(tmp_path, name="b.gguf")
    (tmp_path / "mmproj-f16.gguf").write_bytes(b"GGUF")
    code, _, err = run(capsys, str(tmp_path))
    assert code == 2
    assert "has no config.json and 2 GGUF models (a.gguf, b.gguf): name one" in err


def test_array_lengths_past_the_kept_size_still_count(tmp_path):
    # the vocabulary (151,936 strings) is skipped, not held, and still gives the vocab size
    path, _, _ = qwen3_8b(tmp_path)
    g = kvcore.gguf.read_gguf(path)
    assert len(g.metadata["tokenizer.ggml.tokens"]) == 151936
    assert load_model(str(path)).vocab_size == 151936


def test_u64_metadata_and_alignment(tmp_path):
    meta, tensors = dense_model("llama", layers=2, hidden=256, heads=4, kv_heads=4,
                                head_dim=64, ffn=512, vocab=100, ctx=4096, quant=8)
    meta["llama.context_length"] = U64(1 << 20)
    meta["general.alignment"] = 64
    write_gguf(tmp_path / "a.gguf", meta, tensors, alignment=64)
    spec = load_model(str(tmp_path / "a.gguf"))
    assert spec.max_position_embeddings == 1 << 20


def test_draft_blocks_are_counted_apart(tmp_path):
    # a DeepSeek-V3-style file: block_count 4 holds 3 decoder blocks and 1 MTP block
    meta, tensors = dense_model("deepseek2", layers=4, hidden=512, heads=4, kv_heads=1,
                                head_dim=576, ffn=1024, vocab=1000, ctx=8192, quant=8,
                                head_type=8, extra={
                                    "deepseek2.attention.kv_lora_rank": 512,
                                    "deepseek2.rope.dimension_count": 64,
                                    "deepseek2.attention.key_length_mla": 192,
                                    "deepseek2.attention.value_length_mla": 128,
                                    "deepseek2.attention.value_length": 512,
                                    "deepseek2.expert_gating_func": 2,
                                    "deepseek2.nextn_predict_layers": 1})
    path = tmp_path / "v3.gguf"
    total = write_gguf(path, meta, tensors)
    spec = load_model(str(path))
    assert spec.model_type == "deepseek_v3"
    assert spec.num_layers == 3 and spec.has_mtp
    draft = sum(nbytes(s, t) for n, s, t in tensors if n.startswith("blk.3."))
    assert draft > 0
    assert weights_for(spec).bytes == total - draft
    # with the draft layers asked for (--mtp), they are loaded too
    assert weights_for(spec, mtp=True).bytes == total
    assert kvcore.cache_size(spec, 100, 1).total_bytes == 3 * 576 * 2 * 100


_SMALL = {
    "qwen3": {},
    "deepseek2": {"deepseek2.attention.kv_lora_rank": 64, "deepseek2.rope.dimension_count": 16,
                  "deepseek2.attention.value_length": 32, "deepseek2.nextn_predict_layers": 1},
    "qwen35": {"qwen35.ssm.conv_kernel": 4, "qwen35.ssm.state_size": 32,
               "qwen35.ssm.group_count": 2, "qwen35.ssm.time_step_rank": 4,
               "qwen35.ssm.inner_size": 128, "qwen35.full_attention_interval": 2},
}


def _small(tmp_path, arch):
    meta, tensors = dense_model(arch, layers=2, hidden=256, heads=4, kv_heads=2,
                                head_dim=64, ffn=512, vocab=64, ctx=4096, quant=8, head_type=8,
                                extra=_SMALL[arch])
    path = tmp_path / "small.gguf"
    write_gguf(path, meta, tensors)
    return path.read_bytes()


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_corrupted_headers_give_one_clear_error(tmp_path, data):
    # any byte of a valid header changed, or the file cut anywhere: a KvplanError or a model,
    # never another exception
    blob = bytearray(_small(tmp_path, data.draw(st.sampled_from(sorted(_SMALL)))))
    header = blob.index(b"token_embd.weight")  # the tensor table begins
    if data.draw(st.booleans()):
        at = data.draw(st.integers(0, header + 400))
        blob[at] = data.draw(st.integers(0, 255))
    else:
        blob = blob[:data.draw(st.integers(4, header + 400))]
    path = tmp_path / "fuzzed.gguf"
    path.write_bytes(bytes(blob))
    try:
        spec = load_model(str(path))
    except KvplanError as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert weights_for(spec).bytes >= 0


@pytest.mark.parametrize("arch", sorted(_SMALL))
@pytest.mark.parametrize("blocks", [0, 4097, 2**31 - 1])
def test_a_block_count_no_model_has_is_refused_at_once(tmp_path, arch, blocks):
    # a corrupt header's block count (its high byte changed: 2³¹ - 1 blocks) must be refused
    # before anything is built per layer (a hybrid's layer pattern of that length filled the
    # memory)
    meta, tensors = dense_model(arch, layers=2, hidden=256, heads=4, kv_heads=2, head_dim=64,
                                ffn=512, vocab=64, ctx=4096, quant=8, head_type=8,
                                extra=_SMALL[arch])
    meta[f"{arch}.block_count"] = blocks
    path = tmp_path / "blocks.gguf"
    write_gguf(path, meta, tensors)
    with pytest.raises(ConfigError, match=rf"{arch}\.block_count must be between 1 and 4,096, "
                                          rf"got {blocks:,}"):
        load_model(str(path))


# --- GGUF repositories on the Hub (llama.cpp's -hf) --------------------------------------------

class _Counted(io.FileIO):
    """A local file standing in for a Hub file read in ranges: counts the bytes read."""

    read_bytes = 0

    def read(self, n=-1):
        data = super().read(n)
        _Counted.read_bytes += len(data)
        return data


def fake_gguf_hub(monkeypatch, folder, names):
    errors = types.SimpleNamespace(**{
        name: type(name, (Exception,), {}) for name in (
            "GatedRepoError", "RepositoryNotFoundError", "RevisionNotFoundError",
            "EntryNotFoundError", "LocalEntryNotFoundError")})

    def download(repo, filename, revision=None):
        raise errors.EntryNotFoundError()  # a GGUF repository has no config.json

    class Api:
        def list_repo_files(self, repo):
            return list(names)

    class FileSystem:
        def open(self, path, mode="rb", block_size=None):
            name = path.split("/", 2)[2]
            f = _Counted(str(folder / name), "r")
            f.size = (folder / name).stat().st_size
            return f

    module = types.SimpleNamespace(hf_hub_download=download, errors=errors, HfApi=Api,
                                   HfFileSystem=FileSystem)
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)
    monkeypatch.setitem(sys.modules, "huggingface_hub.errors", errors)
    kvcore.hub._fetch.cache_clear()


def _tiny(folder, name, quant=8, **kw):
    meta, tensors = dense_model("qwen3", layers=2, hidden=256, heads=4, kv_heads=2,
                                head_dim=64, ffn=512, vocab=64, ctx=4096, quant=quant,
                                head_type=8, **kw)
    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    return write_gguf(folder / name, meta, tensors), tensors


def test_a_hub_gguf_is_read_by_its_header_only(monkeypatch, tmp_path, capsys):
    q4, _ = _tiny(tmp_path, "Tiny-Q4_0.gguf", quant=2)
    q8, tensors = _tiny(tmp_path, "Tiny-Q8_0.gguf")
    fake_gguf_hub(monkeypatch, tmp_path, ["README.md", "Tiny-Q4_0.gguf", "Tiny-Q8_0.gguf",
                                          "mmproj-Tiny-f16.gguf"])
    _Counted.read_bytes = 0
    spec = load_model("someone/Tiny-GGUF:q8_0")
    assert weights_for(spec).bytes == q8 and spec.source == "hub someone/Tiny-GGUF:q8_0"
    # the header only: the tensor data (q8 bytes) is never read
    assert 0 < _Counted.read_bytes < 8192 < q8
    code, out, _ = run(capsys, "someone/Tiny-GGUF:Q4_0", "--engine", "llama.cpp", "--gpu",
                       "4090")
    assert code == 0 and "llama-server -hf someone/Tiny-GGUF:Q4_0 -c 8192" in out
    assert "GGUF tensors (Tiny-Q4_0.gguf)" in out


def test_a_hub_gguf_repository_without_a_tag_takes_llama_cpp_s_default(monkeypatch, tmp_path):
    _tiny(tmp_path, "M-Q8_0.gguf")
    _tiny(tmp_path, "M-Q6_K.gguf")
    # no Q4_K_M: llama-server -hf takes Q8_0 next
    fake_gguf_hub(monkeypatch, tmp_path, ["M-Q8_0.gguf", "M-Q6_K.gguf"])
    assert load_model("someone/M-GGUF").source == "hub someone/M-GGUF:Q8_0"
    with pytest.raises(kvcore.HubError, match="'someone/M-GGUF' has no Q2_K GGUF; it has "
                                              "Q6_K, Q8_0"):
        load_model("someone/M-GGUF:Q2_K")
    # neither: the first model, which -hf with the repository alone loads
    _tiny(tmp_path, "M-Q5_K_M.gguf")
    fake_gguf_hub(monkeypatch, tmp_path, ["M-Q6_K.gguf", "M-Q5_K_M.gguf"])
    spec = load_model("someone/M-GGUF")
    assert spec.source == "hub someone/M-GGUF"
    assert spec.checkpoint.load == "-hf someone/M-GGUF"
    # Q4_K_M is taken when present, as llama-server -hf does; a split model in a folder
    total = sum(_tiny(tmp_path, f"Q4_K_M/M-Q4_K_M-0000{i}-of-00002.gguf",
                      extra={"split.count": 2})[0] for i in (1, 2))
    fake_gguf_hub(monkeypatch, tmp_path, ["M-Q8_0.gguf", "Q4_K_M/M-Q4_K_M-00001-of-00002.gguf",
                                          "Q4_K_M/M-Q4_K_M-00002-of-00002.gguf"])
    spec = load_model("someone/M-GGUF")
    assert spec.source == "hub someone/M-GGUF:Q4_K_M"
    assert weights_for(spec).bytes == total


@pytest.mark.parametrize("tag,picked", [
    # llama.cpp finds the tag, in any case, followed by '.' or '-' anywhere in the path
    ("Q4_K_XL", "M-UD-Q4_K_XL.gguf"), ("UD-Q4_K_XL", "M-UD-Q4_K_XL.gguf"),
    ("q4_k_m", "M-Q4_K_M.gguf"), ("IQ4_XS", "M-IQ4_XS.gguf"),
    ("BF16", "BF16/M-BF16-00001-of-00002.gguf"), (None, "M-Q4_K_M.gguf"),
])
def test_hub_tags_pick_the_file_llama_server_picks(tag, picked):
    names = ["BF16/M-BF16-00001-of-00002.gguf", "BF16/M-BF16-00002-of-00002.gguf",
             "M-IQ4_XS.gguf", "M-Q4_K_M.gguf", "M-UD-Q4_K_XL.gguf"]
    assert kvcore.hub.choose_gguf("o/M-GGUF", names, tag)[0] == picked


def test_side_files_are_not_models(monkeypatch, tmp_path):
    # projectors, importance matrices and draft heads are passed over, wherever the word is
    q8, _ = _tiny(tmp_path, "M-Q8_0.gguf")
    for side in ("M-mmproj-F16.gguf", "imatrix_unsloth.gguf", "mmproj-F16.gguf"):
        _tiny(tmp_path, side, quant=0)
    fake_gguf_hub(monkeypatch, tmp_path, ["M-mmproj-F16.gguf", "M-Q8_0.gguf",
                                          "imatrix_unsloth.gguf", "mmproj-F16.gguf"])
    assert weights_for(load_model("someone/M-GGUF")).bytes == q8
    # a local folder likewise holds one model
    assert weights_for(load_model(str(tmp_path))).bytes == q8


def test_a_hub_repository_with_neither_config_nor_gguf(monkeypatch, tmp_path):
    fake_gguf_hub(monkeypatch, tmp_path, ["README.md"])
    with pytest.raises(kvcore.HubError, match="has neither a config.json nor a GGUF file"):
        load_model("someone/empty")


@pytest.mark.parametrize("arch,catalog", [("qwen35", "qwen3.5-27b"),
                                          ("qwen35moe", "qwen3.5-35b-a3b"),
                                          ("qwen3next", "qwen3-next-80b-a3b-instruct")])
def test_gated_deltanet_hybrids_read_their_state_and_pattern(tmp_path, arch, catalog):
    # the keys llama.cpp's converter writes for Qwen3-Next and Qwen3.5: conv kernel, key head
    # width (state_size), key heads (group_count), value heads (time_step_rank), all value
    # widths (inner_size), full_attention_interval; Qwen3.5 adds its MTP block to block_count
    entry = next(e for e in kvcore.model_catalog() if e.id == catalog)
    cfg = entry.config()
    cfg = cfg.get("text_config", cfg)
    mtp = cfg.get("mtp_num_hidden_layers") or 0
    experts = cfg.get("num_experts") or 0
    meta, tensors = dense_model(
        arch, layers=cfg["num_hidden_layers"] + mtp, hidden=cfg["hidden_size"],
        heads=cfg["num_attention_heads"], kv_heads=cfg["num_key_value_heads"],
        head_dim=cfg["head_dim"], ffn=cfg.get("intermediate_size") or 512, vocab=256,
        ctx=262144, quant=8, head_type=8, experts=experts, used=cfg.get("num_experts_per_tok", 0),
        expert_ffn=cfg.get("moe_intermediate_size") or 0, extra={
            f"{arch}.ssm.conv_kernel": cfg["linear_conv_kernel_dim"],
            f"{arch}.ssm.state_size": cfg["linear_key_head_dim"],
            f"{arch}.ssm.group_count": cfg["linear_num_key_heads"],
            f"{arch}.ssm.time_step_rank": cfg["linear_num_value_heads"],
            f"{arch}.ssm.inner_size": cfg["linear_num_value_heads"] * cfg["linear_value_head_dim"],
            f"{arch}.full_attention_interval": cfg["full_attention_interval"],
            **({f"{arch}.nextn_predict_layers": mtp} if mtp else {})})
    path = tmp_path / f"{arch}.gguf"
    write_gguf(path, meta, tensors)
    spec, cat = load_model(str(path)), load_model(catalog)
    assert spec.groups == cat.groups
    for ctx, seqs in ((1000, 1), (262144, 4)):
        a, b = kvcore.cache_size(spec, ctx, seqs), kvcore.cache_size(cat, ctx, seqs)
        assert (a.total_bytes, a.state_bytes) == (b.total_bytes, b.state_bytes)


def test_a_number_of_the_wrong_type_is_named(tmp_path, capsys):
    meta, tensors = dense_model("deepseek2", layers=2, hidden=256, heads=4, kv_heads=2,
                                head_dim=64, ffn=512, vocab=64, ctx=4096, quant=8, head_type=8,
                                extra={**_SMALL["deepseek2"],
                                       "deepseek2.attention.kv_lora_rank": "512"})
    write_gguf(tmp_path / "odd.gguf", meta, tensors)
    code, out, err = run(capsys, str(tmp_path / "odd.gguf"))
    assert (code, out, err) == (2, "", "kvplan: error: odd.gguf: deepseek2.attention.kv_lora_rank "
                                       "must be a whole number, got '512'\n")


@pytest.mark.parametrize("meta,line", [
    ({"general.type": "adapter", "adapter.type": "lora"},
     "a.gguf is a LoRA adapter (general.type = adapter): pass the GGUF of the model it adapts; "
     "llama-server loads the adapter beside it with --lora"),
    ({"general.architecture": "clip", "clip.has_vision_encoder": True},
     "a.gguf is a multimodal projector (mmproj): pass the language model's GGUF; llama-server "
     "loads the projector beside it with --mmproj"),
    ({"general.type": "imatrix"},
     "a.gguf is an importance matrix (general.type = imatrix), the input of llama-quantize, "
     "not a model"),
])
def test_gguf_files_that_are_not_models_are_named(capsys, tmp_path, meta, line):
    base, tensors = dense_model("llama", layers=2, hidden=256, heads=4, kv_heads=4,
                                head_dim=64, ffn=512, vocab=100, ctx=4096, quant=8)
    write_gguf(tmp_path / "a.gguf", {**base, **meta}, tensors)
    code, out, err = run(capsys, str(tmp_path / "a.gguf"))
    assert (code, out, err) == (2, "", f"kvplan: error: {line}\n")


def test_a_vocabulary_only_file_and_a_big_endian_file_are_refused(capsys, tmp_path):
    meta, _ = dense_model("llama", layers=2, hidden=256, heads=4, kv_heads=4, head_dim=64,
                          ffn=512, vocab=100, ctx=4096)
    write_gguf(tmp_path / "vocab.gguf", meta, [])
    code, _, err = run(capsys, str(tmp_path / "vocab.gguf"))
    assert (code, err) == (2, "kvplan: error: vocab.gguf holds no tensors (a vocabulary-only "
                              "file): pass the model's GGUF\n")
    (tmp_path / "be.gguf").write_bytes(b"GGUF" + struct.pack(">IQQ", 3, 0, 0))
    code, _, err = run(capsys, str(tmp_path / "be.gguf"))
    assert (code, err) == (2, "kvplan: error: be.gguf is a big-endian GGUF; llama.cpp on a "
                              "little-endian host (x86, ARM: every GPU server) does not load "
                              "it: convert the model without --bigendian\n")


# --- DeepSeek Sparse Attention GGUFs (deepseek32, glm-dsa) ----------------------------------
# llama.cpp's converters (conversion/deepseek.py DeepseekV32Model, skip_mtp False;
# GlmMoeDsaModel) write the deepseek2 MLA keys, block_count = decoder + MTP blocks,
# nextn_predict_layers, and the indexer's {arch}.attention.indexer.head_count / key_length /
# top_k (src/llama-arch.cpp); glm-dsa adds {arch}.attention.indexer.types (true: full) from the
# config's indexer_types.

def _dsa_gguf(tmp_path, arch, layers, ctx, extra):
    meta, tensors = dense_model(arch, layers=layers + 1, hidden=6144, heads=64, kv_heads=1,
                                head_dim=576, ffn=12288, vocab=1000, ctx=ctx, quant=8,
                                head_type=8, extra={
                                    f"{arch}.attention.q_lora_rank": 2048,
                                    f"{arch}.attention.kv_lora_rank": 512,
                                    f"{arch}.rope.dimension_count": 64,
                                    f"{arch}.attention.key_length_mla": 256,
                                    f"{arch}.attention.value_length_mla": 256,
                                    f"{arch}.attention.value_length": 512,
                                    f"{arch}.expert_gating_func": 2,
                                    f"{arch}.nextn_predict_layers": 1,
                                    f"{arch}.attention.indexer.head_count": 32,
                                    f"{arch}.attention.indexer.key_length": 128,
                                    f"{arch}.attention.indexer.top_k": 2048, **extra})
    path = tmp_path / f"{arch}.gguf"
    write_gguf(path, meta, tensors)
    return load_model(str(path))


def _kinds(spec):
    return [(g.kind, g.layers, g.n_kv_heads, g.head_dim_k, g.mtp) for g in spec.groups]


def test_a_deepseek32_gguf_caches_the_latent_and_the_indexer_keys(tmp_path):
    spec = _dsa_gguf(tmp_path, "deepseek32", 61, 163840, {})
    assert spec.model_type == "deepseek_v32" and spec.num_layers == 61 and spec.has_mtp
    assert _kinds(spec) == _kinds(load_model("deepseek-v3.2"))
    # f16: 61 × 576 × 2 latent + 61 × 128 × 2 indexer = 85,888 bytes a token
    assert kvcore.cache_size(spec, 1000, 1).total_bytes == 61 * (576 + 128) * 2 * 1000


def test_an_axk2_gguf_caches_the_latent_and_indexer_keys_in_every_decoder_layer(tmp_path):
    # conversion/axk2.py: the deepseek2 MLA keys (key length kv_lora_rank + rope 128 + 32),
    # the indexer's keys, gated_norm_rank; its NextN block appended (block_count 49)
    arch = "axk2"
    meta, tensors = dense_model(arch, layers=48 + 1, hidden=2048, heads=32, kv_heads=1,
                                head_dim=160, ffn=5120, vocab=1000, ctx=131072, quant=8,
                                head_type=8, extra={
                                    f"{arch}.attention.q_lora_rank": 384,
                                    f"{arch}.attention.kv_lora_rank": 128,
                                    f"{arch}.rope.dimension_count": 32,
                                    f"{arch}.attention.key_length_mla": 96,
                                    f"{arch}.attention.value_length_mla": 64,
                                    f"{arch}.attention.value_length": 128,
                                    f"{arch}.nextn_predict_layers": 1,
                                    f"{arch}.gated_norm_rank": 16,
                                    f"{arch}.attention.indexer.head_count": 16,
                                    f"{arch}.attention.indexer.key_length": 128,
                                    f"{arch}.attention.indexer.top_k": 2048})
    write_gguf(tmp_path / "axk2.gguf", meta, tensors)
    spec = load_model(str(tmp_path / "axk2.gguf"))
    assert spec.model_type == "axk2" and spec.num_layers == 48 and spec.has_mtp
    assert [(g.kind.value, g.count, g.head_dim_k) for g in spec.groups if not g.mtp] == [
        ("mla", 48, 160), ("indexer", 48, 128)]
    # f16: 48 × 160 × 2 latent + 48 × 128 × 2 indexer bytes a token
    assert kvcore.cache_size(spec, 1000, 1).total_bytes == 48 * (160 + 128) * 2 * 1000
    # llama.cpp's DSA cache of the file: the 48 decoder layers, the NextN block left out
    from kvcore.engines import EngineRequest, engine_plan
    r = engine_plan("llama.cpp", EngineRequest(
        spec=spec, context=4096, sequences=1,
        cache=kvcore.CacheOptions(kv_k="f16", kv_v="f16"), kv_budget_bytes=8 << 30))
    sizes = [line for line in r.log_lines if line.startswith("llama_kv_cache: size")]
    assert len(sizes) == 2 and all(" 48 layers" in line for line in sizes)


@pytest.mark.parametrize("ctx,types,catalog,indexers", [
    # GLM-5 / 5.1: no indexer.types and a training context under 1,048,576: every layer
    (202752, None, "glm-5", 78),
    # GLM-5.2's config indexer_types, as the converter writes them
    (1048576, [i < 3 or (i - 2) % 4 == 0 for i in range(78)], "glm-5.2", 21),
    # none written: llama.cpp's built-in GLM-5.2 table (0, 1, 2, 6, ..., 74)
    (1048576, None, "glm-5.2", 21),
])
def test_a_glm_dsa_gguf_reads_its_indexer_layers(tmp_path, ctx, types, catalog, indexers):
    extra = {} if types is None else {"glm-dsa.attention.indexer.types": types}
    spec = _dsa_gguf(tmp_path, "glm-dsa", 78, ctx, extra)
    assert spec.model_type == "glm_moe_dsa"
    assert _kinds(spec) == _kinds(load_model(catalog))
    owned = next(g for g in spec.groups if g.kind == "indexer" and not g.mtp)
    assert owned.count == indexers


@pytest.mark.parametrize("ctx,indexers", [(202752, 78), (1048576, 21)])
def test_llama_cpp_plans_a_glm_dsa_gguf_by_its_own_keys(capsys, tmp_path, ctx, indexers):
    # llama.cpp master: the latent in the n_layer() = block_count - nextn_predict_layers = 78
    # decoder layers, the indexer keys in the layers is_indexer_full keeps (every one below a
    # 1,048,576 training context, GLM-5.2's 21 from it): 8,192 cells × 256 B each
    _dsa_gguf(tmp_path, "glm-dsa", 78, ctx, {})
    code, out, _ = run(capsys, str(tmp_path / "glm-dsa.gguf"), "--engine", "llama.cpp",
                       "--ctx", "8192", "--kv-budget", "64GiB")
    assert code == 0
    assert "(  8192 cells,  78 layers,  1/1 seqs), K (f16):  702.00 MiB" in out
    mib = indexers * 256 * 8192 / 2**20
    assert f"(  8192 cells, {indexers:3d} layers,  1/1 seqs), K (f16): {mib:7.2f} MiB" in out


def test_a_glm_dsa_gguf_with_a_short_indexer_list_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="indexer.types") as e:
        _dsa_gguf(tmp_path, "glm-dsa", 78, 1048576,
                  {"glm-dsa.attention.indexer.types": [True] * 77})
    assert "\n" not in str(e.value)


# glm4moe (GLM-4.5 / 4.6 / 4.7): llama.cpp's converter writes block_count as the decoder's
# layers plus nextn_predict_layers, attention.key_length the head width (not hidden / heads),
# leading_dense_block_count and expert_shared_count (src/models/glm4-moe.cpp runs
# n_layer - nextn_predict_layers layers, the first n_layer_dense_lead of them dense).
@pytest.mark.parametrize("catalog", ["glm-4.5"])
def test_a_glm4moe_gguf_is_the_glm_4_5_config(tmp_path, catalog):
    entry = next(e for e in kvcore.model_catalog() if e.id == catalog)
    cfg = entry.config()
    nextn = cfg["num_nextn_predict_layers"]
    meta, tensors = dense_model(
        "glm4moe", layers=cfg["num_hidden_layers"] + nextn, hidden=cfg["hidden_size"],
        heads=cfg["num_attention_heads"], kv_heads=cfg["num_key_value_heads"],
        head_dim=cfg["head_dim"], ffn=cfg["intermediate_size"], vocab=256,
        ctx=cfg["max_position_embeddings"], quant=8, head_type=8,
        experts=cfg["n_routed_experts"], used=cfg["num_experts_per_tok"],
        expert_ffn=cfg["moe_intermediate_size"], extra={
            "glm4moe.nextn_predict_layers": nextn,
            "glm4moe.leading_dense_block_count": cfg["first_k_dense_replace"],
            "glm4moe.expert_shared_count": cfg["n_shared_experts"],
            "glm4moe.expert_gating_func": 2})
    path = tmp_path / "glm4moe.gguf"
    write_gguf(path, meta, tensors)
    spec, cat = load_model(str(path)), load_model(catalog)
    assert spec.model_type == "glm4_moe" and spec.num_layers == 92 and spec.has_mtp
    assert spec.groups == cat.groups
    # f16: 92 layers (+1 next-n) × 8 KV heads × 128 × 2 (K, V) × 2 bytes
    assert kvcore.cache_size(spec, 1000, 1).total_bytes \
        == kvcore.cache_size(cat, 1000, 1).total_bytes
    assert kvcore.cache_size(spec, 1000, 1).total_bytes == 92 * 8 * 128 * 2 * 2 * 1000
    # the next-n block's tensors are the draft's, not the model's
    assert spec.params.mtp == sum(_elements(s) for n, s, _ in tensors
                                  if n.startswith("blk.92."))


def _gemma4_gguf(tmp_path, catalog, *, k_eq_v=True, kv=None, extra=None):
    """A Gemma 4 GGUF as llama.cpp's converter lays it out: the sliding pattern by layer,
    key_length the full layers' width and key_length_swa the sliding ones', head_count_kv by
    layer, and no attn_v.weight on the full layers that take V from K."""
    entry = next(e for e in kvcore.model_catalog() if e.id == catalog)
    cfg = entry.config()
    cfg = cfg.get("text_config", cfg)
    n = cfg["num_hidden_layers"]
    slides = [t == "sliding_attention" for t in cfg["layer_types"]]
    experts = cfg.get("num_experts") or 0
    meta, tensors = dense_model(
        "gemma4", layers=n, hidden=cfg["hidden_size"], heads=cfg["num_attention_heads"],
        kv_heads=cfg["num_key_value_heads"], head_dim=cfg["head_dim"],
        ffn=cfg["intermediate_size"], vocab=256, ctx=cfg["max_position_embeddings"],
        tied=True, quant=8, head_type=8, experts=experts,
        used=cfg.get("top_k_experts") or 0, expert_ffn=cfg.get("moe_intermediate_size") or 0,
        extra={"gemma4.attention.sliding_window_pattern": slides,
               "gemma4.attention.sliding_window": cfg["sliding_window"],
               "gemma4.attention.key_length": cfg["global_head_dim"],
               "gemma4.attention.value_length": cfg["global_head_dim"],
               "gemma4.attention.key_length_swa": cfg["head_dim"],
               "gemma4.attention.value_length_swa": cfg["head_dim"],
               "gemma4.attention.head_count_kv": kv or [
                   cfg["num_key_value_heads"] if s else cfg["num_global_key_value_heads"]
                   for s in slides],
               "gemma4.attention.shared_kv_layers": cfg["num_kv_shared_layers"],
               "gemma4.embedding_length_per_layer_input": 0, **(extra or {})})
    full = {f"blk.{i}.attn_v.weight" for i, s in enumerate(slides) if not s}
    tensors = [t for t in tensors if not (k_eq_v and t[0] in full)]
    path = tmp_path / f"{catalog}.gguf"
    write_gguf(path, meta, tensors)
    return load_model(str(path))


@pytest.mark.parametrize("catalog,per_token", [
    # 26B-A4B: 25 sliding layers × 8 KV heads × 256 + 5 full × 2 × 512, K and V, f16
    ("gemma-4-26b-a4b", (25 * 8 * 256 + 5 * 2 * 512) * 2 * 2),
    # 31B: 50 sliding × 16 × 256 + 10 full × 4 × 512
    ("gemma-4-31b-it", (50 * 16 * 256 + 10 * 4 * 512) * 2 * 2),
])
def test_a_gemma4_gguf_reads_its_two_attention_geometries(tmp_path, catalog, per_token):
    spec, cat = _gemma4_gguf(tmp_path, catalog), load_model(catalog)
    assert spec.model_type == "gemma4_text"
    assert spec.groups == cat.groups
    # within the 1,024-token window every layer holds every token
    assert kvcore.cache_size(spec, 1000, 1).total_bytes == per_token * 1000
    for ctx in (1000, 131072):
        assert (kvcore.cache_size(spec, ctx, 2).total_bytes
                == kvcore.cache_size(cat, ctx, 2).total_bytes)


def test_a_gemma4_gguf_with_kv_shared_layers_keeps_no_cache_for_them(tmp_path):
    plain = _gemma4_gguf(tmp_path, "gemma-4-31b-it")
    shared = _gemma4_gguf(tmp_path, "gemma-4-31b-it",
                          extra={"gemma4.attention.shared_kv_layers": 6})
    # the last six layers (54-59: 53 sliding ... 59 full) read earlier layers' caches:
    # 59 is full, 54-58 sliding
    saved = (5 * 16 * 256 + 1 * 4 * 512) * 2 * 2 * 1000
    assert (kvcore.cache_size(plain, 1000, 1).total_bytes
            - kvcore.cache_size(shared, 1000, 1).total_bytes) == saved


@pytest.mark.parametrize("kw,what", [
    # KV heads that differ on the full layers while those layers have their own V
    ({"k_eq_v": False}, "head_count_kv"),
    # two different counts among the sliding layers
    ({"kv": [8, 4] + [8] * 28}, "head_count_kv"),
    # no per-layer pattern
    ({"extra": {"gemma4.attention.sliding_window_pattern": 6}}, "sliding_window_pattern"),
])
def test_gemma4_ggufs_that_cannot_be_read_exactly_are_refused(tmp_path, kw, what):
    with pytest.raises(ConfigError, match=what) as e:
        _gemma4_gguf(tmp_path, "gemma-4-26b-a4b", **kw)
    assert "\n" not in str(e.value)


def _nemotron_h_gguf(tmp_path, catalog, arch="nemotron_h_moe", extra=None, drafts=0):
    """A Nemotron-H GGUF as llama.cpp's converter lays it out: head_count_kv and
    feed_forward_length by block (0 where the block has none), the Mamba-2 numbers under ssm.*,
    a router (ffn_gate_inp) in the MoE blocks only; ``drafts`` next-n blocks after the
    decoder's, each an attention and a MoE folded into one block (conversion/nemotron.py)."""
    cfg = next(e for e in kvcore.model_catalog() if e.id == catalog).config()
    pattern = cfg["hybrid_override_pattern"]
    n = len(pattern)
    blocks = pattern + "+" * drafts
    meta, tensors = dense_model(
        arch, layers=n + drafts, hidden=cfg["hidden_size"], heads=cfg["num_attention_heads"],
        kv_heads=cfg["num_key_value_heads"], head_dim=cfg["head_dim"],
        ffn=cfg["intermediate_size"], vocab=256, ctx=cfg["max_position_embeddings"],
        quant=8, head_type=8, experts=cfg["n_routed_experts"], used=cfg["num_experts_per_tok"],
        expert_ffn=cfg["moe_intermediate_size"], extra={
            f"{arch}.attention.head_count_kv": [
                cfg["num_key_value_heads"] if c in "*+" else 0 for c in blocks],
            f"{arch}.feed_forward_length": [
                cfg["moe_intermediate_size"] if c in "E-+" else 0 for c in blocks],
            f"{arch}.ssm.conv_kernel": cfg["conv_kernel"],
            f"{arch}.ssm.state_size": cfg["ssm_state_size"],
            f"{arch}.ssm.group_count": cfg["n_groups"],
            f"{arch}.ssm.time_step_rank": cfg["mamba_num_heads"],
            f"{arch}.ssm.inner_size": cfg["mamba_num_heads"] * cfg["mamba_head_dim"],
            **({f"{arch}.nextn_predict_layers": drafts} if drafts else {}),
            **(extra or {})})
    routers = {f"blk.{i}.ffn_gate_inp.weight" for i, c in enumerate(blocks) if c not in "E+"}
    tensors = [t for t in tensors if t[0] not in routers]
    tensors += [(f"blk.{n + j}.nextn.eh_proj.weight", (2 * cfg["hidden_size"],
                                                       cfg["hidden_size"]), 8)
                for j in range(drafts)]
    path = tmp_path / f"{catalog}.gguf"
    write_gguf(path, meta, tensors)
    return load_model(str(path))


def test_a_nemotron_h_gguf_reads_its_blocks_from_the_per_layer_numbers(tmp_path):
    spec, cat = _nemotron_h_gguf(tmp_path, "nemotron-3-nano-30b-a3b"), \
        load_model("nemotron-3-nano-30b-a3b")
    assert spec.model_type == "nemotron_h"
    assert spec.groups == cat.groups
    for ctx, seqs in ((1000, 1), (262144, 4)):
        a, b = kvcore.cache_size(spec, ctx, seqs), kvcore.cache_size(cat, ctx, seqs)
        assert (a.total_bytes, a.state_bytes) == (b.total_bytes, b.state_bytes)
    # f16 attention: 6 attention blocks × 2 KV heads × 128 × 2 (K, V) × 2 bytes a token;
    # the 23 Mamba-2 blocks' state is per sequence, not per token
    a1, a2 = kvcore.cache_size(spec, 1000, 1), kvcore.cache_size(spec, 2000, 1)
    assert (a2.total_bytes - a2.state_bytes) - (a1.total_bytes - a1.state_bytes) \
        == 6 * 2 * 128 * 2 * 2 * 1000
    # one sequence's state, float32 (mamba_ssm_cache_dtype): per Mamba block the SSM state
    # 64 heads × 64 × 128 and the conv window (kernel 4 - 1) × (inner 4096 + 2 × 8 groups ×
    # 128 state): (524,288 + 18,432) × 4 = 2,170,880 bytes, × 23 blocks
    assert a1.state_bytes == 23 * (64 * 64 * 128 + 3 * (4096 + 2 * 8 * 128)) * 4
    # a token reads 6 of the 128 routed experts (n_routed_experts, num_experts_per_tok)
    assert spec.params.experts and spec.params.active_experts == spec.params.experts * 6 // 128


@pytest.mark.parametrize("extra,what", [
    # attention blocks of two KV head counts
    ({"nemotron_h_moe.attention.head_count_kv": [2] * 5 + [4] + [0] * 46}, "KV head counts"),
    # a scalar where the blocks must be told apart
    ({"nemotron_h_moe.feed_forward_length": 1856}, "feed_forward_length"),
    # a next-n count that makes the decoder's last block (a MoE) a draft
    ({"nemotron_h_moe.nextn_predict_layers": 1}, "next-n block 51 must hold attention"),
])
def test_nemotron_h_ggufs_that_cannot_be_read_exactly_are_refused(tmp_path, extra, what):
    with pytest.raises(ConfigError, match=what) as e:
        _nemotron_h_gguf(tmp_path, "nemotron-3-nano-30b-a3b", extra=extra)
    assert "\n" not in str(e.value)


def test_a_nemotron_h_gguf_with_its_next_n_block_caches_the_draft_attention(tmp_path):
    # Nemotron 3 Super: 88 blocks, then one next-n block (attention and MoE folded): the
    # draft's attention caches 2 KV heads × 128 as kvcore numbers it from the config (layer 88)
    cat = load_model("nemotron-3-super-120b-a12b")
    spec = _nemotron_h_gguf(tmp_path, "nemotron-3-super-120b-a12b", drafts=1)
    assert spec.has_mtp and spec.groups == cat.groups
    assert [g.layers for g in spec.groups if g.mtp] == [(88,)]
    for ctx, seqs in ((1000, 1), (262144, 4)):
        a, b = kvcore.cache_size(spec, ctx, seqs), kvcore.cache_size(cat, ctx, seqs)
        assert (a.total_bytes, a.state_bytes) == (b.total_bytes, b.state_bytes)
    # the draft block's tensors are counted apart from the model's
    assert spec.params.mtp > 0


def test_a_nemotron_h_next_n_block_without_attention_is_refused(tmp_path):
    pattern = next(e for e in kvcore.model_catalog()
                   if e.id == "nemotron-3-super-120b-a12b").config()["hybrid_override_pattern"]
    with pytest.raises(ConfigError, match="next-n block 88 must hold attention") as e:
        _nemotron_h_gguf(tmp_path, "nemotron-3-super-120b-a12b", drafts=1, extra={
            "nemotron_h_moe.attention.head_count_kv": [2 if c == "*" else 0 for c in pattern]
            + [0]})
    assert "\n" not in str(e.value)


def test_a_minimax_m2_gguf_is_the_minimax_m2_7_config(tmp_path):
    # src/models/minimax-m2.cpp: block_count layers of GQA attention (attention.key_length 128,
    # not hidden / heads) and a routed MoE each; the draft modules are not converted
    cfg = next(e for e in kvcore.model_catalog() if e.id == "minimax-m2.7").config()
    meta, tensors = dense_model(
        "minimax-m2", layers=cfg["num_hidden_layers"], hidden=cfg["hidden_size"],
        heads=cfg["num_attention_heads"], kv_heads=cfg["num_key_value_heads"],
        head_dim=cfg["head_dim"], ffn=cfg["intermediate_size"], vocab=256,
        ctx=cfg["max_position_embeddings"], quant=8, head_type=8,
        experts=cfg["num_local_experts"], used=cfg["num_experts_per_tok"],
        expert_ffn=cfg["intermediate_size"], extra={"minimax-m2.expert_gating_func": 2})
    path = tmp_path / "minimax-m2.gguf"
    write_gguf(path, meta, tensors)
    spec, cat = load_model(str(path)), load_model("minimax-m2.7")
    assert spec.model_type == "minimax_m2"
    assert spec.groups == cat.groups
    # f16: 62 layers × 8 KV heads × 128 × 2 (K, V) × 2 bytes a token
    assert kvcore.cache_size(spec, 1000, 1).total_bytes == 62 * 8 * 128 * 2 * 2 * 1000
    assert spec.params.experts == 62 * 3 * 3072 * 1536 * 256


def _kimi_linear_gguf(tmp_path, extra=None, arch="kimi-linear",
                      catalog="kimi-linear-48b-a3b-instruct", kv_heads=None, names=()):
    """Kimi-Linear (or Kimi-K3) as llama.cpp's loader reads it (src/models/kimi-linear.cpp,
    kimi-k3.cpp): head_count_kv by layer (0 on the Kimi Delta Attention layers), the MLA
    widths under attention.*_mla, kv_lora_rank and rope.dimension_count, the KDA head width
    under kda.head_dim and the short convolutions' taps under ssm.conv_kernel. ``names``:
    tensors added to each layer (blk.N. + name)."""
    cfg = next(e for e in kvcore.model_catalog() if e.id == catalog).config()
    cfg = cfg.get("text_config", cfg)
    lac = cfg["linear_attn_config"]
    n = cfg["num_hidden_layers"]
    kv_heads = kv_heads or cfg["num_attention_heads"]
    meta, tensors = dense_model(
        arch, layers=n, hidden=cfg["hidden_size"], heads=cfg["num_attention_heads"],
        kv_heads=kv_heads, head_dim=cfg["qk_nope_head_dim"]
        + cfg["qk_rope_head_dim"], ffn=cfg["intermediate_size"], vocab=256, ctx=1048576,
        quant=8, head_type=8, experts=cfg["num_experts"], used=cfg["num_experts_per_token"],
        expert_ffn=cfg["moe_intermediate_size"], extra={
            f"{arch}.attention.head_count_kv": [
                kv_heads if i + 1 in lac["full_attn_layers"] else 0 for i in range(n)],
            f"{arch}.attention.key_length_mla": cfg["qk_nope_head_dim"]
            + cfg["qk_rope_head_dim"],
            f"{arch}.attention.value_length_mla": cfg["v_head_dim"],
            f"{arch}.attention.kv_lora_rank": cfg["kv_lora_rank"],
            f"{arch}.rope.dimension_count": cfg["qk_rope_head_dim"],
            f"{arch}.ssm.conv_kernel": lac["short_conv_kernel_size"],
            f"{arch}.kda.head_dim": lac["head_dim"],
            f"{arch}.expert_shared_count": cfg["num_shared_experts"],
            f"{arch}.leading_dense_block_count": cfg["first_k_dense_replace"],
            f"{arch}.expert_gating_func": 2, **(extra or {})})
    tensors += [(f"blk.{i}.{name}", shape, 0) for i in range(n) for name, shape in names]
    path = tmp_path / f"{arch}.gguf"
    write_gguf(path, meta, tensors)
    return load_model(str(path))


def test_a_kimi_linear_gguf_reads_its_mla_and_kda_layers(tmp_path):
    spec, cat = _kimi_linear_gguf(tmp_path), load_model("kimi-linear-48b-a3b-instruct")
    assert spec.model_type == "kimi_linear"
    assert spec.groups == cat.groups
    for ctx, seqs in ((1000, 1), (262144, 4)):
        a, b = kvcore.cache_size(spec, ctx, seqs), kvcore.cache_size(cat, ctx, seqs)
        assert (a.total_bytes, a.state_bytes) == (b.total_bytes, b.state_bytes)
    # f16: 7 MLA layers (0-based 3, 7, ..., 23, 26) × (kv_lora_rank 512 + rope 64) × 2 bytes
    a1, a2 = kvcore.cache_size(spec, 1000, 1), kvcore.cache_size(spec, 2000, 1)
    assert (a2.total_bytes - a2.state_bytes) - (a1.total_bytes - a1.state_bytes) \
        == 7 * 576 * 2 * 1000
    # one sequence's KDA state, float32: per KDA layer 32 heads × 128 × 128 and the q, k, v
    # convolutions' (4 - 1) taps × 3 × 4096 channels, × 20 layers
    assert a1.state_bytes == 20 * (32 * 128 * 128 + 3 * 3 * 4096) * 4


@pytest.mark.parametrize("arch,extra,what", [
    ("kimi-linear", {"kimi-linear.attention.head_count_kv": 32}, "head_count_kv"),
    # llama.cpp's Kimi converters write no next-n blocks and its loaders read no such key:
    # which blocks would be drafts, and what cache they would hold, is not known
    ("kimi-linear", {"kimi-linear.nextn_predict_layers": 1},
     "kimi-linear.nextn_predict_layers 1 is not read: llama.cpp's kimi-linear converter "
     "writes no next-n .MTP. blocks and its loader reads no such key, so which of the file's "
     "blocks are draft blocks, and whether a draft block holds an MLA latent or Kimi Delta "
     "Attention state, is not known"),
    ("kimi-k3", {"kimi-k3.nextn_predict_layers": 1}, "kimi-k3.nextn_predict_layers 1 is not read"),
])
def test_kimi_linear_ggufs_that_cannot_be_read_exactly_are_refused(tmp_path, arch, extra, what):
    catalog = "kimi-k3" if arch == "kimi-k3" else "kimi-linear-48b-a3b-instruct"
    with pytest.raises(ConfigError, match=what) as e:
        _kimi_linear_gguf(tmp_path, extra, arch=arch, catalog=catalog)
    assert "\n" not in str(e.value)


def test_a_kimi_k3_gguf_is_the_kimi_k3_text_config(tmp_path):
    # conversion/kimi_k3.py: head_count_kv 1 on the MLA layers and 0 on the KDA ones,
    # key_length kv_lora_rank + rope (576), expert_latent_length the latent MoE's width; the
    # MLA output gate (attn_gate) and the full-rank KDA gate (ssm_g) are tensors of their own
    cfg = next(e for e in kvcore.model_catalog() if e.id == "kimi-k3").config()["text_config"]
    spec = _kimi_linear_gguf(
        tmp_path, {"kimi-k3.attention.key_length": 576, "kimi-k3.attention.value_length": 512,
                   "kimi-k3.expert_latent_length": cfg["routed_expert_hidden_size"]},
        arch="kimi-k3", catalog="kimi-k3", kv_heads=1,
        names=[("attn_gate.weight", (7168, 96 * 128)), ("ssm_g.weight", (7168, 96 * 128))])
    cat = load_model("kimi-k3")
    assert spec.model_type == cat.model_type == "kimi_linear"
    assert spec.groups == cat.groups
    for ctx, seqs in ((1000, 1), (1048576, 2)):
        a, b = kvcore.cache_size(spec, ctx, seqs), kvcore.cache_size(cat, ctx, seqs)
        assert (a.total_bytes, a.state_bytes) == (b.total_bytes, b.state_bytes)
    # f16: 24 MLA layers (0-based 3, 7, ..., 91 and 92) × 576 × 2 bytes a token; one
    # sequence's KDA state in float32: 96 heads × 128 × 128 + 3 convolutions' 3 taps × 96 ×
    # 128 channels, × 69 layers
    a1, a2 = kvcore.cache_size(spec, 1000, 1), kvcore.cache_size(spec, 2000, 1)
    assert (a2.total_bytes - a2.state_bytes) - (a1.total_bytes - a1.state_bytes) \
        == 24 * 576 * 2 * 1000
    assert a1.state_bytes == 69 * (96 * 128 * 128 + 3 * 3 * 96 * 128) * 4


# deepseek4 (DeepSeek-V4): conversion/deepseek.py DeepseekV4Model writes block_count the
# decoder's layers (its draft layers go to a separate mtp- file), attention.key_length the
# latent (head_dim), attention.compress_ratios the config's list (draft entries included),
# attention.sliding_window, the indexer's head_count / key_length / top_k, q_lora_rank,
# output_lora_rank, output_group_count, expert_shared_count, hash_layer_count and
# hyper_connection.count; src/models/deepseek4.cpp counts nextn_predict_layers only where
# blk.<first draft>.nextn.eh_proj.weight is in the file.
def _deepseek4_gguf(tmp_path, catalog, *, drafts=0, trunk=True, extra=None, name=None):
    cfg = next(e for e in kvcore.model_catalog() if e.id == catalog).config()
    n = cfg["num_hidden_layers"]
    meta, tensors = dense_model(
        "deepseek4", layers=n + drafts, hidden=cfg["hidden_size"],
        heads=cfg["num_attention_heads"], kv_heads=1, head_dim=cfg["head_dim"],
        ffn=cfg["moe_intermediate_size"], vocab=256, ctx=cfg["max_position_embeddings"],
        quant=8, head_type=8, extra={
            "deepseek4.rope.dimension_count": cfg["qk_rope_head_dim"],
            "deepseek4.attention.q_lora_rank": cfg["q_lora_rank"],
            "deepseek4.attention.sliding_window": cfg["sliding_window"],
            "deepseek4.expert_count": cfg["n_routed_experts"],
            "deepseek4.expert_used_count": cfg["num_experts_per_tok"],
            "deepseek4.expert_feed_forward_length": cfg["moe_intermediate_size"],
            "deepseek4.expert_shared_count": cfg["n_shared_experts"],
            "deepseek4.expert_gating_func": 4,
            "deepseek4.attention.indexer.head_count": cfg["index_n_heads"],
            "deepseek4.attention.indexer.key_length": cfg["index_head_dim"],
            "deepseek4.attention.indexer.top_k": cfg["index_topk"],
            "deepseek4.attention.output_group_count": cfg["o_groups"],
            "deepseek4.attention.output_lora_rank": cfg["o_lora_rank"],
            "deepseek4.attention.compress_ratios": cfg["compress_ratios"],
            "deepseek4.attention.compress_rope_freq_base": float(cfg["compress_rope_theta"]),
            "deepseek4.hyper_connection.count": cfg["hc_mult"],
            "deepseek4.hash_layer_count": cfg["num_hash_layers"],
            **({"deepseek4.nextn_predict_layers": drafts} if drafts else {}),
            **(extra or {})})
    tensors += [(f"blk.{n + j}.nextn.eh_proj.weight", (2 * cfg["hidden_size"],
                                                       cfg["hidden_size"]), 8)
                for j in range(drafts)]
    if not trunk:
        tensors = [t for t in tensors if not t[0].startswith("blk.")
                   or int(t[0].split(".")[1]) >= n]
    path = tmp_path / (name or f"{catalog}.gguf")
    write_gguf(path, meta, tensors)
    return load_model(str(path))


@pytest.mark.parametrize("catalog", ["deepseek-v4-flash", "deepseek-v4-pro"])
def test_a_deepseek4_gguf_reads_its_sliding_compressed_and_index_layers(tmp_path, catalog):
    cat = load_model(catalog)
    # the converter's file: no draft layer, so the catalog's groups less its MTP layer
    spec = _deepseek4_gguf(tmp_path, catalog)
    assert spec.model_type == "deepseek_v4" and not spec.has_mtp
    assert spec.groups == tuple(g for g in cat.groups if not g.mtp)
    assert {g.kind for g in spec.groups} == {"sliding", "compressed", "index", "compressor"}
    # a file with its draft block (nextn_predict_layers and blk.N.nextn.eh_proj): all of them
    spec = _deepseek4_gguf(tmp_path, catalog, drafts=1, name="mtp.gguf")
    assert spec.has_mtp and spec.groups == cat.groups
    for ctx, seqs in ((1000, 1), (262144, 3)):
        a, b = kvcore.cache_size(spec, ctx, seqs), kvcore.cache_size(cat, ctx, seqs)
        assert (a.total_bytes, a.state_bytes) == (b.total_bytes, b.state_bytes)


def test_a_deepseek4_gguf_s_cache_worked_by_hand(tmp_path):
    # Flash, f16, one sequence of 1,024 tokens: every layer a 128-token window of the
    # 512-value latent (43 × 128 × 512), the 21 ratio-4 layers 256 compressed latents and
    # 256 indexer keys of 128, the 20 ratio-128 layers 8 compressed latents
    spec = _deepseek4_gguf(tmp_path, "deepseek-v4-flash")
    c = kvcore.cache_size(spec, 1024, 1)
    values = 43 * 128 * 512 + 21 * 256 * (512 + 128) + 20 * 8 * 512
    # the compressors' float32 rows: 21 × (2 × 8 × 1024 + 2 × 8 × 256), 20 × 2 × 128 × 512
    state = 21 * 20480 * 4 + 20 * 131072 * 4
    assert (c.total_bytes - c.state_bytes, c.state_bytes) == (values * 2, state)


@pytest.mark.parametrize("kw,what", [
    # nextn_predict_layers without the draft block's tensors: every block is the decoder's
    # (llama.cpp's probe), and 44 blocks need 44 ratios of 0, 4 or 128
    ({"extra": {"deepseek4.attention.compress_ratios": [0, 4] * 20}}, "compress_ratios"),
    ({"extra": {"deepseek4.attention.compress_ratios": [0, 0] + [4, 64] * 21}},
     "compress_ratios"),
    ({"extra": {"deepseek4.attention.value_length": 448}}, "one latent"),
    ({"drafts": 1, "trunk": False}, "draft .MTP. blocks only"),
])
def test_deepseek4_ggufs_that_cannot_be_read_exactly_are_refused(tmp_path, kw, what):
    with pytest.raises(ConfigError, match=what) as e:
        _deepseek4_gguf(tmp_path, "deepseek-v4-flash", **kw)
    assert "\n" not in str(e.value)


def test_a_deepseek4_gguf_without_its_draft_tensors_reads_every_block_as_the_decoder_s(tmp_path):
    # nextn_predict_layers 1 but no blk.43.nextn.eh_proj.weight: llama.cpp reads 43 layers
    # of the 43 blocks, no draft
    spec = _deepseek4_gguf(tmp_path, "deepseek-v4-flash",
                           extra={"deepseek4.nextn_predict_layers": 1})
    assert not spec.has_mtp and spec.num_layers == 43


def _hy4_gguf(tmp_path, types):
    """Hy4 as llama.cpp's converter writes it (conversion HYV4Model, src/models/hy-v4.cpp):
    one KV head of the 576-value latent, the indexer's head count, key width and top-k, and
    attention.indexer.types (true where the layer runs its own indexer)."""
    arch, n = "hy_v4", len(types)
    meta, tensors = dense_model(
        arch, layers=n, hidden=2816, heads=32, kv_heads=1, head_dim=576, ffn=6912, vocab=256,
        ctx=262144, quant=8, head_type=8, experts=256, used=8, expert_ffn=768, extra={
            f"{arch}.attention.key_length_mla": 256, f"{arch}.attention.value_length_mla": 256,
            f"{arch}.attention.kv_lora_rank": 512, f"{arch}.attention.q_lora_rank": 1536,
            f"{arch}.rope.dimension_count": 64, f"{arch}.expert_shared_count": 1,
            f"{arch}.leading_dense_block_count": 1, f"{arch}.attention.indexer.head_count": 16,
            f"{arch}.attention.indexer.key_length": 128,
            f"{arch}.attention.indexer.top_k": 2048,
            f"{arch}.attention.indexer.types": types})
    path = tmp_path / "hy4.gguf"
    write_gguf(path, meta, tensors)
    return load_model(str(path))


def test_a_hy_v4_gguf_keeps_indexer_keys_in_the_layers_it_marks(tmp_path):
    types = [True, True] + [False, False, False, True] * 8
    s = _hy4_gguf(tmp_path, types)
    groups = {g.kind: g for g in s.groups}
    assert groups[kvcore.LayerKind.MLA].count == 34
    assert groups[kvcore.LayerKind.MLA].head_dim_k == 576
    assert groups[kvcore.LayerKind.INDEXER].layers == tuple(i for i, t in enumerate(types) if t)
    assert groups[kvcore.LayerKind.INDEXER].head_dim_k == 128


def test_a_hy_v4_gguf_whose_first_layer_shares_an_indexer_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="layer 0 run its own indexer") as e:
        _hy4_gguf(tmp_path, [False] + [True] * 33)
    assert e.value.field == "hy_v4.attention.indexer.types"
