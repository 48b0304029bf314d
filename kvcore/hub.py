"""Fetch config.json (and the safetensors index) of a Hub repo; optional dependency.

Uses ``huggingface_hub`` when installed (``pip install 'kvplan[hub]'``), which honours
``HF_TOKEN``, ``HF_HUB_OFFLINE`` and the HF cache. Every failure becomes a ``HubError`` with a
sentence that says what to do.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
import time
from functools import lru_cache
from typing import Any

from .errors import NAME_CHARS, HubError, InputError, shown
from .model import ModelSpec

__all__ = ["REPO_ID", "HubUnavailable", "MissingFile", "fetch_config", "gguf_spec", "hub_address",
           "is_repo_id", "split_tag"]

#: owner/name as the Hub spells repository ids
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.\-]{0,95}$")

#: a model's page or file on the Hub, as a browser's address bar shows it:
#: huggingface.co/OWNER/NAME, then /tree/REV, /blob/REV/FILE or /resolve/REV/FILE; Ollama's
#: hf.co/OWNER/NAME:TAG names a GGUF repository's quantization
HUB_URL = re.compile(r"^(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)/"
                     r"(?P<owner>[^/?#\s]+)/(?P<name>[^/?#\s:]+)"
                     r"(?::(?P<tag>[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}))?"
                     r"(?:/(?P<view>tree|blob|resolve|commits?|discussions|files)"
                     r"(?:/(?P<rev>[^/?#\s]+)(?:/(?P<file>[^?#\s]*))?)?)?/?(?:[?#]\S*)?$",
                     re.IGNORECASE)
#: any address on the Hub, and the first part of its path
_HUB_PAGE = re.compile(r"^(?:https?://)?(?:www\.)?(?:huggingface\.co|hf\.co)"
                       r"(?:/(?P<first>[^/?#\s]*)\S*)?$", re.IGNORECASE)
#: first parts of a Hub address that name no model repository
_NOT_MODELS = {"datasets": "a dataset", "spaces": "a Space", "docs": "documentation",
               "collections": "a collection", "papers": "a paper", "blog": "a blog post"}


def hub_address(text: str) -> tuple[str, str | None, str | None, str | None] | None:
    """(repo id, revision, file, GGUF tag) of a Hub address (https://huggingface.co/Qwen/Qwen3-8B,
    …/tree/main, …/blob/main/config.json, hf.co/OWNER/NAME:Q4_K_M), None for anything else;
    each of the last three None where the address names none. An address of a dataset, a Space or
    another page that is no model repository is refused with what it names."""
    page = _HUB_PAGE.match(text.strip())
    if page is None:
        return None
    first = (page.group("first") or "").lower()
    if first in _NOT_MODELS:
        raise InputError(f"{shown(text, NAME_CHARS)} is the Hub address of {_NOT_MODELS[first]}, "
                         "not of a model (a model is https://huggingface.co/OWNER/NAME or "
                         "OWNER/NAME)", field="model")
    m = HUB_URL.match(text.strip())
    if m is None:
        raise InputError(f"{shown(text, NAME_CHARS)} is a Hub address but not of a model "
                         "repository: expected https://huggingface.co/OWNER/NAME (or OWNER/NAME)",
                         field="model")
    owner, name = m.group("owner"), m.group("name")
    repo = f"{owner}/{name}"
    if not is_repo_id(repo):
        raise InputError(f"{shown(text, NAME_CHARS)} names no Hub repository: expected "
                         "https://huggingface.co/OWNER/NAME", field="model")
    view, rev, file, tag = m.group("view"), m.group("rev"), m.group("file"), m.group("tag")
    if view is None or view.lower() not in ("tree", "blob", "resolve"):
        return repo, None, None, tag
    file = (file or "").strip("/") or None
    if file is not None and not file.lower().endswith(".gguf") and (
            view.lower() == "tree" or "/" in file):
        # a folder of the repository may hold another model (a draft, a vision tower)
        raise InputError(f"{shown(text, NAME_CHARS)} names {shown(file, 60)} inside {repo}; "
                         "kvplan reads the config.json at a repository's top: give "
                         f"{repo}, or that folder's config.json as a file or pasted JSON",
                         field="model")
    return repo, rev, file, tag


#: largest config.json or safetensors index accepted (bytes): the local and pasted bound
#: (catalog.MAX_CONFIG_BYTES; the largest indexes, DeepSeek-V3's, are under 10 MB)
MAX_FILE_BYTES = 16 << 20
#: seconds a Hub request may take before it is abandoned (huggingface_hub reads these)
TIMEOUT_S = "10"


def is_repo_id(text: str) -> bool:
    return bool(REPO_ID.match(text)) and ".." not in text


class MissingFile(HubError):
    """The repository has no such file (a GGUF repository has no config.json)."""


class HubUnavailable(HubError):
    """The Hub could not be asked: no network, the file not in the HF cache, or no
    huggingface_hub."""


#: hosts a Hub fetch may reach, redirects included
ALLOWED_HOSTS = ("huggingface.co", "hf.co")


class OffHubRedirect(OSError):
    """A request (usually a redirect) to a host that is not the Hub's."""


