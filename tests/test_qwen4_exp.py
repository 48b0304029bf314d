"""Qwen4-Exp (Qwen3.8-Flash-Next): Gated DeltaNet layers, attention layers under the QSA
indexer, hyper-connections and a per-layer n-gram embedding. The config (tests/data) holds the
text and vision geometry of Qwen/Qwen3.8-Flash-Next as public config parsers' fixtures copy
it."""

import json
from pathlib import Path

import pytest
from rawonly import ENGINES, refusal_and_raw, text_variant

from kvcore import CacheOptions, ConfigError, cache_size, get_format
from kvcore.hf import _is_prime, _ngram_rows, spec_from_config
from kvcore.model import LayerKind

CONFIG = json.loads((Path(__file__).parent / "data" / "qwen3.8-flash-next-config.json").read_text())
ATTENTION = tuple(range(3, 48, 4))


def spec(cfg=CONFIG):
    return spec_from_config(cfg, name="q", source="test")


def with_text(**over):
    return text_variant(CONFIG, **over)


def test_qsa_layers_keep_kv_pooled_index_keys_and_a_ring_and_the_ple_layer_a_conv_state():
    s = spec()
    by_kind = {g.kind: g for g in s.groups if not g.mtp}
    full = by_kind[LayerKind.FULL]
    assert full.layers == ATTENTION
    assert (full.n_kv_heads, full.head_dim_k, full.head_dim_v) == (2, 256, 256)
    # a decode step reads the 2,048 selected tokens and the incomplete block's 3
    assert full.read_limit == 2048 + 4 - 1
    index = by_kind[LayerKind.INDEX]
    assert (index.layers, index.n_kv_heads, index.head_dim_k, index.head_dim_v,
            index.ratio) == (ATTENTION, 1, 128, 0, 4)
    ring = by_kind[LayerKind.COMPRESSOR]
    assert ring.layers == ATTENTION and ring.state_values == 4 * 128
    gdn = by_kind[LayerKind.LINEAR]
    assert len(gdn.layers) == 36
    assert gdn.state_values == 48 * 128 * 128 + 3 * (2 * 16 * 128 + 48 * 128)
    ple = by_kind[LayerKind.CONV]
    # ple_layer_ids [2] counts from 1; kernel 4, dilation ngram_size 3, over 4 × 2560 streams
    assert ple.layers == (1,) and ple.state_values == 3 * 3 * 4 * 2560
    assert ple.replicated_conv_values == ple.state_values


def test_cache_bytes_per_token_and_sequence():
    s = spec()
    f16 = get_format("f16")
    opts = CacheOptions(kv_k=f16, kv_v=f16)
    one, two = cache_size(s, 32768, 1, opts), cache_size(s, 65536, 1, opts)
    # 12 layers × (K and V: 2 heads × 256 × 2 B, and a 128-wide index key every 4 tokens)
    assert two.kv_bytes - one.kv_bytes == 32768 * 12 * (2 * 2 * 256 * 2 + 128 * 2 // 4)
    # the recurrent state (here in f32): GDN, the rings and the PLE conv
    state = 4 * (36 * (48 * 128 * 128 + 3 * 10240) + 12 * 512 + 9 * 10240)
    assert one.state_bytes == state


def test_parameters_match_the_model_as_transformers_builds_it():
    p = spec().params
    # transformers 5.25's Qwen4ExpForConditionalGeneration on the meta device: n-gram table
    # 320,001,536 rows × 160; 176,943,899,520 parameters outside the vision tower (kvplan
    # counts the layer norms of a plain decoder where the model has hyper-connection norms:
    # 108,672 apart)
    assert p.per_layer_embedding == 320_001_536 * 160
    assert abs((p.total - p.encoder) - 176_943_899_520) <= 110_000
    # a token reads its n-gram rows only: the table is not read whole
    assert p.active < p.total - p.per_layer_embedding


def test_ngram_vocabularies_are_the_primes_after_the_base():
    sieve = [True] * 2000
    sieve[0] = sieve[1] = False
    for i in range(2, 2000):
        if sieve[i]:
            for j in range(i * i, 2000, i):
                sieve[j] = False
    assert [n for n in range(2000) if _is_prime(n)] == [n for n in range(2000) if sieve[n]]
    assert _is_prime(20_000_003) and not _is_prime(20_000_001)
    # primes above 9: 11, 13 | 17, 19 for the second layer's heads; padded to 8
    assert _ngram_rows(10, 0, 2, 8) == 24
    assert _ngram_rows(10, 2, 2, 8) == 40


def test_transformers_5_layer_names_read_the_same():
    resaved = with_text(layer_types=["indexed_attention" if t == "full_attention" else t
                                     for t in CONFIG["text_config"]["layer_types"]])
    a, b = spec(), spec(resaved)
    assert a.groups == b.groups and a.params == b.params


@pytest.mark.parametrize(("over", "field"), [
    ({"indexer_budget": 2050}, "indexer_budget"),
    ({"indexer_kv_heads": 2}, "indexer_kv_heads"),
    ({"ple_layer_ids": [49]}, "ple_layer_ids"),
    ({"ple_embed_dim": 2561}, "ple_embed_dim"),
])
def test_bad_qsa_fields_are_one_line_errors(over, field):
    with pytest.raises(ConfigError) as e:
        spec(with_text(**over))
    assert e.value.field == field and "\n" not in str(e.value)


@pytest.mark.parametrize("engine", ENGINES)
def test_engines_are_refused_until_their_qsa_pools_are_modelled(engine):
    error, raw = refusal_and_raw(spec(), engine, "h200")
    assert "Qwen4-Exp's QSA caches" in str(error) and error.field == "engine"
    assert "--engine raw" in str(error)
    # raw sizes it: its weights, the n-gram table in, are more than two H200s hold
    assert raw.weights_bytes > 2 * 141 * 10**9


def test_without_qsa_fields_the_attention_layers_are_plain():
    bare = with_text(**{f: None for f in ("indexer_n_heads", "indexer_kv_heads",
                                          "indexer_head_dim", "indexer_budget",
                                          "indexer_compress_ratio")})
    s, full = spec(bare), spec()
    assert {g.kind for g in s.groups} == {LayerKind.FULL, LayerKind.LINEAR, LayerKind.CONV}
    assert next(g for g in s.groups if g.kind is LayerKind.FULL).read_limit is None
    # the indexer's projection and norms, 12 layers
    assert full.params.total - s.params.total == 12 * (2560 * 5 * 128 + 2 * 128)
    with pytest.raises(ConfigError, match="indexer_budget"):
        spec(with_text(indexer_budget=None))
