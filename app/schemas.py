"""Pydantic models of the REST API (the only place pydantic is used)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from kvcore.command import MAX_COMMAND


def _not_blank(value: Any) -> Any:
    """A text field given as "" (or spaces) is an error naming it, as the CLI refuses
    ``--kv ""``: leave a field out to take its default."""
    if isinstance(value, str) and not value.strip():
        raise PydanticCustomError(
            "blank", "needs a value, got an empty string (leave the field out for its default)")
    return value

#: the text fields of a plan request
_TEXT_FIELDS = ("model", "gpu", "kv", "kv_k", "kv_v", "weights", "engine", "gpus", "kv_budget",
                "hot", "state_dtype", "overhead", "offload", "host_memory", "gpu_limit")


#: fields that take a JSON number or the command line's text, with the text's longest length
_NUMBER_OR_TEXT = {"gpus": 400, "kv_budget": 40, "overhead": 40, "offload": 40, "host_memory": 40,
                   "gpu_limit": 40}


class PlanIn(BaseModel):
    """A plan request. ``model`` (catalog or Hub repo id) or ``config`` (a config.json object).

    JSON bodies are strict: a number where a boolean is expected is an error, not a guess."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str | None = Field(None, max_length=200, examples=["qwen3.5-27b"],
                              description="catalog id (/api/v1/models), Hub repo id or its "
                              "https://huggingface.co/ address, a Hub GGUF repository as "
                              "REPO:QUANT, or Ollama's name for a catalog model (qwen3:8b-q8_0: "
                              "qwen3-8b in Q8_0); the server reads no local path")
    config: dict[str, Any] | None = Field(None, description="a config.json object")
    gpu: str | None = Field(None, max_length=100, examples=["4090", "2x4090"],
                            description="a catalog GPU (4090, h100, 4090 laptop, rtx 4090 "
                            "24gb), a size (24GiB), or either after a card count (2x4090: gpu "
                            "4090, gpus 2)")
    context: int | str = Field("8k", examples=["128k", 262144])
    sequences: int | str = Field(1, examples=[4])
    kv: str | None = Field(None, max_length=40, examples=["q8_0"])
    kv_k: str | None = Field(None, max_length=40)
    kv_v: str | None = Field(None, max_length=40)
    weights: str | None = Field(None, max_length=40, examples=["q4_k_m"])
    engine: str = Field("raw", max_length=20, examples=["vllm"],
                        description="raw, vllm, llama.cpp, ollama, sglang or trtllm")
    gpus: int | str | None = Field(None, examples=[4, "4090,3090"],
                                   description="a card count (4) or one card per rank "
                                   "(4090,3090 or 2x4090,3090)")
    tp: int | None = Field(None, ge=1, le=1024)
    pp: int | None = Field(None, ge=1, le=1024)
    dp: int = Field(1, ge=1, le=1024)
    attn_dp: int = Field(1, ge=1, le=1024,
                         description="SGLang: attention data-parallel groups within the "
                         "tensor-parallel cards (--attn-dp-size); TensorRT-LLM: "
                         "enable_attention_dp, one group a card (attn_dp = tp)")
    kv_budget: int | str | None = Field(None, examples=["8.11GiB", 8707134259],
                                  description="available KV memory per card an engine printed "
                                  "(a size, or bytes as a number; vLLM 0.34: the GiB of the "
                                  "blocks its 'Memory after warmup' line says fit)")
    gpu_limit: int | str | None = Field(
        None, examples=["120GiB"], description="a machine whose CPU and GPU share one memory "
        "(a Mac, Strix Halo, DGX Spark, Jetson): the memory its GPU may use, where raised from "
        "the default (macOS's 75% wired limit, Linux's half for Strix Halo) with sysctl "
        "iogpu.wired_limit_mb or ttm.pages_limit (a size, or bytes as a number)")
    hot: str | None = Field(None, max_length=40, examples=["f16:4096"])
    keep: float | None = Field(None, gt=0, le=1, description="token eviction: fraction kept")
    images: int = Field(1, ge=0, le=1000)
    mtp: bool = False
    draft: str | None = Field(None, max_length=300, examples=["qwen3-0.6b"],
                              description="a draft model for speculative decoding (a catalog "
                              "or Hub repo id): its weights and cache counted beside the "
                              "target's (vLLM: speculative_config model; SGLang: STANDALONE; "
                              "llama.cpp: -md)")
    draft_weights: str | None = Field(None, max_length=40, examples=["q8_0"],
                                      description="the draft model's weight format (none: its "
                                      "checkpoint's)")
    draft_method: str | None = Field(None, max_length=20, examples=["eagle3"],
                                     description="how the draft drafts: draft_model (a model "
                                     "of its own), eagle or eagle3 (an EAGLE head over the "
                                     "target's hidden states); none or auto: from the draft's "
                                     "config and name")
    acceptance: float | None = Field(None, ge=0, le=1, examples=[0.7],
                                     description="with draft: the chance each draft token is "
                                     "accepted, for a decode estimate of speculative decoding")
    draft_kv: str | None = Field(None, max_length=40, examples=["q8_0"],
                                 description="the draft's own cache type, K and V: llama.cpp's "
                                 "-ctkd/-ctvd (none: f16), vLLM's speculative kv_cache_dtype, "
                                 "SGLang's --speculative-draft-kv-cache-dtype (none: the "
                                 "target's)")
    no_mmproj: bool = Field(False, description="llama.cpp: the vision tower not loaded (no "
                            "--mmproj), its weights not counted")
    gpu_memory_utilization: float | None = Field(
        None, gt=0, le=1, description="vLLM: caps the budget at this share of the card (unset: "
        "the whole card with 0.34's extensible KV cache, 0.92 without it or before 0.34)")
    max_num_batched_tokens: int | None = Field(None, ge=1, le=1 << 24)
    block_size: int | None = Field(None, ge=1, le=1 << 16, description="vLLM tokens a block "
                                   "(none: 64, or the attention backend's)")
    mem_fraction_static: float | None = Field(None, gt=0, le=1)
    chunked_prefill_size: int | None = Field(None, ge=1, le=1 << 24, description="SGLang")
    page_size: int | None = Field(None, ge=1, le=1 << 24, description="SGLang tokens a page "
                                     "(none: 1, or the attention backend's)")
    max_total_tokens: int | None = Field(None, ge=1, le=1 << 40,
                                         description="SGLang: the most tokens its KV pool "
                                         "holds; TensorRT-LLM: kv_cache_config.max_tokens")
    cuda_graph_max_bs_decode: int | None = Field(
        None, ge=1, le=1 << 24, description="SGLang: the largest decode batch captured in a "
        "CUDA graph (default by card size, at most the running requests)")
    cuda_graph_max_bs_prefill: int | None = Field(
        None, ge=1, le=1 << 24, description="SGLang: the largest prefill (tokens) captured in "
        "a CUDA graph (default the chunk)")
    disable_decode_cuda_graph: bool = Field(False, description="SGLang: no decode CUDA graphs, "
                                            "none of their memory set aside")
    disable_prefill_cuda_graph: bool = Field(False, description="SGLang: no prefill CUDA "
                                             "graphs, none of their memory set aside")
    enable_dp_lm_head: bool = Field(False, description="SGLang with attn_dp: the lm_head split "
                                    "over an attention group, not all the tensor-parallel cards")
    swa_full_tokens_ratio: float | None = Field(
        None, gt=0, le=1, description="SGLang: the sliding-window pool's tokens a full-layer "
        "token (0.8; DeepSeek-V4 0.1)")
    mamba_full_memory_ratio: float | None = Field(
        None, gt=0, le=100, description="SGLang: Mamba state bytes to KV bytes of what the "
        "weights leave (0.9)")
    max_mamba_cache_size: int | None = Field(None, ge=1, le=1 << 24, description="SGLang: the "
                                             "Mamba state slots, instead of the ratio's")
    disable_radix_cache: bool = Field(False, description="SGLang --disable-radix-cache: a "
                                      "hybrid model's Mamba state slots one a running request")
    kv_cache_dtype_skip_layers: list[int | str] | str | None = Field(
        None, max_length=512, examples=[["sliding_window"], [0, 31], "0,1,30,31"],
        description="vLLM --kv-cache-dtype-skip-layers: layers kept at the model's dtype "
                    "beside a quantized cache (indices, or sliding_window for every "
                    "sliding-window layer; a list, or entries separated by commas)")
    attention_backend: str | None = Field(
        None, max_length=40, examples=["trtllm_mha"], description="SGLang --attention-backend "
        "(trtllm_mha, fa3, fa4, flashinfer, triton, ...); none: the one SGLang picks by model "
        "and card. It sets the page on SM100, and for trtllm_mha/trtllm_mla on any card. vLLM "
        "--attention-backend (FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLASHMLA, CUTLASS_MLA, ...; "
        "any case): checked against the model, the KV dtype and the card; CUTLASS_MLA pages "
        "128 tokens")
    prefill_kv_cache_dequant_dtype: str | None = Field(
        None, max_length=20, examples=["fp8_e4m3"], description="SGLang with kv nvfp4: "
        "fp8_e4m3 (FlashInfer prefill over an fp8 copy) or nvfp4 (trtllm_mha prefill, SM100); "
        "auto or none: by the card")
    moe_a2a_backend: str | None = Field(None, max_length=20, examples=["deepep"],
                                        description="SGLang --moe-a2a-backend: none, or "
                                        "deepep (its fraction sets memory aside for DeepEP)")
    free_gpu_memory_fraction: float | None = Field(None, gt=0, le=1)
    max_num_tokens: int | None = Field(None, ge=1, le=1 << 24, description="TensorRT-LLM "
                                       "--max_num_tokens: the tokens a forward pass takes "
                                       "(8192), which size its activations")
    # the rest of the CLI's knobs, under the CLI's names
    keep_first: int = Field(4, ge=0, le=1 << 20, description="tokens always kept at the start")
    keep_recent: int = Field(128, ge=0, le=1 << 24, description="recent tokens always kept")
    state_dtype: str = Field("f32", pattern="^(f32|f16|bf16)$",
                             description="recurrent-state dtype")
    overhead: int | str | None = Field(None, examples=["1GiB"],
                                       description="runtime overhead instead of the estimate "
                                       "(a size, or bytes as a number)")
    speculative_tokens: int = Field(0, ge=0, le=64, description="vLLM speculative tokens; SGLang "
                                    "with mtp or draft: --speculative-num-draft-tokens; "
                                    "llama.cpp with draft: --spec-draft-n-max")
    no_prefix_caching: bool = Field(False, description="vLLM --no-enable-prefix-caching: a "
                                    "hybrid model keeps one state page a request, not two")
    enforce_eager: bool = Field(False, description="vLLM --enforce-eager: no CUDA graphs, no "
                                "graph memory set aside")
    no_extensible_kv_cache: bool = Field(
        False, description="vLLM --no-enable-extensible-kv-cache (or a release before 0.34): "
        "the cache sized within gpu_memory_utilization 0.92 from a profiling estimate, not "
        "from the memory free after warmup")
    enable_extensible_kv_cache: bool = Field(
        False, description="vLLM --enable-extensible-kv-cache: its default where it can have "
        "it, asked for (refused where vLLM stops at start-up: Intel cards, a pool pinned by "
        "kv_budget)")
    language_model_only: bool = Field(False, description="vLLM --language-model-only: text "
                                      "only, the vision/audio towers not built (their weights "
                                      "not counted) and the encoder not profiled")
    enable_lora: bool = Field(False, description="vLLM, SGLang --enable-lora: adapter slots "
                              "on the card, sized by max_loras and max_lora_rank, off the KV "
                              "pool")
    max_loras: int | None = Field(None, ge=1, le=4096, description="adapters in one batch, each "
                                  "a slot on the card: vLLM --max-loras (default 1), SGLang "
                                  "--max-loras-per-batch (default 8)")
    max_lora_rank: int | None = Field(None, ge=1, le=4096, examples=[64],
                                      description="--max-lora-rank: the largest adapter rank, "
                                      "the slots' size: vLLM 1, 8, 16, 32, 64, 128, 256, 320 or "
                                      "512 (default 16); SGLang any (needed)")
    fully_sharded_loras: bool = Field(False, description="vLLM --fully-sharded-loras: the LoRA "
                                      "slots split wholly over tensor parallelism")
    lora_target_modules: list[str] | str | None = Field(
        None, max_length=64, examples=[["o_proj", "qkv_proj"]],
        description="--lora-target-modules: only these modules get LoRA slots (a list, or "
                    "names separated by commas): vLLM (default every one), SGLang (needed; "
                    "all for every one)")
    ubatch: int | None = Field(None, ge=1, le=1 << 24, description="llama.cpp n_ubatch")
    swa_full: bool = Field(False, description="llama.cpp full-size SWA cache")
    fit_target: int | None = Field(None, ge=0, le=1 << 20, description="llama.cpp "
                                   "--fit-target: MiB --fit leaves free on each card (1024)")
    kv_unified: bool = Field(False, description="llama.cpp one shared KV stream")
    sched_spread: bool = Field(False, description="Ollama OLLAMA_SCHED_SPREAD=1: the model "
                               "over every card even where one would hold it")
    no_flash_attn: bool = Field(False, description="llama.cpp -fa off")
    ngl: int | None = Field(None, ge=0, le=1 << 16, description="llama.cpp -ngl: layers on the "
                            "card, the output layer counted first (default: all)")
    override_tensor: list[str] | None = Field(
        None, max_length=64, examples=[["blk\\.(1[0-9])\\.ffn_.*_exps\\.=CPU"]],
        description="llama.cpp -ot PATTERN=CPU: the routed experts of the blocks each pattern "
        "matches in host memory")
    n_cpu_moe: int | None = Field(None, ge=0, le=1 << 16, description="llama.cpp --n-cpu-moe: "
                                  "routed experts of the first N blocks in host memory")
    cpu_moe: bool = Field(False, description="llama.cpp --cpu-moe: every block's routed "
                          "experts in host memory")
    tensor_split: list[float] | str | None = Field(
        None, examples=[[3, 1], "3,1"], description="llama.cpp -ts over pp cards: each card's "
        "share of the offloaded layers (default: an even split, or --fit's)")
    host_memory: int | str | None = Field(None, examples=["64GiB"], description="host memory "
                                          "llama.cpp may fill with what it keeps there (a "
                                          "size, or bytes as a number)")
    cache_ram: int | None = Field(None, ge=-1, le=1 << 30, description="llama-server "
                                  "--cache-ram: MiB of host memory its prompt cache may hold "
                                  "(default 8192; 0 none, -1 no byte limit)")
    ctx_checkpoints: int | None = Field(None, ge=0, le=1 << 16, description="llama-server "
                                        "--ctx-checkpoints: context checkpoints a slot keeps "
                                        "in host memory (default 32)")
    host_link: float | None = Field(None, gt=0, le=100000, description="GB/s of the link "
                                    "host-held weights cross to the card (llama.cpp, "
                                    "cpu_offload_gb; the card's, or 31.5: PCIe 4.0 x16)")
    cpu_offload_gb: float | None = Field(None, ge=0, le=1 << 20, description="vLLM and "
                                         "SGLang --cpu-offload-gb: GiB of each rank's weights "
                                         "in pinned host memory")
    host_bandwidth: float | None = Field(None, gt=0, le=100000, description="host memory "
                                         "bandwidth in GB/s for what llama.cpp keeps there "
                                         "(89.6: dual-channel DDR5; 307.2 beside a data-center "
                                         "card; a Grace CPU's 512)")
    tokens_per_block: int | None = Field(None, ge=1, le=1 << 16, description="TensorRT-LLM")
    offload: int | str | None = Field(None, examples=["64GiB"],
                                      description="CPU/disk tier for KV per card")

    _blank = field_validator(*_TEXT_FIELDS, mode="before")(_not_blank)

    @field_validator(*_NUMBER_OR_TEXT)
    @classmethod
    def _as_text(cls, value: int | str | None, info: Any) -> str | None:
        """A count or a byte size may come as a JSON number (``"gpus": 4``, ``"kv_budget":
        8707134259``); the planner reads the command line's text either way."""
        limit = _NUMBER_OR_TEXT[info.field_name]
        if isinstance(value, str) and len(value) > limit:
            raise PydanticCustomError("too_long", "at most {limit} characters", {"limit": limit})
        return None if value is None else str(value)


