"""The table-driven core of the visible checks (manyheads.checks.core): check_forms runs each row of a FormInput table
against the reference, expects a ValueError where the reference raises one, compares integers exactly, and words a
wrong answer with the row's hint (a string, or a diagnosis of the wrong result). Each test names the bug it catches
and asserts how it is caught."""

from __future__ import annotations

import pytest
import torch

from manyheads.checks.core import FormInput, check_forms, require_int


def _half(n: int) -> int:
    if n % 2:
        raise ValueError("odd")
    return n // 2


INT_TABLE = [FormInput("half(4)", (4,)), FormInput("half(3)", (3,), hint="3 is odd")]


def test_a_correct_answer_passes_a_table_with_integer_and_value_error_rows():
    check_forms(_half, INT_TABLE, _half)


def test_an_answer_that_returns_where_the_reference_raises_fails_with_the_row_s_hint():
    def half(n):
        return n // 2

    with pytest.raises(AssertionError, match=r"returned 1 on half\(3\), but should raise ValueError: 3 is odd"):
        check_forms(half, INT_TABLE, _half)


def test_integers_are_compared_exactly_and_by_type():
    def half(n):
        return n / 2 if n % 2 == 0 else _half(n)

    with pytest.raises(AssertionError, match=r"half\(4\) returned 2\.0, a float; the spec asks for an int: use //"):
        check_forms(half, INT_TABLE, _half, run=lambda fn, form: require_int(fn(*form.args), form.what, "use //"))
    with pytest.raises(AssertionError, match=r"is wrong for half\(4\)"):  # no run: 2.0 is not the int 2
        check_forms(half, INT_TABLE, _half)


def test_a_hint_can_diagnose_the_wrong_result():
    table = [FormInput("half(8)", (8,), hint=lambda got: "that is n" if got == 8 else "n // 2")]
    message = "{what} returned {got}, expected {want}: {hint}"
    with pytest.raises(AssertionError, match=r"half\(8\) returned 8, expected 4: that is n"):
        check_forms(lambda n: n, table, _half, wrong_message=message)
    with pytest.raises(AssertionError, match=r"half\(8\) returned 9, expected 4: n // 2"):
        check_forms(lambda n: n + 1, table, _half, wrong_message=message)


def test_compare_replaces_the_tolerance_where_numbers_must_only_move():
    x = torch.arange(6, dtype=torch.float64).reshape(2, 3)
    table = [FormInput("x (2, 3)", (x,))]

    def nearly(t):  # within close_to's tolerance, but not the same numbers
        return t.T + 1e-9

    check_forms(nearly, table, lambda t: t.T)
    with pytest.raises(AssertionError, match=r"is wrong for x \(2, 3\)"):
        check_forms(nearly, table, lambda t: t.T, compare=torch.equal)
