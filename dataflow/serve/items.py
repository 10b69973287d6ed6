"""A request's body as items, and items as one file in the landing's format.

A body is one item (a JSON object), many (a JSON array of objects, JSON lines), or a CSV
text whose first line is the header, chosen by its ``Content-Type``. Everything is
checked before anything lands: a body that is not wholly right is refused whole, with a
message that names a place in it (item 3, line 7, a field's name) and never echoes its
values. Items land as JSON lines in a ``json`` landing, as CSV with a header in a ``csv``
one (the columns of the first item, in its order: the order a stream's schema reads).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence

from ..errors import Refused

JSON = ("application/json",)
JSON_LINES = (
    "application/x-ndjson",
    "application/ndjson",
    "application/jsonl",
    "application/x-jsonlines",
    "application/jsonlines",
    "application/json-lines",
)
CSV = ("text/csv", "application/csv")
FORMATS = ("json", "csv")  # landing formats items can land in
Item = dict[str, object]


def _bad(reason: str) -> Refused:
    return Refused(400, reason)


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _json_value(text: str, where: str) -> object:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:  # its message names a place, never the text
        raise _bad(
            f"{where}is not JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise _bad(f"{where}is not JSON: {exc}") from None


def media_type(content_type: str) -> str:
    """``application/json; charset=utf-8`` -> ``application/json``."""
    return content_type.split(";", 1)[0].strip().lower()


def parse(body: bytes, content_type: str) -> list[Item]:
    """The items of a body, by its content type; raises Refused (400, or 415 for a
    content type it cannot read)."""
    kind = media_type(content_type)
    if not (kind in JSON or kind in JSON_LINES or kind in CSV or kind.endswith("+json")):
        raise Refused(
            415, f"Content-Type '{kind or '(none)'}': send application/json, "
            "application/x-ndjson (JSON lines) or text/csv"
        )  # fmt: skip
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _bad(f"the body is not UTF-8 text (byte {exc.start + 1})") from None
    if kind in CSV:
        items = _csv(text)
    elif kind in JSON_LINES:
        items = _json_lines(text)
    else:
        value = _json_value(text, "the body ")
        items = value if isinstance(value, list) else [value]
        for number, item in enumerate(items, 1):
            if not isinstance(item, dict):
                raise _bad(f"item {number} is a JSON {_kind(item)}, not an object")
    if not items:
        raise _bad("the body has no items")
    return items


def _kind(value: object) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


def _json_lines(text: str) -> list[Item]:
    items = []
    # lines end at \n (or \r\n) only, as Spark reads them: U+2028 or U+0085 inside a
    # string is text, where str.splitlines() would cut the line
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        value = _json_value(line, f"line {number} ")
        if not isinstance(value, dict):
            raise _bad(f"line {number} is a JSON {_kind(value)}, not an object")
        items.append(value)
    return items


def _csv(text: str) -> list[Item]:
    rows = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(rows, None)
        if not header or not any(name.strip() for name in header):
            raise _bad("a CSV body starts with its header line (the names of the columns)")
        _check_names(header)
        items = []
        for row in rows:
            if not row:
                continue
            if len(row) != len(header):
                raise _bad(
                    f"CSV line {rows.line_num} has {len(row)} fields; the header has {len(header)}"
                )
            items.append(dict(zip(header, row, strict=True)))
    except csv.Error as exc:
        raise _bad(f"the CSV body cannot be read at line {rows.line_num}: {exc}") from None
    return items


def _check_names(names: Sequence[str]) -> None:
    seen = set()
    for number, name in enumerate(names, 1):
        if not name.strip():
            raise _bad(f"column {number} of the header has no name")
        if "\n" in name or "\r" in name:
            raise _bad(f"column {number} of the header has a line break in its name")
        if name in seen:
            raise _bad(f"column {number} of the header repeats a name")
        seen.add(name)


def encode(items: Sequence[Item], landing_format: str) -> bytes:
    """The items as one file of the landing's format (``json``: JSON lines; ``csv``)."""
    if landing_format == "json":
        lines = (json.dumps(item, ensure_ascii=False, separators=(",", ":")) for item in items)
        return "".join(f"{line}\n" for line in lines).encode()
    columns = list(items[0])
    _check_names(columns)
    known = set(columns)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for number, item in enumerate(items, 1):
        extra = next((name for name in item if name not in known), None)
        if extra is not None:
            raise _bad(
                f"item {number} has a field that item 1 has not: a CSV landing's columns "
                f"are item 1's ({len(columns)})"
            )
        writer.writerow([_cell(item.get(name), number) for name in columns])
    return out.getvalue().encode()


def _cell(value: object, number: int) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise _bad(f"item {number} has a nested {_kind(value)}: a CSV landing takes flat items")
    text = value if isinstance(value, str) else json.dumps(value)
    if "\n" in text or "\r" in text:
        raise _bad(f"item {number} has a line break in a value: a CSV landing reads one line each")
    return text
