import json
import math
import re

import pytest
from fastapi.testclient import TestClient

from app.web import create_app
from kvcore import find_gpu, gpu_catalog, model_catalog
from kvcore.units import format_bytes


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app())


def test_healthz(client):
    r = client.get("/api/v1/healthz")
    assert r.status_code == 200 and r.json()["ok"] is True


def test_post_and_get_plan_agree_with_cli(client, capsys):
    import json

    from app.cli import main

    body = {"model": "qwen3.5-27b", "gpu": "4090", "context": "256k", "kv": "tbq4",
            "weights": "q4_k_m"}
    post = client.post("/api/v1/plan", json=body).json()
    get = client.get("/api/v1/plan", params=body).json()
    main(["qwen3.5-27b", "--gpu", "4090", "--ctx", "256k", "--kv", "tbq4", "--weights",
          "q4_k_m", "--json"])
    cli = json.loads(capsys.readouterr().out)
    assert post == get == cli
    assert post["kv_bytes"] == 4224 * 2**20


@pytest.mark.parametrize(("body", "field"), [
    ({"model": "nosuch"}, "model"),
    ({"model": "qwen3-8b", "gpu": "4091"}, "gpu"),
    ({"model": "qwen3-8b", "context": "12x"}, "context"),
    ({"model": "qwen3-8b", "kv": "q3"}, "kv_k"),
    ({"model": "qwen3-8b", "sequences": 0}, "sequences"),
    ({"model": "qwen3-8b", "bogus": 1}, "bogus"),
    ({"model": "qwen3-8b", "gpu": "h100", "tp": 3}, "tp"),
    ({"model": "/etc/passwd"}, "model"),
    ({}, "model"),
])
def test_error_shape(client, body, field):
    r = client.post("/api/v1/plan", json=body)
    assert 400 <= r.status_code < 500
    data = r.json()
    assert data["ok"] is False and data["status"] == r.status_code and data["error"]
    assert data["field"] == field


@pytest.mark.parametrize(("extra", "error"), [
    ({"max_model_len": 8192}, "max_model_len: no such field: an option of vLLM, whose field "
     "here is context"),
    ({"kv_cache_dtype": "fp8"}, "kv_cache_dtype: no such field: an option of vLLM and SGLang, "
     "whose field here is kv"),
    ({"tensor_parallel_size": 2}, "an option of vLLM, SGLang and TensorRT-LLM, whose field "
     "here is tp"),
    ({"n_gpu_layers": 20}, "an option of llama.cpp, whose field here is ngl"),
    ({"contxt": "8k"}, "contxt: no such field (did you mean context?); /openapi.json lists "
     "each request's fields"),
    ({"zzz": 1}, "zzz: no such field; /openapi.json"),
])
def test_a_field_no_request_takes_is_named_with_the_one_meant(client, extra, error):
    body = {"model": "qwen3-8b", "gpu": "rtx-4090", **extra}
    for r in (client.post("/api/v1/plan", json=body), client.get("/api/v1/plan", params=body)):
        assert r.status_code == 422
        assert r.json() == {"ok": False, "error": r.json()["error"], "status": 422,
                            "field": next(iter(extra))}
        assert r.json()["error"].startswith(f"{next(iter(extra))}: no such field")
        assert error in r.json()["error"]


def test_the_gpu_list_filters_by_vendor_and_memory(client):
    amd = client.get("/api/v1/gpus", params={"vendor": "amd", "min_memory": "24GiB"}).json()
    every = client.get("/api/v1/gpus").json()
    assert [g["id"] for g in amd] == [g["id"] for g in every if g["vendor"] == "amd"
                                      and g["memory_bytes"] >= 24 << 30]
    assert "rx-7900-xtx" in {g["id"] for g in amd} and amd[0]["source"]
    assert client.get("/api/v1/gpus", params={"vendor": "apple",
                                              "min_memory": "1TiB"}).json() == []
    for params, field in (({"vendor": "matrox"}, "vendor"), ({"min_memory": "24"}, "min_memory"),
                          ({"vendr": "amd"}, "vendr")):
        r = client.get("/api/v1/gpus", params=params)
        assert r.status_code == 422 and r.json()["field"] == field
    assert "(did you mean vendor?)" in r.json()["error"]
    r = client.get("/api/v1/gpus?vendor=amd&vendor=intel")
    assert r.status_code == 422 and "give it once" in r.json()["error"]


@pytest.mark.parametrize(("url", "message"), [
    # a list route's few fields: the nearest of its own, else all of them
    ("/api/v1/models?qq=gemma", "qq: no such field (did you mean q?)"),
    ("/api/v1/models?query=gemma", "query: no such field (it takes q)"),
    ("/api/v1/gpus?min_mem=24GB", "min_mem: no such field (did you mean min_memory?)"),
    ("/api/v1/gpus?x=1", "x: no such field (it takes vendor, min_memory, engine, segment)"),
    # the planner's many fields: the nearest of every request's, and where they are listed
    ("/api/v1/plan?contxt=8k", "contxt: no such field (did you mean context?); /openapi.json "
     "lists each request's fields"),
])
def test_an_unknown_query_field_names_the_nearest_the_route_takes(client, url, message):
    r = client.get(url)
    assert r.status_code == 422 and r.json()["error"] == message
    assert r.json()["field"] == url.split("?")[1].split("=")[0]


def test_each_listed_gpu_names_its_chip_and_the_engines_that_run_there(client):
    listed = {g["id"]: g for g in client.get("/api/v1/gpus").json()}
    assert listed["h100-sxm"]["engines"] == ["vllm", "llama.cpp", "ollama", "sglang", "trtllm"]
    assert listed["h100-sxm"]["compute_capability"] == "9.0"
    # Pascal: llama.cpp's builds only; RDNA 2: not vLLM's ROCm images, not SGLang's kernels
    assert listed["p40"]["engines"] == ["llama.cpp", "ollama"]
    assert listed["rx-6800-xt"]["engines"] == ["llama.cpp", "ollama"]
    assert listed["rx-6800-xt"]["llvm_target"] == "gfx1030"
    assert listed["mi300x"]["engines"] == ["vllm", "llama.cpp", "ollama", "sglang"]
    assert listed["t4"]["engines"] == ["vllm", "llama.cpp", "ollama"]
    assert "vllm" not in listed["gaudi-3"]["engines"]
    page = client.get("/gpus", params={"vendor": "nvidia"}).text
    row = page[page.index('href="/?gpu=p40"'):]
    row = row[:row.index("</tr>")]
    assert '<small class="engines">compute capability 6.1: llama.cpp, Ollama</small>' in row


def test_the_gpu_list_and_page_keep_the_cards_an_engine_runs_on(client):
    every = client.get("/api/v1/gpus").json()
    kept = client.get("/api/v1/gpus", params={"engine": "sglang", "vendor": "amd"}).json()
    assert [g["id"] for g in kept] == [g["id"] for g in every
                                       if g["vendor"] == "amd" and "sglang" in g["engines"]]
    assert [g["id"] for g in kept] == ["mi300x", "mi325x", "mi350x", "mi355x"]
    r = client.get("/api/v1/gpus", params={"engine": "tgi"})
    assert r.status_code == 422 and r.json()["field"] == "engine"
    page = client.get("/gpus", params={"engine": "trtllm"}).text
    shown = set(re.findall(r'<tr><td><a href="/\?gpu=([^"]+)"', page))
    assert shown == {g["id"] for g in every if "trtllm" in g["engines"]}
    assert '<option value="trtllm" selected>TensorRT-LLM</option>' in page
    assert f"{len(shown)} of {len(every)} cards" in page
    assert client.get("/gpus", params={"engine": "tgi"}).status_code == 422


def test_find_gpu_takes_a_vendor_and_only_find_gpu_does(client):
    body = {"model": "qwen3-32b", "context": "32k", "sequences": 4, "weights": "q4_k_m"}
    rows = client.post("/api/v1/find-gpu", json={**body, "vendor": "amd"}).json()
    assert rows and all(find_gpu(r["gpu"]).vendor == "amd" for r in rows)
    assert {"mi210", "rx-9070-xt"} <= {r["gpu"] for r in rows}
    r = client.post("/api/v1/find-gpu", json={**body, "vendor": "via"})
    assert r.status_code == 422 and r.json()["field"] == "vendor"
    r = client.post("/api/v1/find-gpu", json={**body, "vendor": "amd", "engine": "trtllm",
                                              "weights": "bf16"})
    assert r.status_code == 422 and r.json()["field"] == "vendor"
    assert r.json()["error"].startswith("no amd card in the catalog runs TensorRT-LLM: ")
    r = client.post("/api/v1/plan", json={**body, "gpu": "4090", "vendor": "amd"})
    assert r.status_code == 422 and r.json()["field"] == "vendor"
    # a field of another request is named with the requests that take it
    assert r.json()["error"] == ("vendor: no such field here; POST /api/v1/find-gpu and GET "
                                 "/api/v1/gpus take it")
    r = client.post("/api/v1/plan", json={**body, "gpu": "4090", "command": "vllm serve x"})
    assert r.json()["error"] == "command: no such field here; POST /api/v1/command takes it"


def test_find_gpu_and_the_gpu_list_keep_one_kind_of_card(client):
    body = {"model": "qwen3-8b", "context": "32k", "weights": "q4_k_m"}
    rows = client.post("/api/v1/find-gpu", json={**body, "segment": "laptop"}).json()
    assert rows and all(find_gpu(r["gpu"]).segment == "laptop" for r in rows)
    r = client.post("/api/v1/find-gpu", json={**body, "segment": "laptop", "vendor": "apple"})
    assert r.status_code == 422 and r.json() == {
        "ok": False, "error": "the catalog has no laptop card of apple", "status": 422,
        "field": "segment"}
    listed = client.get("/api/v1/gpus", params={"segment": "datacenter"}).json()
    assert listed and {g["segment"] for g in listed} == {"datacenter"}
    assert "h100-sxm" in {g["id"] for g in listed}
    r = client.get("/api/v1/gpus", params={"segment": "desk"})
    assert r.status_code == 422 and r.json()["field"] == "segment"
    page = client.get("/gpus", params={"segment": "laptop"})
    laptops = sum(g.segment == "laptop" for g in gpu_catalog())
    assert page.status_code == 200
    assert f"<span>{laptops} of {len(gpu_catalog())} cards</span>" in page.text
    assert '<option value="laptop" selected>laptop</option>' in page.text