class PlanQueryIn(PlanIn):
    """The same fields as query parameters (strings converted as usual; -ts shares as the
    command line's text, "3,1")."""

    model_config = ConfigDict(extra="forbid", strict=False)

    tensor_split: str | None = Field(
        None, max_length=400, examples=["3,1"], description="llama.cpp -ts over several cards: "
        "each card's share of the offloaded layers")


class ModelListIn(BaseModel):
    """``GET /models``'s search, as a query parameter (none: the whole catalog)."""

    model_config = ConfigDict(extra="forbid")

    q: str | None = Field(None, max_length=200, examples=["qwen3 coder"],
                          description="only models every word names, spelled loosely, in their "
                          "id, Hub repository, family or the repositories that share their "
                          "config (kvplan models WORDS)")


class GpuListIn(BaseModel):
    """``GET /gpus``'s filters, as query parameters (none: the whole catalog)."""

    model_config = ConfigDict(extra="forbid")

    vendor: str | None = Field(None, examples=["amd"],
                               description="only this maker's cards: nvidia, amd, intel or "
                               "apple (kvplan gpus --vendor)")
    min_memory: str | None = Field(None, examples=["24GiB"],
                                   description="only cards with at least this memory as sold "
                                   "(24GiB, 24GB; kvplan gpus --min-memory)")
    engine: str | None = Field(None, max_length=20, examples=["vllm"],
                               description="only cards this engine's GPU build runs on "
                               "(vllm, llama.cpp, ollama, sglang, trtllm; raw: every card; "
                               "kvplan gpus --engine)")
    segment: str | None = Field(None, max_length=20, examples=["laptop"],
                                description="only this kind of card: consumer (desktop), "
                                "laptop, workstation, datacenter or apple (kvplan gpus "
                                "--segment)")


