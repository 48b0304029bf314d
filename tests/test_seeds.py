"""The seed figures of DOMAIN.md §3, to the byte, from the real Qwen3.5-27B config.json."""

import pytest

from kvcore import CacheOptions, bytes_per_token, cache_size, load_model

KiB, MiB, GiB = 1024, 1024**2, 1024**3


@pytest.fixture(scope="module")
def qwen35():
    return load_model("Qwen/Qwen3.5-27B")


def test_qwen35_geometry(qwen35):
    # 64 layers, every 4th full attention: 16 attention layers, 4 KV heads, head_dim 256
    full = [g for g in qwen35.groups if g.kind == "full" and not g.mtp]
    linear = [g for g in qwen35.groups if g.kind == "linear"]
    assert sum(g.count for g in full) == 16
    assert sum(g.count for g in linear) == 48
    assert full[0].layers == tuple(range(3, 64, 4))
    assert (full[0].n_kv_heads, full[0].head_dim_k, full[0].head_dim_v) == (4, 256, 256)
    # 2 × 16 × 4 × 256 cached values per token
    assert sum(g.count * g.values_per_token for g in full) == 32_768


# (format, bytes/token, 8K, 32K, 128K, 262,144 tokens)
SEED_TABLE = [
    ("f16", 64 * KiB, 512 * MiB, 2 * GiB, 8 * GiB, 16 * GiB),
    ("q8_0", 34 * KiB, 272 * MiB, 1.0625 * GiB, 4.25 * GiB, 8.5 * GiB),
    ("q4_0", 18 * KiB, 144 * MiB, 576 * MiB, 2.25 * GiB, 4.5 * GiB),
    ("tbq4", 16.5 * KiB, 132 * MiB, 528 * MiB, 2.0625 * GiB, 4.125 * GiB),
    ("tbq3", 12.5 * KiB, 100 * MiB, 400 * MiB, 1.5625 * GiB, 3.125 * GiB),
]


@pytest.mark.parametrize(("fmt", "per_token", "k8", "k32", "k128", "k262"), SEED_TABLE)
def test_seed_table(qwen35, fmt, per_token, k8, k32, k128, k262):
    opts = CacheOptions(kv_k=fmt, kv_v=fmt)
    assert bytes_per_token(qwen35, opts) == per_token
    for tokens, expected in ((8192, k8), (32768, k32), (131072, k128), (262144, k262)):
        size = cache_size(qwen35, tokens, 1, opts)
        assert size.kv_bytes == int(expected), (fmt, tokens)
        # K and V are equal halves for this model
        assert size.k_bytes == size.v_bytes == int(expected) // 2


def test_tbq4_headline(qwen35):
    # 4,224 MiB at 262,144 tokens = 16,896 bytes/token, exactly
    size = cache_size(qwen35, 262_144, 1, CacheOptions(kv_k="tbq4", kv_v="tbq4"))
    assert size.kv_bytes == 4224 * MiB
    assert size.kv_bytes // 262_144 == 16_896


def test_four_agents_at_64k_equal_one_at_256k(qwen35):
    opts = CacheOptions(kv_k="q8_0", kv_v="q8_0")
    assert cache_size(qwen35, 65_536, 4, opts).kv_bytes == cache_size(qwen35, 262_144, 1, opts).kv_bytes


def test_recurrent_state_is_separate_and_constant(qwen35):
    # Gated DeltaNet: 48 × 128 × 128 delta matrix + 3 × (2·16·128 + 48·128) conv values, f32
    per_layer = 48 * 128 * 128 + 3 * (2 * 16 * 128 + 48 * 128)
    short = cache_size(qwen35, 1, 1)
    long = cache_size(qwen35, 262_144, 1)
    assert short.state_bytes == long.state_bytes == 48 * per_layer * 4
    assert cache_size(qwen35, 8192, 3).state_bytes == 3 * 48 * per_layer * 4


def test_mtp_layer_only_when_asked(qwen35):
    plain = cache_size(qwen35, 8192, 1)
    with_mtp = cache_size(qwen35, 8192, 1, CacheOptions(mtp=True))
    # one more full-attention layer: 4 heads × 512 values × 2 bytes × 8192 tokens
    assert with_mtp.kv_bytes - plain.kv_bytes == 4 * 512 * 2 * 8192


def test_llama2_7b_seed():
    # seed 000: Llama-2-7B in fp16 is 512 KiB per token (32 layers × 32 heads × 128 × 2 × 2 B)
    spec = load_model("meta-llama/Llama-2-7b-hf")
    assert bytes_per_token(spec) == 512 * KiB
    assert cache_size(spec, 10_000, 1).kv_bytes == 10_000 * 512 * KiB  # ≈ 5 GB
    assert 5.0e9 < cache_size(spec, 10_000, 1).kv_bytes < 5.5e9
    assert cache_size(spec, 100_000, 1).kv_bytes > 50e9
    assert cache_size(spec, 1_000_000, 1).kv_bytes > 500e9


def test_70b_gqa_seed():
    # seed 000: a 70B model with GQA (8 KV heads, 80 layers) needs > 200 GB of cache at 1M tokens
    spec = load_model("llama-3.1-70b")
    kv = cache_size(spec, 1_000_000, 1).kv_bytes
    assert kv == 1_000_000 * 80 * 8 * 256 * 2
    assert kv > 200e9
