import json
import logging
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import kvcore
from kvcore import HubError, UnknownNameError, load_model, model_catalog
from kvcore.catalog import MAX_CONFIG_BYTES, parse_config_text, variants
from kvcore.errors import ConfigError

FAMILIES = ["Llama 3.1", "Llama 3.2", "Llama 4", "Mistral", "Mixtral", "Qwen2.5", "Qwen3",
            "Qwen3.5", "Gemma 2", "Gemma 3", "DeepSeek", "Kimi", "gpt-oss", "Phi", "GLM",
            "Nemotron-H", "MiniMax", "Nemotron-NAS"]


def test_catalog_has_40_sized_models():
    entries = model_catalog()
    assert len(entries) >= 40
    for entry in entries:
        assert entry.source, entry.id
        spec = load_model(entry.id)
        assert spec.groups, entry.id


def test_catalog_files_are_verbatim_json_objects():
    for entry in model_catalog():
        assert isinstance(entry.config(), dict)


@pytest.mark.parametrize("family", FAMILIES)
def test_family_covered(family):
    names = " ".join(f"{e.family} {e.repo}" for e in model_catalog()).lower()
    assert family.lower() in names


def test_repo_id_resolves_offline_from_catalog(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    assert load_model("Qwen/Qwen3.5-27B").name == "qwen3.5-27b"
    assert load_model("qwen/qwen3.5-27b").name == "qwen3.5-27b"


@pytest.mark.parametrize("address", [
    "https://huggingface.co/Qwen/Qwen3-8B", "huggingface.co/Qwen/Qwen3-8B/",
    "https://www.huggingface.co/Qwen/Qwen3-8B/tree/main",
    "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json",
    "https://huggingface.co/Qwen/Qwen3-8B/resolve/main/config.json?download=true",
    "https://hf.co/Qwen/Qwen3-8B#model-card", "https://huggingface.co/Qwen/Qwen3-8B/discussions/3"])
def test_a_hub_address_is_its_repository(monkeypatch, address):
    # an address pasted from the browser is the repo id it names: the catalog answers offline
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    spec = load_model(address, allow_local=False)
    assert spec.name == load_model("qwen3-8b").name and spec.hub_repo == "Qwen/Qwen3-8B"
    assert kvcore.bytes_per_token(spec) == kvcore.bytes_per_token(load_model("qwen3-8b"))


def test_a_hub_address_at_a_revision_reads_that_revision(monkeypatch):
    asked = []

    def fetch(repo, revision=None):
        asked.append((repo, revision))
        return next(e for e in model_catalog() if e.id == "qwen3-8b").config(), None, None

    monkeypatch.setattr("kvcore.catalog.fetch_config", fetch)
    spec = load_model("https://huggingface.co/someone/Qwen3-8B-tuned/blob/v2.1/config.json")
    assert asked == [("someone/Qwen3-8B-tuned", "v2.1")]
    assert spec.name == "someone/Qwen3-8B-tuned@v2.1" and spec.hub_repo == "someone/Qwen3-8B-tuned"
    # a server that reads no Hub says which revision it cannot read
    with pytest.raises(kvcore.InputError, match="revision 'v2.1' of someone/Qwen3-8B-tuned"):
        load_model("https://huggingface.co/someone/Qwen3-8B-tuned/tree/v2.1", allow_local=False,
                   allow_hub=False)


@pytest.mark.parametrize(("address", "repo", "tag"), [
    ("https://huggingface.co/unsloth/Qwen3-8B-GGUF/blob/main/Qwen3-8B-Q4_K_M.gguf",
     "unsloth/Qwen3-8B-GGUF", "Q4_K_M"),
    ("https://huggingface.co/unsloth/Qwen3-8B-GGUF/resolve/main/Qwen3-8B-UD-Q4_K_XL.gguf",
     "unsloth/Qwen3-8B-GGUF", "UD-Q4_K_XL"),
    ("hf.co/bartowski/Llama-3.2-1B-Instruct-GGUF:Q8_0", "bartowski/Llama-3.2-1B-Instruct-GGUF",
     "Q8_0"),
])
def test_a_gguf_address_is_its_quantization(monkeypatch, address, repo, tag):
    # a GGUF file's address, or Ollama's hf.co/OWNER/NAME:TAG, is what llama.cpp's -hf names
    asked = []
    monkeypatch.setattr("kvcore.catalog.gguf_spec", lambda r, t: asked.append((r, t)) or "spec")
    assert load_model(address) == "spec" and asked == [(repo, tag)]


@pytest.mark.parametrize(("address", "needle"), [
    ("https://huggingface.co/datasets/foo/bar", "the Hub address of a dataset, not of a model"),
    ("https://huggingface.co/spaces/foo/bar", "the Hub address of a Space, not of a model"),
    ("https://huggingface.co/Qwen", "a Hub address but not of a model repository"),
    ("huggingface.co", "a Hub address but not of a model repository"),
    ("https://huggingface.co/Qwen/Qwen3-8B/blob/v1/a/Qwen3-8B-Q4_K_M.gguf",
     "give Qwen/Qwen3-8B:Q4_K_M"),
    # a folder may hold another model: its config.json is not the repository's
    ("https://huggingface.co/org/model/tree/main/draft", "names 'draft' inside org/model"),
    ("https://huggingface.co/org/model/blob/main/draft/config.json",
     "names 'draft/config.json' inside org/model; kvplan reads the config.json at a repository's top"),
])
def test_a_hub_address_of_no_model_is_refused_with_what_it_names(address, needle):
    with pytest.raises(kvcore.InputError, match=re.escape(needle)) as e:
        load_model(address, allow_local=False, allow_hub=False)
    assert e.value.field == "model"


@pytest.mark.parametrize(("query", "ids"), [
    ("qwen3 coder", ["qwen3-coder-30b-a3b-instruct"]),
    ("GEMMA3:27B", ["gemma-3-27b-it"]),                       # Ollama's spelling
    ("HuggingFaceTB", ["smollm-1.7b", "smollm3-3b"]),         # the owner
    ("Llama-3.3-70B-Instruct", ["llama-3.1-70b-instruct"]),   # a twin's repository
    ("qwen35 397b", ["qwen3.5-397b-a17b"]),                   # dots dropped
    ("kimi, linear", ["kimi-linear-48b-a3b-instruct"]),
    ("deepseek-r1:7b", ["deepseek-r1-distill-qwen-7b"]),       # words apart at - and :
    # a number alone is a whole number of a name: not gemma-4-31b-it's 31
    ("gemma 3", ["gemma-3-1b-it", "gemma-3-27b-it", "gemma-3-4b-it"]),
    ("no-such-model", []),
])
def test_a_catalog_search_keeps_the_entries_every_word_names(query, ids):
    assert [e.id for e in kvcore.catalog.find_models(query)] == ids


@pytest.mark.parametrize(("query", "needle"), [
    (" : - ", "q must hold a word of a model's name"), ("x" * 201, "q is at most 200 characters")])
def test_a_catalog_search_without_a_word_is_refused(query, needle):
    with pytest.raises(kvcore.InputError, match=needle) as e:
        kvcore.catalog.find_models(query)
    assert e.value.field == "q"


@pytest.mark.parametrize(("ref", "hint"), [
    ("bartowski/Llama-3.2-1B-Instruct-GGUF:Q4_K_M",
     "; offline, `kvplan llama-3.2-1b-instruct --weights q4_k_m` plans the catalog's "
     "llama-3.2-1b-instruct (meta-llama/Llama-3.2-1B-Instruct) in llama-quantize's Q4_K_M types"),
    ("https://huggingface.co/unsloth/gpt-oss-20b-GGUF/blob/main/gpt-oss-20b-MXFP4_MOE.gguf",
     "; offline, `kvplan gpt-oss-20b --weights mxfp4` plans the catalog's gpt-oss-20b"),
    ("bartowski/Qwen_Qwen3-8B-GGUF:Q8_0",
     "; offline, `kvplan qwen3-8b --weights q8_0` plans the catalog's qwen3-8b (Qwen/Qwen3-8B)"),
    ("unsloth/Qwen3-8B-GGUF:UD-Q4_K_XL",
     "; offline, the catalog has qwen3-8b (Qwen/Qwen3-8B): `kvplan qwen3-8b --weights TYPE` "
     "plans it in the llama-quantize type nearest 'UD-Q4_K_XL', which kvplan does not price"),
])
def test_an_unreachable_gguf_repository_names_the_catalog_model_it_holds(monkeypatch, ref, hint):
    from kvcore.hub import HubUnavailable

    def offline(repo, tag):
        raise HubUnavailable(f"the Hub could not be reached to read the file list of '{repo}'",
                             field="model")

    monkeypatch.setattr("kvcore.catalog.gguf_spec", offline)
    with pytest.raises(HubUnavailable) as e:
        load_model(ref)
    assert hint in str(e.value) and e.value.field == "model"


def fake_hub(monkeypatch, tmp_path, files=None, error=None):
    errors = types.SimpleNamespace(**{
        name: type(name, (Exception,), {}) for name in (
            "GatedRepoError", "RepositoryNotFoundError", "RevisionNotFoundError",
            "EntryNotFoundError", "LocalEntryNotFoundError")})

    def download(repo, filename, revision=None):
        if error:
            raise getattr(errors, error)()
        if filename not in (files or {}):
            raise errors.EntryNotFoundError()
        path = tmp_path / filename
        path.write_text(files[filename])
        return str(path)

    module = types.SimpleNamespace(hf_hub_download=download, errors=errors)
    monkeypatch.setitem(sys.modules, "huggingface_hub", module)
    monkeypatch.setitem(sys.modules, "huggingface_hub.errors", errors)


def test_hub_fetch_uses_config_and_index(monkeypatch, tmp_path):
    config = next(e for e in model_catalog() if e.id == "qwen3-8b").config()
    index = {"metadata": {"total_size": 16_381_470_720}, "weight_map": {}}
    fake_hub(monkeypatch, tmp_path, {"config.json": json.dumps(config),
                                     "model.safetensors.index.json": json.dumps(index)})
    spec = load_model("someone/Qwen3-8B-finetune")
    assert spec.source == "hub someone/Qwen3-8B-finetune"
    assert spec.safetensors_total_bytes == 16_381_470_720
    assert kvcore.weights_for(spec).source == "safetensors index"


@pytest.mark.parametrize(("error", "needle"), [
    ("GatedRepoError", "gated"), ("RepositoryNotFoundError", "not a Hub repository"),
    ("LocalEntryNotFoundError", "offline"),
])
def test_hub_errors_are_sentences(monkeypatch, tmp_path, error, needle):
    fake_hub(monkeypatch, tmp_path, error=error)
    with pytest.raises(HubError, match=needle):
        load_model("someone/private-model")


def test_hub_missing_dependency(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(HubError, match=r"kvplan\[hub\]"):
        load_model("someone/not-in-catalog")


def test_server_mode_never_reads_paths(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UnknownNameError):
        load_model(str(tmp_path), allow_local=False, allow_hub=False)


def test_parse_config_text_limits():
    # 16 MiB: five times the largest real config (nvidia/MiniMax-M3-NVFP4, 3,087,083 bytes:
    # its quantization_config lists every layer), absurd input still refused
    assert MAX_CONFIG_BYTES == 16 * 1024 * 1024
    with pytest.raises(ConfigError, match="larger than 16,777,216 bytes"):
        parse_config_text("{" + " " * MAX_CONFIG_BYTES + "}")
    assert parse_config_text("{" + " " * (MAX_CONFIG_BYTES - 2) + "}") == {}
    with pytest.raises(ConfigError, match="nested"):
        parse_config_text('{"a":' * 40 + "1" + "}" * 40)
    with pytest.raises(ConfigError, match="JSON object"):
        parse_config_text("[1]")


def test_hub_answers_are_cached(monkeypatch, tmp_path):
    config = next(e for e in model_catalog() if e.id == "qwen3-8b").config()
    calls = []
    fake_hub(monkeypatch, tmp_path, {"config.json": json.dumps(config)})
    import huggingface_hub

    real = huggingface_hub.hf_hub_download

    def counting(repo, filename, revision=None):
        calls.append(filename)
        return real(repo, filename, revision)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", counting)
    load_model("someone/cached-once")
    load_model("someone/cached-once")
    assert calls.count("config.json") == 1


def test_hub_unreachable_is_offline_not_missing_file(monkeypatch):
    # the real huggingface_hub: LocalEntryNotFoundError is a kind of EntryNotFoundError
    hf = pytest.importorskip("huggingface_hub")

    def unreachable(repo, filename, revision=None):
        raise hf.errors.LocalEntryNotFoundError("cannot reach the Hub")

    monkeypatch.setattr(hf, "hf_hub_download", unreachable)
    with pytest.raises(HubError, match="could not be reached"):
        load_model("someone/offline-model")


@pytest.fixture
def no_route(monkeypatch):
    """A machine whose resolver does not know the Hub, with no proxy and no HF_HUB_OFFLINE;
    returns the hosts probed."""
    from kvcore import hub

    for var in ("HF_HUB_OFFLINE", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy",
                "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    probed = []
    monkeypatch.setattr(hub, "_resolves", lambda host: probed.append(host) or False)
    monkeypatch.setattr(hub, "_probed", {})
    hub._fetch.cache_clear()
    yield probed
    hub._fetch.cache_clear()


def test_unresolvable_hub_reads_only_the_cache(monkeypatch, tmp_path, no_route):
    # no retries against a Hub that cannot be reached: the HF cache is asked, once per file
    config = next(e for e in model_catalog() if e.id == "qwen3-8b").config()
    (tmp_path / "config.json").write_text(json.dumps(config))
    asked = []
    fake_hub(monkeypatch, tmp_path, {})
    errors = sys.modules["huggingface_hub.errors"]

    def cached(repo, filename, revision=None, local_files_only=False):
        asked.append((repo, filename, local_files_only))
        if repo == "someone/cached" and filename == "config.json":
            return str(tmp_path / "config.json")
        raise errors.LocalEntryNotFoundError()

    monkeypatch.setattr(sys.modules["huggingface_hub"], "hf_hub_download", cached)
    assert load_model("someone/cached").name == "someone/cached"
    with pytest.raises(HubError, match="could not be reached .* not in the HF cache"):
        load_model("someone/not-cached")
    assert asked and all(only for _, _, only in asked)
    assert no_route == ["huggingface.co"]  # one probe, kept for the next lookup


def test_unresolvable_hub_lists_no_gguf_repo(monkeypatch, tmp_path, no_route):
    fake_hub(monkeypatch, tmp_path, {})

    def never(*args, **kwargs):
        raise AssertionError("the Hub was asked")

    monkeypatch.setattr(sys.modules["huggingface_hub"], "HfApi", never, raising=False)
    with pytest.raises(HubError, match=r"huggingface\.co does not resolve.*file list of 'someone/M-GGUF'"):
        load_model("someone/M-GGUF:Q4_K_M")


def test_probe_follows_endpoint_and_skips_proxies(monkeypatch, no_route):
    from kvcore import hub

    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example.org:8443/")
    assert not hub.hub_reachable() and no_route == ["hub.example.org"]
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example.org:3128")
    assert hub.hub_reachable() and no_route == ["hub.example.org"]  # the proxy resolves names


def test_resolver_failures_and_silence_read_as_unresolved(monkeypatch):
    import socket
    import threading

    from kvcore import hub

    def unknown(*args, **kwargs):
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", unknown)
    assert hub._resolves("huggingface.co") is False
    release = threading.Event()
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: release.wait(5) and [])
    monkeypatch.setattr(hub, "PROBE_TIMEOUT_S", 0.05)
    assert hub._resolves("huggingface.co") is False  # no answer in time
    release.set()
    monkeypatch.setattr(socket, "getaddrinfo", lambda *a, **k: [("addr",)])
    assert hub._resolves("huggingface.co") is True


@pytest.mark.parametrize(("typed", "entry_id"), [
    ("qwen3 8b", "qwen3-8b"), ("Qwen3_8B", "qwen3-8b"), ("qwen3:8b", "qwen3-8b"),
    ("llama3.1-8b", "llama-3.1-8b"), ("deepseek v3", "deepseek-v3"), ("gptoss-120b", "gpt-oss-120b"),
    ("Qwen3.5 27B", "qwen3.5-27b"),
])
def test_a_name_typed_loosely_is_its_one_entry(monkeypatch, typed, entry_id):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    expected = load_model(entry_id)
    spec = load_model(typed)
    assert spec.name == expected.name and spec.source == expected.source


@pytest.mark.parametrize(("typed", "entry_id", "repo", "weights", "tuned"), [
    # the tag's quantization is the checkpoint's: the plan prices it without --weights
    ("qwen3:8b-q8_0", "qwen3-8b", "Qwen/Qwen3-8B", "q8_0", False),
    ("qwen3:30b-a3b-q4_K_M", "qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", "q4_k_m", False),
    ("qwen3:8b-fp16", "qwen3-8b", "Qwen/Qwen3-8B", "f16", False),
    ("qwen3:8b-bf16", "qwen3-8b", "Qwen/Qwen3-8B", "bf16", False),
    # a size tag of a model whose name carries none, where its parameters are that size
    ("deepseek-r1:671b-q4_K_M", "deepseek-r1", "deepseek-ai/DeepSeek-R1", "q4_k_m", False),
    # the one entry whose name goes on to say only its active parameters and its tuning
    ("qwen3-coder:30b-q8_0", "qwen3-coder-30b-a3b-instruct", "Qwen/Qwen3-Coder-30B-A3B-Instruct",
     "q8_0", True),
    # a repository that shares an entry's config is that repository
    ("llama3.1:8b-instruct-q4_K_M", "llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", "q4_k_m",
     False),
    # Ollama's library serves the chat-tuned model under the bare name, where the catalog
    # also has the base model
    ("llama3.1:70b-q4_0", "llama-3.1-70b-instruct", "meta-llama/Llama-3.1-70B-Instruct", "q4_0",
     True),
    ("qwen2.5:7b", "qwen2.5-7b-instruct", "Qwen/Qwen2.5-7B-Instruct", None, True),
    ("gemma3:27b", "gemma-3-27b-it", "google/gemma-3-27b-it", None, True),
    ("llama3.2:3b", "llama-3.2-3b-instruct", "meta-llama/Llama-3.2-3B-Instruct", None, True),
])
def test_ollamas_name_is_its_catalog_model_in_the_quantization_its_tag_names(
        typed, entry_id, repo, weights, tuned):
    from kvcore.catalog import ollama_entry
    from kvcore.weights import weights_for

    named = ollama_entry(typed)
    assert named is not None and named.entry.id == entry_id and named.weights == weights
    spec = load_model(typed, allow_hub=False)
    assert spec.hub_repo == repo and spec.checkpoint_weights == weights
    own = load_model(entry_id)
    assert spec.groups == own.groups and spec.params == own.params
    if weights is not None:
        assert weights_for(spec).format == weights
        assert weights_for(spec).bytes == weights_for(own, weights).bytes
        if weights not in ("bf16", "f16"):
            assert weights_for(spec).bytes < weights_for(own).bytes
        assert any("as Ollama spells it, is read as" in n and f"in {weights.upper()}, as its "
                   "tag names" in n for n in spec.notes)
    else:
        assert weights_for(spec).bytes == weights_for(own).bytes
    # the chat-tuned entry is named where Ollama's name leaves its word out
    assert named.tuned == tuned
    assert any("(its library serves the chat-tuned model)" in n for n in spec.notes) == tuned


@pytest.mark.parametrize("typed", [
    "qwen3:8b-q9_9",         # no type kvplan prices: the entry, and a note says so
])
def test_ollamas_tag_of_a_type_kvplan_does_not_price_is_named(typed):
    spec = load_model(typed, allow_hub=False)
    assert spec.checkpoint_weights is None and any(
        "its tag's Q9_9 is no type kvplan prices: --weights gives the nearest" in n
        for n in spec.notes)


@pytest.mark.parametrize("typed", ["gemma3:27b-it-qat", "qwen3:latest", "foo:1b", "qwen3:",
                                   ":8b", "qwen3:8b-text-q4_K_M",
                                   # DeepSeek-R1 is 671B, not 7B (Ollama's 7b is a distill)
                                   "deepseek-r1:7b", "deepseek-r1:600b",
                                   # Qwen3-30B-A3B, its Instruct-2507 or its Coder: not one
                                   "qwen3:30b"])
def test_ollamas_name_of_no_entry_is_unknown(typed):
    from kvcore.catalog import ollama_entry

    assert ollama_entry(typed) is None
    with pytest.raises(UnknownNameError):
        load_model(typed, allow_hub=False)


def test_ollamas_name_of_a_checkpoint_stored_quantized_is_planned_as_stored():
    spec = load_model("gpt-oss:20b")
    assert spec.checkpoint_weights == "mxfp4_moe" and any(
        "the quantization its library tag holds is not read: planned as the checkpoint's "
        "mxfp4_moe" in n for n in spec.notes)


def test_ollamas_spelling_says_its_tag_quantization_is_not_read():
    ollama = load_model("qwen3:8b")
    assert ollama.name == "qwen3-8b" and any(
        "'qwen3:8b', as Ollama spells it, is read as the catalog's qwen3-8b; the quantization "
        "its library tag holds is not read" in n for n in ollama.notes)
    # the same name spelled another way names no tag
    assert not any("Ollama" in n for n in load_model("Qwen3 8B").notes)


@pytest.mark.parametrize("typed", ["qwen35-27b", "qwen3-8", "gemma3 27b", "llama 3 8b"])
def test_a_loose_name_of_no_entry_is_still_unknown(typed):
    # dots count (qwen3.5 is not qwen35), and nothing is guessed beyond spelling
    with pytest.raises(UnknownNameError):
        load_model(typed, allow_hub=False)


def test_a_loose_spelling_two_entries_share_names_neither(monkeypatch):
    import dataclasses

    import kvcore.catalog as catalog

    real = next(e for e in model_catalog() if e.id == "qwen3-8b")
    twins = (dataclasses.replace(real, id="foo-1b", repo="x/Foo-1B"),
             dataclasses.replace(real, id="foo_1b", repo="y/Foo_1B"),
             dataclasses.replace(real, id="bar-2b", repo="z/Bar-2B"))
    monkeypatch.setattr(catalog, "model_catalog", lambda: twins)
    catalog._loose_keys.cache_clear()
    try:
        keys = catalog._loose_keys()
        assert "foo1b" not in keys and keys["bar2b"].id == "bar-2b"
    finally:
        monkeypatch.undo()
        catalog._loose_keys.cache_clear()


def test_aliases_resolve_offline_to_their_entry(monkeypatch):
    # another repository whose config.json is the entry's but for fields kvplan does not read
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    import dataclasses

    for repo, entry_id in (("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
                           ("meta-llama/Llama-3.2-1B", "llama-3.2-1b-instruct"),
                           ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b-v0.1"),
                           ("deepseek-ai/DeepSeek-V2-Lite", "deepseek-v2-lite-chat"),
                           ("meta-llama/Llama-3.3-70B-Instruct", "llama-3.1-70b-instruct"),
                           ("Qwen/Qwen3-Next-80B-A3B-Thinking", "qwen3-next-80b-a3b-instruct")):
        loosely = repo.split("/")[1].replace("-", " ").replace("_", " ")
        for spelling in (repo, repo.lower(), repo.split("/")[1], loosely):
            spec = load_model(spelling)
            assert spec.hub_repo == repo
            assert spec.source.startswith(f"catalog ({entry_id}'s config, equal to {repo}'s")
            entry = load_model(entry_id)
            assert dataclasses.replace(spec, hub_repo=entry.hub_repo, source=entry.source) == entry


def test_an_alias_is_suggested_for_its_variant_and_a_loose_spelling_of_an_entry_wins():
    # no base Llama-3.3-70B is bundled: its instruct alias is the first suggestion
    with pytest.raises(UnknownNameError) as info:
        load_model("llama-3.3-70b")
    assert info.value.suggestions[0] == "llama-3.3-70b-instruct"
    # a loose spelling an entry has is the entry's, not an alias's
    assert load_model("Llama 3.1 8B").hub_repo == "meta-llama/Llama-3.1-8B"
    assert load_model("llama 3.1 8b instruct").hub_repo == "meta-llama/Llama-3.1-8B-Instruct"


ALIAS_COPIES = Path(__file__).resolve().parent / "data" / "aliases"
#: fields of a config.json that name tokens or tooling, not the model's shape
UNREAD = {"eos_token_id", "bos_token_id", "pad_token_id", "transformers_version", "_name_or_path"}


@pytest.mark.parametrize("entry_alias", [(e, a) for e in model_catalog() for a in e.aliases],
                         ids=lambda ea: ea[1].repo)
def test_an_alias_config_is_its_entry_config_but_for_the_fields_it_names(entry_alias):
    # the copy each alias was checked against (tests/data/aliases) differs from the entry's
    # bundled config only in the fields it names, and kvplan reads both into one model
    entry, alias = entry_alias
    copy = json.loads((ALIAS_COPIES / (alias.repo.replace("/", "--") + ".json")).read_text())
    bundled = entry.config()
    differ = {k for k in set(copy) | set(bundled) if copy.get(k) != bundled.get(k)}
    assert differ <= UNREAD
    named = set(re.findall(r"\w+", alias.differs)) - {"and"}
    assert differ == named
    from kvcore.hf import spec_from_config

    mine = spec_from_config(copy, name=entry.id, source="copy")
    theirs = spec_from_config(bundled, name=entry.id, source="copy")
    assert mine == theirs


def test_every_alias_is_sourced_and_names_no_other_entry():
    repos = {e.repo.lower() for e in model_catalog()} | {e.id for e in model_catalog()}
    aliases = [a for e in model_catalog() for a in e.aliases]
    assert len(aliases) >= 4
    for alias in aliases:
        assert alias.repo.lower() not in repos
        assert re.match(r"github\.com/[\w.-]+/[\w.-]+/blob/[0-9a-f]{40}/\S+config\.json ",
                        alias.source), alias.source
    assert len({a.repo.lower() for a in aliases}) == len(aliases)


@pytest.mark.parametrize(("name", "ids"), [
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", ["llama-3.1-8b"]),
    ("meta-llama/Llama-3.1-70B", ["llama-3.1-70b", "llama-3.1-70b-instruct"]),
    ("google/gemma-2-9b-it", ["gemma-2-9b"]),
    ("google/gemma-3-27b-pt", ["gemma-3-27b-it"]),
    ("Qwen/Qwen2.5-72B-Instruct", ["qwen2.5-72b"]),
    # Qwen's 2507 pair: the Thinking model is the Instruct one's variant
    ("Qwen/Qwen3-4B-Thinking-2507", ["qwen3-4b-instruct-2507"]),
    ("Qwen/Qwen3-30B-A3B-Thinking-2507", ["qwen3-30b-a3b-instruct-2507"]),
    ("mistralai/Mistral-7B-Instruct-v0.1", ["mistral-7b-v0.1"]),
    ("meta-llama/Llama-2-7b-chat-hf", ["llama-2-7b-hf"]),
    ("deepseek-ai/DeepSeek-V2-Lite", ["deepseek-v2-lite-chat"]),
    ("Qwen/Qwen2.5-14B-Instruct", ["qwen2.5-14b"]),
    # a quantized or converted copy names the model it was made from
    ("unsloth/Qwen3-8B-GGUF", ["qwen3-8b"]), ("Qwen/Qwen3-8B-AWQ", ["qwen3-8b"]),
    ("mlx-community/Qwen3-8B-4bit", ["qwen3-8b"]), ("gemma3:27b-it-qat", ["gemma-3-27b-it"]),
    # Ollama's library names, spelled loosely
    ("gemma3:27b", ["gemma-3-27b-it"]), ("llama3.2:3b", ["llama-3.2-3b-instruct"]),
    # another size, another version or another model is no variant
    ("meta-llama/Llama-3.1-13B-Instruct", []), ("Qwen/Qwen3-1.7B", []),
    ("microsoft/Phi-3-mini-8k-instruct", []), ("someone/offline-model", [])])
def test_variants_are_the_same_model_named_with_other_variant_words(name, ids):
    assert [e.id for e in variants(name)] == ids


def test_an_unknown_name_suggests_its_bundled_variant_first():
    for name, first in (("llama-3.1-405b-instruct", "llama-3.1-405b"), ("gemma-2-9b-it", "gemma-2-9b"),
                        ("qwen3-8b-base", "qwen3-8b"),
                        ("llama3.2 3b", "llama-3.2-3b-instruct"),
                        # the few entries whose names hold every word typed
                        ("deepseek-r1:7b", "deepseek-r1-distill-qwen-7b"),
                        ("qwen3:235b", "qwen3-235b-a22b")):
        with pytest.raises(UnknownNameError) as info:
            load_model(name)
        assert info.value.suggestions[0] == first


def test_hub_unreachable_names_the_bundled_variant(monkeypatch, tmp_path):
    fake_hub(monkeypatch, tmp_path, error="LocalEntryNotFoundError")
    with pytest.raises(HubError) as info:
        load_model("meta-llama/Meta-Llama-3.1-8B-Instruct")
    assert str(info.value) == (
        "the Hub could not be reached and 'meta-llama/Meta-Llama-3.1-8B-Instruct/config.json' "
        "is not in the HF cache (offline?); the bundled catalog has 'llama-3.1-8b' "
        "(meta-llama/Llama-3.1-8B), another variant of it")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(HubError, match=r"kvplan\[hub\]'; the bundled catalog has 'qwen2.5-72b'"):
        load_model("Qwen/Qwen2.5-72B-Instruct")
    # a repository the Hub answered for gets no such note: the Hub was asked
    fake_hub(monkeypatch, tmp_path, error="RepositoryNotFoundError")
    with pytest.raises(HubError, match="is not a Hub repository") as info:
        load_model("Qwen/Qwen2.5-72B-Instruct")
    assert "bundled" not in str(info.value)


def test_hub_retry_warnings_stay_off_the_cli_error():
    # huggingface_hub logs every retry to stderr; the CLI prints only its one error line
    script = (
        "import huggingface_hub as hf, sys\n"
        "from huggingface_hub.utils import logging\n"
        "def unreachable(repo, filename, revision=None):\n"
        "    logging.get_logger('huggingface_hub.utils._http').warning('Retrying in 1s')\n"
        "    raise hf.errors.LocalEntryNotFoundError('cannot reach the Hub')\n"
        "hf.hf_hub_download = unreachable\n"
        "from app.cli import main\n"
        "sys.exit(main(['someone/offline-model']))\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "kvplan: error: the Hub could not be reached and 'someone/offline-model/config.json' "
        "is not in the HF cache (offline?)"]
    # huggingface_hub imported after the command started (as a Hub fetch does) stays quiet too
    script = ("import logging, os\n"
              "os.environ.pop('HF_HUB_VERBOSITY', None)\n"
              "from app.cli import main\n"
              "main(['no-such-model'])\n"
              "from huggingface_hub.utils import logging as hf_logging\n"
              "print(logging.getLogger('huggingface_hub').getEffectiveLevel())\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.stdout.strip() == str(logging.ERROR)


def test_local_config_file_reads_the_index_beside_it(tmp_path):
    # the folder and its config.json are the same checkpoint: same weights, from the index
    config = next(e for e in model_catalog() if e.id == "qwen3-8b").config()
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 17_000_000_000}, "weight_map": {}}))
    for ref in (tmp_path, tmp_path / "config.json"):
        spec = load_model(str(ref))
        assert spec.safetensors_total_bytes == 17_000_000_000
        assert kvcore.weights_for(spec).source == "safetensors index"
    # another file name is a config alone
    (tmp_path / "other.json").write_text(json.dumps(config))
    assert load_model(str(tmp_path / "other.json")).safetensors_total_bytes is None


