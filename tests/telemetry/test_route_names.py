"""The HTTP span's name: the request path with its ids as placeholders, for generated paths the same as replacing
the segment after every `chats` and `turns` segment (the usual `/chats/{id}/...` path takes a shorter way there)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agency_swarm.serving._observe import route_of

NAMES = st.sampled_from(["chats", "turns", "messages", "", "t1:cancel"])
SEGMENTS = st.lists(st.one_of(NAMES, st.text("ab/", max_size=3)), max_size=6)


def by_segments(path: str) -> str:
    segments = path.split("/")
    for index in range(1, len(segments) - 1):
        if segments[index] in ("chats", "turns"):
            segments[index + 1] = "{chat_id}" if segments[index] == "chats" else "{turn_id}"
    return "/".join(segments)


@given(SEGMENTS)
def test_a_route_name_replaces_the_id_after_each_chats_and_turns_segment(parts: list[str]) -> None:
    path = "/" + "/".join(parts)
    assert route_of(path) == by_segments(path)


def test_the_usual_paths() -> None:
    assert route_of("/chats/abc/messages") == "/chats/{chat_id}/messages"
    assert route_of("/chats/abc") == "/chats/{chat_id}"
    assert route_of("/chats/abc/turns/t-1:cancel") == "/chats/{chat_id}/turns/{turn_id}"
    assert route_of("/healthz") == "/healthz"