class FindGpuIn(PlanIn):
    """A plan whose cards ``/find-gpu`` chooses; ``vendor`` keeps the search to one maker's,
    ``segment`` to one kind of card."""

    vendor: str | None = Field(None, max_length=20, examples=["amd"],
                               description="only this maker's cards: nvidia, amd, intel or "
                               "apple (kvplan --find-gpu --vendor)")
    segment: str | None = Field(None, max_length=20, examples=["laptop"],
                                description="only this kind of card: consumer (desktop), "
                                "laptop, workstation, datacenter or apple (kvplan --find-gpu "
                                "--segment)")


class CommandIn(PlanIn):
    """A launch command planned as given: ``command`` is the engine's command line; ``model``
    stands for the model it loads, and any plan field given beside it wins over what the
    command sets (``gpu`` names the card, which no command does)."""

    command: str = Field(..., max_length=MAX_COMMAND, examples=[
        "llama-server -hf unsloth/Qwen3-8B-GGUF:Q4_K_M -c 32768 -np 4 -ctk q8_0 -ctv q8_0"],
        description="llama-server …, vllm serve …, python -m sglang.launch_server …, "
        "trtllm-serve … or OLLAMA_…=… ollama serve / ollama run …")
    model: str | None = Field(None, max_length=200, description="the model, where the "
                              "command names a file that is not a catalog model's")
    options: str | None = Field(None, max_length=MAX_COMMAND, examples=[
        "enable_attention_dp: true\nkv_cache_config:\n  dtype: fp8\n"],
        description="the text of the YAML file the command's --config (trtllm-serve's "
        "--extra_llm_api_options) names, read with it")


class ErrorOut(BaseModel):
    """Every error's one shape."""

    ok: bool = Field(False, description="always false")
    error: str = Field(..., description="what was wrong and what was expected, in one line")
    status: int = Field(..., description="the HTTP status again")
    field: str | None = Field(None, description="the request field at fault, where one is")


class MeasureIn(BaseModel):
    """A measurement job: build and time this plan's cache on the server's GPU."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str = Field(..., max_length=200, description="catalog id (/api/v1/models) or Hub "
                       "repo id (the server reads no local path)")
    kv: str = Field("f16", max_length=40)
    kv_k: str | None = Field(None, max_length=40)
    kv_v: str | None = Field(None, max_length=40)
    context: int = Field(8192, ge=1, le=1 << 24)
    sequences: int = Field(1, ge=1, le=1024)
    layers: int | None = Field(None, ge=1, le=4096)
    steps: int = Field(20, ge=1, le=1000)
    device: str | None = Field(None, pattern="^(cuda|cpu)$")

    _blank = field_validator("model", "kv", "kv_k", "kv_v", "device", mode="before")(_not_blank)
