"""The types of the hand-written exercise cases and their registry: each file of known_cases/ adds its exercise's
cases to :data:`KNOWN`; cases.py gathers them."""

from __future__ import annotations

from dataclasses import dataclass

KNOWN: dict[str, dict] = {}  # stem → {"right", "bugs", "mixed", "written_prompts"}: the hand-written cases


@dataclass(frozen=True)
class Bug:
    """A known wrong answer to one part, and how it must be caught.

    ``check``: a regular expression that the visible check's ``AssertionError`` message matches, naming the bug;
    ``None`` when the visible check accepts the answer (only the hidden tests catch it). ``hidden``: what the hidden
    tests raise on their own (``hidden_error``, ``AssertionError`` unless the answer crashes on a hidden input) and
    a regular expression for its message. ``also_fails``: the parts whose solution calls this one and so fail too.
    """

    part: str
    source: str
    check: str | None
    hidden: str
    hidden_error: type[BaseException] = AssertionError
    also_fails: tuple[str, ...] = ()

    @property
    def touches(self) -> frozenset[str]:
        return frozenset({self.part, *self.also_fails})

    @property
    def graded_failure(self) -> tuple[str, str]:
        """(exception name, message pattern) of the graded test cell's error: it runs the visible check first."""
        if self.check is not None:
            return "AssertionError", self.check
        return self.hidden_error.__name__, self.hidden
