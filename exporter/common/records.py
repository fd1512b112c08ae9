"""``@record``: the part of ``dataclasses`` this exporter uses, without what it costs at start-up.

``dataclasses`` imports ``inspect`` (and with it ``ast``, ``dis`` and ``tokenize``) for one call that names an
undocumented class: about 1.1 MiB of a Redis-only exporter's 17 MiB at rest. A record is a class whose annotated
attributes are its fields, in order: ``__init__`` takes them (a default is a value or ``field(factory=callable)``) and then
calls ``__post_init__`` where the class has one, ``__repr__`` and ``__eq__`` compare them, and a ``frozen`` record refuses
assignment and is hashable. :func:`replace` copies one with some fields changed.

``@record`` is declared a ``dataclass_transform`` with :func:`field` as its field specifier, so type checkers see each
record's constructor as they see a dataclass's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
elif sys.version_info >= (3, 11):
    from typing import dataclass_transform
else:  # Python 3.10: the marker is for type checkers only

    def dataclass_transform(**_: Any) -> Callable[[Any], Any]:
        return lambda decorated: decorated


C = TypeVar("C", bound=type)
R = TypeVar("R")
T = TypeVar("T")
_NO_DEFAULT = object()


class _Factory:
    """A default made anew for each record, by calling ``make``."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make


def field(*, factory: Callable[[], T]) -> T:
    """A field whose default is ``factory()``, made anew for each record (a mutable default, a lock)."""
    return _Factory(factory)  # type: ignore[return-value]  # read by @record, which replaces it with factory()


@overload
def record(cls: C, /) -> C: ...
@overload
def record(*, frozen: bool = False) -> Callable[[C], C]: ...


@dataclass_transform(eq_default=True, field_specifiers=(field,))
def record(cls: C | None = None, /, *, frozen: bool = False) -> C | Callable[[C], C]:
    """Decorate a class as a record (``@record`` or ``@record(frozen=True)``)."""

    def wrap(cls: C) -> C:
        return _make_record(cls, frozen)

    return wrap if cls is None else wrap(cls)


def _fields(cls: type) -> dict[str, Any]:
    """The fields of ``cls`` and its record bases, by name, with their defaults (``_NO_DEFAULT`` where none)."""
    fields: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        for name, annotation in klass.__dict__.get("__annotations__", {}).items():  # noqa: RUF063 - inspect is what this module avoids
            if str(annotation).startswith(("ClassVar", "typing.ClassVar")):
                continue
            fields[name] = klass.__dict__.get(name, _NO_DEFAULT)
    return fields


def _init_source(cls: type, fields: dict[str, Any], frozen: bool) -> str:
    """The source of the record's ``__init__``: each field a parameter, defaults as ``_d_<name>``."""
    seen_default = False
    parameters, body = [], []
    for name, default in fields.items():
        if default is _NO_DEFAULT:
            if seen_default:
                raise TypeError(f"{cls.__name__}: field {name} without a default follows one with a default")
            parameters.append(name)
            value = name
        else:
            seen_default = True
            parameters.append(f"{name}=_d_{name}")
            value = f"_d_{name}.make() if {name} is _d_{name} else {name}" if isinstance(default, _Factory) else name
        body.append(f"_set(self, {name!r}, {value})" if frozen else f"self.{name} = {value}")
    if hasattr(cls, "__post_init__"):  # as with dataclasses: what is made from the fields, after them
        body.append("self.__post_init__()")
    return f"def __init__(self, {', '.join(parameters)}):\n    " + "\n    ".join(body or ["pass"]) + "\n"


def _make_record(cls: C, frozen: bool) -> C:
    fields = _fields(cls)
    names = tuple(fields)
    defaults = {f"_d_{name}": default for name, default in fields.items() if default is not _NO_DEFAULT}
    source = _init_source(cls, fields, frozen)
    namespace: dict[str, Any] = {**defaults, "_set": object.__setattr__}
    exec(source, namespace)  # noqa: S102 - the source is made above from the class's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    for name, default in fields.items():  # a class attribute would shadow nothing, but a factory must not linger
        if isinstance(default, _Factory) and name in cls.__dict__:
            delattr(cls, name)

    def __repr__(self: Any) -> str:
        return f"{type(self).__qualname__}({', '.join(f'{n}={getattr(self, n)!r}' for n in names)})"

    def __eq__(self: Any, other: Any) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in names)

    cls.__init__ = init  # type: ignore[misc]
    cls.__repr__ = __repr__  # type: ignore[assignment,method-assign]
    cls.__eq__ = __eq__  # type: ignore[assignment,method-assign]
    cls.__record_fields__ = names  # type: ignore[attr-defined]
    if frozen:

        def __setattr__(self: Any, name: str, value: Any) -> None:
            raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")

        def __hash__(self: Any) -> int:
            return hash(tuple(getattr(self, n) for n in names))

        cls.__setattr__ = __setattr__  # type: ignore[assignment,method-assign]
        cls.__delattr__ = __setattr__  # type: ignore[assignment,method-assign]
        cls.__hash__ = __hash__  # type: ignore[assignment,method-assign]
    else:
        cls.__hash__ = None  # type: ignore[assignment]  # mutable and compared by value, as a dataclass
    return cls


def replace(obj: R, **changes: Any) -> R:
    """A copy of the record ``obj`` with ``changes``."""
    names = obj.__class__.__record_fields__  # type: ignore[attr-defined]
    unknown = set(changes) - set(names)
    if unknown:
        raise TypeError(f"{obj.__class__.__name__} has no field {sorted(unknown)[0]!r}")
    return obj.__class__(**{n: changes[n] if n in changes else getattr(obj, n) for n in names})
