"""Exact cache bytes of a model for a context and a number of sequences.

Every sequence has its own cache. Per layer group:

- full attention, MLA and the DSA indexer's keys hold every token (or, with eviction, the
  kept ones);
- sliding-window and chunked layers hold ``min(context, window)`` tokens;
- cross-attention layers hold the encoder's tokens (``images`` × tokens per image);
- linear-attention and SSM layers hold a constant state;
- compressed and index layers hold one entry per ``ratio`` tokens (``context // ratio``: the
  tokens of an unfinished block wait in the compressor's constant state).

K and V are priced separately with their own formats; formats with per-layer tensor scales add
those once per layer. Engines add paging and padding on top (see ``engines``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction

from .errors import InputError, shown
from .formats import KVFormat, Role, get_format
from .model import LayerGroup, LayerKind, ModelSpec, ParamCount

__all__ = [
    "CacheOptions",
    "CacheSize",
    "GroupCache",
    "bytes_per_token",
    "cache_size",
    "geometry_bytes",
    "kv_row_bytes",
    "marginal_bytes_per_token",
]


@dataclass(frozen=True)
class CacheOptions:
    """How the cache is stored. Formats may be given by name."""

    kv_k: KVFormat = field(default_factory=lambda: get_format("f16"))
    kv_v: KVFormat = field(default_factory=lambda: get_format("f16"))
    #: hot/cold mix: the most recent ``hot_tokens`` tokens in ``hot_format``, older in kv_k/kv_v
    hot_format: KVFormat | None = None
    hot_tokens: int = 0
    #: token eviction: keep this fraction of the tokens, always the first ``keep_first``
    #: tokens and the most recent ``keep_recent`` ones (full-attention and MLA layers)
    keep_fraction: float = 1.0
    keep_first: int = 4
    keep_recent: int = 128
    #: bytes per recurrent-state value (4: f32 as llama.cpp keeps it; 2: model dtype)
    state_bytes_per_value: int = 4
    #: images per sequence, for cross-attention layers
    images: int = 1
    #: count multi-token-prediction / draft layers too
    mtp: bool = False
    #: count the vision/audio tower's weights (False: llama.cpp without --mmproj, which loads
    #: the tower from a file of its own)
    encoder: bool = True
    #: vLLM's layers kept at the model's dtype beside a quantized cache: its
    #: --kv-cache-dtype-skip-layers entries (engines/vllm_skip), TurboQuant's boundary layers
    #: with them; None where every layer is in kv_k/kv_v (other engines)
    vllm_skip: tuple[str, ...] | None = None
    #: DeepSeek Sparse Attention's indexer keys in fp8 with an fp32 scale per 128 values
    #: whatever the cache's format (vLLM, SGLang, TensorRT-LLM: 132 bytes a 128-wide row);
    #: False: in kv_k, as llama.cpp keeps them
    indexer_fp8: bool = False
    #: a DeepSeek Sparse Attention model's fp8 (e4m3) latent in fp8_ds_mla rows (vLLM,
    #: SGLang): 512 fp8 NoPE values, four fp32 scales and 64 bf16 RoPE values, 656 bytes
    fp8_ds_mla: bool = False
    #: a 16-bit cache held in float32 (TensorRT-LLM's dtype auto for a float32 checkpoint)
    wide_16: bool = False
    #: a separate draft model's cache format where the engine keeps it in its own (llama.cpp's
    #: -ctkd/-ctvd, f16 by default); None: in kv_k/kv_v as the target's
    draft_format: KVFormat | None = None

    def __post_init__(self) -> None:
        for name in ("kv_k", "kv_v", "hot_format"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, get_format(value, field=name))
        if not (0.0 < self.keep_fraction <= 1.0) or math.isnan(self.keep_fraction):
            raise InputError(f"keep fraction must be in (0, 1], got {shown(self.keep_fraction)}",
                             field="keep_fraction")
        for name in ("hot_tokens", "keep_first", "keep_recent", "images"):
            if getattr(self, name) < 0:
                raise InputError(f"{name} must not be negative", field=name)
        if self.state_bytes_per_value not in (1, 2, 4):
            raise InputError("state bytes per value must be 1, 2 or 4", field="state_dtype")
        if self.hot_tokens and self.hot_format is None:
            raise InputError("a hot window needs a hot format", field="hot_format")

    def kept_tokens(self, context: int) -> int:
        """Tokens a full-length layer keeps of ``context`` under eviction."""
        if self.keep_fraction >= 1.0:
            return context
        protected = self.keep_first + self.keep_recent
        if context <= protected:
            return context
        return protected + math.ceil(self.keep_fraction * (context - protected))

    def stored(self, fmt: KVFormat) -> KVFormat:
        """The format ``fmt`` is held in (wide_16: a 16-bit one in float32)."""
        if self.wide_16 and fmt.name in ("f16", "bf16"):
            return get_format("f32")
        return fmt

    def row_bytes(self, tokens: int, width: int, role: Role) -> int:
        """Bytes of ``tokens`` tokens × one head of ``width`` values, hot/cold mix applied."""
        cold_fmt = self.stored(self.kv_k if role == "k" else self.kv_v)
        if self.hot_format is None or self.hot_tokens == 0:
            return cold_fmt.bytes_for(tokens, width, role)
        hot = min(tokens, self.hot_tokens)
        return (self.hot_format.bytes_for(hot, width, role)
                + cold_fmt.bytes_for(tokens - hot, width, role))

    def tensor_scale_bytes(self, role: Role) -> int:
        fmt = self.kv_k if role == "k" else self.kv_v
        extra = self.hot_format.tensor_scale_bytes if self.hot_format and self.hot_tokens else 0
        return fmt.tensor_scale_bytes + extra


@dataclass(frozen=True)
class GroupCache:
    """One layer group's share of the cache (all its layers, all sequences)."""

    group: LayerGroup
    #: tokens held per sequence per layer (0 for recurrent layers)
    tokens: int
    k_bytes: int
    v_bytes: int
    state_bytes: int
    #: per-layer tensor scales (do not grow with tokens or sequences)
    scale_bytes: int
    #: reads of this group's layers' caches by other layers (KV-shared and cross-layer
    #: attention: ModelSpec.cache_readers), beside each layer's own
    rereads: int = 0
    #: of its layers, those kept at the model's dtype (kept_layers), in ``kept_format``
    kept_layers: int = 0
    kept_format: str = ""
    #: how the engine stores this group where not in the cache's format (fp8 indexer rows,
    #: fp8_ds_mla latent rows), for people
    stored: str = ""

    @property
    def layer_reads(self) -> int:
        """Layers whose decode step reads this group's caches: its own and the readers'."""
        return self.group.count + self.rereads

    @property
    def total_bytes(self) -> int:
        return self.k_bytes + self.v_bytes + self.state_bytes + self.scale_bytes


