"""The generated reference pages, from the code itself: the CLI from the Typer app, fleet.yaml from
the pydantic models of ``agent_fleet.config`` (their types, defaults, bounds and the comments beside
each field), the REST API from the OpenAPI document ``serve`` publishes at ``/openapi.json``.

``write_reference.py`` writes them into the site at build time (mkdocs-gen-files); the tests import
these functions to check the pages name every command, section and path.
"""

from __future__ import annotations

import ast
import inspect
import json
import types
import typing
from decimal import Decimal
from typing import Any

from pydantic import BaseModel

__all__ = ["cli_markdown", "fleet_yaml_markdown", "rest_markdown"]


# --- CLI ---------------------------------------------------------------------------------------------


def cli_markdown() -> str:
    """Every command, group and option of ``agent-fleet``, by typer's own Markdown generator."""
    import typer
    import typer.cli

    from agent_fleet.cli.app import build_app

    command = typer.main.get_command(build_app())
    ctx = typer.Context(command, info_name="agent-fleet")
    body = typer.cli.get_docs_for_click(obj=command, ctx=ctx, name="agent-fleet", title="CLI reference")
    intro = (
        "Generated from the command's own definitions when the site is built: this is what "
        "`agent-fleet COMMAND --help` prints, every command on one page. Exit codes and output formats "
        "are in [the contract](contract.md).\n\n"
    )
    head, _, rest = body.partition("\n\n")
    return f"{head}\n\n{intro}{rest}"


# --- fleet.yaml --------------------------------------------------------------------------------------


def _field_comments(module: types.ModuleType) -> dict[tuple[str, str], str]:
    """(class, field) → the comment on the field's line, or the comment lines just above it."""
    source = inspect.getsource(module)
    lines = source.splitlines()
    found: dict[tuple[str, str], str] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ClassDef):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            text = []
            above = stmt.lineno - 2
            while above >= 0 and lines[above].strip().startswith("#"):
                text.insert(0, lines[above].strip().lstrip("#").strip())
                above -= 1
            for line in lines[stmt.lineno - 1 : (stmt.end_lineno or stmt.lineno)]:
                code, hash_, comment = _split_comment(line)
                if hash_:
                    text.append(comment.strip())
            found[(node.name, stmt.target.id)] = " ".join(t for t in text if t)
    return found


