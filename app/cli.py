"""The ``kvplan`` command: a thin layer over kvcore's public API.

    kvplan MODEL [--ctx 128k] [--seqs 4] [--kv q8_0 | --kv-k q8_0 --kv-v tbq4]
                 [--weights q4_k_m] [--gpu 4090] [--engine raw] [--json]
    kvplan models|gpus|formats [--json]
    kvplan serve [--host 127.0.0.1] [--port 8000]

Bad input prints one line and exits 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import kvcore
from kvcore import (
    CacheOptions,
    KvplanError,
    PlanRequest,
    find_gpu,
    format_bytes,
    get_format,
    load_model,
    parse_bytes,
    parse_count,
    parse_tokens,
    plan,
    plan_to_dict,
)
from kvcore.units import format_gib

SUBCOMMANDS = ("models", "gpus", "formats", "serve")
ENGINES = ("raw",)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _plan_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="kvplan",
        description="Will MODEL fit, at this context and this many parallel sequences, on this "
        "GPU, and in which KV-cache format? Byte-exact per layer kind.",
        epilog="Other commands: kvplan models|gpus|formats [--json], kvplan serve.",
    )
    p.add_argument("model", help="catalog id (kvplan models), Hub repo id, config.json path, "
                   "model folder or JSON text")
    p.add_argument("--ctx", "--context", dest="ctx", default="8k",
                   help="context per sequence: 8192, 128k, 1M (k = 1024; default 8k)")
    p.add_argument("--seqs", "--sequences", dest="seqs", default="1",
                   help="parallel sequences, each with its own cache (default 1)")
    p.add_argument("--kv", default=None, help="KV format for K and V (default f16)")
    p.add_argument("--kv-k", default=None, help="KV format for keys")
    p.add_argument("--kv-v", default=None, help="KV format for values")
    p.add_argument("--weights", default=None,
                   help="weight format: auto (the checkpoint), bf16, fp8, int4, q4_k_m, ...")
    p.add_argument("--gpu", default=None, help="catalog GPU (4090, h100, mi300x) or a size (24GiB)")
    p.add_argument("--engine", default="raw", help="allocation rules: raw (physics only)")
    p.add_argument("--hot", default=None, metavar="FMT:TOKENS",
                   help="hot/cold mix: the most recent TOKENS in FMT, older in --kv (f16:4096)")
    p.add_argument("--keep", default=None, metavar="FRACTION",
                   help="token eviction: keep this fraction of tokens (0-1]")
    p.add_argument("--keep-first", default="4", help="tokens always kept at the start (4)")
    p.add_argument("--keep-recent", default="128", help="recent tokens always kept (128)")
    p.add_argument("--state-dtype", default="f32", choices=("f32", "f16", "bf16"),
                   help="recurrent-state dtype (f32, as llama.cpp keeps it)")
    p.add_argument("--images", default="1", help="images per sequence (cross-attention models)")
    p.add_argument("--mtp", action="store_true", help="count MTP/draft layers and weights")
    p.add_argument("--overhead", default=None, help="runtime overhead instead of the estimate")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--version", action="version", version=f"kvplan {kvcore.__version__}")
    return p


def _list_parser(cmd: str) -> argparse.ArgumentParser:
    p = _Parser(prog=f"kvplan {cmd}", description=f"List the bundled {cmd}.")
    p.add_argument("--json", action="store_true", help="print JSON")
    return p


def _serve_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kvplan serve", description="Run the web app and REST API.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", default="8000")
    return p


def build_request(args: argparse.Namespace) -> PlanRequest:
    if args.engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, got '{args.engine}'")
    base = args.kv or "f16"
    kv_k = get_format(args.kv_k or base, field="kv_k")
    kv_v = get_format(args.kv_v or base, field="kv_v")
    hot_format, hot_tokens = None, 0
    if args.hot:
        fmt, sep, tokens = args.hot.partition(":")
        if not sep:
            raise UsageError(f"--hot must look like f16:4096, got '{args.hot}'")
        hot_format, hot_tokens = get_format(fmt, field="hot"), parse_tokens(tokens, field="hot")
    keep = 1.0
    if args.keep is not None:
        try:
            keep = float(args.keep)
        except ValueError:
            raise UsageError(f"--keep must be a fraction in (0, 1], got '{args.keep}'") from None
    opts = CacheOptions(
        kv_k=kv_k, kv_v=kv_v, hot_format=hot_format, hot_tokens=hot_tokens, keep_fraction=keep,
        keep_first=parse_count(args.keep_first, field="keep-first", minimum=0),
        keep_recent=parse_count(args.keep_recent, field="keep-recent", minimum=0),
        state_bytes_per_value=4 if args.state_dtype == "f32" else 2,
        images=parse_count(args.images, field="images", minimum=0, maximum=1000),
        mtp=args.mtp,
    )
    return PlanRequest(
        spec=load_model(args.model),
        context=parse_tokens(args.ctx),
        sequences=parse_count(args.seqs, field="sequences"),
        cache=opts,
        weights=args.weights,
        gpu=find_gpu(args.gpu) if args.gpu else None,
        overhead_bytes=parse_bytes(args.overhead, field="overhead") if args.overhead else None,
    )


def _table(rows: list[list[str]], right: Sequence[int] = ()) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def render_plan(data: dict[str, Any]) -> str:
    m = data["model"]
    seqs = data["sequences"]
    seq_word = "sequence" if seqs == 1 else "sequences"
    kv = data["kv_k"] if data["kv_k"] == data["kv_v"] else f"K {data['kv_k']} / V {data['kv_v']}"
    head = (f"{m['hub_repo'] or m['name']} ({m['model_type']}, {m['layers']} layers: "
            + ", ".join(f"{g['layers']} {g['kind']}" for g in m["groups"] if not g["mtp"]) + ")")
    rows = [["", "bytes", "detail"]]
    w = data["weights"]
    rows.append(["weights", format_bytes(data["weights_bytes"], 2),
                 f"{w['format']}, {w['source']}, {w['params'] / 1e9:.2f}B params"])
    for g in data["breakdown"]:
        if g["state_bytes"]:
            rows.append([f"state ({g['kind']})", format_bytes(g["state_bytes"], 2),
                         g["description"] + f" per layer, × {seqs} {seq_word}"])
            continue
        detail = g["description"] + f"; {g['tokens_per_sequence']:,} tokens each"
        rows.append([f"K ({g['kind']})", format_bytes(g["k_bytes"], 2), detail])
        if g["v_bytes"]:
            rows.append([f"V ({g['kind']})", format_bytes(g["v_bytes"], 2), ""])
        if g["scale_bytes"]:
            rows.append([f"scales ({g['kind']})", format_bytes(g["scale_bytes"], 2),
                         "per-layer tensor scales"])
    rows.append(["overhead", format_bytes(data["overhead_bytes"], 2), data["overhead"]["detail"]])
    rows.append(["total", format_bytes(data["total_bytes"], 2),
                 f"KV {format_bytes(data['kv_bytes'], 2)} ({kv}), "
                 f"{format_bytes(data['bytes_per_token'], 3)}/token"])
    out = [head, _table(rows, right=(1,)), ""]
    ctx = f"{data['context']:,} tokens × {seqs} {seq_word}"
    gpu = data["gpu"]
    if gpu is None:
        out.append(f"needs {format_gib(data['total_bytes'])} GiB for {ctx} "
                   "(give --gpu to check the fit)")
        return "\n".join(out)
    used, cap = format_gib(data["total_bytes"]), format_gib(data["budget_bytes"])
    verdict = "fits" if data["fits"] else "does not fit"
    out.append(f"{verdict}: {ctx} uses {used} of {cap} GiB on {gpu['name']}; "
               f"max context {data['max_context']:,}, max sequences at "
               f"{data['context']:,} tokens {data['max_sequences']:,}")
    if not data["fits"]:
        out.append(f"binding: {data['binding']} ({data['binding_reason']})")
    limit = m["max_position_embeddings"]
    if limit and data["max_context"] and data["max_context"] > limit:
        out.append(f"note: the model was trained for {limit:,} positions")
    d = data["decode"]
    if d:
        out.append(f"decode ≈ {d['tokens_per_s_per_sequence']:.1f} tokens/s per sequence "
                   f"({d['tokens_per_s_total']:.1f} total) at full context, bandwidth-bound at "
                   f"{gpu['bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s; KV is "
                   f"{d['kv_share'] * 100:.0f}% of bytes read")
    return "\n".join(out)


def _list(cmd: str, as_json: bool) -> str:
    if cmd == "models":
        items = [{"id": e.id, "repo": e.repo, "family": e.family} for e in kvcore.model_catalog()]
        rows = [["id", "repo", "family"]] + [[i["id"], i["repo"], i["family"]] for i in items]
    elif cmd == "gpus":
        items = [{"id": g.id, "name": g.name, "memory_bytes": g.memory_bytes,
                  "bandwidth_bytes_per_s": g.bandwidth_bytes_per_s, "vendor": g.vendor}
                 for g in kvcore.gpu_catalog()]
        rows = [["id", "name", "memory", "bandwidth"]] + [
            [i["id"], i["name"], format_bytes(i["memory_bytes"], 1),
             f"{i['bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s"] for i in items]
    else:
        items = [{"name": f.name, "aliases": list(f.aliases), "block_values": f.block_values,
                  "block_bytes": f.block_bytes, "bits_per_value": f.bits_per_value,
                  "layout": f.layout, "quality": f.quality} for f in kvcore.FORMATS]
        rows = [["name", "block", "bytes", "bits/value", "layout"]] + [
            [i["name"], str(i["block_values"]), str(i["block_bytes"]),
             f"{i['bits_per_value']:g}", i["layout"]] for i in items]
    if as_json:
        return json.dumps(items, indent=2)
    return _table(rows)


def _serve(argv: list[str]) -> int:
    args = _serve_parser().parse_args(argv)
    port = parse_count(args.port, field="port", minimum=1, maximum=65535)
    try:
        import uvicorn

        from app.web import create_app
    except ImportError:
        raise UsageError("kvplan serve needs the web extra: pip install 'kvplan[web]'") from None
    uvicorn.run(create_app(), host=args.host, port=port)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            cmd, rest = argv[0], argv[1:]
            if cmd == "serve":
                return _serve(rest)
            args = _list_parser(cmd).parse_args(rest)
            print(_list(cmd, args.json))
            return 0
        args = _plan_parser().parse_args(argv)
        result = plan(build_request(args))
        data = plan_to_dict(result)
        print(json.dumps(data, indent=2) if args.json else render_plan(data))
        return 0
    except (KvplanError, UsageError) as exc:
        print(f"kvplan: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