@dataclass(frozen=True)
class CacheSize:
    context: int
    sequences: int
    groups: tuple[GroupCache, ...]

    @property
    def k_bytes(self) -> int:
        return sum(g.k_bytes for g in self.groups)

    @property
    def v_bytes(self) -> int:
        return sum(g.v_bytes for g in self.groups)

    @property
    def kv_bytes(self) -> int:
        """Attention K + V of all layers and sequences, block scales and tensor scales included."""
        return sum(g.k_bytes + g.v_bytes + g.scale_bytes for g in self.groups)

    @property
    def read_bytes(self) -> int:
        """The K + V bytes one decode step reads: every entry held, but at most a group's
        ``read_limit`` entries a sequence where sparse attention selects its top-k (pro rata
        of the group's bytes; tensor scales whole), once for each layer that attends over it
        (a KV-shared or cross-layer-attention layer reads an earlier layer's again)."""
        total = 0
        for g in self.groups:
            kv = g.k_bytes + g.v_bytes
            limit = g.group.read_limit
            if limit is not None and g.tokens > limit:
                kv = kv * limit // g.tokens
            # a layer that attends over another's cache reads it again
            if g.rereads:
                kv = kv * g.layer_reads // g.group.count
            total += kv + g.scale_bytes
        return total

    @property
    def state_bytes(self) -> int:
        """Recurrent state of all linear-attention/SSM layers and sequences."""
        return sum(g.state_bytes for g in self.groups)

    @property
    def total_bytes(self) -> int:
        return self.kv_bytes + self.state_bytes


