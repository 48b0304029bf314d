"""kvplan measure on the CPU reference path: allocation exactness, the allocator model, the
store and the command."""

import json
import sqlite3

import pytest

torch = pytest.importorskip("torch")

from app.cli import main  # noqa: E402
from kvcore import KvplanError, load_model  # noqa: E402
from kvcore.measure import allocator_prediction, measure  # noqa: E402
from kvcore.store import find_measurement, list_measurements, save_measurement  # noqa: E402

MiB = 1 << 20


@pytest.mark.parametrize(("model", "fmt"), [
    ("qwen3-8b", "q8_0"),          # dense GQA
    ("llama-2-7b-hf", "f16"),      # MHA
    ("deepseek-v2-lite-chat", "q4_0"),  # MLA latent, no V
    ("gpt-oss-20b", "tbq4"),       # sliding window + full
    ("qwen3.5-27b", "fp8_pth"),    # hybrid: Gated DeltaNet state + full attention
    ("qwen3-8b", "kivi2"),         # residual window
    ("deepseek-v2-lite-chat", "kivi2"),  # KIVI on the MLA latent: keys only
    ("deepseek-v2-lite-chat", "tbq3"),   # rotated blocks of a 576-wide latent (640 padded)
    ("phi-3-mini-4k-instruct", "kivi4"),  # 96-wide heads
    ("gemma-3-1b-it", "nvfp4"),
])
def test_tensors_hold_exactly_the_prediction(model, fmt):
    m = measure(load_model(model), context=200, sequences=2, kv_k=fmt, device="cpu", steps=1,
                max_layers=6, progress=None)
    assert m.allocated_bytes == m.predicted_bytes
    assert m.decode["seconds_per_step"] > 0


def test_every_catalog_model_in_every_kernel_format_is_exact():
    # the first six layers of each catalog model (a hybrid's mix of kinds included) in each
    # format with a kernel: the tensors hold exactly kvcore's bytes and no format is refused;
    # MLA latents, 96-wide heads, K and V of different widths (MiMo-V2: 192/128) and recurrent
    # state all pass through here
    from kvcore.catalog import model_catalog
    from kvcore.kernels.cache import PAGED

    wrong = []
    for entry in model_catalog():
        spec = load_model(entry.id)
        for fmt in (*PAGED, "kivi2", "kivi4"):
            try:
                m = measure(spec, context=32, sequences=1, kv_k=fmt, device="cpu", steps=1,
                            max_layers=6, progress=None)
            except KvplanError as exc:
                wrong.append((entry.id, fmt, str(exc)))
                continue
            if m.allocated_bytes != m.predicted_bytes:
                wrong.append((entry.id, fmt, m.allocated_bytes, m.predicted_bytes))
    assert wrong == []


@pytest.mark.parametrize("fmt", ["q8_0", "tbq3", "kivi4"])
def test_k_and_v_of_different_widths_are_measured(fmt):
    # MiMo-V2-Flash: full (layer 0) and sliding (layer 1) layers of K 192 and V 128; V's
    # planes at V's width hold exactly kvcore's bytes
    spec = load_model("mimo-v2-flash")
    assert {(g.head_dim_k, g.head_dim_v) for g in spec.groups} == {(192, 128)}
    m = measure(spec, context=48, sequences=1, kv_k=fmt, device="cpu", steps=1, max_layers=2,
                progress=None)
    assert m.layers_measured == 2
    assert m.allocated_bytes == m.predicted_bytes
    assert m.decode["seconds_per_step"] > 0


def test_subset_scales_by_its_own_prediction():
    spec = load_model("qwen3-8b")
    part = measure(spec, context=64, kv_k="q8_0", device="cpu", steps=1, max_layers=3,
                   progress=None)
    assert part.layers_measured == 3 and part.layers_total == 36
    assert part.scale == pytest.approx(12.0)


def test_mixed_formats():
    m = measure(load_model("qwen3-8b"), context=100, kv_k="q8_0", kv_v="tbq3", device="cpu",
                steps=1, max_layers=2, progress=None)
    assert m.allocated_bytes == m.predicted_bytes


def test_unsupported_format_is_an_error():
    with pytest.raises(KvplanError, match="no kernel for mxfp4"):
        measure(load_model("qwen3-8b"), context=64, kv_k="mxfp4", device="cpu", progress=None)
    with pytest.raises(KvplanError, match="same format"):
        measure(load_model("qwen3-8b"), context=64, kv_k="kivi2", kv_v="q8_0", device="cpu",
                progress=None)


