"""The pure unit search (stream_split.core.detect.search), fed rows of sibling ops directly."""
import random

import pytest

from stream_split.core.detect.rules import RULES, Rules
from stream_split.core.detect import search
from stream_split.core.detect.search import (
    OPENS_AT_LOOP_EDGE, OPENS_AT_TURN_EDGE, SearchMemo, cycle_kinds, find_unit, last_instance_end, similarity,
    sure_ops, upper_median)


class Op:
    __slots__ = ("sym", "start", "end", "gpu", "syncs")

    def __init__(self, sym, start, end, gpu=0, syncs=0):
        self.sym, self.start, self.end, self.gpu, self.syncs = sym, start, end, gpu, syncs


def level_of(pattern, durations, gpu=None, gap=1.0):
    """Ops named by the symbols of ``pattern`` (a list of ints), one after the other."""
    ops, t = [], 0.0
    for sym in pattern:
        d = durations[sym]
        ops.append(Op(sym, t, t + d, (gpu or {}).get(sym, 0)))
        t += d + gap
    return ops


STEP = [0, 1, 2, 3]  # fetch, forward, backward, optimizer
DUR = {0: 10.0, 1: 100.0, 2: 200.0, 3: 50.0, 7: 1.0, 8: 300.0, 9: 2.0}


def test_the_same_work_is_similarity_one_and_other_work_is_low():
    a = {1: 0.5, 2: 0.5}
    assert similarity(a, dict(a)) == 1.0
    assert similarity(a, {1: 0.5, 4: 0.5}) == pytest.approx(1 / 3)


def test_exact_repeats_are_found_from_their_first_op():
    unit = find_unit(level_of(STEP * 5, DUR))
    assert unit.positions == [0, 4, 8, 12, 16] and unit.like == 5


def test_a_sporadic_small_op_costs_its_share_of_the_work_not_the_match():
    pattern = STEP + [0, 1, 7, 2, 3] + STEP + [0, 1, 2, 7, 7, 3] + STEP
    unit = find_unit(level_of(pattern, DUR))
    assert unit.n == 5 and unit.like == 5
    assert min(unit.similarity) > 0.9


def test_a_step_with_an_extra_big_op_is_tolerated_but_a_different_step_is_not():
    pattern = STEP * 2 + STEP + [8] + STEP * 2
    unit = find_unit(level_of(pattern, DUR))
    assert unit.n == 5 and unit.like >= 4
    # Another kind of step (another phase, another model) is unlike the unit.
    unit = find_unit(level_of(STEP * 3 + [0, 8, 8, 8] + STEP * 2, DUR))
    assert unit.n == 6 and unit.similarity[3] < RULES.like
    assert unit.shapes[3] != 0


def test_two_instances_need_to_hold_nearly_all_of_the_work():
    assert find_unit(level_of(STEP * 2, DUR)).n == 2
    # Two cheap repeats beside one big op that holds most of the work: no unit.
    assert find_unit(level_of([9, 9, 8], {9: 5.0, 8: 1000.0})) is None


def test_a_super_period_of_whole_steps_loses_to_the_steps():
    # An eval op (8) after every third step: steps, not groups of three.
    pattern = (STEP * 2 + STEP + [8]) * 3
    unit = find_unit(level_of(pattern, DUR))
    assert unit.n == 9


def test_the_head_of_the_step_is_found_where_a_head_op_is_missing():
    # Steps begin with 9 then 0 (both small); 9 is dropped from two steps.
    full = [9] + STEP
    pattern = full + STEP + full + full + STEP + full
    unit = find_unit(level_of(pattern, {**DUR, 0: 3.0}))
    starts = [pattern[p] for p in unit.positions]
    assert len(unit.positions) == 6
    assert starts.count(9) == 4 and starts.count(0) == 2


def test_idle_cycles_take_another_path_and_are_reported_apart():
    shapes = [0, 0, ("another path", (0, 5)), 0]
    assert cycle_kinds(shapes, [40, 42, 1, 41]) == ["iteration", "iteration", "idle",
                                                   "iteration"]
    # An unlike step on the same path with little GPU work is still an iteration.
    assert cycle_kinds([0, 0, (0, 1), 0], [40, 42, 1, 41]) == ["iteration"] * 4


