"""The ``kvplan`` command: a thin layer over kvcore's public API.

    kvplan MODEL [--ctx 128k] [--seqs 4] [--kv q8_0 | --kv-k q8_0 --kv-v tbq4]
                 [--weights q4_k_m] [--gpu 4090] [--engine raw] [--json]
    kvplan models|gpus|formats [--json]
    kvplan measure MODEL [--kv q8_0] [--ctx 32k] [--seqs 2] [--device cuda|cpu] [--json]
    kvplan serve [--host 127.0.0.1] [--port 8000]

Bad input prints one line and exits 2; no traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, cast

import kvcore
from kvcore import (
    KvplanError,
    format_bytes,
    load_model,
    parse_count,
    parse_tokens,
)
from kvcore.catalog import find_models, unmatched
from kvcore.command import Launch, cli_line, give_way, launch_query, read_command, resolve
from kvcore.engines import ENGINE_TITLES, canonical
from kvcore.engines.llamacpp_lora import read_adapter
from kvcore.errors import NAME_CHARS, InputError, nearest, shown
from kvcore.formats import describe
from kvcore.model import ModelSpec
from kvcore.query import (
    Query,
    context_notes,
    find_draft,
    find_format,
    find_format_listing,
    find_gpu_for,
    find_model,
    find_weights,
    host_runnable,
)
from kvcore.units import MAX_CONTEXT_TOKENS, format_gib, format_quantity

from .common import (
    ENGINE_FLAGS,
    LAUNCH_LINES,
    answered,
    cards_of,
    check_find_format,
    check_find_gpu,
    check_find_model,
    check_find_weights,
    decode_text,
    gpu_entry,
    gpu_list,
    make_query,
    model_entry,
    model_line,
    named,
    prefill_text,
    rate_text,
    settings_from,
    to_fit_text,
)

SUBCOMMANDS = ("models", "gpus", "formats", "weights", "serve", "measure")


class UsageError(Exception):
    pass


#: a token argparse reads as a value, not a flag, though it starts with '-'
_NEGATIVE = re.compile(r"-\d[\d.,_]*[a-zA-Z]*")
#: argparse's own type errors, and what the flag takes
_TYPED = re.compile(r"argument (\S+): invalid (int|float) value: '(.*)'", re.S)
_TAKES = {"int": "a whole number", "float": "a number"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        m = _TYPED.fullmatch(message)
        if m:
            flag, kind, value = m.groups()
            message = f"{flag.split('/')[0]} takes {_TAKES[kind]}, not {shown(value)}"
        raise UsageError(message)

    # argparse's own signatures are sets of overloads; these two answer every call alike
    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            raise UsageError(self._unexpected(extras[0]))
        return parsed

    def _unexpected(self, arg: str) -> str:
        """What an argument this command does not take is, with the flag it may have meant:
        argparse's "unrecognized arguments" names it but not why."""
        if arg.startswith("-") and len(arg) > 1 and not _NEGATIVE.fullmatch(arg):
            flag = arg.split("=", 1)[0]
            # names compared without their dashes: "--nope" is not near "--tp"
            names = {o[2:]: o for o in self._option_string_actions if o.startswith("--")}
            close = nearest(flag.lstrip("-"), names)
            hint = f" (did you mean {names[close]}?)" if close else ""
            return f"{self.prog} has no flag {shown(flag)}{hint}; {self.prog} -h lists its flags"
        takes = [a.metavar or a.dest.upper() for a in self._actions
                 if not a.option_strings and a.dest != argparse.SUPPRESS]
        if not takes:
            return (f"{self.prog} takes no argument but its flags, not {shown(arg)} "
                    f"({self.prog} -h lists them)")
        return (f"{shown(arg)} is one argument too many: {self.prog} takes one "
                f"{' '.join(str(t) for t in takes)}, and each other value after its flag "
                f"({self.prog} -h lists them)")

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None,
                         ) -> tuple[argparse.Namespace, list[str]]:
        args = list(sys.argv[1:] if args is None else args)
        self._engine_flag(args)
        return super().parse_known_args(self._join_dash_values(args), namespace)

    def _engine_flag(self, args: list[str]) -> None:
        """An engine's flag (ENGINE_FLAGS) that is none of this command's is answered with
        this command's flag for it, before argparse reads it as an abbreviation."""
        for arg in args:
            if arg == "--":
                return
            flag = arg.split("=", 1)[0]
            if flag in self._option_string_actions:
                continue
            engines, ours = ENGINE_FLAGS.get(flag.replace("_", "-"), ((), ""))
            if ours not in self._option_string_actions:
                continue
            whole = (f" (or plan the whole launch line: --command '{LAUNCH_LINES[engines[0]]}')"
                     if "--command" in self._option_string_actions else "")
            raise UsageError(f"{flag} is a flag of {named(engines)}; {self.prog}'s is "
                             f"{ours}{whole}")

    def _join_dash_values(self, args: list[str]) -> list[str]:
        """``--gpu -24GiB`` as ``--gpu=-24GiB``.

        argparse reads a token that starts with '-' and is not a plain negative number
        (``-24GiB``, ``-8k``) as an option, so the flag before it gets "expected one
        argument". A flag that takes one value, followed by such a token that is no option of
        this command, takes it as its value instead: the value's own check then says what is
        wrong with it (a size must be larger than zero, ...).
        """
        out: list[str] = []
        i = 0
        while i < len(args):
            arg = args[i]
            if arg == "--":
                return out + args[i:]
            action = self._option_string_actions.get(arg)
            nxt = args[i + 1] if i + 1 < len(args) else ""
            if (action is not None and action.nargs is None and len(nxt) > 1
                    and nxt.startswith("-") and not nxt.startswith("--")
                    and nxt not in self._option_string_actions):
                out.append(f"{arg}={nxt}")
                i += 2
                continue
            out.append(arg)
            i += 1
        return out