def test_the_model_list_and_page_keep_the_models_a_search_names(client):
    found = client.get("/api/v1/models", params={"q": "gemma3:27b"}).json()
    assert [m["id"] for m in found] == ["gemma-3-27b-it"]
    assert client.get("/api/v1/models", params={"q": "no-such-model"}).json() == []
    for params, field in (({"q": "::"}, "q"), ([("q", "qwen"), ("q", "llama")], "q"),
                          ({"query": "qwen"}, "query")):
        r = client.get("/api/v1/models", params=params)
        assert r.status_code == 422 and r.json()["field"] == field
    # a field named like the part of the request it came in is still that field
    r = client.post("/api/v1/plan", json={"model": "qwen3-8b", "body": 1})
    assert r.status_code == 422 and r.json()["field"] == "body"
    page = client.get("/models", params={"q": "smollm"})
    assert page.status_code == 200
    assert page.text.count('<td class="wrap name"><a href="/models/') == 2
    assert f"2 of {len(model_catalog())} models match" in page.text
    # a search that finds none says which word no model's name holds, and the nearest one
    miss = client.get("/models", params={"q": "mistrall"})
    assert miss.status_code == 200 and (
        f"0 of {len(model_catalog())} models match “mistrall”: &#39;mistrall&#39; is in no "
        "model&#39;s name (did you mean mistral?); a Hub repo id plans a model the catalog "
        "lacks.") in miss.text
    # each row: f16 bytes a token within the windows and past them, trained positions
    gemma = client.get("/models", params={"q": "gemma-3-27b"}).text
    assert "<td>27.4B</td><td>507,904</td><td>81,920</td><td>131,072</td></tr>" in gemma
    # the fit form asks over the models the search found, and each form keeps the other's
    fit = client.get("/models", params={"q": "gemma 3", "gpu": "4090", "context": "32k"}).text
    assert re.search(r'id="fit-head">\d of 3 models matching “gemma 3” fit 32k × 1 on 4090', fit)
    assert '<input type="hidden" name="q" value="gemma 3">' in fit
    assert '<input type="hidden" name="gpu" value="4090">' in fit
    body = {"gpu": "4090", "context": "32k", "engine": "llama.cpp", "weights": "q4_k_m"}
    found = client.post("/api/v1/find-model", params={"q": "gemma 3"}, json=body).json()
    assert sorted(r["model"] for rows in found.values() for r in rows) == [
        "gemma-3-1b-it", "gemma-3-27b-it", "gemma-3-4b-it"]
    for params, field in (({"q": "no-such-model"}, "q"), ([("q", "a"), ("q", "b")], "q"),
                          ({"gpu": "4090"}, "gpu")):
        r = client.post("/api/v1/find-model", params=params, json=body)
        assert r.status_code == 422 and r.json()["field"] == field
    r = client.post("/api/v1/find-model", params={"q": "mistrall"}, json=body)
    assert r.json()["error"] == ("no catalog model matches 'mistrall': 'mistrall' is in no "
                                 "model's name (did you mean mistral?); GET /api/v1/models?q= "
                                 "lists what a search finds")
    # a POST's field in its query string would be dropped: it is named
    r = client.post("/api/v1/plan", params={"context": "128k"},
                    json={"model": "qwen3-8b", "gpu": "4090"})
    assert r.status_code == 422 and r.json()["field"] == "context"
    assert r.json()["error"].startswith("context in the query string: a POST takes its fields")
    # and a GET that takes no query parameters would answer as if it were not there
    for url, field in (("/api/v1/formats?x=1", "x"), ("/api/v1/models/qwen3-8b?kv=q8_0", "kv")):
        r = client.get(url)
        assert r.status_code == 422 and r.json()["field"] == field
        assert "takes no query parameters" in r.json()["error"]
    # a list page's field it does not take, or one given twice, is named, not dropped
    for url, needle in (("/models?gpuu=4090", "&#39;gpuu&#39; is not a field of this page "
                                               "(did you mean gpu?)"),
                        ("/gpus?vendr=amd", "&#39;vendr&#39; is not a field of this page "
                                            "(did you mean vendor?)"),
                        ("/gpus?vendor=amd&vendor=intel", "vendor is given 2 times")):
        r = client.get(url)
        assert r.status_code == 422 and needle in r.text, url
    bad = client.get("/models", params={"q": "::"})
    assert bad.status_code == 422 and 'id="search-error"' in bad.text


def test_lists(client):
    listed = client.get("/api/v1/models").json()
    assert len(listed) >= 40
    # the twins that resolve to an entry offline are listed with it, and resolve
    llama = next(m for m in listed if m["id"] == "llama-3.1-8b")
    assert llama["aliases"] == ["meta-llama/Llama-3.1-8B-Instruct"]
    resolved = client.get("/api/v1/models/meta-llama/Llama-3.1-8B-Instruct")
    assert resolved.status_code == 200
    gpus = client.get("/api/v1/gpus").json()
    assert len(gpus) >= 40
    # an Apple chip lists the sizes it was sold with, each of which plans
    m3 = next(g for g in gpus if g["id"] == "m3-max")
    assert m3["memory_options_gb"] == [36, 48, 64, 96, 128]
    r = client.post("/api/v1/plan", json={"model": "qwen3-8b", "gpu": "m3 max 36gb"})
    assert r.status_code == 200 and r.json()["gpu"]["memory_bytes"] == 36 << 30
    # the 30-core bin's share of the 40-core chip's FP16 peak, and the decode's two ceilings
    assert r.json()["gpu"]["matmul_flops_per_s"] == m3["matmul_flops_per_s"] * 30 // 40
    decode = r.json()["decode"]
    assert decode["seconds_per_step"] == max(decode["bandwidth_seconds_per_step"],
                                             decode["compute_seconds_per_step"])
    # and the prompt's time at that peak, on the planner page too
    prefill = r.json()["prefill"]
    assert prefill["seconds"] == prefill["flops"] / r.json()["gpu"]["matmul_flops_per_s"]
    page = client.get("/", params={"model": "qwen3-8b", "gpu": "m3 max 36gb"}).text
    assert 'id="prefill">Prefill ≈' in page and "tokens/s), compute-bound at 10.6 TFLOPS" in page
    h100 = next(g for g in gpus if g["id"] == "h100-sxm")
    assert h100["matmul_flops_per_s"] == 989_500 * 10**9 and "sparsity" in h100["matmul_flops_source"]
    assert {f["name"] for f in client.get("/api/v1/formats").json()} >= {"q8_0", "tbq4"}
    weights = {w["name"]: w for w in client.get("/api/v1/weights").json()}
    assert weights["iq2_xs"]["gguf_mix"] and not weights["fp8"]["gguf_mix"]
    m = client.get("/api/v1/models/deepseek-v3").json()
    assert m["bytes_per_token"]["f16"] == 61 * 576 * 2


def test_index_page_full_and_partial(client):
    params = {"model": "qwen3.5-27b", "gpu": "4090", "context": "256k", "kv_k": "tbq4",
              "kv_v": "tbq4", "weights": "q4_k_m"}
    full = client.get("/", params=params)
    assert full.status_code == 200 and "<html" in full.text and "Fits:" in full.text
    assert 'hx-push-url="true"' in full.text and "/static/vendor/htmx-2.0.4.min.js" in full.text
    part = client.get("/", params=params, headers={"HX-Request": "true"})
    assert part.status_code == 200 and "<html" not in part.text
    assert 'id="verdict"' in part.text and "<svg" in part.text
    # the same plan as the API
    api = client.get("/api/v1/plan", params=params).json()
    assert f"max context {api['max_context']:,}" in part.text


def _chart_parts(html):
    import re

    svg = html[html.index('<svg class="chart"'):]
    svg = svg[:svg.index("</svg>")]
    ask = re.search(r'<circle cx="([\d.]+)" cy="([\d.]+)" r="5" class="ask" '
                    r'data-context="(\d+)" data-bytes="(\d+)"/>', svg)
    strokes = dict((name, color) for color, name in
                   re.findall(r'stroke="(#[0-9a-f]+)" stroke-width="2.5" data-series="([^"]+)"',
                              svg))
    label = re.search(r'<text x="[\d.]+" y="[\d.]+" text-anchor="(start|end)" '
                      r'class="maxctx-label">max ([\d,]+)</text>', svg)
    return svg, ask, strokes, label


@pytest.mark.parametrize("params", [
    {"model": "qwen3.5-27b", "gpu": "4090", "context": "128k", "kv_k": "q8_0", "kv_v": "q8_0",
     "weights": "q4_k_m"},
    {"model": "llama-3.1-8b", "gpu": "4090", "context": "2k", "sequences": "200"},
    {"model": "gemma-3-27b-it", "gpu": "a100-80", "context": "100k", "sequences": "3",
     "kv_k": "q4_0", "kv_v": "q4_0"},
])
def test_chart_marks_the_asked_context_at_the_plans_total(client, params):
    """The point at the asked context sits on the chosen format's line at the plan's total
    (the raw engine's: weights, overhead and cache), and is labelled with it."""
    part = client.get("/", params=params, headers={"HX-Request": "true"}).text
    api = client.get("/api/v1/plan", params=params).json()
    svg, ask, strokes, label = _chart_parts(part)
    assert ask is not None
    assert int(ask.group(3)) == api["context"]
    assert int(ask.group(4)) == api["total_bytes"]
    assert f": {api['total_bytes'] / 2**30:.1f} GiB</text>" in svg
    # the max-context line's label names the plan's max context
    assert label is not None and label.group(2) == f"{api['max_context']:,}"


def test_chart_colours_a_format_the_same_whichever_is_chosen(client):
    base = {"model": "llama-3.1-8b", "gpu": "4090", "context": "32k"}
    q8 = _chart_parts(client.get("/", params={**base, "kv_k": "q8_0", "kv_v": "q8_0"},
                                 headers={"HX-Request": "true"}).text)[2]
    f16 = _chart_parts(client.get("/", params={**base, "kv_k": "f16", "kv_v": "f16"},
                                  headers={"HX-Request": "true"}).text)[2]
    assert set(q8) == {"q8_0", "f16", "q4_0"} and set(f16) == {"f16", "q4_0"}
    assert q8["q4_0"] == f16["q4_0"] and q8["f16"] != q8["q4_0"]
    assert q8["q8_0"] == f16["f16"]  # the chosen format's line is always the first colour


def test_chart_draws_the_format_the_to_fit_line_names(client):
    """A plan that does not fit draws the KV format its "To fit" line names, in a colour of
    its own, and that line is under the card's limit at the asked context where the chosen
    format's is over it; a plan that fits draws no such line."""
    import re

    params = {"model": "qwen3.5-27b", "gpu": "4090", "context": "64k", "sequences": "2",
              "engine": "llama.cpp", "weights": "q4_k_m"}
    part = client.get("/", params=params, headers={"HX-Request": "true"}).text
    fix = re.search(r"To fit: --kv (\w+) fits", part)
    assert fix is not None and fix.group(1) not in ("f16", "q4_0")
    svg, ask, strokes, _ = _chart_parts(part)
    assert set(strokes) == {"f16", "q4_0", fix.group(1)}
    assert len(set(strokes.values())) == 3
    # each line's point nearest the asked context
    limit_y = float(re.search(r'y1="([\d.]+)" y2="[\d.]+" class="limit"', svg).group(1))

    def y_at(name):
        line = re.search(r'<path d="([^"]+)" fill="none" stroke="#[0-9a-f]+" '
                         rf'stroke-width="2\.5" data-series="{name}"', svg).group(1)
        pts = [tuple(map(float, p[1:].split(","))) for p in line.split()]
        return min(pts, key=lambda p: abs(p[0] - float(ask.group(1))))[1]

    # SVG y grows downward: over the limit is above it
    assert y_at("f16") < limit_y < y_at(fix.group(1))
    fits = client.get("/", params={**params, "context": "8k"}, headers={"HX-Request": "true"})
    assert "To fit:" not in fits.text
    assert set(_chart_parts(fits.text)[2]) == {"f16", "q4_0"}