def test_the_last_instance_ends_before_a_big_new_op_but_takes_small_noise():
    tail = level_of([0, 1, 2, 3, 7, 7, 8], DUR)
    seen = {0, 1, 2, 3}
    end = last_instance_end(tail, sure_ops([4, 4]), seen, typical_us=400.0)
    assert end == tail[5].end  # the two small new ops, not the big one after them


def test_every_rule_is_named_and_the_rules_are_frozen():
    assert set(Rules._fields) >= {"min_instances", "like", "two_similarity",
                                  "two_coverage", "min_coverage"}
    with pytest.raises(AttributeError):
        RULES.like = 0.1


# A training step with GPU work per op: fetch (0), forward (1), loss (4), optimizer step (3),
# zero_grad (5), sync (6); an eval pass is three more forwards, each with its sync.
TRAIN = [0, 1, 4, 3, 5, 6]
EVAL = [1, 6, 1, 6, 1, 6]
TRAIN_DUR = {0: 5.0, 1: 100.0, 3: 60.0, 4: 5.0, 5: 2.0, 6: 20.0}
TRAIN_GPU = {1: 40, 3: 30, 4: 2, 5: 1}
TRAIN_NAMES = {0: "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
               1: "aten::linear", 3: "Optimizer.step#AdamW.step", 4: "aten::cross_entropy_loss",
               5: "Optimizer.zero_grad#AdamW.zero_grad", 6: "aten::item"}


def _names():
    """The name of each symbol (0-9), as the detector passes them."""
    return [TRAIN_NAMES.get(s, f"op{s}") for s in range(10)]


def test_an_eval_pass_every_other_step_does_not_make_the_forward_the_unit():
    # Half the steps carry an eval pass that doubles their work: by cost they are unlike a
    # plain step, and the forward repeats more regularly than the step. Each step holds the
    # loop's spine (fetch, loss, optimizer step, zero_grad) exactly once: the step is the unit.
    pattern = (TRAIN + TRAIN + EVAL) * 4 + TRAIN
    unit = find_unit(level_of(pattern, TRAIN_DUR, TRAIN_GPU), names=_names())
    assert unit.n == 9
    assert {0, 3, 4, 5} <= unit.spine
    assert unit.like == 9, "every step holds the spine once, eval pass or not"


def test_a_variable_length_inner_loop_is_part_of_the_step_that_holds_the_optimizer():
    # A rollout of 2 to 6 forwards (each with its sync) before the update: the forwards repeat
    # far more often, but the optimizer's step is once per turn of the outer loop only.
    pattern = []
    for length in (2, 5, 3, 6, 2, 4):
        pattern += [7] + [1, 6] * length + [4, 3, 5]
    dur = {**TRAIN_DUR, 7: 1.0}
    unit = find_unit(level_of(pattern, dur, TRAIN_GPU), names=_names())
    assert unit.n == 6


def test_without_the_loop_markers_many_whole_steps_beat_their_super_period():
    # Four steps then an eval op: the coarse cut at the eval op holds four steps each (the
    # steps' spine four times, no marker once): the steps stay the unit.
    pattern = (TRAIN * 4 + [9]) * 4
    dur = {**TRAIN_DUR, 9: 30.0}
    unit = find_unit(level_of(pattern, dur, TRAIN_GPU), names=_names())
    assert unit.n == 16


def test_unweighed_the_last_instance_ends_by_its_ops_not_its_time():
    # A flattened step (parents' time holds their children's): four layers (4, 5, 6, 7) and
    # the loss (8); the last layer runs faster than the others. It is still one layer.
    rules = RULES._replace(weigh=False, like=1.0, like_share=0.24, min_like=4,
                           min_coverage=0.3)
    layer = [4, 5, 6, 7]
    level = level_of(layer * 3, {4: 10.0, 5: 30.0, 6: 10.0, 7: 30.0}) + \
        level_of(layer + [8], {4: 2.0, 5: 5.0, 6: 2.0, 7: 5.0, 8: 50.0})
    unit = find_unit(level, rules)
    assert unit is not None and len(unit.pattern) == 4 and unit.like == 4


