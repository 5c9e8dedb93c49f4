"""The one error type for bad user input.

The CLI turns an :class:`InputError` into a one-line message and exit code 2;
the message names the file, the field and the index at fault.
"""

from __future__ import annotations


class InputError(ValueError):
    """Malformed or infeasible input; the message is a complete one-line diagnosis."""
