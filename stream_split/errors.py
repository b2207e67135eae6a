"""The errors stream-split raises: one base, ``StreamSplitError``, and a class per kind.

- ``TraceInputError``: the trace cannot be read (missing, not a trace, corrupt); its subclasses
  say where it was seen: ``TraceEventError`` (an event lacks a field every event must have),
  ``RanksError`` (traces that cannot be split as the ranks of one job).
- ``OutputError``: the output folder cannot be used.
- ``OptionError``: an option has a bad value (also a ``ValueError``); ``OptionHadNoEffect``:
  an option the run could not honour (``--iterations`` that matches nothing...).
- ``PlotUnavailable``: a plot was asked for without matplotlib.
- ``OptionWarning`` (a ``UserWarning``, not an error): an option honoured only in part.
- ``ReadInterrupted``: a stop was requested while the reader waited for bytes (control flow
  inside a run, never seen by a caller of the library).

Every message is one line. A message that names an option is written for the reader who
gave it: ``str(error)`` in library terms (``overwrite=True``), ``error.cli_message`` in the
command line's (``--overwrite``); ``worded`` builds both from one sentence. No I/O, no
imports: every layer (the core too) may raise these.
"""
from __future__ import annotations

from typing import Callable

__all__ = ["StreamSplitError", "TraceInputError", "TraceEventError", "RanksError",
           "OutputError", "OptionError", "OptionHadNoEffect", "PlotUnavailable",
           "ReadInterrupted", "WriteInterrupted", "OptionWarning", "as_keyword", "as_flag"]

#: ``spell(name, value)``: how an option given this value is written for one reader.
Spelling = Callable[..., str]


def as_keyword(name: str, value=True) -> str:
    """An option as a library caller writes it: ``overwrite=True``, ``iterations='0,3'``."""
    return f"{name}={value!r}"


def as_flag(name: str, value=True) -> str:
    """An option as the command line writes it: ``--overwrite``, ``--iterations 0,3``."""
    flag = "--" + name.replace("_", "-")
    return flag if value is True else f"{flag} {value}"


class _Worded:
    """A message for two readers: ``str(self)`` in library terms, ``cli_message`` in the
    command line's (the default: the message itself, when it names no option)."""

    def __init__(self, message: str, *, cli_message: str | None = None):
        super().__init__(message)
        self.cli_message = message if cli_message is None else cli_message

    @classmethod
    def worded(cls, say: Callable[[Spelling], str]):
        """The instance whose message is ``say(spell)``, with options spelt by
        ``as_keyword`` for the library and by ``as_flag`` for the command line."""
        return cls(say(as_keyword), cli_message=say(as_flag))


class StreamSplitError(_Worded, Exception):
    """Base of every error stream-split raises; the message is one line for the user."""


class OptionWarning(_Worded, UserWarning):
    """An option the run honoured only in part (``level`` where there is no such level)."""


class TraceInputError(StreamSplitError):
    """The trace cannot be read: missing, unreadable, not a trace, corrupt."""


class TraceEventError(TraceInputError, ValueError):
    """An event lacks a field every trace event must have."""


class RanksError(TraceInputError):
    """The traces cannot be split as the ranks of one job."""


class OutputError(StreamSplitError):
    """The output folder (or file) cannot be used."""


class OptionError(StreamSplitError, ValueError):
    """An option has a value it cannot take (a string where a bool is due, an unknown name)."""


class OptionHadNoEffect(OptionError):
    """An option the run could not honour (it would have done nothing)."""


class PlotUnavailable(StreamSplitError, RuntimeError):
    """A plot was asked for and matplotlib is not installed."""


class WriteInterrupted(StreamSplitError):
    """A stop was requested while the pieces were assembled: the run ends with nothing
    written (its staging folder is removed), at once rather than after every piece."""

    DEFAULT = "interrupted while the pieces were written: nothing written"

    def __init__(self, message: str = DEFAULT, **kwargs):
        super().__init__(message, **kwargs)


class ReadInterrupted(StreamSplitError):
    """A stop was requested while the reader waited for bytes."""

    #: Its message, and the ``stop_reason`` of a run a signal stopped.
    DEFAULT = "interrupted before the end of the input"

    def __init__(self, message: str = DEFAULT, **kwargs):
        super().__init__(message, **kwargs)
