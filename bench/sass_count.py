"""Instructions in the compiled decode loop, without a GPU: compile decode_split_kernel for
sm_90 with the ptxas and nvdisasm that ship in the triton wheel, find the loop (the block a
backward branch closes) and count its instructions by opcode. With --append, the append kernel
instead (straight-line code: every instruction, per value a thread quantizes).

    python bench/sass_count.py FORMAT [--block-n 32] [--warps 4] [--stages 2] [--src DIR]
        [--dump DIR] [--words] [--head-dim 576 --k-only [--whole]]
    python bench/sass_count.py FORMAT --append [--rows 32] [--warps 4] [--selects|--lookup]
    python bench/sass_count.py q4_0|q8_0|nvfp4|tbq4|tbq3 --gluon [after|scaled] [--group 4]
        [--pipe] [--const NAME=VALUE ...]
    python bench/sass_count.py kivi2|kivi4 --gluon [after] [--group 4] [--v-after 0|1]
        [--k-sub 0|1]

Prints registers, the loop's warp instructions per iteration and thread instructions per cached
value (K and V). --src takes the kvcore package from another checkout (to compare versions).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

#: an instruction line of nvdisasm's listing, and its address
INSTRUCTION = re.compile(r"\s+/\*([0-9a-f]{4,})\*/")
#: pointer types of a format's two planes (data, scales)
DATA = {0: "*fp16", 2: "*i8"}
SIDE = {1: "*fp32", 2: "*fp16", 3: "*fp16", 4: "*fp16", 5: "*fp16"}


def _row_widths(fmt: str, d: int) -> tuple[int, int]:
    """Row widths in elements of a format's two planes at head_dim ``d`` (1 where there is no
    second plane or it holds one scale a row)."""
    from kvcore.kernels.ref import plane_widths

    widths = [w for w, _ in plane_widths(fmt, d).values()]
    return widths[0], widths[1] if len(widths) > 1 else 1


def _compile(fn, sig: dict, consts: dict, ints16: tuple[str, ...], options: dict,
             gluon: bool = False):
    """``fn`` compiled for sm_90 with the tools in the triton wheel: (kernel, SASS, resource
    usage). Pointers are 16-byte aligned and the ``ints16`` multiples of 16, as the launcher
    specialises them at run time. ``gluon``: a kernel of the Gluon dialect."""
    import inspect

    import triton
    from triton.backends.compiler import GPUTarget
    if gluon:
        from triton.experimental.gluon._runtime import GluonASTSource as ASTSource
    else:
        from triton.compiler import ASTSource

    signature = inspect.signature(fn.fn).parameters
    params = list(signature)
    consts = {k: v for k, v in consts.items() if k in params}
    consts.update({k: p.default for k, p in signature.items()  # the rest at their defaults
                   if k not in consts and k not in sig and p.default is not p.empty})
    sig = {**sig, **{k: "constexpr" for k in consts}}
    sig = {k: sig[k] for k in params}
    names = list(sig)
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n, t in sig.items()
             if t.startswith("*") or n in ints16}
    src = ASTSource(fn=fn, signature=sig, attrs=attrs,
                    constexprs={(names.index(k),): v for k, v in consts.items()})
    kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)
    bindir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as fh:
        fh.write(kernel.asm["cubin"])
    sass = subprocess.run([str(bindir / "nvdisasm"), "-c", fh.name], capture_output=True,
                          text=True, check=True).stdout
    usage = subprocess.run([str(bindir / "cuobjdump"), "--dump-resource-usage", fh.name],
                           capture_output=True, text=True, check=True).stdout
    os.unlink(fh.name)
    return kernel, sass, usage


def probe_line(name: str, fn, sig: dict, consts: dict, ints16: tuple[str, ...] = ("n_tokens",),
               dump: str | None = None) -> str:
    """A probe's line: ``fn`` compiled for sm_90 in one one-warp stage (_compile), its
    registers and its loop's instructions by opcode, the twelve most frequent."""
    import triton

    kernel, sass, usage = _compile(fn, sig, consts, ints16, {"num_warps": 1, "num_stages": 1})
    if dump:
        _dump(dump, name, kernel, sass)
    lines = [ln for ln in sass.splitlines() if INSTRUCTION.match(ln)]
    first, last = _loop(sass, lines)
    top = ", ".join(f"{k} {v}" for k, v in _opcodes(lines[first:last + 1]).most_common(12))
    return (f"{name:8} triton {triton.__version__} regs {_registers(usage)} "
            f"loop {last - first + 1} instructions: {top}")


