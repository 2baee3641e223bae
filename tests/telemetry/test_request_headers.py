"""What the request watch reads of a request's headers in its one pass, against a plain reading of the rules: the
request id (the first `X-Request-ID`, in any case, when it is a plain token, else a new one) and whether a trace
context is carried (any field the propagators read, in any case)."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from agency_swarm.serving._observe import read_headers

FIELDS = frozenset({b"traceparent", b"tracestate", b"baggage"})
NAMES = st.sampled_from([b"x-request-id", b"X-Request-ID", b"traceparent", b"TraceParent", b"baggage", b"host",
                         b"authorization", b"x-request-idx", b"tracestate-x"])
VALUES = st.one_of(st.sampled_from([b"abc-123", b"a" * 128, b"a" * 129, b"", b"bad id", b"caf\xc3\xa9"]),
                   st.binary(max_size=20))
NEW_ID = re.compile(r"[0-9a-f]{32}")


@given(st.lists(st.tuples(NAMES, VALUES), max_size=8), st.booleans())
def test_the_request_id_and_the_trace_context_are_read_as_the_rules_say(
    headers: list[tuple[bytes, bytes]], tracing: bool
) -> None:
    fields = FIELDS if tracing else frozenset()
    request_id, carries = read_headers(headers, fields)
    assert carries == any(name.lower() in fields for name, _ in headers)
    given_ids = [value for name, value in headers if name.lower() == b"x-request-id"]
    if given_ids and re.fullmatch(rb"[A-Za-z0-9._:-]{1,128}", given_ids[0]):
        assert request_id == given_ids[0].decode()
    else:
        assert NEW_ID.fullmatch(request_id)


def test_a_request_without_an_id_gets_a_new_one_each_time() -> None:
    first, _ = read_headers([(b"host", b"a")], FIELDS)
    second, _ = read_headers([(b"host", b"a")], FIELDS)
    assert NEW_ID.fullmatch(first)
    assert NEW_ID.fullmatch(second)
    assert first != second
