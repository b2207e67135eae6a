"""Detect stage, by structure: find the repeating unit of work without trusting annotations.

Theory of operation
-------------------
Per thread (and per section of a thread) we keep a skeleton of the call tree
(``skeleton.py``: each op a symbol, its name with digits folded, with start, end, kernels
launched beneath and children). On a row of sibling ops (the thread's top level, or the
children of a container op) ``search.find_unit`` answers which unit repeats, how alike its
instances are and where each begins; its docstring is the account of the tolerant search.
``verdict.py`` says whether a unit found is an iteration (and whether it can be believed
online), ``matcher.py`` streams boundaries once it is, and ``rules.Rules`` holds every
threshold, ``close.py`` what the detector concludes when the input ends. This module is the
mode machine: it decides where and when to look (online), and moves between the modes.
Each instance's shape (0 when like the unit) goes to the engine, which reports cycles that
took another path and do almost no GPU work as ``idle`` (``search.cycle_kinds``).

Modes (``StructureDetector.mode``, a ``Mode``; every move between them is in
``TRANSITIONS``): ``LEARNING`` builds the skeleton and looks for the unit
at the top of the main thread as it grows (``_try_online``), and among the children of a chain
of dominant containers there (``_try_container``: failure mode 3 before its minor roots);
``STEPS`` once ``ProfilerStep#N`` repeats; ``MATCHING`` once the unit is confirmed online
(``matcher.RootMatcher``: the unit's first op
is a boundary at once; the anchor confirms it, or a revision moves or retracts it);
``SECTION_END`` once the loop thread's CPU section has ended in a Kineto file and the rest
of the file can hold no evidence the decision uses (``_section_ended``, below). A trace
never confirmed online is decided at close (``close.decide``).

Kineto's sections (``section.py``): once every CPU op of the loop thread is read and the
header says neither GPU work nor Python frames follow, the close decision is made right
there (``Mode.SECTION_END``). Otherwise the online confirmation (``_confirm``: evidence that
needs no GPU work) is tried once more on the whole section, at its top and down its chain
of dominant containers, once the frames are read; what it cannot confirm waits for close,
and ``evidence["waited"]`` says why. Both decision paths apply one
iteration test (``verdict.iteration_test``), find where the last instance ends one way
(``search.end_of_last``) and report the same evidence (``evidence.py``).

``ProfilerStep#N`` spans are evidence like any other annotation: repeated at the top level they
are the unit (and are emitted online from the second step on); a single one is a container.
With ``use_annotations=False`` they are transparent (their children are read in their place).

Memory: below the top level the skeleton is capped at ``max_nodes`` ops, and kept only for
main threads (pid == tid); a side thread keeps at most ``MemoryRules.side_thread_roots``
top-level ops. Once the unit is confirmed online the skeleton is dropped. A loop that is never confirmed online keeps its
main thread's top level (about 100 bytes per top-level op) until the end: that part grows with
the trace. Everything the engine waits on meanwhile is spilled. The online tries search the
same few rows again as they grow: the last search of each (at most ``MemoryRules.memos`` rows)
is kept for the next (``search.SearchMemo``, at most twice ``MemoryRules.memo_budget`` ops'
worth each).
"""
from __future__ import annotations

import enum
from collections import Counter
from dataclasses import replace

from stream_split.core.detect.base import DetectorResult, FoundBoundary, TraceFacts
from stream_split.core.detect.close import (
    LoopThread, decide, from_matcher, from_steps, loop_thread, no_loop, opening_elsewhere)
from stream_split.core.detect.evidence import row_entry, unit_evidence
from stream_split.core.detect.matcher import RootMatcher
from stream_split.core.detect.rules import RULES
from stream_split.core.detect.search import SearchMemo, Unit, find_unit
from stream_split.core.detect.section import LoopSection
from stream_split.core.detect.skeleton import (
    SKIPPED, Node, Symbols, ThreadSkeleton, after_containers)