def _dump(folder: str, name: str, kernel, sass: str) -> None:
    """The kernel's ttgir, ptx and sass as NAME.ttgir, NAME.ptx and NAME.sass in FOLDER."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    for ext in ("ttgir", "ptx"):
        (out / f"{name}.{ext}").write_text(kernel.asm[ext])
    (out / f"{name}.sass").write_text(sass)


def _registers(usage: str) -> str:
    regs = re.search(r"REG:(\d+)", usage)
    return regs.group(1) if regs else "?"


def _opcodes(lines: list[str]) -> collections.Counter:
    return collections.Counter(
        re.sub(r"^\s+/\*[0-9a-f]{4,}\*/\s+(@!?U?P\w+\s+)?", "", ln).split()[0].split(".")[0]
        for ln in lines)


def compile_append(fmt: str, rows: int, warps: int, stages: int = 1, sides: int = 2,
                   fma: bool = True, bias: float | None = None, prefetch: bool | None = None,
                   max_registers: int = 0, lookup: bool = False):
    """The append kernel of ``fmt`` (head_dim 128, 8 KV heads, fp16 rows, the GPU paths; K
    and V in one launch, ``sides`` 2, and a rotated format's search in its FMA form with the
    codebook's bias, or ``bias``, as append launches them; ``fma`` False: the search by
    selects; ``prefetch``: the rotated kernel's PREFETCH, by default the launch's,
    ROTATED_LAUNCH's for the FMA form; ``max_registers``: a cap, 0 none; ``lookup``: the FMA
    form by lookup, codebook.cells) compiled for sm_90: (kernel, SASS, resource usage)."""
    from kvcore.kernels import codebook
    from kvcore.kernels import triton_ops as ops
    from kvcore.kernels.cache import ROTATED_LAUNCH

    if prefetch is None:
        prefetch = fma and ROTATED_LAUNCH.get(fmt, (0, 0, 0, False))[3]

    f = ops.FMT_CODES[fmt]
    levels = 8 if f == 5 else 16
    sig = {"X": "*fp16", "XV": "*fp16", "PAGES": "*i64", "OFFSETS": "*i64",
           "P0": DATA.get(f, "*u8"), "P1": SIDE.get(f, "*u8"), "P0V": DATA.get(f, "*u8"),
           "P1V": SIDE.get(f, "*u8"), "GS": "*fp32", "GSV": "*fp32", "ROT": "*fp16",
           "TH": "*fp32", "CENT": "*fp32", "CELLS": "*i64", "n_rows": "i32", "PAGE": "i32"}
    x0, x1 = _row_widths(fmt, 128)
    bias = codebook.staircase_bias(levels) if bias is None else bias
    consts = dict(H_KV=8, FMT=f, D=128, DP=128, DPOW=128, X0=x0, X1=x1,
                  LEVELS=levels, ROWS=rows, HW=True, SIDES=sides, FMA=fma, BIAS=bias,
                  PREFETCH=prefetch)
    if lookup and fma and f in (4, 5):
        inv, cells = codebook.cells(levels, bias)
        consts.update(CELL_INV=inv, CELL_MASK=len(cells) - 1)
    kernel = ops.rotated_append_kernel if f in (4, 5) else ops.append_kernel
    options = {"num_warps": warps, "num_stages": stages}
    if max_registers:
        options["maxnreg"] = max_registers
    return _compile(kernel, sig, consts, ("PAGE",), options)


def compile_kivi_flush(bits: int, warps: int = 4, late: bool = False, stages: int = 3,
                       max_registers: int = 0, batched: bool = False, parts: int = 1):
    """KIVI's flush kernel (head_dim 128, 8 KV heads, groups of 32 tokens, the GPU paths;
    ``late``: the values loaded once the keys are stored; ``batched``: several sequences'
    appends in one launch, as KiviCache.write_appends launches it; ``parts``: its channel
    blocks shared among that many programs) compiled for sm_90:
    (kernel, SASS, resource usage)."""
    from kvcore.kernels.kivi_triton import kivi_flush_kernel

    sig = {"KR": "*fp16", "VR": "*fp16", "XK": "*fp16", "XV": "*fp16", "KQ": "*u8",
           "KS": "*fp16", "KM": "*fp16", "VQ": "*u8", "VS": "*fp16", "VM": "*fp16",
           "GT": "*i32", "s": "i32", "stride_gt": "i32", "g0": "i32", "nflush": "i32",
           "live": "i32", "first": "i32", "n": "i32", "RING": "i32", "j_first": "i32",
           **({"PLANS": "*i32"} if batched else {})}
    consts = dict(H=8, D=128, DV=128, G=32, BITS=bits, PER=8 // bits, LEVELS=(1 << bits) - 1,
                  HAS_V=True, TOK=32, RING_SLOTS=True, HW=True, LATE_V=late, STAGES=3,
                  BATCHED=batched, PARTS=parts)
    options = {"num_warps": warps, "num_stages": stages}
    if max_registers:
        options["maxnreg"] = max_registers
    return _compile(kivi_flush_kernel, sig, consts, ("RING",), options)


def compile_kivi_decode(bits: int, warps: int = 1, stages: int = 2, tok: int = 64,
                        lazy: bool = True, values: bool = True, swap: bool | None = None,
                        max_registers: int | None = None, rows: int = 64):
    """KIVI's decode kernel (head_dim 128, GQA 32/8, groups of 32 tokens, the GPU paths;
    ``swap``: its swapped products, the query rows padded to 8; ``max_registers``: a cap on the
    registers a thread, 0 none; both by default as decode takes them over ``rows``
    sequence-head rows, 64 being B=8) compiled for sm_90: (kernel, SASS, resource usage)."""
    from kvcore.kernels.kivi import decode_form
    from kvcore.kernels.kivi_triton import kivi_decode_kernel

    swap, cap = decode_form(bits, 128, values, swap, rows)
    if max_registers is None:
        max_registers = cap

    sig = {"Q": "*fp16", "ACC": "*fp32", "ML": "*fp32", "KQ": "*u8", "KS": "*fp16",
           "KM": "*fp16", "VQ": "*u8", "VS": "*fp16", "VM": "*fp16", "KR": "*fp16",
           "VR": "*fp16", "NQ": "*i32", "NR": "*i32", "GT": "*i32", "stride_gt": "i32",
           "RING": "i32", "n_splits": "i32", "qk_scale": "fp32"}
    consts = dict(H=8, GROUP=4, QPAD=8 if swap else 16, D=128, DV=128, DP=128, G=32, BITS=bits,
                  PER=8 // bits, LEVELS=(1 << bits) - 1, SPLIT=1024, HAS_V=values, TOK=tok,
                  ASM=True, QB=1, PDL=False, LAZY=lazy, SWAP=swap)
    return _compile(kivi_decode_kernel, sig, consts, ("RING",),
                    {"num_warps": warps, "num_stages": stages,
                     **({"maxnreg": max_registers} if max_registers else {})})


def _count_append(args) -> None:
    """Every instruction of the append kernel (head_dim 128, 8 KV heads), per value; for a
    rotated format (persistent programs) the loop over row blocks."""
    kernel, sass, usage = compile_append(args.fmt, args.rows, args.warps, args.stages,
                                         fma=not args.selects, lookup=args.lookup)
    if args.dump:
        _dump(args.dump, f"{args.fmt}-append", kernel, sass)
    lines = [ln for ln in sass.splitlines() if INSTRUCTION.match(ln)]
    if args.fmt in ("tbq4", "tbq3"):
        loop = _loop(sass, lines)
        lines = lines[loop[0]:loop[1] + 1] if loop else lines
    per_thread = args.rows * 128 / (args.warps * 32)
    print(f"{args.fmt} append: {_registers(usage)} registers, {len(lines)} instructions, "
          f"{len(lines) / per_thread:.1f} per value (a thread quantizes {per_thread:g} values)")
    print(", ".join(f"{op} {n}" for op, n in _opcodes(lines).most_common(16)))


def loops(sass: str, lines: list[str]) -> list[tuple[int, int]]:
    """Every loop of the listing: (first, last) line of each block a backward branch closes."""
    at = {int(INSTRUCTION.match(ln).group(1), 16): i for i, ln in enumerate(lines)}
    found = []
    for i, ln in enumerate(lines):
        m = re.search(r"BRA `\((\.L_x_\d+)\)", ln)
        if not m:
            continue
        after = sass[sass.find(m.group(1) + ":"):].splitlines()[1]
        a = INSTRUCTION.match(after)
        if a and at.get(int(a.group(1), 16), len(lines)) < i:
            found.append((at[int(a.group(1), 16)], i))
    return found


def _loop(sass: str, lines: list[str], holding: str = "") -> tuple[int, int] | None:
    """The longest loop of the listing (of those with an instruction ``holding``, if given):
    (first, last) line of the block a backward branch closes."""
    found = [(a, b) for a, b in loops(sass, lines)
             if not holding or any(holding in ln for ln in lines[a:b + 1])]
    return max(found, key=lambda x: x[1] - x[0], default=None)


def local_in_loops(sass: str) -> int:
    """Local-memory loads and stores (spill traffic) inside the listing's loops."""
    lines = [ln for ln in sass.splitlines() if INSTRUCTION.match(ln)]
    return sum(1 for a, b in loops(sass, lines) for ln in lines[a:b + 1]
               if re.search(r"\b(STL|LDL)\b", ln))


