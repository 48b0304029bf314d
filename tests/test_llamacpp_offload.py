"""llama.cpp with part of a model in host memory: -ngl, --n-cpu-moe / --cpu-moe and --fit's own
placement, the caches of host-held blocks, and the decode step that reads them from host
memory."""

from __future__ import annotations

import json
import shlex
from dataclasses import replace

import pytest
from ggufmake import dense_model, nbytes, write_gguf

import kvcore
from app.common import make_query
from kvcore import CacheOptions, InputError, find_gpu, load_model
from kvcore.engines import CPU_MOE, EngineRequest, EngineSettings, engine_plan
from kvcore.engines.llamacpp_offload import (
    DEFAULT_HOST_BANDWIDTH,
    DEFAULT_HOST_LINK,
    Block,
    Placement,
    blocks_for,
    even_split,
    fit_placement,
    gguf_blocks,
    ts_split,
)
from kvcore.query import answer
from kvcore.weights import weights_for

GiB = 1024**3


def req(model, ctx=8192, seqs=1, gpu="4090", weights="q4_k_m", **settings):
    return EngineRequest(spec=load_model(model), context=ctx, sequences=seqs,
                         cache=CacheOptions(), gpus=(find_gpu(gpu),), weights=weights,
                         settings=EngineSettings(**settings))


def test_ngl_offloads_the_output_layer_first_then_the_last_blocks():
    # llama-model.cpp: i_gpu_start = max(n_layer + 1 - ngl, 0), the output layer is n_layer
    assert Placement(80, 40).gpu_range == range(41, 80)
    assert Placement(80, 1).gpu_range == range(80, 80) and Placement(80, 1).output_on_gpu
    assert not Placement(80, 0).output_on_gpu and not Placement(80, 0).gpu_blocks
    assert Placement(80, 80).gpu_range == range(1, 80)
    assert Placement(80, 81).everything and not Placement(80, 80).everything


@pytest.mark.parametrize("name,where,family", [
    ("ffn_gate_exps.weight", "exps", 0), ("ffn_up_exps.weight", "exps", 1),
    ("ffn_down_exps.weight", "exps", 2), ("ffn_gate_up_exps.weight", "exps", 0),
    ("ffn_up_chexps.weight", "exps", 1), ("ffn_gate_inp.weight", "ffn", 0),
    ("ffn_gate_shexp.weight", "ffn", 0), ("ffn_up_shexp.weight", "ffn", 1),
    ("ffn_down_shexp.weight", "ffn", 2), ("ffn_down.weight", "ffn", 2),
    ("ffn_norm.weight", "other", None), ("attn_q.weight", "other", None),
    ("exp_probs_b.bias", "other", None),
])
def test_gguf_tensors_sort_into_the_patterns_llama_cpp_places_by(name, where, family):
    (blk,) = gguf_blocks([(f"blk.0.{name}", 1000), ("token_embd.weight", 7),
                          ("blk.1.attn_q.weight", 5)], 1)
    if where == "other":
        assert blk == Block(other=1000)
    else:
        parts = [0, 0, 0]
        parts[family] = 1000
        assert getattr(blk, where) == tuple(parts) and blk.total == 1000


def _moe_gguf(tmp_path, layers=6):
    meta, tensors = dense_model("qwen3moe", layers=layers, hidden=2048, heads=32, kv_heads=4,
                                head_dim=128, ffn=6144, vocab=1000, ctx=40960, experts=128,
                                used=8, expert_ffn=768)
    path = tmp_path / "moe.gguf"
    total = write_gguf(path, meta, tensors)
    return load_model(str(path)), tensors, total


def test_a_gguf_s_blocks_are_its_tensors(tmp_path):
    spec, tensors, total = _moe_gguf(tmp_path)
    w = weights_for(spec)
    blocks, source = blocks_for(spec, w)
    assert source == "the GGUF's tensors" and len(blocks) == 6
    expert = nbytes((2048, 768, 128), 12)
    for blk in blocks:
        assert blk.exps == (expert, expert, expert)
        assert blk.ffn == (nbytes((2048, 128), 0), 0, 0)  # the router
    outside = sum(nbytes(s, t) for n, s, t in tensors if not n.startswith("blk."))
    assert sum(b.total for b in blocks) + outside == total


def test_config_blocks_add_up_to_the_decoder_s_bytes():
    spec = load_model("qwen3-30b-a3b")
    w = weights_for(spec, "q8_0")
    blocks, source = blocks_for(spec, w)
    assert "modules" in source and len(blocks) == 48
    body = w.bytes - w.embedding_bytes
    assert abs(sum(b.total for b in blocks) - body) <= 48 * 4
    assert abs(sum(b.experts for b in blocks) - w.expert_bytes) <= 48 * 4
    # DeepSeek-V3's first three blocks are dense: no routed experts there
    ds = load_model("deepseek-v3")
    dblocks, _ = blocks_for(ds, weights_for(ds, "q4_k_m"))
    assert [b.experts > 0 for b in dblocks[:4]] == [False, False, False, True]
    # its shared experts (one module) split over gate, up and down; the router (float32) is
    # a gate; in Q4_K_M the last block's down projections are Q6_K (210 bytes a 256-value
    # block against Q4_K's 144), its routed experts' too
    gate, up, down = dblocks[-1].ffn
    router = 256 * 7168 * 4
    assert gate == up + router and down * 144 == up * 210
    assert dblocks[-1].exps[2] * 144 == dblocks[-1].exps[1] * 210
    # a block use_more_bits passes over keeps its down projections in Q4_K
    assert dblocks[10].exps[2] == dblocks[10].exps[1]
    # an ungated MLP (Nemotron-H's relu² experts) has no gate projections
    nh = load_model("nemotron-3-nano-30b-a3b")
    nblocks, _ = blocks_for(nh, weights_for(nh, "q4_k_m"))
    assert all(b.exps[0] == 0 for b in nblocks) and any(b.exps[1] for b in nblocks)


def _need(r, place):
    """What a placement puts on the card, from the plan's own pieces (weights, the blocks'
    caches, compute buffers), as --fit compares it with the card less its target."""
    blocks, _ = blocks_for(r.spec, weights_for(r.spec, r.weights))
    # everything on the card: all but the input embedding, which llama.cpp keeps in host memory
    card_all = engine_plan("llama.cpp", replace(r, settings=EngineSettings())).weights_bytes
    output = card_all - sum(b.total for b in blocks)
    return blocks, output, place.split(blocks, output)[0]


