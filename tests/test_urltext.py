"""The exporter's own percent-decoding (exporter.common.urltext) reads what urllib.parse reads, which a Redis-only
exporter no longer loads."""

from __future__ import annotations

from urllib.parse import parse_qs
from urllib.parse import unquote as urllib_unquote
from urllib.parse import unquote_plus as urllib_unquote_plus

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.common.urltext import query_values, unquote, unquote_plus

pytestmark = pytest.mark.unit

pieces = st.sampled_from(["a", "%", "2", "5", "f", "F", "E", "C", "3", "A", "9", "+", "é", "=", "&", "g", "0", "8", "€", "%E2%82%AC", "%C3", "%ff"])
texts = st.lists(pieces, max_size=16).map("".join)


@settings(max_examples=2000, deadline=None)
@given(texts)
def test_decodes_as_urllib(text):
    assert unquote(text) == urllib_unquote(text)
    assert unquote_plus(text) == urllib_unquote_plus(text)
    for query in (text, "target=" + text, text + "&target=x"):
        assert query_values(query, "target") == parse_qs(query, keep_blank_values=True).get("target", [])


def test_examples():
    assert unquote("p%40ss%3Aw%25rd") == "p@ss:w%rd"
    assert unquote("%E2%82%AC%zz%4") == "€%zz%4"
    assert query_values("target=redis%3A%2F%2Fh%3A6379&target=&x=1", "target") == ["redis://h:6379", ""]