def test_an_index_total_holds_the_draft_layers_its_config_declares(monkeypatch, tmp_path):
    # DeepSeek-V3's checkpoint stores its MTP layer (num_nextn_predict_layers: 1), which a
    # server loads only for speculative decoding: the resident weights leave it out unless asked
    config = next(e for e in model_catalog() if e.id == "deepseek-v3").config()
    total = 688_574_839_360
    fake_hub(monkeypatch, tmp_path, {
        "config.json": json.dumps(config),
        "model.safetensors.index.json": json.dumps({"metadata": {"total_size": total}})})
    spec = load_model("someone/DeepSeek-V3-copy")
    p = spec.params
    assert p.mtp > 0
    with_draft = kvcore.weights_for(spec, mtp=True)
    without = kvcore.weights_for(spec)
    assert with_draft.bytes == total
    assert without.bytes == total - int(p.mtp * total / (p.total + p.mtp))
    assert 0.01 < 1 - without.bytes / total < 0.03


def _big_config():
    """A Nemotron-3 Nano config carrying a 4.5 MB quantization_config (one entry per tensor,
    as nvidia/MiniMax-M3-NVFP4's 3.1 MB config.json has)."""
    config = next(e for e in model_catalog() if e.id == "nemotron-3-nano-30b-a3b").config()
    config["quantization_config"] = {"quant_method": "modelopt", "quantized_layers": {
        f"model.layers.{i}.mlp.experts.{j}.{proj}": {"quant_algo": "NVFP4", "group_size": 16}
        for i in range(52) for j in range(512) for proj in ("up_proj", "down_proj")}}
    return config