def test_chart_axes_end_where_their_quarters_are_round():
    from app.charts import _nice_bytes, _tokens, nice_tokens

    steps = sorted({m << k for k in range(8, 24) for m in (2, 3)} | {1 << k for k in range(8, 25)})
    for n in (1, 1000, 8192, 8193, 20_000, 78_080, 100_000, 262_144, 300_000, 5_000_000):
        end = nice_tokens(n)
        assert end >= n and end // 4 in steps
        # the least such end: the step below would not reach n
        assert end == 1024 or 4 * max(s for s in steps if s < end // 4) < n
        assert all(_tokens(end * i // 4).rstrip("kM").replace(".5", "").isdigit()
                   for i in range(5))
    gib = 2**30
    for g in (0.3, 1, 23.0, 24, 52, 129.2, 700):
        end = _nice_bytes(g * gib) / gib
        assert g <= end < 2 * g + 1e-9
        quarter = end / 4
        mant = quarter / 10 ** math.floor(math.log10(quarter))
        assert round(mant, 9) in (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8)


def test_chart_labels_stay_inside_it():
    """The max-context label runs into the plot, not past its left edge: right of its line
    where the line is in the left half, left of it otherwise."""
    from app.charts import PAD_L, W, memory_chart

    pts = [(x, 10 * 2**30 + x * 2**20) for x in range(0, 100_001, 10_000)]
    for max_ctx, anchor in ((2_000, "start"), (30_000, "start"), (90_000, "end")):
        svg = memory_chart([("f16", pts)], limit_bytes=40 * 2**30, max_context=max_ctx,
                           context=50_000, ask_bytes=10 * 2**30 + 50_000 * 2**20)
        _, ask, _, label = _chart_parts(svg)
        assert label.group(1) == anchor
        assert PAD_L <= float(ask.group(1)) <= W
    # without ask_bytes the point sits on the axis, unlabelled
    svg = memory_chart([("f16", pts)], limit_bytes=None, max_context=None, context=50_000)
    assert 'class="ask" data-context="50000"/>' in svg and "ask-label" not in svg


def test_unknown_path_is_a_page_for_a_browser_and_json_for_the_api(client):
    page = client.get("/measured", headers={"Accept": "text/html,application/xhtml+xml"})
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "No page at /measured" in page.text and 'href="/measurements"' in page.text
    # a script, and anything under /api/, still gets the JSON error
    plain = client.get("/measured")
    assert plain.status_code == 404 and plain.json()["ok"] is False
    api = client.get("/api/v1/nosuch", headers={"Accept": "text/html"})
    assert api.status_code == 404 and api.json()["error"] == "Not Found"


def test_linked_shows_a_source_address_as_its_site():
    from app.pages import linked

    text = ("https://www.nvidia.com/en-us/data-center/h100/ (specs: 80 GB); cross-checked at "
            "https://example.org/a?b=1&c=<x>. Also <b>bold</b>")
    out = str(linked(text))
    assert out.startswith('<a href="https://www.nvidia.com/en-us/data-center/h100/" '
                          'title="https://www.nvidia.com/en-us/data-center/h100/">nvidia.com</a>'
                          " (specs: 80 GB); cross-checked at ")
    # the address's own characters escaped, the sentence's full stop left outside the link
    assert ('<a href="https://example.org/a?b=1&amp;c=&lt;x&gt;" '
            'title="https://example.org/a?b=1&amp;c=&lt;x&gt;">example.org</a>.') in out
    assert out.endswith(". Also &lt;b&gt;bold&lt;/b&gt;")
    assert str(linked("derived: 28 SMs x 1,777 MHz")) == "derived: 28 SMs x 1,777 MHz"


def test_gpus_page_links_each_cards_sources(client):
    import re

    import kvcore

    page = client.get("/gpus").text.replace("&amp;", "&")
    for g in kvcore.gpu_catalog():
        for url in re.findall(r"https?://[^\s),;]+", g.source):
            assert f'<a href="{url.rstrip(".")}"' in page, g.id
    assert "<td>https://" not in page and '<td class="src"><div>https://' not in page


def test_every_operation_is_documented_in_the_openapi(client):
    spec = client.get("/openapi.json").json()
    for path, item in spec["paths"].items():
        for method, op in item.items():
            # FastAPI's own summary is the function's name, which opens its operationId
            auto = op["summary"].lower().replace(" ", "_")
            assert not op["operationId"].startswith(auto + "_"), (method, path)
            assert len(op.get("description", "")) > 20, (method, path)


def test_every_field_and_parameter_is_described_by_the_api_or_its_cli_flag(client):
    from app.cli import _plan_parser

    spec = client.get("/openapi.json").json()
    for name, schema in spec["components"]["schemas"].items():
        for field, prop in schema.get("properties", {}).items():
            assert prop.get("description"), (name, field)
    for path, item in spec["paths"].items():
        for method, op in item.items():
            for param in op.get("parameters", ()):
                assert param.get("description"), (method, path, param["name"])
    helps = {a.dest: a.help for a in _plan_parser()._actions}
    props = spec["components"]["schemas"]["PlanIn"]["properties"]
    # one text for a field and its flag; the API's own where it differs (no local paths)
    assert props["context"]["description"] == helps["ctx"]
    assert props["tp"]["description"] == helps["tp"]
    assert props["gpu"]["description"] != helps["gpu"]  # the API's own wording stands
    assert "local path" in props["model"]["description"]
    assert "path" not in spec["components"]["schemas"]["MeasureIn"]["properties"]["model"][
        "description"].replace("local path", "")


def test_api_page_lists_every_operation_and_field_from_its_own_openapi(client):
    import re

    spec = client.get("/openapi.json").json()
    page = client.get("/api")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    # long names and examples may wrap after an underscore, dot, slash or backslash
    assert "<code>prefill_<wbr>kv_<wbr>cache_<wbr>dequant_<wbr>dtype</code>" in html
    assert "\\<wbr>.<wbr>ffn_<wbr>" in html
    html = html.replace("<wbr>", "")
    for path, item in spec["paths"].items():
        for method, op in item.items():
            assert f"<code>{method.upper()} {path}</code>" in html
            assert op["summary"] in html.replace("&#39;", "'")
    for field in spec["components"]["schemas"]["PlanIn"]["properties"]:
        assert f"<code>{field}</code>" in html, field
    # the GET plan's query parameters, one row each
    n = len(spec["paths"]["/api/v1/plan"]["get"]["parameters"])
    assert f"{n} parameters</summary>" in html
    # nothing loaded from elsewhere (unlike /docs, whose Swagger UI comes from a CDN)
    assert not re.search(r'<(script|link)[^>]+(src|href)="https?://', html)
    assert 'href="/api">API</a>' in client.get("/").text


def test_api_reference_types_read_as_a_reader_writes_them():
    from app.apidoc import _type, reference

    assert _type({"anyOf": [{"type": "integer"}, {"type": "string"}]}) == (
        "integer or string", False)
    assert _type({"anyOf": [{"type": "string", "maxLength": 9}, {"type": "null"}]}) == (
        "string", True)
    assert _type({"enum": ["f32", "f16"]}) == ("one of f32, f16", False)
    assert _type({"type": "array", "items": {"type": "number"}}) == ("list of number", False)
    assert _type({"$ref": "#/components/schemas/PlanIn"}) == ("PlanIn", False)
    spec = {"info": {"title": "t", "version": "1"}, "paths": {"/x/{id}": {"post": {
        "summary": "S", "parameters": [{"name": "id", "in": "path", "required": True,
                                         "schema": {"type": "string"}}],
        "requestBody": {"content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/B"}}}},
        "responses": {"200": {}, "422": {"description": "bad"}}}}},
        "components": {"schemas": {"B": {"required": ["a"], "properties": {
            "a": {"type": "integer"},
            "b": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}}}}}}
    ref = reference(spec)
    op = ref["operations"][0]
    assert (op["method"], op["anchor"], op["body"]) == ("POST", "post-x-id", "B")
    assert op["params"][0]["required"] and op["params"][0]["in"] == "path"
    fields = {f["name"]: f for f in ref["schemas"][0]["fields"]}
    assert fields["a"]["required"] and not fields["b"]["required"]
    assert fields["b"]["has_default"] and fields["b"]["default"] is None
    assert ref["statuses"] == [("422", "bad")]


def test_plan_without_a_card_lists_the_cards_that_fit_each_linked_to_its_plan(client):
    import html
    import re

    ask = {"model": "deepseek-v3", "context": "128k", "sequences": "4", "kv_k": "fp8_e4m3",
           "kv_v": "fp8_e4m3", "engine": "vllm"}
    part = client.get("/", params=ask, headers={"HX-Request": "true"}).text
    found = client.post("/api/v1/find-gpu", json={**ask, "kv": "fp8_e4m3", "kv_k": None,
                                                  "kv_v": None}).json()
    table = part.split('id="cards"')[1].split("</table>")[0]
    rows = re.findall(r'<tr><td><a href="([^"]+)">([^<]+)</a></td><td>(\d+)</td>', table)
    assert [(name, int(n)) for _, name, n in rows] == [(r["name"], r["count"]) for r in found]
    assert "choose a GPU to check. The cards that fit are below." in part
    # each link plans the same question on that card, and it fits there
    link, name, n = rows[0]
    page = client.get(html.unescape(link), headers={"HX-Request": "true"}).text
    assert f"Fits: 131,072 tokens × 4 sequences on {n} × {name} under vllm" in page
    assert "context=128k" in link and "engine=vllm" in link and "kv_k=fp8_e4m3" in link
    # a plan too large for every card says so
    big = client.get("/", params={"model": "kimi-k2-instruct", "context": "1M",
                                  "sequences": "64"}, headers={"HX-Request": "true"}).text
    assert 'id="no-cards"' in big and 'id="cards"' not in big


def test_form_error_sits_beside_its_field(client):
    part = client.get("/", params={"model": "qwen3-8b", "gpu": "4091"},
                      headers={"HX-Request": "true"})
    assert part.status_code == 200
    assert 'id="err-gpu" hx-swap-oob="true">&#39;4091&#39; is not a known GPU' in part.text
    full = client.get("/", params={"model": "nosuch"})
    assert full.status_code == 422 and "not a known model" in full.text


def test_pasted_and_uploaded_config(client):
    from kvcore import model_catalog

    cfg = next(e for e in model_catalog() if e.id == "qwen3-8b").config()
    import json as _json

    text = _json.dumps(cfg)
    pasted = client.post("/", data={"config": text, "gpu": "4090", "context": "32k"},
                         headers={"HX-Request": "true"})
    assert pasted.status_code == 200 and "Fits:" in pasted.text
    upload = client.post("/", data={"gpu": "4090", "context": "32k"},
                         files={"config_file": ("config.json", text, "application/json")},
                         headers={"HX-Request": "true"})
    assert "Fits:" in upload.text
    huge = client.post("/", files={"config_file": ("config.json", "{" + " " * (16 << 20) + "}")},
                       headers={"HX-Request": "true"})
    assert "larger than 16,777,216 bytes" in huge.text
    bad = client.post("/", data={"config": "{nope"}, headers={"HX-Request": "true"})
    assert "not valid JSON" in bad.text


def test_catalog_pages(client):
    models = client.get("/models")
    assert models.status_code == 200 and "deepseek-v3" in models.text
    page = client.get("/models/deepseek-v3")
    assert page.status_code == 200 and "61 MLA layers, latent 576" in page.text
    # each format's row names the engines that store it and their flag's value
    assert "<td>vllm fp8, sglang fp8_e4m3, trtllm fp8</td>" in page.text
    assert "<td>llama.cpp q8_0, ollama q8_0</td>" in page.text
    assert client.get("/models/nosuch").status_code == 404
    gpus = client.get("/gpus")
    assert gpus.status_code == 200 and "RTX 4090" in gpus.text
    assert "<td>165.2 TFLOPS</td>" in gpus.text  # the 4090's FP16 peak with FP32 accumulate
    # a Mac's other memory sizes link to plans on them
    assert '<a href="/?gpu=m3-max-36gb">36GB</a>' in gpus.text
    assert "Apple M3 Max (36GB, 30-core GPU)" in client.get("/", params={
        "model": "qwen3-8b", "gpu": "m3-max-36gb"}).text
    assert client.get("/static/vendor/htmx-2.0.4.min.js").status_code == 200
    assert client.get("/docs").status_code == 200


def test_openapi(client):
    assert "/api/v1/plan" in client.get("/openapi.json").json()["paths"]


def test_engine_plan_via_api(client):
    body = {"model": "llama-3.1-70b", "gpu": "h100", "gpus": "2", "context": "32k",
            "sequences": 8, "engine": "vllm"}
    data = client.post("/api/v1/plan", json=body).json()
    assert data["engine"] == "vllm" and data["parallel"]["tp"] == 2
    assert data["engine_report"]["command"].startswith("vllm serve")


def test_gpu_count_as_a_json_number(client):
    # "gpus": 2 plans as "gpus": "2" does; a count below one or a boolean is a 422 naming gpus
    text = {"model": "llama-3.1-70b", "gpu": "h100", "gpus": "2", "context": "32k"}
    number = client.post("/api/v1/plan", json={**text, "gpus": 2}).json()
    assert number == client.post("/api/v1/plan", json=text).json()
    assert number["parallel"]["tp"] == 2
    for bad in (0, True, "x" * 401):
        r = client.post("/api/v1/plan", json={**text, "gpus": bad})
        assert r.status_code == 422 and r.json()["field"] == "gpus", bad