def parser() -> argparse.ArgumentParser:
    """The command line (also how tests ask for a kernel: parser().parse_args([...]))."""
    ap = argparse.ArgumentParser()
    ap.add_argument("fmt")
    ap.add_argument("--block-n", type=int, default=32)
    ap.add_argument("--warps", type=int, default=4)
    ap.add_argument("--stages", type=int, default=2)
    ap.add_argument("--src", default=str(Path(__file__).resolve().parent.parent))
    ap.add_argument("--words", action="store_true", help="decode: read the planes as words")
    ap.add_argument("--dump", help="write the kernel's ttgir, ptx and sass into this folder")
    ap.add_argument("--append", action="store_true", help="count the append kernel")
    ap.add_argument("--rows", type=int, default=32, help="append: rows per program")
    ap.add_argument("--lookup", action="store_true",
                    help="append: the rotated formats' FMA search by lookup (codebook.cells)")
    ap.add_argument("--selects", action="store_true",
                    help="append: the rotated formats' search by selects (before v63; the FMA "
                    "staircase by default, as append launches it)")
    ap.add_argument("--head-dim", type=int, default=128,
                    help="decode: head_dim (a width that is not a power of two is held in "
                         "two parts, as the decode holds it)")
    ap.add_argument("--k-only", action="store_true",
                    help="decode: a K-only cache (an MLA latent), its key tiles reused for V")
    ap.add_argument("--pad-rows", type=int, default=0,
                    help="decode: rows the query group is padded to (default 16 or the group's "
                         "power of two)")
    ap.add_argument("--group", type=int, default=0,
                    help="decode: query heads a KV head (16 K-only, else 4)")
    ap.add_argument("--page-mode", type=int, default=0, choices=(0, 1, 2),
                    help="decode: 0 tiles within a page, 1 pages of 16 tokens, 2 any page")
    ap.add_argument("--not-opaque", action="store_true",
                    help="decode: compile the looked-up rows as the interpreter runs them")
    ap.add_argument("--v-bytes", action="store_true",
                    help="decode with --words: V's planes read as bytes all the same")
    ap.add_argument("--v-fmt", help="decode: V's format where it is not K's (head_dim 128)")
    ap.add_argument("--lazy", action="store_true",
                    help="decode: rescale the running output only when the max grows")
    ap.add_argument("--wide", action="store_true",
                    help="decode, with --lazy: check V's row scales against WIDE_SCALE")
    ap.add_argument("--pdl", action="store_true",
                    help="decode: compiled as a programmatic dependent launch (pdl_enter)")
    ap.add_argument("--whole", action="store_true",
                    help="decode: hold the head in one power of two of lanes (no parts)")
    ap.add_argument("--int-keys", action="store_true",
                    help="decode, q8_0 K: scores as the integer product (decode(int_keys=…))")
    ap.add_argument("--swap", action="store_true",
                    help="decode, a 4-bit format: the products swapped (decode(swap=…))")
    ap.add_argument("--rotations-apart", action="store_true",
                    help="decode, a rotated format: the query rotated and the output rotated "
                    "back by their own kernels (decode(rotate_in_kernel=False))")
    ap.add_argument("--max-registers", type=int, default=0,
                    help="decode: cap the registers a thread (0: none)")
    ap.add_argument("--pipe", action="store_true",
                    help="gluon: each tile's scores beside the tile before's value product (as "
                    "decode launches it at 8 programs a multiprocessor)")
    ap.add_argument("--v-after", type=int, choices=(0, 1), default=None,
                    help="gluon, KIVI: the values' scales on the weights (V_AFTER) or not "
                    "(default: as decode launches it)")
    ap.add_argument("--k-sub", type=int, choices=(0, 1), default=None,
                    help="gluon, KIVI: the keys' codes as subnormals (K_SUB) or not (default: "
                    "as decode launches it)")
    ap.add_argument("--const", action="append", default=[],
                    help="gluon: NAME=VALUE, a compile-time argument of the kernel over "
                    "decode's (an int, or True/False)")
    ap.add_argument("--gluon-stages", type=int, default=0, help="gluon: stages (0: decode's)")
    ap.add_argument("--gluon", nargs="?", const="default", choices=("default", "after", "scaled"),
                    help="the Gluon kernel (q4_0, q8_0) as decode launches it (with --group), "
                         "or in its AFTER or scaled-as-unpacked form")
    return ap


