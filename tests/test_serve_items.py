"""The items of a request, as rules over any items (hypothesis): what lands in a landing
reads back as the items that were sent, in either format, whatever the text."""

from __future__ import annotations

import csv
import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataflow.errors import Refused
from dataflow.serve import items

# field names and values as a producer may send them, line breaks aside (a CSV landing
# refuses them: Spark reads one line per row)
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"))
NAMES = st.lists(TEXT.filter(str.strip), min_size=1, max_size=5, unique=True)


@st.composite
def flat_items(draw) -> list[dict]:
    names = draw(NAMES)
    rows = draw(st.lists(st.lists(TEXT, min_size=len(names), max_size=len(names)),
                         min_size=1, max_size=8))  # fmt: skip
    return [dict(zip(names, row, strict=True)) for row in rows]


@given(flat_items())
def test_a_csv_landing_reads_back_as_the_items_sent(sent):
    landed = items.encode(sent, "csv").decode()
    rows = list(csv.DictReader(io.StringIO(landed, newline="")))
    assert rows == sent
    assert landed.count("\n") == len(sent) + 1  # one line a row, as Spark reads it


@given(flat_items())
def test_a_csv_body_lands_as_the_same_items(sent):
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(list(sent[0]))
    writer.writerows([list(item.values()) for item in sent])
    assert items.parse(out.getvalue().encode(), "text/csv") == sent


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)  # fmt: skip


@given(st.lists(st.dictionaries(st.text(), JSON_VALUES, max_size=4), min_size=1, max_size=6))
@pytest.mark.long
def test_a_json_landing_reads_back_as_the_items_sent(sent):
    landed = items.encode(sent, "json")
    lines = landed.decode().split("\n")  # \n ends a line for Spark, nothing else
    assert lines[-1] == "" and [json.loads(line) for line in lines[:-1]] == sent
    assert items.parse(landed, "application/x-ndjson") == sent
    assert items.parse(json.dumps(sent).encode(), "application/json") == sent


@given(st.binary(max_size=200), st.sampled_from(["application/json", "application/x-ndjson",
                                                  "text/csv"]))  # fmt: skip
def test_any_body_is_items_or_one_refusal(body, kind):
    try:
        found = items.parse(body, kind)
    except Refused as exc:
        assert exc.status == 400 and "\n" not in str(exc)
    else:
        assert found and all(isinstance(item, dict) for item in found)


@pytest.mark.parametrize("value", [{"a": 1}, [1], "two\nlines"])
def test_what_a_csv_landing_cannot_hold_is_refused(value):
    with pytest.raises(Refused) as refused:
        items.encode([{"x": value}], "csv")
    assert refused.value.status == 400
