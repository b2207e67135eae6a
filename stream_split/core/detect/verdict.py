"""Is this unit an iteration? Pure functions of (the skeleton's ops, a unit found, the rules).

Which file a new rule goes in:

- **which cut is the unit** (when instances are alike, when a cut qualifies, which cut wins,
  where each instance opens): ``search.py`` (``_qualifies``, ``_choose``, ``_opening``);
- **is the unit found an iteration** (a layer or a step? a container or a loop?): here,
  ``iteration_test``; both decision paths apply it, online and at close;
- **are the step annotations the loop** (``ProfilerStep#N`` spans regular enough to trust
  whatever their nesting, before any structure is asked): here, ``regular_steps``;
- **can it be believed before the end of the input** (evidence that needs no GPU work, no
  later instance): here, ``confirmed_online``, on top of ``iteration_test``;
- **when and where to ask online** (which rows are searched, when the detector tries):
  ``structure.py``, the mode machine; what the skeleton keeps of each op, and the GPU work
  and frames credited to it: ``skeleton.py``; how each op is matched once the unit is
  confirmed: ``matcher.py``;
- **what the detector concludes when the input ends** (which rows are descended at close,
  where the instances of the unit chosen begin and the last one ends, ``--level N``):
  ``close.py``;
- the thresholds of all of them: ``rules.py``.

Nothing here reads events, and nothing keeps state but ``InnerAnswers``, the online tries'
memo of ``inner_repeat`` (held by the detector, ``structure.py``): a row is a list of sibling
ops (``skeleton.Node``), ``roots`` the loop thread's top-level ops, ``path`` the containers
around the row, outermost first, and ``modules`` the thread's outermost ``nn.Module`` calls as
(start, end) (or None when Python frames were not recorded).
"""
from __future__ import annotations

import math
from operator import attrgetter

from stream_split.core.detect.rules import INNER_RULES, ONLINE_INNER_RULES, RULES, Rules
from stream_split.core.detect.search import (
    OPENS_AFTER_SYNC, OPENS_AT_INPUT_FETCH, Unit, find_unit, input_fetch, loop_marker,
    turns_the_loop)
from stream_split.core.detect.skeleton import Node, flatten, occurrences
from stream_split.trace_format import BLOCKING_SYNC_NAMES, profiler_step_number

#: Why regular steps are the loop, when each of them is a top-level op of its thread (the
#: words ``explain`` has always given) and when some are not.
STEPS_AT_THE_TOP = "ProfilerStep#N spans repeat at the top of the loop thread"
#: Why a unit at the top of the loop thread is not the loop (``loop_inside``): the close path
#: descends into the container, and the instances at the top are minor roots.
LOOP_INSIDE = "its instances are minor roots around a container that holds more of them"
STEPS_NESTED = ("ProfilerStep#N spans numbered in a row, none overlapping the one before, "
                "cover most of their thread's time: trusted whatever their nesting")


def regular_steps(steps: list, rules: Rules = RULES) -> tuple[bool, str]:
    """Do the last ``OnlineRules.min_steps`` of one thread's ``ProfilerStep#N`` spans
    (``steps``: (start, end, name, at_top) in the order read, none nested in or overlapping
    the one before) make a loop to trust, whatever their nesting (another span may cross
    them, a wrapper hold them, the file hold them after their children)? They must be
    numbered in a row and cover most of the time from the first one's start to the last
    one's end (``VerdictRules.steps_cover``). Returns (verdict, why): why they are the loop
    (``STEPS_AT_THE_TOP`` when every one is a top-level op), or why not (yet)."""
    last = steps[-rules.online.min_steps:]
    if len(last) < rules.online.min_steps:
        return False, f"fewer than {rules.online.min_steps} ProfilerStep#N spans in a row"
    numbers = [profiler_step_number(name) for _, _, name, _ in last]
    if None in numbers or any(b != a + 1 for a, b in zip(numbers, numbers[1:])):
        return False, "the ProfilerStep#N spans are not numbered in a row"
    span = last[-1][1] - last[0][0]
    covered = sum(end - start for start, end, _, _ in last)
    if span <= 0 or covered < rules.verdict.steps_cover * span:
        return False, "the ProfilerStep#N spans leave most of their thread's time out"
    return True, STEPS_AT_THE_TOP if all(top for *_, top in steps) else STEPS_NESTED


