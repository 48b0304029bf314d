"""The REST API's reference as a page of this server (/api), read from its own OpenAPI
document, so that it needs no script or stylesheet from elsewhere (/docs loads Swagger UI's)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["describe_from_cli", "reference"]

_METHODS = ("get", "post", "put", "patch", "delete")


def _type(schema: dict[str, Any]) -> tuple[str, bool]:
    """A schema's type as a reader writes it ("integer or string", "one of a, b"), and whether
    it admits null (the field may be left out)."""
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1], False
    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"]), False
    members = schema.get("anyOf") or schema.get("oneOf")
    if members:
        names: list[str] = []
        nullable = False
        for m in members:
            name, null = _type(m)
            if m.get("type") == "null":
                nullable = True
            elif name not in names:
                names.append(name)
            nullable = nullable or null
        return " or ".join(names), nullable
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_type(schema.get('items', {}))[0]}", False
    return str(kind), kind == "null"


def _field(name: str, schema: dict[str, Any], required: bool, where: str = "") -> dict[str, Any]:
    kind, nullable = _type(schema)
    examples = schema.get("examples") or []
    return {"name": name, "in": where, "type": kind, "required": required and not nullable,
            "default": schema.get("default"), "has_default": "default" in schema,
            "example": examples[0] if examples else None,
            "description": schema.get("description", "")}


def _schema_fields(schema: dict[str, Any]) -> list[dict[str, Any]]:
    required = set(schema.get("required", ()))
    return [_field(name, prop, name in required)
            for name, prop in schema.get("properties", {}).items()]


def reference(spec: dict[str, Any]) -> dict[str, Any]:
    """The operations (method, path, summary, description, parameters, the body's schema)
    in the document's order, the schemas that bodies name (their fields), and the error
    statuses the operations share."""
    ops: list[dict[str, Any]] = []
    statuses: dict[str, str] = {}
    named: list[str] = []
    for path, item in spec.get("paths", {}).items():
        for method in _METHODS:
            op = item.get(method)
            if op is None:
                continue
            params = [_field(p["name"], {**p.get("schema", {}),
                                         **({"description": p["description"]}
                                            if "description" in p else {})},
                             bool(p.get("required")), p.get("in", ""))
                      for p in op.get("parameters", ())]
            body = None
            content = (op.get("requestBody") or {}).get("content", {})
            schema = content.get("application/json", {}).get("schema")
            if schema is not None:
                body = _type(schema)[0]
                if "$ref" in schema and body not in named:
                    named.append(body)
            for code, resp in op.get("responses", {}).items():
                if code[:1] in "45":
                    statuses.setdefault(code, resp.get("description", ""))
            ops.append({"method": method.upper(), "path": path,
                        "anchor": f"{method}-{path.strip('/').replace('/', '-')}"
                                  .replace("{", "").replace("}", ""),
                        "summary": op.get("summary", ""),
                        "description": op.get("description", ""),
                        "params": params, "body": body})
    components = spec.get("components", {}).get("schemas", {})
    schemas = [{"name": n, "description": components[n].get("description", ""),
                "fields": _schema_fields(components[n])} for n in named if n in components]
    return {"title": spec.get("info", {}).get("title", ""),
            "version": spec.get("info", {}).get("version", ""), "operations": ops,
            "schemas": schemas, "statuses": sorted(statuses.items())}


#: the API's names of the fields whose CLI flag is named otherwise
_FLAG_DEST = {"context": "ctx", "sequences": "seqs"}
#: the bodies whose fields are the plan's flags (MeasureIn's are measure's)
_PLAN_SCHEMAS = ("PlanIn", "PlanQueryIn", "CommandIn", "FindGpuIn")


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    return {a.dest: a.help for a in parser._actions
            if a.help and a.help != argparse.SUPPRESS and a.dest != "model"}


def describe_from_cli(spec: dict[str, Any]) -> None:
    """Give each body field and query parameter that has no description of its own its CLI
    flag's help (the API's fields are the flags under the same names), in place, so that the
    two say the same thing from one text. ``model`` keeps the API's own (no local paths)."""
    from .cli import _measure_parser, _plan_parser

    plan, measure = _helps(_plan_parser()), _helps(_measure_parser())

    def fill(props: dict[str, Any], helps: dict[str, str]) -> None:
        for name, prop in props.items():
            text = helps.get(_FLAG_DEST.get(name, name))
            if text and not prop.get("description"):
                prop["description"] = text

    schemas = spec.get("components", {}).get("schemas", {})
    for name in _PLAN_SCHEMAS:
        fill(schemas.get(name, {}).get("properties", {}), plan)
    fill(schemas.get("MeasureIn", {}).get("properties", {}), measure)
    for item in spec.get("paths", {}).values():
        for method in _METHODS:
            for param in (item.get(method) or {}).get("parameters", ()):
                text = plan.get(_FLAG_DEST.get(param["name"], param["name"]))
                if text and not param.get("description"):
                    param["description"] = text
                    param.setdefault("schema", {}).setdefault("description", text)
