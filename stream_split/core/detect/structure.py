"""Detect stage, by structure: find the repeating unit of work without trusting annotations.

This module is the mode machine: it decides where and when to look (online), moves between
the modes, and hands each observation to the part that handles it in the current mode. The
parts: ``skeleton.Skeletons`` keeps each thread's call tree (each op a symbol, its name with
digits folded) and credits launches, GPU work and Python frames to its ops; on a row of
sibling ops ``search.find_unit`` answers which unit repeats and how alike its instances
are; ``verdict.py`` says whether it is an iteration (and can be believed online);
``matcher.py`` streams boundaries once it is; ``close.py`` concludes when the input ends;
``rules.Rules`` holds every threshold. The engine reports cycles that took another path and
do almost no GPU work as ``idle`` (``search.cycle_kinds``).

Modes (``Mode``; every move between them is in ``TRANSITIONS``): ``LEARNING`` builds the
skeleton and looks for the unit at the top of the main thread as it grows (``_try_online``),
and among the children of a chain of dominant containers there (``_try_container``: failure
mode 3 before its minor roots); ``STEPS`` once ``ProfilerStep#N`` repeats; ``MATCHING`` once
the unit is confirmed online (``matcher.RootMatcher``: the unit's first op is a boundary at
once; the anchor confirms it, or a revision moves or retracts it); ``SECTION_END`` once the
loop thread's CPU section has ended in a Kineto file (``section.py``) and the header says
neither GPU work nor Python frames follow: the close decision is made right there.
Otherwise the online confirmation (``_confirm``: evidence that needs no GPU work) is tried
once more on the whole section once its frames are read; what it cannot confirm waits for
close (``close.decide``), and ``evidence["waited"]`` says why. Both decision paths apply one
iteration test (``verdict.iteration_test``), find where the last instance ends one way
(``search.end_of_last``) and report the same evidence (``evidence.py``).

``ProfilerStep#N`` spans are evidence like any other annotation: regular ones (two or more
numbered in a row, none overlapping the one before, covering most of their time:
``verdict.regular_steps``) are the unit whatever their nesting (a wrapper around them, a span
crossing them, a file that writes them after their children), and are emitted online from the
second step on; a single one is a container; irregular ones leave the decision to the
structure, and ``evidence["steps_not_trusted"]`` says why. With ``use_annotations=False`` they
are transparent (their children are read in their place).

Memory: what the skeleton keeps is bounded (``skeleton.Skeletons``) and dropped once the unit
is decided; a loop never confirmed online keeps its main thread's top level to the end, but of
its ops of names of their own only the latest ``MemoryRules.single_roots`` (about 370 bytes
each: node, times, name, symbol and count; ``Skeletons.forget_singles``), and of all its ops
at most ``MemoryRules.max_roots``: there the close decision's search is made at once, and
what it finds is believed, or the oldest ops are forgotten (``_at_the_bound``). The online
tries keep the last search of the rows they try (``search.RecentMemos``), and the last few
answers of whether a unit's first instance repeats a sub-unit (``verdict.InnerAnswers``).

Time: the online tries search only as much as the ops read pay for (``search.SearchBudget``),
and not at all a top level where no unit found could be believed
(``skeleton.RootCounts.may_confirm``: no loop marker, no three instances that could be
exact); a try put off is retried at a later op, and what they never afford, ``close.decide``
searches once, whole. Where only exact instances could confirm (no input fetch on the row,
nor a blocking sync with a loop marker: ``verdict.exact_needed``), a short row of small ops
is not searched (``verdict.exact_possible``: no third of it holds the ops a whole piece of
work repeats), a search with no candidate of three exact instances (or none whose
instances are that wide) ends before it chooses and opens a unit (``search.find_unit``'s
``least_exact`` and ``wide``), and one whose unit would have fewer ends before its opening
(``search._may_end_exact``). Of the 118 tries on the 10x stripped resnet tile: 20 (the top
of its first section: ``zero_grad``, ``forward``, ``step``), 71 (among them the first ops
of its third step, read one by one, and 4 more on that first top level) and 10. The tries
there cost 510 M instructions (730 M before session 32: callgrind, the detector's calls
replayed alone), the 56 k ops read while learning 425 M besides (471 M).
"""
from __future__ import annotations

import enum
from dataclasses import replace
from functools import cache, partial

from stream_split.core.detect.base import (
    DetectorResult, FoundBoundary, TraceFacts, found_boundary)
from stream_split.core.detect.close import (
    LoopThread, decide, from_matcher, from_steps, leading_threads, loop_thread, no_loop,
    section_openers)
from stream_split.core.detect.evidence import online_evidence
from stream_split.core.detect.matcher import RootMatcher, anchor_after_alike, takes_anchor
from stream_split.core.detect.rules import REPEAT, RULES
from stream_split.core.detect.search import RecentMemos, SearchBudget, Unit, find_unit
from stream_split.core.detect.section import (
    DECIDED_AT_SECTION_END, WAITED_FOR_FRAMES, WAITED_FOR_GPU, WHY_AT_SECTION_END, LoopSection)
