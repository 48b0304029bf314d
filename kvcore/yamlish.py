"""The part of YAML that engines' option files use, read without a YAML library.

trtllm-serve's ``--config`` / ``--extra_llm_api_options`` file, vLLM's and SGLang's ``--config``
file: block mappings nested by indentation, block sequences (``- item``), flow sequences and
mappings (``[1, 2]``, ``{a: 1}``), scalars (quoted or plain: booleans, null, numbers, text) and
``#`` comments. Anything else (anchors, tags, multi-line scalars, several documents) is refused
in one line rather than misread.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import InputError

_NUMBER = re.compile(r"[-+]?(\d[\d_]*)?(\.\d*)?([eE][-+]?\d+)?")
#: the deepest nesting read (an options file nests two or three levels)
MAX_DEPTH = 32


class _Line:
    __slots__ = ("indent", "number", "text")

    def __init__(self, number: int, indent: int, text: str) -> None:
        self.number, self.indent, self.text = number, indent, text


def parse_yaml(text: str, what: str = "options file") -> dict[str, Any]:
    """The mapping ``text`` holds (an empty file: {}); InputError naming ``what`` and the line
    for YAML outside the subset."""
    lines: list[_Line] = []
    for number, raw in enumerate(text.splitlines(), 1):
        body = _strip_comment(raw).rstrip()
        if not body.strip() or body.strip() in ("---", "..."):
            if body.strip() == "---" and lines:
                raise InputError(f"{what}, line {number}: one YAML document is read, not "
                                 "several", field="command")
            continue
        if "\t" in body[:len(body) - len(body.lstrip())]:
            raise InputError(f"{what}, line {number}: indentation must be spaces",
                             field="command")
        lines.append(_Line(number, len(body) - len(body.lstrip(" ")), body.strip()))
    if not lines:
        return {}
    if lines[0].text[0] in "[{":
        # the whole document one flow collection (it may run over several lines)
        value = _scalar_or_flow(" ".join(ln.text for ln in lines), lines[0].number, what)
        if not isinstance(value, dict):
            raise InputError(f"{what}: expected a mapping of option names to values",
                             field="command")
        return value
    value, end = _block(lines, 0, lines[0].indent, what)
    if end != len(lines):
        raise InputError(f"{what}, line {lines[end].number}: not read (indentation does not "
                         "match the lines before)", field="command")
    if not isinstance(value, dict):
        raise InputError(f"{what}: expected a mapping of option names to values",
                         field="command")
    return value


def _strip_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _block(lines: list[_Line], i: int, indent: int, what: str,
           depth: int = 0) -> tuple[Any, int]:
    """The block (mapping or sequence) whose lines start at ``i`` with ``indent``."""
    if depth > MAX_DEPTH:
        raise InputError(f"{what}, line {lines[i].number}: nested deeper than {MAX_DEPTH} "
                         "levels", field="command")
    if lines[i].text.startswith("- ") or lines[i].text == "-":
        items = []
        while i < len(lines) and lines[i].indent == indent and (
                lines[i].text.startswith("- ") or lines[i].text == "-"):
            rest = lines[i].text[1:].strip()
            if not rest:
                if i + 1 < len(lines) and lines[i + 1].indent > indent:
                    item, i = _block(lines, i + 1, lines[i + 1].indent, what, depth + 1)
                    items.append(item)
                    continue
                items.append(None)
                i += 1
                continue
            if _is_key(rest):
                # "- key: value" opens a mapping whose other keys align with this one
                inner = indent + 2
                sub = [_Line(lines[i].number, inner, rest)]
                j = i + 1
                while j < len(lines) and lines[j].indent >= inner:
                    sub.append(lines[j])
                    j += 1
                item, _ = _block(sub, 0, inner, what, depth + 1)
                items.append(item)
                i = j
                continue
            items.append(_scalar_or_flow(rest, lines[i].number, what))
            i += 1
        return items, i
    out: dict[str, Any] = {}
    while i < len(lines) and lines[i].indent == indent:
        line = lines[i]
        if not _is_key(line.text):
            raise InputError(f"{what}, line {line.number}: expected 'name: value', got "
                             f"{line.text[:60]!r}", field="command")
        key, rest = _split_key(line.text)
        if key in out:
            raise InputError(f"{what}, line {line.number}: {key} is given twice",
                             field="command")
        if rest:
            if rest[0] in "|>&*!":
                raise InputError(f"{what}, line {line.number}: {key}'s value ({rest[:20]}) "
                                 "uses YAML kvplan does not read (multi-line text, anchors, "
                                 "tags)", field="command")
            out[key] = _scalar_or_flow(rest, line.number, what)
            i += 1
        elif i + 1 < len(lines) and (lines[i + 1].indent > indent or (
                lines[i + 1].indent == indent and lines[i + 1].text.startswith("-"))):
            out[key], i = _block(lines, i + 1, lines[i + 1].indent, what, depth + 1)
        else:
            out[key] = None
            i += 1
    if i < len(lines) and lines[i].indent > indent:
        raise InputError(f"{what}, line {lines[i].number}: not read (indented under a value)",
                         field="command")
    return out, i


def _is_key(text: str) -> bool:
    if text[0] in "\"'":
        close = text.find(text[0], 1)
        return close > 0 and text[close + 1:close + 2] == ":"
    m = re.match(r"[^\s:\[\]{},][^:]*?:(\s|$)", text)
    return m is not None


def _split_key(text: str) -> tuple[str, str]:
    if text[0] in "\"'":
        close = text.find(text[0], 1)
        return text[1:close], text[close + 2:].strip()
    key, _, rest = text.partition(":")
    return key.strip(), rest.strip()


def _scalar_or_flow(text: str, number: int, what: str) -> Any:
    if text[0] in "[{":
        value, end = _flow(text, 0, number, what)
        if text[end:].strip():
            raise InputError(f"{what}, line {number}: text after {text[:end]!r}",
                             field="command")
        return value
    return _scalar(text, number, what)


def _flow(text: str, i: int, number: int, what: str, depth: int = 0) -> tuple[Any, int]:
    """A flow sequence or mapping starting at text[i]; (value, index after it)."""
    if depth > MAX_DEPTH:
        raise InputError(f"{what}, line {number}: nested deeper than {MAX_DEPTH} levels",
                         field="command")
    close = "]" if text[i] == "[" else "}"
    is_map = close == "}"
    items: list[Any] = []
    pairs: dict[str, Any] = {}
    i += 1
    while True:
        while i < len(text) and text[i] == " ":
            i += 1
        if i >= len(text):
            raise InputError(f"{what}, line {number}: {close} missing", field="command")
        if text[i] == close:
            return (pairs if is_map else items), i + 1
        if is_map:
            key, i = _flow_word(text, i, ":", number, what)
            if i >= len(text) or text[i] != ":":
                raise InputError(f"{what}, line {number}: expected ':' after {key!r}",
                                 field="command")
            i += 1
            while i < len(text) and text[i] == " ":
                i += 1
        if i < len(text) and text[i] in "[{":
            value, i = _flow(text, i, number, what, depth + 1)
        else:
            word, i = _flow_word(text, i, ",]}", number, what)
            value = _scalar(word, number, what)
        if is_map:
            pairs[str(_scalar(key, number, what))] = value
        else:
            items.append(value)
        while i < len(text) and text[i] == " ":
            i += 1
        if i < len(text) and text[i] == ",":
            i += 1
        elif i < len(text) and text[i] != close:
            raise InputError(f"{what}, line {number}: expected ',' or '{close}' at "
                             f"{text[i:i + 10]!r}", field="command")


def _flow_word(text: str, i: int, stops: str, number: int, what: str) -> tuple[str, int]:
    if i >= len(text):
        raise InputError(f"{what}, line {number}: a flow collection is not closed",
                         field="command")
    if text[i] in "\"'":
        end = text.find(text[i], i + 1)
        if end < 0:
            raise InputError(f"{what}, line {number}: a quote is not closed", field="command")
        return text[i:end + 1], end + 1
    j = i
    while j < len(text) and text[j] not in stops:
        j += 1
    return text[i:j].strip(), j


def _scalar(text: str, number: int, what: str) -> Any:
    text = text.strip()
    if not text:
        return None
    if text[0] in "\"'":
        if len(text) < 2 or text[-1] != text[0]:
            raise InputError(f"{what}, line {number}: a quote is not closed", field="command")
        inner = text[1:-1]
        return inner.replace("''", "'") if text[0] == "'" else inner.replace('\\"', '"')
    if text[0] in "&*!|>":
        raise InputError(f"{what}, line {number}: {text[:20]!r} uses YAML kvplan does not "
                         "read (anchors, aliases, tags, multi-line text)", field="command")
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("null", "~"):
        return None
    m = _NUMBER.fullmatch(text)
    if m and (m.group(1) or (m.group(2) and len(m.group(2)) > 1)):
        clean = text.replace("_", "")
        if m.group(2) or m.group(3):
            return float(clean)
        return int(clean)
    return text