def _plan_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="kvplan",
        description="Will MODEL fit, at this context and this many parallel sequences, on this "
        "GPU, and in which KV-cache format? Byte-exact per layer kind.",
        epilog="Other commands: kvplan models|gpus|formats|weights [--json]; kvplan measure MODEL "
        "(allocate the predicted cache on this machine's GPU and compare; kvplan measure -h); "
        "kvplan serve.",
    )
    p.add_argument("model", nargs="?",
                   help="catalog id (kvplan models), Hub repo id or address (a GGUF repo as "
                   "REPO:QUANT), Ollama's name for a catalog model (qwen3:8b-q8_0), "
                   "config.json or GGUF path, model folder or JSON text")
    p.add_argument("--command", "--cmd", dest="command", default=None, metavar="'LAUNCH'",
                   help="plan an engine's launch command as given (llama-server …, vllm serve "
                   "…, python -m sglang.launch_server …, trtllm-serve …, OLLAMA_…=… ollama "
                   "serve): its model, context, sequences, KV dtype and settings; MODEL and "
                   "flags given beside it win")
    p.add_argument("--ctx", "--context", dest="ctx", default=None,
                   help="context per sequence: 8192, 128k, 1M (k = 1024; default 8k, under "
                   "ollama its num_ctx for the cards' memory)")
    p.add_argument("--seqs", "--sequences", dest="seqs", default="1",
                   help="parallel sequences, each with its own cache; with --dp, in each replica "
                   "(default 1)")
    p.add_argument("--kv", default=None, help="KV format for K and V (default f16)")
    p.add_argument("--kv-k", default=None, help="KV format for keys")
    p.add_argument("--kv-v", default=None, help="KV format for values")
    p.add_argument("--weights", default=None,
                   help="weight format: auto (the checkpoint), bf16, fp8, int4, q4_k_m, ...")
    p.add_argument("--gpu", default=None, help="catalog GPU (4090, h100, mi300x, '4090 "
                   "laptop', 'rtx 4090 24gb') or a size (24GiB), after a card count for "
                   "several (2x4090)")
    p.add_argument("--engine", default="raw",
                   help="allocation rules: raw (physics only), vllm, llama.cpp, ollama, sglang, "
                        "trtllm")
    p.add_argument("--gpus", default=None,
                   help="number of cards (4) or a list of cards, one per rank (4090,3090 "
                        "or 2x4090,3090)")
    p.add_argument("--tp", default=None, help="tensor-parallel ranks")
    p.add_argument("--pp", default=None, help="pipeline-parallel stages")
    p.add_argument("--dp", default="1", help="data-parallel replicas")
    p.add_argument("--attn-dp", default="1",
                   help="SGLang: attention data-parallel groups within the tensor-parallel "
                        "cards, each with its own requests and KV pool (--attn-dp-size); "
                        "TensorRT-LLM: enable_attention_dp, one group a card (N = tp)")
    p.add_argument("--kv-budget", default=None,
                   help="KV memory per card an engine printed as available (8.11GiB; vLLM "
                        "0.34: the GiB of the blocks its \"Memory after warmup\" line says fit, "
                        "or its --kv-cache-memory-bytes): report the tokens, blocks and "
                        "concurrency it gives")
    p.add_argument("--gpu-limit", default=None, metavar="SIZE",
                   help="on a machine whose CPU and GPU share one memory (a Mac, Strix Halo, "
                        "DGX Spark, Jetson), the memory its GPU may use, where raised from the "
                        "default (macOS's 75%% wired limit, Linux's half for Strix Halo) with "
                        "sysctl iogpu.wired_limit_mb or ttm.pages_limit: 120GiB")
    p.add_argument("--find-gpu", action="store_true",
                   help="list the smallest catalog GPUs (and how many) that fit, each with "
                        "its decode tokens/s")
    p.add_argument("--vendor", default=None,
                   help="with --find-gpu: only this maker's cards "
                        f"({', '.join(kvcore.gpus.VENDORS)})")
    p.add_argument("--segment", default=None,
                   help="with --find-gpu: only this kind of card "
                        f"({', '.join(kvcore.gpus.SEGMENTS)})")
    p.add_argument("--find-model", action="store_true",
                   help="list the catalog models that fit on the GPU, largest first, each "
                        "with its decode tokens/s; words in place of MODEL ('qwen3', "
                        "'llama 3.1') keep the models they name")
    p.add_argument("--find-format", action="store_true",
                   help="list every KV format with whether it fits, its max context and its "
                        "decode tokens/s")
    p.add_argument("--find-weights", action="store_true",
                   help="list every weight format the engine loads (llama.cpp: each "
                        "llama-quantize type) with its size, whether it fits, its max context "
                        "and its decode tokens/s")
    p.add_argument("--find-draft", action="store_true",
                   help="list the catalog models of the same vocabulary, at most a quarter of "
                        "its size, as MODEL's draft, with whether each fits, its max context "
                        "and (with --acceptance) its speculative tokens/s")
    g = p.add_argument_group("engine settings")
    g.add_argument("--gpu-memory-utilization", type=float, default=None,
                   help="vLLM: caps the budget at this share of the card (unset: the whole "
                        "card with 0.34's extensible KV cache, 0.92 without it or before 0.34)")
    g.add_argument("--kv-cache-dtype-skip-layers", nargs="+", default=None,
                   metavar="LAYER",
                   help="vLLM: layers kept at the model's dtype beside a quantized cache "
                        "(indices, or sliding_window for every sliding-window layer)")
    g.add_argument("--block-size", type=int, default=None,
                   help="vLLM block size (a multiple of 16; default 64, or the attention "
                        "backend's choice)")
    g.add_argument("--max-num-batched-tokens", type=int, default=None,
                   help="vLLM (16384 on cards of 160 GiB or more, 8192 from 70 GiB but A100s "
                        "and GB10, else 2048)")
    g.add_argument("--speculative-tokens", type=int, default=0,
                   help="vLLM speculative tokens; SGLang with --mtp or --draft: "
                        "--speculative-num-draft-tokens (default 4); llama.cpp with --draft: "
                        "--spec-draft-n-max (default 3)")
    g.add_argument("--no-prefix-caching", action="store_true",
                   help="vLLM --no-enable-prefix-caching (a hybrid model keeps one state page "
                        "a request, not two)")
    g.add_argument("--no-extensible-kv-cache", action="store_true",
                   help="vLLM --no-enable-extensible-kv-cache (or a release before 0.34): the "
                        "cache sized within --gpu-memory-utilization 0.92 from a profiling "
                        "estimate, not from the memory free after warmup")
    g.add_argument("--enable-extensible-kv-cache", action="store_true",
                   help="vLLM --enable-extensible-kv-cache: its default where it can have it, "
                        "asked for (refused where vLLM stops: Intel cards, a pinned pool)")
    g.add_argument("--enforce-eager", action="store_true",
                   help="vLLM --enforce-eager (no CUDA graphs, no graph memory set aside)")
    g.add_argument("--language-model-only", action="store_true",
                   help="vLLM --language-model-only (text only: the vision/audio towers not "
                        "built, their weights not counted, the encoder not profiled)")
    g.add_argument("--enable-lora", action="store_true",
                   help="vLLM, SGLang --enable-lora: adapter slots on the card, sized by "
                        "--max-loras and --max-lora-rank, off the KV pool")
    g.add_argument("--max-loras", type=int, default=None,
                   help="LoRA adapters in one batch, each a slot on the card: vLLM "
                        "--max-loras (1), SGLang --max-loras-per-batch (8)")
    g.add_argument("--max-lora-rank", type=int, default=None,
                   help="largest adapter rank, the slots' size: vLLM 1, 8, 16, 32, 64, 128, "
                        "256, 320 or 512 (16); SGLang any (needed)")
    g.add_argument("--fully-sharded-loras", action="store_true",
                   help="vLLM: split the LoRA slots wholly over tensor parallelism")
    g.add_argument("--lora-target-modules", default=None, metavar="NAMES",
                   help="only these modules get LoRA slots (o_proj,qkv_proj,...): vLLM (all "
                        "of them), SGLang (needed; all for every one)")
    g.add_argument("--lora", action="append", default=None, metavar="ADAPTER.gguf",
                   help="llama.cpp --lora: a LoRA adapter GGUF on this machine, its tensors "
                        "on the devices of the layers they adapt (repeat for several)")
    g.add_argument("--ubatch", type=int, default=None,
                   help="llama.cpp n_ubatch (512); Ollama's num_batch (by the context)")
    g.add_argument("--fit-target", type=int, default=None, metavar="MIB",
                   help="llama.cpp --fit-target: MiB --fit leaves free on each card (1024)")
    g.add_argument("--swa-full", action="store_true", help="llama.cpp full-size SWA cache")
    g.add_argument("--kv-unified", action="store_true", help="llama.cpp one shared KV stream")
    g.add_argument("--sched-spread", action="store_true",
                   help="Ollama: OLLAMA_SCHED_SPREAD=1, the model over every card even where "
                        "one would hold it")
    g.add_argument("--no-flash-attn", action="store_true", help="llama.cpp -fa off; Ollama's "
                   "OLLAMA_FLASH_ATTENTION=0")
    g.add_argument("--ngl", type=int, default=None,
                   help="llama.cpp -ngl: layers on the card, the output layer first (all); "
                        "Ollama's num_gpu")
    g.add_argument("--tensor-split", "--ts", default=None, metavar="SHARES",
                   help="llama.cpp -ts over --pp cards: each card's share of the layers (3,1)")
    g.add_argument("--n-cpu-moe", type=int, default=None,
                   help="llama.cpp: routed experts of the first N blocks in host memory")
    g.add_argument("--override-tensor", "-ot", action="append", default=None,
                   metavar="PATTERN=CPU",
                   help="llama.cpp -ot: the routed experts of the blocks PATTERN matches "
                        "(blk\\.(1[0-9])\\.ffn_.*_exps\\.=CPU) in host memory; again for more")
    g.add_argument("--cpu-moe", action="store_true",
                   help="llama.cpp: every block's routed experts in host memory")
    g.add_argument("--host-bandwidth", type=float, default=None, metavar="GB/S",
                   help="host memory bandwidth for layers llama.cpp keeps there (89.6: "
                        "dual-channel DDR5; 307.2 beside a data-center card; a Grace CPU's "
                        "512)")
    g.add_argument("--host-link", type=float, default=None, metavar="GB/S",
                   help="card-to-host link host-held weights cross (llama.cpp, "
                        "--cpu-offload-gb; the card's, or 31.5: PCIe 4 x16)")
    g.add_argument("--cpu-offload-gb", type=float, default=None, metavar="GIB",
                   help="vLLM, SGLang: GiB of each rank's weights in pinned host memory, "
                        "read over the host link every forward pass")
    g.add_argument("--host-memory", default=None, metavar="SIZE",
                   help="host memory llama.cpp may fill with what it keeps there (64GiB)")
    g.add_argument("--cache-ram", type=int, default=None, metavar="MIB",
                   help="llama-server's prompt cache in host memory, MiB (8192; 0 none, -1 no "
                        "limit)")
    g.add_argument("--ctx-checkpoints", type=int, default=None, metavar="N",
                   help="llama-server's context checkpoints a slot in host memory (32)")
    g.add_argument("--mem-fraction-static", type=float, default=None, help="SGLang (auto)")
    g.add_argument("--chunked-prefill-size", type=int, default=None,
                   help="SGLang (by card size: 2048 under 20 GiB, 4096, 8192, 16384 from "
                        "160 GiB)")
    g.add_argument("--page-size", type=int, default=None, help="SGLang tokens a page (1, or the attention backend's: 64 for "
                        "trtllm_mha/trtllm_mla, which SGLang picks on B200, B300 and GB200)")
    g.add_argument("--max-total-tokens", type=int, default=None, metavar="TOKENS",
                   help="SGLang: the most tokens its KV pool holds (what the memory profile "
                        "gives); TensorRT-LLM: kv_cache_config.max_tokens, a rank's")
    g.add_argument("--cuda-graph-max-bs-decode", type=int, default=None, metavar="N",
                   help="SGLang: the largest decode batch captured in a CUDA graph (by card "
                        "size, at most --seqs)")
    g.add_argument("--cuda-graph-max-bs-prefill", type=int, default=None, metavar="TOKENS",
                   help="SGLang: the largest prefill captured in a CUDA graph (the chunk)")
    g.add_argument("--disable-decode-cuda-graph", action="store_true",
                   help="SGLang: no decode CUDA graphs, none of their memory set aside")
    g.add_argument("--disable-prefill-cuda-graph", action="store_true",
                   help="SGLang: no prefill CUDA graphs, none of their memory set aside")
    g.add_argument("--enable-dp-lm-head", action="store_true",
                   help="SGLang with --attn-dp: the lm_head split over an attention group")
    g.add_argument("--swa-full-tokens-ratio", type=float, default=None, metavar="RATIO",
                   help="SGLang: the sliding-window pool's tokens a full-layer token (0.8; "
                        "DeepSeek-V4 0.1)")
    g.add_argument("--mamba-full-memory-ratio", type=float, default=None, metavar="RATIO",
                   help="SGLang: Mamba state bytes to KV bytes of what the weights leave (0.9)")
    g.add_argument("--max-mamba-cache-size", type=int, default=None, metavar="SLOTS",
                   help="SGLang: the Mamba state slots, instead of the ratio's")
    g.add_argument("--disable-radix-cache", action="store_true",
                   help="SGLang: no prefix cache; a hybrid model's Mamba state slots are one a "
                        "running request")
    g.add_argument("--attention-backend", default=None, metavar="BACKEND",
                   help="SGLang: the attention backend (trtllm_mha, fa3, flashinfer, triton, "
                        "...); by model and card where not given. It sets the page on SM100, "
                        "and for trtllm_mha/trtllm_mla on any card. vLLM: FLASH_ATTN, "
                        "FLASHINFER, TRITON_ATTN, CUTLASS_MLA, ... (any case), checked against "
                        "the model, KV dtype and card; CUTLASS_MLA pages 128 tokens")
    g.add_argument("--prefill-kv-cache-dequant-dtype", default=None, metavar="DTYPE",
                   choices=("auto", "fp8_e4m3", "nvfp4"),
                   help="SGLang with --kv nvfp4: fp8_e4m3 (FlashInfer prefill over an fp8 "
                        "copy) or nvfp4 (SM100); by the card where not given")
    g.add_argument("--moe-a2a-backend", default=None, metavar="BACKEND",
                   help="SGLang: none, or deepep (its fraction sets memory aside for DeepEP)")
    g.add_argument("--free-gpu-memory-fraction", type=float, default=None,
                   help="TensorRT-LLM (0.9)")
    g.add_argument("--tokens-per-block", type=int, default=None, help="TensorRT-LLM (32)")
    g.add_argument("--max-num-tokens", type=int, default=None, metavar="TOKENS",
                   help="TensorRT-LLM: the tokens a forward pass takes (8192), which size its "
                        "activations")
    g.add_argument("--offload", default=None,
                   help="CPU tier for KV per card (64GiB): vLLM, SGLang, TensorRT-LLM")
    p.add_argument("--hot", default=None, metavar="FMT:TOKENS",
                   help="hot/cold mix: the most recent TOKENS in FMT, older in --kv (f16:4096)")
    p.add_argument("--keep", default=None, metavar="FRACTION",
                   help="token eviction: keep this fraction of tokens (0-1]")
    p.add_argument("--keep-first", default="4", help="tokens always kept at the start (4)")
    p.add_argument("--keep-recent", default="128", help="recent tokens always kept (128)")
    p.add_argument("--state-dtype", default="f32", choices=("f32", "f16", "bf16"),
                   help="recurrent-state dtype (f32, as llama.cpp keeps it)")
    p.add_argument("--images", default="1", help="images per sequence (cross-attention models)")
    p.add_argument("--no-mmproj", action="store_true",
                   help="llama.cpp: the vision tower not loaded (no --mmproj): its weights "
                   "not counted")
    p.add_argument("--mtp", action="store_true",
                   help="count MTP/draft layers and weights (vLLM: speculative-config method "
                   "mtp; SGLang: EAGLE with the MTP head)")
    p.add_argument("--draft", default=None, metavar="MODEL",
                   help="a draft model for speculative decoding, named as MODEL is "
                   "(qwen3-0.6b): its weights and cache counted beside the target's (vLLM: "
                   "speculative-config model; SGLang: STANDALONE; llama.cpp: -md)")
    p.add_argument("--draft-weights", default=None, metavar="FORMAT",
                   help="the draft model's weight format (default: its checkpoint's)")
    p.add_argument("--draft-method", default=None, metavar="METHOD",
                   help="how the draft drafts: draft_model (a model of its own), eagle or "
                   "eagle3 (an EAGLE head over the target's hidden states); default auto: "
                   "from the draft's config and name")
    p.add_argument("--acceptance", default=None, type=float, metavar="A",
                   help="with --draft: the chance each draft token is accepted (0.7), for a "
                   "decode estimate of speculative decoding")
    p.add_argument("--draft-kv", default=None, metavar="FMT",
                   help="the draft's own cache type, K and V: llama.cpp's -ctkd/-ctvd "
                   "(default f16), vLLM's speculative kv_cache_dtype, SGLang's "
                   "--speculative-draft-kv-cache-dtype (default the target's)")
    p.add_argument("--overhead", default=None, help="runtime overhead instead of the estimate")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--version", action="version", version=f"kvplan {kvcore.__version__}")
    return p


