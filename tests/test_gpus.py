import tomllib
from importlib import resources

import pytest

from kvcore import InputError, UnknownNameError, find_gpu, gpu_catalog


def test_catalog_size_and_fields():
    gpus = gpu_catalog()
    assert len(gpus) >= 40
    for g in gpus:
        assert g.memory_bytes > 2**30, g.id
        assert g.bandwidth_bytes_per_s and g.bandwidth_bytes_per_s > 50 * 10**9, g.id
        assert g.source, g.id


def test_ids_and_aliases_unique():
    raw = tomllib.loads(resources.files("kvcore").joinpath("data/gpus.toml").read_text())
    seen = set()
    for entry in raw["gpu"]:
        for key in (entry["id"], *entry.get("aliases", [])):
            assert key.lower() not in seen, key
            seen.add(key.lower())


REQUIRED = ["3060", "4090", "5090", "a6000", "rtx 6000 ada", "rtx pro 6000", "t4", "l4", "a10",
            "a100-40gb", "a100", "h100 pcie", "h100", "h100 nvl", "h200", "h20", "b200", "b300",
            "gb200", "mi250x", "mi300x", "mi325x", "mi355x", "7900 xtx", "m2 ultra", "m3 max",
            "m4 max"]


@pytest.mark.parametrize("name", REQUIRED)
def test_required_gpus_resolve(name):
    assert find_gpu(name).memory_bytes > 0


@pytest.mark.parametrize("name", ["4090", "rtx4090", "RTX 4090", "NVIDIA GeForce RTX 4090", "rtx-4090"])
def test_forgiving_names(name):
    assert find_gpu(name).id == find_gpu("4090").id


def test_known_figures():
    assert find_gpu("4090").memory_bytes == 24 * 2**30
    assert find_gpu("h200").bandwidth_bytes_per_s == 4_800 * 10**9
    assert find_gpu("h200").driver_total_bytes == 143771 * 2**20


def test_apple_usable_fraction():
    m = find_gpu("m2 ultra")
    assert m.usable_bytes < m.memory_bytes


def test_bare_size():
    g = find_gpu("24GiB")
    assert g.memory_bytes == 24 * 2**30 and g.bandwidth_bytes_per_s is None
    assert find_gpu("80GB").memory_bytes == 80 * 10**9


def test_unknown_gpu_did_you_mean():
    with pytest.raises(UnknownNameError) as err:
        find_gpu("4099")
    assert "did you mean" in str(err.value)


def test_empty_gpu():
    with pytest.raises(InputError):
        find_gpu("  ")


def test_budget_uses_driver_reported_total():
    h200 = find_gpu("h200")
    assert h200.usable_bytes == 143771 * 2**20 < h200.memory_bytes


@pytest.mark.parametrize("text", ["24", "80", "24.5", "141", "1,024"])
def test_bare_number_is_a_size_without_its_unit(text):
    with pytest.raises(InputError) as err:
        find_gpu(text)
    assert not isinstance(err.value, UnknownNameError)
    assert str(err.value) == (f"'{text}' has no unit; a memory size needs one, like {text}GiB "
                              f"or {text}GB (a catalog GPU is a name, like 4090 or h100)")
    assert err.value.field == "gpu"
    # the sizes it suggests are read as sizes
    assert find_gpu(f"{text}GiB").memory_bytes > 0 and find_gpu(f"{text}GB").memory_bytes > 0


@pytest.mark.parametrize("text", ["24XB", "12Q", "1.5kg", "80 gi"])
def test_a_number_with_an_unknown_unit_is_told_the_units(text):
    # not "did you mean 'l4'": the value was meant as a size and its unit is what is wrong
    with pytest.raises(InputError) as err:
        find_gpu(text)
    assert not isinstance(err.value, UnknownNameError)
    assert str(err.value).startswith(f"'{text}' is no memory size: its unit must be one of B, "
                                     "KB, MB, GB, TB, KiB, MiB, GiB or TiB")
    assert err.value.field == "gpu"


@pytest.mark.parametrize("text", ["4090x", "80 gigs"])
def test_a_model_number_or_a_word_after_a_number_is_a_name(text):
    with pytest.raises(UnknownNameError):
        find_gpu(text)


@pytest.mark.parametrize(("text", "first"), [("4091", "rtx-4090"), ("5000", "rtx-a5000")])
def test_number_like_a_model_number_keeps_did_you_mean(text, first):
    with pytest.raises(UnknownNameError) as err:
        find_gpu(text)
    assert err.value.suggestions[0] == first


def test_catalog_model_numbers_are_still_names():
    assert find_gpu("4090").id == "rtx-4090" and find_gpu("5090").id == "rtx-5090"


@pytest.mark.parametrize("text", ["-24GiB", "-24", "-0.5TB", "-80 GB"])
def test_negative_size_is_refused_as_a_size(text):
    with pytest.raises(InputError) as err:
        find_gpu(text)
    assert str(err.value) == f"a GPU's memory must be larger than zero, got '{text}'"
    assert not isinstance(err.value, UnknownNameError) and err.value.field == "gpu"
