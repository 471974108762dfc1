"""Names to what they build: one mechanism for learners, tasks, sims, robots and training loops.

A :class:`Registry` maps the names a command line or a registration uses (``algo=``, ``task=``,
``sim=``, ``robot=``, a learner's ``loop=``) to their entries. Built-ins register themselves where
they are defined; a registry whose built-ins live in modules not imported yet is given ``load``
(import them), which runs before every read. Reading a name no registry holds is the one lookup,
``registry[name]``, and fails with the one error, :class:`UnknownNameError` (a ``ConfigError``,
so a ``ValueError``), in one shape, one line of at most :data:`ERROR_WIDTH` characters::

    unknown algo 'sacc'; did you mean algo=sac? (`ctrl-rl list` lists every algo)
    unknown sim 'bullet'; choose one of: gymnasium, ..., torch (`ctrl-rl list` lists every sim)
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, ItemsView, Iterable, Iterator
from typing import Generic, TypeVar

from ctrl_rl.config import ConfigError

T = TypeVar("T")

ERROR_WIDTH = 200
"""Characters of a one-line error that names choices, ``ctrl-rl: error: `` included: the choices
that do not fit are counted and left to the command that lists them all."""
LISTED_BY = "`ctrl-rl list`"
"""The command that lists every registered name of every kind."""


def fit_choices(head: str, choices: list[str], where: str, tail: str = "", width: int = ERROR_WIDTH) -> str:
    """``head``, ``choices`` joined by commas and ``tail`` when ``ctrl-rl: error: <line>`` fits in ``width``;
    else as many choices as fit, the rest as ``... (N more: <where>)`` (no ``tail``)."""
    room = width - len("ctrl-rl: error: ") - len(head)
    if len(", ".join(choices) + tail) <= room:
        return head + ", ".join(choices) + tail
    for shown in range(len(choices) - 1, 0, -1):
        text = ", ".join([*choices[:shown], f"... ({len(choices) - shown} more: {where})"])
        if len(text) <= room:
            return head + text
    return head + f"... ({len(choices)} more: {where})"


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The registered name ``name`` is most likely a typo of (difflib's ratio >= 0.6), or None."""
    found = difflib.get_close_matches(name, list(choices), n=1)
    return found[0] if found else None


class UnknownNameError(ConfigError):
    """A name that is not registered; made by :meth:`of`, so every such message has one shape."""

    @classmethod
    def of(cls, kind: str, name: str, choices: Iterable[str], *, context: str = "", suggestion: str | None = None,
           also: str = "") -> UnknownNameError:
        """``unknown <kind> '<name>'<context>; did you mean <kind>=<suggestion>? (`ctrl-rl list` lists every
        <kind>)``, the suggestion being the closest of ``choices`` unless given; without one, ``; choose
        [<also> or ]one of: <choices>`` and the same parenthesis, the choices cut to fit one line."""
        choices = sorted(choices)
        head, tail = f"unknown {kind} '{name}'{context}; ", f" ({LISTED_BY} lists every {kind})"
        guess = suggestion or closest(name, choices)
        if guess:
            return cls(f"{head}did you mean {kind}={guess}?{tail}")
        return cls(fit_choices(f"{head}choose {also + ' or ' if also else ''}one of: ", choices, LISTED_BY, tail))


class Registry(Generic[T]):
    """Entries of one kind by name, in registration order; ``registry[name]`` is the lookup."""

    def __init__(self, kind: str, *, load: Callable[[], object] | None = None, context: str = "",
                 also: str = "") -> None:
        self.kind = kind
        """What a name names, as the command line writes its key (``algo``, ``task``, ``sim``, ...)."""
        self.context = context
        """Said after the name in an error (``" for sim 'torch'"``: which of several registries of a kind)."""
        self.also = also
        """What the lookup's caller accepts besides a name, for the error (``"a robot YAML path"``)."""
        self._load = load
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        """Add (or replace) ``name``; returns ``entry``."""
        self._entries[name] = entry
        return entry

    def _all(self) -> dict[str, T]:
        if self._load is not None:
            self._load()
        return self._entries

    def __getitem__(self, name: str) -> T:
        """The entry of ``name``; :class:`UnknownNameError` naming the closest name or the choices."""
        entries = self._all()
        if name not in entries:
            raise UnknownNameError.of(self.kind, name, entries, context=self.context, also=self.also)
        return entries[name]

    def get(self, name: str, default: T | None = None) -> T | None:
        return self._all().get(name, default)

    def entries(self) -> dict[str, T]:
        """A copy of every entry by name, built-ins loaded first."""
        return dict(self._all())

    def items(self) -> ItemsView[str, T]:
        return self.entries().items()

    def __contains__(self, name: object) -> bool:
        return name in self._all()

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries())

    def __len__(self) -> int:
        return len(self._all())

    def __setitem__(self, name: str, entry: T) -> None:
        """``register`` as item assignment (so ``monkeypatch.setitem`` can lend a test an entry)."""
        self.register(name, entry)

    def __delitem__(self, name: str) -> None:
        """Take ``name`` out (a test's registration, undone)."""
        del self._entries[name]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"
