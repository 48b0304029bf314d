import re
import tomllib
from importlib import resources

import pytest

from kvcore import InputError, UnknownNameError, counted_gpu, find_gpu, gpu_catalog


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
    # a Ti or SUPER is its own card, not its base model's: the 3080 Ti's 384-bit bus, the 4070
    # SUPER's 56 SMs against the 4070's 46 at the same memory
    assert find_gpu("3080 ti").memory_bytes == 12 * 2**30
    assert find_gpu("3080 ti").bandwidth_bytes_per_s == 912 * 10**9
    assert find_gpu("3080").bandwidth_bytes_per_s == 760 * 10**9
    assert find_gpu("4070 super").bandwidth_bytes_per_s == find_gpu("4070").bandwidth_bytes_per_s
    assert find_gpu("4070 super").matmul_flops_per_s > find_gpu("4070").matmul_flops_per_s
    # the 9060 XT's two memory sizes share one chip and one bus
    small, large = find_gpu("9060 xt"), find_gpu("9060 xt 16gb")
    assert (small.memory_bytes, large.memory_bytes) == (8 * 2**30, 16 * 2**30)
    assert small.bandwidth_bytes_per_s == large.bandwidth_bytes_per_s == 320 * 10**9
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


def _raw_entries():
    return tomllib.loads(resources.files("kvcore").joinpath("data/gpus.toml").read_text())["gpu"]


#: peak bandwidth a card of each memory type can plausibly have, in GB/s (the whole span
#: of parts shipped with it, from the narrowest bus to the widest)
BANDWIDTH_GBS = {"GDDR5": (80, 520), "GDDR5X": (250, 550), "GDDR6": (150, 1000),
                 "GDDR6X": (400, 1100), "GDDR7": (300, 1900), "HBM2": (700, 1600), "HBM2e": (1200, 4000), "HBM3": (2000, 5500),
                 "HBM3e": (4000, 8500), "LPDDR5": (100, 850), "LPDDR5X": (100, 900)}


@pytest.mark.parametrize("entry", _raw_entries(), ids=lambda e: e["id"])
def test_entry_has_source_units_and_plausible_bandwidth(entry):
    assert entry["source"].strip(), "every figure needs a source"
    assert entry["memory_bytes"] % 2**30 == 0, "memory_bytes is a whole number of GiB"
    assert entry["memory_type"] in BANDWIDTH_GBS
    low, high = BANDWIDTH_GBS[entry["memory_type"]]
    assert low * 10**9 <= entry["bandwidth_bytes_per_s"] <= high * 10**9
    assert entry["architecture"]
    if "driver_total_bytes" in entry:
        total = entry["driver_total_bytes"]
        assert entry["driver_total_source"].strip()
        assert total % 2**20 == 0, "a driver total is a whole number of MiB"
        # a little under the card's memory: reserved firmware pages, or 1/16 for ECC on GDDR
        assert 0.9 * entry["memory_bytes"] <= total <= entry["memory_bytes"]
    else:
        assert "driver_total_source" not in entry
    # a default share of the memory is a unified-memory device's (macOS's wired limit; the
    # Linux kernel's GTT limit on Strix Halo), with a note where it is not Apple's
    unified = entry["vendor"] == "apple" or entry.get("unified_memory", False)
    if "gpu_usable_fraction" in entry:
        assert unified and 0 < entry["gpu_usable_fraction"] < 1
        assert ("gpu_usable_note" in entry) == (entry["vendor"] != "apple")
        # the setting a plan past the share names: Apple's is macOS's, the others' given
        assert ("gpu_limit_setting" in entry) == (entry["vendor"] != "apple")
        assert entry.get("gpu_limit_setting", "ttm.pages_limit") in ("ttm.pages_limit",)
    else:
        assert entry["vendor"] != "apple" and "gpu_usable_note" not in entry
        assert "gpu_limit_setting" not in entry
    assert "unified_memory" not in entry or entry["vendor"] != "apple"
    if entry["vendor"] == "apple" or entry["id"].startswith("jetson"):
        assert entry["max_cards"] == 1
    # the matrix peak: a basis for every figure, and a plausible ratio to the bandwidth (FLOPs a
    # byte: about 26 for the M1 Max, 295 for the H100 SXM, 948 for Jetson Thor's LPDDR5X)
    assert entry["matmul_flops_source"].strip(), "every figure needs a source"
    ratio = entry["matmul_flops_per_s"] / entry["bandwidth_bytes_per_s"]
    assert 10 <= ratio <= 1000, (entry["id"], ratio)
    assert ("gpu_cores" in entry) == (entry["vendor"] == "apple")