def _list_parser(cmd: str) -> argparse.ArgumentParser:
    what = {"models": "model configs", "gpus": "GPUs", "formats": "KV-cache formats",
            "weights": "weight formats"}[cmd]
    p = _Parser(prog=f"kvplan {cmd}", description=f"List the catalog's {what}.")
    p.add_argument("--json", action="store_true", help="print JSON")
    if cmd == "models":
        p.add_argument("query", nargs="*", metavar="WORDS",
                       help="only models every word names, in their id, Hub repository, family "
                            "or the repositories that share their config (qwen3 coder, llama "
                            "3.1, gemma3:27b)")
    if cmd == "gpus":
        p.add_argument("--vendor", default=None,
                       help=f"only this maker's cards: {', '.join(kvcore.gpus.VENDORS)}")
        p.add_argument("--min-memory", default=None, metavar="SIZE",
                       help="only cards with at least this memory as sold (24GiB, 24GB)")
        p.add_argument("--segment", default=None,
                       help=f"only this kind of card: {', '.join(kvcore.gpus.SEGMENTS)}")
        p.add_argument("--engine", default=None,
                       help="only cards this engine's GPU build runs on (vllm, llama.cpp, "
                            "ollama, sglang, trtllm; raw: every card)")
    return p


def _serve_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kvplan serve", description="Run the web app and REST API.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", default="8000")
    return p


#: flags that take a value: an empty one (``--gpu "$GPU"`` with GPU unset) is an error, not
#: the default
VALUE_FLAGS = ("ctx", "seqs", "kv", "kv_k", "kv_v", "weights", "gpu", "engine", "gpus", "tp",
               "pp", "dp", "attn_dp", "kv_budget", "offload", "hot", "keep", "keep_first", "keep_recent",
               "images", "overhead", "host_memory", "gpu_limit", "draft", "draft_weights",
               "draft_kv", "draft_method")


def build_query(args: argparse.Namespace, spec: ModelSpec | None = None) -> Query:
    for name in VALUE_FLAGS:
        value = getattr(args, name)
        if value is not None and not str(value).strip():
            raise UsageError(f"--{name.replace('_', '-')} needs a value, got an empty string")
    if args.keep is not None:
        try:
            float(args.keep)
        except ValueError:
            raise UsageError(f"--keep must be a fraction in (0, 1], got {shown(args.keep)}") from None
    if args.hot and ":" not in args.hot:
        raise UsageError(f"--hot must look like f16:4096, got {shown(args.hot)}")
    settings = settings_from(args, lora_adapters=tuple(read_adapter(p) for p in args.lora or ()))
    return make_query(
        spec or load_model(args.model), context=args.ctx, sequences=args.seqs, kv=args.kv,
        kv_k=args.kv_k, kv_v=args.kv_v, weights=args.weights, gpu=args.gpu, gpus=args.gpus,
        tp=args.tp, pp=args.pp, dp=args.dp, attn_dp=args.attn_dp, engine=args.engine,
        hot=args.hot,
        keep=float(args.keep) if args.keep is not None else None, keep_first=args.keep_first,
        keep_recent=args.keep_recent, state_dtype=args.state_dtype, images=args.images,
        mtp=args.mtp, no_mmproj=args.no_mmproj, kv_budget=args.kv_budget,
        overhead=args.overhead, settings=settings, gpu_limit=args.gpu_limit,
        draft=args.draft, draft_weights=args.draft_weights, acceptance=args.acceptance,
        draft_method=args.draft_method)