def _consts(pairs: list[str]) -> dict:
    """--const's NAME=VALUE pairs as compile-time arguments (True/False, or ints)."""
    out: dict = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        flag = {"True": True, "False": False}.get(value)
        if flag is not None:
            out[name] = flag
        elif value.lstrip("-").isdigit():
            out[name] = int(value)
        else:
            raise SystemExit(f"--const: expected NAME=VALUE with an int or True/False, "
                             f"got {pair!r}")
    return out


def compile_decode(args: argparse.Namespace):
    """decode_split_kernel compiled for sm_90 as ``args`` (parser()'s) ask: (kernel, SASS,
    resource usage)."""
    from kvcore.kernels.triton_ops import FMT_CODES, decode_split_kernel

    f = FMT_CODES[args.fmt]
    vfmt = args.v_fmt or args.fmt
    fv = FMT_CODES[vfmt]
    data, side = DATA.get(f, "*u8"), SIDE.get(f, "*u8")
    sig = {"Q": "*fp16", "ACC": "*fp32", "ML": "*fp32", "K0": data, "K1": side, "KGS": "*fp32",
           "V0": DATA.get(fv, "*u8"), "V1": SIDE.get(fv, "*u8"), "VGS": "*fp32",
           "CENT_K": "*fp16", "CENT_V": "*fp16",
           "BLOCK_TABLE": "*i32", "SEQ_LENS": "*i32", "stride_bt": "i32", "n_splits": "i32",
           "qk_scale": "fp32", "PAGE": "i32", "SPLIT": "i32", "SIGNS": "*fp32"}
    from kvcore.kernels.cache import head_parts, tail_offsets
    from kvcore.kernels.ref import padded

    d = args.head_dim
    x0, x1 = _row_widths(args.fmt, d)
    dp = padded(args.fmt, d)
    width = max(d, dp)
    main, tail = (1 << (width - 1).bit_length(), 0) if args.whole else head_parts(width)
    off = tail_offsets(args.fmt, main) if tail else (0, 0)
    if vfmt != args.fmt and (tail or padded(vfmt, d) != dp):
        raise SystemExit("--v-fmt: K and V formats of one padded width, no head parts")
    xv0, xv1 = _row_widths(vfmt, d)
    group = args.group or (16 if args.k_only else 4)
    consts = dict(H_KV=1 if args.k_only else 8, GROUP=group,
                  QPAD=args.pad_rows or max(16, 1 << (group - 1).bit_length()),
                  D=main + tail if f in (4, 5) else d, DPOW=main,
                  DPK=main if tail else dp, DPV=main if tail else dp, FMT_K=f, FMT_V=fv,
                  XK0=x0, XK1=x1, XV0=xv0, XV1=xv1, BLOCK_N=args.block_n,
                  PAGE_MODE=args.page_mode, PAGE_C=16 if args.page_mode == 1 else 1, ASM=True,
                  WORDS=args.words, SAME_KV=args.k_only, DT=tail, GPU=not args.not_opaque, QB=1,
                  WORDS_V=args.words and not args.v_bytes, PDL=args.pdl, LAZY=args.lazy,
                  WIDE=args.lazy and args.wide,
                  DKT=dp - main if tail else 0, DVT=dp - main if tail else 0, OK0=off[0],
                  OK1=off[1], OV0=off[0], OV1=off[1], IK=args.int_keys, SWAP=args.swap)
    # the rotations in the kernel, as decode does for a head of 128 lanes in one part
    fold = main == 128 and not tail and not args.rotations_apart
    consts.update(ROT_Q=fold and f in (4, 5), ROT_V=fold and fv in (4, 5))
    options = {"num_warps": args.warps, "num_stages": args.stages}
    if args.max_registers:
        options["maxnreg"] = args.max_registers
    return _compile(decode_split_kernel, sig, consts, ("PAGE", "SPLIT"), options)