def _comment_figures():
    """Each byte field with the figure its comment gives: (id, field, value, comment)."""
    entry_id = ""
    for line in resources.files("kvcore").joinpath("data/gpus.toml").read_text().splitlines():
        if line.startswith("id = "):
            entry_id = line.split('"')[1]
        for field in ("memory_bytes", "driver_total_bytes", "bandwidth_bytes_per_s",
                      "matmul_flops_per_s"):
            if line.startswith(f"{field} = ") and "#" in line:
                value, comment = line.split("=", 1)[1].split("#", 1)
                yield entry_id, field, int(value), comment.strip()


UNITS = {"GiB": 2**30, "MiB": 2**20, "GB/s": 10**9, "TB/s": 10**12, "TFLOPS,": 10**12}


@pytest.mark.parametrize(("entry_id", "field", "value", "comment"), list(_comment_figures()),
                         ids=lambda v: v if isinstance(v, str) and "#" not in v else "")
def test_comment_states_the_same_figure(entry_id, field, value, comment):
    number, unit = comment.split()[:2]
    assert unit in UNITS, comment
    assert value == round(float(number) * UNITS[unit]), (entry_id, field, comment)


def test_nvidia_entries_give_the_compute_capability():
    for g in gpu_catalog():
        if g.vendor == "nvidia":
            major, minor = g.compute_capability.split(".")
            assert major.isdigit() and minor.isdigit(), g.id
            assert g.cuda_family == int(major)
        else:
            assert g.compute_capability == "" and g.cuda_family is None, g.id


def test_amd_entries_give_their_llvm_target():
    # the chips engines' ROCm builds list: gfx9 (Instinct) or gfx10-12 (Radeon, Strix Halo)
    for g in gpu_catalog():
        if g.vendor == "amd":
            assert re.fullmatch(r"gfx(9[0-9a-f]{2}|1[0-2][0-9a-f]{2})", g.llvm_target), g.id
        else:
            assert g.llvm_target == "", g.id
    assert find_gpu("mi300x").llvm_target == "gfx942"
    assert find_gpu("7900 xtx").llvm_target == "gfx1100"
    assert find_gpu("9070 xt").llvm_target == "gfx1201"


@pytest.mark.parametrize(("name", "family"), [
    ("h100", 9), ("h200", 9), ("h20", 9), ("gh200", 9), ("h800", 9),
    ("b200", 10), ("b300", 10), ("gb200", 10), ("gb300", 10), ("rtx pro 5000", 12),
    ("2080 ti", 7),
    ("jetson thor", 11),
    ("5090", 12), ("rtx pro 6000", 12), ("rtx pro 6000 server", 12), ("dgx spark", 12),
    ("a100", 8), ("4090", 8), ("l40s", 8), ("t4", 7), ("v100", 7), ("mi300x", None),
])
def test_cuda_family_per_card(name, family):
    # vLLM's MLA backend follows it: FlashMLA on 9, FlashInfer MLA on 10, Triton elsewhere
    assert find_gpu(name).cuda_family == family


