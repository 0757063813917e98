"""Numeric option types the subcommands share: checked when the command line is parsed.

A value outside its range is refused by argparse in one line naming the option (exit 2), before
anything runs: `--budget 0` is not "the default", `--workers -3` is not one worker.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def whole_number(minimum: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    parse.__name__ = f"whole number >= {minimum}"  # what argparse names the type in its message
    return parse


def seconds(minimum: float = 0.0, above: bool = False) -> Callable[[str], float]:
    """An argparse type: a number of seconds (or a share), at least `minimum` (above it with `above`)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if value != value or value < minimum or (above and value == minimum):  # NaN, or out of range
            raise argparse.ArgumentTypeError(
                f"must be {'above' if above else 'at least'} {minimum:g}, got {text}"
            )
        return value

    parse.__name__ = "number"
    return parse


POSITIVE = whole_number(1)  # workers, budgets, repeats, widths, lengths, jobs
NON_NEGATIVE = whole_number(0)  # steps (0: the warm start alone), intervals (0: never)
