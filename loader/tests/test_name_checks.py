"""The name checks a warm load runs use str methods instead of regexes (compiling a
pattern cost more start-up time than the checks); they must accept exactly what the
patterns they replaced accept."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from kernelhub.load.importer import _ops_names
from kernelhub.versions import is_commit_id, is_plain_name

NAME_CHARS = st.sampled_from(list("aZ09._-/+ \n\t:_\u00e9\u0663\u00b2"))


@settings(max_examples=3000, derandomize=True)
@given(st.text(alphabet=NAME_CHARS, max_size=8))
def test_plain_names_are_what_the_patterns_accepted(text: str) -> None:
    assert is_plain_name(text) == bool(re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", text))
    assert is_plain_name(text, first="_") == bool(
        re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9._-]*", text))
    assert is_plain_name(text, "._/+-") == bool(
        re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/+-]*", text))


@settings(max_examples=1000, derandomize=True)
@given(st.text(alphabet=st.sampled_from(list("0af9gA\n")), min_size=38, max_size=42))
def test_commit_ids_are_forty_lowercase_hex(text: str) -> None:
    assert is_commit_id(text) == bool(re.fullmatch(r"[0-9a-f]{40}", text))


OPS_PARTS = st.sampled_from([b"torch.ops.", b"torch", b".", b"ops", b"1", b"_x", b"a", b" ",
                             b"\xff", b"torch.ops.torch.ops.", b"9torch.ops."])


@settings(max_examples=3000, derandomize=True)
@given(st.lists(OPS_PARTS, max_size=12))
def test_op_namespaces_named_in_ops_py_are_found_like_the_pattern(parts: list[bytes]) -> None:
    source = b"".join(parts)
    pattern = rb"torch\.ops\.([A-Za-z_][A-Za-z0-9_]*)"
    assert _ops_names(source) == {m.decode() for m in re.findall(pattern, source)}
