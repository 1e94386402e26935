"""A small JSON Schema (draft-07) validator for the subset the runtimes' hook schemas use.

Keywords: type, const, enum, properties, required, additionalProperties, propertyNames,
items, minimum, allOf, anyOf, oneOf, $ref (``#/definitions/…``), and the boolean schemas
``true`` (anything) and ``false`` (nothing). Annotations (title,
description, default, format, $schema, definitions) are ignored. Any other keyword raises,
so a schema can never be checked more loosely than it is written.
"""

from __future__ import annotations

ANNOTATIONS = {"$schema", "title", "description", "default", "format", "definitions"}
TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "null": lambda v: v is None,
}


def errors(value, schema: dict | bool, root: dict | None = None, path: str = "$") -> list[str]:
    """Every way ``value`` breaks ``schema`` (empty: valid)."""
    if isinstance(schema, bool):  # Codex's ``"tool_input": true``: any value
        return [] if schema else [f"{path}: no value is allowed here"]
    root = schema if root is None else root
    out: list[str] = []
    for key, want in schema.items():
        if key in ANNOTATIONS:
            continue
        if key == "$ref":
            assert want.startswith("#/definitions/"), want
            out += errors(value, root["definitions"][want.split("/")[-1]], root, path)
        elif key == "type":
            kinds = want if isinstance(want, list) else [want]
            if not any(TYPES[k](value) for k in kinds):
                out.append(f"{path}: {value!r} is not of type {want}")
        elif key == "const":
            if value != want or type(value) is not type(want):
                out.append(f"{path}: {value!r} is not {want!r}")
        elif key == "enum":
            if value not in want:
                out.append(f"{path}: {value!r} is not one of {want}")
        elif key == "minimum":
            if TYPES["number"](value) and value < want:
                out.append(f"{path}: {value!r} is below {want}")
        elif key == "required":
            if isinstance(value, dict):
                out += [f"{path}: {name!r} is required" for name in want if name not in value]
        elif key == "properties":
            if isinstance(value, dict):
                for name, sub in want.items():
                    if name in value:
                        out += errors(value[name], sub, root, f"{path}.{name}")
        elif key == "additionalProperties":
            if isinstance(value, dict):
                extra = [k for k in value if k not in schema.get("properties", {})]
                for name in extra:
                    if want is False:
                        out.append(f"{path}: unexpected property {name!r}")
                    elif isinstance(want, dict):
                        out += errors(value[name], want, root, f"{path}.{name}")
        elif key == "propertyNames":
            if isinstance(value, dict):
                for name in value:
                    out += errors(name, want, root, f"{path}[{name!r}]")
        elif key == "items":
            if isinstance(value, list):
                for i, item in enumerate(value):
                    out += errors(item, want, root, f"{path}[{i}]")
        elif key == "allOf":
            for sub in want:
                out += errors(value, sub, root, path)
        elif key in ("anyOf", "oneOf"):
            passing = sum(1 for sub in want if not errors(value, sub, root, path))
            if passing == 0 or (key == "oneOf" and passing > 1):
                out.append(f"{path}: {value!r} matches {passing} of the {key} schemas")
        else:
            raise AssertionError(f"schema keyword {key!r} is not supported by this validator")
    return out


def test_the_validator_itself_rejects_what_it_should():
    schema = {
        "type": "object",
        "properties": {"a": {"const": "x"}, "b": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": False,
        "definitions": {"S": {"type": ["string", "null"]}},
    }
    assert errors({"a": "x", "b": 1}, schema) == []
    assert errors({"b": True}, schema) and errors({"a": "x", "c": 1}, schema)
    assert errors({"a": "y"}, schema) and errors([], schema)
    assert errors(None, {"$ref": "#/definitions/S"}, schema) == []
    assert errors(3, {"$ref": "#/definitions/S"}, schema)
    assert errors({"k": 1}, {"propertyNames": {"enum": ["j"]}})
    assert errors(999, {"type": "number", "minimum": 1000})
    try:
        errors(1, {"maximum": 3})
    except AssertionError:
        pass
    else:
        raise AssertionError("an unknown keyword must not be ignored")
