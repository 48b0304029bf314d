"""The one exception tree of kvplan.

Every error kvcore raises on purpose is a ``KvplanError`` whose message is one plain sentence
that says what was expected and what came::

    KvplanError
     ├── InputError          a value the user gave is malformed or out of range
     │    └── UnknownNameError   a model, GPU, format, engine or weight format nobody knows
     │                           (carries ``suggestions`` for "did you mean")
     ├── ConfigError         a config.json kvplan cannot size (names the field at fault)
     └── HubError            the Hugging Face Hub could not answer (offline, gated, missing)

Not fitting on a card is a result, never an exception.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "ConfigError",
    "HubError",
    "InputError",
    "KvplanError",
    "UnknownNameError",
]


class KvplanError(Exception):
    """Base of every error kvcore raises on purpose."""

    #: the input field at fault, when there is one ("context", "gpu", "kv_k", ...)
    field: str | None = None

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class InputError(KvplanError):
    """A value given by the user is malformed or out of range."""


class UnknownNameError(InputError):
    """A name that is in no catalog; ``suggestions`` holds the closest known names."""

    def __init__(
        self, kind: str, name: str, known: Iterable[str], *, field: str | None = None
    ) -> None:
        known = list(known)
        self.kind = kind
        self.name = name
        self.suggestions = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.5)
        message = f"'{name}' is not a known {kind}"
        if self.suggestions:
            message += "; did you mean " + " or ".join(f"'{s}'" for s in self.suggestions) + "?"
        else:
            message += f" (see `kvplan {kind_command(kind)}` for the list)"
        super().__init__(message, field=field)


def kind_command(kind: str) -> str:
    return {"GPU": "gpus", "KV format": "formats", "model": "models"}.get(kind, kind + "s")


class ConfigError(KvplanError):
    """A config.json that kvplan cannot size; the message names the missing or bad field."""


class HubError(KvplanError):
    """The Hugging Face Hub could not give the requested file."""