def host_allowed(host: str) -> bool:
    host = host.lower().rstrip(".")
    return any(host == h or host.endswith("." + h) for h in ALLOWED_HOSTS)


@lru_cache(maxsize=1)
def _guard_client(hf: Any) -> bool:
    """Make huggingface_hub's HTTP client refuse every request off the Hub (redirects too) and
    give each request a timeout. Returns whether the guard could be installed."""
    factory_setter = getattr(hf, "set_client_factory", None)
    if factory_setter is None:
        return False
    from huggingface_hub.utils import _http

    client_cls = type(_http.default_client_factory())
    default_hook = getattr(_http, "hf_request_event_hook", None)

    def check(request: Any) -> None:
        if not host_allowed(request.url.host):
            raise OffHubRedirect(f"refusing to reach {request.url.host}, which is not the Hub")
        if default_hook is not None:
            default_hook(request)

    def factory() -> Any:
        return client_cls(event_hooks={"request": [check]}, follow_redirects=True,
                          timeout=float(TIMEOUT_S))

    factory_setter(factory)
    return True


#: seconds a probe's answer is kept (a server that comes back online tries the Hub again)
PROBE_TTL_S = 60.0
#: seconds the host-name lookup of a probe may take
PROBE_TIMEOUT_S = 5.0
_probed: dict[str, tuple[float, bool]] = {}


def _endpoint_host() -> str:
    from urllib.parse import urlsplit

    endpoint = os.environ.get("HF_ENDPOINT") or "https://huggingface.co"
    return urlsplit(endpoint).hostname or "huggingface.co"


def _resolves(host: str) -> bool:
    """Whether ``host`` has an address, asked in a thread so a dead resolver cannot hold the
    caller past PROBE_TIMEOUT_S."""
    answer: list[bool] = []

    def ask() -> None:
        try:
            socket.getaddrinfo(host, 443, type=socket.SOCK_STREAM)
            answer.append(True)
        except OSError:
            answer.append(False)

    thread = threading.Thread(target=ask, daemon=True)
    thread.start()
    thread.join(PROBE_TIMEOUT_S)
    return bool(answer and answer[0])