def compile_gluon(fmt: str = "q4_0", group: int = 4, after: bool | None = None,
                  stages: int | None = None, pdl: bool = True, pipe: bool | None = None,
                  per_sm: int = 0, rows: int = 0, extra: dict | None = None):
    """The Gluon kernel (kvcore/kernels/gluon_q4_0.py) for K and V in ``fmt`` (q4_0 or q8_0)
    compiled for sm_90 as decode launches it for ``group`` query heads a KV head at ``per_sm``
    programs a multiprocessor over ``rows`` (sequence, KV head) rows (0: as at the most;
    ``after`` None: the AFTER forms where the group fits 8 columns; ``stages`` and ``pipe``
    None: decode's), q4_0's PIPE and PAIRS forms with decode's cap on their registers, and
    ``extra`` compile-time arguments over all these: (kernel, SASS, resource usage)."""
    from kvcore.kernels.gluon_q4_0 import (
        launch_consts,
        launch_registers,
        q4_0_swapped_kernel,
    )

    codes = "*i8" if fmt == "q8_0" else "*u8"
    scales = "*u8" if fmt == "nvfp4" else "*fp16"
    query = "*fp32" if fmt in ("tbq4", "tbq3") else "*fp16"  # rotated, in float32
    sig = {"Q": query, "ACC": "*fp32", "ML": "*fp32", "K0": codes, "K1": scales,
           "V0": codes, "V1": scales, "GSK": "*fp32", "GSV": "*fp32", "TAB": "*i32",
           "BLOCK_TABLE": "*i32", "SEQ_LENS": "*i32",
           "stride_bt": "i32", "bt_cols": "i32", "n_splits": "i32", "qk_scale": "fp32",
           "PAGE": "i32", "SPLIT": "i32"}
    consts = {"H_KV": 8, "GROUP": group, "D": 128, "LAZY": False, "PDL": pdl,
              **launch_consts(fmt, group, per_sm, rows)}
    if after is not None:
        consts.update(K_AFTER=after, V_AFTER=after)
    if stages:
        consts["STAGES"] = stages
    if pipe is not None:
        consts["PIPE"] = pipe
    consts.update(extra or {})
    options = {"num_warps": 1}
    if launch_registers(fmt, consts):
        options["maxnreg"] = launch_registers(fmt, consts)
    return _compile(q4_0_swapped_kernel, sig, consts, ("PAGE", "SPLIT", "stride_bt"), options,
                    gluon=True)