def iteration_test(roots: list, row: list, unit: Unit, path: list, modules: list | None,
                   rules: Rules = RULES, answers: InnerAnswers | None = None) -> tuple[bool, str]:
    """The one test of both decision paths (online and at close): are the instances of
    ``unit``, found on ``row`` (inside the containers ``path``), iterations? At the top of
    the loop thread they are, unless one ``nn.Module`` call holds several of them (layers);
    inside a container see ``not_a_layer``. Returns (verdict, why). ``answers``: the online
    tries' answers of ``inner_repeat`` (``InnerAnswers``)."""
    if path:
        return not_a_layer(roots, row, unit, path, modules, rules, answers)
    if loop_inside(row, unit, rules):
        return False, LOOP_INSIDE
    held = module_holding_several(row, unit, modules, rules)
    if held:
        return False, held
    return True, "repeats at the top of the loop thread"


def loop_inside(row: list, unit: Unit, rules: Rules = RULES) -> bool:
    """Failure mode 3 with minor roots around the loop's container (a warm-up ``step``
    before the engine's busy loop, more after it): a chain of dominant containers on
    ``row`` (``dominant``, as the close path descends) holds a row with more instances of
    the unit's anchor than ``row`` has, and at least ``Rules.min_instances``. The
    instances on ``row`` are then the minor roots of the loop inside, not the loop."""
    anchor = unit.anchor
    here = len(occurrences(row, anchor))
    level = row
    for _ in range(rules.online.container_depth):
        container = dominant(level, rules)
        if container is None or not container.kids:
            return False
        level = container.kids
        inside = len(occurrences(level, anchor))
        if inside > here and inside >= rules.min_instances:
            return True
    return False


def not_a_layer(roots: list, row: list, unit: Unit, path: list, modules: list | None,
                rules: Rules = RULES, answers: InnerAnswers | None = None) -> tuple[bool, str]:
    """A unit found inside a container is an iteration only if it is not a layer: it recurs
    outside the container (failure mode 3: minor roots at the top level), or no single
    ``nn.Module`` call holds two instances (when Python frames were recorded), or each
    instance opens by copying its input to the device, or one instance itself contains a
    repeated sub-unit (a model with layers, not a layer)."""
    min_ops = rules.verdict.min_unit_ops
    size: list = []
    for node in first_instance(row, unit):
        flatten(node, size, min_ops)
    if len(size) < min_ops:  # a repeated aten::slice is no unit of work
        return False, f"an instance has fewer than {min_ops} ops"
    anchor = row[unit.first].sym
    outer_rows = [roots] + [p.kids for p in path[:-1]]
    if any(occurrences(outer, anchor) for outer in outer_rows):
        return True, "the unit also recurs outside its container (minor roots)"
    if modules:
        held = module_holding_several(row, unit, modules, rules)
        if held:
            return False, held
        return True, "no nn.Module call holds two instances"
    if opens_with_copy(row, unit, rules):
        return True, "each instance opens by copying its input to the device"
    return inner_repeat(row, unit, answers=answers)


def first_instance(row: list, unit: Unit) -> list:
    """The ops of the unit's first instance (as many as the representative has)."""
    return row[unit.first:unit.first + len(unit.pattern)]


def inner_repeat(row: list, unit: Unit, rules: Rules = INNER_RULES,
                 answers: InnerAnswers | None = None) -> tuple[bool, str]:
    """Is one instance a whole piece of work (it repeats a sub-unit inside: a model's
    layers) rather than a layer? ``answers``: those given lately (``InnerAnswers``), to give
    again where the instance's ops are the same."""
    flat: list = []
    for node in first_instance(row, unit):
        flatten(node, flat, rules.verdict.inner_flat_ops)
    if answers is not None:
        return answers.answer(flat, rules)
    return _inner_answer(flat, rules)


def _inner_answer(flat: list, rules: Rules) -> tuple[bool, str]:
    """``inner_repeat``'s answer on the first instance's ops, flattened (``flat``)."""
    # Blocks of a real model differ a little (a downsampling block, a checkpointed
    # one): a quarter of them alike, covering a third of the ops, is a model.
    inner = find_unit(flat, rules)
    # ... and the repeated sub-unit is a block of work, not the q/k/v/o projections of
    # one attention layer.
    if inner is not None and len(inner.pattern) >= rules.verdict.min_unit_ops:
        return True, (f"an instance contains a repeated sub-unit "
                      f"({inner.exact} x {len(inner.pattern)} ops)")
    return False, "an instance contains no repeated sub-unit"


