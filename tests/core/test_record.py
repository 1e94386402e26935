"""``core.record``: relay's data classes behave as the standard library's dataclasses do,
in everything relay uses of them (design.md §18 says why relay has its own)."""

from __future__ import annotations

import dataclasses

import pytest

from relay_cli.core.record import FrozenInstanceError, field, record, replace


@record(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: list[str] = field(default_factory=list)


@record
class Counter:
    name: str
    n: int = 0
    seen: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.name = self.name.strip()


@dataclasses.dataclass(frozen=True)
class DPoint:
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)


def test_fields_defaults_and_factories():
    a, b = Point(1), Point(1, 2, ["t"])
    assert (a.x, a.y, a.tags, b.y, b.tags) == (1, 0, [], 2, ["t"])
    assert Point(1).tags is not Point(1).tags  # each instance its own list
    assert Point(x=3, y=4) == Point(3, 4)
    assert "tags" not in Point.__dict__  # the factory is not a class attribute


def test_equality_hash_and_repr_as_a_dataclass():
    assert Point(1, 2) == Point(1, 2) and Point(1, 2) != Point(2, 1)
    assert Point(1, 2) != DPoint(1, 2)  # another class is never equal
    assert hash(Point(1, 2, ())) == hash(Point(1, 2, ()))  # type: ignore[arg-type]
    assert Counter.__hash__ is None and DPoint.__hash__ is not None
    assert repr(Point(1, 2)) == repr(DPoint(1, 2)).replace("DPoint", "Point")


def test_frozen_refuses_assignment_mutable_does_not():
    p = Point(1)
    with pytest.raises(FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del p.y  # type: ignore[misc]
    c = Counter("  a ")
    c.n += 1
    assert (c.name, c.n) == ("a", 1)  # __post_init__ ran


def test_wrong_arguments_are_type_errors():
    with pytest.raises(TypeError, match="missing"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unknown"):
        Point(1, z=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="two values"):
        Point(1, x=2)  # type: ignore[misc]
    with pytest.raises(TypeError, match="takes 3"):
        Point(1, 2, [], 4)  # type: ignore[call-arg]


def test_replace_copies_with_changes():
    p = Point(1, 2, ["t"])
    q = replace(p, y=5)
    assert (q.x, q.y, q.tags) == (1, 5, ["t"]) and p.y == 2
    with pytest.raises(TypeError):
        replace(p, z=1)


def test_relay_never_imports_dataclasses():
    """Nothing in the package uses the standard library's dataclasses (a hook would pay
    for it at every start)."""
    from pathlib import Path

    package = Path(__file__).parents[2] / "relay_cli"
    users = [
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if "import dataclasses" in p.read_text() or "from dataclasses" in p.read_text()
    ]
    assert users == []