def test_allocator_model():
    # small blocks round to 512 and share 2 MiB segments
    assert allocator_prediction([100, 600]) == (512 + 1024, 2 * MiB)
    # a 3 MiB and a 5 MiB block share one 20 MiB segment; a third 15 MiB block needs its own
    # 16 MiB segment, and takes all of it: no more than 1 MiB would be left
    alloc, res = allocator_prediction([3 * MiB, 5 * MiB, 15 * MiB])
    assert alloc == 3 * MiB + 5 * MiB + 16 * MiB and res == 20 * MiB + 16 * MiB
    # large blocks round up to 2 MiB each; a 1.5 MiB tail is split off and counted free
    assert allocator_prediction([11 * MiB + 1]) == (12 * MiB, 12 * MiB)
    assert allocator_prediction([10 * MiB + 512 * 1024]) == (10 * MiB + 512 * 1024, 12 * MiB)
    # five 3.875 MiB blocks fill a 20 MiB segment; the fifth takes the 0.625 MiB tail (seen on
    # an H200 with a KIVI-4 cache: allocated exceeded the tensors by exactly these tails)
    block = 4063232
    alloc, res = allocator_prediction([block] * 5)
    assert alloc == 20 * MiB and res == 20 * MiB
    # best fit: three 9 MiB blocks leave holes of 2 MiB and 11 MiB; a 1.5 MiB request goes to
    # the 2 MiB hole (and takes all of it), not the 11 MiB one
    alloc, res = allocator_prediction([9 * MiB] * 3 + [3 * MiB // 2])
    assert res == 40 * MiB and alloc == 27 * MiB + 2 * MiB


def test_allocator_model_starts_from_the_free_blocks_it_is_given():
    # a warm process: small requests land in an existing segment's free block and reserve
    # nothing; a large one takes a free 4 MiB block whole (only 1 MiB would be left)
    assert allocator_prediction([600, 100], free_small=[2048]) == (1536, 0)
    assert allocator_prediction([3 * MiB], free_large=[4 * MiB]) == (4 * MiB, 0)
    # too small a free block is passed over
    assert allocator_prediction([3 * MiB], free_large=[2 * MiB]) == (3 * MiB, 20 * MiB)


@pytest.mark.parametrize("fmt", ["q4_0", "kivi2"])
def test_warm_up_runs_the_measured_code_on_a_tiny_cache(fmt):
    from kvcore.kernels.cache import LayerCache
    from kvcore.kernels.kivi import KiviCache
    from kvcore.measure import _warm_up

    spec = load_model("qwen3-8b")
    group = spec.groups_for(mtp=False)[0]
    built = []

    def build(g, tiny=False):
        assert tiny
        if fmt == "kivi2":
            cache = KiviCache(fmt, 1, g.n_kv_heads, g.head_dim_k, 16)
        else:
            cache = LayerCache(fmt, fmt, 1, 16, g.n_kv_heads, g.head_dim_k)
        built.append(cache)
        return cache, 16

    _warm_up([(group, 0), (group, 1)], build, 4, "cpu", torch)
    # one tiny cache per group, filled with 16 tokens of data
    assert len(built) == 1
    cache = built[0]
    if fmt == "kivi2":
        assert sum(cache.n_quant) + sum(cache.n_resid) == 16
    else:
        assert cache.k.planes["qs"].abs().sum() > 0


def test_store_round_trip(tmp_path):
    db = tmp_path / "m.sqlite3"
    m = measure(load_model("qwen3-8b"), context=64, kv_k="q8_0", device="cpu", steps=1,
                max_layers=1, progress=None)
    data = m.to_dict()
    first = save_measurement(data, db)
    data2 = dict(data, device="NVIDIA H200")
    second = save_measurement(data2, db)
    assert second == first + 1
    assert [x["id"] for x in list_measurements(db)] == [first, second]
    found = find_measurement("qwen3-8b", "q8_0", "q8_0", 64, 1, db)
    assert found is not None and found["device"] == "NVIDIA H200"
    assert find_measurement("qwen3-8b", "q8_0", "q8_0", 65, 1, db) is None


def test_store_errors_are_sentences(tmp_path):
    bad = tmp_path / "not-a-db.sqlite3"
    bad.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(KvplanError, match="cannot be opened|cannot be read|could not be stored"):
        save_measurement({"model": "x", "kv_k": "f16", "kv_v": "f16", "context": 1,
                          "sequences": 1, "device": "cpu", "predicted_bytes": 1,
                          "allocated_bytes": 1}, bad)


def test_measure_command(tmp_path, capsys):
    db = tmp_path / "m.sqlite3"
    code = main(["measure", "gpt-oss-20b", "--kv", "q8_0", "--ctx", "300", "--device", "cpu",
                 "--layers", "4", "--steps", "1", "--db", str(db), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    for key in ("predicted_bytes", "allocated_bytes", "allocator_bytes", "driver_bytes",
                "device", "decode"):
        assert key in out
    assert out["allocated_bytes"] == out["predicted_bytes"] and out["device"] == "cpu"
    rows = sqlite3.connect(db).execute("SELECT model FROM measurements").fetchall()
    assert rows == [("gpt-oss-20b",)]
    # off a GPU the torch reference is timed, and the line says so instead of a bandwidth
    assert out["decode"]["timing"] == "reference"
    from app.cli import render_measurement

    line = next(ln for ln in render_measurement(out).splitlines() if ln.startswith("decode step"))
    assert "in the torch reference on cpu" in line and "GB/s" not in line


def test_measure_command_errors(capsys):
    assert main(["measure", "qwen3-8b", "--kv", "mxfp4", "--device", "cpu", "--db", "none"]) == 2
    assert "no kernel for mxfp4" in capsys.readouterr().err


#: a config whose 80-wide heads KIVI's groups of 32 channels cannot cover
HEADS_80 = {"model_type": "llama", "hidden_size": 2560, "num_attention_heads": 32,
            "num_key_value_heads": 32, "num_hidden_layers": 2, "intermediate_size": 10240,
            "vocab_size": 32000}


def test_kivi_head_dims_not_a_multiple_of_its_group_are_an_error(tmp_path, capsys):
    with pytest.raises(KvplanError, match="80-wide heads.*multiple of 32"):
        measure(load_model(HEADS_80), context=64, kv_k="kivi2", device="cpu", progress=None)
    # the command: one line and exit 2, checked before anything is allocated
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(HEADS_80))
    assert main(["measure", str(cfg), "--kv", "kivi2", "--device", "cpu", "--db", "none"]) == 2
    err = capsys.readouterr().err.strip()
    assert "full layers (80-wide heads)" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_tensor_parallel_ranks_hold_their_shard(capsys):
    # two ranks over gloo on the CPU; each holds half the KV heads of qwen3-8b (8 → 4)
    code = main(["measure", "qwen3-8b", "--kv", "q8_0", "--ctx", "64", "--device", "cpu",
                 "--layers", "3", "--steps", "1", "--db", "none", "--tp", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["tp"] == 2 and len(out["ranks"]) == 2
    for rank in out["ranks"]:
        assert rank["allocated_bytes"] == rank["predicted_bytes"] == 3 * 64 * 4 * 2 * 136


def test_tensor_parallel_run_is_stored_as_one_measurement(tmp_path, capsys):
    from kvcore.store import list_measurements

    db = tmp_path / "m.sqlite3"
    code = main(["measure", "qwen3-8b", "--kv", "q8_0", "--ctx", "64", "--device", "cpu",
                 "--layers", "3", "--steps", "1", "--db", str(db), "--tp", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["id"] == 1
    [row] = list_measurements(db)
    assert row["device"] == "2 × cpu" and row["tp"] == 2
    assert row["predicted_bytes"] == row["allocated_bytes"] == 2 * 3 * 64 * 4 * 2 * 136
    assert [r["rank"] for r in row["ranks"]] == [0, 1]
    # a CPU run never verifies a plan
    from kvcore.store import find_measurement

    assert find_measurement("qwen3-8b", "q8_0", "q8_0", 64, 1, db) is None


def test_tp_needs_two_ranks():
    from kvcore.measure import measure_parallel

    with pytest.raises(KvplanError, match="at least 2"):
        measure_parallel(load_model("qwen3-8b"), 1, context=64, device="cpu")


def test_token_time_splits_a_token_between_attention_and_weights():
    from kvcore.measure import token_time
    from kvcore.weights import weights_for

    spec = load_model("llama-3.1-8b")
    w = weights_for(spec).active_bytes
    bw = 4e12
    # a measured step over half of the cache, at the time the weights take to read
    dec = {"seconds_per_step": w / bw / 2, "read_bandwidth_bytes_per_s": bw}
    t = token_time(spec, dec, scale=2.0)
    assert t["weights_active_bytes"] == w
    assert t["attention_seconds_per_token"] == pytest.approx(w / bw)
    assert t["attention_share"] == pytest.approx(0.5)
    # no bandwidth measured (a CPU run): nothing is claimed
    assert token_time(spec, {"seconds_per_step": 1.0}, 1.0) == {}


def test_a_cache_that_does_not_fit_is_measured_on_a_subset_of_layers(monkeypatch):
    import kvcore.measure as m

    spec = load_model("qwen3.5-27b")  # hybrid: 48 Gated DeltaNet + 16 full-attention layers
    full = m.measure(spec, context=256, sequences=1, kv_k="q8_0", device="cpu", steps=1,
                     max_layers=8, progress=None)
    assert full.subset_reason is None and full.layers_measured == 8
    # pretend only room for about half of those 8 layers beside the timing's own buffers
    monkeypatch.setattr(m, "free_memory",
                        lambda device, torch: m.HEADROOM + full.predicted_bytes // 2 + 4096)
    part = m.measure(spec, context=256, sequences=1, kv_k="q8_0", device="cpu", steps=1,
                     max_layers=8, progress=None)
    assert 0 < part.layers_measured < 8
    assert "does not fit" in part.subset_reason
    assert part.allocated_bytes == part.predicted_bytes
    # the subset keeps the model's layer order: linear and full layers, as in the model
    assert part.scale == pytest.approx(
        m.cache_size(spec, 256, 1, m.CacheOptions(kv_k=m.get_format("q8_0"),
                                                   kv_v=m.get_format("q8_0"))).total_bytes
        / part.predicted_bytes)


def test_not_even_one_layer_fits(monkeypatch):
    import kvcore.measure as m

    monkeypatch.setattr(m, "free_memory", lambda device, torch: m.HEADROOM)
    with pytest.raises(KvplanError, match="one layer of this cache needs"):
        m.measure(load_model("qwen3-8b"), context=4096, kv_k="f16", device="cpu", steps=1,
                  progress=None)


def test_decode_attends_with_the_models_query_heads():
    # the timed step uses the model's own query heads: DeepSeek-V3's 128 over its one latent
    # (spread over query blocks by the kernel), Qwen3-8B's 32 over 8 KV heads; a
    # tensor-parallel rank its share of them
    from kvcore.measure import query_heads
    from kvcore.model import LayerGroup, LayerKind
    from kvcore.parallel import Parallel, rank_spec

    v3 = load_model("deepseek-v3")
    m = measure(v3, context=32, kv_k="q8_0", device="cpu", steps=1, max_layers=1,
                progress=None)
    assert m.decode["query_heads"] == {"mla": 128}
    m = measure(load_model("qwen3-8b"), context=32, kv_k="f16", device="cpu", steps=1,
                max_layers=1, progress=None)
    assert m.decode["query_heads"] == {"full": 32}
    assert rank_spec(v3, Parallel(tp=8)).num_attention_heads == 16
    llama = rank_spec(load_model("llama-3.1-70b"), Parallel(tp=16))
    assert llama.num_attention_heads == 4 and llama.groups[0].n_kv_heads == 1
    assert query_heads(llama.num_attention_heads, llama.groups[0]) == 4
    # heads not known, or not a multiple of the KV heads: four a KV head
    full = LayerGroup(kind=LayerKind.FULL, layers=(0,), n_kv_heads=8, head_dim_k=128,
                      head_dim_v=128)
    assert query_heads(0, full) == 32 and query_heads(36, full) == 32


def test_measure_takes_the_formats_as_the_plan_does(capsys):
    # --kv-k alone: V stays in --kv's format (f16), as in a plan (and llama.cpp's -ctk alone)
    code = main(["measure", "qwen3-8b", "--kv-k", "q8_0", "--ctx", "64", "--device", "cpu",
                 "--layers", "1", "--steps", "1", "--db", "none", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and (out["kv_k"], out["kv_v"]) == ("q8_0", "f16")
    code = main(["qwen3-8b", "--kv-k", "q8_0", "--json"])
    plan = json.loads(capsys.readouterr().out)
    assert code == 0 and (plan["kv_k"], plan["kv_v"]) == ("q8_0", "f16")


def test_measure_refuses_a_folder_for_its_database_before_it_runs(tmp_path, capsys):
    code = main(["measure", "qwen3-8b", "--ctx", "64", "--device", "cpu", "--layers", "1",
                 "--db", str(tmp_path)])
    _, err = capsys.readouterr()
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("kvplan: error: --db takes a SQLite file, and '")
    assert err.rstrip().endswith(" is a folder")