def test_a_rig_spelled_with_its_count_via_api(client):
    # "gpu": "2x4090" plans as "gpu": "4090", "gpus": 2; a count that contradicts it is a 422
    base = {"model": "llama-3.1-70b", "context": "32k", "engine": "vllm"}
    rig = client.post("/api/v1/plan", json={**base, "gpu": "2x4090"}).json()
    assert rig == client.post("/api/v1/plan", json={**base, "gpu": "4090", "gpus": 2}).json()
    assert rig["parallel"]["tp"] == 2
    r = client.post("/api/v1/plan", json={**base, "gpu": "2x4090", "gpus": 4})
    assert r.status_code == 422 and r.json()["field"] == "gpus"
    assert "2 cards but gpus is 4" in r.json()["error"]


def test_find_model_via_api(client):
    body = {"gpu": "4090", "context": "32k", "weights": "q4_k_m", "engine": "llama.cpp"}
    found = client.post("/api/v1/find-model", json=body).json()
    assert found["fits"] and found["fits"][0]["fits"]
    plan = client.post("/api/v1/plan", json={**body, "model": found["fits"][0]["model"]}).json()
    assert plan["max_context"] == found["fits"][0]["max_context"]
    for bad, field in (({**body, "model": "qwen3-8b"}, "model"), ({"context": "32k"}, "gpu"),
                       ({**body, "kv": "nvfp4"}, "kv_k")):
        r = client.post("/api/v1/find-model", json=bad)
        assert r.status_code == 422 and r.json()["field"] == field, bad


def test_models_page_lists_the_models_that_fit_a_card(client):
    import re

    ask = {"gpu": "4090", "context": "32k", "weights": "q4_k_m", "engine": "llama.cpp"}
    page = client.get("/models", params=ask)
    found = client.post("/api/v1/find-model", json=ask).json()
    assert page.status_code == 200
    listed = re.findall(r'<tr><td><a href="/\?model=([^&"]+)&', page.text.split('id="fits"')[1]
                        .split("</table>")[0])
    assert listed == [r["model"] for r in found["fits"]]
    # with each one's decode estimate, a sequence
    first = page.text.split('id="fits"')[1].split("</tr>")[1]
    assert f"<td>{found['fits'][0]['tokens_per_s_per_sequence']:,.1f}</td>" in first
    # and its max context beside the positions it was trained for
    assert (f"<td>{found['fits'][0]['max_context']:,}</td>"
            f"<td>{found['fits'][0]['trained_positions']:,}</td>") in first
    # each row links to its own plan on the planner page, which fits
    plan = client.get("/", params={"model": listed[0], "gpu": "4090", "context": "32k",
                                   "kv_k": "f16", "kv_v": "f16", "weights": "q4_k_m",
                                   "engine": "llama.cpp"})
    assert plan.status_code == 200 and "Fits" in plan.text
    bad = client.get("/models", params={"gpu": "4099"})
    assert bad.status_code == 422 and "is not a known GPU" in bad.text
    assert 'id="fits"' not in client.get("/models").text


def test_byte_sizes_as_json_numbers(client):
    # "kv_budget": 8707134259 is the budget "8707134259" (bytes) gives; a boolean is refused
    text = {"model": "llama-3.1-8b", "engine": "vllm", "kv_budget": "8707134259"}
    number = client.post("/api/v1/plan", json={**text, "kv_budget": 8707134259}).json()
    assert number == client.post("/api/v1/plan", json=text).json()
    assert number["fits"] is True
    for field in ("kv_budget", "overhead", "offload"):
        r = client.post("/api/v1/plan", json={"model": "llama-3.1-8b", field: False})
        assert r.status_code == 422 and r.json()["field"] == field
        r = client.post("/api/v1/plan", json={"model": "llama-3.1-8b", field: "9" * 41})
        assert r.status_code == 422 and r.json()["field"] == field


def test_find_endpoints(client):
    body = {"model": "qwen3.5-27b", "gpu": "4090", "context": "256k", "weights": "q4_k_m",
            "engine": "llama.cpp"}
    formats = client.post("/api/v1/find-format", json=body).json()
    assert formats[0]["format"] in ("f16", "bf16")
    gpus = client.post("/api/v1/find-gpu", json={"model": "llama-3.1-8b", "context": "128k"}).json()
    assert gpus and gpus[0]["count"] >= 1
    body = {"model": "llama-3.1-70b-instruct", "gpu": "4090", "context": "16k", "kv": "q8_0",
            "engine": "llama.cpp"}
    weights = client.post("/api/v1/find-weights", json=body).json()
    assert weights[0]["weights"] == "bf16"
    assert next(r for r in weights if r["fits"])["weights"] == "iq2_xs"
    r = client.post("/api/v1/find-weights", json={**body, "weights": "q4_k_m"})
    assert r.status_code == 422 and r.json()["field"] == "weights"
    # the page's table of weight formats, the plan's own marked
    page = client.get("/", params={**body, "weights": "iq2_xs"}, headers={"HX-Request": "true"})
    assert "Every weight format on this card" in page.text
    assert "<td>iq2_xs (chosen)</td><td>yes</td>" in page.text
    assert "<td>q4_k_m</td><td>no</td>" in page.text


def test_api_cpu_offload_gb(client):
    body = {"model": "llama-3.1-8b", "gpu": "3060", "context": "12k", "engine": "vllm"}
    plain = client.post("/api/v1/plan", json=body).json()
    moved = client.post("/api/v1/plan", json={**body, "cpu_offload_gb": 7}).json()
    assert not plain["fits"] and moved["fits"]
    held = moved["engine_report"]["extra"]["cpu_offload"]["bytes_per_rank"][0]
    assert plain["engine_report"]["weights_bytes"] - moved["engine_report"]["weights_bytes"] \
        == held
    assert moved["decode"]["offload_bytes_per_step"] == held
    r = client.post("/api/v1/plan", json={**body, "cpu_offload_gb": -1})
    assert r.status_code == 422 and r.json()["field"] == "cpu_offload_gb"
    r = client.post("/api/v1/plan", json={**body, "engine": "llama.cpp", "cpu_offload_gb": 6})
    assert r.status_code == 422 and "setting of vLLM and SGLang" in r.json()["error"]


def test_format_table_says_when_a_models_rows_cost_more_bits(client):
    # gpt-oss-20b's 64-wide heads take tbq4's 128-value blocks: the page's format table and
    # the API's find-format both give the 8.25 bits a value it costs there
    params = {"model": "gpt-oss-20b", "gpu": "4090", "context": "32k"}
    page = client.get("/", params=params, headers={"HX-Request": "true"})
    assert page.status_code == 200
    assert "8.25 bits a value on this model (its rows padded to whole 128-value blocks)" in page.text
    rows = {r["format"]: r for r in client.post("/api/v1/find-format", json=params).json()}
    assert rows["tbq4"]["bits_per_value_here"] == 8.25
    assert rows["q8_0"]["bits_per_value_here"] == 8.5


def test_unsupported_format_is_a_4xx(client):
    r = client.post("/api/v1/plan", json={"model": "qwen3-8b", "gpu": "h100", "engine": "vllm",
                                          "kv": "tbq4"})
    assert r.status_code == 422 and r.json()["field"] == "kv_k"


def test_vllm_nvfp4_without_a_backend_is_a_4xx(client):
    # Gemma 4 on B200: no vLLM 0.33.0 attention backend takes an nvfp4 cache with its image
    # prefix (tests/test_vllm_backends.py)
    r = client.post("/api/v1/plan", json={"model": "gemma-4-31b-it", "gpu": "b200",
                                          "engine": "vllm", "kv": "nvfp4"})
    assert r.status_code == 422 and r.json()["field"] == "kv_k"


def test_measure_endpoint_is_off_by_default(client):
    r = client.post("/api/v1/measure", json={"model": "qwen3-8b"})
    assert r.status_code == 403 and r.json()["ok"] is False
    assert client.get("/api/v1/measurements").status_code == 200


def test_measure_endpoint_when_enabled(tmp_path, monkeypatch):
    from app import settings as settings_mod
    from app.settings import Settings

    monkeypatch.setattr(settings_mod, "get_settings", lambda: Settings(True, "s3cret", 120,
                                                                      tmp_path / "m.sqlite3"))
    import app.api as api_mod

    monkeypatch.setattr(api_mod, "get_settings", settings_mod.get_settings)
    c = TestClient(create_app())
    body = {"model": "qwen3-8b", "kv": "q8_0", "context": 64, "layers": 2, "steps": 1,
            "device": "cpu"}
    assert c.post("/api/v1/measure", json=body).status_code == 401
    r = c.post("/api/v1/measure", json=body, headers={"Authorization": "Bearer s3cret"})
    assert r.status_code == 200, r.text
    assert r.json()["allocated_bytes"] == r.json()["predicted_bytes"]
    listed = c.get("/api/v1/measurements").json()
    local = [m for m in listed if m["source"] == "local"]
    assert len(local) == 1 and local[0]["model"] == "qwen3-8b" and local[0]["id"] >= 1
    # the H200 run behind docs/VERIFIED.md is listed after the local ones
    bundled = [m for m in listed if m["source"] == "bundled"]
    assert listed[0]["source"] == "local" and len(bundled) >= 20
    assert all(m["allocated_bytes"] == m["predicted_bytes"] for m in bundled)
    bad = c.post("/api/v1/measure", json={**body, "kv": "mxfp4"},
                 headers={"Authorization": "Bearer s3cret"})
    assert bad.status_code == 422 and "mxfp4" in bad.json()["error"]
    unknown = c.post("/api/v1/measure", json={**body, "model": "nosuch"},
                     headers={"Authorization": "Bearer s3cret"})
    assert unknown.status_code == 404


def test_verified_line_and_measurements_page(tmp_path, monkeypatch):
    from app import settings as settings_mod
    from app.settings import Settings
    from kvcore.store import save_measurement

    db = tmp_path / "m.sqlite3"
    monkeypatch.setattr(settings_mod, "get_settings", lambda: Settings(False, None, 60, db))
    save_measurement({"model": "qwen3.5-27b", "kv_k": "tbq4", "kv_v": "tbq4", "context": 262144,
                      "sequences": 1, "device": "NVIDIA H100", "predicted_bytes": 4586078208,
                      "allocated_bytes": 4586078208, "decode": {}, "env": {"date": "2026"}}, db)
    c = TestClient(create_app())
    page = c.get("/", params={"model": "qwen3.5-27b", "gpu": "4090", "context": "256k",
                              "kv_k": "tbq4", "kv_v": "tbq4"})
    # the local record (KV and state of the whole model), before the bundled H200 one
    assert "verified on NVIDIA H100: predicted 4.2711 GiB, allocated 4.2711 GiB" in page.text
    listing = c.get("/measurements")
    assert listing.status_code == 200 and "qwen3.5-27b" in listing.text
    assert "bundled" in listing.text


def test_bundled_measurement_verifies_a_plan_with_no_local_database(tmp_path, monkeypatch):
    # a plan measured in the shipped H200 run gets its verified line on a fresh install
    from app import settings as settings_mod
    from app.settings import Settings
    from kvcore.store import bundled_measurements

    db = tmp_path / "none.sqlite3"
    monkeypatch.setattr(settings_mod, "get_settings", lambda: Settings(False, None, 60, db))
    row = next(m for m in bundled_measurements()
               if (m["model"], m["kv_k"], m["context"]) == ("llama-3.1-8b", "q8_0", 32768))
    c = TestClient(create_app())
    page = c.get("/", params={"model": "llama-3.1-8b", "gpu": "h200", "context": "32k",
                              "sequences": str(row["sequences"]), "kv_k": "q8_0",
                              "kv_v": "q8_0"})
    assert page.status_code == 200
    assert "verified on NVIDIA H200: predicted 8.5 GiB, allocated 8.5 GiB" in page.text
    assert not db.exists()


def test_find_gpu_refuses_a_named_card(client):
    r = client.post("/api/v1/find-gpu", json={"model": "qwen3-8b", "gpu": "4090", "tp": 2})
    assert r.status_code == 422
    assert r.json() == {"ok": False, "status": 422, "field": "gpu",
                        "error": "find-gpu chooses the card, how many and their layout, and "
                                 "sizes the KV pool on each; leave out gpu, tp"}
    r = client.post("/api/v1/find-gpu", json={"model": "qwen3-8b", "dp": 2})
    assert r.status_code == 422 and r.json()["field"] == "dp"
    assert client.post("/api/v1/find-gpu", json={"model": "qwen3-8b", "dp": 1}).status_code == 200