def _table(rows: list[list[str]], right: Sequence[int] = ()) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _ctx(n: int) -> str:
    """A max context; the largest kvplan takes (a model whose every layer holds a window) is
    no limit of memory's."""
    return "unlimited by memory" if n >= MAX_CONTEXT_TOKENS else f"{n:,}"


def _ask(q: Query) -> str:
    return f"{format_quantity(q.context, 'token')} × {format_quantity(q.sequences, 'sequence')}"


def _assumed(q: Query) -> str:
    """What a find-gpu or find-format table took as given: the engine, the weights (the
    checkpoint's format named), the KV format where the table does not vary it."""
    from kvcore.weights import weights_for

    w = weights_for(q.spec, q.weights, mtp=q.cache.mtp).format
    weights = f"weights {w}" + (" (the checkpoint's)" if q.weights in (None, "auto") else "")
    return f"under {q.engine}, {weights}"


def _kv(q: Query) -> str:
    """The plan's KV format: one name, or K's and V's."""
    return (q.cache.kv_k.name if q.cache.kv_k == q.cache.kv_v
            else f"K {q.cache.kv_k.name} / V {q.cache.kv_v.name}")


def _card(q: Query) -> str:
    """The card a find table fits on, with its count (or the KV budget where none)."""
    count = q.parallel.ranks_per_replica
    return (f"{count} × " if count > 1 else "") + (q.gpus[0].name if q.gpus
                                                   else "the KV budget given")


def _find_notes(q: Query, rows: list[dict[str, Any]]) -> list[str]:
    notes = context_notes(q, max((r["max_context"] for r in rows), default=None))
    return [f"note: {n}" for n in notes]


def _card_labels(data: dict[str, Any]) -> list[str]:
    """The cards of a plan by catalog id, a card given as a size by what was typed (custom
    24GB, not custom-24000000000)."""
    names = data.get("gpu_names") or data["gpus"]
    return [n if i.startswith("custom-") else i for i, n in zip(data["gpus"], names, strict=True)]


def render_find_gpu(q: Query, rows: list[dict[str, Any]], vendor: str | None = None,
                    segment: str | None = None) -> str:
    assumed = f"{_assumed(q)}, KV {_kv(q)}"
    of = (f"{kvcore.gpus.maker(vendor)} " if vendor else "") + (
        f"{kvcore.gpus.segment_of(segment)} " if segment else "")
    # Ollama's own context, card by card, where none was asked
    own = q.auto_context and q.engine == "ollama"
    ask = (f"Ollama's num_ctx for the cards × {format_quantity(q.sequences, 'sequence')}"
           if own else _ask(q))
    if not rows:
        return "\n".join([f"no catalog {of}GPU fits {ask} with up to 8 cards {assumed}",
                          *_find_notes(q, rows)])
    table = [["gpu", "cards", "memory", "bandwidth", *(["num_ctx"] if own else []),
              "max context", "tok/s/seq"]] + [
        [r["name"], str(r["count"]) + (f" (attention dp {r['attn_dp']})"
                                       if r.get("attn_dp", 1) > 1 else ""),
         format_bytes(r["total_memory_bytes"], 1),
         f"{(r['bandwidth_bytes_per_s'] or 0) / 1e9:,.0f} GB/s",
         *([f"{r['context']:,}"] if own else []), _ctx(r["max_context"]),
         rate_text(r["tokens_per_s_per_sequence"])]
        for r in rows]
    best = rows[0]
    flag = _card_flags(best)
    at = (f"{format_quantity(best['context'], 'token')} (Ollama's num_ctx there) × "
          f"{format_quantity(q.sequences, 'sequence')}" if own else _ask(q))
    return "\n".join([_table(table, right=tuple(range(1, len(table[0])))), "",
                      f"smallest: {best['count']} × {best['name']} ({flag}) for {at} "
                      f"{assumed}",
                      *_find_notes(q, rows)])


def smallest_card_line(q: Query) -> str:
    """For a plan given no card: the catalog card that fits it with the least memory, as
    --find-gpu's first row."""
    try:
        # at the plan's own context, the one it was sized at
        rows = find_gpu_for(q, limit=1, card_context=False)
    except KvplanError:
        rows = []
    p = q.parallel
    if p.gpus > 1:
        # the layout is given: the cards are as many as it asks, --find-gpu (which chooses
        # the layout) is not the place for more
        layout = (f"as tp {p.tp} × pp {p.pp}" + (f" × dp {p.dp}" if p.dp > 1 else "")
                  + (f" (attention dp {p.attn_dp})" if p.attn_dp > 1 else ""))
        if not rows:
            return f"no catalog card fits it {layout} ({p.gpus} cards of one kind)"
        best = rows[0]
        return (f"smallest card that fits it {layout}: {best['count']} × {best['name']} "
                f"(--gpu {best['gpu']})")
    if not rows:
        return "no catalog card fits it, up to 8 of one kind"
    best = rows[0]
    return (f"smallest card that fits: {best['count']} × {best['name']} ({_card_flags(best)}); "
            "--find-gpu lists more")


def _card_flags(row: dict[str, Any]) -> str:
    """The flags that plan on a --find-gpu row's cards: --gpu (4xh100), and --attn-dp where
    SGLang fits only with attention groups."""
    flag = row["gpu"] if row["count"] == 1 else f"{row['count']}x{row['gpu']}"
    groups = row.get("attn_dp", 1)
    return f"--gpu {flag}" + (f" --attn-dp {groups}" if groups > 1 else "")


def _host_rate(rows: list[dict[str, Any]]) -> str:
    """Host memory's bandwidth the find tables' --fit rates were read at."""
    rate = rows[0]["host_fit"]["host_bandwidth_bytes_per_s"] / 1e9
    return f"{rate:g} GB/s unless --host-bandwidth"


def render_find_model(args: argparse.Namespace, found: dict[str, Any]) -> str:
    """The catalog models that fit, largest first, then one line for each other kind."""
    fits = found["fits"]
    total = sum(len(v) for v in found.values())
    kv = args.kv or "f16"
    if args.kv_k or args.kv_v:
        kv = f"K {args.kv_k or kv} / V {args.kv_v or kv}"
    where = f"in a KV budget of {args.kv_budget} a card"
    if args.gpu:
        count, card = cards_of(args.gpu, "gpu")
        if args.gpus and str(args.gpus).strip().isdigit():
            count = int(args.gpus)
        where = "on " + (f"{count} × " if count > 1 else "") + card.name
    elif args.gpus:
        cards = (cards_of(n, "gpus") for n in str(args.gpus).split(",") if n.strip())
        where = "on " + " + ".join((f"{count} × " if count > 1 else "") + card.name
                                   for count, card in cards)
    tokens = (format_quantity(parse_tokens(args.ctx or "8k"), "token") if args.ctx
              or canonical(args.engine) != "ollama" or not (args.gpu or args.gpus)
              else "Ollama's num_ctx for the cards (the trained context where shorter)")
    ask = f"{tokens} × {format_quantity(parse_count(args.seqs, field='sequences'), 'sequence')}"
    weights = args.weights or "each checkpoint's own"
    lines = []
    if fits:
        rows = [["model", "params", "weights", "KV + state", "max context", "trained for",
                 "tok/s/seq"]] + [
            [r["model"], f"{(r['params'] or 0) / 1e9:,.1f}B",
             f"{format_bytes(r['weights_bytes'], 1)} {r['weights']}",
             format_bytes(r["kv_bytes"], 1), _ctx(r["max_context"]),
             _ctx(r["trained_positions"]) if r.get("trained_positions") else "-",
             rate_text(r["tokens_per_s_per_sequence"])] for r in fits]
        lines += [_table(rows, right=(1, 2, 3, 4, 5, 6)), ""]
    matching = f" matching {shown(args.model, NAME_CHARS)}" if args.model else ""
    lines.append(f"{len(fits)} of {total} catalog models{matching} fit {ask} {where} under "
                 f"{args.engine}, "
                 f"weights {weights}, KV {kv}")

    def some(rows: list[dict[str, Any]], what: str) -> str:
        named = ", ".join(f"{r['model']} ({r[what]:,})" if what else r["model"]
                          for r in rows[:4])
        return named + (", ..." if len(rows) > 4 else "")

    if found["untrained"]:
        lines.append(f"{len(found['untrained'])} more fit in memory but were trained for fewer "
                     f"positions: {some(found['untrained'], 'trained_positions')}")
    if found["shorter"]:
        lines.append(f"{len(found['shorter'])} more fit a shorter context: "
                     f"{some(found['shorter'], 'max_context')}")
    if found["too_big"]:
        lines.append(f"{len(found['too_big'])} do not fit at any context (weights and runtime "
                     "alone)")
    host = host_runnable(found)
    if host:
        runnable = ", ".join(
            f"{r['model']} ({format_bytes(r['host_fit']['host_weights_bytes'], 1)} there, "
            f"{rate_text(r['host_fit']['tokens_per_s_per_sequence'])} tok/s)"
            for r in host[:4])
        lines.append(f"{len(host)} of those that do not fit run with llama-server's --fit, part "
                     f"in host memory ({_host_rate(host)}): {runnable}"
                     + (", ..." if len(host) > 4 else ""))
    if found["refused"]:
        lines.append(f"{len(found['refused'])} refused by {args.engine} or the layout: "
                     f"{some(found['refused'], '')} (--json gives every model and reason)")
    return "\n".join(lines)


