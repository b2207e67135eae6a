"""The verdicts of the structural detector (stream_split.core.detect.verdict), asked of small
skeletons and units built directly: no engine, no trace."""
from hypothesis import given, settings, strategies as st

import stream_split.core.detect.verdict as verdict
from stream_split.core.detect.rules import INNER_RULES, ONLINE_INNER_RULES, RULES
from stream_split.core.detect.search import (
    OPENS_AFTER_SYNC, OPENS_AT_INPUT_FETCH, Unit, find_unit)
from stream_split.core.detect.skeleton import Node
from stream_split.core.detect.verdict import (
    LOOP_INSIDE, STEPS_AT_THE_TOP, STEPS_NESTED, InnerAnswers, confirmed_online, dominant,
    every_fetch_opens, exact_needed, exact_possible, inner_repeat, iteration_test, loop_inside,
    module_holding_several, not_a_layer, exact_row, opens_with_copy, regular_steps)

NAMES = ["get_next_batch", "forward", "backward", "Optimizer.step#SGD.step", "aten::item", "layer",
         "aten::linear", "aten::relu", "aten::add", "aten::mul", "aten::copy_", "wrapper"]
FETCH, FWD, BWD, OPT, ITEM, LAYER = 0, 1, 2, 3, 4, 5
WORK = [6, 7, 8, 9, 6, 7, 8, 9]  # the ops beneath one step (with it, a unit of work)


def row_of(syms, dur=10.0, gap=1.0, t0=0.0):
    """Sibling ops of the symbols ``syms``, one after the other."""
    out, t = [], t0
    for sym in syms:
        out.append(Node(sym, t, t + dur, 0))
        t += dur + gap
    return out


def unit_at(positions, pattern, anchor, opening="at the anchor", shapes=None, **kw):
    n = len(positions)
    return Unit(positions=positions, pattern=tuple(pattern), similarity=[1.0] * n, like=n,
                fragments=0, coverage=1.0, anchor=anchor, shapes=shapes or [0] * n,
                exact=n, opening=opening, **kw)


def with_kids(node, kid_syms, dur=1.0):
    node.kids = [Node(s, node.start + i * dur, node.start + (i + 1) * dur, node.depth + 1)
                 for i, s in enumerate(kid_syms)]
    return node


# -- iteration_test: the top of the loop thread ----------------------------------------------


def test_a_unit_at_the_top_of_the_loop_thread_is_an_iteration():
    row = row_of([FETCH, FWD, BWD, OPT] * 3)
    unit = unit_at([0, 4, 8], [FETCH, FWD, BWD, OPT], FETCH)
    verdict, why = iteration_test(row, row, unit, [], None)
    assert verdict and why == "repeats at the top of the loop thread"


def test_instances_that_one_module_call_holds_are_layers_not_iterations():
    row = row_of([LAYER] * 4)
    unit = unit_at([0, 1, 2, 3], [LAYER], LAYER)
    one_call = [(row[0].start, row[-1].end)]
    verdict, why = iteration_test(row, row, unit, [], one_call)
    assert not verdict and "nn.Module" in why
    assert module_holding_several(row, unit, one_call) is not None
    # A module call per instance holds one each: no layer evidence.
    each = [(n.start, n.end) for n in row]
    assert module_holding_several(row, unit, each) is None


# -- not_a_layer: inside a container ---------------------------------------------------------


def test_a_unit_of_fewer_ops_than_a_unit_of_work_inside_a_container_is_no_iteration():
    row = row_of([6, 7] * 4)  # aten::linear, aten::relu: a repeated pair, nothing more
    container = Node(11, 0.0, 100.0, 0)
    unit = unit_at([0, 2, 4, 6], [6, 7], 6)
    verdict, why = not_a_layer([container], row, unit, [container], None)
    assert not verdict
    assert why == f"an instance has fewer than {RULES.verdict.min_unit_ops} ops"


def test_a_unit_that_recurs_outside_its_container_is_an_iteration():
    steps = [with_kids(n, WORK) for n in row_of([FWD] * 4)]
    container = Node(11, 0.0, 100.0, 0)
    roots = [container] + row_of([FWD], t0=200.0)  # the minor root after the container
    unit = unit_at([0, 1, 2, 3], [FWD], FWD)
    verdict, why = not_a_layer(roots, steps, unit, [container], None)
    assert verdict and "recurs outside its container" in why


