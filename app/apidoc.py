"""The REST API's reference as a page of this server (/api), read from its own OpenAPI
document, so that it needs no script or stylesheet from elsewhere (/docs loads Swagger UI's)."""

from __future__ import annotations

from typing import Any

__all__ = ["reference"]

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
