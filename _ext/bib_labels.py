"""Sphinx extension: the reference list (appendix D) labels each entry the way the text cites it.

The chapters cite by author and year (``bibtex_reference_style: author_year``): "Hochreiter and
Schmidhuber, 1997", "Touvron et al., 2023a". pybtex's default list style labels the same entry
[HS97], which a reader cannot match with the text. The style registered here, ``book_author_year``,
labels each entry with the text of its citation (one author's surname, two joined by "and", three
or more as the first one's "et al.", then the year) and sorts the list the way a reader looks a
citation up: by the first author's surname (an organisation such as Google Brain under G), one
author before two before "et al.", then by the label, so Vaswani et al., 2017 comes before 2018.
Two works whose citation would read alike get letters in their ``year`` fields in
``references.bib`` (2023a, 2023b), so the text tells them apart as well; ``tests/test_book.py``
checks that no two labels coincide.
"""
from __future__ import annotations

from pybtex.plugin import register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting import BaseSortingStyle

STYLE = "book_author_year"


def _surname(person) -> str:
    """"von Neumann", "Schmidhuber", "OpenAI": LaTeX braces and accents resolved."""
    return Text.from_latex(" ".join(person.prelast_names + person.last_names)).render_as("text")


def _surnames(entry) -> list[str]:
    people = entry.persons.get("author") or entry.persons.get("editor")
    if not people:
        raise ValueError(f"references.bib: entry {entry.key!r} has no author or editor")
    return [_surname(p) for p in people]


def citation_label(entry) -> str:
    """The text an author-year citation of ``entry`` reads, e.g. "Kingma and Ba, 2015"."""
    names = _surnames(entry)
    if len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields['year']}"


class AuthorYearLabels(BaseLabelStyle):
    """Labels in the citations' own words (see the module's docstring)."""

    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            yield citation_label(entry)


class LabelOrder(BaseSortingStyle):
    """First author, then how many authors (1, 2, more), then the label itself."""

    def sorting_key(self, entry):
        names = _surnames(entry)
        return names[0].lower(), min(len(names), 3), citation_label(entry).lower()


class AuthorYearStyle(PlainStyle):
    """pybtex's plain style with author-year labels, sorted as they read."""

    default_label_style = STYLE
    default_sorting_style = STYLE


def setup(app):
    register_plugin("pybtex.style.labels", STYLE, AuthorYearLabels)
    register_plugin("pybtex.style.sorting", STYLE, LabelOrder)
    register_plugin("pybtex.style.formatting", STYLE, AuthorYearStyle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
