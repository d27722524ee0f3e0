import inspect

import pytest
from IPython.display import Code

import tf_tutorial
from tf_tutorial import show
from tf_tutorial.rnn import ElmanRNN, jacobian_norms
from tf_tutorial.book.source import source_of


def test_show_returns_the_real_source_as_highlighted_code():
    shown = show(ElmanRNN)
    assert isinstance(shown, Code)
    assert shown.data == inspect.getsource(ElmanRNN)
    html = shown._repr_html_()
    assert "ElmanRNN" in html and "<span" in html  # pygments highlighting, not plain text


def test_show_dedents_methods_and_accepts_functions_and_modules():
    method = source_of(ElmanRNN.forward)
    assert method.startswith("def forward(self")
    assert source_of(jacobian_norms).startswith("def jacobian_norms(")
    assert "def show(" in source_of(tf_tutorial.book.source)


def test_show_of_builtin_names_it_and_says_why():
    with pytest.raises(TypeError, match=r"got builtin_function_or_method 'len', which is implemented in C"):
        show(len)


def test_show_of_a_value():
    with pytest.raises(TypeError, match=r"expected a class, function.*but got an object of type int: 3"):
        show(3)


def test_show_of_code_without_a_source_file():
    namespace = {}
    exec("def made_up():\n    return 1\n", namespace)
    with pytest.raises(ValueError, match=r"could not find the source of 'made_up'"):
        show(namespace["made_up"])


def test_show_refuses_lines_that_do_not_define_the_object():
    """Python 3.13 keeps the text of ``python -c`` and of exec() under one name, "<string>", so
    getsource could hand back another piece of code's lines; show() must not display them."""
    import linecache
    name = "<made-up-cell>"
    namespace = {}
    exec(compile("def made_up():\n    return 1\n", name, "exec"), namespace)
    linecache.cache[name] = (12, None, ["x = 1\n", "y = 2\n"], name)   # other code, same name
    try:
        assert inspect.getsource(namespace["made_up"]) == "x = 1\n"    # what Python hands back
        with pytest.raises(ValueError, match=r"of 'made_up': the lines Python found for it do not "):
            show(namespace["made_up"])
    finally:
        del linecache.cache[name]


def test_show_of_several_objects_shows_each_in_order():
    from tf_tutorial.rnn import ElmanRNN as first, jacobian_norms as second
    shown = show(first, second)
    assert shown.data.index("class ElmanRNN") < shown.data.index("def jacobian_norms(")
    assert shown.data == inspect.getsource(first).rstrip("\n") + "\n\n" + inspect.getsource(second)
    with pytest.raises(TypeError, match="expected at least one object"):
        show()
    with pytest.raises(TypeError, match="but got an object of type int: 3"):
        show(first, 3)