def test_real_size_configs_load_on_every_path(monkeypatch, tmp_path):
    config = _big_config()
    text = json.dumps(config)
    assert 3_000_000 < len(text) < MAX_CONFIG_BYTES
    want = load_model("nemotron-3-nano-30b-a3b").groups
    assert load_model(text).groups == want
    (tmp_path / "local").mkdir()
    (tmp_path / "local" / "config.json").write_text(text)
    assert load_model(str(tmp_path / "local")).groups == want
    fake_hub(monkeypatch, tmp_path, {"config.json": text})
    assert load_model("someone/big-quantized-config").groups == want


# Nemotron-H configs write time_step_limit [0.0, Infinity]; Python's json module, and so
# Hugging Face, reads Infinity, -Infinity and NaN as floats
NON_FINITE = ('{"model_type": "nemotron_h", "time_step_limit": [0.0, Infinity], '
              '"time_step_floor": -Infinity, "x_nan": NaN, ')


def _nonfinite_text(entry_id="nemotron-h-56b-base-8k"):
    config = next(e for e in model_catalog() if e.id == entry_id).config()
    body = json.dumps({k: v for k, v in config.items()
                       if k not in ("model_type", "time_step_limit", "time_step_floor")})
    return NON_FINITE + body[1:]


def test_infinity_and_nan_are_read_on_every_path(monkeypatch, tmp_path):
    text = _nonfinite_text()
    parsed = parse_config_text(text)
    assert parsed["time_step_limit"][1] == float("inf") and parsed["x_nan"] != parsed["x_nan"]
    want = load_model("nemotron-h-56b-base-8k").groups
    # pasted text
    assert load_model(text).groups == want
    # a local file (the bundled copy is the Hub's file byte for byte, Infinity included)
    bundled = kvcore.catalog.resources.files("kvcore").joinpath(
        "data/models/nemotron-h-56b-base-8k.json").read_text("utf-8")
    assert '"time_step_limit": [\n        0.0,\n        Infinity\n    ]' in bundled
    path = tmp_path / "config.json"
    path.write_text(bundled)
    assert load_model(str(path)).groups == want
    # the Hub
    (tmp_path / "hub").mkdir()
    fake_hub(monkeypatch, tmp_path / "hub", {"config.json": text})
    assert load_model("someone/nemotron-h-copy").groups == want


@pytest.mark.parametrize(("field", "constant", "shown"), [
    ("num_attention_heads", "Infinity", "Infinity"), ("hidden_size", "-Infinity", "-Infinity"),
    ("vocab_size", "NaN", "NaN")])
def test_a_non_finite_sizing_field_is_named(monkeypatch, tmp_path, field, constant, shown):
    config = next(e for e in model_catalog() if e.id == "nemotron-h-56b-base-8k").config()
    config[field] = 0
    text = json.dumps(config).replace(f'"{field}": 0', f'"{field}": {constant}')
    message = f"config.json field '{field}' must be a finite integer, got {shown}"
    with pytest.raises(ConfigError, match=message):
        load_model(text)
    fake_hub(monkeypatch, tmp_path, {"config.json": text})
    with pytest.raises(ConfigError, match=message):
        load_model(f"someone/broken-{field}")
