"""The pgbench binding of a recorded statement's parameters: a nullable column's NULLs stay NULL.

A batch whose rows all carry no value in a nullable column (a causation id, say) is an array of ``None``; it
was bound as the text ``{None,...}`` cast to ``uuid[]``, and pgbench's promotion baseline aborted on it
("invalid input syntax for type uuid").
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from bench.trace import Binder

pytestmark = pytest.mark.unit


def test_an_array_of_nulls_binds_as_nulls() -> None:
    binder = Binder(known={})

    ref = binder.ref([None, None, None])

    name = ref.removeprefix(":").split("::")[0]
    assert binder.constants[name] == "{NULL,NULL,NULL}"


def test_nulls_among_scalars_keep_the_scalars_type() -> None:
    binder = Binder(known={})
    at = datetime(2026, 1, 1, tzinfo=UTC)

    ref = binder.ref([at, None])

    name, cast = ref.removeprefix(":").split("::")
    assert cast == "timestamptz[]"
    assert binder.constants[name] == '{"2026-01-01T00:00:00+00:00",NULL}'


def test_nulls_among_uuids_are_nulls() -> None:
    binder = Binder(known={})
    some = uuid.UUID(int=1)

    ref = binder.ref([some, None])

    name = ref.removeprefix(":").split("::")[0]
    assert binder.constants[name] == f"{{{some},NULL}}"
