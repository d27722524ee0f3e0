import pytest

from tf_tutorial.book.notebook import check, glue, sci


def test_sci():
    assert sci(2.94e8) == "2.9×10⁸"
    assert sci(3.5e-9, digits=2) == "3.50×10⁻⁹"
    assert sci(7000) == "7.0×10³"


def test_check_fails_loudly_with_the_claim():
    check(True, "fine")
    with pytest.raises(AssertionError, match="the chapter claims: x < 1"):
        check(False, "x < 1")


def test_glue_hands_the_value_to_myst_nb_without_displaying_it(monkeypatch):
    import sys
    import types

    calls = []
    fake = types.ModuleType("myst_nb")
    fake.glue = lambda name, value, display=True: calls.append((name, value, display))
    monkeypatch.setitem(sys.modules, "myst_nb", fake)
    assert glue("speedup", "3.2") is None  # nothing returned, so nothing echoed by the cell
    assert calls == [("speedup", "3.2", False)]


def test_glue_without_myst_nb_is_a_silent_no_op(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "myst_nb", None)  # as in Colab: importing it fails
    assert glue("speedup", "3.2") is None