#: What an op's ``inner_repeat`` answer can change by once the op is read: its kernels and
#: its host syncs, credited as its launches and syncs arrive (``skeleton.Skeletons.credit``,
#: ``credit_sync``), each a count that only grows.
_KERNELS, _SYNCS = attrgetter("gpu"), attrgetter("syncs")


class InnerAnswers:
    """``inner_repeat``'s answers on the first instances asked about lately, given again
    while the instance's ops are the same.

    The online tries ask ``confirmed_online`` (and, inside a container, ``iteration_test``)
    again each time their row grows, most often of the same unit, whose first instance is
    then the same ops; where no way believes the unit before the end, each asks
    ``inner_repeat``, a unit search on the instance's ops flattened. On the real traces of
    ``../shared``: 139 questions on 5 first instances (``xdit_flux.1``'s capture trace,
    0.32 of its 2.3 s), 46 on one (``torch_cpu``'s ``s6_varlen_unannotated``: 0.19 of
    0.53 s), 26 on one (``s2_no_schedule``), 27 on one (``b200/eager_trace``, asked by
    ``iteration_test``).

    The search reads of each op its symbol, its times, its kernels and its host syncs
    (``search.find_unit``; ``names`` are not passed). An answer is kept with the ops
    themselves (the very objects, held) and their kernels and syncs summed: an op's symbol
    and times never change once it is read, its children are in the flattened ops (a child
    read since makes other ops), and its kernels and syncs only grow, so equal sums over the
    same ops mean the same counts on each: the search would read the same, and answer the
    same. Else it is made again. At most ``MemoryRules.inner_answers`` answers are kept (the
    latest)."""

    __slots__ = ("_kept",)

    def __init__(self):
        self._kept: list = []  # (rules, ops, kernels, syncs, answer), the latest last

    def answer(self, flat: list, rules: Rules) -> tuple[bool, str]:
        """``inner_repeat``'s answer on ``flat`` (the first instance's ops, flattened)."""
        ops = tuple(flat)
        kernels, syncs = sum(map(_KERNELS, ops)), sum(map(_SYNCS, ops))
        for kept_rules, kept_ops, kept_kernels, kept_syncs, answer in self._kept:
            if kept_rules is rules and kept_kernels == kernels and kept_syncs == syncs \
                    and kept_ops == ops:
                return answer
        answer = _inner_answer(flat, rules)
        self._kept.append((rules, ops, kernels, syncs, answer))
        del self._kept[:-RULES.memory.inner_answers]
        return answer

    def clear(self) -> None:
        """Forget every answer (the unit is decided: no more online tries)."""
        self._kept = []


def module_holding_several(row: list, unit: Unit, modules: list | None,
                           rules: Rules = RULES) -> str | None:
    """Layers of one model: a single outermost nn.Module call holds several instances."""
    starts = [row[p].start for p in unit.positions]
    for m_start, m_end in modules or ():
        if sum(1 for s in starts if m_start <= s < m_end) >= rules.verdict.module_instances:
            return "one nn.Module call holds several instances"
    return None


def every_fetch_opens(row: list, unit: Unit) -> bool:
    """Every input fetch read so far opens an instance of the unit. A unit learned from a few
    cycles only (three idle polls after two steps, before any GPU work is known) leaves the
    earlier fetches outside it: it is not the loop yet."""
    if unit.fetch is not None:  # the loop's edge: each instance opens just before its fetch
        return _every_fetch_after_an_edge(row, unit)
    fetch = row[unit.first].sym
    opens = set(unit.positions)
    return all(i in opens for i, node in enumerate(row) if node.sym == fetch)


def _every_fetch_after_an_edge(row: list, unit: Unit) -> bool:
    """``every_fetch_opens`` where the loop's edge moved each instance's beginning back from
    its fetch (``search._fetch_edge``): every fetch is the first of its instance."""
    ends = unit.positions[1:] + [len(row)]
    firsts = {next((q for q in range(a, b) if row[q].sym == unit.fetch), None)
              for a, b in zip(unit.positions, ends)}
    return all(i in firsts for i, node in enumerate(row) if node.sym == unit.fetch)


