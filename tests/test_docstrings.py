"""Every public docstring of ``tf_tutorial`` opens with a one-line Chinese summary.

The book shows the package's real source with ``show()``, docstrings included, so a reader of the
Chinese book meets these docstrings. The convention (issue 12): the first line of every module,
public class, public function and public method docstring is a short sentence in Chinese; English
details may follow after a blank line.
"""
import importlib
import inspect
import pkgutil
import re
import types

import pytest
import torch

import tf_tutorial

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CODE = re.compile(r"``.*?``|(:\w+:)?`[^`]*`")       # ``x``, :func:`f`, `x`
_WORD = re.compile(r"[A-Za-z]{2,}")                # an English word (not a symbol like B)


def chinese_line(line: str) -> bool:
    """A line that reads as Chinese: outside code, at least as many Chinese characters as
    English words. An English sentence that quotes a Chinese word or two ('English verb group;
    Chinese aspect words (了)') is not a Chinese summary; '把 (B, L, D) 拆成 H 个头' and
    'Transformer 的超参数' are. A rough rule: a short example ('S gave P X → S 给 了 P X.')
    can pass it, so such a line still needs a Chinese sentence before it by convention."""
    prose = _CODE.sub("", line)
    return len(_CJK.findall(prose)) >= max(1, len(_WORD.findall(prose)))


def _public(name: str) -> bool:
    return not name.startswith("_")


def _function_of(member):
    """The plain function behind a method, staticmethod, classmethod or property (else None)."""
    if isinstance(member, (staticmethod, classmethod)):
        member = member.__func__
    if isinstance(member, property):
        member = member.fget
    member = inspect.unwrap(member) if callable(member) else member
    return member if inspect.isfunction(member) else None


def _class_members(cls, prefix: str):
    """Public methods and nested classes written in ``cls`` itself (not inherited)."""
    for name, member in vars(cls).items():
        if not _public(name):
            continue
        qualname = f"{prefix}.{name}"
        if inspect.isclass(member) and member.__module__ == cls.__module__:
            yield qualname, member
            yield from _class_members(member, qualname)
            continue
        function = _function_of(member)
        if function is not None and function.__module__ == cls.__module__:
            yield qualname, member if isinstance(member, property) else function


def public_objects(module: types.ModuleType):
    """(qualified name, object) for the module and each public object defined in it."""
    yield module.__name__, module
    for name, member in vars(module).items():
        if not _public(name) or getattr(member, "__module__", None) != module.__name__:
            continue
        qualname = f"{module.__name__}.{name}"
        if inspect.isclass(member):
            yield qualname, member
            yield from _class_members(member, qualname)
        elif inspect.isfunction(inspect.unwrap(member)):
            yield qualname, member


def offenders(objects) -> list[str]:
    """Names whose docstring is missing or whose first line does not read as Chinese."""
    bad = []
    for qualname, obj in objects:
        # the object's own docstring: an undocumented ``forward`` must not pass on nn.Module's
        doc = vars(obj).get("__doc__") if inspect.isclass(obj) else obj.__doc__
        first = doc.strip().splitlines()[0] if doc and doc.strip() else ""
        if not chinese_line(first):
            bad.append(qualname)
    return bad


def all_modules():
    yield tf_tutorial
    for info in pkgutil.walk_packages(tf_tutorial.__path__, prefix="tf_tutorial."):
        if info.name.rsplit(".", 1)[-1] != "__main__":     # importing it would run a command
            yield importlib.import_module(info.name)


def test_every_public_docstring_opens_with_a_chinese_line():
    bad = [name for module in all_modules() for name in offenders(public_objects(module))]
    assert not bad, ("these docstrings are missing or do not open with a one-line Chinese "
                     "summary:\n  " + "\n  ".join(bad))


def test_the_walk_reaches_every_subpackage_and_the_methods():
    names = {module.__name__ for module in all_modules()}
    for expected in ("tf_tutorial.model", "tf_tutorial.experiments.recall", "tf_tutorial.corpus.data",
                     "tf_tutorial.timing.clock", "tf_tutorial.book.source"):
        assert expected in names
    from tf_tutorial import rnn
    found = dict(public_objects(rnn))
    assert "tf_tutorial.rnn.ElmanRNN.forward" in found
    assert not any(name.split(".")[-1].startswith("_") for name in found if name != "tf_tutorial.rnn")


def test_the_check_catches_an_english_only_docstring():
    module = types.ModuleType("made_up")
    module.__doc__ = "模块的中文摘要。"

    class EnglishOnly:
        """An English summary only."""

        def forward(self):
            """Also English."""

        def fine(self):
            """中文摘要。

            English details may follow.
            """

        def _private(self):
            """Private names are not checked."""

    def undocumented():
        pass

    class Layer(torch.nn.Module):
        """中文摘要。"""

        def forward(self, x):    # no docstring: nn.Module's English one must not count
            return x

    def good():
        """这个函数有中文摘要。"""

    def quotes_chinese():
        """English verb group; Chinese aspect words (了) and the verb."""

    for obj in (EnglishOnly, undocumented, good, Layer, quotes_chinese):
        obj.__module__ = module.__name__
        setattr(module, obj.__name__, obj)
    for method in (EnglishOnly.forward, EnglishOnly.fine, EnglishOnly._private, Layer.forward):
        method.__module__ = module.__name__
    assert offenders(public_objects(module)) == [
        "made_up.EnglishOnly", "made_up.EnglishOnly.forward", "made_up.undocumented",
        "made_up.Layer.forward", "made_up.quotes_chinese"]
    module.__doc__ = "English module docstring."
    assert offenders(public_objects(module))[0] == "made_up"


@pytest.mark.parametrize("line, chinese", [
    ("English verb group; Chinese aspect/negation words and the verb (with 了", False),
    ("Yes/no (… 吗), what/who as object or subject, where, how many: the", False),
    ("1 ≤ n < 10⁹ in Chinese numerals, grouped by 万 and 亿 with the 零 rules.", False),
    ("把 (B, L, D) 拆成 H 个头：(B, H, L, d_k)。", True),
    ("Transformer 的超参数，默认值就是论文的 base 模型。", True),
    ("把 ``nn.LayerNorm`` 换成本书的 ``LayerNorm``。", True),
    ("", False),
])
def test_a_chinese_line_is_more_than_a_few_quoted_characters(line, chinese):
    assert chinese_line(line) is chinese