def _tokens_held(group: LayerGroup, context: int, spec: ModelSpec, opts: CacheOptions) -> int:
    kind = group.kind
    if kind in (LayerKind.FULL, LayerKind.MLA, LayerKind.INDEXER):
        return opts.kept_tokens(context)
    if kind in (LayerKind.SLIDING, LayerKind.CHUNKED):
        assert group.window is not None
        return min(context, group.window)
    if kind is LayerKind.CROSS:
        return opts.images * spec.cross_tokens_per_image
    if kind in (LayerKind.COMPRESSED, LayerKind.INDEX):
        return context // group.ratio
    return 0


def kept_layers(spec: ModelSpec, opts: CacheOptions) -> frozenset[int]:
    """The layers vLLM keeps at the model's dtype beside a quantized cache (its
    --kv-cache-dtype-skip-layers and TurboQuant's boundary layers: engines/vllm_skip); none
    for other engines (``opts.vllm_skip`` None) or a cache in the model's dtype."""
    if opts.vllm_skip is None or opts.kv_k.name != opts.kv_v.name:
        return frozenset()
    from .engines import vllm_skip
    return vllm_skip.skipped(spec, opts.kv_k.name, opts.vllm_skip)


def kept_format(spec: ModelSpec) -> KVFormat:
    """The format of a layer kept at the model's dtype (16 bits: vLLM serves a float32
    checkpoint in bfloat16)."""
    return get_format("f16" if spec.dtype == "float16" else "bf16")


#: values an fp32 scale covers in an fp8 indexer row (CacheOptions.indexer_fp8)
INDEXER_FP8_BLOCK = 128
#: the latent width fp8_ds_mla rows hold (512 NoPE + 64 RoPE values) and their bytes
FP8_DS_MLA_WIDTH = 576
FP8_DS_MLA_ROW = 512 + 4 * 4 + 64 * 2


def ds_mla_rows(spec: ModelSpec, opts: CacheOptions) -> bool:
    """Whether the model's MLA latent is in fp8_ds_mla rows (CacheOptions.fp8_ds_mla)."""
    return (opts.fp8_ds_mla and opts.kv_k.name == "fp8_e4m3"
            and any(g.kind is LayerKind.INDEXER for g in spec.groups))


def indexer_fp8_row(width: int) -> int:
    """Bytes of one fp8 indexer key row of ``width`` values and its fp32 scales."""
    return width + width // INDEXER_FP8_BLOCK * 4


def _fixed_row(group: LayerGroup, indexer_fp8: bool, ds_mla: bool) -> tuple[int, str] | None:
    """A layer's bytes a token, and how they are stored, where the engine stores ``group`` in
    a layout of its own whatever the cache's format (CacheOptions.indexer_fp8, fp8_ds_mla);
    None where the group is in the cache's format."""
    if group.kind is LayerKind.INDEXER and indexer_fp8:
        row = indexer_fp8_row(group.head_dim_k)
        return (group.n_kv_heads * row, f"in fp8 with an fp32 scale per {INDEXER_FP8_BLOCK} "
                f"values ({row} bytes a row) whatever the format")
    if group.kind is LayerKind.MLA and ds_mla and group.head_dim_k == FP8_DS_MLA_WIDTH:
        return (FP8_DS_MLA_ROW, f"in fp8_ds_mla rows ({FP8_DS_MLA_ROW} bytes: 512 fp8 values, "
                "4 fp32 scales, 64 bf16 RoPE values)")
    return None