def opens_with_copy(row: list, unit: Unit, rules: Rules = RULES) -> bool:
    """Each instance read so far (all but the last, whose children may be unread) opens by
    copying its input to the device: its first op (the first child of an instance that is
    one op) launches a memory copy and is short beside the instance. A layer of a model
    works on what is on the device already; a step (a request) brings its input there."""
    pos = unit.positions
    if len(pos) < rules.min_instances:
        return False
    for a, b in zip(pos, pos[1:]):
        first = row[a]
        span = row[b].start - first.start if b - a > 1 else first.end - first.start
        if b - a == 1:
            if not first.kids:
                return False
            first = first.kids[0]
        if not first.copies or first.end - first.start > span / rules.verdict.copy_parts:
            return False
    return True


def dominant(row: list, rules: Rules = RULES, extremes: tuple | None = None) -> Node | None:
    """The longest op, if it holds a good part (``VerdictRules.container_parts``) of the
    row's time: a wrapper to look inside. ``extremes``: the row's latest end and longest op
    when already known (``skeleton.RowExtremes``), else read here."""
    latest, top = extremes or (max(n.end for n in row), max(row, key=lambda n: n.end - n.start))
    span = latest - row[0].start
    if span > 0 and (top.end - top.start) >= span / rules.verdict.container_parts:
        return top
    return None


def confirmed_online(row: list, unit: Unit, path: list, names: list, section_read: bool,
                     rules: Rules = RULES, answers: InnerAnswers | None = None) -> str | None:
    """Can ``unit``, found on ``row`` of the loop thread before the end of the input and
    passing ``iteration_test``, be believed now? Either three cycles of the loop (like the
    unit, or idle) open with the loop's input fetch (inside a container: a copy of each
    instance's input to the device), or begin right after the previous one's host sync and
    turn the loop, or (``section_read``: the loop thread's whole CPU section is read, so no
    later instance can differ) every instance is like the unit and turns the loop, or three
    instances are exact and each is a whole piece of work. Unlike instances among them (idle
    cycles) are allowed only once GPU work is known. Returns why (to append to the
    iteration test's), or None: not yet. (At the top of a thread each way needs a loop
    marker or three exact instances: ``skeleton.RootCounts.may_confirm``, which the online
    tries ask first, ``exact_needed``, which they pass to the search, and ``exact_possible``,
    which spares the search of a short row of small ops; a new way must be
    added there too.)"""
    # Every instance so far like the unit? Among so few, an idle cycle or another path
    # could be taken for the unit when no GPU work is known yet (a Kineto file's CPU
    # section comes before its launches); with GPU work known, the unit is the busy one.
    alike = all(shape == 0 for shape in unit.shapes[:-1]) or any(n.gpu for n in row)
    # Cycles of the loop head: like the unit, or idle (the fetch found nothing to do).
    cycles = unit.like + unit.idle if alike else 0
    enough = cycles >= rules.min_instances and unit.like >= rules.min_like
    if enough and (unit.opening == OPENS_AT_INPUT_FETCH and every_fetch_opens(row, unit)
                   or path and opens_with_copy(row, unit, rules)):
        return "each instance opens with the loop's input fetch"
    if enough and unit.opening == OPENS_AFTER_SYNC and turns_the_loop(unit, names):
        # (A loop between syncs with no optimizer step in it may be the inner loop of a
        # step whose update is still to come: a rollout's tokens. It waits for close.)
        return "each instance begins right after the previous one's host sync"
    if section_read and unit.n >= rules.min_instances and unit.like == unit.n and \
            all(shape == 0 for shape in unit.shapes) and turns_the_loop(unit, names):
        return ("at the end of the loop thread's CPU section every instance is "
                "like the unit and turns the loop")
    if exact_row(row, unit, rules):
        return f"{unit.n} instances, every one exact, make the whole row"
    return _whole_exact_instances(row, unit, alike, rules, answers)


def exact_needed(row: list, path: list, names: list, section_read: bool,
                 rules: Rules = RULES) -> int:
    """The exact instances (``Unit.exact``) that a unit found on ``row`` needs for
    ``confirmed_online`` to believe it, where only its ways through exact instances could
    (``exact_row``, ``_whole_exact_instances``): at the top of the thread (no ``path``),
    before its section is read whole, with no input fetch on the row (the input-fetch way
    opens at one) and no blocking sync with a loop marker (the sync way opens after a sync
    and turns the loop: a marker in the unit's spine). Else 0: any unit may do. The online
    tries pass it to ``find_unit`` (``least_exact``), which then spares the choice and
    opening of a unit no way would believe."""
    if path or section_read:
        return 0
    kinds = [names[s] for s in {node.sym for node in row}]
    if any(input_fetch(name) for name in kinds) or (
            any(name in BLOCKING_SYNC_NAMES for name in kinds)
            and any(loop_marker(name) for name in kinds)):
        return 0
    return min(rules.min_instances, rules.online.exact_row_instances)