from stream_split.core.detect.skeleton import (
    NEW_FAMILY_MARKS, SKIPPED, Node, RowExtremes, Skeletons, ThreadSkeleton, after_containers,
    before_containers, top_level_op)
from stream_split.core.detect.verdict import (
    InnerAnswers, confirmed_online, dominant, exact_needed, exact_possible, iteration_test,
    regular_steps)
from stream_split.core.stack import ThreadStacks
from stream_split.native import NATIVE as _native  # (None: the Python fallbacks)
from stream_split.trace_format import PROFILER_STEP_PREFIX, is_main_thread

#: ``Rules.min_instances`` and ``OnlineRules.eager_tries``, read once: the top level's test
#: for a moment to try (``StructureDetector._observe_learning``) asks them at each op.
_MIN_INSTANCES, _EAGER_TRIES = RULES.min_instances, RULES.online.eager_tries
#: What a top-level op is read with besides itself (``top_level_op``'s last arguments: as
#: ``add_root`` counts it, and a new family's loop-marker test).
_ROOT_RULES = (_MIN_INSTANCES, REPEAT, NEW_FAMILY_MARKS)


class Mode(enum.Enum):
    """The detector's modes (see the module docstring)."""
    #: Building the skeleton and looking for the unit online; at close, decided from the whole.
    LEARNING = "learning"
    #: ``ProfilerStep#N`` repeats at the top of a thread: each new one is a boundary at once.
    STEPS = "steps"
    #: The unit was confirmed on a row of the loop thread: ``RootMatcher`` reads each new op
    #: of that row (its first op is a boundary at once).
    MATCHING = "matching"
    #: The close decision, made at the end of the loop thread's CPU section (Kineto's
    #: layout) because the header says that no evidence it uses follows.
    SECTION_END = "section end"


class Event(enum.Enum):
    """What moves the detector from one mode to another."""
    #: A second ``ProfilerStep#N`` at the top of a thread (``OnlineRules.min_steps``).
    STEPS_REPEAT = "steps repeat"
    #: The unit was confirmed online (``verdict.confirmed_online``).
    UNIT_CONFIRMED = "unit confirmed"
    #: The loop thread's CPU section ended and the header says no GPU work nor Python frames
    #: follow: the close decision is made there.
    DECIDED_AT_SECTION_END = "decided at section end"


#: Every move of the mode machine: (mode, event) -> the next mode. Nothing else sets a mode;
#: an event a mode has no move for is a bug (``StructureDetector._move``).
TRANSITIONS = {
    (Mode.LEARNING, Event.STEPS_REPEAT): Mode.STEPS,
    (Mode.LEARNING, Event.UNIT_CONFIRMED): Mode.MATCHING,
    (Mode.LEARNING, Event.DECIDED_AT_SECTION_END): Mode.SECTION_END,
}