def render_find_format(q: Query, rows: list[dict[str, Any]],
                       refused: Sequence[dict[str, Any]] = ()) -> str:
    """The formats' table and verdict, then each format the engine has but refuses for this
    plan with its reason."""
    table = [["format", "bits/value", "fits", "max context", "tok/s/seq", "quality"]] + [
        [r["format"], f"{r['bits_per_value']:g}", "yes" if r["fits"] else "no",
         _ctx(r["max_context"]), rate_text(r["tokens_per_s_per_sequence"]), r["quality"]]
        for r in rows]
    best = next((r for r in rows if r["fits"]), None)
    where = f"on {_card(q)} {_assumed(q)}"
    longest = max(rows, key=lambda r: r["max_context"] or 0, default=None)
    if best:
        verdict = f"best format that fits {_ask(q)} {where}: {best['format']}"
    elif longest is None or not longest["max_context"]:
        # no cache of any format fits beside the weights: a smaller weight format might
        verdict = (f"no KV format fits {_ask(q)} {where}: the weights and runtime leave no room "
                   "for a cache; see --find-weights or --find-gpu")
    else:
        verdict = (f"no KV format fits {_ask(q)} {where}; the longest context "
                   f"{format_quantity(q.sequences, 'sequence')} fit: "
                   f"{_ctx(longest['max_context'])} tokens in {longest['format']}; see "
                   "--find-weights or --find-gpu")
    lines = [_table(table, right=(1, 3, 4)), "", verdict, *_find_notes(q, rows)]
    lines += [f"not offered here: {r['format']}: {r['reason']}" for r in refused]
    return "\n".join(lines)


def render_find_draft(q: Query, found: dict[str, Any]) -> str:
    """The drafts' table (fitting first), the verdict and the drafts the engine refuses."""
    rows = found["drafts"]
    spec = any(r["speedup"] is not None for r in rows)
    head = ["draft", "family", "params", "weights", "fits", "max context", "tok/s/seq"]
    table = [head + (["speculative", "speed-up"] if spec else [])] + [
        [r["draft"], r["family"], f"{r['params'] / 1e9:.2f}B",
         f"{format_bytes(r['weights_bytes'], 1)} {r['weights']}",
         "yes" if r["fits"] else "no", _ctx(r["max_context"]),
         rate_text(r["tokens_per_s_per_sequence"])]
        + ([rate_text(r["speculative_tokens_per_s_per_sequence"]),
            f"{r['speedup']:.2f}×" if r["speedup"] is not None else "–"] if spec else [])
        for r in rows]
    where = f"on {_card(q)} {_assumed(q)}"
    if not rows:
        verdict = (f"no catalog model of {found['target']}'s vocabulary "
                   f"({found['vocab_size']:,}) and at most a quarter of its size")
        lines = [verdict]
    else:
        best = next((r for r in rows if r["fits"]), None)
        verdict = (f"drafts that fit beside {found['target']} {_ask(q)} {where}: "
                   + (", ".join(r["draft"] for r in rows if r["fits"]) if best else "none"))
        lines = [_table(table, right=(2, 5, 6, 7, 8)), "", verdict,
                 "note: a draft must share the target's tokenizer: these have its vocabulary "
                 "size (vLLM's and SGLang's check; SGLang and llama.cpp also compare their "
                 "tokens), those of its own family first"]
        if spec:
            lines.append("note: every draft at the same acceptance; a larger draft is usually "
                         "accepted more often")
        heads = [r for r in rows if r["method"] != "draft_model"]
        if heads:
            lines.append("note: an EAGLE head reads the target's hidden states and is trained "
                         "for one target: " + "; ".join(
                             f"{r['draft']} ({r['method']}) for {r['head_of'] or 'its own'}"
                             for r in heads))
    lines += [f"not offered here: {r['draft']}: {r['reason']}" for r in found["refused"]]
    return "\n".join(lines)


def render_find_weights(q: Query, rows: list[dict[str, Any]]) -> str:
    """Every weight format, largest first; a row that does not fit the card but that
    llama-server's --fit runs gives that decode rate and what host memory holds."""
    def rate(r: dict[str, Any]) -> str:
        if r["fits"]:
            return rate_text(r["tokens_per_s_per_sequence"])
        host = r.get("host_fit")
        return rate_text(host["tokens_per_s_per_sequence"]) + " (--fit)" if host else "–"

    def held(r: dict[str, Any]) -> str:
        host = r.get("host_fit")
        return format_bytes(host["host_weights_bytes"], 1) if host else "–"

    def ppl(r: dict[str, Any]) -> str:
        return "0" if r["quality"] == "baseline" else (
            f"{r['perplexity_added']:+.4f}" if r["perplexity_added"] is not None else "–")

    table = [["weights", "bits/weight", "size", "fits", "max context", "tok/s/seq", "in host",
              "+PPL"]] + [
        [r["weights"], f"{r['bits_per_weight']:.2f}" if r["bits_per_weight"] else "–",
         format_bytes(r["weights_bytes"], 1), "yes" if r["fits"] else "no",
         _ctx(r["max_context"]) if r["max_context"] else "–", rate(r), held(r), ppl(r)]
        for r in rows]
    host = any(r.get("host_fit") for r in rows)
    if not host:
        table = [row[:6] + row[7:] for row in table]
    best = next((r for r in rows if r["fits"]), None)
    where = f"on {_card(q)} under {q.engine}, KV {_kv(q)}"
    verdict = (f"largest weights that fit {_ask(q)} {where}: {best['weights']} "
               f"({format_bytes(best['weights_bytes'], 1)})" if best
               else f"no weight format fits {_ask(q)} {where}; see --find-gpu")
    lines = [_table(table, right=(1, 2, 4, 5, 6, 7) if host else (1, 2, 4, 5, 6)), "", verdict]
    if any(r["perplexity_added"] is not None for r in rows):
        lines.append("+PPL: the perplexity each type adds to Llama-3-8B's, as llama-quantize "
                     "lists its types (the IQ types by their bits alone)")
    if host:
        lines.append("tok/s/seq (--fit): llama-server's --fit keeps the rest in host memory "
                     f"({_host_rate([r for r in rows if 'host_fit' in r])})")
    return "\n".join([*lines, *_find_notes(q, rows)])


def render_engine(data: dict[str, Any]) -> list[str]:
    r = data["engine_report"]
    par = data["parallel"]
    groups = par.get("attn_dp", 1)
    out = ["", f"engine {r['engine']}, tp {par['tp']} × pp {par['pp']} × dp {par['dp']}"
           + (f" (attention dp {groups})" if groups > 1 else "")
           + (f" on {', '.join(_card_labels(data))}" if data.get("gpus") else "")]
    rows = [["", "bytes per card"]]
    if data.get("gpus"):
        if r["budget_bytes"] is not None:
            rows.append(["budget", format_bytes(r["budget_bytes"], 2)])
        rows.append(["weights", format_bytes(r["weights_bytes"], 2)])
        moved = r["extra"].get("cpu_offload")
        if moved is not None:
            rows.append(["weights in host (--cpu-offload-gb)",
                         format_bytes(moved["bytes_per_rank"][r["binding_stage"]], 2)])
        rows += [[o["name"], format_bytes(o["bytes"], 2)] for o in r["overheads"]]
    rows.append(["KV pool", format_bytes(max(0, r["kv_pool_bytes"]), 2)])
    out.append(_table(rows, right=(1,)))
    placed = r["extra"].get("placement") or {}
    if placed.get("cards"):
        # llama.cpp's layers over several cards: what each holds (the table above is the
        # card that binds)
        split = [["card", "blocks", "weights", "cache"]]
        for c in placed["cards"]:
            blocks = f"{c['blocks'][0]}–{c['blocks'][1]}" if c["blocks"] else "none"
            split.append([c["device"], blocks + (", output" if c["output_layer"] else ""),
                          format_bytes(c["weights_bytes"], 2), format_bytes(c["cache_bytes"], 2)])
        split.append(["host", placed["host_holds"],
                      format_bytes(placed["host_weights_bytes"], 2),
                      format_bytes(placed["host_cache_bytes"], 2)])
        out.append(_table(split, right=(2, 3)))
    if r["log_lines"]:
        # raw is no program: its lines are the stage that binds, in its own words
        out.append("binding stage:" if r["engine"] == "raw" else f"{r['engine']} would print:")
        out += [f"  {line}" for line in r["log_lines"]]
    verdict = "fits" if r["fits"] else "does not fit"
    seqs = data["sequences"]
    tokens = format_quantity(data["context"], "token")
    replica = " per replica" if par["dp"] > 1 else ""
    out.append(f"{verdict} under {r['engine']}: {tokens} × {format_quantity(seqs, 'sequence')}"
               f"{replica}; max context {_ctx(r['max_context'])}, concurrency "
               f"{r['max_concurrency']:,.2f}{replica} at {tokens}")
    if r["offload_tokens"]:
        out.append(f"offload tier: about {r['offload_tokens']:,} more tokens beyond the GPU pool")
    if r["command"]:
        out.append(f"command: {r['command']}")
    out += [f"note: {n}" for n in r["notes"]]
    return out


