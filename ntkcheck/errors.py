"""Exceptions and warnings raised by ntkcheck.

Every error raised on bad user input is a :class:`ValueError` subclass whose message
says what was received and what was expected. The CLI prints the message as one line
on stderr and exits with status 2.
"""

from __future__ import annotations


class NtkcheckError(ValueError):
    """Base class of the errors ntkcheck raises on bad input."""


class InputError(NtkcheckError):
    """Token data that cannot be used: NaN/inf, empty samples, mismatched dimensions."""


class DomainError(NtkcheckError):
    """A parameter outside the domain of a family or method (negative radius, ...)."""


class PrecisionError(NtkcheckError):
    """A working precision too low to mean anything, or a result that overflowed it."""


class TimeBudgetError(NtkcheckError):
    """A request that cannot be answered within its time budget: the float64 Gram alone would not
    finish in it (the message gives the estimate and the option to raise)."""


class NtkcheckWarning(UserWarning):
    """Warnings about results that are valid but easy to misread (e.g. rank-deficient Gram)."""


__all__ = ["NtkcheckError", "InputError", "DomainError", "PrecisionError", "TimeBudgetError", "NtkcheckWarning"]