def _behind_proxy() -> bool:
    return any(os.environ.get(v) for v in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"))


def hub_reachable() -> bool:
    """Whether the Hub's host name resolves. Without it huggingface_hub retries each request
    five times over 22 s before it falls back to its cache; kvplan reads the cache at once
    instead. Always True behind a proxy (the proxy resolves names) and under HF_HUB_OFFLINE
    (huggingface_hub reads only its cache then). Kept PROBE_TTL_S seconds."""
    if _behind_proxy() or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return True
    host = _endpoint_host()
    now = time.monotonic()
    seen = _probed.get(host)
    if seen is None or now - seen[0] > PROBE_TTL_S:
        seen = _probed[host] = (now, _resolves(host))
    return seen[1]


def _offline_error(repo: str, what: str) -> HubUnavailable:
    return HubUnavailable(f"the Hub could not be reached ({_endpoint_host()} does not resolve: "
                          f"offline?) to read the {what} of '{repo}'", field="model")


def _download(repo: str, filename: str, revision: str | None) -> str:
    hf = _hf(repo)
    # offline: the HF cache answers at once, or LocalEntryNotFoundError says it cannot
    cached_only = {} if hub_reachable() else {"local_files_only": True}
    with _hub_errors(repo, filename, revision):
        path = hf.hf_hub_download(repo, filename, revision=revision, **cached_only)
    return str(path)


def _read_json(path: str, what: str) -> dict[str, Any]:
    with open(path, "rb") as fh:
        data = fh.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise HubError(f"{what} is larger than {MAX_FILE_BYTES:,} bytes", field="model")
    try:
        parsed = json.loads(data)
    except ValueError as exc:
        raise HubError(f"{what} is not valid JSON: {exc}", field="model") from None
    if not isinstance(parsed, dict):
        raise HubError(f"{what} is not a JSON object", field="model")
    return parsed


def fetch_config(repo: str, revision: str | None = None,
                 ) -> tuple[dict[str, Any], int | None, dict[str, Any] | None]:
    """config.json of ``repo``, its checkpoint size in bytes (None when not indexed) and its
    ModelOpt ``hf_quant_config.json`` (None when config.json describes its quantization
    itself, or the repository has none).

    Answers are kept in memory (failures are not), on top of the HF cache on disk.
    """
    if not is_repo_id(repo):
        raise InputError(f"'{repo}' is not a Hub repo id (expected owner/name)", field="model")
    config, total, quant = _fetch(repo, revision)
    return json.loads(config), total, (json.loads(quant) if quant else None)


def _describes_quantization(config: dict[str, Any]) -> bool:
    """config.json carries a quantization_config (at the top or in its text_config)."""
    nested = config.get("text_config")
    return bool(config.get("quantization_config")) or (
        isinstance(nested, dict) and bool(nested.get("quantization_config")))


@lru_cache(maxsize=256)
def _fetch(repo: str, revision: str | None) -> tuple[str, int | None, str | None]:
    config = _read_json(_download(repo, "config.json", revision), f"{repo}/config.json")
    quant: dict[str, Any] | None = None
    if not _describes_quantization(config):
        # ModelOpt checkpoints without a quantization_config keep it in hf_quant_config.json
        # (vLLM's ModelOpt configs read that file: get_config_filenames)
        try:
            quant = _read_json(_download(repo, "hf_quant_config.json", revision),
                               f"{repo}/hf_quant_config.json")
        except MissingFile:
            quant = None
        except HubError as exc:
            # unreadable is not absent: the plan says so rather than price a quantized
            # checkpoint in 16 bits without a word
            quant = {"unread": str(exc)}
    total: int | None = None
    try:
        index = _read_json(_download(repo, "model.safetensors.index.json", revision),
                           f"{repo}/model.safetensors.index.json")
    except HubError:
        index = {}
    size = index.get("metadata", {}).get("total_size") if isinstance(index.get("metadata"), dict) else None
    if isinstance(size, int) and not isinstance(size, bool) and size > 0:
        total = size
    return json.dumps(config), total, (json.dumps(quant) if quant is not None else None)


#: owner/name:TAG, llama.cpp's -hf spelling of a GGUF repository and one of its quantizations
GGUF_REF = re.compile(r"^(?P<repo>[^:\s]+):(?P<tag>[A-Za-z0-9][A-Za-z0-9_.\-]{0,63})$")
#: the quantizations llama.cpp's -hf tries, in turn, when none is named (then the first model)
DEFAULT_TAGS = ("Q4_K_M", "Q8_0")


def split_tag(text: str) -> tuple[str, str | None]:
    """``owner/name:TAG`` → (owner/name, TAG); anything else → (text, None)."""
    m = GGUF_REF.match(text)
    if m and is_repo_id(m.group("repo")):
        return m.group("repo"), m.group("tag")
    return text, None


@contextlib.contextmanager
def _hub_errors(repo: str, what: str, revision: str | None = None) -> Any:
    """huggingface_hub's failures reading ``what`` of ``repo`` as HubError sentences."""
    from huggingface_hub import errors as hf_errors

    try:
        yield
    except hf_errors.GatedRepoError:
        raise HubError(f"'{repo}' is gated on the Hub: accept its licence and set HF_TOKEN",
                       field="model") from None
    except hf_errors.RepositoryNotFoundError:
        raise HubError(f"'{repo}' is not a Hub repository (or it is private: set HF_TOKEN)",
                       field="model") from None
    except hf_errors.RevisionNotFoundError:
        raise HubError(f"'{repo}' has no revision '{revision}'", field="model") from None
    # before EntryNotFoundError: huggingface_hub derives LocalEntryNotFoundError from it
    except hf_errors.LocalEntryNotFoundError:
        raise HubUnavailable(f"the Hub could not be reached and '{repo}/{what}' is not in the HF "
                       "cache (offline?)", field="model") from None
    except (hf_errors.EntryNotFoundError, FileNotFoundError):
        raise MissingFile(f"'{repo}' has no {what}", field="model") from None
    except OSError as exc:
        raise HubUnavailable(f"fetching '{repo}/{what}' failed: {exc}", field="model") from None


def _hf(repo: str) -> Any:
    """huggingface_hub, its requests kept on the Hub and given a timeout."""
    try:
        import huggingface_hub as hf
    except ImportError:
        raise HubUnavailable(f"'{repo}' is not in the bundled catalog and reading it from the Hub "
                       "needs huggingface_hub: pip install 'kvplan[hub]'", field="model") from None
    os.environ.setdefault("HF_HUB_DOWNLOAD_TIMEOUT", TIMEOUT_S)
    os.environ.setdefault("HF_HUB_ETAG_TIMEOUT", TIMEOUT_S)
    # an unfamiliar huggingface_hub keeps its own client
    with contextlib.suppress(Exception):
        _guard_client(hf)
    return hf


def gguf_names(repo: str) -> list[str]:
    """The repository's GGUF model files (projectors, importance matrices and draft heads
    beside them left out, as llama-server -hf leaves them)."""
    from .gguf import is_model_file

    hf = _hf(repo)
    if not hub_reachable():
        raise _offline_error(repo, "file list")
    with _hub_errors(repo, "file list"):
        names = hf.HfApi().list_repo_files(repo)
    return sorted(n for n in names if is_model_file(n))


def gguf_weights(tag: str) -> str:
    """kvplan's weight format of a GGUF file's type tag (gpt-oss's MXFP4_MOE files: mxfp4)."""
    return {"mxfp4_moe": "mxfp4"}.get(tag.lower(), tag.lower())


def gguf_tag(name: str) -> str:
    """The quantization a GGUF file name carries (Qwen3-8B-Q4_K_M.gguf → Q4_K_M), or its
    stem where none is recognised."""
    from .gguf import SPLIT_NAME

    base = name.rsplit("/", 1)[-1]
    m = SPLIT_NAME.match(base)
    stem = m.group("stem") if m else base.removesuffix(".gguf")
    found = re.findall(r"(?i)(?:UD-)?(?:I?Q\d[A-Z0-9_]*|BF16|F16|F32|MXFP4(?:_MOE)?)", stem)
    return found[-1].upper() if found else stem


def _carries(name: str, tag: str) -> bool:
    """llama.cpp's test of a file for a tag: the tag, in any case, followed by '.' or '-'
    somewhere in its path (Q4_K_XL finds Model-UD-Q4_K_XL.gguf; Q4_K_M finds
    Q4_K_M/Model-Q4_K_M-00001-of-00003.gguf)."""
    return re.search(re.escape(tag) + "[.-]", name, re.IGNORECASE) is not None


def choose_gguf(repo: str, names: list[str], tag: str | None) -> tuple[str, str | None]:
    """The file (a split model's first part) that llama-server -hf loads for ``tag``, and the
    tag that names it in -hf (None: the repository alone names it). As llama.cpp chooses: the
    first model whose path carries the tag; with no tag Q4_K_M, then Q8_0, then the first
    model."""
    from .gguf import SPLIT_NAME

    def first(n: str) -> bool:
        m = SPLIT_NAME.match(n.rsplit("/", 1)[-1])
        return m is None or m.group("no") == "00001"

    models = [n for n in names if first(n)]
    if not models:
        raise HubError(f"'{repo}' has neither a config.json nor a GGUF file", field="model")
    for t in (tag,) if tag else DEFAULT_TAGS:
        picked = next((n for n in models if _carries(n, t)), None)
        if picked is not None:
            return picked, t
    if tag is None:
        return models[0], None
    tags = sorted({gguf_tag(n) for n in models})
    raise HubError(f"'{repo}' has no {tag} GGUF; it has {', '.join(tags)}", field="model")


class HubFiles:
    """A Hub repository's files, read in ranges (only a GGUF's header is fetched)."""

    def __init__(self, repo: str, names: list[str], ref: str):
        self.repo, self.names, self.ref = repo, set(names), ref
        self.fs = _hf(repo).HfFileSystem()

    def open(self, name: str) -> tuple[Any, int]:
        with _hub_errors(self.repo, name):
            f = self.fs.open(f"{self.repo}/{name}", "rb", block_size=1 << 20)
            return f, int(f.size)

    def exists(self, name: str) -> bool:
        return name in self.names

    def locate(self, name: str) -> str:
        return f"-hf {self.ref}"


def gguf_spec(repo: str, tag: str | None) -> ModelSpec:
    """The ModelSpec of a Hub GGUF repository's file of ``tag`` (llama.cpp's choice where
    none is named)."""
    from .gguf import spec_from_files

    names = gguf_names(repo)
    name, named = choose_gguf(repo, names, tag)
    ref = f"{repo}:{named}" if named else repo
    return spec_from_files(HubFiles(repo, names, ref), name, f"hub {ref}")