def test_engine_rules_apply_without_a_card(client):
    r = client.post("/api/v1/plan", json={"model": "qwen3-8b", "engine": "vllm", "kv": "q8_0"})
    assert r.status_code == 422 and r.json()["field"] == "kv_k"
    assert r.json()["error"].startswith("vllm has no q8_0 KV cache")


@pytest.mark.parametrize(("content", "status", "error", "field"), [
    ("{", 400, "the request body is not valid JSON: Expecting property name enclosed in double "
     "quotes", None),
    ("[]", 422, "the request body must be a JSON object of the fields, got an array", None),
    ('"qwen3-8b"', 422, 'the request body must be a JSON object of the fields, got "qwen3-8b"',
     None),
    # a field of two types (int | str) is named alone, not as 'context.int'
    ('{"model": "qwen3-8b", "context": 1.5}', 422,
     "context: expected a whole number or a string, got 1.5", "context"),
    ('{"model": "qwen3-8b", "sequences": null}', 422,
     "sequences: expected a whole number or a string, got null", "sequences"),
    ('{"model": "qwen3-8b", "config": {"model_type": "llama"}}', 422,
     "give a model or a config, not both", "config"),
    ('{"model": "qwen3-8b", "gpus": "4090,4091"}', 422,
     "'4091' is not a known GPU; did you mean 'rtx-4090' or 'rtx-4090-laptop' or 'p40'?", "gpus"),
])
def test_malformed_requests_name_what_was_wrong(client, content, status, error, field):
    r = client.post("/api/v1/plan", content=content,
                    headers={"content-type": "application/json"})
    assert r.status_code == status
    assert r.json() == {"ok": False, "status": status, "error": error, "field": field}


def test_a_form_body_is_not_taken_for_json(client):
    r = client.post("/api/v1/plan", data={"model": "qwen3-8b"})
    assert r.status_code == 422
    assert r.json()["error"] == ("the request body must be a JSON object of the fields, got a "
                                 "body that is not JSON")


@pytest.mark.parametrize(("flags", "fields"), [
    (["--keep", "0.5", "--keep-first", "8", "--keep-recent", "256"],
     {"keep": 0.5, "keep_first": 8, "keep_recent": 256}),
    (["--state-dtype", "bf16", "--overhead", "2GiB"], {"state_dtype": "bf16", "overhead": "2GiB"}),
    (["--engine", "vllm", "--kv", "fp8", "--speculative-tokens", "3", "--offload", "64GiB"],
     {"engine": "vllm", "kv": "fp8", "speculative_tokens": 3, "offload": "64GiB"}),
    (["--engine", "llama.cpp", "--kv-k", "q8_0", "--ubatch", "2048", "--swa-full",
      "--kv-unified", "--no-flash-attn"],
     {"engine": "llama.cpp", "kv_k": "q8_0", "ubatch": 2048, "swa_full": True,
      "kv_unified": True, "no_flash_attn": True}),
    (["--engine", "trtllm", "--tokens-per-block", "64"],
     {"engine": "trtllm", "tokens_per_block": 64}),
])
def test_every_cli_knob_has_an_api_field(client, capsys, flags, fields):
    # the API answered these with the defaults (or refused the field) where the CLI did not
    import json

    from app.cli import main

    main(["qwen3.5-27b", "--gpu", "4090", "--seqs", "2", *flags, "--json"])
    cli = json.loads(capsys.readouterr().out)
    body = {"model": "qwen3.5-27b", "gpu": "4090", "sequences": 2, **fields}
    assert client.post("/api/v1/plan", json=body).json() == cli


@pytest.mark.parametrize(("kv", "expected"), [
    (5, "'num_key_value_heads' must divide num_attention_heads (32) evenly"),
    (64, "'num_key_value_heads' must be at most num_attention_heads (32), got 64"),
])
def test_config_with_kv_heads_that_do_not_group_is_refused(client, kv, expected):
    from kvcore import model_catalog

    cfg = next(e for e in model_catalog() if e.id == "llama-3.1-8b").config()
    cfg["num_key_value_heads"] = kv
    r = client.post("/api/v1/plan", json={"config": cfg, "gpu": "4090"})
    assert r.status_code == 422
    data = r.json()
    # the request field at fault is the config object; the message names its key
    assert data["field"] == "config" and expected in data["error"]
    page = client.post("/", data={"config": json.dumps(cfg), "gpu": "4090"},
                       headers={"HX-Request": "true"})
    assert "Fits:" not in page.text and "must " in page.text


@pytest.mark.parametrize(("params", "verdict"), [
    ({"context": "1", "sequences": "1000000", "gpu": "h200"},
     "Fits: 1 token × 1,000,000 sequences on 1 × NVIDIA H200 SXM 141GB under raw; max "
     "context 2, max sequences 1,000,000."),
    ({"context": "1", "sequences": "1", "gpu": "4090", "model": "llama-3.1-70b"},
     "Does not fit: 1 token × 1 sequence on 1 × NVIDIA GeForce RTX 4090 under raw; max "
     "context 0 at 1 sequence."),
    ({"context": "2", "sequences": "1000000", "gpu": "4090"},
     "Does not fit: 2 tokens × 1,000,000 sequences on 1 × NVIDIA GeForce RTX 4090 under raw; "
     "max context 0 at 1,000,000 sequences."),
])
def test_verdict_groups_numbers_and_agrees_in_number(client, params, verdict):
    page = client.get("/", params={"model": "qwen3-0.6b", "kv": "q8_0", "weights": "q4_k_m",
                                   **params}, headers={"HX-Request": "true"})
    assert f'id="verdict">{verdict}</p>' in page.text


@pytest.mark.parametrize(("body", "expected"), [
    ("x" * 5000, 'the request body must be a JSON object of the fields, got "' + "x" * 39 + "…"),
    ({"model": "qwen3-8b", "context": [1] * 1000},
     "context: expected a whole number or a string, got [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, …"),
    ({"model": "qwen3-8b", "context": 10**300},
     "context must be at most 2,147,483,648 tokens, got 1e+300"),
    ({"config": {"model_type": "llama", "num_hidden_layers": 1e308, "hidden_size": 64,
                 "num_attention_heads": 1, "vocab_size": 10}},
     "config.json field 'num_hidden_layers' must be between 1 and 4,096, got 1e+308"),
])
def test_huge_values_are_shown_short_in_api_errors(client, body, expected):
    r = client.post("/api/v1/plan", json=body)
    assert r.status_code == 422 and r.json()["error"] == expected


def test_model_summary_gives_the_rate_past_the_windows_and_the_state(client):
    gemma = client.get("/api/v1/models/gemma-3-27b-it").json()
    # q8_0: 34 bytes a 32-value block; 16 KV heads × 128 lanes, K and V
    row = 16 * 2 * 4 * 34
    assert gemma["bytes_per_token"]["q8_0"] == 62 * row
    assert gemma["marginal_bytes_per_token"]["q8_0"] == 10 * row
    assert gemma["state_bytes_per_sequence"] == 0
    qwen = client.get("/api/v1/models/qwen3.5-27b").json()
    assert qwen["marginal_bytes_per_token"] == qwen["bytes_per_token"]
    assert qwen["state_bytes_per_sequence"] > 0


def test_page_link_takes_kv_and_an_engine_without_the_default_format(client):
    # vLLM has no q8_0: a link naming only the engine used to fail on the form's default format
    page = client.get("/", params={"model": "qwen3-8b", "engine": "vllm", "gpu": "h100"})
    assert page.status_code == 200
    assert "<option selected>f16</option>" in page.text
    page = client.get("/", params={"model": "qwen3-8b", "engine": "vllm", "gpu": "h100",
                                   "kv": "fp8_pth"})
    assert page.status_code == 200 and page.text.count("<option selected>fp8_pth</option>") == 2
    # a format the engine lacks is named as given
    page = client.get("/", params={"model": "qwen3-8b", "engine": "vllm", "gpu": "h100",
                                   "kv": "q4_0"})
    assert page.status_code == 422 and "vllm has no q4_0 KV cache" in page.text


def test_page_gives_the_decode_estimate_and_the_context_notes(client):
    page = client.get("/", params={"model": "llama-3.1-70b", "gpu": "h100", "gpus": "2",
                                   "context": "32k", "kv_k": "fp8_e4m3", "kv_v": "fp8_e4m3"})
    assert page.status_code == 200
    assert "bandwidth-bound on 2 cards (interconnect not counted)" in page.text
    # the raw engine has no command: its notes still show
    page = client.get("/", params={"model": "qwen3-8b", "gpu": "h100", "context": "1M"})
    assert "1,048,576 tokens is past the 40,960 positions the model was trained for" in page.text
    # a plan that does not fit says its decode figure is what it would read
    assert "Does not fit" in page.text and "(if it fit)." in page.text


@pytest.mark.parametrize("field", ["kv", "kv_k", "kv_v", "gpu", "weights", "model", "gpus",
                                   "hot", "overhead", "kv_budget", "offload", "engine"])
def test_an_empty_field_is_refused_by_name_as_the_cli_refuses_it(client, field):
    # "kv": "" used to plan f16 as if kv were left out, while `kvplan --kv ""` exits 2
    body = {"model": "qwen3-8b", "gpu": "4090", field: ""}
    for r in (client.post("/api/v1/plan", json=body), client.get("/api/v1/plan", params=body),
              client.post("/api/v1/find-format", json=body)):
        assert r.status_code == 422, (field, r.json())
        assert r.json()["field"] == field
        assert r.json()["error"].startswith(f"{field}: needs a value, got an empty string")


def test_a_repeated_query_parameter_is_refused(client):
    # ?kv=q8_0&kv=q4_0 used to plan q4_0 (the last one) without a word
    r = client.get("/api/v1/plan?model=qwen3-8b&kv=q8_0&kv=q4_0")
    assert r.status_code == 422
    assert r.json() == {"ok": False, "status": 422, "field": "kv",
                        "error": "kv is given 2 times ('q8_0' and 'q4_0'); give it once"}


def test_the_pages_json_link_gives_the_same_plan(client):
    # weights "auto" and a cleared GPU field used to go out as empty parameters
    import html
    import re

    for params in ({"model": "qwen3-8b", "gpu": "4090", "context": "32k", "kv_k": "q8_0",
                    "kv_v": "q4_0", "weights": "auto", "engine": "raw", "sequences": "2"},
                   {"model": "qwen3-8b", "gpu": "", "context": "32k", "weights": "q4_k_m"}):
        page = client.get("/", params=params, headers={"HX-Request": "true"})
        link = html.unescape(re.search(r'class="json-link"><a href="([^"]+)"', page.text)[1])
        api = client.get(link)
        assert api.status_code == 200, api.json()
        data = api.json()
        assert (data["kv_k"], data["kv_v"]) == (params.get("kv_k", "f16"),
                                                params.get("kv_v", "f16"))
        assert f"KV {format_bytes(data['kv_bytes'], 2)}, " in page.text
        assert f"({data['weights']['format']}, " in page.text
    # a pasted config has no link: it would plan the form's catalog model instead
    from kvcore import model_catalog

    cfg = next(e for e in model_catalog() if e.id == "qwen3-8b").config()
    pasted = client.post("/", data={"config": json.dumps(cfg), "gpu": "4090"},
                         headers={"HX-Request": "true"})
    assert "Fits:" in pasted.text and "this plan as JSON" not in pasted.text


def test_find_format_refuses_a_kv_format_it_would_drop(client):
    r = client.post("/api/v1/find-format", json={"model": "qwen3-8b", "gpu": "4090",
                                                  "kv_v": "q4_0"})
    assert r.status_code == 422 and r.json()["field"] == "kv_v"
    assert r.json()["error"] == "find-format tries every KV format for K and V; leave out kv_v"
    rows = client.post("/api/v1/find-gpu", json={"model": "qwen3-8b", "context": "1M"}).json()
    assert rows[0]["notes"] == ["1,048,576 tokens is past the 40,960 positions the model was "
                                "trained for"]