def test_minor_roots_around_a_container_that_holds_more_instances_are_not_the_loop():
    # Failure mode 3 with a warm-up step before the engine's container and one after it:
    # the top level repeats `step`, but the container holds the loop.
    inner = row_of([FWD] * 6, t0=20.0)
    container = Node(11, 15.0, 100.0, 0)
    container.kids = inner
    roots = row_of([FWD], t0=0.0) + [container] + row_of([FWD], t0=101.0)
    unit = unit_at([0, 2], [FWD, 11], FWD)
    assert loop_inside(roots, unit)
    assert iteration_test(roots, roots, unit, [], None) == (False, LOOP_INSIDE)


def test_a_top_level_unit_whose_dominant_op_holds_no_more_of_it_is_the_loop():
    big = with_kids(Node(FWD, 0.0, 60.0, 0), [FWD, 6, 7])
    roots = [big] + row_of([FWD] * 3, t0=61.0)
    unit = unit_at([0, 1, 2, 3], [FWD], FWD)
    assert not loop_inside(roots, unit)


# -- regular_steps: step annotations to trust whatever their nesting -------------------------


def steps_of(numbers, dur=10.0, gap=0.1, at_top=True):
    """``ProfilerStep#N`` spans numbered ``numbers``, one after the other."""
    return [(i * (dur + gap), i * (dur + gap) + dur, f"ProfilerStep#{n}", at_top)
            for i, n in enumerate(numbers)]


def test_two_steps_numbered_in_a_row_at_the_top_are_the_loop():
    assert regular_steps(steps_of([4, 5])) == (True, STEPS_AT_THE_TOP)


def test_steps_below_the_top_are_trusted_whatever_their_nesting():
    assert regular_steps(steps_of([0, 1], at_top=False)) == (True, STEPS_NESTED)


def test_steps_not_numbered_in_a_row_are_not_trusted():
    verdict, why = regular_steps(steps_of([0, 2]))
    assert not verdict and "not numbered in a row" in why


def test_steps_that_leave_most_of_the_time_out_are_not_trusted():
    verdict, why = regular_steps(steps_of([0, 1], dur=1.0, gap=10.0))
    assert not verdict and "time out" in why


def test_a_single_step_is_not_a_loop():
    assert not regular_steps(steps_of([3]))[0]


def test_a_unit_inside_a_container_whose_instances_no_module_call_shares_is_an_iteration():
    steps = [with_kids(n, WORK) for n in row_of([FWD] * 4)]
    container = Node(11, 0.0, 100.0, 0)
    modules = [(n.start, n.end) for n in steps]
    verdict, why = not_a_layer([container], steps, unit_at([0, 1, 2, 3], [FWD], FWD),
                               [container], modules)
    assert verdict and why == "no nn.Module call holds two instances"


def test_instances_that_open_by_copying_their_input_to_the_device_are_steps():
    steps = [with_kids(n, [10] + WORK) for n in row_of([FWD] * 4, dur=50.0)]
    for step in steps:
        step.kids[0].copies = 1  # aten::copy_ launches a host-to-device copy
    unit = unit_at([0, 1, 2, 3], [FWD], FWD)
    assert opens_with_copy(steps, unit)
    container = Node(11, 0.0, 500.0, 0)
    verdict, why = not_a_layer([container], steps, unit, [container], None)
    assert verdict and "copying its input" in why


def test_a_copy_that_takes_most_of_the_instance_does_not_open_a_step():
    steps = [with_kids(n, [10, 6], dur=40.0) for n in row_of([FWD] * 4, dur=50.0)]
    for step in steps:
        step.kids[0].copies = 1
    assert not opens_with_copy(steps, unit_at([0, 1, 2, 3], [FWD], FWD))


def test_an_instance_that_repeats_a_block_of_work_inside_is_a_whole_model():
    block = [6, 7, 8, 9, 10, 11, 2, 3]  # eight ops a block: a block of work, not a projection
    model = with_kids(Node(FWD, 0.0, 1000.0, 0), block * 4)
    verdict, why = inner_repeat([model], unit_at([0], [FWD], FWD))
    assert verdict and why.startswith("an instance contains a repeated sub-unit")


