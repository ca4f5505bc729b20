"""CSV cells a spreadsheet shows and never runs (CSV injection, OWASP's advice): every CSV
simeval writes (results and dataset exports) passes its text cells through
``neutralise_formula``, and a dataset CSV read back passes them through ``restore_formula``,
so an export imports as the very texts it was made from.

>>> neutralise_formula("=HYPERLINK(1)"), neutralise_formula("Paris")
("'=HYPERLINK(1)", 'Paris')
>>> all(restore_formula(neutralise_formula(t)) == t for t in ["=1", "'=1", "''+2", "'x", "-"])
True
"""

from __future__ import annotations

# A spreadsheet runs a cell that starts with one of these as a formula
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise_formula(text: str) -> str:
    """``text`` with a leading ``'`` when it starts with a formula prefix (or with quotes and
    then one, so that ``restore_formula`` gives back exactly ``text``)."""
    return "'" + text if text.lstrip("'").startswith(FORMULA_PREFIXES) else text


def restore_formula(text: str) -> str:
    """The text ``neutralise_formula`` was given (one leading ``'`` off a neutralised cell)."""
    if text.startswith("'") and text.lstrip("'").startswith(FORMULA_PREFIXES):
        return text[1:]
    return text