def test_a_link_answers_what_the_cli_and_the_api_answer_for_its_fields(client, capsys):
    # the page filled what a link left out with its example (q4_k_m weights, q8_0 cache, 128k,
    # an RTX 4090), so /?model=X&gpu=Y planned another question than kvplan X --gpu Y
    from app.cli import main

    page = client.get("/", params={"model": "qwen3-8b", "gpu": "h100"},
                      headers={"HX-Request": "true"})
    main(["qwen3-8b", "--gpu", "h100", "--json"])
    cli = json.loads(capsys.readouterr().out)
    api = client.get("/api/v1/plan", params={"model": "qwen3-8b", "gpu": "h100"}).json()
    assert cli == api and (cli["kv_k"], cli["weights"]["format"], cli["context"]) == (
        "f16", "bf16", 8192)
    assert (f"8,192 tokens × 1 sequence on 1 × NVIDIA H100 SXM5 80GB under raw; max context "
            f"{cli['max_context']:,}, max sequences {cli['max_sequences']:,}.") in page.text
    assert f"weights {format_bytes(cli['weights_bytes'], 2)} (bf16, " in page.text
    # a link without a card gives the memory the plan needs, as the CLI does
    bare = client.get("/", params={"model": "qwen3-8b"}, headers={"HX-Request": "true"})
    assert "needs " in bare.text and "choose a GPU to check." in bare.text
    # the bare page still opens on its worked example
    home = client.get("/")
    assert home.status_code == 200 and "<option selected>q4_k_m</option>" in home.text
    assert "Fits: 131,072 tokens × 1 sequence on 1 × NVIDIA GeForce RTX 4090" in home.text


@pytest.mark.parametrize(("query", "field", "message"), [
    ("model=qwen3-8b&gpu=4090&ctx=32k", "model",
     "&#39;ctx&#39; is not a field of this page (did you mean context?)</span>"),
    ("model=qwen3-8b&gpu=4090&contxt=32k", "model",
     "&#39;contxt&#39; is not a field of this page (did you mean context?)</span>"),
    ("model=qwen3-8b&gpu=4090&zzz=1", "model",
     "&#39;zzz&#39; is not a field of this page; it takes model, gpu, gpus,"),
    ("model=qwen3-8b&gpu=4090&kv=q8_0&kv=q4_0", "kv_k",
     "kv is given 2 times (&#39;q8_0&#39; and &#39;q4_0&#39;); give it once"),
    ("model=qwen3-8b&gpu=4090&gpu=h100", "gpu", "gpu is given 2 times"),
    ("gpu=4090", "model", "give a model: a catalog id"),
])
def test_a_link_the_page_cannot_take_as_given_says_so(client, query, field, message):
    # ?ctx=32k was dropped (the page planned 128k) and a repeated field took its last value
    page = client.get("/?" + query)
    assert page.status_code == 422 and "Fits:" not in page.text
    assert f'<span class="err" id="err-{field}">{message}' in page.text


def test_the_page_gives_every_line_the_cli_gives(client, capsys):
    # the page had no model line, no binding, no weights and overhead detail, no engine
    # table or engine verdict, and said "fits" in the format table by colour alone
    from app.cli import main

    args = {"model": "qwen3.5-27b", "context": "256k", "kv": "q8_0", "weights": "q4_k_m",
            "gpu": "4090", "engine": "llama.cpp"}
    page = client.get("/", params=args, headers={"HX-Request": "true"}).text
    main(["qwen3.5-27b", "--ctx", "256k", "--kv", "q8_0", "--weights", "q4_k_m", "--gpu",
          "4090", "--engine", "llama.cpp"])
    cli = capsys.readouterr().out.splitlines()
    import html

    text = html.unescape(page)
    assert f'id="model-line">{cli[0]}</p>' in text
    assert "Binding: kv (the KV cache for this context and sequence count exceeds what is " \
           "left)." in text
    # the weights and overhead the CLI's table gives, as one sentence
    weights = next(line for line in cli if line.startswith("weights "))
    size, detail = weights.split(None, 1)[1].split("  ", 1)
    assert f"Weights {size} ({detail.strip()}); overhead 1.06 GiB " \
           "(CUDA context 512 MiB + compute buffers for 512-token batches)." in text
    start = cli.index("engine llama.cpp, tp 1 × pp 1 × dp 1 on rtx-4090")
    engine = [line for line in cli[start:] if not line.startswith(("command: ", "note: ",
                                                                   "decode ", "prefill ",
                                                                   "verified "))]
    assert '<pre class="log" id="engine">' + "\n".join(engine) + "\n</pre>" in text
    assert next(line for line in cli if line.startswith("command: ")).removeprefix(
        "command: ") in text
    assert "2.8 GiB over the card's 23 GiB budget" in text
    assert "<td>q8_0 (chosen)</td><td>no</td>" in text
    # the decode and prefill estimates, as sentences
    for kind in ("decode", "prefill"):
        line = next(line for line in cli if line.startswith(f"{kind} "))
        assert f'id="{kind}">{kind.title()} {line.removeprefix(kind + " ")}.</p>' in text


def test_config_form_is_labelled_and_works_without_javascript(client):
    from kvcore import model_catalog

    home = client.get("/", params={"model": "qwen3-8b", "gpu": "h100", "context": "32k"}).text
    assert '<label for="config-text">' in home and '<label for="config-file">' in home
    assert 'enctype="multipart/form-data"' in home
    assert '<input type="hidden" name="page_gpu" value="h100">' in home
    # a browser without JavaScript posts the config form alone: the page's fields ride along
    cfg = next(e for e in model_catalog() if e.id == "qwen3-8b").config()
    page = client.post("/", data={"config": json.dumps(cfg), "page_gpu": "h100",
                                  "page_context": "32k", "page_gpus": "1", "page_kv_k": "f16",
                                  "page_kv_v": "f16", "page_weights": "auto",
                                  "page_engine": "raw", "page_sequences": "1"})
    assert page.status_code == 200
    assert "Fits: 32,768 tokens × 1 sequence on 1 × NVIDIA H100 SXM5 80GB" in page.text
    # with htmx the form's own fields come beside the copies: a box unchecked since the page
    # was drawn is absent, and its copy does not turn it on again
    fields = {"gpu": "h100", "context": "32k", "engine": "vllm", "kv_k": "f16", "kv_v": "f16",
              "weights": "auto", "sequences": "1"}
    hx = {"HX-Request": "true"}
    on = client.post("/", data={"config": json.dumps(cfg), **fields, "enable_lora": "true",
                                "page_enable_lora": "true"}, headers=hx)
    off = client.post("/", data={"config": json.dumps(cfg), **fields,
                                 "page_enable_lora": "true"}, headers=hx)
    assert "LoRA slots" in on.text and "LoRA slots" not in off.text


def _nemotron_h_text():
    from kvcore import model_catalog

    # the bundled Nemotron-H-56B config is the Hub's, with time_step_limit [0.0, Infinity]
    text = next(e for e in model_catalog() if e.id == "nemotron-h-56b-base-8k").config()
    return json.dumps(text)


def test_api_and_page_take_configs_with_infinity(client):
    text = _nemotron_h_text()
    assert "Infinity" in text
    body = ('{"config": ' + text + ', "gpu": "h200", "context": "8k"}').encode()
    api = client.post("/api/v1/plan", content=body,
                      headers={"content-type": "application/json"})
    assert api.status_code == 200, api.text
    # 10 attention layers × 8 KV heads × (128 + 128) × 2 bytes
    assert api.json()["bytes_per_token"] == 10 * 8 * 256 * 2
    page = client.post("/", data={"config": text, "gpu": "h200", "context": "8k"},
                       headers={"HX-Request": "true"})
    assert page.status_code == 200 and "Fits:" in page.text
    bad = text.replace('"hidden_size": 8192', '"hidden_size": NaN')
    r = client.post("/api/v1/plan", content=('{"config": ' + bad + ', "gpu": "h200"}').encode(),
                    headers={"content-type": "application/json"})
    assert r.status_code in (400, 422) and r.json()["ok"] is False
    assert "'hidden_size' must be a finite integer, got NaN" in r.json()["error"]


def test_page_takes_a_pasted_config_over_a_mebibyte(client):
    from kvcore import model_catalog

    # nvidia/MiniMax-M3-NVFP4's config.json is 3.1 MB: a pasted field that large is read
    cfg = next(e for e in model_catalog() if e.id == "qwen3-8b").config()
    cfg["quantization_config"] = {"ignore": [f"model.layers.{i}.mlp.experts.{j}"
                                             for i in range(400) for j in range(256)]}
    text = json.dumps(cfg)
    assert len(text) > 3_000_000
    page = client.post("/", data={"config": text, "gpu": "4090", "context": "32k"},
                       headers={"HX-Request": "true"})
    assert page.status_code == 200 and "Fits:" in page.text


def test_the_page_plans_llama_cpp_s_host_memory_placement(client):
    r = client.get("/", params={"model": "gpt-oss-120b", "gpu": "4090", "engine": "llama.cpp",
                                "context": "64k", "n_cpu_moe": "all", "host_bandwidth": "80"})
    assert r.status_code == 200
    text = r.text.replace("&#39;", "'")
    assert "--cpu-moe keeps the routed experts of blocks 0–35 in host memory" in text
    assert "from host memory at 80.0 GB/s," in text
    # the API link asks the same: the page's "all" is the API's cpu_moe
    assert "cpu_moe=true" in text and "n_cpu_moe=" not in text.split("/api/v1/plan?")[1][:300]
    api = client.get("/api/v1/plan", params={"model": "gpt-oss-120b", "gpu": "4090",
                                             "engine": "llama.cpp", "context": "64k",
                                             "cpu_moe": "true", "host_bandwidth": "80"}).json()
    rate = f"{api['decode']['tokens_per_s_per_sequence']:,.1f} tokens/s per sequence"
    assert rate in text
    r = client.get("/", params={"model": "llama-3.1-70b", "gpu": "4090", "engine": "llama.cpp",
                                "weights": "q4_k_m", "ngl": "40"})
    assert r.status_code == 200 and "-ngl 40 keeps blocks 0–40 in host memory" in r.text
    # over two cards, split 3:1 (the API link carries the split)
    r = client.get("/", params={"model": "llama-3.1-70b", "gpu": "4090", "gpus": "2",
                                "engine": "llama.cpp", "weights": "q4_k_m", "ngl": "60",
                                "tensor_split": "3,1"})
    assert r.status_code == 200 and "tensor_split=3%2C1" in r.text
    assert "-ngl 60 -ts 3,1 keeps blocks 0–20 in host memory" in r.text
    assert "CUDA0 blocks 21–65; CUDA1 blocks 66–79 and the output layer" in r.text


def test_the_api_takes_a_tensor_split_as_numbers_or_text(client):
    body = {"model": "llama-3.1-70b", "gpu": "4090", "gpus": 2, "engine": "llama.cpp",
            "weights": "q4_k_m", "ngl": 60}
    posted = client.post("/api/v1/plan", json={**body, "tensor_split": [3, 1]}).json()
    got = client.get("/api/v1/plan", params={**body, "tensor_split": "3,1"}).json()
    placed = posted["engine_report"]["extra"]["placement"]
    assert placed["tensor_split"] == [45, 15] and got["engine_report"] == posted["engine_report"]
    assert "-ngl 60 -ts 3,1" in posted["engine_report"]["command"]
    for bad in ([0, 0], [1e300, 1], [-1, 1], "3;1"):
        r = client.post("/api/v1/plan", json={**body, "tensor_split": bad})
        assert r.status_code == 422 and r.json()["field"] == "tensor_split", bad
    r = client.post("/api/v1/plan", json={**body, "tensor_split": [1, 1, 1]})
    assert r.status_code == 422 and "3 shares for 2 cards" in r.json()["error"]


