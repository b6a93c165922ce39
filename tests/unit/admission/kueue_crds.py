"""Kueue's published CustomResourceDefinitions as a checker: an object is validated the way the
Kubernetes API server validates a custom resource on create.

The CRDs are Kueue's own files (``config/components/crd/bases/`` at a release tag), read from
``$FLEET_KUEUE_CRDS``, else from ``shared/reference/kueue-crds/`` beside the project root (or beside
one of its parent folders, for a clone made elsewhere); they are not copied into the repository.
For the ``v1beta2`` version's ``openAPIV3Schema`` the API server:

1. prunes nulls on fields that are not ``nullable`` and have no ``default``, then applies defaults
   (a non-nullable null with a default becomes the default);
2. prunes unknown fields. We report them instead: a field Kueue silently drops is a field the
   engine wrote and the cluster will not honour;
3. validates the schema (types, ``x-kubernetes-int-or-string``, enums, patterns, bounds, required,
   list and map limits) and then the CEL rules (``x-kubernetes-validations``). Transition rules
   (those reading ``oldSelf``) apply to updates only, so a create skips them, as the server does.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml

__all__ = ["CRD_DIR", "crd_dir", "crd_errors", "kinds"]

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT.parent / "shared" / "reference" / "kueue-crds"
VERSION = "v1beta2"


def crd_dir() -> Path | None:
    """Where the published CRDs are, or None when this checkout has none beside it."""
    if os.environ.get("FLEET_KUEUE_CRDS"):
        candidates = [Path(os.environ["FLEET_KUEUE_CRDS"])]
    else:
        candidates = [up / "shared" / "reference" / "kueue-crds" for up in ROOT.parents]
    return next((where for where in candidates if any(where.glob("kueue.x-k8s.io_*.yaml"))), None)


@cache
def _schemas() -> dict[str, dict[str, Any]]:
    where = crd_dir()
    if where is None:
        raise FileNotFoundError(f"no Kueue CRDs at {CRD_DIR} (set FLEET_KUEUE_CRDS)")
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(where.glob("kueue.x-k8s.io_*.yaml")):
        crd = yaml.safe_load(path.read_text())
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == VERSION]
        found[crd["spec"]["names"]["kind"]] = version["schema"]["openAPIV3Schema"]
    return found


def kinds() -> frozenset[str]:
    return frozenset(_schemas())


def _as_json_schema(s: Mapping[str, Any]) -> dict[str, Any]:
    """The structural schema as JSON Schema: vendor extensions spelled out, unknown fields refused."""
    out: dict[str, Any] = {}
    for key, value in s.items():
        if key == "properties":
            out[key] = {name: _as_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = _as_json_schema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [_as_json_schema(sub) for sub in value]
        elif key == "not":
            out[key] = _as_json_schema(value)
        elif key.startswith("x-kubernetes-") or key in ("nullable", "default", "description", "format"):
            continue
        else:
            out[key] = value
    if s.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    if s.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if (
        out.get("type") in ("object", ["object", "null"])
        and "properties" in out
        and "additionalProperties" not in s
        and not s.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _default_and_prune(value: Any, s: Mapping[str, Any]) -> Any:
    """Step 1: non-nullable nulls pruned or defaulted, defaults applied to absent fields."""
    if isinstance(value, dict):
        props: Mapping[str, Any] = s.get("properties") or {}
        extra = s.get("additionalProperties") if isinstance(s.get("additionalProperties"), Mapping) else None
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = props.get(key, extra)
            if sub is None:
                out[key] = item
            elif item is None and not sub.get("nullable"):
                if "default" in sub:
                    out[key] = _default_and_prune(copy.deepcopy(sub["default"]), sub)
            else:
                out[key] = _default_and_prune(item, sub)
        for key, sub in props.items():
            if key not in out and key not in value and "default" in sub:
                out[key] = _default_and_prune(copy.deepcopy(sub["default"]), sub)
        return out
    if isinstance(value, list) and isinstance(s.get("items"), Mapping):
        return [_default_and_prune(item, s["items"]) for item in value]
    return value


_CEL = celpy.Environment()


@cache
def _program(rule: str) -> celpy.Runner:
    return _CEL.program(_CEL.compile(rule))


def _cel_errors(value: Any, s: Mapping[str, Any], path: str) -> Iterator[str]:
    """Step 3b: every CEL rule on every node the object has, innermost paths named."""
    for rule in s.get("x-kubernetes-validations") or ():
        if "oldSelf" in rule["rule"]:
            continue
        try:
            ok = _program(rule["rule"]).evaluate({"self": celpy.json_to_cel(value)})
        except celpy.CELEvalError as exc:  # the server reports an evaluation error as invalid too
            ok, rule = False, {**rule, "message": f"{rule.get('message', rule['rule'])} ({exc})"}
        if not bool(ok):
            yield f"{path or '<root>'}: {rule.get('message', rule['rule'])}"
    if isinstance(value, dict):
        props: Mapping[str, Any] = s.get("properties") or {}
        extra = s.get("additionalProperties") if isinstance(s.get("additionalProperties"), Mapping) else None
        for key, item in value.items():
            sub = props.get(key, extra)
            if sub is not None and item is not None:
                yield from _cel_errors(item, sub, f"{path}.{key}")
    elif isinstance(value, list) and isinstance(s.get("items"), Mapping):
        for i, item in enumerate(value):
            yield from _cel_errors(item, s["items"], f"{path}[{i}]")


def crd_errors(obj: Mapping[str, Any]) -> list[str]:
    """What the API server would refuse (or silently drop) in ``obj`` on create; [] when it is admitted."""
    schemas = _schemas()
    kind = obj.get("kind")
    if kind not in schemas:
        return [f"no published CRD for kind {kind!r}"]
    if obj.get("apiVersion") != f"kueue.x-k8s.io/{VERSION}":
        return [f"apiVersion {obj.get('apiVersion')!r} is not kueue.x-k8s.io/{VERSION}"]
    schema = schemas[kind]
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
    meta_errors = []
    name = (obj.get("metadata") or {}).get("name")
    if not isinstance(name, str) or not name:
        meta_errors.append("metadata.name: required")
    shaped = _default_and_prune({"apiVersion": obj["apiVersion"], "kind": kind, "metadata": {}, **body}, schema)
    validator = jsonschema.Draft7Validator(_as_json_schema(schema))
    errors = [
        f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
        for e in sorted(validator.iter_errors(shaped), key=lambda e: list(map(str, e.absolute_path)))
    ]
    if not errors:
        errors.extend(_cel_errors(shaped, schema, ""))
    return meta_errors + errors
