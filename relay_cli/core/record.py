"""Classes that hold data (``record``), without the standard library's ``dataclasses``.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis``, ``tokenize``) and writes
and compiles each class's ``__init__``, ``__repr__`` and ``__eq__`` from source: about
11 ms to import and 0.5 ms a class here, on every start. relay's hook runs on every turn
of every agent's session (design.md §18), so relay's classes are ``record``s instead: one
``__init__``, ``__repr__``, ``__eq__`` and ``__hash__`` for them all, reading the fields
from the class's annotations in order. What relay uses of ``dataclass`` is all there is:
defaults, ``field(default_factory=...)``, ``frozen=True``, ``__post_init__`` and
``replace``; the type checker reads a ``record`` as a dataclass (``dataclass_transform``).
"""

from __future__ import annotations

TYPE_CHECKING = False  # (typing's, without importing typing: design.md §18)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeVar

    from typing_extensions import dataclass_transform

    T = TypeVar("T")
else:

    def dataclass_transform(**_: object) -> Callable[[Any], Any]:
        return lambda f: f


_MISSING: Any = object()


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make: Callable[[], object]) -> None:
        self.make = make


def field(*, default_factory: Callable[[], T]) -> T:
    """A field whose default is made anew for each instance (``default_factory()``)."""
    return _Factory(default_factory)  # type: ignore[return-value]


class FrozenInstanceError(AttributeError):
    """A field of a frozen record was assigned or deleted."""


def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    """``cls``'s fields and their defaults (``_MISSING``: none), in declaration order."""
    found = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
            continue
        default = cls.__dict__.get(name, _MISSING)
        if isinstance(default, _Factory):
            delattr(cls, name)  # (each instance holds its own)
        found.append((name, default))
    return tuple(found)


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    fields = type(self).__record_fields__
    if len(args) > len(fields):
        raise TypeError(f"{type(self).__name__}() takes {len(fields)} arguments, {len(args)} given")
    set_ = object.__setattr__
    for i, (name, default) in enumerate(fields):
        if i < len(args):
            if name in kwargs:
                raise TypeError(f"{type(self).__name__}() got two values for {name!r}")
            value = args[i]
        elif name in kwargs:
            value = kwargs.pop(name)
        elif default is _MISSING:
            raise TypeError(f"{type(self).__name__}() is missing the argument {name!r}")
        elif isinstance(default, _Factory):
            value = default.make()
        else:
            value = default
        set_(self, name, value)
    if kwargs:
        raise TypeError(f"{type(self).__name__}() got unknown arguments {sorted(kwargs)}")
    post = getattr(self, "__post_init__", None)
    if post is not None:
        post()


def _values(self: Any) -> tuple[Any, ...]:
    return tuple(getattr(self, name) for name, _ in type(self).__record_fields__)


def _repr(self: Any) -> str:
    inner = ", ".join(f"{name}={getattr(self, name)!r}" for name, _ in type(self).__record_fields__)
    return f"{type(self).__qualname__}({inner})"


def _eq(self: Any, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented  # type: ignore[no-any-return]
    return _values(self) == _values(other)


def _hash(self: Any) -> int:
    return hash(_values(self))


def _frozen_setattr(self: Any, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _frozen_delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _make(cls: type[T], frozen: bool) -> type[T]:
    cls.__record_fields__ = _fields(cls)  # type: ignore[attr-defined]
    cls.__init__ = _init  # type: ignore[method-assign]
    if "__repr__" not in cls.__dict__:
        cls.__repr__ = _repr  # type: ignore[method-assign]
    if "__eq__" not in cls.__dict__:
        cls.__eq__ = _eq  # type: ignore[method-assign]
        # as dataclass: a frozen record hashes by its fields, a mutable one is unhashable
        cls.__hash__ = _hash if frozen else None  # type: ignore[method-assign,assignment]
    if frozen:
        cls.__setattr__ = _frozen_setattr  # type: ignore[method-assign]
        cls.__delattr__ = _frozen_delattr  # type: ignore[method-assign]
    return cls


@dataclass_transform(field_specifiers=(field,))
def record(cls: Any = None, /, *, frozen: bool = False) -> Any:
    """A class decorator: ``cls`` holds data, its fields its annotations (as ``dataclass``)."""
    if cls is None:
        return lambda c: _make(c, frozen)
    return _make(cls, frozen)


def replace(obj: T, **changes: Any) -> T:
    """A copy of the record ``obj`` with ``changes`` (as ``dataclasses.replace``)."""
    values = {name: getattr(obj, name) for name, _ in type(obj).__record_fields__}  # type: ignore[attr-defined]
    unknown = set(changes) - set(values)
    if unknown:
        raise TypeError(f"{type(obj).__name__} has no fields {sorted(unknown)}")
    values.update(changes)
    return type(obj)(**values)