def test_a_run_of_inserted_small_ops_does_not_hide_the_step_head_behind_it():
    # Steps begin with 9 (small, one of the step's own ops); noise (tiny ops 5 and 6, each
    # in one step only) sits between 9 and the anchor 0, longer than the step itself.
    dur = {**DUR, 0: 3.0, 5: 0.2, 6: 0.2}
    full = [9] + STEP
    # 9 is missing from two steps: the noisy ones are half the evidence for it.
    pattern = full + [9, 5, 5, 5, 5, 5] + STEP + STEP + [9, 6, 6, 6, 6, 6] + STEP + STEP + full
    unit = find_unit(level_of(pattern, dur))
    assert [pattern[p] for p in unit.positions] == [9, 9, 0, 9, 0, 9]


def test_the_first_instance_votes_for_the_head_when_few_steps_kept_it():
    # Three steps (one with an eval op 8); head ops 9 then 7 are dropped from the second
    # step: the first and the last still show them before the anchor.
    dur = {**DUR, 0: 3.0}
    pattern = [9, 7] + STEP + STEP + [8] + [9, 7] + STEP
    unit = find_unit(level_of(pattern, dur))
    assert unit.n == 3 and pattern[unit.positions[0]] == 9 and pattern[unit.positions[2]] == 9


def test_a_stray_sync_in_one_of_few_steps_does_not_place_the_loop_after_it():
    # Steps 9, 1, 2, 3 (9 small); a stray sync (10) just before 1 in the first step only,
    # an eval op (8) after the second. The loop begins at 9, not after the sync.
    names = {i: f"op{i}" for i in range(12)}
    names[10] = "aten::item"
    names = [names[i] for i in range(12)]
    dur = {**DUR, 9: 10.0, 10: 1.0}
    pattern = [9, 10, 1, 2, 3] + [9, 1, 2, 3, 8] + [9, 1, 2, 3]
    unit = find_unit(level_of(pattern, dur), names=names)
    assert "sync" not in unit.opening
    assert [pattern[p] for p in unit.positions] == [9, 9, 9]


def level_with_edges(steps, durations, edge=500.0, gap=1.0):
    """Ops of ``steps`` (lists of symbols) one after the other: ``gap`` between the ops of a
    step, ``edge`` (the host running the loop itself) before each step's first op."""
    ops, t, pattern = [], 0.0, []
    for k, step in enumerate(steps):
        for i, sym in enumerate(step):
            t += (edge if k and not i else gap) if ops else 0.0
            ops.append(Op(sym, t, t + durations[sym]))
            t += durations[sym]
            pattern.append(sym)
    return ops, pattern


@pytest.mark.parametrize("kept_by", [2, 0])
def test_a_step_first_op_noise_dropped_elsewhere_joins_its_step_after_the_loop_edge(kept_by):
    # Three steps whose first op is a small 5 (``aten::randint``), but for one, where noise
    # dropped it and kept a small 6 (``aten::randn``) that the others lost: seen once, it
    # gets no vote; it lies after the wide gap where the loop turns, so it opens the step
    # (the first step too: the level's first op, its gap after narrower than the loop's edge).
    dur = {**DUR, 5: 4.0, 6: 15.0}
    steps = [[5] + STEP[1:], [5] + STEP[1:] + [8], [5] + STEP[1:]]
    steps[kept_by][0] = 6
    ops, pattern = level_with_edges(steps, dur)
    unit = find_unit(ops)
    assert [pattern[p] for p in unit.positions] == [step[0] for step in steps]