def test_fit_keeps_the_most_blocks_of_a_dense_model_the_card_takes():
    q = req("llama-3.1-70b")
    r = engine_plan("llama.cpp", q)
    fit = r.extra["fit"]
    assert not r.fits and "-ngl" not in r.command
    k = fit["ngl"]
    compute = dict(r.overheads)["compute buffers"]
    budget = r.budget_bytes
    per_block_cache = 8192 * 8 * 128 * 2 * 2  # f16 K and V, 8 KV heads of 128, a block
    blocks, output, card = _need(q, Placement(80, k))
    assert card == fit["card_weights_bytes"]
    assert fit["card_cache_bytes"] == (k - 1) * per_block_cache
    assert card + fit["card_cache_bytes"] + compute <= budget
    _, _, more = _need(q, Placement(80, k + 1))
    assert more + k * per_block_cache + compute > budget
    # the blocks on the card are the last ones; the host holds the first
    assert fit["host_holds"] == f"blocks 0–{80 - k}"
    assert fit["blocks_on_card"] == k - 1


def test_fit_moves_a_mixture_of_experts_experts_last_blocks_first():
    q = req("qwen3-30b-a3b", ctx=32768, weights="q8_0")
    r = engine_plan("llama.cpp", q)
    fit = r.extra["fit"]
    n = 48
    assert fit["blocks_on_card"] == n and fit["output_on_card"]
    full = fit["partial_block"][0]
    # the experts of the blocks after the partial one stay in host memory
    assert fit["cpu_expert_blocks"] == list(range(full + 1, n))
    compute = dict(r.overheads)["compute buffers"]
    cache = 32768 * 48 * 4 * 128 * 2 * 2
    assert fit["card_cache_bytes"] == cache
    rest = frozenset(range(full + 1, n))
    for frac in ("up", "gate", "attn"):
        _need(q, Placement(n, n + 1, rest, ((full, frac, None),)))
    # what it chose fits; the block before it whole on the card and the next fraction up
    # would not
    _, _, chosen = _need(q, Placement(n, n + 1, rest, ((full, fit["partial_block"][1], None),)))
    assert chosen + cache + compute <= r.budget_bytes
    _, _, whole = _need(q, Placement(n, n + 1, rest))
    assert whole + cache + compute > r.budget_bytes
    # every block stays on the card: the prompt's batches copy the host-held weights
    assert fit["prefill"]["batches"] == 64 and fit["prefill"]["host_link_bytes"] > 0
    note = next(n for n in r.notes if "--fit" in n)
    assert f"prefilling ≈ {fit['prefill']['tokens_per_s']:,.0f} tokens/s" in note
    if fit["partial_block"][1] == "up":
        _, _, gate = _need(q, Placement(n, n + 1, rest, (full, "gate")))
        assert gate + cache + compute > r.budget_bytes


def test_fit_search_follows_llama_cpp_s_order_on_a_toy_model():
    # four blocks of 10 (other) + 1 (router) + 3 × 10 (experts); the card takes need ≤ room
    blocks = tuple(Block(10, (1, 0, 0), (10, 10, 10)) for _ in range(4))

    def need(p):
        return p.split(blocks, 5)[0]

    # everything but experts: 4 × 11 + 5 = 49; each block's experts 30 more
    # block 0 whole (79); block 1's up projections (+9: its experts' up on, its router off)
    p = fit_placement(4, blocks, lambda p: [need(p)], [49 + 30 + 15])
    assert (p.ngl, p.cpu_experts, p.partial) == (5, frozenset({2, 3}), (1, "up"))
    # and its gate projections as well (+20: 99), each fraction's test strict as --fit's
    p = fit_placement(4, blocks, lambda p: [need(p)], [49 + 30 + 20])
    assert p.partial == (1, "up")
    p = fit_placement(4, blocks, lambda p: [need(p)], [49 + 30 + 21])
    assert (p.cpu_experts, p.partial) == (frozenset({2, 3}), (1, "gate"))
    p = fit_placement(4, blocks, lambda p: [need(p)], [49 + 30 + 5])
    assert p.partial == (1, "attn")  # the up ones do not fit: its attention alone (−1)
    # the lowest block on the card keeps its experts (the overrides are laid from the first
    # layer on the card): with room for every expert in host memory (49) but not for block
    # 0 whole (79), --fit drops layers: blocks 2 and 3 and the output (57), block 2 whole,
    # then block 3's attention alone (56; its up projections would make it 66)
    p = fit_placement(4, blocks, lambda p: [need(p)], [60])
    assert (p.ngl, p.gpu_range, p.cpu_experts, p.partial) == (3, range(2, 4), frozenset(),
                                                               (3, "attn"))
    assert need(p) == 41 + 10 + 5
    # too little for every expert in host memory: the most layers from the back, the
    # lowest of them whole (block 3: 41 + 5), the others' experts in host memory
    p = fit_placement(4, blocks, lambda p: [need(p)], [48])
    assert (p.ngl, p.gpu_range, p.cpu_experts, p.partial) == (2, range(3, 4), frozenset(), None)
    # room for block 1 whole and blocks 2, 3 dense-only (68): then block 2's attention alone
    p = fit_placement(4, blocks, lambda p: [need(p)], [68])
    assert (p.ngl, p.cpu_experts, p.partial) == (4, frozenset({3}), (2, "attn"))
    assert need(p) == 41 + 10 + 11 + 5
    assert fit_placement(4, blocks, lambda p: [need(p)], [-1]) is None
    dense = tuple(Block(10) for _ in range(4))
    p = fit_placement(4, dense, lambda p: [p.split(dense, 5)[0]], [25])
    assert (p.ngl, p.output_on_gpu, p.gpu_range) == (3, True, range(2, 4))


def test_n_cpu_moe_keeps_the_first_blocks_experts_in_host_memory():
    q = req("qwen3-30b-a3b", ctx=32768, weights="q8_0", n_cpu_moe=20)
    r = engine_plan("llama.cpp", q)
    placed = r.extra["placement"]
    assert r.fits and "--n-cpu-moe 20" in r.command and "-ngl" not in r.command
    assert placed["cpu_expert_blocks"] == list(range(20))
    w = weights_for(q.spec, "q8_0")
    blocks, _ = blocks_for(q.spec, w)
    assert placed["host_weights_bytes"] == sum(b.experts for b in blocks[:20]) + w.input_bytes
    assert r.weights_bytes == w.bytes - placed["host_weights_bytes"]
    every = engine_plan("llama.cpp", replace(q, settings=EngineSettings(n_cpu_moe=CPU_MOE)))
    assert "--cpu-moe" in every.command
    assert every.extra["placement"]["cpu_expert_blocks"] == list(range(48))
    assert every.max_context > r.max_context