def _state_width(g: dict[str, Any], sequences: int) -> str:
    """", f32" (16-bit, 8-bit) where a state row's bytes are one width a value (a raw plan's
    --state-dtype); empty where they are not (an engine keeping parts in different widths)."""
    values = g["layers"] * sequences * (g.get("state_values") or 0)
    if not values or g["state_bytes"] % values:
        return ""
    return {4: ", f32", 2: ", 16-bit", 1: ", 8-bit"}.get(g["state_bytes"] // values, "")


def render_plan(data: dict[str, Any], card_line: str | None = None) -> str:
    """The plan as the CLI prints it; ``card_line`` (a plan given no card: the smallest card
    that fits) after the verdict, before the notes."""
    seqs = data["sequences"]
    sequences = format_quantity(seqs, "sequence")
    kv = data["kv_k"] if data["kv_k"] == data["kv_v"] else f"K {data['kv_k']} / V {data['kv_v']}"
    head = model_line(data)
    multi = data["parallel"]["gpus"] > 1
    # several cards: the whole model's bytes here (one copy of the cache), each card's share
    # in the engine's table
    rows = [["", "model" if multi else "bytes", "detail"]]
    w = data["weights"]
    rows.append(["weights", format_bytes(data["weights_bytes"], 2),
                 f"{w['format']}, {w['source']}, {w['params'] / 1e9:.2f}B params"])
    for g in data["breakdown"]:
        if g["state_bytes"]:
            rows.append([f"state ({g['kind']})", format_bytes(g["state_bytes"], 2),
                         g["description"] + f" per layer, × {sequences}"
                         # an engine keeps its own widths (its table below)
                         + (_state_width(g, data["sequences"])
                            if data.get("engine", "raw") == "raw" else "")])
            continue
        detail = g["description"] + f"; {format_quantity(g['tokens_per_sequence'], 'token')} each"
        if g.get("kept_layers"):
            detail += f"; {g['kept_layers']} of them in {g['kept_format']} (kept unquantized)"
        if g.get("stored"):
            detail += f"; {g['stored']}"
        kind = g["kind"] + (", draft" if g.get("draft") else ", MTP" if g["mtp"] else "")
        rows.append([f"K ({kind})", format_bytes(g["k_bytes"], 2), detail])
        if g["v_bytes"]:
            rows.append([f"V ({kind})", format_bytes(g["v_bytes"], 2), ""])
        if g["scale_bytes"]:
            rows.append([f"scales ({kind})", format_bytes(g["scale_bytes"], 2),
                         "per-layer tensor scales"])
    rows.append(["overhead", format_bytes(data["overhead_bytes"], 2), data["overhead"]["detail"]])
    rate = f"{format_bytes(data['bytes_per_token'], 3)}/token"
    if data["marginal_bytes_per_token"] != data["bytes_per_token"]:
        # sliding or chunked layers hold at most their window: a further token past every
        # window adds only the full layers' rows
        rate = (f"{format_bytes(data['marginal_bytes_per_token'], 3)}/token past the windows "
                f"({format_bytes(data['bytes_per_token'], 3)} within)")
    state = (f" + state {format_bytes(data['state_bytes'], 2)}"
             if data.get("state_bytes") else "")
    rows.append(["total", format_bytes(data["total_bytes"], 2),
                 f"KV {format_bytes(data['kv_bytes'], 2)} ({kv}){state}, {rate}"])
    out = [head, _table(rows, right=(1,)), ""]
    tokens = format_quantity(data["context"], "token")
    ctx = f"{tokens} × {sequences}"
    gpu = data["gpu"]
    tail = [data["verified"]["line"]] if data.get("verified") else []
    notes = [f"note: {n}" for n in data.get("notes", [])]
    if gpu is None:
        if "engine_report" in data:
            # render_engine opens with its own blank line
            lines = out[:-1] + render_engine(data)
            if data.get("to_fit"):  # several cards: after the engine's verdict
                at = next((i for i, line in enumerate(lines)
                           if line.startswith("does not fit under ")), len(lines) - 1)
                lines.insert(at + 1, f"to fit: {to_fit_text(data['to_fit'])}")
            if data["decode"]:
                lines.append(f"decode {decode_text(data)}")
            if data.get("prefill"):
                lines.append(f"prefill {prefill_text(data)}")
            return "\n".join(lines + ([card_line] if card_line else []) + notes + tail)
        out.append(f"needs {format_gib(data['total_bytes'])} GiB for {ctx} "
                   "(give --gpu to check the fit)")
        return "\n".join(out + ([card_line] if card_line else []) + notes + tail)
    used, cap = format_gib(data["total_bytes"]), format_gib(data["budget_bytes"])
    verdict = "fits" if data["fits"] else "does not fit"
    if "engine_report" in data:
        # the verdict is the engine's; the table's total is weights + cache + the runtime
        # estimate, which the engine's own budget (below) replaces
        engine = data["engine_report"]["engine"]
        placed = data["engine_report"]["extra"].get("placement")
        host = (f", part of it in host memory ({placed['how']})" if placed else "")
        head = (f"{verdict} under {engine}: {ctx} on {gpu['name']} (the table's total is "
                f"{used} of {cap} GiB{host}; {engine}'s budget below)")
    else:
        head = f"{verdict}: {ctx} uses {used} of {cap} GiB on {gpu['name']}"
    out.append(f"{head}; max context {_ctx(data['max_context'])}, max sequences at "
               f"{tokens} {data['max_sequences']:,}")
    if not data["fits"]:
        out.append(f"binding: {data['binding']} ({data['binding_reason']})")
    if data.get("to_fit"):
        out.append(f"to fit: {to_fit_text(data['to_fit'])}")
    out += notes
    d = data["decode"]
    if "engine_report" in data:
        out += render_engine(data)
    if d:
        out.append(f"decode {decode_text(data)}")
    if data.get("prefill"):
        out.append(f"prefill {prefill_text(data)}")
    return "\n".join(out + tail)


def _list(cmd: str, as_json: bool, vendor: str | None = None,
          min_memory: str | None = None, engine: str | None = None,
          query: Sequence[str] = (), segment: str | None = None) -> str:
    items: list[dict[str, Any]]
    rows: list[list[str]]
    if cmd == "models":
        words = " ".join(query)
        entries = find_models(words, field="the search") if query else kvcore.model_catalog()
        items = [model_entry(e) for e in entries]
        if not items and not as_json:
            return (f"{unmatched(words)}; kvplan models lists them all, and a Hub repo id "
                    "plans one the catalog lacks")
        # KV/token: f16 K + V a token of one sequence while the context is within every window;
        # past windows: what each token past them adds (only where the model has windows)
        rows = [["id", "params", "layers", "KV/token f16", "past windows", "trained for",
                 "repo"]] + [
            [i["id"], f"{i['params'] / 1e9:.1f}B", str(i["layers"]),
             format_bytes(i["bytes_per_token_f16"], 1),
             format_bytes(i["marginal_bytes_per_token_f16"], 1)
             if i["marginal_bytes_per_token_f16"] != i["bytes_per_token_f16"] else "",
             f"{i['max_position_embeddings']:,}" if i["max_position_embeddings"] else "–",
             i["repo"]] for i in items]
    elif cmd == "gpus":
        items = [gpu_entry(g) for g in gpu_list(
            vendor, min_memory, engine, vendor_field="--vendor", memory_field="--min-memory",
            segment=segment, segment_field="--segment")]
        if not items and not as_json:
            return ("no catalog" + (f" {kvcore.gpus.segment_of(segment)}" if segment else "")
                    + " GPU"
                    + (f" of {kvcore.gpus.maker(vendor)}" if vendor else "")
                    + (f" with at least {min_memory.strip()}" if min_memory else "")
                    + (f" that {ENGINE_TITLES[canonical(engine)]} runs on" if engine else ""))
        # "plans with": the driver's total where known, a unified memory's default GPU share
        rows = [["id", "name", "memory", "plans with", "bandwidth", "FP16 matrix"]] + [
            [i["id"], i["name"], format_bytes(i["memory_bytes"], 1),
             format_bytes(i["usable_bytes"], 1) + (" (shared)" if i["unified_memory"] else ""),
             f"{i['bandwidth_bytes_per_s'] / 1e9:,.0f} GB/s",
             f"{i['matmul_flops_per_s'] / 1e12:,.1f} TFLOPS"] for i in items]
    elif cmd == "weights":
        from kvcore.weights import weight_format_list

        items = weight_format_list()
        # a llama-quantize mix is priced tensor by tensor in the types it gives them; the
        # bits a weight are its average on an 80-layer Llama
        rows = [["name", "bits/weight", "llama-quantize mix", "description"]] + [
            [str(i["name"]), f"{i['bits_per_weight']:.2f}", "yes" if i["gguf_mix"] else "–",
             str(i["description"])] for i in items]
    else:
        items = [describe(f) for f in kvcore.FORMATS]
        rows = [["name", "block", "bytes", "bits/value", "K+V a 128-wide head", "engines",
                 "layout"]] + [
            [i["name"], str(i["block_values"]), str(i["block_bytes"]),
             f"{i['bits_per_value']:g}",
             f"{i['k_row_bytes_128']} + {i['v_row_bytes_128']} B",
             ",".join(cast(dict[str, str], i["engines"])) or "–", i["layout"]] for i in items]
    if as_json:
        return json.dumps(items, indent=2)
    # numbers line up on their last digit
    table = _table(rows, right={"models": (1, 2, 3, 4, 5), "gpus": (2, 3, 4),
                                "formats": (1, 2, 3, 4), "weights": (1,)}[cmd])
    if cmd == "models":
        twins = [(str(a), i["id"]) for i in items for a in cast(list[str], i["aliases"])]
        width = max((len(a) for a, _ in twins), default=0)
        if twins:
            table += ("\n\nalso found by name, the config of an entry but for fields kvplan "
                      "does not read:\n" + "\n".join(f"{a:<{width}}  = {e}" for a, e in twins))
        heads = [i for i in items if i.get("head_of")]
        if heads:
            table += ("\n\nEAGLE draft heads, planned as their target's --draft: "
                      + "; ".join(f"{i['id']} ({i['draft_method']}) for {i['head_of']}"
                                  for i in heads))
    return table


def _measure_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="kvplan measure",
                description="Allocate the cache a plan predicts with kvplan's kernels on this "
                "machine's GPU (or CPU), fill it, and compare tensor, allocator and driver "
                "bytes with the prediction; time decode steps over it.")
    p.add_argument("model", help="catalog id (kvplan models), Hub repo id or address (a GGUF "
                   "repo as REPO:QUANT), config.json or GGUF path, model folder or JSON text")
    p.add_argument("--kv", default="f16",
                   help="KV format for K and V, one the kernels hold (default f16)")
    p.add_argument("--kv-k", default=None, help="KV format for keys (default --kv)")
    p.add_argument("--kv-v", default=None, help="KV format for values (default --kv)")
    p.add_argument("--ctx", "--context", dest="ctx", default="8k",
                   help="context per sequence: 8192, 128k (k = 1024; default 8k)")
    p.add_argument("--seqs", "--sequences", dest="seqs", default="1",
                   help="parallel sequences, each with its own cache (default 1)")
    p.add_argument("--device", default=None, choices=("cuda", "cpu"),
                   help="cuda when a GPU is present, else cpu (reference path)")
    p.add_argument("--layers", default=None, help="measure at most this many layers")
    p.add_argument("--steps", default="20", help="timed decode steps (median)")
    p.add_argument("--db", default=None, help="SQLite file for results (none: do not store)")
    p.add_argument("--mtp", action="store_true", help="count MTP/draft layers")
    p.add_argument("--tp", default=None,
                   help="spread the cache over N ranks, one process per GPU (NCCL; gloo on CPU)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _measure_tp(args: argparse.Namespace, device: str) -> int:
    from kvcore.measure import measure_parallel

    tp = parse_count(args.tp, field="tp", maximum=64)
    ranks = measure_parallel(
        load_model(args.model), tp, context=parse_tokens(args.ctx),
        sequences=parse_count(args.seqs, field="sequences", maximum=4096),
        kv_k=args.kv_k or args.kv, kv_v=args.kv_v or args.kv, device=device,
        steps=parse_count(args.steps, field="steps", maximum=10000),
        max_layers=parse_count(args.layers, field="layers") if args.layers else None,
        mtp=args.mtp)
    data = {"tp": tp, "device": ranks[0]["device"],
            "predicted_bytes": sum(r["predicted_bytes"] for r in ranks),
            "allocated_bytes": sum(r["allocated_bytes"] for r in ranks),
            "ranks": ranks}
    if args.db != "none":
        from pathlib import Path

        from kvcore.measure import tp_record
        from kvcore.store import save_measurement

        data["id"] = save_measurement(tp_record(data), Path(args.db) if args.db else None)
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        for r in ranks:
            same = "equal" if r["allocated_bytes"] == r["predicted_bytes"] else "DIFFERENT"
            print(f"rank {r['rank']}: predicted {format_bytes(r['predicted_bytes'], 4)}, "
                  f"tensors hold {format_bytes(r['allocated_bytes'], 4)} ({same})")
    return 0


def _measure(argv: list[str]) -> int:
    args = _measure_parser().parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        raise UsageError("kvplan measure needs torch and triton: pip install 'kvplan[gpu]'") \
            from None
    from pathlib import Path

    from kvcore.measure import measure
    from kvcore.store import save_measurement

    if args.db not in (None, "none") and Path(args.db).is_dir():
        raise UsageError(f"--db takes a SQLite file, and {shown(args.db)} is a folder")
    device = args.device
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.tp and args.tp != "1":
        return _measure_tp(args, device)
    m = measure(load_model(args.model), context=parse_tokens(args.ctx),
                sequences=parse_count(args.seqs, field="sequences", maximum=4096),
                kv_k=args.kv_k or args.kv, kv_v=args.kv_v or args.kv,
                device=device, steps=parse_count(args.steps, field="steps", maximum=10000),
                max_layers=parse_count(args.layers, field="layers") if args.layers else None,
                progress=sys.stderr if not args.json and sys.stderr.isatty() else None,
                mtp=args.mtp)
    data = m.to_dict()
    if args.db != "none":
        data["id"] = save_measurement(data, Path(args.db) if args.db else None)
    print(json.dumps(data, indent=2) if args.json else render_measurement(data))
    return 0


def render_measurement(d: dict[str, Any]) -> str:
    ok = "equal" if d["allocated_bytes"] == d["predicted_bytes"] else "DIFFERENT"
    lines = [f"{d['model']} · K {d['kv_k']} / V {d['kv_v']} · "
             f"{format_quantity(d['context'], 'token')} × "
             f"{format_quantity(d['sequences'], 'sequence')} on {d['device']}",
             f"predicted {format_bytes(d['predicted_bytes'], 4)}, tensors hold "
             f"{format_bytes(d['allocated_bytes'], 4)} ({ok})"]
    if d["layers_measured"] < d["layers_total"]:
        why = f" ({d['subset_reason']})" if d.get("subset_reason") else ""
        # a layer can hold more than one cache (an MLA latent and its indexer keys; V4's window,
        # compressed entries and compressor): the count is of layer caches
        lines.append(f"measured {d['layers_measured']} of {d['layers_total']} layer caches{why}; the "
                     f"whole model is {d['scale']:.3f}× that")
    if d["allocator_bytes"] is not None:
        lines.append(f"allocator: {d['allocator_bytes']:,} B allocated (predicted "
                     f"{d['predicted_allocator_bytes']:,}), {d['allocator_reserved_bytes']:,} B "
                     f"reserved (predicted {d['predicted_reserved_bytes']:,}); driver "
                     f"{d['driver_bytes']:,} B")
    dec = d["decode"]
    if dec.get("seconds_per_step"):
        if dec.get("timing") == "reference":
            line = (f"decode step over the cache: {dec['seconds_per_step'] * 1e3:,.1f} ms in the "
                    f"torch reference on {d['device']} (a check that it runs, not a kernel's "
                    "speed)")
        else:
            line = (f"decode step over the cache: {dec['seconds_per_step'] * 1e3:.3f} ms, "
                    f"{dec['cache_bytes_per_s'] / 1e9:.1f} GB/s of cache")
        if dec.get("fraction_of_read_bandwidth"):
            line += (f" ({dec['fraction_of_read_bandwidth']:.0%} of measured read bandwidth, "
                     f"{dec['speedup_vs_f16_sdpa'] or 0:.2f}× fp16 SDPA)")
        if dec.get("timing") == "cuda_graph":
            line += ", replayed from a CUDA graph"
        lines.append(line)
    if dec.get("attention_share") is not None:
        lines.append(f"per generated token: attention {dec['attention_seconds_per_token'] * 1e3:.2f}"
                     f" ms + weights {dec['weights_seconds_per_token'] * 1e3:.2f} ms at the "
                     f"measured bandwidth; attention is {dec['attention_share']:.0%} of it")
    return "\n".join(lines)


def _serve(argv: list[str]) -> int:
    args = _serve_parser().parse_args(argv)
    port = parse_count(args.port, field="port", minimum=1, maximum=65535)
    if not args.host.strip():
        raise UsageError("--host needs an address (127.0.0.1, or 0.0.0.0 for every interface)")
    try:
        import uvicorn

        from app.web import create_app
    except ImportError:
        raise UsageError("kvplan serve needs the web extra: pip install 'kvplan[web]'") from None
    uvicorn.run(create_app(), host=args.host, port=port)
    return 0


#: the plan flags' dests whose field names (the API's) differ, and back
_DEST = {"context": "ctx", "sequences": "seqs"}
_FIELD = {d: f for f, d in _DEST.items()}
#: what each find question lists, which a launch command's own choice gives way to
FIND_LISTS = {"find_format": ("kv", "kv_k", "kv_v"), "find_weights": ("weights",),
              "find_gpu": ("gpus", "tp", "pp", "tensor_split")}


def _given(argv: list[str]) -> set[str]:
    """The plan flags (their dests) that ``argv`` sets itself, defaults aside."""
    p = _plan_parser()
    for action in p._actions:
        action.default = argparse.SUPPRESS
    return set(vars(p.parse_args(argv)))


def _from_command(args: argparse.Namespace, argv: list[str]) -> tuple[Launch, ModelSpec, str]:
    """--command read into ``args``: the command's model and fields where the user's own
    MODEL and flags do not set them; the launch, its model and the kvplan line it reads as."""
    launch = read_command(args.command)
    if launch.options_path is not None:
        # the options file (--config, --extra_llm_api_options), where it is on this machine
        path = Path(launch.options_path).expanduser()
        try:
            text = path.read_text(encoding="utf-8") if path.is_file() else None
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(f"{launch.options_path}: the options file could not be read "
                             f"({exc.__class__.__name__})", field="command") from None
        if text is not None:
            launch = read_command(args.command, text)
    spec, fields = resolve(launch, args.model, weights_given=args.weights is not None)
    given = _given(argv)
    give_way(launch, fields, {_FIELD.get(d, d) for d in given})
    # a find question lists what the command chose: the choice gives way to the list
    for find, names in FIND_LISTS.items():
        if getattr(args, find):
            for name in names:
                fields.pop(name, None)
    for name, value in fields.items():
        if name != "model" and _DEST.get(name, name) not in given:
            setattr(args, _DEST.get(name, name), value)
    args.model = fields["model"]
    read = {k: getattr(args, _DEST.get(k, k)) for k in fields}
    return launch, spec, cli_line(read)


def render_command(launch: Launch, read_as: str) -> str:
    lines = [f"command ({launch.engine}) read as: {read_as}"]
    lines += [f"note: {n}" for n in launch.notes]
    if launch.unread:
        lines.append("not read (no memory kvplan plans): " + ", ".join(launch.unread))
    if launch.unknown:
        lines.append("not known to kvplan (the plan is without them): "
                     + ", ".join(launch.unknown))
    return "\n".join(lines) + "\n"


def _asks_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON (read from the words, since the error may be
    the parse itself)."""
    words = argv[:argv.index("--")] if "--" in argv else argv
    return "--json" in words


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # huggingface_hub logs each retry of an unreachable Hub; the error line says what failed.
    # It reads HF_HUB_VERBOSITY when first imported; a logger already set up is set here.
    if "HF_HUB_VERBOSITY" not in os.environ:
        os.environ["HF_HUB_VERBOSITY"] = "error"
        logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    if argv and argv[0] == "plan" and not Path("plan").exists():
        # the plan is the command without a name; "kvplan plan MODEL" is taken as it
        argv = argv[1:]
    try:
        if argv and argv[0] in SUBCOMMANDS:
            cmd, rest = argv[0], argv[1:]
            if cmd == "serve":
                return _serve(rest)
            if cmd == "measure":
                return _measure(rest)
            args = _list_parser(cmd).parse_args(rest)
            print(_list(cmd, args.json, getattr(args, "vendor", None),
                        getattr(args, "min_memory", None), getattr(args, "engine", None),
                        getattr(args, "query", ()), getattr(args, "segment", None)))
            return 0
        args = _plan_parser().parse_args(argv)
        finds = [f for f in ("find_gpu", "find_format", "find_weights", "find_model",
                             "find_draft") if getattr(args, f)]
        if len(finds) > 1:
            raise UsageError(" and ".join("--" + f.replace("_", "-") for f in finds)
                             + " ask different questions; give one")
        launch = None
        if args.command is not None:
            if args.find_model:
                raise UsageError("--command names a model and --find-model lists models; give "
                                 "one")
            launch, command_spec, read_as = _from_command(args, argv)
        if args.find_model:
            check_find_model(given=None, gpu=args.gpu, gpus=args.gpus,
                             kv_budget=args.kv_budget, prefix="--", draft=args.draft)
            # words beside --find-model keep the catalog models they name
            entries = find_models(args.model, field="MODEL") if args.model else None
            if entries == []:
                raise UsageError(f"{unmatched(args.model)}; --find-model takes words of the "
                                 "models' names (qwen3, 'llama 3.1'; kvplan models WORDS lists "
                                 "them) or none")
            found = find_model(lambda spec: build_query(args, spec), entries)
            print(json.dumps(found, indent=2) if args.json
                  else render_find_model(args, found))
            return 0
        if args.model is None:
            raise UsageError("a model is required: a catalog id (kvplan models), a Hub repo id, "
                             "a config.json or GGUF path, or JSON text (or --find-model)")
        if args.find_gpu:
            check_find_gpu(gpu=args.gpu, gpus=args.gpus, tp=args.tp, pp=args.pp,
                           kv_budget=args.kv_budget, dp=args.dp, attn_dp=args.attn_dp,
                           prefix="--")
        elif args.vendor is not None:
            raise UsageError("--vendor chooses among the cards --find-gpu tries; give it with "
                             "--find-gpu (kvplan gpus --vendor lists a maker's cards)")
        elif args.segment is not None:
            raise UsageError("--segment chooses among the cards --find-gpu tries; give it with "
                             "--find-gpu (kvplan gpus --segment lists one kind of card)")
        if args.find_format:
            check_find_format(kv=args.kv, kv_k=args.kv_k, kv_v=args.kv_v, prefix="--")
        if args.find_weights:
            check_find_weights(weights=args.weights, prefix="--")
        if args.find_draft:
            if args.draft is not None:
                raise UsageError("--find-draft tries the catalog's models as the draft; leave "
                                 "out --draft")
            # the draft's weights and acceptance apply to every draft tried
            draft_weights, acceptance = args.draft_weights, args.acceptance
            args.draft_weights = args.acceptance = None
        query = build_query(args, command_spec if launch is not None else None)
        if launch is not None:
            query = launch_query(launch, query, shorten=not (
                args.find_gpu or args.find_format or args.find_weights))
            if not args.json:
                print(render_command(launch, read_as))
        if args.find_gpu:
            rows = find_gpu_for(query, vendor=args.vendor, vendor_field="--vendor",
                                segment=args.segment, segment_field="--segment")
            print(json.dumps(rows, indent=2) if args.json
                  else render_find_gpu(query, rows, args.vendor, args.segment))
            return 0
        if args.find_format:
            if args.json:
                print(json.dumps(find_format_listing(query), indent=2))
                return 0
            refused: list[dict[str, Any]] = []
            rows = find_format(query, refused)
            print(render_find_format(query, rows, refused))
            return 0
        if args.find_draft:
            found = find_draft(query, draft_weights, acceptance)
            print(json.dumps(found, indent=2) if args.json else render_find_draft(query, found))
            return 0
        if args.find_weights:
            rows = find_weights(query)
            print(json.dumps(rows, indent=2) if args.json else render_find_weights(query, rows))
            return 0
        data = answered(query)
        if launch is not None:
            data["command"] = {"engine": launch.engine, "read_as": read_as,
                               "notes": launch.notes, "unread": launch.unread,
                               "unknown": launch.unknown}
        if args.json:
            print(json.dumps(data, indent=2))
        else:
            print(render_plan(data, smallest_card_line(query)
                              if not query.gpus and args.kv_budget is None else None))
        return 0
    except (KvplanError, UsageError) as exc:
        print(f"kvplan: error: {exc}", file=sys.stderr)
        if _asks_json(argv):
            # a script reading stdout gets an object in the API's error shape, not nothing
            print(json.dumps({"ok": False, "error": str(exc), "exit_code": 2,
                              "field": getattr(exc, "field", None)}, indent=2))
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
