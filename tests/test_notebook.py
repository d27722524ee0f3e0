import pytest

from tf_tutorial.notebook import check, glue, sci


def test_sci():
    assert sci(2.94e8) == "2.9×10⁸"
    assert sci(3.5e-9, digits=2) == "3.50×10⁻⁹"
    assert sci(7000) == "7.0×10³"


def test_check_fails_loudly_with_the_claim():
    check(True, "fine")
    with pytest.raises(AssertionError, match="the chapter claims: x < 1"):
        check(False, "x < 1")


def test_glue_outside_a_book_build_returns_nothing():
    assert glue("name", 3) is None
