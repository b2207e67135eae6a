"""Each thread's structural ops handed on in start order, whatever order the file wrote them in.

Why: the core reads a thread's call structure one op at a time and takes an op's parent to be
the innermost open op that contains it (``stack.ThreadStacks``), which needs each thread's ops
in start order. Kineto writes them so: each (thread, category) stream sorted by start, the
streams one after another (the stacks' *sections*). The profiler of torch 1.8 / 1.9 wrote each
thread's ops in end order (children before their parent), and a file may be shuffled a little.
``OpOrder`` sits between the engine and the stacks and hands the ops on in start order.

**Start order costs nothing and changes nothing.** While a thread keeps to start order, each op
is handed on the moment it arrives, as before; a jump back in time to *another category* is a
Kineto section, as before (the stacks begin a new one).

**The evidence of another order** is a jump back in time that Kineto never makes: an op that
starts before the previous op of its thread *of the same category* (within one Kineto stream
that never happens), or a second jump back on a thread (a thread has two structural streams,
``cpu_op`` and ``user_annotation``, so at most one jump between them). Every trace of
``../shared/traces`` and ``tests/data`` has at most one jump back per thread, to another
category; end order makes one at its first parent, a shuffled file within its first window.
From that op on, the thread is *reordered*. Its first ops (up to ``HISTORY``), already handed
on as they came, are held again, so they are read twice: once misplaced, in the section they
opened, then in their place in a new section (the misplaced copies are a handful of ops at the
thread's start, in a section of their own).

**Held ops** form a forest per thread, its roots sorted by start. An arriving op goes under
the held op that contains it (a child that comes after its parent), or over the run of held
roots it contains (a parent after its children: in end order the suffix that came just
before it), or between them. Nothing but time decides nesting (``ThreadStacks``'s rule: an op
that outlives another by more than the tolerance is its sibling; of two that contain each
other, the one that ends later, or else the later to arrive, is the parent).

**When a held root is handed on** (with its subtree, in start order). In end order a run of
roots is adopted by a parent arriving after its last child, while the thread's own top-level
ops never get one, and no op that arrives tells the two apart: ``an op that starts after R
ends`` is as much R's later sibling under a parent still to come as R's successor at the top.
So a root waits for evidence that nothing can enclose it any more:

- a complete event (``X``) from before the thread's earliest held op that is not one of its
  ops: another thread's op, a launch, a Python frame, GPU work. In a file laid out like
  Kineto's (or torch 1.8's) the thread's ops are all written then, and the detector reads its
  whole section in start order before that event, exactly as it would have. Flows, instants
  and counters do not count: Kineto writes ``fwdbwd`` flows among a thread's ops;
- the end of the input;
- the safety valve, so that memory stays bounded: beyond ``HOLD_LIMIT`` ops held by a thread
  its oldest roots go until a quarter of the room is free (top-level ops would otherwise wait
  to the end). A boundary in an end-order thread is therefore known when the section ends or
  at most ``HOLD_LIMIT`` ops later, not the moment its op arrives.

An op that starts before the latest start already handed on (a parent whose children the
valve let go, or a thread's ops after its section was handed on) is *late*: handed on at once,
as an out-of-order op always was (the stacks begin a new section), and counted
(``late_ops``, in the evidence): the nesting is degraded there, never silently.

Memory: per thread, its last op's start and category, its first ``HISTORY`` ops while that
order is unknown, and while reordered at most ``HOLD_LIMIT`` held ops; the threads the engine
finds idle (beyond ``stack.LIVE_THREADS``) and that hold nothing are forgotten (``forget``).
Time: each op is placed by a bisection in its row and moved at most once per ancestor, so
end order and a shuffle within a window are linear in the ops (the held rows grow and
shrink at their ends).
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right

#: Ops one thread may hold while enclosing ops may still come (the safety valve).
HOLD_LIMIT = 32768
#: A thread's first ops, remembered (not held) until its order is known, to be read again in
#: their place if it turns out not to be start order.
HISTORY = 256

_NOTHING_HELD = float("-inf")
#: ``OpOrder.settled_thread`` while no thread is settled (equal to no thread).
_NOT_SETTLED = object()


class HeldOp:
    """A held op and its held children (sorted by start)."""
    __slots__ = ("start", "end", "name", "kids")

    def __init__(self, start: float, end: float, name: str):
        self.start = start
        self.end = end
        self.name = name
        self.kids = None


def _start_of(op: HeldOp) -> float:
    return op.start


class _Thread:
    """One thread's order: its last op while in start order, its held forest once reordered.
    Made at the thread's second op, from its first (a first op is in start order: it is
    kept as a tuple, ``OpOrder.arrive``, so that a thread of one op, of which a trace may
    hold a million, makes no ``_Thread``: 2.4 k instructions less per such thread)."""
    __slots__ = ("last_start", "last_cat", "jumped", "history", "roots", "held", "handed")

    def __init__(self, start: float, cat, history: list | None):
        self.last_start = start
        self.last_cat = cat
        self.jumped = False  # it went back in time once already (to another category)
        #: Its first ops while in start order, flat (start, end, name, start, ...: one list,
        #: no tuple per op); None past ``HISTORY``.
        self.history = history
        #: The held roots, sorted by start; None while the thread is in start order.
        self.roots: list | None = None
        self.held = 0  # ops held (roots and their subtrees)
        self.handed = _NOTHING_HELD  # the latest start handed on since it was reordered


class OpOrder:
    """Per thread, the structural ops in start order (see the module docstring). ``arrive``
    takes each op in file order; ``release_before`` and ``release_all`` hand on what the
    evidence frees. Each returns the ops to read now as (thread, start, end, name), in order;
    ``arrive`` returns None for "just this op, now" (start order: the common case)."""
    # (slots: the feed lane reads ``settled_thread``, ``settled`` and ``flush_below`` at each
    # op, ``_native.feed_lane``'s ``held48_noted``)
    __slots__ = ("_tolerance", "_limit", "_history_length", "_threads", "_holding",
                 "flush_below", "reordered_threads", "late_ops", "most_held", "settled_thread",
                 "settled")

    def __init__(self, tolerance_us: float = 1.0, hold_limit: int = HOLD_LIMIT,
                 history: int = HISTORY):
        self._tolerance = tolerance_us
        self._limit = hold_limit
        self._history_length = 3 * history  # (``_Thread.history`` is flat)
        self._threads: dict = {}
        self._holding: dict = {}  # thread -> its _Thread, for threads holding ops
        #: The earliest start held by any thread (-inf when none holds anything): anything
        #: else from before it may free held ops (``release_before``).
        self.flush_below = _NOTHING_HELD
        #: Threads found out of start order, ops that came after their place was handed on,
        #: and the most ops held at once by one thread.
        self.reordered_threads = 0
        self.late_ops = 0
        self.most_held = 0
        #: The thread of the op that arrived last where it keeps to start order and its
        #: first ops are no longer remembered (``HISTORY``), and its ``_Thread``: its next
        #: op that starts no earlier than its last, nor than ``flush_below``, is only noted
        #: (its start and category, ``arrive``'s common case): the engine notes it itself,
        #: without a call (``Splitter._read_op``); _NOT_SETTLED, None otherwise.
        self.settled_thread, self.settled = _NOT_SETTLED, None

    def arrive(self, thread, start: float, end: float, name: str, cat) -> list | None:
        """An op of ``thread`` as the file has it: None where it is read now, alone; else the
        ops to read now (others' freed by it first, then maybe this one)."""
        state = self._threads.get(thread)
        out = self._release_others(thread, start) if start < self.flush_below else None
        if state is None:  # its first op: in start order, kept as it came (``_Thread``)
            self._threads[thread] = (start, end, name, cat)
            if out is not None:  # read after the ops it freed
                out.append((thread, start, end, name))
            return out
        if state.__class__ is tuple:  # its second op: the thread's state made from its first
            state = self._threads[thread] = self._made(*state)
        if state.roots is None:
            if start >= state.last_start or (cat != state.last_cat and not state.jumped):
                if start < state.last_start:  # (the one jump back a thread may make)
                    state.jumped = True
                state.last_start, state.last_cat = start, cat
                history = state.history
                if history is None:
                    self.settled_thread, self.settled = thread, state
                elif len(history) < self._history_length:
                    history += start, end, name
                else:
                    state.history = None
                if out is not None:  # read after the ops it freed
                    out.append((thread, start, end, name))
                return out
            self._reorder(state)
        if out is None:
            out = []
        if start < state.handed:
            self.late_ops += 1
            out.append((thread, start, end, name))
            return out
        self._hold(thread, state, HeldOp(start, end, name))
        if state.held > self._limit:
            out.extend(self._release(thread, state, self._limit * 3 // 4))
        self._update_flush()
        return out

    def release_before(self, ts: float) -> list:
        """A complete event other than an op (a launch, a Python frame, GPU work) at ``ts``:
        every thread whose held ops all start after it hands them on (its section is over)."""
        return self._release_others(None, ts)

    def release_all(self) -> list:
        """The end of the input: every held op, in start order per thread."""
        out: list = []
        for thread, state in list(self._holding.items()):
            out.extend(self._release(thread, state, 0))
        self._update_flush()
        return out

    def holding(self) -> set:
        """The threads that hold ops now (never to be forgotten: ``forget``)."""
        return set(self._holding)

    def forget(self, threads) -> None:
        """Forget ``threads`` (idle, none of them holding ops): an op of one of them later
        begins it anew."""
        for thread in threads:
            self._threads.pop(thread, None)
        self.settled_thread, self.settled = _NOT_SETTLED, None  # (it may be among them)

    def _made(self, start: float, end: float, name: str, cat) -> _Thread:
        """A thread's state after its first op (``start`` to ``cat``), made at its second."""
        return _Thread(start, cat, [start, end, name] if self._history_length else None)

    def _reorder(self, state: _Thread) -> None:
        """``state``'s thread is not in start order: its ops are held from now on, its first
        ops again among them."""
        self.settled_thread, self.settled = _NOT_SETTLED, None  # (it may be this one)
        self.reordered_threads += 1
        state.roots = []
        history = state.history or ()
        for k in range(0, len(history), 3):
            self._place(state.roots, HeldOp(*history[k:k + 3]))
            state.held += 1
        state.history = None

    def _hold(self, thread, state: _Thread, op: HeldOp) -> None:
        self._place(state.roots, op)
        state.held += 1
        self._holding[thread] = state
        if state.held > self.most_held:
            self.most_held = state.held

    def _place(self, row: list, op: HeldOp) -> None:
        """Put ``op`` in the held ``row`` (sorted by start): under the op there that contains
        it, else over the run of ops it contains, else between them."""
        tol = self._tolerance
        while True:
            i = bisect_right(row, op.start, key=_start_of)
            if i and _is_parent(row[i - 1], op, tol, False):
                row = row[i - 1].kids if row[i - 1].kids is not None else _new_kids(row[i - 1])
                continue
            k = bisect_left(row, op.start, key=_start_of)
            m = k
            while m < len(row) and _is_parent(op, row[m], tol, True):
                m += 1
            if m > k:
                op.kids = row[k:m]
                row[k:m] = [op]
            else:
                row.insert(k, op)
            return

    def _release(self, thread, state: _Thread, keep: int) -> list:
        """Hand on ``state``'s oldest held roots, subtrees in start order, until at most
        ``keep`` ops are held."""
        out: list = []
        roots = state.roots
        n = 0
        while state.held > keep and n < len(roots):
            before = len(out)
            _flatten(thread, roots[n], out)
            state.held -= len(out) - before
            n += 1
        del roots[:n]
        if out:
            state.handed = max(state.handed, max(op[1] for op in out))
        if not roots:
            self._holding.pop(thread, None)
        return out

    def _release_others(self, thread, ts: float) -> list:
        """Hand on the held ops of every thread but ``thread`` that all start after ``ts``."""
        out: list = []
        for other, state in list(self._holding.items()):
            if other != thread and ts < state.roots[0].start:
                out.extend(self._release(other, state, 0))
        self._update_flush()
        return out

    def _update_flush(self) -> None:
        holding = self._holding
        self.flush_below = min((state.roots[0].start for state in holding.values()),
                               default=_NOTHING_HELD)


def _contains(outer: HeldOp, inner: HeldOp, tol: float) -> bool:
    """``ThreadStacks``'s nesting: ``inner`` starts inside ``outer`` and does not outlive it by
    more than ``tol``."""
    return outer.start <= inner.start < outer.end and inner.end <= outer.end + tol


def _is_parent(outer: HeldOp, inner: HeldOp, tol: float, outer_newer: bool) -> bool:
    """Is ``outer`` the parent of ``inner``? Where each contains the other (the same start,
    ends within ``tol``), the one that ends later is; at the same end, the later to arrive
    (end order's parent)."""
    if not _contains(outer, inner, tol):
        return False
    if inner.start != outer.start or not _contains(inner, outer, tol):
        return True
    return outer.end > inner.end or (outer.end == inner.end and outer_newer)


def _new_kids(op: HeldOp) -> list:
    op.kids = []
    return op.kids


def _flatten(thread, root: HeldOp, out: list) -> None:
    """``root`` and its subtree, in start order (pre-order), onto ``out``."""
    stack = [root]
    while stack:
        op = stack.pop()
        out.append((thread, op.start, op.end, op.name))
        if op.kids:
            stack.extend(reversed(op.kids))