def test_a_small_op_before_the_loop_edge_stays_with_the_step_it_ends():
    # The second step ends with a tiny 7 (inserted by noise, or its own stray op), then the
    # loop turns (wide gap): 7 is seen once, before an instance, yet it is the previous
    # step's.
    dur = {**DUR, 5: 4.0, 7: 1.0}
    steps = [[5] + STEP[1:], [5] + STEP[1:] + [7], STEP[1:], [5] + STEP[1:]]
    ops, pattern = level_with_edges(steps, dur)
    ops[len(steps[0]) + len(steps[1]) - 1].start -= 100.0  # 7 right after the optimizer
    ops[len(steps[0]) + len(steps[1]) - 1].end -= 100.0
    unit = find_unit(ops)
    assert [pattern[p] for p in unit.positions] == [5, 5, 1, 5]


def test_a_big_op_seen_once_before_the_first_step_is_the_prologue_not_its_head():
    # ``load_weights`` (8, big) just before the first step, with no gap after it: noise drops
    # small ops only, so a big op seen once is no step head that the others lost.
    dur = {**DUR, 5: 4.0}
    ops, pattern = level_with_edges([[8, 5] + STEP[1:], [5] + STEP[1:], [5] + STEP[1:]], dur)
    unit = find_unit(ops)
    assert [pattern[p] for p in unit.positions] == [5, 5, 5]
    assert unit.positions[0] == 1


def _noisy_training(seed: int, steps: int) -> list:
    """Ops of ``steps`` training steps (``TRAIN``, an eval pass now and then), with noise:
    durations vary, small ops (7, 8, 9) are inserted and the zero_grad is sometimes missing."""
    rng = random.Random(seed)
    pattern = []
    for _ in range(steps):
        step = list(TRAIN) + (EVAL if rng.random() < 0.2 else [])
        if rng.random() < 0.2:
            step.remove(5)
        for _ in range(rng.randrange(3)):
            step.insert(rng.randrange(1, len(step)), rng.choice([7, 8, 9]))
        pattern += step
    ops, t = [], 0.0
    for sym in pattern:
        d = TRAIN_DUR.get(sym, 1.0) * rng.uniform(0.8, 1.25)
        ops.append(Op(sym, t, t + d))
        t += d + rng.uniform(0.5, 2.0)
    return ops


def _grown(ops: list, seed: int, kernels=None):
    """The level of ``ops`` grown op by op, as the online tries see it (one list): yields
    (i, the level up to ``ops[i]``). With ``kernels``, GPU work is credited meanwhile, to
    old ops too (a launch read late): every fifth op, ``kernels(the op just read)`` to a
    recent op, now and then to an old one."""
    rng = random.Random(seed)
    level: list = []
    for i, op in enumerate(ops):
        level.append(op)
        if kernels is not None and i % 5 == 4:
            level[rng.randrange(len(level)) if i % 15 == 4 else -1].gpu += kernels(level[-1])
        yield i, level


@pytest.mark.parametrize("seed", range(3))
def test_a_remembered_search_finds_what_a_fresh_one_finds_as_the_level_grows(seed):
    # Online the detector searches a level again as it grows, with the memo of the last
    # search; GPU work is credited meanwhile, to old ops too (a launch read late). Every
    # answer is the fresh search's, field for field.
    memo = SearchMemo()
    for i, level in _grown(_noisy_training(seed, 14), seed,
                           lambda op: TRAIN_GPU.get(op.sym, 1)):
        if len(level) < 8 or i % 3:
            continue
        remembered = find_unit(level, names=_names(), whole=False, memo=memo)
        fresh = find_unit(list(level), names=_names(), whole=False)
        assert remembered == fresh


@pytest.mark.parametrize("seed", range(3))
def test_a_remembered_rows_positions_are_those_read_anew_as_it_grows(seed):
    # ``SearchMemo.positions``: from the row's second search on, each symbol's positions are
    # kept and extended by the ops added since; the same candidates, in the same order, as
    # ``_Positions`` finds sorting the row anew (by one op or several at a time, on rows of
    # few kinds and of many)
    rng = random.Random(seed)
    memo, level = SearchMemo(), []
    kinds = (3, 40, 400)[seed]
    while len(level) < 600:
        for _ in range(rng.choice([1, 1, 2, 7])):
            level.append(Op(rng.randrange(kinds) if rng.random() < 0.9 else 1000 + len(level),
                            0.0, 1.0))
        memo.begin(level, RULES)
        syms = [op.sym for op in level]
        kept, anew = memo.positions(syms), search._Positions(syms)
        assert list(kept.items()) == list(anew.items())
        assert kept[-1] == anew[-1] == []  # a symbol not in the row: found when asked
    memo.begin(list(level), RULES)  # another row: sorted anew, and kept from its next search
    assert memo.positions(syms) == search._Positions(syms)