def test_ngl_puts_the_first_blocks_and_their_caches_in_host_memory():
    q = req("llama-3.1-70b", n_gpu_layers=40)
    r = engine_plan("llama.cpp", q)
    per_block = 8192 * 8 * 128 * 2 * 2
    assert r.fits and "-ngl 40" in r.command
    assert r.extra["placement"]["host_cache_bytes"] == 41 * per_block
    lines = [line for line in r.log_lines if "buffer size" in line]
    assert lines == [f"llama_kv_cache:        CPU KV buffer size = {41 * per_block / 2**20:8.2f} MiB",
                     f"llama_kv_cache:      CUDA0 KV buffer size = {39 * per_block / 2**20:8.2f} MiB"]
    # the card's pool is what is left beside its share of the weights
    assert r.kv_pool_bytes == r.budget_bytes - r.weights_bytes - dict(r.overheads)["compute buffers"]


def test_a_step_reads_the_host_part_at_host_bandwidth():
    q = make_query(load_model("qwen3-30b-a3b"), context=32768, sequences=1, weights="q8_0",
                   gpu="4090", engine="llama.cpp",
                   settings=EngineSettings(n_cpu_moe=CPU_MOE, host_bandwidth_bytes_per_s=60e9))
    out = answer(q)
    d = out["decode"]
    w = weights_for(q.spec, "q8_0")
    blocks, _ = blocks_for(q.spec, w)
    experts = sum(b.experts for b in blocks)
    # every expert in host memory, one token reading its top 8 of 128
    assert d["host_bytes_per_step"] == round(experts * 8 / 128)
    assert d["host_seconds_per_step"] == pytest.approx(d["host_bytes_per_step"] / 60e9)
    card = d["bytes_per_step"] - d["host_bytes_per_step"]
    assert d["bandwidth_seconds_per_step"] == pytest.approx(card / find_gpu("4090")
                                                           .bandwidth_bytes_per_s)
    assert d["seconds_per_step"] == pytest.approx(d["host_seconds_per_step"] + max(
        d["bandwidth_seconds_per_step"], d["compute_seconds_per_step"]))
    assert d["bound"] == "host" and d["host_bandwidth_given"]
    # the prompt: 64 batches of 512 tokens, each copying the experts it routes to (all but
    # a 0.9375^512 sliver) over PCIe 4.0 x16, beside the card's own compute-bound prefill
    p = out["prefill"]
    share = 1 - (1 - 8 / 128) ** 512
    assert p["batches"] == 64 and p["n_ubatch"] == 512
    assert p["host_link_bytes"] == pytest.approx(64 * experts * share, rel=1e-9)
    # the RTX 4090's own link, PCIe 4.0 x16, at the 87.4% of it a pinned copy ran at on the
    # H200 machine (55.1 of 63.0 GB/s)
    link = find_gpu("4090").host_link_bytes_per_s * 0.874
    assert p["host_link_bytes_per_s"] == link and p["host_link_from"] == "PCIe 4.0 x16"
    assert find_gpu("4090").host_link_bytes_per_s == int(DEFAULT_HOST_LINK) \
        == int(16e9 * 16 * 128 / 130 / 8)
    whole = answer(make_query(load_model("qwen3-30b-a3b"), context=32768, weights="q8_0",
                              gpu="4090"))["prefill"]
    assert p["seconds"] == pytest.approx(whole["seconds"] + p["host_link_bytes"] / link)
    assert p["bound"] == "host link"
    # without a figure, dual-channel DDR5-5600
    q2 = replace(q, settings=EngineSettings(n_cpu_moe=CPU_MOE))
    assert answer(q2)["decode"]["host_bandwidth_bytes_per_s"] == DEFAULT_HOST_BANDWIDTH


def test_a_dense_step_reads_host_blocks_and_their_caches():
    q = make_query(load_model("llama-3.1-70b"), context=8192, sequences=1, weights="q4_k_m",
                   gpu="4090", engine="llama.cpp", settings=EngineSettings(n_gpu_layers=40))
    d = answer(q)["decode"]
    w = weights_for(q.spec, "q4_k_m")
    blocks, _ = blocks_for(q.spec, w)
    per_block = 8192 * 8 * 128 * 2 * 2
    assert d["host_bytes_per_step"] == sum(b.total for b in blocks[:41]) + 41 * per_block


@pytest.mark.parametrize("settings,match", [
    ({"n_cpu_moe": 4}, "this model has none"),
    ({"n_gpu_layers": -1}, "ngl must be a whole number"),
    ({"n_cpu_moe": -2}, "n_cpu_moe must be a whole number"),
    ({"host_bandwidth_bytes_per_s": 0.5e9}, "host_bandwidth must be"),
])
def test_bad_placements_are_refused(settings, match):
    with pytest.raises(InputError, match=match):
        engine_plan("llama.cpp", req("llama-3.1-8b", **settings))


def test_an_even_split_gives_each_card_its_share_of_the_offloaded_layers():
    from kvcore.parallel import llamacpp_stage_layers
    # every layer offloaded: the stage split llama.cpp's -sm layer makes (the output counted)
    assert even_split(33, 2) == (17, 16)
    assert [len(llamacpp_stage_layers(32, 2, i)) for i in range(2)] == [17, 15]
    assert even_split(17, 2) == (9, 8)  # the Snapdragon OLMoE log: 16 blocks as 9 and 7
    assert even_split(60, 3) == (20, 20, 20) and even_split(7, 3) == (3, 2, 2)
    assert even_split(60, 1) == ()
    p = Placement(80, 60, tensor_split=even_split(60, 2))
    assert p.device_ranges() == [range(21, 51), range(51, 80)] and p.output_device == 1


