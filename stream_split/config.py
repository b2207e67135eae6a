"""``SplitConfig``: everything a split into a folder takes, as one typed, frozen value.

The core's ``SplitOptions`` (how to find the iterations) sits inside it, beside what is
written (which iterations, how pieces are named and compressed, a plot) and how the folder is
used (``overwrite``). The command line builds one from its parsed arguments, the library from
its keywords (``SplitConfig.from_keywords``, strict: ``overwrite="no"`` is an error, not a true
value); neither builds it from the other. Every value is checked here, once: a bad one is an
``OptionError`` naming it in library terms.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from stream_split.core import SplitOptions
from stream_split.core.serving import PHASES
from stream_split.decode import MAX_EVENT_BYTES
from stream_split.errors import OptionError
from stream_split.selection import IterationChoice, parse_selection, parse_steps
from stream_split.write import LAYOUT_HTA, LAYOUTS, NAME_BY


def _require_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise OptionError(f"{name} must be True or False, not {value!r}")


def _require_int(name: str, value, lo: int, hi: int | None = None) -> None:
    if (not isinstance(value, int) or isinstance(value, bool) or value < lo
            or (hi is not None and value > hi)):
        bounds = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise OptionError(f"{name} must be an integer {bounds}, not {value!r}")


@dataclass(frozen=True)
class SplitConfig:
    """What ``folder.split_to_folder`` does with one trace."""
    #: How to find the iterations (the core's options); pieces always keep the events.
    options: SplitOptions = field(default_factory=SplitOptions)
    #: Replace a non-empty output folder.
    overwrite: bool = False
    #: Which iterations get a piece (all are counted in the manifest).
    choice: IterationChoice = field(default_factory=IterationChoice)
    #: ``"index"`` or ``"step"`` (``NAME_BY``).
    name_by: str = "index"
    #: gzip the pieces (``.json.gz``), at ``compresslevel`` (0-9); else plain ``.json``.
    compress: bool = True
    compresslevel: int = 1
    #: Also draw ``iterations.png`` into the folder (needs matplotlib).
    plot: bool = False
    #: ``"flat"`` (pieces beside the manifest) or ``"hta"``: ``iteration_<k>/rank<r>.json.gz``
    #: for Holistic Trace Analysis (``LAYOUTS``; ``write.PieceWriter``).
    layout: str = "flat"
    #: The rank of this trace in a split of several ranks (``ranks.py`` sets it), for the
    #: ``hta`` layout: its pieces go into the job's folder (the parent of this trace's),
    #: named by this rank unless the trace's header names one. None: a trace on its own.
    rank: int | None = None
    #: Longest event (and run of header keys) read, in bytes: what the reader may hold.
    max_event_bytes: int = MAX_EVENT_BYTES
    #: Processes that split one large trace file (``parallel.py``; the output is the same
    #: as with 1); None: 1, one stream: two workers were not measured faster than one on a
    #: 2-core machine (the one engine is ~80 % of the work). A pipe, a followed file, a small file
    #: and a trace in a folder of the caller's (``in_place``) are read as one stream.
    workers: int | None = None
    #: Also make the per-iteration table (``summary.build_table``'s, with this ``limit``) in
    #: the pass that writes the manifest: ``SplitResult.table``. None: no table.
    table_rows: int | None = None

    def __post_init__(self):
        if not isinstance(self.options, SplitOptions):
            raise OptionError(f"options must be a SplitOptions, not {self.options!r}")
        if not isinstance(self.choice, IterationChoice):
            raise OptionError(f"choice must be an IterationChoice, not {self.choice!r}")
        for name in ("overwrite", "compress", "plot"):
            _require_bool(name, getattr(self, name))
        _require_int("compresslevel", self.compresslevel, 0, 9)
        _require_int("max_event_bytes", self.max_event_bytes, 1)
        if self.workers is not None:
            _require_int("workers", self.workers, 1)
        if self.table_rows is not None:
            _require_int("table_rows", self.table_rows, 1)
        if self.name_by not in NAME_BY:
            raise OptionError(f"name_by must be one of {', '.join(NAME_BY)}, "
                              f"not {self.name_by!r}")
        if self.layout not in LAYOUTS:
            raise OptionError(f"layout must be one of {', '.join(LAYOUTS)}, "
                              f"not {self.layout!r}")
        if self.layout == LAYOUT_HTA and self.name_by != "index":
            raise OptionError("layout='hta' names pieces by iteration index "
                              "(iteration_<k>/rank<r>): name_by='step' does not apply")

    @property
    def writer_options(self) -> dict:
        """The ``write.PieceWriter`` keywords of this configuration."""
        return {"select": self.choice.early, "compress": self.compress,
                "compresslevel": self.compresslevel, "name_by": self.name_by,
                "layout": self.layout, "rank": self.rank}

    @classmethod
    def from_keywords(cls, *, detector: str = "auto", level: int | None = None,
                      pending_limit: int | None = None, overwrite: bool = False,
                      iterations=None, steps: str | None = None, name_by: str = "index",
                      compress: bool = True, compresslevel: int = 1,
                      plot: bool = False, layout: str = "flat",
                      max_event_bytes: int = MAX_EVENT_BYTES, phase: str | None = None,
                      steady: int | None = None,
                      workers: int | None = None) -> "SplitConfig":
        """The configuration of ``stream_split.split``'s keywords, each checked strictly
        (see ``stream_split.library.split`` for their meaning)."""
        if level is not None:
            _require_int("level", level, 0)
        if pending_limit is not None:
            _require_int("pending_limit", pending_limit, 1)
        if steps is not None and not isinstance(steps, str):
            raise OptionError(f"steps must be a string like '15-17' or None, not {steps!r}")
        try:
            options = SplitOptions(
                detector=detector, level=level,
                **({} if pending_limit is None else {"pending_limit": pending_limit}))
            iterations, iterations_text = _selection(iterations)
            if phase is not None and phase not in PHASES:
                raise OptionError(f"phase must be one of {', '.join(PHASES)} or None, "
                                  f"not {phase!r}")
            if steady is not None:
                _require_int("steady", steady, 1)
            choice = IterationChoice(iterations, iterations_text, parse_steps(steps), steps,
                                     phase, steady)
        except OptionError:
            raise
        except ValueError as e:  # SplitOptions' and the selection parsers' own checks
            raise OptionError(str(e)) from None
        return cls(options=options, overwrite=overwrite, choice=choice, name_by=name_by,
                   compress=compress, compresslevel=compresslevel, plot=plot, layout=layout,
                   max_event_bytes=max_event_bytes, workers=workers)


def _selection(iterations):
    """(predicate or "steady" or None, its text for messages) of the ``iterations`` keyword:
    None, a string like ``"0,3,10-19"`` or ``"steady"``, or a collection of indices."""
    if iterations is None:
        return None, None
    if isinstance(iterations, str):
        return parse_selection(iterations), iterations
    try:
        chosen = set(iterations)
    except TypeError:
        chosen = None
    if chosen is None or not all(isinstance(i, int) and not isinstance(i, bool)
                                 for i in chosen):
        raise OptionError(f"iterations must be None, a list of indices, a string like "
                          f"'0,3,10-19' or 'steady', not {iterations!r}")
    return chosen.__contains__, ",".join(map(str, sorted(chosen)))