def test_an_instance_without_a_repeated_block_is_a_layer():
    layer = with_kids(Node(LAYER, 0.0, 100.0, 0), [6, 7, 8, 9, 10, 11, 2, 3])
    verdict, why = inner_repeat([layer], unit_at([0], [LAYER], LAYER))
    assert not verdict and why == "an instance contains no repeated sub-unit"


# -- InnerAnswers: the online tries' answers of inner_repeat, given again ----------------------

BLOCK = [6, 7, 8, 9, 10, 11, 2, 3]  # a block of work (eight ops)


def _counting_searches(monkeypatch) -> list:
    """``verdict.find_unit`` counted: the list holds one entry per search made."""
    made = []
    search = verdict.find_unit

    def counted(*args, **kwargs):
        made.append(args[0])
        return search(*args, **kwargs)

    monkeypatch.setattr(verdict, "find_unit", counted)
    return made


def test_an_inner_answer_is_given_again_while_the_instance_is_the_same(monkeypatch):
    model = with_kids(Node(FWD, 0.0, 1000.0, 0), BLOCK * 4)
    unit = unit_at([0], [FWD], FWD)
    fresh = inner_repeat([model], unit)
    searches = _counting_searches(monkeypatch)
    answers = InnerAnswers()
    assert [inner_repeat([model], unit, answers=answers) for _ in range(3)] == [fresh] * 3
    assert len(searches) == 1


def test_a_block_read_since_makes_the_inner_search_again_and_changes_the_answer(monkeypatch):
    # three blocks are no model to INNER_RULES (four alike are): the fourth block, read
    # after the first answer, must not be answered from what was kept
    model = with_kids(Node(FWD, 0.0, 1000.0, 0), BLOCK * 3)
    unit = unit_at([0], [FWD], FWD)
    searches = _counting_searches(monkeypatch)
    answers = InnerAnswers()
    assert inner_repeat([model], unit, answers=answers)[0] is False
    t = model.kids[-1].end
    model.kids += [Node(s, t + i, t + i + 1.0, 1) for i, s in enumerate(BLOCK)]
    assert inner_repeat([model], unit, answers=answers) == inner_repeat([model], unit)
    assert inner_repeat([model], unit, answers=answers)[0] is True
    assert len(searches) == 3  # the kept answer, then the new one (and the one to compare)


def test_kernels_or_syncs_credited_to_an_op_of_the_instance_make_the_inner_search_again(
        monkeypatch):
    model = with_kids(Node(FWD, 0.0, 1000.0, 0), BLOCK * 4)
    unit = unit_at([0], [FWD], FWD)
    searches = _counting_searches(monkeypatch)
    answers = InnerAnswers()
    inner_repeat([model], unit, answers=answers)
    model.kids[5].gpu += 1
    inner_repeat([model], unit, answers=answers)
    model.kids[9].syncs += 1
    inner_repeat([model], unit, answers=answers)
    inner_repeat([model], unit, answers=answers)
    assert len(searches) == 3


def test_the_iteration_test_inside_a_container_gives_its_inner_answer_again(monkeypatch):
    # three instances inside a container, each a model of four blocks: no module call, no
    # copy, no minor root; the iteration test asks inner_repeat, once for the three tries
    steps = [with_kids(Node(FWD, 1000.0 * k, 1000.0 * k + 900.0, 1), BLOCK * 4) for k in range(3)]
    container = Node(11, 0.0, 3000.0, 0)
    container.kids = steps
    unit = unit_at([0, 1, 2], [FWD], FWD)
    fresh = iteration_test([container], steps, unit, [container], None)
    assert fresh[0] and fresh[1].startswith("an instance contains a repeated sub-unit")
    searches = _counting_searches(monkeypatch)
    answers = InnerAnswers()
    for _ in range(3):
        assert iteration_test([container], steps, unit, [container], None,
                              answers=answers) == fresh
    assert len(searches) == 1


def test_inner_answers_are_kept_apart_by_the_rules_asked_with(monkeypatch):
    model = with_kids(Node(FWD, 0.0, 1000.0, 0), BLOCK * 3)
    unit = unit_at([0], [FWD], FWD)
    answers = InnerAnswers()
    for _ in range(2):
        assert inner_repeat([model], unit, INNER_RULES, answers)[0] is False
        assert inner_repeat([model], unit, ONLINE_INNER_RULES, answers)[0] is True