def test_ngl_over_two_cards_splits_the_offloaded_layers_evenly():
    from kvcore.parallel import Parallel
    q = replace(req("llama-3.1-70b", ctx=32768, n_gpu_layers=60, weights="q4_k_m"),
                parallel=Parallel(pp=2), gpus=(find_gpu("4090"),) * 2)
    r = engine_plan("llama.cpp", q)
    placed = r.extra["placement"]
    assert "-ngl 60" in r.command and "-sm layer -ts 1,1" in r.command
    assert placed["tensor_split"] == [30, 30]
    assert [c["blocks"] for c in placed["cards"]] == [[21, 50], [51, 79]]
    assert [c["output_layer"] for c in placed["cards"]] == [False, True]
    # 8 KV heads × 128 × 2 bytes, K and V, 32,768 cells: 128 MiB a block
    per_block = 8 * 128 * 2 * 2 * 32768
    assert [c["cache_bytes"] for c in placed["cards"]] == [30 * per_block, 29 * per_block]
    assert placed["host_cache_bytes"] == 21 * per_block
    assert r.log_lines[:3] == (
        "llama_kv_cache:        CPU KV buffer size =  2688.00 MiB",
        "llama_kv_cache:      CUDA0 KV buffer size =  3840.00 MiB",
        "llama_kv_cache:      CUDA1 KV buffer size =  3712.00 MiB")
    # each card's weights are its blocks (the second's the output layer too); the binding
    # card is the one with the least room left
    blocks, output, _ = _need(req("llama-3.1-70b", weights="q4_k_m"), Placement(80, 81))
    w0 = sum(b.total for b in blocks[21:51])
    w1 = sum(b.total for b in blocks[51:80]) + output
    assert [c["weights_bytes"] for c in placed["cards"]] == [w0, w1]
    assert r.weights_bytes == (w0 if w0 + 30 * per_block >= w1 + 29 * per_block else w1)
    # the decode reads both cards' parts and the host's
    d = placed["decode"]
    assert d["host_cache_bytes_per_step"] == 21 * per_block
    card_bw = find_gpu("4090").bandwidth_bytes_per_s
    card_part = (w0 + w1 + 59 * per_block) / card_bw
    assert d["bandwidth_seconds_per_step"] == pytest.approx(card_part, rel=1e-3)
    assert d["seconds_per_step"] == pytest.approx(card_part + d["host_seconds_per_step"])


def test_a_tensor_split_shares_the_layers_as_llama_cpp_does():
    assert ts_split(60, (3, 1)) == (45, 15) and ts_split(81, (3, 1)) == (61, 20)
    assert ts_split(81, (1, 0, 1)) == (41, 0, 40)
    assert ts_split(9, (1, 1, 1)) == (3, 3, 3) and ts_split(10, (1, 2)) == (4, 6)
    assert ts_split(60, (1, 1)) == even_split(60, 2)
    from kvcore.engines import parse_tensor_split
    assert parse_tensor_split("3, 1") == (3.0, 1.0) and parse_tensor_split("2/1") == (2.0, 1.0)
    for bad in ("3,x", "0,0", "-1,2", "", "nan,1"):
        with pytest.raises(InputError, match="tensor_split"):
            parse_tensor_split(bad)


def test_ts_alone_splits_every_layer_over_the_cards_as_given():
    from kvcore.parallel import Parallel
    two = {"parallel": Parallel(pp=2), "gpus": (find_gpu("4090"),) * 2}
    q = replace(req("llama-3.1-70b", ctx=8192, weights="q4_k_m", tensor_split=(3, 1)), **two)
    r = engine_plan("llama.cpp", q)
    placed = r.extra["placement"]
    assert not placed["host_held"] and "--no-mmap" not in r.command
    assert "-ngl" not in r.command and r.command.endswith("-ts 3,1 -sm layer")
    assert [c["blocks"] for c in placed["cards"]] == [[0, 60], [61, 79]]
    assert any("-ts 3,1 splits the layers over the cards: CUDA0 blocks 0–60; CUDA1 blocks "
               "61–79 and the output layer" in n for n in r.notes)
    # the first card takes three quarters of the weights: it binds
    assert r.binding_stage == 0 and not r.fits
    even = engine_plan("llama.cpp", replace(q, settings=EngineSettings()))
    assert even.fits and "-ts 1,1" in even.command
    # a -ts turns --fit's search off: no --fit note
    assert "fit" not in r.extra
    # the answer keeps the plain decode estimate (nothing in host memory)
    out = answer(make_query(load_model("llama-3.1-70b"), context=8192, gpu="4090", gpus="2",
                            engine="llama.cpp", weights="q4_k_m",
                            settings=EngineSettings(tensor_split=(1, 1))))
    assert "host_bytes_per_step" not in out["decode"]
    with pytest.raises(InputError, match="tensor_split shares the layers over several cards"):
        engine_plan("llama.cpp", req("llama-3.1-8b", tensor_split=(1, 1)))
    with pytest.raises(InputError, match="over several cards"):
        engine_plan("llama.cpp", req("llama-3.1-8b", tensor_split=(1,)))
    with pytest.raises(InputError, match="tensor_split is a setting of llama.cpp"):
        make_query(load_model("llama-3.1-8b"), context=8192, gpu="4090", engine="vllm",
                   settings=EngineSettings(tensor_split=(1, 1)))


