"""A plan that does not fit says what one change makes it fit: the highest-precision KV
format that does, else the largest weight format, else the fewest more cards of its kind."""

import json
import re
from dataclasses import replace

from fastapi.testclient import TestClient

import kvcore
from app.cli import main
from app.common import make_query
from app.web import create_app
from kvcore.query import answer, find_format, to_fit


def _query(model, **kw):
    return make_query(kvcore.load_model(model), **kw)


def test_the_kv_format_to_fit_is_the_most_precise_that_fits():
    q = _query("qwen3-30b-a3b", engine="llama.cpp", weights="q4_k_m", gpu="4090",
               context="96k")
    data = answer(q)
    assert data["fits"] is False and data["binding"] == "kv"
    fix = to_fit(q, data)
    rows = find_format(q)
    chosen = [r["format"] for r in rows].index(fix["kv"])
    assert all(not r["fits"] for r in rows[:chosen])
    fmt = kvcore.get_format(fix["kv"])
    again = answer(replace(q, cache=replace(q.cache, kv_k=fmt, kv_v=fmt)))
    assert again["fits"] is True
    assert fix["max_context"] == again["max_context"]


def test_where_no_cache_fits_beside_the_weights_the_weights_to_fit():
    q = _query("llama-3.1-70b", engine="llama.cpp", gpu="4090", context="8k")
    data = answer(q)
    assert data["binding"] == "weights"
    fix = to_fit(q, data)
    assert "kv" not in fix
    again = answer(replace(q, weights=fix["weights"]))
    assert again["fits"] is True
    # the largest that fits: the next larger llama-quantize type does not
    bigger = answer(replace(q, weights="iq2_m"))
    assert bigger["weights_bytes"] > again["weights_bytes"] and bigger["fits"] is False


def test_a_plan_that_fits_or_has_no_card_gets_no_change(capsys):
    q = _query("qwen3-8b", gpu="4090", context="8k")
    assert to_fit(q, answer(q)) is None
    q = _query("qwen3-8b", context="1M")
    assert to_fit(q, answer(q)) is None
    main(["qwen3-8b", "--gpu", "4090", "--json"])
    assert "to_fit" not in json.loads(capsys.readouterr().out)


def test_cli_api_and_page_say_it(capsys):
    args = ["qwen3-30b-a3b", "--engine", "llama.cpp", "--weights", "q4_k_m", "--gpu", "4090",
            "--ctx", "96k"]
    main(args)
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("to fit: "))
    assert line.startswith("to fit: --kv q8_0 fits (max context 114,176")
    c = TestClient(create_app())
    body = {"model": "qwen3-30b-a3b", "engine": "llama.cpp", "weights": "q4_k_m",
            "gpu": "4090", "context": "96k"}
    assert c.post("/api/v1/plan", json=body).json()["to_fit"]["kv"] == "q8_0"
    page = c.get("/", params=body).text
    assert re.search(r'id="to-fit"><a href="[^"]+">To fit: --kv q8_0 fits \(max context 114,176',
                     page)


def test_where_no_format_fits_the_fewest_more_cards_of_its_kind(capsys):
    from kvcore.query import find_weights

    for engine, kv, cards in (("raw", "f16", 8), ("vllm", "fp8", 8), ("llama.cpp", "f16", 8)):
        q = _query("deepseek-v3", engine=engine, gpu="h200", context="128k", sequences="4",
                   kv_k=kv, kv_v=kv)
        data = answer(q)
        assert data["fits"] is False
        assert not any(r["fits"] for r in find_format(q))
        assert not any(r["fits"] for r in find_weights(q))
        fix = to_fit(q, data)
        if engine == "llama.cpp":
            # llama.cpp's experts in host memory come first, the cards as its "or"
            assert "n_cpu_moe" in fix
            fix = fix["or"]
        assert (fix["gpus"], fix["gpu"]) == (cards, "h200") and "kv" not in fix, engine
        # that many fit, with the figures named; one step fewer does not
        again = answer(make_query(q.spec, engine=engine, gpu=f"{cards}xh200", context="128k",
                                  sequences="4", kv_k=kv, kv_v=kv))
        assert again["fits"] is True and again["max_context"] == fix["max_context"]
        assert (again["decode"]["tokens_per_s_per_sequence"]
                == fix["tokens_per_s_per_sequence"])
        fewer = answer(make_query(q.spec, engine=engine, gpu=f"{cards // 2}xh200",
                                  context="128k", sequences="4", kv_k=kv, kv_v=kv))
        assert fewer["fits"] is False
    main(["deepseek-v3", "--gpu", "h200", "--ctx", "128k", "--seqs", "4"])
    out = capsys.readouterr().out
    assert "\nto fit: --gpu 8xh200 fits (max context 230,588, ≈ 98.5 tokens/s per sequence)\n" in out
    # none where even the most of a card one host holds does not fit, or for mixed cards
    q = _query("deepseek-v3", gpu="4090", context="8k")
    assert to_fit(q, answer(q)) is None
    q = _query("deepseek-v3", gpus="4090,3090", context="8k")
    assert to_fit(q, answer(q)) is None