def group_cache(group: LayerGroup, spec: ModelSpec, context: int, sequences: int,
                opts: CacheOptions, kept: frozenset[int] = frozenset()) -> GroupCache:
    """One group's cache; ``kept``: layers (of any group) kept at the model's dtype."""
    if group.kind.holds_state:
        state = group.count * sequences * group.state_values * opts.state_bytes_per_value
        return GroupCache(group, 0, 0, 0, state, 0)
    tokens = _tokens_held(group, context, spec, opts)
    fixed = _fixed_row(group, opts.indexer_fp8, ds_mla_rows(spec, opts))
    if fixed is not None:
        row, stored = fixed
        return GroupCache(group, tokens, group.count * sequences * tokens * row, 0, 0, 0,
                          stored=stored)
    n_kept = len(kept.intersection(group.layers)) if kept else 0
    n = group.count - n_kept
    per_layer_k = group.n_kv_heads * opts.row_bytes(tokens, group.head_dim_k, "k")
    per_layer_v = group.n_kv_heads * opts.row_bytes(tokens, group.head_dim_v, "v")
    scales = n * (opts.tensor_scale_bytes("k")
                  + (opts.tensor_scale_bytes("v") if group.head_dim_v else 0))
    if not n_kept:
        wide = opts.stored(opts.kv_k) is not opts.kv_k
        return GroupCache(group, tokens, group.count * sequences * per_layer_k,
                          group.count * sequences * per_layer_v, 0, scales,
                          stored="in float32 (the engine's dtype auto for a float32 "
                          "checkpoint)" if wide else "")
    fmt = kept_format(spec)
    kept_k = group.n_kv_heads * fmt.bytes_for(tokens, group.head_dim_k, "k")
    kept_v = group.n_kv_heads * fmt.bytes_for(tokens, group.head_dim_v, "v")
    return GroupCache(group, tokens, sequences * (n * per_layer_k + n_kept * kept_k),
                      sequences * (n * per_layer_v + n_kept * kept_v), 0, scales,
                      kept_layers=n_kept, kept_format=fmt.name)


def cache_size(spec: ModelSpec, context: int, sequences: int = 1,
               opts: CacheOptions | None = None) -> CacheSize:
    """The cache of ``sequences`` sequences of ``context`` tokens each."""
    opts = opts or CacheOptions()
    if context < 0 or sequences < 0:
        raise InputError("context and sequences must not be negative")
    readers = spec.cache_readers()
    kept = kept_layers(spec, opts)
    drafted = _draft_opts(spec, opts)
    groups = tuple(group_cache(g, spec, context, sequences, opts, kept)
                   if not g.mtp or drafted is None else
                   replace(group_cache(g, spec, context, sequences, drafted),
                           stored=f"in {drafted.kv_k.name}, the draft's own cache type")
                   for g in spec.groups_for(mtp=opts.mtp))
    if readers:
        groups = tuple(replace(g, rereads=sum(readers.get(i, 0) for i in g.group.layers))
                       if g.tokens else g for g in groups)
    return CacheSize(context, sequences, groups)


def geometry_bytes(kv_k: str | KVFormat, kv_v: str | KVFormat, *, layers: int, sequences: int,
                   kv_heads: int, head_dim: int, tokens: int) -> int:
    """Exact cache bytes of ``layers`` full-attention layers of a bare geometry."""
    group = LayerGroup(LayerKind.FULL, tuple(range(layers)), n_kv_heads=kv_heads,
                       head_dim_k=head_dim, head_dim_v=head_dim)
    opts = CacheOptions(kv_k=get_format(kv_k) if isinstance(kv_k, str) else kv_k,
                        kv_v=get_format(kv_v) if isinstance(kv_v, str) else kv_v)
    spec = ModelSpec(name="geometry", model_type="geometry", groups=(group,),
                     params=ParamCount(total=0, active=0, embedding=0), source="geometry")
    return cache_size(spec, tokens, sequences, opts).kv_bytes


#: every layer kind that caches K/V rows per token
ATTENTION_KINDS = tuple(k for k in LayerKind if k.is_attention)


