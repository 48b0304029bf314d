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
import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import ROUND_DOWN, Decimal, localcontext

__all__ = [
    "ConfigError",
    "HubError",
    "InputError",
    "KvplanError",
    "UnknownNameError",
    "cut",
    "nearest",
    "shown",
]

#: the most characters of an offending value an error message quotes
SHOWN_CHARS = 40
#: the most characters of a name an error message quotes (Hub repo ids run long)
NAME_CHARS = 100


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """An offending value as an error message quotes it: short whatever came.

    Whole numbers are grouped (``262,144``) up to 15 digits and in scientific notation past
    that, to three digits (``1e+308``, not 309 digits); text is quoted and cut at ``limit`` characters, with
    its length; anything else is its ``repr``, cut the same way.
    """
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) < 10**15 else _scientific(Decimal(value))
    if isinstance(value, float):
        if math.isfinite(value) and abs(value) >= 1e15:
            return _scientific(Decimal(value))
        return repr(value)
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        return f"{value[:limit]!r}… ({len(value):,} characters)"
    return cut(repr(value), limit)


def cut(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` whole if it is at most ``limit`` characters, else its start and an ellipsis."""
    return text if len(text) <= limit else text[:limit] + "…"


def _scientific(value: Decimal) -> str:
    # three digits, cut rather than rounded: 999…9 is 9.99e+52, never 1e+53
    with localcontext(rounding=ROUND_DOWN):
        mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{exponent}"


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
    """A name that is in no catalog; ``suggestions`` holds the closest known names.

    ``known`` is what the name is compared with; when it maps each key to the name to show
    (several spellings of one GPU to its id), suggestions are the shown names, each once.
    ``choices`` lists the valid names in the message for a short list that has no
    ``kvplan`` command of its own (engines, weight formats). ``first`` names keys of
    ``known`` suggested before the closest spellings."""

    def __init__(
        self,
        kind: str,
        name: str,
        known: Iterable[str] | Mapping[str, str],
        *,
        field: str | None = None,
        choices: Sequence[str] = (),
        query: str | None = None,
        first: Sequence[str] = (),
    ) -> None:
        names = dict(known) if isinstance(known, Mapping) else {k: k for k in known}
        self.kind = kind
        self.name = name
        self.suggestions: list[str] = []
        matches = difflib.get_close_matches(query if query is not None else name.lower(),
                                            list(names), n=12, cutoff=0.5)
        # ``first``: keys of ``known`` to suggest before the closest spellings (the same model
        # in another variant)
        for key in [*first, *matches]:
            if names[key] not in self.suggestions and len(self.suggestions) < 3:
                self.suggestions.append(names[key])
        message = f"{shown(name, NAME_CHARS)} is not a known {kind}"
        if self.suggestions:
            message += "; did you mean " + " or ".join(f"'{s}'" for s in self.suggestions) + "?"
        elif kind in LIST_COMMANDS:
            message += f" (see `kvplan {LIST_COMMANDS[kind]}` for the list)"
        if choices and not self.suggestions:
            message += "; expected one of " + ", ".join(choices)
        super().__init__(message, field=field)


def nearest(name: str, names: Iterable[str], cutoff: float = 0.7) -> str | None:
    """The one of ``names`` closest to a mistyped ``name`` (a flag, a request field), or None
    where none is close: a hint, where UnknownNameError lists three of a catalog's names."""
    close = difflib.get_close_matches(name, list(names), n=1, cutoff=cutoff)
    return close[0] if close else None


#: the command that lists each kind of name
LIST_COMMANDS = {"GPU": "gpus", "KV format": "formats", "model": "models"}


class ConfigError(KvplanError):
    """A config.json that kvplan cannot size; the message names the missing or bad field."""


class HubError(KvplanError):
    """The Hugging Face Hub could not give the requested file."""