def compile_kivi_gluon(group: int = 4, k_after: bool = False, bits: int = 2, lanes: int = 128,
                       v_after: bool | None = None, k_sub: bool | None = None):
    """KIVI's Gluon kernel (kvcore/kernels/gluon_kivi.py) compiled for sm_90 as KiviCache.decode
    launches it for ``group`` query heads a KV head (past 8: the 16-column form) in kivi2
    (``bits`` 4: kivi4; K_AFTER: ``k_after``) with heads of ``lanes`` (128 or 64), V_AFTER and
    K_SUB as ``v_after`` and ``k_sub`` say (None: as decode launches it, never beside
    K_AFTER): (kernel, SASS, resource usage)."""
    from kvcore.kernels.gluon_kivi import kivi2_swapped_kernel, launch_for

    launch = launch_for(group, lanes, bits)
    registers, qn = launch.registers, launch.qn
    forms = launch.forms(k_after)
    if v_after is None:
        v_after = forms.get("V_AFTER", False)
    if k_sub is None:
        k_sub = forms.get("K_SUB", False)

    sig = {"Q": "*fp16", "ACC": "*fp32", "ML": "*fp32", "KQ": "*u8", "KS": "*fp16",
           "KM": "*fp16", "VQ": "*u8", "VS": "*fp16", "VM": "*fp16", "KR": "*fp16",
           "VR": "*fp16", "NQ": "*i32", "NR": "*i32", "GT": "*i32", "stride_gt": "i32",
           "RING": "i32", "n_splits": "i32", "qk_scale": "fp32", "SPLIT": "i32"}
    consts = {"H": 8, "GROUP": group, "STAGES": 3, "LAZY": True, "PDL": True, "K_AFTER": k_after,
              "BITS": bits, "PAIRS": False, "QN": qn, "D": lanes, "V_AFTER": v_after,
              "K_SUB": k_sub}
    return _compile(kivi2_swapped_kernel, sig, consts, ("SPLIT",),
                    {"num_warps": 1, "maxnreg": registers}, gluon=True)