def _split_comment(line: str) -> tuple[str, str, str]:
    """A line's code and its trailing comment (a ``#`` outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[:i], "#", line[i + 1 :]
    return line, "", ""


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        names = [_type_name(a) for a in args if a is not type(None)]
        optional = len(names) < len(args)
        return " or ".join(names) + (" or null" if optional else "")
    if origin in (tuple, list):
        inner = [a for a in args if a is not Ellipsis]
        return f"list of {_type_name(inner[0])}" if inner else "list"
    if origin is dict:
        return f"map of {_type_name(args[0])} → {_type_name(args[1])}" if args else "map"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        label = _SECTION_NAMES.get(annotation, annotation.__name__)
        return f"[object](#{_anchor(annotation)} \"{label}\")"
    names = {str: "string", int: "integer", float: "number", bool: "boolean", Decimal: "number"}
    if annotation is Any:
        return "any"
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


# model → its section's key path in fleet.yaml, filled as the page is written
_SECTION_NAMES: dict[type[BaseModel], str] = {}


def _anchor(model: type[BaseModel]) -> str:
    return model.__name__.lower()


def _default(field: Any) -> str:
    if field.is_required():
        return "required"
    if field.default_factory is not None:
        value = field.default_factory()
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "see below"
    if value is None:
        return "`null`"
    if isinstance(value, tuple | list | dict) and not value:
        return "`[]`" if not isinstance(value, dict) else "`{}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, Decimal):
        return f"`{value}`"
    return f"`{value}`"


def _bounds(field: Any) -> str:
    marks = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "length ≥", "max_length": "length ≤"}
    out = []
    for meta in field.metadata:
        for attr, sign in marks.items():
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{sign} {value}")
    return ", ".join(out)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found


def _doc(model: type[BaseModel]) -> str:
    own = model.__dict__.get("__doc__")
    return " ".join(inspect.cleandoc(own).split()) if own else ""


def fleet_yaml_markdown() -> str:
    """Every key fleet.yaml accepts, section by section, from the models ``load_config`` validates with."""
    import agent_fleet.config as config

    comments = _field_comments(config)
    out = [
        "# fleet.yaml reference",
        "",
        "Generated from the pydantic models the engine validates `fleet.yaml` with (`agent_fleet.config`) "
        "when the site is built: every key, its type, its default and its bounds. Unknown keys are refused "
        "(exit 2, one line naming the key). Command-line flags win over the file.",
        "",
    ]
    paths: list[tuple[str, type[BaseModel]]] = [("", config.FleetConfig)]
    for path, model in paths:  # breadth first: each section named by its shortest key path
        for name, field in model.model_fields.items():
            for sub in _models_in(field.annotation):
                if sub not in {m for _, m in paths}:
                    paths.append((f"{path}.{name}" if path else name, sub))
    _SECTION_NAMES.update({m: p for p, m in paths if p})
    seen: set[type[BaseModel]] = set()
    queue: list[tuple[str, type[BaseModel]]] = [("", config.FleetConfig)]
    while queue:
        path, model = queue.pop(0)
        if model in seen:
            continue
        seen.add(model)
        title = f"`{path}`" if path else "Top level"
        out += [f'## {title} {{ #{_anchor(model)} }}', ""]
        if model is not config.FleetConfig or _doc(model):
            doc = _doc(model)
            if doc:
                out += [doc.replace("``", "`"), ""]
        out += ["| key | type | default | bounds | meaning |", "|---|---|---|---|---|"]
        for name, field in model.model_fields.items():
            meaning = comments.get((model.__name__, name), "").replace("|", "\\|")
            row = [f"`{name}`", _type_name(field.annotation), _default(field), _bounds(field), meaning]
            out.append("| " + " | ".join(row) + " |")
            for sub in _models_in(field.annotation):
                queue.append((f"{path}.{name}" if path else name, sub))
        out.append("")
    return "\n".join(out)


# --- REST --------------------------------------------------------------------------------------------


def _schema_type(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        return f"[{name}](#{name.lower()})"
    if "anyOf" in schema:
        return " or ".join(_schema_type(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " \\| ".join(f"`{v}`" for v in schema["enum"])
    return str(schema.get("type", "any"))


def _constraints(schema: dict[str, Any]) -> str:
    parts = []
    for s in [schema, *schema.get("anyOf", [])]:
        for key, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤"), ("minLength", "length ≥")):
            if key in s:
                parts.append(f"{sign} {s[key]}")
        if "pattern" in s:
            parts.append(f"pattern `{s['pattern']}`")
    return ", ".join(parts)


def rest_markdown(document: dict[str, Any] | None = None) -> str:
    """The REST API of ``agent-fleet serve``: every path and method, its parameters and bodies."""
    if document is None:
        from agent_fleet.control.schema import openapi_document

        document = openapi_document()
    out = [
        "# REST API reference",
        "",
        "Generated when the site is built from the OpenAPI document `agent-fleet serve` publishes at "
        "`GET /openapi.json` (OpenAPI " + str(document.get("openapi", "")) + "); the same document is "
        "[here](openapi.json). Every request names its caller with `Authorization: Bearer TOKEN` "
        "(see [serve](../operations/serve.md)); every error is `{\"error\": {\"type\", \"message\"}}`.",
        "",
    ]
    for path, methods in document["paths"].items():
        for method, op in methods.items():
            out += [f"## `{method.upper()} {path}`", "", op.get("summary", ""), ""]
            params = op.get("parameters", [])
            if params:
                out += ["| parameter | in | type | required | |", "|---|---|---|---|---|"]
                for p in params:
                    schema = p.get("schema", {})
                    out.append(
                        f"| `{p['name']}` | {p.get('in', '')} | {_schema_type(schema)} | "
                        f"{'yes' if p.get('required') else 'no'} | {p.get('description', '')} |"
                    )
                out.append("")
            body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            if body:
                out += [f"Body: {_schema_type(body)}", ""]
            codes = ", ".join(f"`{code}` {r.get('description', '')}" for code, r in op.get("responses", {}).items())
            out += [f"Responses: {codes}", ""]
    out += ["## Schemas", ""]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        out += [f"### {name} {{ #{name.lower()} }}", ""]
        if schema.get("description"):
            out += [" ".join(schema["description"].replace("``", "`").split()), ""]
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        if props:
            out += ["| field | type | default | constraints |", "|---|---|---|---|"]
            for field, sub in props.items():
                default = "required" if field in required else f"`{json.dumps(sub.get('default'))}`"
                out.append(f"| `{field}` | {_schema_type(sub)} | {default} | {_constraints(sub)} |")
            out.append("")
    return "\n".join(out)