@pytest.mark.parametrize(("name", "gpu_id"), [
    ("4090", "rtx-4090"), ("rtx 5090", "rtx-5090"), ("h100", "h100-sxm"),
    ("a100-40gb", "a100-40gb"), ("a100-40gb-pcie", "a100-40gb"), ("mi300x", "mi300x"),
    ("m3 max", "m3-max"), ("m4 max", "m4-max"), ("5060 ti 16gb", "rtx-5060-ti-16gb"),
    ("rtx 5070", "rtx-5070"), ("5080", "rtx-5080"), ("rtx pro 6000", "rtx-pro-6000"),
    ("h20", "h20"), ("l20", "l20"), ("jetson thor", "jetson-agx-thor"), ("a770", "arc-a770-16gb"),
    ("arc pro b60", "arc-pro-b60"), ("7900 xtx", "rx-7900-xtx"), ("dgx spark", "dgx-spark"),
    # names as nvidia-smi / torch print them
    ("NVIDIA H100 80GB HBM3", "h100-sxm"), ("NVIDIA H100 NVL", "h100-nvl"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb"), ("NVIDIA A100-SXM4-80GB", "a100-80gb-sxm"),
    ("Tesla V100-SXM2-16GB", "v100-16gb"), ("NVIDIA B300 SXM6 AC", "b300"),
    ("NVIDIA GH200 480GB", "gh200-96gb"), ("NVIDIA GH200 144G HBM3e", "gh200-144gb"),
    # the cards a 24 GB question is most often asked about besides the 3090 and 4090
    ("3080 ti", "rtx-3080-ti"), ("NVIDIA GeForce RTX 3070 Ti", "rtx-3070-ti"),
    ("4070 super", "rtx-4070-super"), ("rtx 4070 ti", "rtx-4070-ti"),
    ("4070 ti super", "rtx-4070-ti-super"), ("5060", "rtx-5060"), ("7800 xt", "rx-7800-xt"),
    ("9070", "rx-9070"), ("9070 xt", "rx-9070-xt"), ("9060 xt", "rx-9060-xt-8gb"),
    ("rx 9060 xt 16gb", "rx-9060-xt-16gb"), ("arc pro b50", "arc-pro-b50"), ("b50", "arc-pro-b50"),
    # laptop GPUs, as people and nvidia-smi name them
    ("4090 laptop", "rtx-4090-laptop"), ("rtx 4060 mobile", "rtx-4060-laptop"),
    ("NVIDIA GeForce RTX 4090 Laptop GPU", "rtx-4090-laptop"), ("5090m", "rtx-5090-laptop"),
    ("3060 laptop", "rtx-3060-laptop"), ("rtx 3080 ti laptop", "rtx-3080-ti-laptop"),
    # older and budget desktop cards
    ("rtx 3050", "rtx-3050-8gb"), ("2060", "rtx-2060"), ("rtx 2060 12gb", "rtx-2060-12gb"),
    ("2070 super", "rtx-2070-super"), ("rtx 2080 super", "rtx-2080-super"),
    ("gtx 1080 ti", "gtx-1080-ti"), ("1080", "gtx-1080"), ("GeForce GTX 1070", "gtx-1070"),
    ("7900 gre", "rx-7900-gre"), ("rx 7600", "rx-7600"), ("AMD Radeon RX 6600 XT", "rx-6600-xt"),
    ("rx 6800", "rx-6800"), ("6800 xt", "rx-6800-xt"), ("arc a750", "arc-a750"),
    ("b570", "arc-b570"),
])
def test_names_as_users_type_them(name, gpu_id):
    assert find_gpu(name).id == gpu_id


def test_a_laptop_gpu_is_one_card_with_less_than_its_desktop_namesake():
    laptops = [g for g in gpu_catalog() if g.segment == "laptop"]
    assert len(laptops) >= 10 and all(g.max_cards == 1 for g in laptops)
    # the 4090 Laptop GPU is an AD103 with 16 GB, not the desktop AD102 with 24
    laptop, desktop = find_gpu("4090 laptop"), find_gpu("4090")
    assert laptop.memory_bytes == 16 << 30 < desktop.memory_bytes
    assert laptop.bandwidth_bytes_per_s < desktop.bandwidth_bytes_per_s
    assert laptop.matmul_flops_per_s < desktop.matmul_flops_per_s
    assert laptop.compute_capability == desktop.compute_capability == "8.9"


@pytest.mark.parametrize(("name", "gpu_id"), [
    # a card with the memory it was sold with is that card
    ("rtx 4090 24gb", "rtx-4090"), ("4090 24GB", "rtx-4090"), ("RTX 5090 (32 GB)", "rtx-5090"),
    ("rx 7900 xtx 24gb", "rx-7900-xtx"), ("h200 141gb", "h200"),
    # else the one card of that name sold with it: another size or form, not another model
    ("h100 94gb", "h100-nvl"), ("4060 ti 16gb", "rtx-4060-ti-16gb"), ("v100 32gb", "v100-32gb"),
])
def test_a_card_named_with_its_memory_is_that_card(name, gpu_id):
    assert find_gpu(name).id == gpu_id


@pytest.mark.parametrize(("name", "message"), [
    ("rtx 4090 48gb", "NVIDIA GeForce RTX 4090 has 24 GB of memory, not 48 GB: give the name "
     "alone, or the memory (48GiB) for a card the catalog does not list"),
    # the RTX 3060 Ti's 8 GB is another model's, not the 3060's
    ("rtx 3060 8gb", "NVIDIA GeForce RTX 3060 12GB has 12 GB of memory, not 8 GB"),
    ("4060 ti 12gb", "the catalog's '4060 ti' cards have 8 GB or 16 GB of memory, not 12 GB"),
    # a longer model number is another card: the A10 is not an A100
    ("a10 80gb", "NVIDIA A10 has 24 GB of memory, not 80 GB"),
])
def test_a_card_named_with_memory_it_was_not_sold_with_is_refused(name, message):
    with pytest.raises(InputError) as info:
        find_gpu(name)
    assert str(info.value).startswith(message) and info.value.field == "gpu"


def test_driver_totals_of_the_variants():
    # H100 NVL and H20 readings from public nvidia-smi output; MI300X bare metal (SPX)
    assert find_gpu("h100 nvl").driver_total_bytes == 95830 * 2**20
    assert find_gpu("h20").driver_total_bytes == 97871 * 2**20
    assert find_gpu("mi300x").driver_total_bytes == 206141652992


@pytest.mark.parametrize(("text", "count", "gpu_id"), [
    ("2x4090", 2, "rtx-4090"), ("4×H100", 4, "h100-sxm"), ("8 x h100-sxm", 8, "h100-sxm"),
    ("2*3090", 2, "rtx-3090"), ("2X RTX 4090", 2, "rtx-4090"), ("3x24GiB", 3, None),
    ("1x4090", 1, "rtx-4090"),
])
def test_a_rig_is_a_count_and_a_card(text, count, gpu_id):
    n, card = counted_gpu(text)
    assert n == count
    assert card.id == gpu_id if gpu_id else card.memory_bytes == 24 * 2**30


def test_every_catalog_name_is_one_card_not_a_rig():
    # 7900xtx is a card, not 7900 of some 'tx'
    raw = tomllib.loads(resources.files("kvcore").joinpath("data/gpus.toml").read_text())
    names = [n for g in raw["gpu"] for n in (g["id"], g["name"], *g.get("aliases", []))]
    for name in [*names, "7900xtx", "7900 xtx", "rx7900xt"]:
        assert counted_gpu(name) is None, name


@pytest.mark.parametrize(("text", "words"), [
    ("0x4090", "card count in '0x4090' must be between 1 and 1,024"),
    ("2000x4090", "between 1 and 1,024"),
])
def test_a_rig_count_out_of_range_is_refused(text, words):
    with pytest.raises(InputError, match=words):
        counted_gpu(text)


def test_a_count_before_no_card_is_no_rig():
    # the caller's error for the whole name stands ('2xfoo' is not a known GPU)
    assert counted_gpu("2xfoo") is None
    with pytest.raises(UnknownNameError):
        find_gpu("2xfoo")


@pytest.mark.parametrize(("text", "gpu_id", "gib", "gbps", "cores"), [
    ("m3 max 36gb", "m3-max-36gb", 36, 300, 30), ("M3-Max-96GB", "m3-max-96gb", 96, 300, 30),
    ("m3max64gb", "m3-max-64gb", 64, 400, 40), ("apple m4 max 36 GB", "m4-max-36gb", 36, 410, 32),
    ("m4 max 48gb", "m4-max-48gb", 48, 546, 40), ("m4 pro 24gb", "m4-pro-24gb", 24, 273, None),
    ("m2 ultra (64 GB)", "m2-ultra-64gb", 64, 800, None), ("m1 max 32gb", "m1-max-32gb", 32, 400, None),
])
def test_an_apple_chip_in_one_of_its_memory_sizes(text, gpu_id, gib, gbps, cores):
    # the size sold only with the cut-down chip takes its bandwidth (M3 Max 14/30: 300 GB/s)
    gpu = find_gpu(text)
    assert (gpu.id, gpu.memory_bytes, gpu.bandwidth_bytes_per_s) == (gpu_id, gib << 30, gbps * 10**9)
    assert gpu.usable_bytes == int((gib << 30) * 0.75) and gpu.vendor == "apple"
    assert (f"{cores}-core GPU" in gpu.name) if cores else "core" not in gpu.name
    assert find_gpu(gpu.id) == gpu  # the id it prints plans it again


def test_a_cut_down_bin_computes_with_its_cores():
    # M3 Max 36 GB is the 30-core bin of the 40-core chip: three quarters of its FP16 peak;
    # the sizes of the full chip keep the entry's figure
    full = find_gpu("m3 max")
    assert full.gpu_cores == 40
    assert find_gpu("m3 max 36gb").matmul_flops_per_s == full.matmul_flops_per_s * 30 // 40
    assert find_gpu("m3 max 48gb").matmul_flops_per_s == full.matmul_flops_per_s
    assert find_gpu("m3 max 36gb").gpu_cores == 30
    assert find_gpu("h100").matmul_flops_per_s == 989_500 * 10**9


def test_an_apple_chip_in_a_size_it_was_not_sold_with_is_refused():
    with pytest.raises(InputError, match="Apple M3 Max was sold with 36, 48, 64, 96 or 128 GB of "
                                         "memory, not 40 GB"):
        find_gpu("m3 max 40gb")
    # the top size is the catalog entry itself
    assert find_gpu("m3 max 128gb").id == "m3-max"


def test_every_memory_option_of_every_chip_resolves():
    for chip in gpu_catalog():
        for gb in chip.memory_options_gb:
            gpu = find_gpu(f"{chip.id} {gb}gb")
            assert gpu.memory_bytes == gb << 30 and gpu.max_cards == chip.max_cards
        if chip.memory_options_gb:
            # the catalog entry is the chip's largest configuration
            assert chip.memory_bytes == max(chip.memory_options_gb) << 30, chip.id


#: one-direction lane rate of each PCIe generation, after 128b/130b line coding (bytes/s)
PCIE_LANE = {3: 8e9 * 128 / 130 / 8, 4: 16e9 * 128 / 130 / 8, 5: 32e9 * 128 / 130 / 8}


@pytest.mark.parametrize("entry", _raw_entries(), ids=lambda e: e["id"])
def test_a_host_link_is_its_generation_times_its_lanes(entry):
    unified = entry["vendor"] == "apple" or entry.get("unified_memory", False)
    if "host_link" not in entry:
        # unified memory has no link to cross; a card without a cited interface is assumed
        # PCIe 4.0 x16 where it is used, and says so
        assert "host_link_bytes_per_s" not in entry and "host_link_source" not in entry
        return
    assert not unified, "a unified-memory device has no host link"
    assert entry["host_link_source"].strip(), "every figure needs a source"
    link, rate = entry["host_link"], entry["host_link_bytes_per_s"]
    m = re.fullmatch(r"PCIe ([345])\.0 x(8|16)", link)
    if m:
        assert rate == int(PCIE_LANE[int(m.group(1))] * int(m.group(2)))
    else:
        # Grace superchips: NVLink-C2C, 900 GB/s both ways
        assert link == "NVLink-C2C" and rate == 450 * 10**9
        assert entry["id"].startswith(("gh200", "gb200", "gb300"))


def test_the_cards_people_offload_on_have_their_links():
    assert find_gpu("4090").host_link == "PCIe 4.0 x16"
    assert find_gpu("rtx 4060").host_link == "PCIe 4.0 x8"
    assert find_gpu("5090").host_link_bytes_per_s - 2 * find_gpu("4090").host_link_bytes_per_s <= 1
    assert find_gpu("m3 max 36gb").host_link_bytes_per_s is None


def test_the_unified_memory_devices_are_the_ones_that_share_it():
    shared = {g.id for g in gpu_catalog() if g.unified}
    assert {"dgx-spark", "jetson-agx-orin-64gb", "jetson-agx-thor", "ryzen-ai-max-395",
            "m4-max", "m5-max"} <= shared
    assert not shared & {"4090", "rtx-4090", "h100-sxm", "mi300x", "rtx-pro-6000"}
    assert all(g.vendor == "apple" or g.host_link == "" for g in gpu_catalog() if g.unified)


@pytest.mark.parametrize("text", ["strix halo", "Ryzen AI Max+ 395", "radeon 8060s", "gfx1151"])
def test_strix_halo_by_its_names(text):
    g = find_gpu(text)
    assert g.id == "ryzen-ai-max-395" and g.memory_bytes == 128 * 2**30
    # the Linux kernel lets the GPU map half of the memory by default
    assert g.usable_bytes == 64 * 2**30 and g.bandwidth_bytes_per_s == 256 * 10**9
    assert g.unified and "pages_limit" in g.usable_note


@pytest.mark.parametrize(("text", "gbps", "cores", "tflops"), [
    ("m5", 153, 10, 16.16), ("m5 pro", 307, 20, 32.32), ("apple m5 max", 614, 40, 64.63)])
def test_the_m5_family(text, gbps, cores, tflops):
    g = find_gpu(text)
    assert g.bandwidth_bytes_per_s == gbps * 10**9 and g.gpu_cores == cores
    # 1,024 FP16 matrix FLOPs a core a clock at 1.578 GHz
    assert g.matmul_flops_per_s == round(cores * 1024 * 1.578e9, -10) == round(tflops * 1e12)
    assert g.usable_bytes == int(g.memory_bytes * 0.75)


def test_dgx_spark_is_planned_on_what_cuda_reports():
    # 124,610 MiB (vLLM's 121.69 GiB), not the 128 GiB sold: firmware and the kernel keep the rest
    g = find_gpu("dgx spark")
    assert g.total_bytes == g.usable_bytes == 124610 << 20 and g.memory_bytes == 128 << 30
    # and Jetson AGX Orin 64GB on the 62,827 MiB llama.cpp prints for it
    assert find_gpu("jetson orin").total_bytes == 62827 << 20


def test_the_lists_give_what_a_plan_fills(capsys):
    import json

    from fastapi.testclient import TestClient

    from app.cli import main
    from app.web import create_app

    assert main(["gpus", "--json"]) == 0
    listed = {g["id"]: g for g in json.loads(capsys.readouterr().out)}
    assert listed["ryzen-ai-max-395"]["usable_bytes"] == 64 << 30
    assert listed["m4-max"]["usable_bytes"] == 96 << 30 and listed["m4-max"]["unified_memory"]
    assert listed["rtx-4090"]["usable_bytes"] == find_gpu("4090").total_bytes
    assert not listed["rtx-4090"]["unified_memory"]
    assert main(["gpus"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("ryzen-ai-max-395 "))
    assert "128 GiB     64 GiB (shared)" in row
    c = TestClient(create_app())
    api = {g["id"]: g for g in c.get("/api/v1/gpus").json()}
    assert api["dgx-spark"]["usable_bytes"] == 124610 << 20 and api["dgx-spark"]["unified_memory"]
    page = c.get("/gpus").text
    assert "plans with 64 GiB, shared with the CPU" in page


def test_the_setting_that_raises_a_unified_share_is_the_systems():
    # a plan past the default share names the setting (query's raised share: its "how")
    from kvcore.gpus import find_gpu

    assert find_gpu("m4 max").limit_setting == "iogpu.wired_limit_mb"
    assert find_gpu("strix halo").limit_setting == "ttm.pages_limit"
    assert find_gpu("dgx spark").limit_setting == find_gpu("h100").limit_setting == ""
