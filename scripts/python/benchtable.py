"""The bench scripts' table arithmetic, in one place: medians of runs,
ratios taken within each run with their spread, memory against a bound.

    import sys; sys.path.insert(0, "scripts/python")
    from benchtable import med, ratio, bound, spread, header

Every ratio is a list of per-run ratios (x[i] / y[i], the two sides of run
i measured one after the other), reported as "median (min-max)"; a spread
that crosses 1.0 says "no difference".
"""
from __future__ import annotations

import statistics
from typing import Iterable, Sequence

med = statistics.median


def ratios(a: Sequence[float], b: Sequence[float]) -> list:
    """a[i] / b[i] for each run i."""
    return [x / y for x, y in zip(a, b)]


def ratio(a: Sequence[float], b: Sequence[float]) -> str:
    """The median ratio of a to b and its spread; "no difference" where
    the spread crosses 1.0."""
    r = ratios(a, b)
    text = f"{med(r):.2f}x ({min(r):.2f}-{max(r):.2f})"
    return text + ": no difference" if min(r) <= 1.0 <= max(r) else text


def bound(peak: Sequence[float], limit: Sequence[float]) -> str:
    """Memory against its bound: the highest of the runs matters."""
    r = ratios(peak, limit)
    return f"{med(r):.2f}x (highest {max(r):.2f}x)"


def spread(xs: Iterable[float], fmt: str = ".2f") -> str:
    """min-max of a measure's runs."""
    xs = list(xs)
    return f"{min(xs):{fmt}}-{max(xs):{fmt}}"


def header(title: str, columns: Sequence[str] = ("measure", "tsock", "baseline", "ratio")) -> str:
    """A table's title line (none if "") and head."""
    head = f"| {' | '.join(columns)} |\n|{'---|' * len(columns)}"
    return f"{title}\n\n{head}" if title else head
