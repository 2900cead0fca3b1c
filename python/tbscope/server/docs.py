"""``api/docs``: the OpenAPI document rendered as one plain HTML page, on the server.

Swagger UI and ReDoc load scripts from a CDN, which a server with a strict Content-Security-
Policy (and often no internet) cannot use; this page needs no script at all. Every text is
escaped."""

from __future__ import annotations

import json
from html import escape
from typing import Any


def _type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(json.dumps(v) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    t = schema.get("type", "any")
    if t == "array":
        return f"list[{_type(schema.get('items', {}))}]"
    return str(t)


def _bounds(schema: dict[str, Any]) -> str:
    parts = []
    for key, label in (("minimum", "≥"), ("maximum", "≤"), ("minLength", "length ≥"), ("maxLength", "length ≤")):
        if key in schema:
            parts.append(f"{label} {schema[key]}")
    for s in schema.get("anyOf", []):
        b = _bounds(s)
        if b:
            parts.append(b)
    if "default" in schema:
        parts.append(f"default {json.dumps(schema['default'])}")
    return ", ".join(parts)


def render(spec: dict[str, Any]) -> str:
    info = spec.get("info", {})
    out = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{escape(info.get('title', 'API'))} API</title></head><body>",
        f"<h1>{escape(info.get('title', 'API'))} {escape(str(info.get('version', '')))}</h1>",
        f"<p>{escape(info.get('description', ''))}</p>",
        "<p>Machine-readable: <a href='openapi.json'>openapi.json</a>. Paths are relative to this server's base URL.</p>",
        "<h2>Endpoints</h2><ul>",
    ]
    ops = []
    for path, item in spec.get("paths", {}).items():
        for method, op in item.items():
            if isinstance(op, dict):
                ops.append((path, method, op))
    for path, method, op in ops:
        anchor = escape(f"{method}-{path}", quote=True)
        out.append(f"<li><a href='#{anchor}'>{escape(method.upper())} {escape(path)}</a>: {escape(op.get('summary', ''))}</li>")
    out.append("</ul>")
    for path, method, op in ops:
        anchor = escape(f"{method}-{path}", quote=True)
        out.append(f"<h3 id='{anchor}'>{escape(method.upper())} <code>{escape(path)}</code></h3>")
        out.append(f"<p>{escape(op.get('summary', ''))}</p>")
        params = op.get("parameters", [])
        if params:
            out.append("<table><tr><th>parameter</th><th>in</th><th>type</th><th>required</th><th>bounds</th><th>meaning</th></tr>")
            for p in params:
                sch = p.get("schema", {})
                out.append(
                    "<tr>"
                    f"<td><code>{escape(p['name'])}</code></td><td>{escape(p.get('in', ''))}</td>"
                    f"<td>{escape(_type(sch))}</td><td>{'yes' if p.get('required') else 'no'}</td>"
                    f"<td>{escape(_bounds(sch))}</td><td>{escape(p.get('description', sch.get('description', '')))}</td>"
                    "</tr>"
                )
            out.append("</table>")
        body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
        if body:
            out.append(f"<p>JSON body: <a href='#schema-{escape(_type(body), quote=True)}'>{escape(_type(body))}</a></p>")
        out.append("<p>Answers: ")
        answers = []
        for code, resp in op.get("responses", {}).items():
            kinds = []
            for ctype, c in resp.get("content", {}).items():
                sch = c.get("schema", {})
                name = _type(sch)
                kinds.append(f"{escape(ctype)} <a href='#schema-{escape(name, quote=True)}'>{escape(name)}</a>" if "$ref" in sch else escape(ctype))
            answers.append(f"{escape(str(code))} ({'; '.join(kinds) or escape(resp.get('description', ''))})")
        out.append(", ".join(answers) + "</p>")
    out.append("<h2>Shapes</h2>")
    for name, schema in spec.get("components", {}).get("schemas", {}).items():
        out.append(f"<h3 id='schema-{escape(name, quote=True)}'>{escape(name)}</h3>")
        if schema.get("description"):
            out.append(f"<p>{escape(schema['description'])}</p>")
        props = schema.get("properties", {})
        if props:
            out.append("<table><tr><th>field</th><th>type</th><th>meaning</th></tr>")
            required = set(schema.get("required", []))
            for field, sch in props.items():
                mark = "" if field in required else " (optional)"
                out.append(f"<tr><td><code>{escape(field)}</code>{mark}</td><td>{escape(_type(sch))}</td><td>{escape(sch.get('description', ''))}</td></tr>")
            out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out)