def kv_row_bytes(spec: ModelSpec, k: KVFormat, v: KVFormat,
                 kinds: tuple[LayerKind, ...] = ATTENTION_KINDS, *,
                 mtp: bool = False, kept: frozenset[int] = frozenset(),
                 indexer_fp8: bool = False, ds_mla: bool = False) -> tuple[int, int]:
    """(K, V) bytes one token adds to the layers of ``kinds``, block scales included; the
    layers in ``kept`` at the model's dtype (kept_layers); with ``indexer_fp8`` the indexer
    keys in fp8 rows (CacheOptions.indexer_fp8), with ``ds_mla`` a 576-wide latent in
    fp8_ds_mla rows (CacheOptions.fp8_ds_mla).

    Compressed and index layers keep one entry per ``ratio`` tokens: they add their entry's
    bytes over ``ratio``; where a block format's entries do not divide into whole bytes a
    token (q8_0 latents at ratio 128: 544 / 128), the sum is rounded up to the next byte.
    """
    kb = vb = Fraction(0)
    native = kept_format(spec) if kept else None
    for g in spec.groups_for(mtp=mtp):
        fixed = _fixed_row(g, indexer_fp8, ds_mla) if g.kind in kinds else None
        if fixed is not None:
            kb += g.count * fixed[0]
        elif g.kind in kinds:
            n_kept = len(kept.intersection(g.layers)) if kept else 0
            for fk, fv, count in ((k, v, g.count - n_kept), (native, native, n_kept)):
                if not count or fk is None or fv is None:
                    continue
                kb += Fraction(count * g.n_kv_heads * fk.row_bytes(g.head_dim_k), g.ratio)
                vrow = fv.row_bytes(g.head_dim_v, "v") if g.head_dim_v else 0
                vb += Fraction(count * g.n_kv_heads * vrow, g.ratio)
    return math.ceil(kb), math.ceil(vb)


def in_format(opts: CacheOptions, fmt: KVFormat) -> CacheOptions:
    """``opts`` for a cache held wholly in ``fmt`` (a draft model's own cache type): K and V
    in it, no hot/cold mix, no layers kept at the model's dtype."""
    return replace(opts, kv_k=fmt, kv_v=fmt, hot_format=None, hot_tokens=0, vllm_skip=None,
                   draft_format=None)


def _draft_opts(spec: ModelSpec, opts: CacheOptions) -> CacheOptions | None:
    """The options a separate draft model's layers are cached under where its format is its
    own (CacheOptions.draft_format); None where they are the target's."""
    if not opts.mtp or spec.draft is None or opts.draft_format is None:
        return None
    return in_format(opts, opts.draft_format)


def _rate(spec: ModelSpec, opts: CacheOptions, kinds: tuple[LayerKind, ...]) -> int:
    drafted = _draft_opts(spec, opts)
    own = sum(kv_row_bytes(spec, opts.stored(opts.kv_k), opts.stored(opts.kv_v), kinds,
                           mtp=opts.mtp and drafted is None,
                           kept=kept_layers(spec, opts), indexer_fp8=opts.indexer_fp8,
                           ds_mla=ds_mla_rows(spec, opts)))
    if drafted is None:
        return own
    # the draft's rows alone, in its own format
    fmt = drafted.kv_k
    return own + sum(kv_row_bytes(spec, fmt, fmt, kinds, mtp=True)) - sum(
        kv_row_bytes(spec, fmt, fmt, kinds))


def bytes_per_token(spec: ModelSpec, opts: CacheOptions | None = None) -> int:
    """Cache bytes per token of one sequence while the context is shorter than every window:
    all self-attention layers (full, sliding, chunked, MLA and its DSA indexer keys; compressed
    and index layers at their entry's share of a token), K + V, block scales included."""
    return _rate(spec, opts or CacheOptions(),
                 (LayerKind.FULL, LayerKind.SLIDING, LayerKind.CHUNKED, LayerKind.MLA,
                  LayerKind.INDEXER, LayerKind.COMPRESSED, LayerKind.INDEX))


def marginal_bytes_per_token(spec: ModelSpec, opts: CacheOptions | None = None) -> int:
    """Cache bytes each further token adds once the context is past every window (full and
    MLA layers and DSA indexer keys, and compressed and index layers at their entry's share of
    a token). Memory per sequence is affine: fixed + marginal × context (compressed layers step
    once a block)."""
    return _rate(spec, opts or CacheOptions(),
                 (LayerKind.FULL, LayerKind.MLA, LayerKind.INDEXER, LayerKind.COMPRESSED,
                  LayerKind.INDEX))