def test_the_cli_gives_each_card_s_share(capsys):
    from app.cli import main
    assert main(["llama-3.1-70b", "--gpus", "2x4090", "--engine", "llama.cpp", "--weights",
                 "q4_k_m", "--ctx", "32k", "--ngl", "60", "--ts", "3,1"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith(("CUDA0 ", "CUDA1 ", "host "))}
    # -ts 3,1 of 60 layers: 45 (blocks 21–65) and 15 (blocks 66–79 and the output layer);
    # 128 MiB of f16 cache a block at 32k
    assert rows["CUDA0"][1] == "21–65" and rows["CUDA0"][-2:] == ["5.62", "GiB"]
    assert rows["CUDA1"][1:3] == ["66–79,", "output"] and rows["CUDA1"][-2:] == ["1.75", "GiB"]
    assert rows["host"][1:3] == ["blocks", "0–20"] and rows["host"][-2:] == ["2.62", "GiB"]


def test_fit_over_two_cards_follows_llama_cpp_s_order_on_a_toy_model():
    blocks = tuple(Block(10, (1, 0, 0), (10, 10, 10)) for _ in range(4))

    def fit(rooms):
        return fit_placement(4, blocks, lambda p: p.place_bytes(blocks, 5)[0], rooms)

    # a dense model: the last card takes the most layers from the back, then the first
    dense = tuple(Block(10) for _ in range(4))
    p = fit_placement(4, dense, lambda p: p.place_bytes(dense, 5)[0], [15, 25])
    assert (p.ngl, p.tensor_split, p.device_ranges()) == (4, (1, 3), [range(1, 2), range(2, 4)])
    # the second card takes every layer with only its dense weights (79: block 0 whole, the
    # lowest on it); then the first card takes block 0 whole (41; blocks 0 and 1, 82, would
    # not fit), and block 1 in part: its up projections on it (61), its gate and down
    # projections on the next card (21 more there: 78); the second card then keeps block 2
    # whole and block 3's up projections, its gate and down projections in host memory
    p = fit([65, 90])
    assert (p.ngl, p.tensor_split) == (5, (2, 3))
    assert p.partials == ((1, "up", 1), (3, "up", None)) and not p.cpu_experts
    assert p.place_bytes(blocks, 5) == ([41 + 20, 41 + 21 + 20 + 5], 21)
    assert p.describe_devices() == ("CUDA0 blocks 0–1; CUDA1 blocks 2–3 and the output layer; "
                                    "block 1's gate and down projections on CUDA1")
    assert p.describe() == "block 3's gate and down projections"
    # no room on the second card for what the first would pass it: the first keeps block 0
    # whole; the second block 1 whole, block 2's up and gate projections, block 3's dense
    # weights
    p = fit([50, 90])
    assert (p.tensor_split, p.cpu_experts, p.partials) == ((1, 4), frozenset({3}),
                                                           ((2, "gate", None),))
    assert p.place_bytes(blocks, 5)[0] == [41, 41 + 31 + 11 + 5]
    # step 3 leaves both cards dense-only layers (the second 57: block 2 whole, the lowest
    # on it); block 0 whole would not fit the first card, nor a fraction passed on
    p = fit([50, 60])
    assert (p.tensor_split, p.cpu_experts, p.partials) == ((2, 3), frozenset({0, 1, 3}), ())
    assert p.place_bytes(blocks, 5)[0] == [22, 57]


def test_placements_are_for_llama_cpp_and_cards_of_their_own():
    with pytest.raises(InputError, match="share one memory"):
        engine_plan("llama.cpp", req("llama-3.1-70b", gpu="m3 max 36gb", n_gpu_layers=40))
    # so do the other unified-memory machines; Strix Halo's GPU share can be raised instead
    with pytest.raises(InputError, match="on NVIDIA DGX Spark the CPU and the GPU share one"):
        engine_plan("llama.cpp", req("llama-3.1-70b", gpu="dgx spark", n_gpu_layers=40))
    with pytest.raises(InputError, match="raise the GPU's share of it"):
        engine_plan("llama.cpp", req("llama-3.1-70b", gpu="strix halo", n_gpu_layers=10))
    # every layer on the GPU (the -ngl 99 of a Mac's command) is what the plan does anyway
    for ngl in (81, 99, 999):
        whole = engine_plan("llama.cpp", req("llama-3.1-8b", gpu="m4 max", n_gpu_layers=ngl))
        assert whole.fits and "placement" not in whole.extra
    with pytest.raises(InputError, match="ngl is a setting of llama.cpp"):
        make_query(load_model("llama-3.1-8b"), context=8192, gpu="4090", engine="vllm",
                   settings=EngineSettings(n_gpu_layers=10))


def test_the_cli_plans_an_offload(capsys):
    from app.cli import main
    assert main(["llama-3.1-70b", "--gpu", "4090", "--engine", "llama.cpp", "--weights",
                 "q4_k_m", "--ctx", "8k", "--ngl", "40", "--host-bandwidth", "60"]) == 0
    out = capsys.readouterr().out
    assert "-ngl 40 keeps blocks 0–40 in host memory" in out
    assert "of a step reading" in out and "from host memory at 60.0 GB/s," in out
    assert main(["qwen3-30b-a3b", "--gpu", "4090", "--engine", "llama.cpp", "--weights", "q8_0",
                 "--ctx", "32k", "--cpu-moe", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["engine_report"]["extra"]["placement"]["how"] == "--cpu-moe"
    assert main(["llama-3.1-8b", "--gpu", "4090", "--engine", "llama.cpp", "--n-cpu-moe",
                 "3"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "routed experts" in err[0]


def test_host_memory_bounds_what_llama_cpp_keeps_there():
    base = req("llama-3.1-70b", n_gpu_layers=0)
    r = engine_plan("llama.cpp", base)
    per_block = 8192 * 8 * 128 * 2 * 2
    w = weights_for(base.spec, "q4_k_m")
    # everything but the compute buffers in host memory, and llama-server's prompt cache up
    # to its 8 GiB: the context is bound by it alone
    need = r.extra["placement"]["host_weights_bytes"] + 80 * per_block + 8 * GiB
    assert abs(r.extra["placement"]["host_weights_bytes"] - w.bytes) <= 1  # integer shares
    capped = replace(base, settings=EngineSettings(n_gpu_layers=0, host_memory_bytes=need))
    r = engine_plan("llama.cpp", capped)
    assert r.fits and r.extra["placement"]["host_bytes"] == need
    assert any("(llama-server's prompt cache and checkpoints 8 GiB of it)" in n for n in r.notes)
    # one more 256-cell step of context needs 80 blocks × 256 cells more than is there
    assert r.max_context == 8192
    short = replace(capped, settings=EngineSettings(n_gpu_layers=0, host_memory_bytes=need - 1))
    assert not engine_plan("llama.cpp", short).fits
    # without the prompt cache (--cache-ram 0) the same memory holds 8 GiB more of cache
    off = replace(capped, settings=EngineSettings(n_gpu_layers=0, host_memory_bytes=need,
                                                  cache_ram_mib=0))
    r = engine_plan("llama.cpp", off)
    assert r.extra["placement"]["host_bytes"] == need - 8 * GiB
    assert r.max_context == 8192 + 8 * GiB // (80 * per_block // 8192) // 256 * 256
    assert "--cache-ram 0" in r.command
    q = make_query(load_model("gpt-oss-120b"), context=65536, gpu="4090", engine="llama.cpp",
                   settings=EngineSettings(n_cpu_moe=CPU_MOE, host_memory_bytes=48 * GiB))
    out = answer(q)
    assert out["fits"] is False and out["binding"] == "host"
    assert "exceeds the 48 GiB given" in out["binding_reason"]


def test_fit_chooses_what_a_real_llama_server_chose(tmp_path):
    """A public llama-server log (2026-06, run by Ollama): Hermes 3 Llama 3.1 8B in Q4_0 on an
    RTX 2060 with 5,141 MiB free, -c 32768, -ngl left to --fit (target 1,024 MiB). The log's
    test allocations: compute buffers 248 MiB; 15 layers use 2049 + 1792 + 248 = 4,089 MiB,
    16 layers 4,334 MiB. It kept 15 (the output layer and 14 blocks): "CUDA0 model buffer size
    = 2049.43 MiB", KV "CPU 2304.00 MiB", "CUDA0 1792.00 MiB"; host memory held 2,388 MiB of
    weights (the input embedding and 18 blocks)."""
    from kvcore.engines import llamacpp

    meta, tensors = dense_model("llama", layers=32, hidden=4096, heads=32, kv_heads=8,
                                head_dim=128, ffn=14336, vocab=128256, ctx=131072, quant=2,
                                head_type=14)
    tensors.append(("rope_freqs.weight", (64,), 0))
    path = tmp_path / "hermes-3-llama-3.1-8b-q4_0.gguf"
    total = write_gguf(path, meta, tensors)
    spec = load_model(str(path))
    w = weights_for(spec)
    blocks, _ = blocks_for(spec, w)
    output = total - w.input_bytes - sum(b.total for b in blocks)
    mem = llamacpp.Memory(spec, llamacpp.Layout(32768, 1, False, 512), CacheOptions(), False)
    MiB = 2**20

    def need(p):
        return p.split(blocks, output)[0] + mem.bytes_of(p.gpu_blocks) + 248 * MiB

    # the log's first projection (whole MiB, rounded down), everything on the card: model
    # 4,155 MiB, host 281 (the input embedding), context 4,096
    assert Placement(32, 33).split(blocks, output)[0] // MiB == 4155
    assert w.input_bytes // MiB == 281 and mem.kv_bytes == 4096 * MiB
    fit = fit_placement(32, blocks, lambda p: [need(p)], [(5141 - 1024) * MiB])
    assert fit.ngl == 15 and fit.gpu_range == range(18, 32) and fit.output_on_gpu
    card, host = fit.split(blocks, output)
    assert f"{card / MiB:.2f}" == "2049.43"
    assert (host + w.input_bytes) // MiB == 2388
    assert mem.bytes_of(fit.gpu_blocks) == 1792 * MiB
    assert mem.kv_bytes - mem.bytes_of(fit.gpu_blocks) == 2304 * MiB
    assert need(fit) // MiB == 4089 and need(Placement(32, 16)) // MiB == 4334


def test_ngl_splits_a_hybrid_model_s_caches_as_a_real_log_does():
    """A public llama-server log (build 8586): Qwen3.5-27B Q4_K_S, -c 131072 -ngl 26 -ub 1024
    on an RTX 4070 printed "offloading output layer to GPU", "offloading 25 repeating layers"
    and these buffers (its 16 full-attention layers hold KV, its 48 GDN layers state)."""
    r = engine_plan("llama.cpp", req("qwen3.5-27b", ctx=131072, gpu="4070", n_gpu_layers=26,
                                     n_ubatch=1024))
    printed = ["llama_kv_cache:        CPU KV buffer size =  4608.00 MiB",
               "llama_kv_cache:      CUDA0 KV buffer size =  3584.00 MiB",
               "llama_memory_recurrent:        CPU RS buffer size =    93.52 MiB",
               "llama_memory_recurrent:      CUDA0 RS buffer size =    56.11 MiB"]
    assert [line for line in r.log_lines if "buffer size" in line] == printed
    assert r.extra["placement"]["blocks_on_card"] == 25


def test_find_model_lists_what_fit_runs_with_part_in_host_memory(capsys):
    from app.cli import main
    from kvcore.query import find_model, host_runnable

    found = find_model(lambda spec: make_query(spec, context="32k", weights="q4_k_m",
                                               gpu="4090", engine="llama.cpp"))
    runnable = host_runnable(found)
    host = {r["model"]: r for r in runnable}
    assert "gpt-oss-120b" in host and "llama-3.1-70b" in host
    assert all(r["model"] not in host for r in found["fits"])
    # each row is its plan's --fit note: the same placement and speed
    one = answer(make_query(load_model("gpt-oss-120b"), context="32k", weights="q4_k_m",
                            gpu="4090", engine="llama.cpp"))["engine_report"]["extra"]["fit"]
    assert host["gpt-oss-120b"]["host_fit"]["host_weights_bytes"] == one["host_weights_bytes"]
    rates = [r["host_fit"]["tokens_per_s_per_sequence"] for r in runnable]
    assert rates == sorted(rates, reverse=True)
    assert main(["--find-model", "--gpu", "4090", "--ctx", "32k", "--weights", "q4_k_m",
                 "--engine", "llama.cpp"]) == 0
    out = capsys.readouterr().out
    assert f"{len(host)} of those that do not fit run with llama-server's --fit" in out


def test_a_set_ngl_turns_fit_off():
    # -ngl all on a model that does not fit: llama.cpp's --fit aborts its layer search, so no
    # --fit placement is offered, and the command keeps the flag
    r = engine_plan("llama.cpp", req("llama-3.1-70b", n_gpu_layers=999))
    assert not r.fits and "fit" not in r.extra and "placement" not in r.extra
    assert "-ngl 999" in r.command
    assert not any("--fit" in n for n in r.notes)
    # --n-cpu-moe 0 overrides nothing: --fit still places the layers
    r = engine_plan("llama.cpp", req("qwen3-30b-a3b", ctx=32768, weights="q8_0", n_cpu_moe=0))
    assert "fit" in r.extra and "-ngl" not in r.command and "--n-cpu-moe" not in r.command


def test_llama_cpp_s_decode_reads_the_whole_context_where_it_drops_the_window():
    # Mistral-7B-v0.1 (window 4,096) converts to llama.cpp's llama architecture, which keeps
    # and attends over every token: a step at 32k reads 28,672 more tokens a layer
    def step(engine):
        return answer(make_query(load_model("mistral-7b-v0.1"), context="32k",
                                 weights="q4_k_m", gpu="4090", engine=engine))

    raw, cpp = step("raw"), step("llama.cpp")
    per_token_layer = 8 * 128 * 2 * 2  # 8 KV heads of 128, K and V in f16
    assert (cpp["decode"]["bytes_per_step"] - raw["decode"]["bytes_per_step"]
            == (32768 - 4096) * 32 * per_token_layer)
    assert cpp["prefill"]["attention_flops"] > raw["prefill"]["attention_flops"]
    # a model that keeps its window under llama.cpp reads the same either way
    g_raw, g_cpp = (answer(make_query(load_model("gemma-3-27b-it"), context="32k",
                                      weights="q4_k_m", gpu="h100", engine=e))
                    for e in ("raw", "llama.cpp"))
    assert g_raw["decode"]["bytes_per_step"] == g_cpp["decode"]["bytes_per_step"]


def test_from_32_sequences_host_weights_cross_the_link():
    def step(seqs, link=None):
        q = make_query(load_model("qwen3-30b-a3b"), context="8k", sequences=seqs,
                       weights="q4_k_m", gpu="4090", engine="llama.cpp",
                       settings=EngineSettings(n_cpu_moe=CPU_MOE, host_link_bytes_per_s=link))
        return answer(q)["decode"]

    few, many = step(31), step(32, link=16e9)
    assert not few["op_offload"] and few["host_link_bytes_per_s"] is None
    assert few["host_seconds_per_step"] == pytest.approx(few["host_bytes_per_step"] / 89.6e9)
    # every block is on the card, so the host part is its experts alone, copied at 16 GB/s
    assert many["op_offload"] and many["host_cache_bytes_per_step"] == 0
    assert many["host_seconds_per_step"] == pytest.approx(
        many["host_weight_bytes_per_step"] / 16e9)
    # whole blocks in host memory: from 32 sequences the card runs their attention too, their
    # caches copied from pageable memory (7 GB/s) instead of read at host bandwidth
    q = make_query(load_model("llama-3.1-8b"), context="8k", sequences=32, weights="q4_k_m",
                   gpu="4090", engine="llama.cpp", settings=EngineSettings(n_gpu_layers=20))
    d = answer(q)["decode"]
    assert d["op_offload"] and d["host_cache_copy_bytes_per_s"] == 7e9
    assert d["host_cache_bytes_per_step"] > 0
    assert d["host_seconds_per_step"] == pytest.approx(
        d["host_weight_bytes_per_step"] / d["host_link_bytes_per_s"]
        + d["host_cache_bytes_per_step"] / 7e9)


def test_the_prefill_with_whole_blocks_in_host_memory_copies_their_caches_too():
    q = make_query(load_model("llama-3.1-70b"), context="8k", weights="q4_k_m", gpu="4090",
                   engine="llama.cpp", settings=EngineSettings(n_gpu_layers=40))
    out = answer(q)
    p = out["prefill"]
    # blocks 0–40 in host memory; a batch of 512 tokens runs every op on the card, copying
    # their weights and, from pageable memory, their K and V over the cells in use (256-padded):
    # 512, 1,024, … 8,192 cells over 16 batches, and the batch's new rows back
    per_cell = 8 * 128 * 2 * 2
    cells = sum(min(8192, -(-(i + 1) * 512 // 256) * 256) for i in range(16)) + 8192
    assert p["host_cache_copy_bytes"] == 41 * per_cell * cells
    assert p["host_cache_copy_bytes_per_s"] == 7e9
    assert p["host_cache_copy_seconds"] == pytest.approx(p["host_cache_copy_bytes"] / 7e9)
    # every host-held weight once a batch (the input embedding stays in host memory)
    w = weights_for(q.spec, "q4_k_m")
    blocks, _ = blocks_for(q.spec, w)
    assert p["host_link_bytes"] == 16 * sum(b.total for b in blocks[:41])
    # the card computes every layer at its peak
    card = find_gpu("4090")
    compute = p["seconds"] - p["host_link_seconds"] - p["host_cache_copy_seconds"]
    assert compute == pytest.approx(p["flops"] / card.matmul_flops_per_s, rel=0.05)
    assert p["host_link_seconds"] == pytest.approx(
        p["host_link_bytes"] / (card.host_link_bytes_per_s * 0.874))
    # a block whose caches' views were not traced (DeepSeek's sparse attention): no estimate
    dsa = make_query(load_model("deepseek-v3.2"), context="8k", weights="q4_k_m", gpu="h200",
                     engine="llama.cpp", settings=EngineSettings(n_gpu_layers=30))
    assert "prefill" not in answer(dsa)


def test_the_host_link_is_the_card_s_own_or_assumed():
    def prefill(gpu, link=None):
        q = make_query(load_model("qwen3-30b-a3b"), context="8k", weights="q4_k_m", gpu=gpu,
                       engine="llama.cpp",
                       settings=EngineSettings(n_cpu_moe=CPU_MOE, host_link_bytes_per_s=link))
        return answer(q)["prefill"]

    x8 = prefill("rtx 4060")
    assert x8["host_link_from"] == "PCIe 4.0 x8"
    # pinned copies at 87.4% of the link
    assert x8["host_link_seconds"] == pytest.approx(
        x8["host_link_bytes"] / (16e9 * 8 / 8 * 128 / 130 * 0.874), rel=1e-9)
    # a card whose link the catalog does not give (the A30): PCIe 4.0 x16, said to be assumed
    a30 = prefill("a30")
    assert a30["host_link_from"] == "assumed"
    assert a30["host_link_bytes_per_s"] == DEFAULT_HOST_LINK * 0.874
    # a link given is the rate the copies run at
    given = prefill("rtx 4060", 25e9)
    assert given["host_link_from"] == "given" and given["host_link_bytes_per_s"] == 25e9


def test_weights_in_host_memory_are_pinned():
    # op offload copies host-held weights at the link's rate from pinned memory only: the
    # command keeps them out of mmap'd pages, and says why
    placed = engine_plan("llama.cpp", req("qwen3-30b-a3b", ctx=32768, weights="q8_0",
                                          n_cpu_moe=20))
    fitted = engine_plan("llama.cpp", req("llama-3.1-70b"))
    whole = engine_plan("llama.cpp", req("llama-3.1-8b"))
    assert placed.command.endswith("--n-cpu-moe 20 --no-mmap")
    assert fitted.command.endswith("--no-mmap") and "--no-mmap" not in whole.command
    assert any(n.startswith("--no-mmap keeps the host-held weights in pinned memory")
               for n in placed.notes)


# --- -ot PATTERN=CPU: the routed experts of the blocks a pattern matches ---------------------

def _ot_plan(**settings):
    from app.common import make_query
    from kvcore.engines import EngineSettings
    from kvcore.query import answer

    return answer(make_query(kvcore.load_model("qwen3-30b-a3b"), engine="llama.cpp",
                             weights="q4_k_m", gpu="4090", context="32k",
                             settings=EngineSettings(**settings)))


@pytest.mark.parametrize(("pattern", "n_cpu_moe"), [
    (r"blk\.([0-9]|1[01])\.ffn_.*_exps\.=CPU", 12),
    (r"blk\.\d\.ffn_(up|down|gate)_exps=CPU", 10),
    ("exps=CPU", 1 << 16),
])
def test_an_override_of_the_first_blocks_experts_is_n_cpu_moe(pattern, n_cpu_moe):
    """-ot over blocks 0–N−1's routed experts places exactly what --n-cpu-moe N places (and
    exps=CPU what --cpu-moe does): the same bytes on the card and in host memory, the same
    max context and decode rate."""
    ot, moe = _ot_plan(override_tensor=(pattern,)), _ot_plan(n_cpu_moe=n_cpu_moe)
    a, b = ot["engine_report"]["extra"]["placement"], moe["engine_report"]["extra"]["placement"]
    for key in ("card_weights_bytes", "host_weights_bytes", "blocks_on_card", "host_holds"):
        assert a[key] == b[key], key
    assert ot["max_context"] == moe["max_context"]
    assert ot["decode"]["tokens_per_s_per_sequence"] == moe["decode"]["tokens_per_s_per_sequence"]
    assert f"-ot {shlex.quote(pattern)}" in ot["engine_report"]["command"]


def test_an_override_of_blocks_anywhere_moves_those_blocks_experts():
    middle = _ot_plan(override_tensor=(r"blk\.(1[0-9]|2[0-9])\.ffn_.*_exps\.=CPU",))
    placed = middle["engine_report"]["extra"]["placement"]
    assert placed["host_holds"] == "the routed experts of blocks 10–29"

    def host(n):
        return _ot_plan(n_cpu_moe=n)["engine_report"]["extra"]["placement"]["host_weights_bytes"]

    # two patterns, and --n-cpu-moe beside them, add up
    both = _ot_plan(override_tensor=(r"blk\.1[0-9]\.ffn_.*_exps=CPU",
                                     r"blk\.2[0-9]\.ffn_.*_exps=CPU"), n_cpu_moe=2)
    held = both["engine_report"]["extra"]["placement"]
    assert held["host_holds"] == "the routed experts of blocks 0–1, 10–29"
    # blocks 10–29's experts two ways: those of 0–29 less those of 0–9, and the two
    # patterns' plan less blocks 0–1's (Q4_K_M gives some blocks' down projections a type
    # up, so blocks are not alike); beside them host memory holds the input embedding only
    tail = host(30) - host(10)
    assert held["host_weights_bytes"] - host(2) == tail
    # the middle blocks' plan holds them and the input embedding, which is less than the
    # embedding and blocks 0–1's experts
    embedding = placed["host_weights_bytes"] - tail
    assert 0 < embedding < host(2)


@pytest.mark.parametrize(("pattern", "needle"), [
    (r"blk\.1\.ffn_up_exps=CPU", "moves block 1's up experts and not its others"),
    (".ffn_.*=CPU", "moves blk.0.ffn_norm.weight (and"),
    ("token_embd=CPU", "moves token_embd.weight"),
    ("exps=CUDA1", "not to another device (CUDA1)"),
    ("(=CPU", "is not a regular expression"),
    ("nothing=CPU", "matches no routed-expert tensor of this model's 48 blocks"),
    ("exps", "must be PATTERN=BUFFER"),
    ("(a+)+x=CPU", "no repeated group that repeats inside"),
    (".*" * 5 + "x=CPU", "4 unbounded repeats"),
])
def test_overrides_kvplan_does_not_plan_are_refused(pattern, needle):
    with pytest.raises(kvcore.InputError) as exc:
        _ot_plan(override_tensor=(pattern,))
    assert needle in str(exc.value)
    assert exc.value.field == "override_tensor"
    assert f"'{pattern}'" in str(exc.value) or "override_tensor keeps" in str(exc.value)


@pytest.mark.parametrize(("gpu", "rate", "said"), [
    ("4090", 89.6e9, "assumed: dual-channel DDR5-5600"),
    ("h200", 307.2e9, "assumed for a data-center card: a server socket's 8-channel DDR5-4800"),
    ("gh200", 512e9, "its Grace CPU's LPDDR5X"),
])
def test_host_memory_is_read_at_the_cards_hosts_bandwidth(gpu, rate, said, capsys):
    """Without --host-bandwidth, host-held layers are read at the card's host's rate: a Grace
    CPU's LPDDR5X where the catalog gives it, a server socket's DDR5 beside a data-center
    card, dual-channel DDR5 beside the rest; the line says which."""
    from app.cli import main

    args = ["deepseek-v3", "--engine", "llama.cpp", "--weights", "q4_k_m", "--gpu", gpu,
            "--ctx", "32k", "--cpu-moe"]
    main([*args, "--json"])
    d = json.loads(capsys.readouterr().out)["decode"]
    assert d["host_bandwidth_bytes_per_s"] == rate
    main(args)
    assert f"at {rate / 1e9:.1f} GB/s ({said}; give --host-bandwidth)" in capsys.readouterr().out
    main([*args, "--host-bandwidth", "200", "--json"])
    assert json.loads(capsys.readouterr().out)["decode"]["host_bandwidth_bytes_per_s"] == 200e9


def test_a_unified_memory_machine_is_not_split_over_host_memory(capsys):
    # DGX Spark: --fit's layers "in host memory" would sit in the same memory, so a model
    # past it does not fit, and no ngl / n_cpu_moe is offered to make it
    from app.cli import main
    assert main(["qwen3-235b-a22b", "--gpu", "dgx spark", "--engine", "llama.cpp", "--weights",
                 "q4_k_m", "--ctx", "32k", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert not data["fits"] and "placement" not in data["engine_report"]["extra"]
    assert not any("in host memory (" in n or "--fit (on by default) keeps" in n
                   for n in data["engine_report"]["notes"])
    assert "n_cpu_moe" not in json.dumps(data.get("to_fit") or {})
    # Strix Halo: the plan names the share the GPU was given and how it is raised
    assert main(["qwen3-8b", "--gpu", "strix halo", "--engine", "llama.cpp"]) == 0
    out = capsys.readouterr().out
    assert ("note: AMD Ryzen AI Max+ 395: planned with 50% of its memory for the GPU (64 GiB): "
            "the GPU may map half of the system memory") in out and "ttm.pages_limit" in out