def main() -> None:
    args = parser().parse_args()
    sys.path.insert(0, args.src)
    if args.append:
        _count_append(args)
        return
    if args.gluon and args.fmt in ("kivi2", "kivi4"):
        kernel, sass, usage = compile_kivi_gluon(args.group or 4, args.gluon == "after",
                                                 int(args.fmt[-1]),
                                                 v_after=None if args.v_after is None
                                                 else bool(args.v_after),
                                                 k_sub=None if args.k_sub is None
                                                 else bool(args.k_sub))
        args.block_n, args.warps, args.k_only = 32, 1, False
    elif args.gluon:
        kernel, sass, usage = compile_gluon(args.fmt, args.group or 4,
                                            {"after": True, "scaled": False}.get(args.gluon),
                                            args.gluon_stages or None, True, args.pipe or None,
                                            per_sm=8 if args.pipe else 0,
                                            extra=_consts(args.const))
        args.block_n, args.warps, args.k_only = 32, 1, False
    else:
        kernel, sass, usage = compile_decode(args)
    d = args.head_dim
    if args.dump:
        _dump(args.dump, args.fmt, kernel, sass)
    lines = [ln for ln in sass.splitlines() if INSTRUCTION.match(ln)]
    # the Gluon KIVI kernel's quantized loop copies its tiles by cp.async (its ring's, longer
    # with K_SUB, loads them)
    kivi_gluon = args.gluon and args.fmt in ("kivi2", "kivi4")
    loop = _loop(sass, lines, "LDGSTS" if kivi_gluon else "")
    spill = re.search(r"STACK:(\d+)", usage)
    print(f"{args.fmt}: {_registers(usage)} registers, {spill.group(1) if spill else '?'} bytes "
          f"of stack, {kernel.metadata.shared} bytes of shared memory, {len(lines)} instructions")
    if loop is None:
        print("no loop found")
        return
    body = lines[loop[0]:loop[1] + 1]
    values = args.block_n * d * (1 if args.k_only else 2)
    print(f"loop: {len(body)} warp instructions per iteration, "
          f"{len(body) * args.warps * 32 / values:.2f} thread instructions per cached value")
    print(", ".join(f"{op} {n}" for op, n in _opcodes(body).most_common(16)))


if __name__ == "__main__":
    main()
