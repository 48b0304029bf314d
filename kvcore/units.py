"""Parse the quantities users type and format bytes for humans (only at the edges).

Token counts use binary multiples, as context lengths are usually quoted: ``8k`` = 8,192,
``128K`` = 131,072, ``1M`` = 1,048,576. Byte sizes follow the IEC/SI distinction: ``GiB`` is
2**30 and ``GB`` is 10**9; a bare ``G`` is read as GiB, the way engines' flags use it.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from .errors import InputError, shown

__all__ = [
    "MAX_CONTEXT_TOKENS",
    "format_bytes",
    "format_count",
    "format_gib",
    "format_quantity",
    "parse_bytes",
    "parse_count",
    "parse_tokens",
]

#: the largest context kvplan accepts (2**31 tokens)
MAX_CONTEXT_TOKENS = 2**31

_TOKEN_SUFFIX = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
_BYTE_SUFFIX = {
    "": 1,
    "b": 1,
    "k": 1024,
    "m": 1024**2,
    "g": 1024**3,
    "t": 1024**4,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
    "tib": 1024**4,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
}
# a leading minus is read (and then refused by the range check, which says why)
_NUMBER = re.compile(r"^\s*(-?)([0-9][0-9_,]*(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
_THOUSANDS = re.compile(r"^[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]+)?$")


def _split(text: str, what: str, example: str, field: str | None) -> tuple[Decimal, str]:
    match = _NUMBER.match(text)
    if not match:
        raise InputError(f"{what} must be a number like {example}, got {shown(text)}", field=field)
    sign, digits = match.group(1), match.group(2)
    # a comma only groups thousands: '1,5k' meant as 1.5k must not become 15k
    if "," in digits and not _THOUSANDS.match(digits):
        raise InputError(f"{what} takes a comma only between thousands (262,144) and a dot for "
                         f"decimals (1.5), got {shown(text)}", field=field)
    digits = digits.replace(",", "").replace("_", "")
    try:
        value = Decimal(digits)
    except InvalidOperation:  # pragma: no cover - the regex admits only digits
        raise InputError(f"{what} must be a number like {example}, got {shown(text)}",
                         field=field) from None
    return -value if sign else value, match.group(3).lower()


def parse_tokens(value: int | str, *, field: str = "context", minimum: int = 1) -> int:
    """A token count from ``8192``, ``"128k"``, ``"1M"`` or ``"262,144"`` (k = 1024)."""
    if isinstance(value, bool):
        raise InputError(f"{field} must be a token count like 8192 or 128k, got {shown(value)}", field=field)
    if isinstance(value, int):
        tokens = value
    elif isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise InputError(f"{field} must be a whole number of tokens, got {shown(value)}", field=field)
        tokens = int(value)
    else:
        number, suffix = _split(str(value), field, "8192, 128k or 1M", field)
        if suffix not in _TOKEN_SUFFIX:
            raise InputError(
                f"{field} unit must be k or M (as in 128k, 1M), got {shown(value)}", field=field
            )
        scaled = number * _TOKEN_SUFFIX[suffix]
        if scaled != scaled.to_integral_value():
            raise InputError(f"{field} must be a whole number of tokens, got {shown(value)}", field=field)
        tokens = int(scaled)
    if tokens < minimum:
        raise InputError(f"{field} must be at least {minimum:,}, got {shown(tokens)}", field=field)
    if tokens > MAX_CONTEXT_TOKENS:
        raise InputError(
            f"{field} must be at most {MAX_CONTEXT_TOKENS:,} tokens, got {shown(tokens)}", field=field
        )
    return tokens


def parse_count(
    value: int | str, *, field: str, minimum: int = 1, maximum: int = 1_000_000
) -> int:
    """A plain positive integer (sequences, GPUs, images) within ``[minimum, maximum]``."""
    if isinstance(value, bool):
        raise InputError(f"{field} must be a whole number, got {shown(value)}", field=field)
    if isinstance(value, str):
        text = value.strip()
        if "," in text and not _THOUSANDS.match(text):
            raise InputError(f"{field} must be a whole number (a comma only between thousands), "
                             f"got {shown(value)}", field=field)
        text = text.replace(",", "").replace("_", "")
        if not re.fullmatch(r"-?[0-9]+", text):
            raise InputError(f"{field} must be a whole number, got {shown(value)}", field=field)
        number = int(text)  # a negative one fails the range check below
    elif isinstance(value, int):
        number = value
    else:
        raise InputError(f"{field} must be a whole number, got {shown(value)}", field=field)
    if not minimum <= number <= maximum:
        raise InputError(
            f"{field} must be between {minimum:,} and {maximum:,}, got {shown(number)}", field=field
        )
    return number


def parse_bytes(value: int | str, *, field: str = "memory", zero: bool = False) -> int:
    """Bytes from ``"24GiB"``, ``"80GB"``, ``"8.11 GiB"``, ``"512M"`` or an int; ``zero``:
    0 is a size too (an overhead), else a size is larger than zero."""
    if isinstance(value, bool):
        raise InputError(f"{field} must be a size like 24GiB or 80GB, got {shown(value)}", field=field)
    if isinstance(value, int):
        number, suffix = Decimal(value), ""
    else:
        number, suffix = _split(str(value), field, "24GiB or 80GB", field)
    if suffix not in _BYTE_SUFFIX:
        raise InputError(
            f"{field} unit must be one of B, KiB, MiB, GiB, TiB, KB, MB, GB, TB; got {shown(value)}",
            field=field,
        )
    size = int(number * _BYTE_SUFFIX[suffix])
    if zero and size == 0 and number == 0:
        return 0
    if size <= 0:
        raise InputError(f"{field} must be {'0 or more' if zero else 'larger than zero'}, got "
                         f"{shown(value)}", field=field)
    if size > 2**60:
        raise InputError(f"{field} is implausibly large: {shown(value)}", field=field)
    return size


def format_bytes(n: int, digits: int = 4) -> str:
    """``4429185024`` -> ``"4.125 GiB"``; trailing zeros dropped, binary units."""
    for unit, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= scale:
            text = f"{n / scale:.{digits}f}".rstrip("0").rstrip(".")
            return f"{text} {unit}"
    return f"{n} B"


def format_gib(n: int, digits: int = 1) -> str:
    """Bytes as GiB with a fixed number of decimals (``21.3``, ``147,472.1``)."""
    return f"{n / 1024**3:,.{digits}f}"


def format_count(n: int) -> str:
    """``262144`` -> ``"262,144"``."""
    return f"{n:,}"


def format_quantity(n: int, noun: str) -> str:
    """A count with its noun, grouped and in the right number: ``1 token``,
    ``1,000,000 sequences``."""
    return f"{n:,} {noun if n == 1 else noun + 's'}"