from stream_split.core.detect.verdict import confirmed_online, dominant, iteration_test
from stream_split.trace_format import PROFILER_STEP_PREFIX

MODULE_FRAME_PREFIX = "nn.Module: "


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
        #: Launches, GPU work and Python frames are evidence until the unit is decided (set
        #: by ``_move``: a fact of the mode).
        self.wants_evidence = True
        self._use_annotations = use_annotations
        self._level = level or 0
        self._max_nodes = max_nodes
        self._max_depth = max_depth
        self._threads: dict = {}
        self._symbols = Symbols()
        self._names: list = self._symbols.names
        self._nodes = 0
        self._step_symbol = None
        # Online mode: once ProfilerStep#N repeats at the top of a thread, each new one is a
        # boundary the moment it is read.
        self._online_thread = None
        self._online_last_end = None
        self._online_count = 0
        self._graph_launches: dict = {}  # correlation -> ops around a graph launch
        self._matcher: RootMatcher | None = None
        self._matcher_key = None
        self._online_state = None
        self._modules: dict = {}  # thread -> its outermost nn.Module frames [(start, end)]
        self._online_evidence: dict = {}
        self._matcher_path: tuple = ()  # the containers around the matched row
        #: Python frames came before the ops they open (a file in time order, not Kineto's
        #: sections): the matcher keeps reading them.
        self._frames_before_ops = False
        self._early_frames: dict = {}  # thread -> Python frames read before its first op
        self._sections_of: dict = {}  # thread -> its skeletons (one per section), learning
        self._facts = TraceFacts()  # what the header says will (not) follow
        self._section = LoopSection()  # how far the loop thread's CPU section is read
        self._tried_at_end = False  # the online confirmation was tried on the whole section
        self._waited = ""  # why the decision could not be made at the section end
        self._early: DetectorResult | None = None  # the close decision, made at Mode.SECTION_END
        #: The last search on each row tried online lately, latest last (``_memo_for``).
        self._memos: list = []

    def _move(self, event: Event) -> None:
        """The one place the mode changes (``TRANSITIONS``), and with it whether launches,
        GPU work and Python frames are still evidence: while learning; once matching, only
        where Python frames come before the ops they open (a file in time order: they still
        move boundaries)."""
        self.mode = TRANSITIONS[(self.mode, event)]
        self.wants_evidence = self.mode is Mode.MATCHING and self._frames_before_ops

    def note_facts(self, facts: TraceFacts) -> None:
        """What the header says will (not) follow the CPU ops (before the first event)."""
        self._facts = facts

    # -- streaming input ---------------------------------------------------------------

    def observe(self, thread, stack: list, start: float, end: float, name: str, section: int):
        if self.mode is Mode.STEPS:  # decided: only step annotations matter now
            if name.startswith(PROFILER_STEP_PREFIX) and thread == self._online_thread:
                return self._observe_step(self._online_state, start, end, name)
            return ()
        if self.mode is Mode.MATCHING:
            return self._observe_matching((thread, section), stack, start, end, name)
        if self.mode is Mode.SECTION_END:
            return ()
        return self._observe_learning(thread, stack, start, end, name, section)

    def _skeleton_of(self, thread, section: int, start: float) -> ThreadSkeleton:
        """The skeleton of ``thread``'s ``section`` (new at its first op), and the loop
        thread's section followed: the starts of its latest two ops."""
        state = self._threads.get((thread, section))
        if state is None:
            state = self._threads[(thread, section)] = ThreadSkeleton(
                thread, RULES.online.first_try_per_instance * RULES.min_instances)
            state.frames = self._early_frames.pop(thread, [])
            self._sections_of.setdefault(thread, []).append(state)
        if state.main:
            self._section.follow(thread, start)
        return state

    def _observe_learning(self, thread, stack: list, start: float, end: float, name: str,
                          section: int):
        """``observe`` in ``Mode.LEARNING``: the op joins the skeleton, and may be the moment
        to try the unit online (or end the loop thread's section)."""
        if thread != self._section.thread:
            found = self._from_the_past(start, gpu_block=False)
            if found is not None:
                return found
        state = self._skeleton_of(thread, section, start)
        depth = len(stack) - 1
        mine = state.stack
        del mine[depth:]
        is_step = name.startswith(PROFILER_STEP_PREFIX)
        parent = None
        for node in reversed(mine):
            if node is not None:
                parent = node
                break
        if parent is SKIPPED:
            mine.append(SKIPPED)
            return ()
        if is_step and not self._use_annotations:
            mine.append(None)  # transparent: its children take its place
            return ()
        found = self._observe_step(state, start, end, name) if is_step else ()
        if parent is None:
            node = Node(self._symbols.of(name), start, end, 0)
            if not state.main and len(state.roots) >= RULES.memory.side_thread_roots:
                mine.append(SKIPPED)  # a side thread's top level: enough to rank it
                return found
            state.add_root(node)
            state.seen[node.sym] += 1
            state.kid_seen.clear()
            if not found and self._online_allowed(state) and (
                    len(state.roots) >= state.next_try
                    or RULES.min_instances <= state.seen[node.sym] <= RULES.online.eager_tries):
                mine.append(node)
                return self._try_online(state)
        elif state.main and parent.depth + 1 < self._max_depth and \
                self._nodes < self._max_nodes:
            node = Node(self._symbols.of(name), start, end, parent.depth + 1)
            if parent.kids is None:
                parent.kids = []
            parent.kids.append(node)
            self._nodes += 1
            if parent.depth < RULES.online.container_depth and self._online_allowed(state):
                counts = state.kid_seen.get(parent)
                if counts is None:
                    counts = state.kid_seen[parent] = Counter()
                counts[node.sym] += 1
                if RULES.min_instances <= counts[node.sym] <= RULES.online.eager_tries:
                    mine.append(node)
                    return self._try_container(state, [n for n in mine[:-1] if n is not None])
        else:
            node = SKIPPED  # beyond the skeleton's depth or size: not kept, nor its children
        mine.append(node)
        return found

    def _online_allowed(self, state: ThreadSkeleton) -> bool:
        pid, tid = state.key
        return pid == tid and not self._level and self.mode is Mode.LEARNING

    def _try_online(self, state: ThreadSkeleton):
        """Confirm the unit at the top of the main thread as soon as it is certain: the
        iteration test of the close path (``verdict.iteration_test``) passes, and
        ``verdict.confirmed_online`` believes it. Then boundaries stream."""
        roots = state.roots
        if len(roots) >= state.next_try:
            online = RULES.online
            state.next_try = max(len(roots) + online.try_step,
                                 int(len(roots) * online.try_growth))
        return self._confirm(state, roots, [])

    def _try_container(self, state: ThreadSkeleton, path: list):
        """Online inside a container (failure mode 3: the minor roots come only at the end):
        ``path`` holds the open ops around the latest one, outermost first. They must be a
        chain of dominant containers (``verdict.dominant``, as the close path descends) and no
        ``ProfilerStep`` (steps are their own evidence); then the unit among the innermost
        one's children is confirmed like one at the top (``_confirm``)."""
        row = state.roots
        for container in path:
            if dominant(row) is not container or \
                    self._names[container.sym].startswith(PROFILER_STEP_PREFIX):
                return ()
            row = container.kids
        return self._confirm(state, row, path)

    def _confirm(self, state: ThreadSkeleton, roots: list, path: list,
                 section_read: bool = False):
        """The online decision on one row of the loop thread (its top, or the children of
        the containers ``path``): the iteration test of both paths, then
        ``verdict.confirmed_online``. ``section_read``: the loop thread's whole CPU section
        is read (Kineto's layout), so no later instance can differ. A coarser cut of several
        instances that each turn the loop loses to them at close (the super-period rule) and
        a finer one turns no loop, whatever the kernels that come later weigh."""
        unit = find_unit(roots, names=self._names, whole=False, memo=self._memo_for(roots))
        if unit is None:
            return ()
        verdict, why = iteration_test(state.roots, roots, unit, path,
                                      self._modules.get(state.key))
        if not verdict:
            return ()
        believed = confirmed_online(roots, unit, path, self._names, section_read)
        if believed is None:
            return ()
        return self._start_matching(state, roots, unit, path, f"{why}; {believed}")

    def _start_matching(self, state: ThreadSkeleton, roots: list, unit: Unit, path: list,
                        why: str) -> tuple:
        """The unit is confirmed online on ``roots`` (inside the containers ``path``): the
        matcher takes over, and the skeleton is dropped."""
        opening = [] if path else self._section_openers(state, roots, unit)
        self._matcher = RootMatcher(state.key, roots, unit, self._names, opening)
        self._matcher_path = tuple(path)
        self._move(Event.UNIT_CONFIRMED)
        self._online_evidence = {
            "detector": self.name, "decided": f"online, after {unit.n} instances",
            "loop_thread": list(state.key),
            "levels": [dict(row_entry([self._names[n.sym] for n in path], roots, unit,
                                      self._names), iteration_test=why)],
            **unit_evidence(unit, [roots[unit.first].sym], why, self._names)}
        self._matcher_key = next(k for k, v in self._threads.items() if v is state)
        self._threads = {self._matcher_key: state}  # the skeleton is no longer needed
        self._sections_of, self._early_frames, self._memos = {}, {}, []
        state.roots = []
        state.kid_seen = {}
        return tuple(self._matcher.found)

    def _memo_for(self, row: list) -> SearchMemo:
        """The memo of the last search on ``row`` (``search.SearchMemo``): the online tries
        search the same few rows again each time they grow by an op or a few. One memo
        per row tried lately, at most ``MemoryRules.memos`` (the least recently tried goes)."""
        memos = self._memos
        for i, memo in enumerate(memos):
            if memo.row is row:
                memos.append(memos.pop(i))
                return memo
        memo = SearchMemo()
        memos.append(memo)
        del memos[:-RULES.memory.memos]
        return memo

    def _observe_matching(self, key, stack, start, end, name):
        if key != self._matcher_key:
            return ()
        state = self._threads[key]
        depth = len(stack) - 1
        mine = state.stack
        del mine[depth:]
        is_step = name.startswith(PROFILER_STEP_PREFIX)
        path = self._matcher_path
        if any(node is not None and all(node is not c for c in path)
               for node in mine):  # not on the row (inside an op of it)
            mine.append(SKIPPED)
            return ()
        if is_step and not self._use_annotations:
            mine.append(None)
            return ()
        node = Node(self._symbols.of(name), start, end, 0)
        mine.append(node)
        return self._matcher.push(node)

    def _observe_step(self, state: ThreadSkeleton, start, end, name):
        if state.steps and start < state.steps[-1][1]:
            return ()  # nested in (or overlapping) the previous step: not a new step
        state.steps.append((start, end, name))
        if self.mode is Mode.LEARNING:
            if len(state.steps) < RULES.online.min_steps:
                return ()
            self._move(Event.STEPS_REPEAT)
            self._online_thread = state.key
            self._online_state = state
            self._threads = {}  # the skeleton is no longer needed
            self._sections_of, self._early_frames, self._memos = {}, {}, []
            state.roots = []
            self._online_count = len(state.steps)
            self._online_last_end = max(s[1] for s in state.steps)
            return tuple(FoundBoundary(s, state.key, n) for s, _, n in state.steps)
        if state.key != self._online_thread:
            return ()
        self._online_count += 1
        self._online_last_end = max(self._online_last_end, end)
        return (FoundBoundary(start, state.key, name),)

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
        path = [node for state in self._threads.values() if state.key == thread
                for node in state.path_at(ts)]  # each section of the thread
        if not path:
            return ()
        if graph:
            self._graph_launches[correlation] = path
        for node in path:
            node.gpu += 1
            if copy:
                node.copies += 1
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
        path = self._graph_launches.get(correlation)
        if path is not None:
            for node in path:
                node.gpu += 1
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
        states = self._sections_of.get(thread, ())
        for state in states:
            if state.main:
                state.observe_frame(start, end, name)
                self._frames_before_ops = self._frames_before_ops or bool(state.frames)
        if not states and thread[0] == thread[1]:  # before the thread's first op
            early = self._early_frames.setdefault(thread, [])
            if len(early) < RULES.memory.max_pending_frames:
                early.append((start, end, name))
            self._frames_before_ops = True
        found = self._from_the_past(start, gpu_block=False)
        if found is not None:
            return found
        if not name.startswith(MODULE_FRAME_PREFIX):
            return ()
        modules = self._modules.setdefault(thread, [])
        if modules and start < modules[-1][1]:
            return ()  # nested in the previous outermost module call
        modules.append((start, end))
        return ()

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
            self._waited = ("Python frames (the header's with_stack), nn.Module evidence, "
                            "follow the CPU section")
            return ()
        if self._facts.gpu is False:
            return self._decide_at_section_end()
        if self._tried_at_end or self._level:
            return ()
        self._tried_at_end = True
        found = self._confirm_section()
        if not found:
            self._waited = (
                "GPU work follows the CPU section (the header's deviceProperties), and "
                "nothing that needs none confirms the unit (an input fetch or a host sync "
                "opening every instance, whole exact instances, every instance alike and "
                "turning the loop)")
        return found

    def _section_state(self) -> ThreadSkeleton | None:
        """The skeleton of the section just ended (of its thread, the one with most ops)."""
        states = [t for t in self._threads.values() if t.key == self._section.thread]
        return max(states, key=lambda t: len(t.roots), default=None)

    def _decide_at_section_end(self) -> tuple:
        """No GPU work and no Python frames follow: the close decision, now."""
        thread = loop_thread(self._threads.values(), self._use_annotations)
        state = self._section_state()
        if thread is None or thread is not state:
            return ()
        result = decide(self._loop(thread), self._level, self.name)
        result.evidence["decided"] = "at the end of the loop thread's CPU section"
        result.evidence["why_then"] = ("the header says no GPU work and no Python frames "
                                       "follow it")
        self._early = replace(result, boundaries=[])
        self._move(Event.DECIDED_AT_SECTION_END)
        self._threads, self._memos = {}, []  # the skeleton is no longer needed
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
                    f"{len(self._matcher.shapes) + 1} instances")
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
        if self.mode is Mode.SECTION_END:
            return self._early
        if self.mode is Mode.STEPS:
            return from_steps(self.name, self._online_thread, self._online_last_end,
                              self._online_count)
        if self.mode is Mode.MATCHING:
            return from_matcher(self._matcher, self._online_evidence)
        thread = loop_thread(self._threads.values(), self._use_annotations)
        if thread is None:
            return no_loop(self.name)
        result = decide(self._loop(thread), self._level, self.name)
        if self._waited:
            result.evidence["waited"] = self._waited
        return result

    def _sections(self, thread: ThreadSkeleton) -> list:
        """Every section's skeleton of ``thread``'s thread, in the order first read."""
        return [t for t in self._threads.values() if t.key == thread.key]

    def _loop(self, thread: ThreadSkeleton) -> LoopThread:
        """The loop thread as the close decision reads it."""
        return LoopThread(thread, self._sections(thread), self._modules.get(thread.key),
                          self._names)

    def _section_openers(self, thread: ThreadSkeleton, row, unit: Unit) -> list:
        """Online: (start, name) of every op of the thread's other sections, read so far, of
        a kind that opens instances (``close.opening_elsewhere``): the matcher begins each
        new instance at the one before its first op (``RootMatcher._boundary``)."""
        others, opening = opening_elsewhere(thread, self._sections(thread), row, unit)
        return [(n.start, self._names[n.sym]) for n in others if n.sym in opening]