def test_inner_answers_keep_only_the_latest(monkeypatch):
    models = [with_kids(Node(FWD, 0.0, 1000.0, 0), BLOCK * 4) for _ in range(RULES.memory.inner_answers + 1)]
    searches = _counting_searches(monkeypatch)
    answers = InnerAnswers()
    for model in models:
        inner_repeat([model], unit_at([0], [FWD], FWD), answers=answers)
    inner_repeat([models[-1]], unit_at([0], [FWD], FWD), answers=answers)  # kept
    inner_repeat([models[0]], unit_at([0], [FWD], FWD), answers=answers)  # gone: again
    assert len(searches) == len(models) + 1
    answers.clear()
    inner_repeat([models[-1]], unit_at([0], [FWD], FWD), answers=answers)
    assert len(searches) == len(models) + 2


#: What happens to a first instance between two questions: a child read (of a symbol), a
#: kernel or a host sync credited to one of its ops (at an index), or nothing.
_CHANGES = st.lists(st.one_of(
    st.tuples(st.just("kid"), st.sampled_from(BLOCK + [FWD, LAYER])),
    st.tuples(st.sampled_from(["gpu", "syncs"]), st.integers(0, 200)),
    st.tuples(st.just("ask"), st.sampled_from([INNER_RULES, ONLINE_INNER_RULES]))),
    max_size=40)


@settings(max_examples=60, deadline=None)
@given(blocks=st.integers(1, 5), changes=_CHANGES)
def test_inner_answers_are_the_search_s_whatever_the_instance_gains_between_questions(
        blocks, changes):
    model = with_kids(Node(FWD, 0.0, 1000.0, 0), BLOCK * blocks)
    unit = unit_at([0], [FWD], FWD)
    answers = InnerAnswers()
    for change, value in changes:
        if change == "kid":
            t = model.kids[-1].end
            model.kids.append(Node(value, t, t + 1.0, 1))
        elif change == "ask":
            assert inner_repeat([model], unit, value, answers) == \
                inner_repeat([model], unit, value)
        else:
            op = ([model] + model.kids)[value % (len(model.kids) + 1)]
            setattr(op, change, getattr(op, change) + 1)
    assert inner_repeat([model], unit, answers=answers) == inner_repeat([model], unit)


# -- dominant: where to look inside ----------------------------------------------------------


def test_the_longest_op_holding_a_third_of_the_row_is_a_container():
    row = [Node(11, 0.0, 40.0, 0)] + row_of([1, 2], t0=41.0, dur=20.0)
    assert dominant(row) is row[0]


def test_no_op_holding_a_third_of_the_row_is_no_container():
    assert dominant(row_of([1, 2, 3, 4, 5])) is None


# -- confirmed_online: believed before the end ------------------------------------------------


def _training(n=4):
    """``n`` steps that open with the input fetch, as the search finds them."""
    row = row_of([FETCH, FWD, BWD, OPT] * n)
    return row, unit_at([4 * k for k in range(n)], [FETCH, FWD, BWD, OPT], FETCH,
                        opening=OPENS_AT_INPUT_FETCH)


def test_three_steps_that_open_with_the_input_fetch_are_believed_online():
    row, unit = _training()
    assert confirmed_online(row, unit, [], NAMES, False) == \
        "each instance opens with the loop's input fetch"
    assert every_fetch_opens(row, unit)


def test_a_fetch_that_opens_no_instance_is_not_yet_the_loop():
    row, unit = _training()
    row.insert(0, Node(FETCH, -20.0, -15.0, 0))  # an earlier fetch outside every instance
    unit.positions = [p + 1 for p in unit.positions]
    assert not every_fetch_opens(row, unit)
    unit.exact = 0  # nor are the instances exact: nothing else confirms it
    assert confirmed_online(row, unit, [], NAMES, False) is None


def test_unlike_instances_before_any_gpu_work_wait_for_it():
    row, unit = _training()
    unit.shapes = [0, (BWD,), 0, 0]
    unit.like, unit.exact = 3, 0
    assert confirmed_online(row, unit, [], NAMES, False) is None