def test_the_memo_holds_one_search_worth_not_the_history_of_the_level():
    ops = _noisy_training(7, 20)
    memo = SearchMemo()
    level: list = []
    for op in ops:
        level.append(op)
        if len(level) >= 8:
            find_unit(level, names=_names(), whole=False, memo=memo)
    once = SearchMemo()
    find_unit(list(level), names=_names(), whole=False, memo=once)
    assert 0 < len(memo) <= 2 * len(once)


def test_beyond_its_budget_the_memo_keeps_no_more_and_the_answers_stay_the_same():
    # A huge level: each search keeps values up to the budget (in ops covered), makes the
    # rest and lets it go, as a search without a memo does.
    small = RULES._replace(memory=RULES.memory._replace(memo_budget=300))
    ops = _noisy_training(11, 20)
    memo = SearchMemo()
    level: list = []
    for i, op in enumerate(ops):
        level.append(op)
        if len(level) >= 8 and i % 4 == 0:
            remembered = find_unit(level, small, names=_names(), whole=False, memo=memo)
            assert remembered == find_unit(list(level), small, names=_names(), whole=False)
            assert 0 < memo.size <= 2 * 300


def _coverage_anew(row: list, cut, last: tuple, rules: Rules, memo: SearchMemo) -> float:
    """A cut's coverage the long way, every instance read again (as before it was kept with
    the cut): the instances of about the median length and the last, each span's kernels,
    or each window's time sorted, capped and summed one by one."""
    m = len(row)
    width = upper_median((b - a for a, b in cut.spans), 0)
    spans = [(a, b) for a, b in cut.spans
             if rules.cover_shortest * width <= b - a <= rules.cover_longest * width] + [last]
    if not rules.weigh:
        return sum(b - a for a, b in spans) / m
    if memo.gpu_total > 0:
        return sum(sum(row[i].gpu for i in range(a, b)) for a, b in spans) / memo.gpu_total
    total = memo.row_end - row[0].start
    times = sorted((row[b].start if b < m else max(row[i].end for i in range(a, b)))
                   - row[a].start for a, b in spans)
    cap = rules.time_cap * upper_median(times)
    return sum(min(t, cap) for t in times) / total if total > 0 else 0.0


@pytest.mark.parametrize("credited", [False, True], ids=["time", "kernels"])
@pytest.mark.parametrize("rules", [RULES, RULES._replace(weigh=False)], ids=["weighed", "ops"])
@pytest.mark.parametrize("seed", range(2))
def test_what_a_cut_keeps_of_its_instances_is_what_they_give_read_anew(seed, rules, credited,
                                                                      monkeypatch):
    # A cut keeps what each search reads of its instances but the last (their ops, spine,
    # representatives tried, coverage: ``search._Cut``): at each search of a level grown op
    # by op, with kernels credited meanwhile (old ops too: the cut is dropped), each is what
    # the instances give read anew, and the coverage is the one summed the long way.
    evaluate = search._evaluate
    checked = []

    def checking(pos, anchor, row, syms, rules, memo):
        unit = evaluate(pos, anchor, row, syms, rules, memo)
        cut = memo.cut(tuple(pos))
        last = search._segments(cut, row, rules, memo)[-1]
        assert search._coverage(row, cut, last, rules, memo) == \
            _coverage_anew(row, cut, last, rules, memo)
        if cut.shapes is not None:
            shapes = [tuple(syms[a:b]) for a, b in cut.spans]
            assert cut.shapes == shapes
            assert cut.spine is None or cut.spine == search._loop_body(shapes, rules)
            if cut.trials is not None:
                kernels = [sum(row[i].gpu for i in range(a, b)) for a, b in cut.spans]
                last_shape = tuple(syms[last[0]:last[1]])
                assert cut.trials == search._trials(cut, kernels + [0], shapes + [last_shape],
                                                    rules)
            checked.append(cut)
        return unit
    monkeypatch.setattr(search, "_evaluate", checking)
    memo = SearchMemo()
    for i, level in _grown(_noisy_training(seed, 12), seed, (lambda op: 1) if credited else None):
        if len(level) >= 8 and i % 2 == 0:
            find_unit(level, rules, names=_names(), whole=False, memo=memo)
    assert len({id(cut) for cut in checked}) < len(checked)  # kept, and asked again


