"""``@record``: fields, defaults, equality, hashing and freezing as dataclasses give them, without importing inspect."""

from __future__ import annotations

import subprocess
import sys
from typing import ClassVar

import pytest

from exporter.common.records import field, record, replace


@record(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: dict = field(factory=dict)
    kind: ClassVar[str] = "point"


@record
class Counter:
    name: str
    counts: list = field(factory=list)


@pytest.mark.unit
def test_fields_defaults_and_factories():
    assert Point(1) == Point(1, 0, {})
    assert Point(1).tags is not Point(1).tags  # made anew each time
    assert Point(x=2, y=3).y == 3
    assert repr(Point(1, 2)) == "Point(x=1, y=2, tags={})"
    assert Point.kind == "point"
    with pytest.raises(TypeError):
        Point()  # type: ignore[call-arg]


@pytest.mark.unit
def test_frozen_records_refuse_change_and_hash_by_value():
    point = Point(1, 2, ())  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        point.x = 5  # type: ignore[misc]
    assert hash(point) == hash(Point(1, 2, ()))  # type: ignore[arg-type]
    assert replace(point, y=7) == Point(1, 7, ())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        replace(point, z=1)


@pytest.mark.unit
def test_mutable_records_change_compare_by_value_and_are_not_hashable():
    counter = Counter("a")
    counter.counts.append(1)
    assert counter == Counter("a", [1])
    assert counter != Counter("b", [1])
    assert Counter("a") != ("a", [])
    with pytest.raises(TypeError):
        hash(counter)


@pytest.mark.unit
def test_a_field_without_default_after_one_with_a_default_is_refused():
    with pytest.raises(TypeError, match="without a default"):

        @record
        class Bad:
            a: int = 1
            b: int


def test_the_redis_only_exporter_does_not_load_inspect():
    code = (
        "import sys, exporter.cli.main, exporter.cli.serve, exporter.service.server\n"
        "print(sorted({'inspect', 'dataclasses', 'ast', 'dis'} & set(sys.modules)))"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