def test_the_page_links_the_change_to_the_plan_it_makes():
    import html
    import re

    c = TestClient(create_app())
    for params, change in (
            ({"model": "qwen3-30b-a3b", "engine": "llama.cpp", "weights": "q4_k_m",
              "gpu": "4090", "context": "96k"}, "kv_k=q8_0&kv_v=q8_0"),
            ({"model": "llama-3.1-70b", "engine": "llama.cpp", "gpu": "4090",
              "context": "8k"}, "weights=iq2_xs"),
            ({"model": "deepseek-v3", "gpu": "h200", "context": "128k", "sequences": "4"},
             "gpu=h200&gpus=8")):
        page = c.get("/", params=params).text
        link = html.unescape(re.search(r'id="to-fit"><a href="([^"]+)">To fit: ', page)[1])
        assert link.endswith(change), link
        after = c.get(link).text
        assert 'id="verdict">Fits: ' in after and 'id="to-fit"' not in after


def test_more_cards_for_a_plan_laid_out_by_hand_name_their_layout(capsys):
    # --gpu h100 --pp 2 was told "--gpu 4xh100-sxm fits", which its own --pp 2 contradicts
    # (4 cards against tp × pp = 2): the line names the layout of the cards it counted
    import html
    import re

    ask = ["deepseek-v3", "--gpu", "h100", "--pp", "2", "--engine", "vllm", "--ctx", "32k",
           "--weights", "int3"]
    main(ask)
    out = capsys.readouterr().out
    line = next(t for t in out.splitlines() if t.startswith("to fit: "))
    assert line.startswith("to fit: --gpu 4xh100-sxm --tp 4 --pp 1 fits (max context ")
    main([*ask, "--gpu", "4xh100-sxm", "--tp", "4", "--pp", "1", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is True and f"max context {data['max_context']:,}" in line
    # the page's link to that change carries the layout, and plans it
    c = TestClient(create_app())
    page = c.get("/", params={"model": "deepseek-v3", "gpu": "h100", "pp": "2",
                              "engine": "vllm", "context": "32k", "weights": "int3"}).text
    link = html.unescape(re.search(r'id="to-fit"><a href="([^"]+)">To fit: ', page)[1])
    assert "tp=4" in link and "pp=1" in link and "gpus=4" in link
    after = c.get(link).text
    assert 'id="verdict">Fits: ' in after
    # a plan left to the engine's layout is told the card count alone, as before
    q = _query("deepseek-v3", gpu="h100", engine="vllm", context="32k", weights="int3")
    assert "tp" not in to_fit(q, answer(q))


def test_weights_under_four_bits_come_with_the_cards_that_fit_instead(capsys):
    # 70B on a 4090 was told only "--weights iq2_xs": a user who would rather keep the model
    # whole is told the fewest 4090s that hold it as well
    import html
    import re

    from kvcore.query import BITS_WORTH_A_CARD, find_weights

    q = _query("llama-3.1-70b", engine="llama.cpp", gpu="4090", context="8k")
    fix = to_fit(q, answer(q))
    row = next(r for r in find_weights(q) if r["weights"] == fix["weights"])
    assert row["bits_per_weight"] < BITS_WORTH_A_CARD
    other = fix["or"]
    cards = answer(make_query(q.spec, engine="llama.cpp", gpu=f"{other['gpus']}x4090",
                              context="8k"))
    assert cards["fits"] is True and cards["max_context"] == other["max_context"]
    half = answer(make_query(q.spec, engine="llama.cpp", gpu=f"{other['gpus'] // 2}x4090",
                             context="8k"))
    assert half["fits"] is False
    main(["llama-3.1-70b", "--engine", "llama.cpp", "--gpu", "4090", "--ctx", "8k"])
    line = next(t for t in capsys.readouterr().out.splitlines() if t.startswith("to fit: "))
    assert line.startswith(f"to fit: --weights {fix['weights']} fits (max context ")
    assert f"; or --gpu {other['gpus']}xrtx-4090 fits (max context {other['max_context']:,}" \
        in line
    # the page links each change to its plan
    page = TestClient(create_app()).get("/", params={"model": "llama-3.1-70b",
                                                     "engine": "llama.cpp", "gpu": "4090",
                                                     "context": "8k"}).text
    links = [html.unescape(h) for h in re.findall(
        r'<a href="([^"]+)">(?:To fit: )?--(?:weights|gpu) ', page)]
    assert len(links) == 2 and links[0].endswith(f"weights={fix['weights']}")
    assert links[1].endswith(f"gpu=rtx-4090&gpus={other['gpus']}")
    # the README's vLLM example: only a 3-bit TurboQuant cache fits, so the weights of the most
    # bits that fit with the fp8 cache come beside it (8 bits: no cards as their own "or")
    q = _query("llama-3.1-70b", engine="vllm", gpu="2xh100", context="32k", sequences="8",
               kv="fp8")
    fix = to_fit(q, answer(q))
    assert fix["kv"] == "tq_3bit" and fix["or"]["weights"] == "int8"
    assert "or" not in fix["or"]
    with_weights = answer(make_query(q.spec, engine="vllm", gpu="2xh100", context="32k",
                                     sequences="8", kv="fp8", weights="int8"))
    assert with_weights["fits"] and with_weights["max_context"] == fix["or"]["max_context"]
    # a cache of 4 bits or more comes alone
    q = _query("llama-3.1-70b", engine="vllm", gpu="2xh100", context="24k", sequences="8",
               kv="fp8")
    fix = to_fit(q, answer(q))
    assert kvcore.get_format(fix["kv"]).bits_per_value >= 4 and "or" not in fix


def test_weights_under_four_bits_come_after_weights_of_more_beside_an_8_bit_cache(capsys):
    # Qwen3-32B at 32k on a 4090 was told "--weights q3_k_m" beside its f16 cache, where
    # Q4_K_M beside a q8_0 cache fits too, and costs less quality
    import html

    from kvcore.query import BITS_WORTH_A_CARD, find_weights

    q = _query("qwen3-32b", engine="llama.cpp", gpu="4090", context="32k")
    fix = to_fit(q, answer(q))
    assert fix["kv"] == "q8_0"
    q8 = kvcore.get_format("q8_0")
    paired = replace(q, weights=fix["weights"], cache=replace(q.cache, kv_k=q8, kv_v=q8))
    again = answer(paired)
    assert again["fits"] is True and again["max_context"] == fix["max_context"]
    rows = find_weights(replace(q, cache=paired.cache))
    row = next(r for r in rows if r["weights"] == fix["weights"])
    assert row["bits_per_weight"] >= BITS_WORTH_A_CARD
    # the largest such: every larger weight format does not fit beside the 8-bit cache
    assert not any(r["fits"] for r in rows[:rows.index(row)])
    # those weights do not fit beside the plan's own f16 cache
    assert answer(replace(q, weights=fix["weights"]))["fits"] is False
    # the weights under 4 bits that fit beside it come next, then the cards
    low = fix["or"]
    assert "kv" not in low and next(r for r in find_weights(q) if r["fits"])["weights"] == \
        low["weights"]
    assert "gpus" in low["or"]
    assert fix["quality"].startswith(f"weights {fix['weights']}: +") and "KV q8_0: " in \
        fix["quality"]
    main(["qwen3-32b", "--engine", "llama.cpp", "--gpu", "4090", "--ctx", "32k"])
    line = next(t for t in capsys.readouterr().out.splitlines() if t.startswith("to fit: "))
    assert line.startswith(f"to fit: --weights {fix['weights']} --kv q8_0 fits (max context "
                           f"{fix['max_context']:,}, ")
    assert f"; or --weights {low['weights']} fits (max context {low['max_context']:,}" in line
    page = TestClient(create_app()).get("/", params={"model": "qwen3-32b", "engine": "llama.cpp",
                                                     "gpu": "4090", "context": "32k"}).text
    link = html.unescape(re.search(r'id="to-fit"><a href="([^"]+)">To fit: --weights ',
                                   page).group(1))
    assert f"kv_k=q8_0&kv_v=q8_0&weights={fix['weights']}" in link
    # under vLLM the 8-bit cache is fp8
    q = _query("llama-3.1-70b", engine="vllm", gpu="2x4090", context="32k")
    fix = to_fit(q, answer(q))
    assert fix["kv"] == "fp8_e4m3" and fix["weights"] == "int4"
    # a cache of 8 bits already: weights alone, as before
    q = _query("qwen3-32b", engine="llama.cpp", gpu="4090", context="32k", kv="q8_0")
    assert "kv" not in to_fit(q, answer(q))


def test_llama_cpp_is_told_the_fewest_expert_blocks_in_host_memory_that_fit():
    # gpt-oss-120b (MXFP4, 60.7 GiB) on a 24 GiB card: no KV format and no weight format
    # fits; --n-cpu-moe N keeps the routed experts of blocks 0..N-1 in host memory
    q = _query("gpt-oss-120b", engine="llama.cpp", gpu="4090", context="64k")
    data = answer(q)
    assert data["fits"] is False and data["binding"] == "weights"
    fix = to_fit(q, data)
    n = fix["n_cpu_moe"]
    at = answer(_query("gpt-oss-120b", engine="llama.cpp", gpu="4090", context="64k",
                       settings=replace(q.settings, n_cpu_moe=n)))
    assert at["fits"] is True and at["max_context"] == fix["max_context"]
    assert at["decode"]["tokens_per_s_per_sequence"] == fix["tokens_per_s_per_sequence"]
    fewer = answer(_query("gpt-oss-120b", engine="llama.cpp", gpu="4090", context="64k",
                          settings=replace(q.settings, n_cpu_moe=n - 1)))
    assert fewer["fits"] is False
    # more cards are its other change
    assert fix["or"]["gpu"] == "rtx-4090" and fix["or"]["gpus"] > 1


def test_a_dense_model_is_told_the_most_layers_on_the_card_that_fit(capsys):
    q = _query("llama-3.1-70b", engine="llama.cpp", gpu="4090", context="32k",
               weights="q4_k_m")
    data = answer(q)
    fix = to_fit(q, data)
    k = fix["ngl"]
    assert 1 <= k <= 81

    def at(ngl):
        return answer(_query("llama-3.1-70b", engine="llama.cpp", gpu="4090", context="32k",
                             weights="q4_k_m", settings=replace(q.settings, n_gpu_layers=ngl)))
    assert at(k)["fits"] is True and at(k)["max_context"] == fix["max_context"]
    assert at(k + 1)["fits"] is False
    main(["llama-3.1-70b", "--engine", "llama.cpp", "--gpu", "4090", "--ctx", "32k",
          "--weights", "q4_k_m"])
    out = capsys.readouterr().out
    assert f"\nto fit: --ngl {k} fits (max context {fix['max_context']:,}" in out
    # the page links the change
    page = TestClient(create_app()).get("/", params={
        "model": "llama-3.1-70b", "engine": "llama.cpp", "gpu": "4090", "context": "32k",
        "weights": "q4_k_m", "kv_k": "f16", "kv_v": "f16"})
    assert f"ngl={k}" in page.text
    # a placement given is not second-guessed
    q = _query("llama-3.1-70b", engine="llama.cpp", gpu="4090", context="32k",
               weights="q4_k_m", settings=replace(q.settings, n_gpu_layers=k + 5))
    fix = to_fit(q, answer(q))
    assert fix is None or "ngl" not in fix


def test_a_unified_memory_machine_first_raises_its_gpu_share():
    # Qwen3-235B q3_k_m at 32k on a Strix Halo: past the GPU's default half (64 GiB) of its
    # 128 GiB; the smallest whole GiB that fits, with the kernel setting that gives it
    q = _query("qwen3-235b-a22b", engine="llama.cpp", weights="q3_k_m", gpu="strix halo",
               context="32k")
    data = answer(q)
    assert data["fits"] is False
    fix = to_fit(q, data)
    gib = int(fix["gpu_limit"].removesuffix("GiB"))
    assert gib <= 120 and fix["how"] == f"ttm.pages_limit={gib * 262144}"
    fits = answer(_query("qwen3-235b-a22b", engine="llama.cpp", weights="q3_k_m",
                         gpu="strix halo", context="32k", gpu_limit=fix["gpu_limit"]))
    short = answer(_query("qwen3-235b-a22b", engine="llama.cpp", weights="q3_k_m",
                          gpu="strix halo", context="32k", gpu_limit=f"{gib - 1}GiB"))
    assert fits["fits"] and fits["max_context"] == fix["max_context"] and not short["fits"]
    # the change it would have made otherwise stays as its "or"
    assert fix["or"]["weights"] and "or" not in fix["or"]
    # a Mac's setting is macOS's, in MiB
    q = _query("qwen3-235b-a22b", engine="llama.cpp", weights="q3_k_m", gpu="m4 max",
               context="32k")
    fix = to_fit(q, answer(q))
    assert fix["how"] == f"sudo sysctl iogpu.wired_limit_mb={int(fix['gpu_limit'][:-3]) * 1024}"
    # given a share, or on DGX Spark (whose plan has the whole memory), none is offered
    for kw in ({"gpu": "m4 max", "gpu_limit": "100GiB"}, {"gpu": "dgx spark"}):
        q = _query("qwen3-235b-a22b", engine="llama.cpp", weights="q4_k_m", context="32k", **kw)
        data = answer(q)
        assert data["fits"] is False and "gpu_limit" not in (to_fit(q, data) or {})


def test_gpu_limit_is_a_shared_memory_share_as_given(capsys):
    assert main(["qwen3-8b", "--gpu", "strix halo", "--gpu-limit", "120GiB", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["gpu"]["usable_bytes"] == 120 << 30 and data["budget_bytes"] <= 120 << 30
    assert main(["qwen3-8b", "--gpu", "strix halo", "--gpu-limit", "120GiB"]) == 0
    out = capsys.readouterr().out
    assert "note: AMD Ryzen AI Max+ 395: planned with 120 GiB of its 128 GiB for the GPU, as " \
           "given (gpu_limit)" in out
    for args, said in ((["--gpu", "4090"], "NVIDIA GeForce RTX 4090 has memory of its own"),
                       (["--gpu", "m4 max 36gb"], "must be at most the 36 GiB of Apple M4 Max"),
                       ([], "give the GPU too")):
        assert main(["qwen3-8b", "--gpu-limit", "40GiB", *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err
    # DGX Spark's plan takes all the memory CUDA reports, which the system shares
    assert main(["qwen3-8b", "--gpu", "dgx spark"]) == 0
    out = capsys.readouterr().out
    assert ("note: NVIDIA DGX Spark: planned with all 121.69 GiB CUDA reports, which the system "
            "and every other process share") in out and "--gpu-limit plans the memory" in out
    assert main(["qwen3-8b", "--gpu", "dgx spark", "--gpu-limit", "100GiB"]) == 0
    out = capsys.readouterr().out
    assert "planned with 100 GiB of its 121.69 GiB for the GPU, as given" in out
    assert "which the system and every other process share" not in out
    # a Mac's default note says where its own limit is printed, which plans as given (llama.cpp
    # prints it in MB of 10^6 bytes: a 32 GB Mac's two thirds)
    assert main(["qwen3-8b", "--gpu", "m4 max", "--engine", "llama.cpp"]) == 0
    assert "(recommendedMaxWorkingSetSize = N MB), which --gpu-limit NMB plans with" in \
        capsys.readouterr().out
    assert main(["qwen3-8b", "--gpu", "m5", "--gpu-limit", "22906.50MB", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["gpu"]["usable_bytes"] == 22_906_500_000
    c = TestClient(create_app())
    r = c.post("/api/v1/plan", json={"model": "qwen3-8b", "gpu": "m4 max", "gpu_limit": "120GiB"})
    assert r.status_code == 200 and r.json()["gpu"]["usable_bytes"] == 120 << 30
    r = c.post("/api/v1/plan", json={"model": "qwen3-8b", "gpu": "h100", "gpu_limit": "60GiB"})
    assert r.status_code == 422 and r.json()["field"] == "gpu_limit"
    # the page: the field in its settings, and the "to fit" line's link sets it
    page = c.get("/", params={"model": "qwen3-235b-a22b", "gpu": "strix halo", "engine": "llama.cpp",
                              "weights": "q3_k_m", "context": "32k", "kv_k": "f16", "kv_v": "f16"})
    assert page.status_code == 200 and 'name="gpu_limit"' in page.text
    link = re.search(r'href="(/\?[^"]*gpu_limit=(\d+)GiB[^"]*)"', page.text)
    assert link is not None
    again = c.get(link.group(1).replace("&amp;", "&"))
    assert again.status_code == 200 and "as given (gpu_limit)" in again.text


def test_gpu_limit_bounds_each_engines_pool_by_what_is_free():
    # DGX Spark with 102 GiB seen free of the 121.69 CUDA reports: each engine's pool comes from
    # the free memory (vLLM's extensible cache after warmup, SGLang's and TensorRT-LLM's
    # fraction of it, llama.cpp's fit), so it shrinks by the 19.69 GiB or that fraction of them
    gap = (124610 << 20) - (102 << 30)
    pools = {}
    for engine in ("vllm", "sglang", "trtllm", "llama.cpp"):
        got = [answer(_query("qwen3-32b", engine=engine, gpu="dgx spark", context="32k",
                             **kw))["engine_report"] for kw in ({}, {"gpu_limit": "102GiB"})]
        pools[engine] = got[0]["kv_pool_bytes"] - got[1]["kv_pool_bytes"]
        assert got[1]["max_context"] < got[0]["max_context"], engine
    block = 64 * 64 * 8 * 128 * 2 * 2  # vLLM: 64 tokens × 64 layers × 8 heads × 128 × K, V × f16
    assert abs(pools["vllm"] - gap) < block
    assert 0.8 * gap < pools["sglang"] < gap and 0.8 * gap < pools["trtllm"] < gap
    assert gap - (1 << 30) < pools["llama.cpp"] <= gap


def test_vllm_without_the_extensible_cache_needs_its_share_free_at_start_up(capsys):
    # request_memory: the utilization's share of the total must be free; 101.3 GiB of a
    # 102 GiB limit are not 0.92 of 121.69
    args = ["qwen3-32b", "--gpu", "dgx spark", "--engine", "vllm", "--ctx", "32k",
            "--gpu-limit", "102GiB", "--no-extensible-kv-cache"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vLLM stops at start-up: the 101.3 GiB free on NVIDIA DGX Spark" \
        " are less than --gpu-memory-utilization 0.92 of its 121.69 GiB" in err[0]
    assert main([*args, "--gpu-memory-utilization", "0.8"]) == 0
    assert "fits under vllm" in capsys.readouterr().out
    # a card of its own is never refused so: its free memory is its total less the context
    assert main(["qwen3-8b", "--gpu", "4090", "--engine", "vllm", "--ctx", "8k",
                 "--no-extensible-kv-cache"]) == 0
    capsys.readouterr()


def test_vllm_on_intel_keeps_the_extensible_cache_off(capsys):
    # config/vllm.py _resolve_extensible_kv_cache: CUDA and ROCm only; the XPU plan is the
    # 0.92 budget, without a flag in its command
    assert main(["qwen3-8b", "--gpu", "arc pro b60", "--engine", "vllm", "--ctx", "32k",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    report = data["engine_report"]
    gpu = kvcore.find_gpu("arc pro b60")
    assert report["budget_bytes"] == -(-gpu.total_bytes * 92 // 100)
    assert "extensible" not in report["command"]
    assert any(n.startswith("on Intel's XPU vLLM 0.34.0 keeps the extensible KV cache off")
               for n in report["notes"])
    # the same plan on an NVIDIA card of its memory keeps it
    assert main(["qwen3-8b", "--gpu", "24GiB", "--engine", "vllm", "--ctx", "32k",
                 "--json"]) == 0
    other = json.loads(capsys.readouterr().out)["engine_report"]
    assert other["budget_bytes"] > report["budget_bytes"]