def test_a_hope_that_reads_what_another_read_before_judges_as_one_that_reads_anew():
    # Each search's hopes read the similarities an earlier search's read (``_Hope.lost``'s
    # ``reads``, kept with them): every hope judges as one that reads them all itself, and
    # goes on from there alike, whether the instances hold the spine, whether that is
    # evidence of turns, whatever the coverage.
    rng = random.Random(5)
    n = 40
    sims = [rng.choice([rng.uniform(0.2, 0.7), rng.uniform(0.7, 1.0)]) for _ in range(n - 1)]
    idle = [rng.random() < 0.1 for _ in range(n - 1)]
    reads_of: dict = {}  # the reads kept with the first k similarities

    def state(hope):
        return hope.read, hope.unlike, hope.score, hope.least, hope.gone
    for coverage in (0.5, 0.8, 1.0):
        for held in (False, True):
            for turns in (False, True):
                flags = [held] * (n - 1) + [False]
                for k in range(1, n):
                    anew = search._Hope(n, coverage, flags, turns, RULES)
                    kept = search._Hope(n, coverage, flags, turns, RULES)
                    assert kept.lost(sims[:k], idle[:k], reads_of.setdefault(k, {})) == \
                        anew.lost(sims[:k], idle[:k])
                    assert state(kept) == state(anew)
                    kept.lost(sims, idle)
                    anew.lost(sims, idle)
                    assert state(kept) == state(anew)
    assert all(len(reads) == 4 for reads in reads_of.values())  # each read once, used thrice


# Loops on the CPU alone (issue 21): no GPU work to weigh, each op's time following its shapes.

CPU_NAMES = {10: "aten::randint", 11: "Optimizer.zero_grad#Adam.zero_grad",
             12: "aten::linear", 13: "aten::cross_entropy_loss",
             14: "autograd::engine::evaluate_function: torch::autograd::GraphRoot",
             15: "autograd::engine::evaluate_function: MmBackward0",
             16: "Optimizer.step#Adam.step", 17: "aten::stack", 18: "aten::softmax",
             19: "aten::topk", 20: "aten::add_"}


def _cpu_names():
    return [CPU_NAMES.get(s, f"op{s}") for s in range(21)]


def _cpu_row(turns, edge=30.0, gap=1.0, waits=()):
    """Ops of ``turns`` (each a list of (symbol, duration)), ``gap`` apart inside a turn,
    ``edge`` apart between turns, and 1000 before the turns whose index is in ``waits``.
    Returns the row and where each turn begins."""
    ops, starts, t = [], [], 0.0
    for i, turn in enumerate(turns):
        t += 1000.0 if i in waits else (edge if i else 0.0)
        starts.append(len(ops))
        for k, (sym, d) in enumerate(turn):
            t += gap if k else 0.0
            ops.append(Op(sym, t, t + d))
            t += d
    return ops, starts


def _dynamic_step(samples, scale):
    """A training step on the CPU: one ``randint`` per sample, then zero_grad, forward,
    backward and the optimizer's step, the forward and backward as long as the shapes."""
    return ([(10, 2.0)] * samples + [(11, 3.0), (12, 20.0 * scale), (12, 20.0 * scale),
                                     (13, 5.0 * scale), (14, 1.0), (15, 40.0 * scale),
                                     (15, 40.0 * scale), (16, 30.0)])