def test_steps_after_a_host_sync_that_turn_the_loop_are_believed_online():
    row = row_of([FWD, BWD, OPT, ITEM] * 4)
    unit = unit_at([0, 4, 8, 12], [FWD, BWD, OPT, ITEM], FWD, opening=OPENS_AFTER_SYNC,
                   spine=frozenset({FWD, BWD, OPT, ITEM}))
    assert confirmed_online(row, unit, [], NAMES, False) == \
        "each instance begins right after the previous one's host sync"
    # Without a loop marker (no optimizer step: a rollout's tokens) it waits for close.
    unit.spine = frozenset({FWD, BWD, ITEM})
    unit.exact = 0
    assert confirmed_online(row, unit, [], NAMES, False) is None


def test_a_thousand_exact_one_op_instances_that_make_the_whole_row_are_believed_online():
    many = RULES.online.exact_row_instances
    row = row_of([LAYER] * many)
    unit = find_unit(row, names=NAMES)
    assert unit is not None and unit.n == many and unit.exact == many
    assert exact_row(row, unit)
    assert confirmed_online(row, unit, [], NAMES, False) == \
        f"{many} instances, every one exact, make the whole row"


def test_fewer_exact_one_op_instances_or_another_op_in_the_row_wait_for_close():
    many = RULES.online.exact_row_instances
    row = row_of([LAYER] * (many - 1))
    unit = find_unit(row, names=NAMES)
    assert not exact_row(row, unit)
    assert confirmed_online(row, unit, [], NAMES, False) is None
    row = row_of([FWD] + [LAYER] * many)  # an op before the instances: not the whole row
    unit = find_unit(row, names=NAMES)
    assert unit is not None and unit.first == 1
    assert not exact_row(row, unit)
    assert confirmed_online(row, unit, [], NAMES, False) is None


def test_the_search_and_the_verdict_agree_on_a_plain_training_loop():
    row = row_of([FETCH, FWD, BWD, OPT] * 5)
    unit = find_unit(row, names=NAMES)
    assert unit is not None and unit.opening == OPENS_AT_INPUT_FETCH
    assert iteration_test(row, row, unit, [], None)[0]


def test_only_exact_instances_can_confirm_a_top_level_row_without_a_fetch_or_a_closing_sync():
    plain = row_of([FWD, BWD, ITEM] * 3)
    assert exact_needed(plain, [], NAMES, section_read=False) == RULES.min_instances
    # a loop marker alone (an optimizer step, no fetch, no sync): neither the input-fetch
    # way nor the sync way can open a unit there, only exact instances confirm
    assert exact_needed(row_of([FWD, BWD, OPT] * 3), [], NAMES, False) == RULES.min_instances
    # a fetch, an optimizer step with a sync, a container around the row, or the whole
    # section read: other ways may confirm, so any unit may do
    for ops in ([FWD, BWD, FETCH], [FWD, BWD, ITEM, OPT]):
        assert exact_needed(row_of(ops * 3), [], NAMES, False) == 0
    assert exact_needed(plain, [Node(11, 0.0, 100.0, 0)], NAMES, False) == 0
    assert exact_needed(plain, [], NAMES, section_read=True) == 0


def test_a_short_row_of_small_ops_holds_no_unit_its_exact_instances_could_confirm():
    # the top of a step that calls zero_grad, forward (two ops below it) and step: a third
    # of the row, with the ops below it, is too few ops to repeat a sub-unit
    def steps(n):
        return [with_kids(node, [LAYER, LAYER]) if node.sym == FWD else node
                for node in row_of([OPT, FWD, BWD] * n)]
    least = RULES.min_instances
    assert not exact_possible(steps(12), 12 * 3 // least)
    unit = find_unit(steps(12), names=NAMES)
    assert unit is not None and unit.exact >= least
    assert confirmed_online(steps(12), unit, [], NAMES, False) is None
    # ... a longer one may: it is searched (as a row of whole steps with their work is)
    assert exact_possible(steps(40), 40 * 3 // least)
    assert not exact_possible(steps(40), 3)  # ... but no unit of one step's ops
    work = row_of([FWD] * 3)
    for node in work:
        with_kids(node, WORK * 3)
    assert exact_possible(work, 1)
