import math

import pytest

from kvcore import FORMATS, CacheOptions, InputError, UnknownNameError, format_names, get_format

# name: (values per block, bytes per block) from DOMAIN.md §2
BLOCKS = {
    "f32": (1, 4), "f16": (1, 2), "bf16": (1, 2), "fp8_e4m3": (1, 1), "fp8_e5m2": (1, 1),
    "q8_0": (32, 34), "q4_0": (32, 18), "q4_1": (32, 20), "q5_0": (32, 22), "q5_1": (32, 24),
    "iq4_nl": (32, 18), "tbq4": (128, 66), "tbq3": (128, 50), "nvfp4": (16, 9),
    "mxfp4": (32, 17), "kivi2": (32, 12), "kivi4": (32, 20), "fp4_mx16": (16, 9),
    "mxfp8": (32, 33), "int8_pth": (1, 1), "int4_pth": (2, 1), "tq_4bit": (2, 1),
    "tq_3bit": (8, 3), "nvfp4_4over6": (16, 9), "uq_4bit": (32, 17),
}


def test_every_named_format_exists():
    assert set(BLOCKS) <= set(format_names())


@pytest.mark.parametrize(("name", "block"), BLOCKS.items())
def test_block_arithmetic(name, block):
    fmt = get_format(name)
    assert (fmt.block_values, fmt.block_bytes) == block


@pytest.mark.parametrize(("name", "bits"), [("q8_0", 8.5), ("q4_0", 4.5), ("tbq4", 4.125),
                                            ("tbq3", 3.125), ("nvfp4", 4.5), ("mxfp4", 4.25),
                                            ("fp4_mx16", 4.5), ("mxfp8", 8.25),
                                            ("kivi2", 3.0), ("kivi4", 5.0)])
def test_bits_per_value(name, bits):
    assert get_format(name).bits_per_value == bits


def test_rows_pad_to_whole_blocks():
    # head_dim 80 (Phi-2 style): q8_0 needs 3 blocks, tbq4 one 128-value block
    assert get_format("q8_0").row_bytes(80) == 3 * 34
    assert get_format("tbq4").row_bytes(80) == 66
    assert get_format("tbq4").row_bytes(192) == 2 * 66
    assert get_format("nvfp4").row_bytes(72) == 5 * 9
    # MLA latent of 576 values
    assert get_format("q4_0").row_bytes(576) == 18 * 18


def test_aliases_and_case():
    assert get_format("fp8") is get_format("FP8_E4M3")
    assert get_format("float16").name == "f16"
    assert get_format("Q8_0").name == "q8_0"


def test_unknown_format_suggests():
    with pytest.raises(UnknownNameError) as err:
        get_format("q8")
    assert "did you mean" in str(err.value)
    assert "q8_0" in err.value.suggestions


def test_fp8_tensor_scales_are_per_layer_not_per_token():
    fmt = get_format("fp8")
    assert fmt.tensor_scale_bytes == 4
    assert fmt.bytes_for(1000, 128, "k") == 1000 * 128


def test_per_token_head_scales():
    assert get_format("fp8_pth").row_bytes(128) == 128 + 4


def test_kivi_residual_and_groups():
    kivi = get_format("kivi2")
    # short contexts stay in the f16 residual window
    assert kivi.bytes_for(100, 128, "k") == 100 * 128 * 2
    # the residual holds 128 to 159 tokens; whole groups of 32 are flushed
    assert kivi.quantized_tokens(129) == 0
    assert kivi.quantized_tokens(159) == 0
    assert kivi.quantized_tokens(160) == 32
    assert kivi.quantized_tokens(191) == 32
    assert kivi.quantized_tokens(192) == 64
    # a cache of capacity L allocates the window's peak (R + G - 1 = 159 f16 slots) plus the
    # quantized groups
    assert kivi.residual_capacity(100) == 100 and kivi.residual_capacity(1000) == 159
    # keys: per channel over the 32-token group: 128 channels × (8 B of 2-bit + 4 B scale/min)
    assert kivi.bytes_for(160, 128, "k") == 128 * 12 + 159 * 128 * 2
    # values: per token over 32-channel groups: 32 tokens × 4 groups × 12 B
    assert kivi.bytes_for(160, 128, "v") == 32 * 4 * 12 + 159 * 128 * 2
    assert kivi.bytes_for(1000, 128, "k") == (864 // 32) * 128 * 12 + 159 * 128 * 2


def test_quantized_formats_are_not_larger_than_f16_from_head_dim_64():
    # per row; formats with an f16 residual window are covered by the property test
    f16 = get_format("f16")
    for fmt in FORMATS:
        if fmt.is_quantized:
            for d in (64, 80, 96, 112, 128, 192, 256, 576):
                assert fmt.row_bytes(d) <= f16.row_bytes(d), (fmt.name, d)


def test_hot_cold_mix():
    opts = CacheOptions(kv_k="q4_0", kv_v="q4_0", hot_format="f16", hot_tokens=1024)
    assert opts.row_bytes(1000, 128, "k") == 1000 * 256
    assert opts.row_bytes(5000, 128, "k") == 1024 * 256 + 3976 * 4 * 18


def test_eviction_keeps_first_and_recent():
    opts = CacheOptions(keep_fraction=0.25, keep_first=4, keep_recent=124)
    assert opts.kept_tokens(100) == 100
    assert opts.kept_tokens(128) == 128
    assert opts.kept_tokens(1128) == 128 + 250
    assert opts.kept_tokens(1129) == 128 + math.ceil(0.25 * 1001)


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.5, float("nan")])
def test_eviction_fraction_bounds(bad):
    with pytest.raises(InputError):
        CacheOptions(keep_fraction=bad)


def test_quality_notes_carry_the_measured_error():
    import json
    from importlib import resources

    from kvcore.formats import quality_note

    data = json.loads(resources.files("kvcore").joinpath("data/quality.json").read_text())
    for fmt in FORMATS:
        assert fmt.name in data["formats"], fmt.name
    q8 = data["formats"]["q8_0"]["out_rel_err"] * 100
    assert quality_note(get_format("q8_0")).startswith(f"{q8:.1f}% attention-output error")
    assert quality_note(get_format("f16")) == "baseline"
