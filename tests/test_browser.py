"""A real browser (headless Chromium) drives the page: htmx updates in place, the URL follows."""

import os
import shutil
import time
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
playwright = pytest.importorskip("playwright.sync_api")

from app.localserver import running_server  # noqa: E402

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                                reason="headless Chromium not installed (.ci/run installs it)")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def server():
    with running_server() as (_proc, port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def changed(page, selector: str, before: str, timeout: float = 15) -> str:
    deadline = time.time() + timeout
    while time.time() < deadline:
        now = page.inner_text(selector)
        if now != before:
            return now
        time.sleep(0.1)
    raise AssertionError(f"{selector} did not change from {before!r}")


def test_live_updates_and_shareable_url(server, browser):
    page = browser.new_page(viewport={"width": 1280, "height": 2000})
    page.goto(f"{server}/?model=qwen3.5-27b&gpu=4090&context=128k&kv_k=q8_0&kv_v=q8_0")
    page.evaluate("window.__sameDocument = 1")
    verdict0 = page.inner_text("#verdict")
    chart0 = page.inner_html(".chartbox")
    assert verdict0.startswith(("Fits", "Does not fit")) and "131,072 tokens" in verdict0

    # pick another model
    page.fill("#model", "llama-3.1-8b")
    page.dispatch_event("#model", "change")
    verdict1 = changed(page, "#verdict", verdict0)
    # change the GPU
    page.fill("#gpu", "3060")
    page.dispatch_event("#gpu", "change")
    verdict2 = changed(page, "#verdict", verdict1)
    assert "RTX 3060" in verdict2
    # change the context
    page.fill("#context", "32k")
    page.dispatch_event("#context", "change")
    verdict3 = changed(page, "#verdict", verdict2)
    assert "32,768 tokens" in verdict3
    chart3 = page.inner_html(".chartbox")
    assert chart3 != chart0

    # no full page load happened, and the URL carries the plan
    assert page.evaluate("window.__sameDocument") == 1
    url = page.url
    for part in ("model=llama-3.1-8b", "gpu=3060", "context=32k"):
        assert part in url

    # the URL reproduces the plan in a fresh page
    other = browser.new_page()
    other.goto(url)
    assert other.inner_text("#verdict") == verdict3
    assert other.inner_html(".chartbox") == chart3

    # a bad value shows its sentence beside the field, in place
    page.fill("#context", "12x")
    page.dispatch_event("#context", "change")
    deadline = time.time() + 15
    while time.time() < deadline and not page.inner_text("#err-context"):
        time.sleep(0.1)
    assert "context" in page.inner_text("#err-context")
    assert page.evaluate("window.__sameDocument") == 1

    if os.environ.get("KVPLAN_SCREENSHOT"):
        shot = browser.new_page(viewport={"width": 1200, "height": 1700})
        shot.goto(f"{server}/?model=qwen3.5-27b&gpu=4090&context=256k&kv_k=q8_0&kv_v=tbq4"
                  "&weights=q4_k_m")
        shot.screenshot(path=os.environ["KVPLAN_SCREENSHOT"], full_page=True)


@pytest.mark.parametrize("path", ["/?model=qwen3.5-27b&gpu=4090&context=128k", "/models",
                                  "/models/deepseek-v3", "/gpus", "/measurements", "/api",
                                  "/nosuch"])
def test_phone_width_has_no_horizontal_page_scroll(server, browser, path):
    """Wide tables scroll inside their box; the page itself never scrolls sideways."""
    page = browser.new_page(viewport={"width": 390, "height": 844},
                            extra_http_headers={"Accept": "text/html"})
    page.goto(f"{server}{path}")
    assert page.locator("header.top").count() == 1  # a page of the app, not an error body
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 392, path


@pytest.mark.parametrize("path", ["/?model=qwen3.5-27b&gpu=4090&context=128k",
                                  "/?model=deepseek-v3&context=128k&sequences=4", "/models",
                                  "/models?gpu=4090&context=32k&weights=q4_k_m&engine=llama.cpp",
                                  "/models/deepseek-v3", "/gpus", "/measurements", "/api"])
def test_desktop_width_shows_every_table_whole(server, browser, path):
    """At 1,200 pixels no table hides a column behind a sideways scroll: long cells wrap."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.goto(f"{server}{path}")
    for details in page.locator("details").all():  # the API page's long lists, opened
        details.evaluate("e => e.open = true")
    cut = page.evaluate("""() => [...document.querySelectorAll('.scroll')]
        .filter(e => e.scrollWidth > e.clientWidth + 1)
        .map(e => (e.querySelector('th') || e).innerText.slice(0, 40))""")
    assert cut == [], (path, cut)


def test_open_option_groups_lay_their_fields_in_rows(server, browser):
    # an open group's fields sit side by side, not one under another; a LoRA field typed in
    # plans the slots in place
    page = browser.new_page(viewport={"width": 1200, "height": 1400})
    page.goto(f"{server}/?model=llama-3.1-8b&gpu=4090&context=32k&engine=vllm&cpu_offload_gb=1"
              "&max_loras=4")
    for first, second in (("#ngl", "#n_cpu_moe"), ("#max_loras", "#max_lora_rank")):
        a, b = page.locator(first).bounding_box(), page.locator(second).bounding_box()
        assert abs(a["y"] - b["y"]) < 1 and b["x"] > a["x"] + a["width"]
    before = page.inner_text("#verdict")
    page.fill("#max_lora_rank", "512")
    page.dispatch_event("#max_lora_rank", "change")
    after = changed(page, "#verdict", before)
    assert after != before
    assert "LoRA slots (4 × rank 512)" in page.content()
    page.close()


def test_engine_settings_and_layout_replan_in_place_and_go_into_the_url(server, browser):
    # the form had no field for vLLM's memory share, a switch or the tensor/pipeline layout
    page = browser.new_page(viewport={"width": 1200, "height": 1600})
    page.goto(f"{server}/?model=llama-3.1-8b&gpu=h100&context=32k&engine=vllm")
    page.click("details.settings > summary")
    a = page.locator("#gpu_memory_utilization").bounding_box()
    b = page.locator("#max_num_batched_tokens").bounding_box()
    assert abs(a["y"] - b["y"]) < 1 and b["x"] > a["x"] + a["width"]
    before = page.inner_text("#verdict")
    page.fill("#gpu_memory_utilization", "0.5")
    page.dispatch_event("#gpu_memory_utilization", "change")
    after = changed(page, "#verdict", before)
    assert "gpu_memory_utilization=0.5" in page.url
    page.click("text=LoRA adapters (--enable-lora)")
    page.check("#enable_lora")
    lora = changed(page, "#verdict", after)
    assert "enable_lora=true" in page.url and lora != after
    page.uncheck("#enable_lora")
    assert changed(page, "#verdict", lora) == after and "enable_lora" not in page.url
    page.click("text=Layout over the cards")
    page.fill("#pp", "2")
    page.dispatch_event("#pp", "change")
    stages = changed(page, "#verdict", after)
    assert "pp=2" in page.url and "on 2 × NVIDIA H100" in stages
    assert "--pipeline-parallel-size 2" in page.content()
    # the URL names what was set, not every blank field of the form
    assert "tp=" not in page.url and "ubatch=" not in page.url and "&ngl=" not in page.url
    assert "gpu_memory_utilization=0.5" in page.url
    page.close()


def test_a_phone_shows_the_chart_drawn_for_it_with_readable_text(server, browser):
    url = (f"{server}/?model=qwen3.5-27b&gpu=4090&context=128k&kv_k=q8_0&kv_v=q8_0"
           "&weights=q4_k_m")
    for width, shown, hidden in ((390, ".chart.narrow", ".chart:not(.narrow)"),
                                 (1200, ".chart:not(.narrow)", ".chart.narrow")):
        page = browser.new_page(viewport={"width": width, "height": 1200})
        page.goto(url)
        assert page.locator(shown).is_visible() and not page.locator(hidden).is_visible()
        # the axis labels' height on the screen, in CSS pixels
        heights = page.evaluate(
            f"[...document.querySelectorAll('{shown} text')].map(t => "
            "t.getBoundingClientRect().height)")
        assert min(heights) >= 9, (width, min(heights))
        page.close()
