"""在笔记本里展示对象真实的、经过测试的源码（书里从不粘贴副本）。

Show the real, tested source of an object in a notebook (the book never pastes a copy).
"""
from __future__ import annotations

import inspect
import re
import textwrap

_SHOWABLE = "a class, function, method or module written in Python"


def source_of(obj) -> str:
    """返回 ``obj`` 去掉公共缩进后的 Python 源码。

    Return the dedented Python source of ``obj``.

    Raises:
        TypeError: ``obj`` is not a class, function, method or module (e.g. ``3``), or it is
            implemented in C (e.g. ``len``), so it has no Python source.
        ValueError: ``obj`` is of the right kind but its source file cannot be read (it was
            defined in an interactive session or in ``exec``).
    """
    target = inspect.unwrap(obj) if callable(obj) else obj
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    kind_ok = (inspect.isclass(target) or inspect.isfunction(target)
               or inspect.ismethod(target) or inspect.ismodule(target))
    if not kind_ok:
        what = type(obj).__name__
        if inspect.isbuiltin(target) or inspect.ismethoddescriptor(target):
            raise TypeError(f"show() expected {_SHOWABLE}, but got {what} {name!r}, "
                            "which is implemented in C and has no Python source")
        raise TypeError(f"show() expected {_SHOWABLE}, but got an object of type {what}: "
                        f"{obj!r:.80}")
    no_file = ("Objects defined in an interactive session, in exec() or in C have no source "
               "file")
    try:
        text = inspect.getsource(target)
    except (OSError, TypeError) as err:
        raise ValueError(f"show() could not find the source of {name!r}: {err}. "
                         f"{no_file}") from err
    # Python 3.13 keeps the text of `python -c` and of other exec() calls under the same
    # name "<string>", so for code from exec() getsource can return some other code's lines.
    defined = target.__func__ if inspect.ismethod(target) else target
    if not inspect.ismodule(defined) and defined.__name__ != "<lambda>":
        head = re.search(r"^[ \t]*(?:async[ \t]+def|def|class)[ \t]+(\w+)", text, re.M)
        if head is None or head.group(1) != defined.__name__:
            raise ValueError(f"show() could not find the source of {name!r}: the lines Python "
                             f"found for it do not define it. {no_file}")
    return textwrap.dedent(text)


def show(*objs):
    """把一个或几个对象的源码显示为高亮的 Python 代码（Jupyter、Colab 和本书里都可用）。

    Display the source of one or more objects as highlighted Python (Jupyter, Colab, the book).

    Args:
        *objs: classes, functions, methods or modules of this package (or any Python code);
            several are shown one after another, in one block: ``show(KVCache, decode_step)``.

    Returns:
        ``IPython.display.Code``: shown as highlighted code when it is the last value of a cell.
    """
    from IPython.display import Code

    if not objs:
        raise TypeError(f"show() expected at least one object: {_SHOWABLE}")
    return Code("\n\n".join(source_of(obj).rstrip("\n") for obj in objs) + "\n", language="python")