@pytest.mark.parametrize("params,field,message", [
    ({"ngl": "lots", "engine": "llama.cpp"}, "ngl", "ngl must be a whole number of layers"),
    ({"n_cpu_moe": "some", "engine": "llama.cpp"}, "n_cpu_moe", "whole number of blocks"),
    ({"host_bandwidth": "fast", "engine": "llama.cpp"}, "host_bandwidth", "number of GB/s"),
    ({"ngl": "10"}, "ngl", "ngl is a setting of llama.cpp"),
    ({"tensor_split": "3,x", "engine": "llama.cpp", "gpus": "2"}, "tensor_split",
     "tensor_split must be shares separated by commas"),
    ({"tensor_split": "3,1,1", "engine": "llama.cpp", "gpus": "2"}, "tensor_split",
     "tensor_split gives 3 shares for 2 cards"),
])
def test_the_page_names_a_bad_placement_field(client, params, message, field):
    r = client.get("/", params={"model": "llama-3.1-8b", "gpu": "4090", **params})
    assert r.status_code == 422
    err = r.text.split(f'id="err-{field}">')[1].split("</span>")[0]
    assert message in err.replace("&#39;", "'")


def test_the_models_page_lists_what_fit_runs_with_host_memory(client):
    r = client.get("/models", params={"gpu": "4090", "context": "32k", "weights": "q4_k_m",
                                      "engine": "llama.cpp"})
    assert r.status_code == 200
    para = r.text.split('id="host-fit">')[1].split("</p>")[0]
    assert "gpt-oss-120b</a>" in para and "tok/s)" in para
    r = client.get("/models", params={"gpu": "4090", "context": "32k", "engine": "vllm"})
    assert 'id="host-fit"' not in r.text


def test_the_gpus_page_filters_by_maker_and_memory(client):
    r = client.get("/gpus", params={"vendor": "amd", "min_memory": "24GiB"})
    ids = re.findall(r'<tr><td><a href="/\?gpu=([^"]+)">', r.text)
    every = client.get("/api/v1/gpus").json()
    expected = [g["id"] for g in every
                if g["vendor"] == "amd" and g["memory_bytes"] >= 24 << 30]
    assert r.status_code == 200 and ids == expected and "rx-7900-xtx" in ids
    assert f"{len(ids)} of {len(every)} cards" in r.text
    assert '<option value="amd" selected>' in r.text
    # the form's empty fields are no filter
    everything = client.get("/gpus", params={"vendor": "", "min_memory": ""})
    assert f"{len(every)} of {len(every)} cards" in everything.text
    bad = client.get("/gpus", params={"min_memory": "24"})
    assert bad.status_code == 422 and "needs its unit" in bad.text


def test_the_gpus_page_gives_each_card_s_host_link(client):
    r = client.get("/gpus")
    row = r.text.split('href="/?gpu=rtx-4060"')[1].split("</tr>")[0]
    assert "PCIe 4.0 x8<br><small>15.8 GB/s</small>" in row
    mac = r.text.split('href="/?gpu=m3-max"')[1].split("</tr>")[0]
    assert "<td>–</td>" in mac


def test_the_page_takes_the_host_link_and_host_memory(client):
    params = {"model": "gpt-oss-120b", "gpu": "4090", "engine": "llama.cpp", "context": "64k",
              "n_cpu_moe": "all", "host_link": "16", "host_memory": "48GiB"}
    r = client.get("/", params=params)
    text = r.text.replace("&#39;", "'")
    assert "(7,977.6 GB at 16.0 GB/s)" in text
    assert "what llama.cpp keeps in host memory (67.97 GiB) exceeds the 48 GiB given" in text
    assert "host_link=16" in text and "host_memory=48GiB" in text
    r = client.get("/", params={**params, "host_memory": "lots"})
    assert r.status_code == 422
    assert r.text.split('id="err-host_memory">')[1].split("</span>")[0].strip()


def test_the_page_takes_llama_server_s_cache_ram_and_ctx_checkpoints(client):
    params = {"model": "gemma-3-27b-it", "gpu": "3090", "engine": "llama.cpp",
              "weights": "q4_k_m", "context": "32k"}
    text = client.get("/", params=params).text
    assert "a prompt cache of up to 8 GiB (--cache-ram 8192" in text
    assert "up to 32 context checkpoints a slot of 624.02 MiB each" in text
    r = client.get("/", params={**params, "cache_ram": "0", "ctx_checkpoints": "4"})
    text = r.text.replace("&#39;", "'")
    assert r.status_code == 200 and "--cache-ram 0 --ctx-checkpoints 4" in text
    assert "prompt cache of up" not in text
    assert "up to 4 context checkpoints a slot of 624.02 MiB each" in text
    assert "cache_ram=0" in text and "ctx_checkpoints=4" in text  # the API link carries them
    api = client.get("/api/v1/plan", params={**params, "cache_ram": "-1"}).json()
    assert api["engine_report"]["extra"]["server_host"]["cache_ram_mib"] == -1
    assert client.get("/", params={**params, "cache_ram": "-1"}).status_code == 200
    r = client.get("/", params={**params, "cache_ram": "lots"})
    assert r.status_code == 422
    assert "cache_ram must be a whole number" in r.text.split('id="err-cache_ram">')[1]
    # a setting of llama.cpp's: under vLLM the field says so
    r = client.get("/", params={**params, "engine": "vllm", "weights": "auto",
                                "ctx_checkpoints": "4"})
    assert r.status_code == 422
    assert "setting of llama.cpp" in r.text.split('id="err-ctx_checkpoints">')[1]


def test_the_page_takes_vllm_s_cpu_offload_gb(client):
    params = {"model": "llama-3.1-8b", "gpu": "3060", "engine": "vllm", "context": "12k"}
    plain = client.get("/", params=params, headers={"HX-Request": "true"}).text
    assert "Does not fit" in plain
    r = client.get("/", params={**params, "cpu_offload_gb": "7"}, headers={"HX-Request": "true"})
    text = r.text.replace("&#39;", "'")
    assert r.status_code == 200 and "Fits: 12,288 tokens" in text
    assert "weights in host (--cpu-offload-gb)" in text and "--cpu-offload-gb 7" in text
    r = client.get("/", params={**params, "cpu_offload_gb": "lots"})
    assert r.status_code == 422
    assert "cpu_offload_gb must be GiB from 0 to 1,048,576, got &#39;lots&#39;" in \
        r.text.split('id="err-cpu_offload_gb">')[1].split("</span>")[0]
    # a setting of vLLM's: under llama.cpp the field says so
    r = client.get("/", params={**params, "engine": "llama.cpp", "cpu_offload_gb": "6"})
    assert r.status_code == 422 and "setting of vLLM" in r.text


def test_the_models_page_lists_each_entry_s_twins_and_links_their_page(client):
    text = client.get("/models").text
    row = text.split('href="/models/llama-3.1-70b-instruct">')[1].split("</td>")[0]
    assert 'also <a href="/models/meta-llama/Llama-3.3-70B-Instruct">' in row
    page = client.get("/models/meta-llama/Llama-3.3-70B-Instruct")
    assert page.status_code == 200 and "Llama-3.3-70B-Instruct" in page.text


def test_a_phone_gets_its_own_chart_with_the_same_marks(client):
    params = {"model": "qwen3.5-27b", "gpu": "4090", "context": "128k", "kv_k": "q8_0",
              "kv_v": "q8_0", "weights": "q4_k_m"}
    part = client.get("/", params=params, headers={"HX-Request": "true"}).text
    wide, narrow = part.split('<svg class="chart')[1:3]
    assert narrow.startswith(' narrow" viewBox="0 0 400 280"')
    marks = [re.search(r'data-context="(\d+)" data-bytes="(\d+)"', svg).groups()
             for svg in (wide, narrow)]
    assert marks[0] == marks[1]
    assert re.findall(r'data-series="([^"]+)"', wide) == re.findall(r'data-series="([^"]+)"',
                                                                     narrow)


def test_the_asked_contexts_label_steps_below_the_card_label_it_would_cover():
    from app.charts import NARROW, memory_chart

    # the point just left of the middle, its line just under the card's limit: above the
    # point its label would run into "card 22.5 GiB" at the right edge
    pts = [(x, 17 * 2**30 + x * 2**15) for x in range(0, 262_145, 16_384)]
    ask = 17 * 2**30 + 131_072 * 2**15
    svg = memory_chart([("q8_0", pts)], limit_bytes=int(22.5 * 2**30), max_context=None,
                       context=131_072, ask_bytes=ask, size=NARROW, narrow=True)
    cy = float(re.search(r'cy="([\d.]+)" r="5" class="ask"', svg).group(1))
    y = float(re.search(r'y="([\d.]+)" text-anchor="(?:start|end)" class="ask-label"',
                        svg).group(1))
    assert y > cy  # below the point
    # where nothing is in the way it stays above
    svg = memory_chart([("q8_0", pts)], limit_bytes=80 * 2**30, max_context=None,
                       context=131_072, ask_bytes=ask, size=NARROW, narrow=True)
    cy = float(re.search(r'cy="([\d.]+)" r="5" class="ask"', svg).group(1))
    y = float(re.search(r'y="([\d.]+)" text-anchor="(?:start|end)" class="ask-label"',
                        svg).group(1))
    assert y < cy


def test_the_form_lays_the_model_over_its_cards_by_tp_pp_and_dp(client):
    import html
    import re

    params = {"model": "llama-3.1-70b", "gpu": "h100", "engine": "vllm", "context": "32k",
              "tp": "2", "pp": "2"}
    page = client.get("/", params=params)
    assert page.status_code == 200
    api = client.get("/api/v1/plan", params=params).json()
    even = client.get("/api/v1/plan", params={**params, "tp": "4", "pp": "1"}).json()
    # the page plans tp 2 × pp 2 (not the 4-way tensor parallel four cards default to)
    assert api["max_context"] != even["max_context"]
    assert f"max context {api['max_context']:,}" in page.text
    assert "--tensor-parallel-size 2 --pipeline-parallel-size 2" in page.text
    # the layout's group is open and holds the values; the JSON link carries them
    assert '<details class="placement" open>\n    <summary>Layout over the cards' in page.text
    assert 'id="pp" name="pp" value="2"' in page.text
    link = html.unescape(re.search(r'class="json-link"><a href="([^"]+)"', page.text)[1])
    assert client.get(link).json()["max_context"] == api["max_context"]
    # data parallel: two replicas of tp 2
    dp = client.get("/", params={**params, "pp": "", "dp": "2"})
    assert dp.status_code == 200 and "--data-parallel-size 2" in dp.text
    # bad sizes are refused next to their own field; a count that disagrees, next to Cards
    bad = client.get("/", params={**params, "tp": "two"})
    assert bad.status_code == 422
    assert re.search(r'id="err-tp">tp must be a whole number', bad.text)
    bad = client.get("/", params={**params, "gpus": "8"})
    assert bad.status_code == 422
    assert "gpus is 8 but tp × pp × dp is 4" in re.search(r'id="err-gpus">([^<]*)', bad.text)[1]


def test_a_launch_commands_layout_fills_the_form(client):
    page = client.get("/", params={"command": "vllm serve meta-llama/Llama-3.1-70B-Instruct "
                                              "--tensor-parallel-size 2 "
                                              "--pipeline-parallel-size 2", "gpu": "h100"})
    assert page.status_code == 200
    assert 'id="tp" name="tp" value="2"' in page.text
    assert 'id="pp" name="pp" value="2"' in page.text


def test_a_card_link_keeps_the_layout_the_cards_were_found_in(client):
    # without a card the page lists the cards that fit, each a link to the plan on it: with
    # pp 2 they are found as two pipeline stages, and the link plans that, not tensor parallel
    import html

    params = {"model": "llama-3.1-70b", "engine": "vllm", "context": "32k", "pp": "2"}
    page = client.get("/", params=params)
    assert page.status_code == 200
    links = [html.unescape(a.split('"')[0]) for a in page.text.split('href="/?')[1:]
             if "gpu=" in a.split('"')[0]]
    assert links and all("pp=2" in a and "&gpu=2x" in a for a in links), links
    card = links[0].split("&gpu=2x")[1].split("&")[0]
    plan = client.get("/api/v1/plan", params={**params, "gpu": f"2x{card}"}).json()
    assert plan["fits"] is True and plan["parallel"]["pp"] == 2


