"""Replay real engine start-up logs through the engine profiles.

Each log file (TOML: engine, model, flags, the verbatim excerpt, the printed numbers, a link)
carries a ``[replay]`` table saying how to rebuild the plan: a catalog model or the geometry the
log states, context, sequences, KV format, parallel layout, and either the memory the engine
printed as available for KV (``kv_budget_*``) or what a forward prediction needs. ``replay()``
returns one row per compared number with the prediction and the error.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalog import load_model
from .engines import EngineRequest, EngineSettings, engine_plan, llamacpp, vllm
from .engines.llamacpp_host import checkpoint
from .formats import get_format
from .gpus import find_gpu
from .hf import spec_from_config
from .kv import CacheOptions, kv_row_bytes
from .model import ModelSpec
from .parallel import Parallel, rank_spec

__all__ = ["LogCase", "Row", "load_cases", "replay"]

GiB = 1024**3
MiB = 1024**2
#: default relative error bound for token capacities where the log gives all inputs
TOKEN_BOUND = 0.03


@dataclass(frozen=True)
class LogCase:
    name: str
    data: dict[str, Any]

    @property
    def replay(self) -> dict[str, Any]:
        return dict(self.data.get("replay", {}))

    @property
    def skip(self) -> str | None:
        return self.replay.get("skip")


@dataclass(frozen=True)
class Row:
    case: str
    engine: str
    model: str
    field: str
    printed: float
    predicted: float
    #: largest relative error allowed (0 for byte-exact llama.cpp sizes)
    bound: float
    explain: str = ""
    link: str = ""

    @property
    def error(self) -> float:
        if self.printed == 0:
            return abs(self.predicted)
        return (self.predicted - self.printed) / self.printed

    @property
    def ok(self) -> bool:
        if self.bound == 0:
            # printed with two decimals: exact means within the rounding of the print
            return abs(self.predicted - self.printed) <= 0.0051
        return abs(self.error) <= self.bound


def load_cases(folder: Path) -> list[LogCase]:
    return [LogCase(p.stem, tomllib.loads(p.read_text("utf-8")))
            for p in sorted(folder.glob("*.toml"))]


def _spec(r: dict[str, Any]) -> ModelSpec:
    if "model" in r:
        return load_model(r["model"], allow_local=False, allow_hub=False)
    g = dict(r["geometry"])
    kv_heads = g.pop("kv_heads")
    cfg: dict[str, Any] = {
        "model_type": "llama", "num_hidden_layers": g.pop("layers"),
        "num_key_value_heads": kv_heads, "head_dim": g.pop("head_dim"),
        # a log gives only the KV heads: 32 query heads, or the fewest grouping them evenly
        "num_attention_heads": kv_heads * -(-32 // kv_heads), "hidden_size": 4096,
        "vocab_size": 32000,
        "intermediate_size": 11008,
    }
    if "full_attention_interval" in g:
        cfg["model_type"] = "qwen3_next"
    cfg.update(g)
    return spec_from_config(cfg, name="log geometry", source="log geometry")


def _opts(r: dict[str, Any]) -> CacheOptions:
    kv = r.get("kv", "f16")
    return CacheOptions(kv_k=get_format(r.get("kv_k", kv)), kv_v=get_format(r.get("kv_v", kv)),
                        mtp=bool(r.get("mtp", False)))


def _budget(r: dict[str, Any]) -> int | None:
    if "kv_budget_bytes" in r:
        return int(r["kv_budget_bytes"])
    if "kv_budget_gib" in r:
        return int(r["kv_budget_gib"] * GiB)
    return None


def _predict(case: LogCase) -> dict[str, float]:
    r = case.replay
    engine = case.data["engine"]
    spec = _spec(r)
    opts = _opts(r)
    par = Parallel(tp=int(r.get("tp", 1)), pp=int(r.get("pp", 1)))
    ctx, seqs = int(r.get("context", 4096)), int(r.get("sequences", 1))
    out: dict[str, float] = {}
    if engine == "llama.cpp":
        ubatch = int(r.get("n_ubatch", llamacpp.N_UBATCH))
        layout = llamacpp.Layout(ctx, seqs, bool(r.get("kv_unified", False)), ubatch)
        swa_full = bool(r.get("swa_full", False))
        mem = llamacpp.Memory(spec, layout, opts, swa_full)
        out.update(kv_size_mib=mem.kv_bytes / MiB, k_mib=mem.k_bytes / MiB,
                   v_mib=mem.v_bytes / MiB, recurrent_size_mib=mem.state_bytes / MiB,
                   r_mib=mem.r_bytes / MiB, s_mib=mem.s_bytes / MiB)
        # each named cache's own size line (iSWA halves, DSA main/indexer, DeepSeek-V4's
        # compressed caches) and DeepSeek-V4's compressor states
        for c in mem.caches:
            if c.name:
                key = c.name.lower().replace("-", "_")
                out.update({f"{key}_size_mib": c.bytes / MiB, f"{key}_cells": c.cells,
                            f"{key}_layers": c.layers})
        out.update({f"{name}_state_mib": b / MiB for name, b in mem.states.items()})
        # one context checkpoint of a long sequence (llamacpp_host)
        out["checkpoint_mib"] = checkpoint(spec, opts, llamacpp.window_cells(spec, layout,
                                                                             swa_full))[0] / MiB
        return out
    if engine == "sglang":
        rank = rank_spec(spec, par)
        kb, vb = kv_row_bytes(rank, opts.kv_k, opts.kv_v)
        if "tokens" in r:
            tokens = int(r["tokens"])
        else:
            f = r["sglang_free_gib"]
            rest = int((f["after"] - f["before"] * (1 - f["mem_fraction_static"])) * GiB)
            tokens = rest // (kb + vb)
        out.update(total_tokens=tokens, k_size_gb=(tokens + 1) * kb / GiB,
                   v_size_gb=(tokens + 1) * vb / GiB)
        return out
    # every vLLM log here predates 0.34's extensible KV cache (a replay of a later one says
    # extensible = true)
    extensible = bool(r.get("extensible", False))
    settings = EngineSettings(
        gpu_memory_utilization=r.get("gpu_memory_utilization"),
        max_num_batched_tokens=r.get("max_num_batched_tokens"),
        tokens_per_block=r.get("tokens_per_block"), block_size=r.get("block_size"),
        extensible_kv_cache=extensible if engine == "vllm" else True)
    gpus = (find_gpu(r["gpu"]),) if "gpu" in r else ()
    weights = int(r["weights_gib"] * GiB) if "weights_gib" in r else None
    req = EngineRequest(spec=spec, context=ctx, sequences=seqs, cache=opts, gpus=gpus,
                        parallel=par, settings=settings, kv_budget_bytes=_budget(r),
                        weights_bytes=weights)
    rep = engine_plan(engine, req)
    if engine == "vllm":
        out.update(available_kv_gib=rep.kv_pool_bytes / GiB, kv_cache_tokens=rep.kv_tokens,
                   gpu_blocks=rep.blocks or 0, max_concurrency=rep.max_concurrency)
        fwd = r.get("forward")
        if fwd:
            freq = EngineRequest(
                spec=spec, context=ctx, sequences=seqs, cache=opts, parallel=par,
                gpus=(find_gpu(fwd["gpu"]),),
                settings=EngineSettings(
                    gpu_memory_utilization=fwd.get("gpu_memory_utilization"),
                    max_num_batched_tokens=fwd.get("max_num_batched_tokens"),
                    extensible_kv_cache=extensible))
            out["forward_available_kv_gib"] = vllm.plan(freq).kv_pool_bytes / GiB
    elif engine == "trtllm":
        out.update(max_tokens=rep.kv_tokens, kv_cache_gib=rep.kv_pool_bytes / GiB)
    return out


def replay(cases: list[LogCase]) -> list[Row]:
    rows: list[Row] = []
    for case in cases:
        if case.skip:
            continue
        r = case.replay
        printed = case.data["printed"]
        predicted = _predict(case)
        engine = case.data["engine"]
        default = 0.0 if engine == "llama.cpp" else TOKEN_BOUND
        bound = r.get("bound")
        fields = list(r["compare"])
        if "forward_available_kv_gib" in predicted and "available_kv_gib" in printed:
            fields.append("forward_available_kv_gib")
        for field in fields:
            key = "available_kv_gib" if field == "forward_available_kv_gib" else field
            rows.append(Row(
                case=case.name, engine=engine, model=case.data.get("model", ""), field=field,
                printed=float(printed[key]), predicted=float(predicted[field]),
                bound=(bound / 100 if bound is not None else default),
                explain=r.get("explain", ""), link=case.data.get("link", "")))
    return rows


def render_markdown(cases: list[LogCase], rows: list[Row]) -> str:
    """docs/ACCURACY.md: predicted against printed for every replayed log, and the skips."""
    lines = [
        "# Accuracy against real engine logs",
        "",
        "Generated by `python bench/accuracy.py` from `tests/data/engine_logs/` (one TOML per",
        "log excerpt found in public issues and docs: engine, version, model, flags, GPU, the",
        "verbatim lines, the printed numbers, the link, and how to replay it).",
        "`tests/test_engine_logs.py` replays every one and asserts the bound: llama.cpp sizes",
        "exact to the printed 0.01 MiB; vLLM, SGLang and TensorRT-LLM capacities within 3% where",
        "the log gives the inputs; a larger bound only with the explanation shown here.",
        "",
        "| log | engine | model | number | printed | predicted | error | bound |",
        "|---|---|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        bound = "exact" if r.bound == 0 else f"{r.bound * 100:g}%"
        lines.append(
            f"| [{r.case}]({r.link}) | {r.engine} | {r.model} | {r.field} | {r.printed:,.4g} | "
            f"{r.predicted:,.6g} | {r.error * 100:+.3f}% | {bound} |")
    ok = sum(r.ok for r in rows)
    exact = sum(1 for r in rows if r.bound == 0)
    lines += ["", f"{ok} of {len(rows)} numbers within their bound ({exact} byte-exact llama.cpp "
              "sizes); {} logs replayed, {} not replayable.".format(
                  len({r.case for r in rows}), sum(1 for c in cases if c.skip)), ""]
    explained = {r.case: r.explain for r in rows if r.explain}
    if explained:
        lines += ["## Larger misses, explained", ""]
        lines += [f"- **{case}**: {text}" for case, text in explained.items()]
        lines.append("")
    lines += ["## Logs not replayed", ""]
    lines += [f"- **{c.name}** ({c.data['engine']}): {c.skip}" for c in cases if c.skip]
    lines.append("")
    return "\n".join(lines)