def exact_possible(row: list, width: int, rules: Rules = RULES) -> bool:
    """May a unit on ``row``, at the top of the thread, whose instances hold ``width``
    top-level ops be believed through its exact instances (the ways ``exact_needed``
    leaves), as far as the ops tell? ``exact_row`` needs
    ``OnlineRules.exact_row_instances`` of them, and ``_whole_exact_instances`` a first
    instance that, with the ops below it, repeats a sub-unit (``inner_repeat``):
    ``_WHOLE_LEAST_OPS`` ops at least. On a short row none of whose stretches of ``width``
    ops holds as many with the ops below them (the top of a step that calls ``zero_grad``,
    ``forward`` and ``step``) there is no such unit: the online tries spare its search
    (``width``: a ``least``-th of the row, its most), or end it once no candidate of enough
    exact instances is that wide (``find_unit``'s ``wide``). Read only while ``width`` is
    below that many ops."""
    if width >= _WHOLE_LEAST_OPS or len(row) >= rules.online.exact_row_instances:
        return True
    sizes: list = []  # each op's, with the ops below it, up to ``_WHOLE_LEAST_OPS``
    held = 0  # ... summed over the latest ``width`` of them
    for node in row:
        flat: list = []
        flatten(node, flat, _WHOLE_LEAST_OPS)
        sizes.append(len(flat))
        held += len(flat)
        if len(sizes) > width:
            held -= sizes[-width - 1]
        if held >= _WHOLE_LEAST_OPS:
            return True
    return False


#: The fewest ops (with the ops below them) of an instance that repeats a sub-unit
#: (``inner_repeat``): ``min_like`` instances of it alike (the fewer either of its rules
#: asks), the representative of ``VerdictRules.min_unit_ops`` ops at least and each other
#: within ``Rules.length_slack`` of its op count (alike, unweighed: ``search._likeness``).
_WHOLE_LEAST_OPS = min(
    rules.verdict.min_unit_ops + (rules.min_like - 1) * math.ceil(
        rules.verdict.min_unit_ops / rules.length_slack)
    for rules in (INNER_RULES, ONLINE_INNER_RULES))


def exact_row(row: list, unit: Unit, rules: Rules = RULES) -> bool:
    """Is ``row`` nothing but instances of ``unit``, every one exact, from its first op to
    the latest (the last one may be unfinished), and are there at least
    ``OnlineRules.exact_row_instances`` of them? A loop of one op is then believed online,
    whatever its instances hold."""
    width = len(unit.pattern)
    return unit.n >= rules.online.exact_row_instances and unit.exact == unit.n and \
        unit.first == 0 and len(row) - unit.positions[-1] <= width and \
        unit.positions[-1] == (unit.n - 1) * width


def _whole_exact_instances(row: list, unit: Unit, alike: bool, rules: Rules,
                           answers: InnerAnswers | None = None) -> str | None:
    """``confirmed_online``'s last way: three instances exact, each a whole piece of work
    (it repeats a sub-unit: ``inner_repeat``)."""
    if unit.exact < rules.min_instances:
        return None
    if unit.opening == OPENS_AT_INPUT_FETCH and not every_fetch_opens(row, unit) \
            and not any(n.gpu for n in row):
        # A fetch opens no instance (the input-fetch way requires that it does): an
        # instance that fetches twice may be two turns of the loop, a busy one and an idle
        # poll (a server alternating them three times running), which only the GPU work to
        # come tells apart from a step of micro-batches. It waits for that work (at close
        # in a Kineto file).
        return None
    whole, inner = inner_repeat(row, unit, ONLINE_INNER_RULES if alike else INNER_RULES,
                                answers)
    return inner if whole else None


def confidence(unit: Unit, rules: Rules = RULES) -> float:
    """How sure the evidence is of ``unit``: its coverage, mean similarity and number of
    instances (up to ``VerdictRules.confident_instances``)."""
    return min(1.0, unit.coverage) * (unit.score / unit.n) * min(
        1.0, unit.n / rules.verdict.confident_instances)
