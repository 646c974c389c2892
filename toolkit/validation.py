"""JSON Schema validation of the documents the toolkit reads: a user catalogue file, ``bundle.toml`` and
``findings.json`` (one schema library, ``jsonschema``; the schemas are package data under
``toolkit/resources/schemas/``).

A schema says what shape a document has (keys, types, required entries); the reader of each document then checks
what a schema cannot (a regex compiles, a sample matches, a zone exists). :func:`schema_problems` turns the
validator's errors into one short sentence each, naming where in the document the problem is.
"""

from __future__ import annotations

import datetime
import functools
import json
from importlib import resources
from typing import Any, Iterable

#: Schemas shipped with the package: name -> file under ``toolkit/resources/schemas/``.
SCHEMAS: dict[str, str] = {
    "catalogue": "catalogue.schema.json",
    "bundle": "bundle.schema.json",
    "findings": "findings.schema.json",
}


@functools.cache
def load_schema(name: str) -> dict[str, Any]:
    """The JSON Schema ``name`` (a key of :data:`SCHEMAS`), read once per process."""
    text = resources.files("toolkit").joinpath("resources", "schemas", SCHEMAS[name]).read_text(encoding="utf-8")
    return json.loads(text)


@functools.cache
def _validator(name: str) -> Any:
    from jsonschema import Draft202012Validator

    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def error_path(parts: Iterable[Any]) -> str:
    """Where in a document a problem is, as people write it: ``template[2].samples`` (``top`` for the root)."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "top"


def jsonable(value: Any) -> Any:
    """A TOML document as JSON values: dates and times (TOML literals) become their ISO 8601 text."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, (datetime.date, datetime.time)):  # datetime.datetime is a date
        return value.isoformat()
    return value


def schema_errors(document: Any, name: str) -> list[tuple[tuple[Any, ...], str]]:
    """``(path, message)`` per way ``document`` breaks the schema ``name``, in document order; the path is the
    keys and indices down to the offending value (empty for the document itself)."""
    validator = _validator(name)
    errors = sorted(validator.iter_errors(jsonable(document)), key=lambda e: [str(p) for p in e.absolute_path])
    return [(tuple(e.absolute_path), _message(e)) for e in errors]


def schema_problems(document: Any, name: str) -> list[str]:
    """One sentence per way ``document`` breaks the schema ``name`` (empty when it conforms), in document order."""
    return [f"{error_path(path)}: {message}" for path, message in schema_errors(document, name)]


def _message(error: Any) -> str:
    """The validator's message, shortened where it would print a whole (possibly long) document."""
    if error.validator == "additionalProperties":
        return error.message.replace("Additional properties are not allowed", "unknown key(s)")
    if error.validator == "required":
        return error.message.replace("is a required property", "is required")
    text = error.message
    return text if len(text) <= 200 else text[:197] + "..."


__all__ = ["SCHEMAS", "error_path", "jsonable", "load_schema", "schema_errors", "schema_problems"]