def _form_fields(text):
    """The plan form's fields as a browser would send them (a check box only when checked)."""
    import html
    import re

    form = text.split('<form id="plan"', 1)[1].split("</form>", 1)[0]
    fields = {}
    for tag in re.findall(r"<input [^>]*>", form):
        name = re.search(r'name="([^"]+)"', tag)
        value = re.search(r'value="([^"]*)"', tag)
        if not name or (' type="checkbox"' in tag and " checked" not in tag):
            continue
        fields[name[1]] = html.unescape(value[1] if value else "")
    for name, body in re.findall(r'<select id="\w+" name="(\w+)">(.*?)</select>', form):
        fields[name] = re.search(r"<option selected>([^<]*)</option>", body)[1]
    return {k: v for k, v in fields.items() if v}


@pytest.mark.parametrize("extra", [
    {"gpu_memory_utilization": "0.5"},
    {"kv_budget": "10GiB"},
    {"enable_lora": "true", "max_lora_rank": "64"},
    {"no_extensible_kv_cache": "true", "max_num_batched_tokens": "4096"},
])
def test_the_forms_engine_settings_plan_as_the_api_plans_them(client, extra):
    params = {"model": "llama-3.1-8b", "gpu": "h100", "engine": "vllm", "context": "32k"}
    plain = client.get("/api/v1/plan", params=params).json()
    api = client.get("/api/v1/plan", params={**params, **extra}).json()
    assert api["max_context"] != plain["max_context"]
    page = client.get("/", params={**params, **extra})
    assert page.status_code == 200
    assert f"max context {api['max_context']:,}," in page.text
    # the settings' group opens, and the form sends them again on the next change
    assert '<details class="placement settings" open>' in page.text or "enable_lora" in extra
    sent = _form_fields(page.text)
    assert {k: sent.get(k) for k in extra} == extra
    again = client.get("/", params=sent, headers={"HX-Request": "true"})
    assert f"max context {api['max_context']:,}," in again.text


@pytest.mark.parametrize(("extra", "field", "message"), [
    ({"gpu_memory_utilization": "1.5"}, "gpu_memory_utilization",
     "gpu_memory_utilization: Input should be less than or equal to 1"),
    ({"block_size": "x"}, "block_size", "block_size: Input should be a valid integer"),
    ({"hot": "bad"}, "hot", "hot must look like f16:4096"),
    ({"fully_sharded_loras": "true"}, "fully_sharded_loras",
     "fully_sharded_loras shapes the LoRA slots, which only --enable-lora"),
    # a switch given another word than true or false is refused, not taken for on
    ({"mtp": "bf16"}, "mtp", "mtp: Input should be a valid boolean"),
    ({"enable_lora": "x"}, "enable_lora", "enable_lora: Input should be a valid boolean"),
    ({"cpu_moe": "maybe"}, "n_cpu_moe", "cpu_moe: Input should be a valid boolean"),
])
def test_a_bad_engine_setting_is_named_beside_its_field(client, extra, field, message):
    import re

    params = {"model": "llama-3.1-8b", "gpu": "h100", "engine": "vllm", "context": "32k"}
    page = client.get("/", params={**params, **extra})
    assert page.status_code == 422 and "Fits:" not in page.text
    shown = re.search(rf'id="err-{field}">([^<]*)', page.text)[1].replace("&#39;", "'")
    assert shown.startswith(message), shown
    api = client.get("/api/v1/plan", params={**params, **extra})
    assert api.status_code == 422


def test_a_commands_engine_settings_stay_when_the_form_changes(client):
    # the command page filled the form with the card, context and formats only: the next
    # change of the form planned without --gpu-memory-utilization and --enable-lora
    command = ("vllm serve meta-llama/Llama-3.1-8B-Instruct --gpu-memory-utilization 0.5 "
               "--enable-lora --max-model-len 32768")
    page = client.get("/", params={"command": command, "gpu": "h100"})
    assert page.status_code == 200
    sent = _form_fields(page.text)
    assert sent["gpu_memory_utilization"] == "0.5" and sent["enable_lora"] == "true"
    api = client.post("/api/v1/command", json={"command": command, "gpu": "h100"}).json()
    again = client.get("/", params=sent, headers={"HX-Request": "true"})
    assert f"max context {api['max_context']:,}," in again.text


def test_a_commands_cpu_moe_stays_when_the_form_changes(client):
    # llama-server --cpu-moe left the form's n_cpu_moe blank: the next change planned every
    # expert on the card
    command = "llama-server -m gpt-oss-120b-mxfp4.gguf -c 65536 --cpu-moe"
    page = client.get("/", params={"command": command, "gpu": "4090"})
    assert page.status_code == 200
    sent = _form_fields(page.text)
    assert sent["n_cpu_moe"] == "all"
    api = client.post("/api/v1/command", json={"command": command, "gpu": "4090"}).json()
    again = client.get("/", params=sent, headers={"HX-Request": "true"})
    assert f"max context {api['max_context']:,}," in again.text
    assert "--cpu-moe keeps the routed experts" in again.text.replace("&#39;", "'")


def test_the_api_link_of_a_page_with_cpu_moe_plans_on_the_page(client):
    # the page's JSON link says cpu_moe=true for n_cpu_moe "all": the page takes it back
    params = {"model": "gpt-oss-120b", "gpu": "4090", "engine": "llama.cpp", "cpu_moe": "true"}
    page = client.get("/", params=params)
    assert page.status_code == 200 and 'name="n_cpu_moe" value="all"' in page.text
    api = client.get("/api/v1/plan", params=params).json()
    assert f"max context {api['max_context']:,}," in page.text


def test_cpu_moe_beside_a_block_count_wins_on_the_page_as_in_the_api(client):
    # the API and the CLI take both (--cpu-moe puts every block's experts in host memory, as
    # llama-server does with both flags): a link with both plans what the API plans
    params = {"model": "gpt-oss-120b", "gpu": "4090", "engine": "llama.cpp", "cpu_moe": "true",
              "n_cpu_moe": "3", "context": "32k"}
    page = client.get("/", params=params)
    assert page.status_code == 200 and 'name="n_cpu_moe" value="all"' in page.text
    api = client.get("/api/v1/plan", params=params).json()
    alone = client.get("/api/v1/plan", params={k: v for k, v in params.items()
                                                if k != "n_cpu_moe"}).json()
    assert api["max_context"] == alone["max_context"]
    assert f"max context {api['max_context']:,}," in page.text


@pytest.mark.parametrize("layout", [{"attn_dp": "8"}, {"tp": "4", "pp": "2"}])
def test_the_models_page_takes_a_layout_as_the_api_does(client, layout):
    import re
    from html import unescape

    ask = {"gpu": "8xh200", "context": "32k", "sequences": "64", "engine": "sglang", **layout}
    page = client.get("/models", params=ask)
    found = client.post("/api/v1/find-model", json={k: int(v) if k in layout else v
                                                    for k, v in ask.items()}).json()
    assert page.status_code == 200
    table = page.text.split('id="fits"')[1].split("</table>")[0]
    links = [unescape(h) for h in re.findall(r'<tr><td><a href="(/\?[^"]+)"', table)]
    assert [re.search(r"model=([^&]+)", h)[1] for h in links] == \
        [r["model"] for r in found["fits"]]
    # its heading says the layout, and each row's plan keeps it (and fits)
    head = re.search(r'<h2 id="fit-head">(.*?)</h2>', page.text)[1]
    assert ("with attention dp 8" if "attn_dp" in layout else "as tp 4 × pp 2") in head
    assert all(f"{k}={v}" in links[0] for k, v in layout.items())
    plan = client.get(links[0])
    assert plan.status_code == 200 and "Fits" in plan.text
    wrong = client.get("/models", params={"gpu": "8xh200", "engine": "vllm", "attn_dp": "8"})
    assert wrong.status_code == 422 and "attn_dp is SGLang" in unescape(wrong.text)


def test_a_sglang_dp_attention_command_fills_the_form_and_plans_as_the_api(client):
    import re

    command = ("python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --tp 8 "
               "--dp 8 --enable-dp-attention --enable-dp-lm-head --moe-a2a-backend deepep "
               "--cuda-graph-max-bs-decode 128 --disable-prefill-cuda-graph "
               "--context-length 32768 --max-running-requests 64")
    page = client.get("/", params={"command": command, "gpu": "h200"})
    assert page.status_code == 200
    sent = _form_fields(page.text)
    assert {k: sent.get(k) for k in ("attn_dp", "moe_a2a_backend", "cuda_graph_max_bs_decode",
                                     "enable_dp_lm_head", "disable_prefill_cuda_graph")} == {
        "attn_dp": "8", "moe_a2a_backend": "deepep", "cuda_graph_max_bs_decode": "128",
        "enable_dp_lm_head": "true", "disable_prefill_cuda_graph": "true"}
    api = client.post("/api/v1/command", json={"command": command, "gpu": "h200"}).json()
    assert f"max context {api['max_context']:,}," in page.text
    # the form's next change plans the same
    again = client.get("/", params=sent, headers={"HX-Request": "true"})
    assert f"max context {api['max_context']:,}," in again.text
    assert re.search(r"--attn-dp-size 8 .*--enable-dp-lm-head --moe-a2a-backend deepep",
                     again.text)


def test_a_cards_bar_holds_the_layers_its_engine_puts_on_the_binding_stage(client):
    # SGLang puts DeepSeek-V3's 61 layers on two stages as 30 + 31 (vLLM's rule: 31 + 30);
    # the binding card of stage 1 caches 31 layers' 576-value bf16 latent rows
    params = {"model": "deepseek-v3", "gpu": "16xh200", "engine": "sglang", "tp": "8",
              "pp": "2", "context": "64k", "sequences": "4", "kv_k": "bf16", "kv_v": "bf16",
              "weights": "auto"}
    api = client.get("/api/v1/plan", params=params).json()
    assert api["engine_report"]["binding_stage"] == 1
    kv = 4 * 65536 * 31 * 576 * 2
    assert api["engine_report"]["extra"]["cell_bytes"] == 31 * 576 * 2
    page = client.get("/", params=params).text
    bar = page[page.index('class="bar"'):page.index("</ul>", page.index('class="bar"'))]
    assert f"KV cache: {format_bytes(kv, 1)}" in bar
    assert format_bytes(4 * 65536 * 30 * 576 * 2, 1) not in bar


def test_the_format_table_prices_the_engines_pool_and_reads_its_window(client):
    # Gemma 3 under SGLang: one pool in which every layer holds every token (bytes a token
    # past the windows = within), the decode reading each sliding layer's window only: the
    # same tokens a second as the plan's own line
    import re

    params = {"model": "gemma-3-27b-it", "gpu": "h200", "context": "32k", "engine": "sglang",
              "kv_k": "fp8_e4m3", "kv_v": "fp8_e4m3"}
    part = client.get("/", params=params, headers={"HX-Request": "true"}).text
    api = client.get("/api/v1/plan", params=params).json()
    assert api["marginal_bytes_per_token"] == api["bytes_per_token"] == 62 * 16 * 128 * 2
    row = re.search(r"<tr[^>]*><td>fp8_e4m3[^<]*</td>(.*?)</tr>", part, re.S).group(1)
    rate = f"{api['decode']['tokens_per_s_per_sequence']:.1f}"
    assert rate in row


def test_find_format_lists_the_formats_the_engine_refuses(client):
    # vLLM's TurboQuant formats on Gemma 3 with its vision tower: refused, listed with the reason
    body = {"model": "gemma-3-27b-it", "engine": "vllm", "gpu": "4090", "context": "32k",
            "weights": "int4"}
    rows = client.post("/api/v1/find-format", json=body).json()
    refused = {r["format"]: r for r in rows if not r["offered"]}
    assert "image-prefix" in refused["tq_4bit"]["refused"]
    assert refused["tq_4bit"]["max_context"] == 0 and not refused["tq_4bit"]["fits"]
    assert rows.index(refused["tq_4bit"]) > max(i for i, r in enumerate(rows) if r["offered"])
    served = client.post("/api/v1/find-format", json={**body, "language_model_only": True}).json()
    assert any(r["format"] == "tq_4bit" and r["offered"] for r in served)