def test_dynamic_shapes_steps_are_the_unit_and_begin_at_the_loop_edge():
    # Batches of 3 to 12 samples, shapes 0.1x to 5x: by cost no two steps are alike, and no
    # op opens every step once. Each holds one zero_grad and one optimizer step: the step is
    # the unit, and it begins after the widest gap past the optimizer's step, so the
    # per-sample randint calls that make its batch are its own.
    steps = [(3, 0.1), (12, 3.0), (5, 0.2), (9, 5.0), (4, 0.15), (11, 4.0), (6, 1.0)]
    row, starts = _cpu_row([_dynamic_step(n, s) for n, s in steps])
    unit = find_unit(row, names=_cpu_names())
    assert unit.positions == starts
    assert unit.opening == OPENS_AT_LOOP_EDGE


def test_a_server_turn_that_only_waited_is_a_turn_of_its_own():
    # Busy turns (stack, forward, softmax, topk: as long as the batch) and idle polls (a
    # 1 ms sleep, then one heartbeat op): every turn is an iteration, the polls too.
    busy = lambda scale: [(17, 5.0), (12, 30.0 * scale), (12, 30.0 * scale), (18, 5.0),
                          (19, 5.0)]
    turns = [busy(1), busy(2), [(20, 2.0)], busy(1), [(20, 2.0)], [(20, 2.0)], busy(3),
             busy(1), [(20, 2.0)], busy(2)]
    row, starts = _cpu_row(turns, edge=10.0, waits={2, 4, 5, 8})
    unit = find_unit(row, names=_cpu_names())
    assert unit.positions == starts


#: A GPU server's scheduler step: (symbol, duration, kernels launched, blocking syncs).
_CAT, _REPLAY, _TO_HOST, _VIEW, _TO_DEVICE, _RANDINT, _LINEAR, _ARGMAX = range(30, 38)


def _turn(prompts=0, batch=0):
    """One scheduler step, as the recorded server runs it: each arriving prompt through the
    model eagerly, one decode token for the ``batch`` running requests (the tokens in, one
    graph replay, the next tokens to the host: a blocking copy; each sent back to the
    device: a blocking copy each), then each new request's first token to the host."""
    prefill = [(_RANDINT, 3.0, 1, 0), (_LINEAR, 40.0, 30, 0), (_ARGMAX, 3.0, 1, 0)] * prompts
    decode = ([(_CAT, 3.0, 1, 0), (_REPLAY, 8.0, 24, 0), (_TO_HOST, 20.0, 1, 1)]
              + [(_VIEW, 1.0, 0, 0), (_TO_DEVICE, 10.0, 1, 1)] * batch) if batch else []
    return prefill + decode + [(_TO_HOST, 20.0, 1, 1)] * prompts


def _server_row(turns, inner_gap=5.0, edge=60.0):
    ops, starts, t = [], [], 0.0
    for turn in turns:
        t += edge
        starts.append(len(ops))
        for k, (sym, d, gpu, syncs) in enumerate(turn):
            t += inner_gap if k else 0.0
            ops.append(Op(sym, t, t + d, gpu, syncs))
            t += d
    return ops, starts


def test_a_gpu_server_turn_begins_after_its_wait_for_the_device_whatever_its_phase():
    # Decode turns (a graph replay) and prefill turns (eager prompts, one to three) open with
    # different ops: no anchor cuts every turn. Each turn ends waiting for the device, and
    # the loop's own Python makes the gap after that wait wider than any after a copy inside
    # a turn: each turn begins there, and a second prompt in one turn begins none.
    turns = [_turn(batch=2), _turn(batch=2), _turn(prompts=1), _turn(batch=3),
             _turn(batch=3), _turn(batch=2), _turn(prompts=3), _turn(batch=3),
             _turn(prompts=1, batch=2), _turn(batch=1), _turn(prompts=2), _turn(batch=2),
             _turn(batch=2), _turn(batch=1)]
    row, starts = _server_row(turns)
    unit = find_unit(row, names=[f"op{s}" for s in range(40)])
    assert unit.positions == starts
    assert unit.opening == OPENS_AT_TURN_EDGE