class StructureDetector:
    """Finds iterations from the call structure; see the module docstring."""

    name = "structure"

    def __init__(self, use_annotations: bool = True, level: int | None = None,
                 max_nodes: int = RULES.memory.max_nodes,
                 max_depth: int = RULES.memory.max_depth):
        #: A ``Mode``; only ``_move`` changes it (``TRANSITIONS``).
        self.mode = Mode.LEARNING
        #: ``observe(thread, stack, start, end, name, section)``: a structural op of
        #: ``thread`` (``stack``: its open ops, this one last) in ``section`` of it, read the
        #: current mode's way; returns the boundaries found. It is the mode's reader itself
        #: (set by ``_move``: a fact of the mode), not a method that hands each op on to it
        #: (a call less per op). Chosen once per mode, not per op: reading a ``Mode`` member
        #: costs some ten times a plain attribute on CPython 3.11 (``EnumType.__getattr__``).
        self.observe = self._reader(self.mode)
        #: Launches, GPU work and Python frames are evidence until the unit is decided (set
        #: by ``_move``: a fact of the mode).
        self.wants_evidence = True
        self._use_annotations = use_annotations
        self._level = level or 0
        #: Every thread's skeleton while learning (``skeleton.Skeletons``).
        self._skeletons = Skeletons(max_nodes, max_depth)
        self._names: list = self._skeletons.names
        # Mode.STEPS: ProfilerStep#N repeats at the top of a thread; each new one is a
        # boundary the moment it is read.
        self._online_thread = None
        self._online_last_end = None
        self._online_count = 0
        #: Each thread's ``ProfilerStep`` spans read, none nested in or overlapping the one
        #: before: (start, end, name, at_top); once they are the loop, its latest only.
        self._step_runs: dict = {}
        self._steps_why = ""  # why the steps are the loop (``verdict.regular_steps``)
        # Mode.MATCHING: the matcher, the skeleton of the row it reads (and the containers
        # around it), what the manifest will say of the unit.
        self._matcher: RootMatcher | None = None
        self._matcher_path: tuple = ()
        self._online_evidence: dict = {}
        #: Python frames came before the ops they open (a file in time order, not Kineto's
        #: sections): the matcher keeps reading them.
        self._frames_before_ops = False
        self._facts = TraceFacts()  # what the header says will (not) follow
        self._section = LoopSection()  # how far the loop thread's CPU section is read
        #: An op read in one call with its push on the stacks: (``reader``, ``state``),
        #: ``reader(stacks, state, thread, name, start, end)`` returns the op's boundaries,
        #: or None, nothing done, where it is read the general way (``ThreadStacks.push``,
        #: then ``observe``); the engine asks it at each op (``Splitter._read_op``). A fact
        #: of the mode (``_fast_reader``), or of the unit: ``read_top_op`` for one of one
        #: op, ``read_step_op`` once the steps are the loop.
        self.fast_read: tuple | None = self._fast_reader(self.mode)
        self._tried_at_end = False  # the online confirmation was tried on the whole section
        self._waited = ""  # why the decision could not be made at the section end
        self._early: DetectorResult | None = None  # the close decision, made at Mode.SECTION_END
        #: The last search on each row tried online lately (``search.RecentMemos``).
        self._memos = RecentMemos()
        self._inner = InnerAnswers()  # the latest of ``verdict.inner_repeat``'s answers
        #: The latest end and longest op of the rows ``_try_container`` asked about lately.
        self._extremes = RowExtremes()
        #: The unit search the online tries may still do (``search.SearchBudget``).
        self._budget = SearchBudget()
        #: The first search at a top level's bound is not paid from that budget
        #: (``_at_the_bound``): online tries that found nothing they could believe may have
        #: spent it, and this is the loop's one chance to be decided whole.
        self._bound_search_free = True

    def _move(self, event: Event) -> None:
        """The one place the mode changes (``TRANSITIONS``), and with it whether launches,
        GPU work and Python frames are still evidence: while learning; once matching, only
        where Python frames come before the ops they open (a file in time order: they still
        move boundaries)."""
        self.mode = TRANSITIONS[(self.mode, event)]
        self.wants_evidence = self.mode is Mode.MATCHING and self._frames_before_ops
        self.observe = self._reader(self.mode)
        self.fast_read = self._fast_reader(self.mode)  # (a unit of one op or the steps: theirs)

    def _reader(self, mode: Mode):
        """What ``observe`` is in ``mode``."""
        if mode is Mode.LEARNING:
            return self._observe_learning
        if mode is Mode.STEPS:
            return self._observe_stepping
        if mode is Mode.MATCHING:
            return self._observe_matching
        return _read_nothing  # Mode.SECTION_END: decided

    def _fast_reader(self, mode: Mode) -> tuple | None:
        """What ``fast_read`` is in ``mode``, unless the move sets its own (a unit of one op
        matched: ``read_top_op``; the steps the loop: ``read_step_op``). While learning, and
        once matching, each op read as ``observe`` reads it, but the common ops of a side
        thread while learning and the ops under one of the row once matching answered
        without a call of Python where the native part is built (``read_learning_op``,
        ``read_matching_op``)."""
        if mode is not Mode.LEARNING and mode is not Mode.MATCHING:
            return None
        return (read_learning_op if mode is Mode.LEARNING else read_matching_op), (
            self, PROFILER_STEP_PREFIX, SKIPPED, RULES.memory.side_thread_roots,
            self._skeletons, self._section,
            (RULES.memory.max_roots, RULES.online.search_work_per_op, _EAGER_TRIES) + _ROOT_RULES)

    @property
    def revisable(self) -> bool:
        """May the latest boundary found still be revised (moved later, or retracted)? Only
        while the matcher's latest came from a trigger that no anchor has confirmed yet."""
        return self._matcher is not None and self._matcher.tentative

    def note_facts(self, facts: TraceFacts) -> None:
        """What the header says will (not) follow the CPU ops (before the first event)."""
        self._facts = facts

    # -- streaming input ---------------------------------------------------------------

    def _observe_stepping(self, thread, stack: list, start: float, end: float, name: str,
                          section: int):
        """``observe`` in ``Mode.STEPS``: decided, only step annotations matter now: each
        new step of the loop thread (not nested in, nor overlapping, its previous one, as
        ``_observe_step`` keeps them) is a boundary."""
        if not name.startswith(PROFILER_STEP_PREFIX) or thread != self._online_thread:
            return ()
        steps = self._step_runs.get(thread)  # (``setdefault``'s, no list made an op)
        if not steps:
            self._step_runs[thread] = [(start, end, name, len(stack) == 1)]
        elif start < steps[-1][1]:
            return ()  # nested in (or overlapping) the previous step: not a new step
        else:  # (the latest only is kept)
            steps[-1] = (start, end, name, len(stack) == 1)
        self._online_count += 1
        if end > self._online_last_end:  # (``max``'s answer, without a call)
            self._online_last_end = end
        return (found_boundary(start, thread, name, False, "", None),)

    def _observe_learning(self, thread, stack: list, start: float, end: float, name: str,
                          section: int):
        """``observe`` in ``Mode.LEARNING``: the op joins the skeleton (``skeleton.Skeletons``),
        and may be the moment to try the unit online (or end the loop thread's section)."""
        loop = self._section
        if start < loop.since and thread != loop.thread:  # (``ended_by``'s first test, inline)
            if (found := self._from_the_past(start, gpu_block=False)) is not None:
                return found
        is_step = name.startswith(PROFILER_STEP_PREFIX)
        if is_step and self._use_annotations:  # whatever the nesting, before the skeleton
            if found := self._observe_step(thread, start, end, name, len(stack) == 1):
                return found
        state = self._skeletons.latest  # (``Skeletons.known``'s common case, inline)
        if state is None or state.section != section or state.key != thread:
            state = self._skeletons.known(thread, section)
            if state is None:  # the thread's first op (or its section's)
                if len(stack) == 1 and not is_step and \
                        self._read_alone(thread, start, end, name, section):
                    return ()
                state = self._skeletons.make(thread, section)
        depth = len(stack) - 1
        if state.main:
            # the section's latest if it is its thread (``LoopSection.follow``, inline)
            if loop.thread == thread or loop.thread is None:
                loop.thread = thread
                loop.since, loop.latest = loop.latest, start
        elif depth and not is_step and state.skips_below(depth):  # (never at the top level)
            return ()
        read_through = is_step and not self._use_annotations  # (its children in its place)
        if not depth and not read_through:
            state.stack.clear()  # (``parent_at``'s top level, inline: most ops of a flat row)
            parent = None
        else:
            parent = state.parent_at(depth, read_through)
            if parent is SKIPPED:  # not read: under an op not kept, or a step read through
                return ()
        if is_step:
            state.add_step(start, end, name)  # the loop thread's rank at close
        roots = state.roots  # (a top-level op through ``skeleton.root_op``: one native call)
        node = top_level_op(self._skeletons, state, start, end, name, *_ROOT_RULES) \
            if parent is None else self._skeletons.add(state, parent, start, end, name)
        if (main := state.main) and len(state.roots) > RULES.memory.max_roots:  # (top level)
            found = self._at_the_bound(state)
            if found is not None:
                return found
        if state.roots is not roots:  # ops forgotten: a new row
            self._forget_tries()
        if node is SKIPPED or not main or self._level:
            return ()  # (``_online_allowed``, asked without a call: still learning here)
        self._budget.credit += RULES.online.search_work_per_op  # (``SearchBudget.earn``)
        if parent is not None:
            return self._try_under(state, parent, node)
        # The top level (``_try_under``'s twin, inline): a moment to try when grown enough since
        # the last try, or where a symbol begins to repeat and a unit found may be believed
        # (asked here, not by ``_try_online``: 78 k of 200 k ops drawn at random from 40 k names).
        seen = state.seen
        if len(state.roots) >= state.next_try or _MIN_INSTANCES <= seen.last_count <= \
                _EAGER_TRIES and seen.may_confirm:
            return self._try_online(state)
        return ()

    def _read_alone(self, thread, start: float, end: float, name: str, section: int) -> bool:
        """A thread's first op, at its top level and no ``ProfilerStep``: kept alone where it
        may be (``Skeletons.lone``), and read as ``_observe_learning`` reads the op that
        begins a top level (it follows the loop thread's section; on a main thread it earns
        search, as ``_observe_learning`` would, and is no moment to try: one op on the row, and
        ``RULES.min_instances`` of a kind are wanted first). True where it is kept so."""
        main = is_main_thread(*thread)
        if not self._skeletons.lone(thread, section, start, end, name, main):
            return False
        if main:
            self._section.follow(thread, start)
            if not self._level:
                self._budget.earn()
        return True

    def _try_under(self, state: ThreadSkeleton, parent: Node, node: Node):
        """Whether ``node``, just read under ``parent``, is the moment to try the unit online:
        a symbol has begun to repeat under a shallow container (the top level's moments are
        asked in ``_observe_learning``, inline: the top level has grown enough since the last
        try, or a symbol has begun to repeat there)."""
        online = RULES.online
        if parent.depth < online.container_depth and \
                RULES.min_instances <= state.count_under(parent, node.sym) <= online.eager_tries:
            return self._try_container(state, state.around_latest())
        return ()

    def _online_allowed(self, state: ThreadSkeleton) -> bool:
        return state.main and not self._level and self.mode is Mode.LEARNING

    def _try_online(self, state: ThreadSkeleton):
        """Confirm the unit at the top of the main thread as soon as it is certain: the
        iteration test of the close path (``verdict.iteration_test``) passes, and
        ``verdict.confirmed_online`` believes it. Then boundaries stream. Not tried (nor
        paid for) while no unit found on the row could be believed
        (``skeleton.RootCounts.may_confirm``)."""
        roots = state.roots
        if len(roots) >= state.next_try:
            online = RULES.online
            state.next_try = max(len(roots) + online.try_step,
                                 int(len(roots) * online.try_growth))
        if not state.seen.may_confirm or not self._budget.affords(roots):
            return ()  # put off: tried again at its next moment, once the credit covers it
        return self._confirm(state, roots, [])

    def _at_the_bound(self, state: ThreadSkeleton):
        """``state``'s top level holds more than ``MemoryRules.max_roots`` ops, and no loop
        confirmed: the close decision's search is made on it now, and the unit it finds,
        if it passes the iteration test, is believed (a loop the online tries could not
        believe: its instances exact but none a whole piece of work, no input fetch, a
        prologue before them). Else its oldest ops are forgotten
        (``Skeletons.forget_oldest``), and the close decision will search what is kept.
        Not searched where no unit found could be believed online either
        (``RootCounts.may_confirm``: names drawn at random), nor under ``--level``; the
        first search is free, the next ones are paid from the online tries' budget (a
        search of 32,768 ops of names drawn at random takes 0.2 to 0.6 s: every 16,384 ops,
        unpaid, it would be most of the time). Returns the boundaries found, or None."""
        roots = state.roots
        if self._online_allowed(state) and state.seen.may_confirm and \
                (self._bound_search_free or self._budget.affords(roots)):
            self._bound_search_free = False
            unit = find_unit(roots, names=self._names, whole=False)
            if unit is not None:
                verdict, why = iteration_test(roots, roots, unit, [],
                                              self._skeletons.modules_of(state.key))
                if verdict:
                    return self._start_matching(
                        state, roots, unit, [],
                        f"{why}; the top level reached its bound of "
                        f"{RULES.memory.max_roots} ops held")
        self._skeletons.forget_oldest(state)
        return None

    def _try_container(self, state: ThreadSkeleton, path: list):
        """Online inside a container (failure mode 3: the minor roots come only at the end):
        ``path`` holds the open ops around the latest one, outermost first. They must be a
        chain of dominant containers (``verdict.dominant``, as the close path descends) and no
        ``ProfilerStep`` (steps are their own evidence); then the unit among the innermost
        one's children is confirmed like one at the top (``_confirm``)."""
        row = state.roots
        for container in path:
            if dominant(row, extremes=self._extremes.of(row)) is not container or \
                    self._names[container.sym].startswith(PROFILER_STEP_PREFIX):
                return ()
            row = container.kids
        if not self._budget.affords(row):
            return ()
        return self._confirm(state, row, path)

    def _confirm(self, state: ThreadSkeleton, roots: list, path: list,
                 section_read: bool = False):
        """The online decision on one row of the loop thread (its top, or the children of
        the containers ``path``): the iteration test of both paths, then
        ``verdict.confirmed_online``. ``section_read``: the loop thread's whole CPU section
        is read (Kineto's layout), so no later instance can differ. A coarser cut of several
        instances that each turn the loop loses to them at close (the super-period rule) and
        a finer one turns no loop, whatever the kernels that come later weigh."""
        least = exact_needed(roots, path, self._names, section_read)
        if least and not exact_possible(roots, len(roots) // least):
            return ()
        unit = find_unit(roots, names=self._names, whole=False, memo=self._memos.of(roots),
                         least_exact=least, wide=cache(partial(exact_possible, roots)))
        if unit is None:
            return ()
        verdict, why = iteration_test(state.roots, roots, unit, path,
                                      self._skeletons.modules_of(state.key),
                                      answers=self._inner)
        if not verdict:
            return ()
        believed = confirmed_online(roots, unit, path, self._names, section_read,
                                    answers=self._inner)
        if believed is None:
            return ()
        return self._start_matching(state, roots, unit, path, f"{why}; {believed}")

    def _start_matching(self, state: ThreadSkeleton, roots: list, unit: Unit, path: list,
                        why: str) -> tuple:
        """The unit is confirmed online on ``roots`` (inside the containers ``path``): the
        matcher takes over, and the skeleton is dropped."""
        opening = [] if path else section_openers(
            state, self._skeletons.sections(state), roots, unit, self._names)
        anchor = roots[unit.first].sym  # its minor roots before the containers (warm-up)
        minor = [n for n in before_containers(state.roots, path) if n.sym == anchor]
        self._matcher = RootMatcher(state.key, roots, unit, self._names, opening, minor)
        self._matcher_path = tuple(path)
        self._move(Event.UNIT_CONFIRMED)
        if len(unit.pattern) == 1 and (self._use_annotations or not self._names[
                anchor].startswith(PROFILER_STEP_PREFIX)):  # (its anchor no transparent step)
            self.fast_read = read_top_op, (self._matcher, state, self._skeletons.symbols,
                                           found_boundary)
        self._online_evidence = online_evidence(self.name, state.key, path, roots, unit, why,
                                                self._names)
        self._skeletons.keep_only(state)  # the rest is no longer needed
        self._forget_tries()
        return tuple(self._matcher.found)

    def _forget_tries(self) -> None:
        """The unit is decided (or the top level was sifted: ``Skeletons.forget_singles``):
        what the online tries kept of the rows is no longer needed."""
        self._memos.clear()
        self._inner.clear()
        self._extremes.clear()
        self._budget.forget_row()

    def _observe_matching(self, thread, stack: list, start: float, end: float, name: str,
                          section: int):
        """``observe`` in ``Mode.MATCHING``: an op on the row matched goes to the matcher."""
        state = self._skeletons.latest  # the row's (``Skeletons.keep_only``)
        if section != state.section or thread != state.key:
            return ()
        transparent = not self._use_annotations and name.startswith(PROFILER_STEP_PREFIX)
        row = state.stack
        if len(stack) == 1 and not transparent:  # a top-level op: on the row, whatever the
            row.clear()  # containers (``on_row``'s case with no ancestor, without a call)
        elif not self._skeletons.on_row(state, self._matcher_path, len(stack) - 1,
                                        transparent):
            return ()
        symbols = self._skeletons.symbols  # (``Symbols.of``, inline: once an op of the row)
        sym = symbols.sym_of.get(name)
        node = Node(symbols.new(name) if sym is None else sym, start, end, 0)
        row.append(node)
        return self._matcher.push(node)

    def _observe_step(self, thread, start: float, end: float, name: str, at_top: bool):
        """A ``ProfilerStep`` span of ``thread`` (``at_top``: a top-level op of it), whatever
        its nesting, while the unit is learnt: kept unless nested in (or overlapping) the
        thread's previous one. Once the steps kept are regular (``verdict.regular_steps``)
        they are the loop: each one is a boundary (``Mode.STEPS``), and so is each new one
        of that thread (``_observe_stepping``)."""
        steps = self._step_runs.setdefault(thread, [])
        if steps and start < steps[-1][1]:
            return ()  # nested in (or overlapping) the previous step: not a new step
        steps.append((start, end, name, at_top))
        del steps[:-RULES.memory.max_steps_kept]  # bounded, whatever the steps
        trusted, why = regular_steps(steps)
        if not trusted:
            return ()
        self._steps_why = why
        self._move(Event.STEPS_REPEAT)
        self.fast_read = read_step_op, (self, found_boundary, PROFILER_STEP_PREFIX)
        self._online_thread = thread
        self._skeletons.drop()  # the skeleton is no longer needed
        self._forget_tries()
        self._step_runs = {thread: steps[-1:]}
        self._online_count = len(steps)
        self._online_last_end = max(s[1] for s in steps)
        return tuple(FoundBoundary(s, thread, n) for s, _, n, _ in steps)

    def observe_launch(self, thread, ts: float, correlation, graph: bool,
                       copy: bool = False) -> tuple:
        """A runtime call that launches GPU work: credit the ops around it with a kernel
        (a graph launch is credited per kernel as its kernels arrive), or a memory copy.
        The first launch from before the loop thread's latest ops begins Kineto's GPU block:
        the boundaries that the end of the CPU section decides are returned."""
        if self.mode is not Mode.LEARNING:
            return ()
        found = self._from_the_past(ts, gpu_block=True)
        if found is not None:
            return found
        self._skeletons.credit_launch(thread, ts, correlation, graph, copy)
        return ()

    def observe_sync(self, thread, ts: float) -> tuple:
        """A blocking host sync (a runtime call): the ops around it waited for the device
        (``search._turns_apart``: a serving loop's turn ends so). No decision waits on it."""
        if self.mode is Mode.LEARNING:
            self._skeletons.credit_sync(thread, ts)
        return ()

    def observe_gpu_work(self, correlation, ts: float) -> tuple:
        """A kernel: one more for the ops of its graph launch, if it came from one. The
        first GPU work from before the loop thread's latest ops is in Kineto's GPU block
        (CUPTI may write a kernel before the first launch): as ``observe_launch``."""
        if self.mode is not Mode.LEARNING:
            return ()
        found = self._from_the_past(ts, gpu_block=True)
        if found is not None:
            return found
        self._skeletons.credit_graph_kernel(correlation)
        return ()

    def observe_frame(self, thread, start: float, end: float, name: str) -> tuple:
        """A Python frame: the opener of the main thread's top-level op it opens (the phase
        at the outermost frame of the step, ``close.at_outermost_frames``); outermost
        ``nn.Module`` calls are also kept (layer evidence). The first frame from before the
        loop thread's latest ops ends its CPU section: the boundaries that decides are
        returned."""
        if self.mode is Mode.MATCHING:
            if thread == self._matcher.thread:
                self._matcher.observe_frame(start, end, name)
            return ()
        if self.mode is not Mode.LEARNING:
            return ()
        if self._skeletons.credit_frame(thread, start, end, name):
            self._frames_before_ops = True
        found = self._from_the_past(start, gpu_block=False)
        if found is not None:
            return found
        self._skeletons.note_module(thread, start, end, name)
        return ()

    def observe_frames(self, threads: list, starts, ends, names: list, at: int) -> tuple:
        """Python frames ``at`` on (``threads``, ``names``: lists; ``starts``, ``ends``:
        float64 arrays), as ``observe_frame`` takes them one by one, up to the first that
        finds boundaries: returns (its index, the boundaries), or (the first frame not read,
        ()) once the detector wants no more evidence, (``len(threads)``, ()) at the end. While
        learning, frames that cannot end the section (it has ended, or none is from before
        its latest ops) only credit the skeleton: all at once (``Skeletons.credit_frames``)."""
        n = len(threads)
        if at < n and self.mode is Mode.LEARNING and \
                not self._section.ended_by(float(starts[at:].min()), gpu_block=False):
            if self._skeletons.credit_frames(threads[at:], starts[at:], ends[at:], names[at:]):
                self._frames_before_ops = True
            return n, ()
        for k, start, end in zip(range(at, n), starts[at:].tolist(), ends[at:].tolist()):
            if not self.wants_evidence:
                return k, ()
            found = self.observe_frame(threads[k], start, end, names[k])
            if found:
                return k, found
        return n, ()

    # -- memory: idle threads ----------------------------------------------------------

    def threads_needed(self) -> set:
        """The threads whose state must stay (the engine forgets the others it finds idle):
        the loop thread's section, the matched or stepping thread, and the skeletons
        ``close.loop_thread`` ranks first now (``MemoryRules.loop_candidates_kept``)."""
        needed = {self._section.thread, self._online_thread}
        if self._matcher is not None:
            needed.add(self._matcher.thread)
        needed.update(leading_threads(self._skeletons.threads, self._use_annotations,
                                      RULES.memory.loop_candidates_kept))
        return needed

    def forget_threads(self, threads) -> None:
        """Forget the state of ``threads`` (idle, none of them ``threads_needed``)."""
        self._skeletons.forget(threads)
        if self._step_runs:  # (most often empty)
            for thread in threads:
                self._step_runs.pop(thread, None)

    # -- decision at the end of the loop thread's CPU section (Kineto's layout) ---------

    def _from_the_past(self, ts: float, gpu_block: bool):
        """A frame, or (``gpu_block``) a launch or GPU work, at ``ts``: from before the loop
        thread's latest ops, it ends the section (a launch also the frames before the GPU
        block). Returns the boundaries decided then, or None while still learning."""
        if not self._section.ended_by(ts, gpu_block):
            return None
        found = self._section_ended(launch=gpu_block)
        return found if self.mode is not Mode.LEARNING else None

    def _section_ended(self, launch: bool) -> tuple:
        """The loop thread's CPU section has ended (see the module docstring); ``launch``:
        the GPU block has begun, so the Python frames are read too. Decides what no later
        evidence can change; returns the boundaries found."""
        self._section.end(launch)
        if self._facts.frames is not False and not self._section.frames_read:
            self._waited = WAITED_FOR_FRAMES
            return ()
        if self._facts.gpu is False:
            return self._decide_at_section_end()
        if self._tried_at_end or self._level:
            return ()
        self._tried_at_end = True
        found = self._confirm_section()
        if not found:
            self._waited = WAITED_FOR_GPU
        return found

    def _section_state(self) -> ThreadSkeleton | None:
        """The skeleton of the section just ended (of its thread, the one with most ops)."""
        return self._skeletons.largest_section(self._section.thread)

    def _decide_at_section_end(self) -> tuple:
        """No GPU work and no Python frames follow: the close decision, now."""
        thread = loop_thread(self._skeletons.whole(), self._use_annotations)
        state = self._section_state()
        if thread is None or thread is not state:
            return ()
        result = decide(self._loop(thread), self._level, self.name)
        result.evidence["decided"] = DECIDED_AT_SECTION_END
        result.evidence["why_then"] = WHY_AT_SECTION_END
        self._early = replace(result, boundaries=[])
        self._move(Event.DECIDED_AT_SECTION_END)
        self._skeletons.drop()  # the skeleton is no longer needed
        self._forget_tries()
        return tuple(result.boundaries)

    def _confirm_section(self) -> tuple:
        """The online confirmation (``_confirm``), tried on the loop thread's whole CPU
        section: at its top, then down its chain of dominant containers (as ``close.decide``
        descends). The ops after a container, read already, go to the matcher as the
        online path would have given them (the minor roots of failure mode 3)."""
        state = self._section_state()
        if state is None or not state.roots or not self._online_allowed(state):
            return ()
        row, path = state.roots, []
        while True:
            trailing = after_containers(state.roots, path)
            found = self._confirm(state, row, path, section_read=True)
            if found:
                self._online_evidence["decided"] = (
                    f"at the end of the loop thread's CPU section, after "
                    f"{self._matcher.measured + 1} instances")
                for node in trailing:
                    found += self._matcher.push(node)
                return found
            container = dominant(row)
            if container is None or not container.kids or len(path) >= RULES.online.container_depth \
                    or self._names[container.sym].startswith(PROFILER_STEP_PREFIX):
                return ()
            path.append(container)
            row = container.kids

    # -- decision at the end (``close.py``) ---------------------------------------------

    def close(self) -> DetectorResult:
        if self.mode is Mode.STEPS:
            return from_steps(self.name, self._online_thread, self._online_last_end,
                              self._online_count, self._steps_why)
        result = self._structure_result()
        steps = self._step_runs.get(tuple(result.evidence.get("loop_thread") or ()), ())
        if len(steps) >= RULES.online.min_steps:  # steps, but not a loop: explain says why
            result.evidence["steps_not_trusted"] = regular_steps(steps)[1]
        return result

    def _structure_result(self) -> DetectorResult:
        """What the structure concluded (no regular steps were found)."""
        if self.mode is Mode.SECTION_END:
            return self._early
        if self.mode is Mode.MATCHING:
            return from_matcher(self._matcher, self._online_evidence)
        thread = loop_thread(self._skeletons.whole(), self._use_annotations)
        if thread is None:
            return no_loop(self.name)
        result = decide(self._loop(thread), self._level, self.name)
        if self._waited:
            result.evidence["waited"] = self._waited
        return result

    def _loop(self, thread: ThreadSkeleton) -> LoopThread:
        """The loop thread as the close decision reads it."""
        return LoopThread(thread, self._skeletons.sections(thread),
                          self._skeletons.modules_of(thread.key), self._names)


def top_op_matched(stacks: ThreadStacks, matching: tuple, thread, name: str, start: float,
                   end: float) -> tuple | None:
    """A top-level op of the row matched against a unit of one op (``matching``: the state
    of ``StructureDetector.fast_read``), read in one call where it is the anchor that
    ``matcher.anchor_after_alike`` takes: pushed on its thread's stack (``stacks.push``'s
    common case, the op alone at the top: ``ThreadStacks.alone_at_top``), the row's op
    (``_observe_matching``) and its boundary (``anchor_after_alike``), returned. Else None,
    nothing done: the engine reads it the general way. The fallback of
    ``_native.top_op_matched`` (a test ties the two)."""
    matcher, state, symbols, made = matching
    if not stacks.alone_at_top(thread, start, end) or stacks.last_section != state.section \
            or thread != state.key or (sym := symbols.sym_of.get(name)) is None:
        return None
    node = Node(sym, start, end, 0)
    if not takes_anchor(matcher, node):
        return None
    stacks.push(thread, name, start, end)
    row = state.stack
    row.clear()
    row.append(node)
    return anchor_after_alike(matcher, node, made)


def step_op_read(stacks: ThreadStacks, stepping: tuple, thread, name: str, start: float,
                 end: float) -> tuple | None:
    """An op read in one call once the steps are the loop (``Mode.STEPS``; ``stepping``: the
    detector, ``found_boundary`` and the steps' prefix, the state of
    ``StructureDetector.fast_read``): pushed (``ThreadStacks.push``) and read
    (``_observe_stepping``) where the push takes its common case
    (``ThreadStacks.pushes_at_once``), its boundaries returned. Else None, nothing done: the
    engine reads it the general way. The fallback of ``_native.step_op_read`` (a test ties
    the two)."""
    if not stacks.pushes_at_once(thread, start):
        return None
    return stepping[0]._observe_stepping(thread, stacks.push(thread, name, start, end), start,
                                         end, name, stacks.last_section)


def learning_op_read(stacks: ThreadStacks, learning: tuple, thread, name: str, start: float,
                     end: float) -> tuple:
    """An op read in one call while the detector learns (``Mode.LEARNING``; ``learning``: the
    detector, the steps' prefix, ``skeleton.SKIPPED``, ``MemoryRules.side_thread_roots``,
    the detector's skeletons and loop section, and what a main thread's top-level op is read
    with (``max_roots``, ``search_work_per_op``, ``eager_tries``, then ``_ROOT_RULES``: as
    ``top_level_op`` takes them): the state of ``StructureDetector.fast_read``, its parts
    that the native reader reads): pushed (``ThreadStacks.push``) and read
    (``_observe_learning``), its boundaries returned. The fallback of
    ``_native.learning_op_read``, which answers an op of a side thread (no ``ProfilerStep``,
    nor from before the loop thread's latest ops while its section may end there) without
    calling it: under its top-level op, ``ThreadSkeleton.skips_below``'s case (most ops of a
    trace's autograd thread: pushed as not kept, as it pushes them); at its top level, where
    its name has a symbol and no Python frame waits, ``Skeletons.add``'s (a node on the top
    level, or not kept past ``side_thread_roots``). A main thread's top-level op (the same
    cases, its skeleton the latest) it reads as ``_observe_learning`` reads it, calling the
    detector's methods only where due (``_at_the_bound``, ``_forget_tries``,
    ``_try_online``; learn53). Every other op it reads through ``observe`` (a test ties the
    two)."""
    return learning[0]._observe_learning(thread, stacks.push(thread, name, start, end), start,
                                         end, name, stacks.last_section)


def matching_op_read(stacks: ThreadStacks, matching: tuple, thread, name: str, start: float,
                     end: float) -> tuple:
    """An op read in one call once the detector matches a unit of more than one op
    (``Mode.MATCHING``; ``matching``: as ``learning_op_read``'s): pushed and read
    (``_observe_matching``), its boundaries returned. The fallback of
    ``_native.matching_op_read``, which answers the ops that are not on the row matched
    without calling it: an op of another thread or section, and one under an op of the row
    (no ``ProfilerStep``: ``Skeletons.on_row``'s case, the op pushed as not kept as it pushes
    it); every other op it reads through ``observe`` (a test ties the two)."""
    return matching[0]._observe_matching(thread, stacks.push(thread, name, start, end), start,
                                         end, name, stacks.last_section)


#: ``top_op_matched`` and ``step_op_read`` in native code where it is built (the engine's
#: calls at each op: ``StructureDetector.fast_read``).
read_top_op = top_op_matched if _native is None else _native.top_op_matched
read_step_op = step_op_read if _native is None else _native.step_op_read
#: ``learning_op_read`` and ``matching_op_read`` in native code where it is built
#: (``StructureDetector.fast_read`` while it learns, and once it matches a unit of more ops).
read_learning_op = learning_op_read if _native is None else _native.learning_op_read
read_matching_op = matching_op_read if _native is None else _native.matching_op_read


def _read_nothing(thread, stack: list, start: float, end: float, name: str, section: int):
    """``observe`` in ``Mode.SECTION_END``: decided, no op matters now."""
    return ()
