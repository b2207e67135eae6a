"""The attack suite, small: one case of each adversarial family of issue 22
(``stream_split.testing.attacks``) split through the library, every event accounted for.
``benchmarks/adversarial.py`` runs the same families big, with time and peak RSS (never
asserted here: a loaded machine says nothing of either)."""
from __future__ import annotations

import gzip
import json
import random
import tracemalloc
from collections import Counter

import pytest

import stream_split
from stream_split.core.detect.rules import RULES
from stream_split.core.detect import search
from stream_split.core.detect.search import (
    SearchBudget, SearchMemo, find_unit, search_cap, search_work)
from stream_split.core.detect import skeleton, structure
from stream_split.core.detect.skeleton import Node, RootCounts, Symbols
from stream_split.core.detect.structure import Mode, StructureDetector
from stream_split.core.owners import Windows
from stream_split.core.records import KIND_ITERATION
from stream_split.stats import analyze
from stream_split.testing.attacks import ATTACKS, BY_NAME, _letters
from stream_split.write import METADATA_INLINE_BYTES


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_each_attack_splits_and_conserves_its_events(attack, tmp_path):
    path = tmp_path / ("in" + attack.suffix)
    events = attack.make(str(path), attack.small)
    manifest = stream_split.split(str(path), str(tmp_path / "out"))
    counts = manifest["counts"]
    assert counts["conserved"] is True
    assert counts["events_in"] == events
    assert manifest["complete"] is True


def test_big_metadata_is_written_once_and_the_manifest_names_it(tmp_path):
    path = tmp_path / "in.json"
    BY_NAME["metadata"].make(str(path), 40)
    manifest = stream_split.split(str(path), str(tmp_path / "out"))
    assert manifest["counts"]["metadata_copied_per_piece"] == 0
    apart = manifest["metadata"]
    with gzip.open(tmp_path / "out" / apart["file"]) as f:
        held = json.load(f)["traceEvents"]
    assert len(held) == apart["events"] == manifest["counts"]["metadata_events"]
    assert sum(len(json.dumps(e)) for e in held) > METADATA_INLINE_BYTES
    with gzip.open(tmp_path / "out" / manifest["iterations"][0]["file"]) as f:
        piece = json.load(f)["traceEvents"]
    assert [e["ph"] for e in piece] == ["X", "X"]  # its step and op, no metadata


def test_small_metadata_is_still_copied_into_every_piece(tmp_path):
    path = tmp_path / "in.json"
    BY_NAME["many_iterations"].make(str(path), 20)
    text = path.read_text().replace('"traceEvents":[\n', '"traceEvents":[\n{"ph":"M",'
                                    '"name":"thread_name","pid":1,"tid":1,"args":{"name":"main"}},\n')
    path.write_text(text)
    manifest = stream_split.split(str(path), str(tmp_path / "out"))
    assert "metadata" not in manifest
    assert manifest["counts"]["metadata_copied_per_piece"] == 1
    with gzip.open(tmp_path / "out" / manifest["iterations"][3]["file"]) as f:
        assert json.load(f)["traceEvents"][0]["ph"] == "M"


def _row(names: list):
    """A row of top-level skeleton ops named ``names``, one symbol per distinct name."""
    symbol = {}
    return [Node(symbol.setdefault(name, len(symbol)), 6 * i, 6 * i + 5, 0)
            for i, name in enumerate(names)]


def test_a_search_the_credit_cannot_cover_is_put_off_until_the_ops_read_pay_for_it():
    row = _row([f"n{chr(97 + i % 20)}" for i in range(400)])  # 20 names, each 20 times
    cost = len(row) + min(len(row) * 20, search_work(len(row)))
    budget = SearchBudget()
    budget.credit = cost - 1
    assert not budget.affords(row)
    ops = 0
    while not budget.affords(row):
        budget.earn()
        ops += 1
    assert ops * RULES.online.search_work_per_op >= len(row)  # paid, then retried once covered
    assert budget.credit < RULES.online.search_work_per_op


def test_one_search_tries_anchors_only_up_to_its_work_bound():
    names = ["loop_head", "fwd", "bwd", "opt"] * 10
    row = _row(names)
    assert find_unit(row) is not None
    # a bound below the first anchor's cut: no anchor is tried, no unit
    starved = RULES._replace(search_work=10, search_work_per_op=0)
    assert find_unit(row, starved) is None


def test_a_short_row_searches_at_most_its_ops_times_the_work_ratio():
    # 40 ops, four anchors whose cuts cover 36 ops each: a ratio of 4 per op (160) lets
    # every one be tried, a ratio of 0 none
    names = ["loop_head", "fwd", "bwd", "opt"] * 10
    row = _row(names)
    assert search_cap(len(row)) == RULES.search_work_ratio * len(row)  # short: the ratio's
    assert find_unit(row, RULES._replace(search_work_ratio=4)) is not None
    assert find_unit(row, RULES._replace(search_work_ratio=0)) is None
    assert search_cap(10 ** 7) == search_work(10 ** 7)  # long: the constant's


def _drawn(ops: int, names: int, seed: int) -> list:
    """``ops`` top-level ops drawn at random from ``names`` names (``attacks.random_names``)."""
    rnd = random.Random(seed)
    return _row([f"op_{rnd.randrange(names)}" for _ in range(ops)])


def _noisy_loop(steps: int, seed: int) -> list:
    """A loop of ``steps`` steps of ten ops, each step missing a small op now and then."""
    rnd = random.Random(seed)
    step = ["load", "fwd", "mm", "relu", "mm", "loss", "bwd", "zero", "opt", "sync"]
    return _row([op for _ in range(steps) for op in step if op != "zero" or rnd.random() < 0.7])


def _in_full(monkeypatch) -> None:
    """Every cut weighed whole: no bound gives up on one (``_Hope``, ``_ruled_out``)."""
    monkeypatch.setattr(search._Hope, "lost", lambda self, sims, idle_at, reads=None: False)
    monkeypatch.setattr(search, "_ruled_out", lambda *args: False)


@pytest.mark.parametrize("row", [_drawn(600, 120, seed) for seed in range(3)] +
                         [_noisy_loop(40, seed) for seed in range(2)],
                         ids=["drawn0", "drawn1", "drawn2", "loop0", "loop1"])
def test_giving_up_on_a_cut_that_cannot_qualify_changes_no_answer(row, monkeypatch):
    found = find_unit(row, memo=SearchMemo())
    _in_full(monkeypatch)
    assert find_unit(row, memo=SearchMemo()) == found


@pytest.mark.parametrize("seed", range(6))
def test_ruling_cuts_out_on_bounds_of_their_similarities_changes_no_answer(seed, monkeypatch):
    # rows where many cuts nearly qualify: few names, so that any half is like any other
    row = _drawn(1500, 60 + 40 * seed, seed)
    found = find_unit(row, memo=SearchMemo())
    monkeypatch.setattr(search, "_ruled_out", lambda *args: False)
    assert find_unit(row, memo=SearchMemo()) == found


def _growing(names: list, start: int = 3):
    """Each prefix of the row of ``names`` from ``start`` ops on, as the online tries see it
    (the same list, grown one op at a time), with the name of each symbol."""
    row = _row(names)
    symbols = list(dict.fromkeys(names))
    for m in range(start, len(row) + 1):
        yield row[:m], symbols


_ROWS_GROWN = [
    [op for _ in range(5) for op in ("load", "fwd", "mm", "relu", "mm", "loss", "bwd")],
    [f"op_{random.Random(3).randrange(9)}" for _ in range(120)],
    [op for k in range(6) for op in ("fwd", "mm", "relu") + ("mm",) * (k % 3) + ("bwd",)]]


def test_a_search_for_a_unit_of_enough_exact_instances_answers_as_the_full_one():
    # the online tries, where only exact instances could confirm (``verdict.exact_needed``):
    # the same unit as the full search, or None where it would have had fewer exact ones
    early = same = 0
    for names in _ROWS_GROWN:
        for row, symbols in _growing(names):
            full = find_unit(row, names=symbols, whole=False)
            bounded = find_unit(row, names=symbols, whole=False, least_exact=3)
            if bounded is None and full is not None:
                assert full.exact < 3
                early += 1
            else:
                assert bounded == full
                same += full is not None
    assert early and same  # some searches ended before a unit was chosen, some did not


def test_a_search_whose_unit_would_have_too_few_exact_instances_ends_before_its_opening(
        monkeypatch):
    # ``_may_end_exact``: a candidate has enough exact instances, but neither the unit
    # chosen nor one with idle cycles has (and no loop marker nor sync may move the cut):
    # None before the opening, where the full search's unit has fewer
    kept, ended = search._may_end_exact, []

    def asked(*args, **kwargs):
        answer = kept(*args, **kwargs)
        ended.append(not answer)
        return answer
    monkeypatch.setattr(search, "_may_end_exact", asked)
    for names in _ROWS_GROWN:
        for row, symbols in _growing(names):
            asked_before = len(ended)
            bounded = find_unit(row, names=symbols, whole=False, least_exact=3)
            if len(ended) > asked_before and ended[-1]:
                assert bounded is None
                assert find_unit(row, names=symbols, whole=False).exact < 3
    assert True in ended and False in ended


def test_a_search_for_wide_enough_exact_instances_answers_as_the_full_one_or_none():
    # ``find_unit``'s ``wide`` (``verdict.exact_possible``): where no candidate of enough
    # exact instances has instances of a width it accepts, None; else the same answer
    for names in _ROWS_GROWN:
        for row, symbols in _growing(names):
            bounded = find_unit(row, names=symbols, whole=False, least_exact=3)
            assert find_unit(row, names=symbols, whole=False, least_exact=3,
                             wide=lambda width: True) == bounded
            assert find_unit(row, names=symbols, whole=False, least_exact=3,
                             wide=lambda width: False) is None
            if bounded is not None and bounded.exact >= 3:
                widths = []
                find_unit(row, names=symbols, whole=False, least_exact=3,
                          wide=lambda width: widths.append(width) or False)
                assert len(bounded.pattern) in widths  # its representative's was asked


def test_the_exact_instances_a_cut_could_have_are_those_counted_anew_as_its_row_grows(
        monkeypatch):
    # ``_most_exact`` keeps the shapes of a cut's inner instances with the cut (the row's
    # growth changes only its last instance): each answer is the one counted anew from the
    # ops, on rows grown one op at a time with one memo, as the online tries grow them; or,
    # where the inner instances alone leave fewer than the least asked, a count below it
    # too (the last instance not read)
    kept = search._most_exact
    reused, bounded = [], []

    def counted_anew(cut, row, syms, rules, memo, least=0):
        reused.append(cut.alike is not None)
        answer = kept(cut, row, syms, rules, memo, least)
        a, b = search._segments(cut, row, rules, memo)[-1]
        last = tuple(syms[a:b])
        lengths = Counter(b - a for a, b in cut.spans)
        alike = Counter(tuple(syms[a:b]) for a, b in cut.spans
                        if lengths[b - a] > 1 or b - a == len(last))
        most = max(n + (shape == last) for shape, n in alike.items()) if alike else 1
        most = most if cut.spans else 0
        bounded.append(answer != most)
        assert answer == most or most < least and answer < least
        return answer
    monkeypatch.setattr(search, "_most_exact", counted_anew)
    for names in _ROWS_GROWN:
        row, symbols = _row(names), list(dict.fromkeys(names))
        grown, memo = [], SearchMemo()
        for node in row:
            grown.append(node)
            find_unit(grown, names=symbols, whole=False, least_exact=3, memo=memo)
    assert True in reused and False in reused
    assert True in bounded and False in bounded


def test_a_search_of_names_drawn_at_random_compares_fewer_instances_than_it_would_in_full(
        monkeypatch):
    row = _drawn(2000, 400, 22)
    memo = SearchMemo()
    find_unit(row, memo=memo)
    _in_full(monkeypatch)
    full = SearchMemo()
    find_unit(row, memo=full)
    assert memo.compared <= 0.8 * full.compared
    # counted work, bounded per op: the instances compared, whatever the machine's speed
    assert memo.compared <= len(row)


def test_cuts_of_names_drawn_at_random_are_ruled_out_before_their_instances_are_compared(
        monkeypatch):
    # 2,000 ops of 400 names: three cuts qualify, and a fourth comes near; the other 78 cuts
    # tried are ruled out on the bounds of their similarities, all at once (1,401 instances
    # compared one by one without them)
    row = _drawn(2000, 400, 22)
    memo = SearchMemo()
    find_unit(row, memo=memo)
    assert memo.compared <= 50


def test_a_row_of_names_each_seen_once_is_searched_in_under_100_bytes_an_op():
    row = _row([f"u{i}" for i in range(100_000)])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        assert find_unit(row) is None
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert peak < 100 * len(row)  # no table of where each symbol occurs


def test_a_name_without_digits_is_one_entry_of_the_symbol_table():
    symbols = Symbols()
    assert [symbols.of(n) for n in ["fwd", "layer_1", "layer_2", "fwd", "layer_N"]] == \
        [0, 1, 1, 0, 1]
    assert symbols.names == ["fwd", "layer_N"]
    # fwd, layer_N; layer_2 (one table; layer_1 made its family, and joins when seen again)
    assert len(symbols.sym_of) == 3
    assert symbols.of("layer_1") == 1 and len(symbols.sym_of) == 4


def test_a_numbered_name_that_makes_its_family_joins_the_table_when_seen_again():
    # (``attacks.numbered_names``: each name its own family, most seen once)
    symbols = Symbols()
    names = [f"op_{a}{b}_{k % 7}" for k, (a, b) in enumerate(zip("abcdefgh", "hgfedcba"))]
    syms = [symbols.of(name) for name in names]
    assert syms == list(range(8)) and len(symbols.sym_of) == 8  # the families alone
    assert [symbols.of(name) for name in names] == syms
    assert len(symbols.sym_of) == 16 and symbols._digit_names == 8


@pytest.mark.parametrize("seed", range(3))
def test_names_with_and_without_digits_fold_as_the_digit_pattern_does(seed):
    # a name without digits is its own family without ``_DIGITS.sub`` (``Symbols._new_family``),
    # one with digits (ASCII or not) is folded by it: the families and loop markers as the
    # pattern alone gives them, names seen again or forgotten alike
    rnd = random.Random(seed)
    pieces = ["op_", "layer_", "7", "12", "\u0663", "\uff11", "_", "a", "Optimizer.step#",
              "get_batch", "ProfilerStep#", "x"]
    names = ["".join(rnd.choice(pieces) for _ in range(rnd.randrange(1, 5)))
             for _ in range(400)]
    symbols = Symbols()
    syms = [symbols.of(name) for name in names]
    families = [skeleton._DIGITS.sub("N", name) for name in names]
    assert [symbols.names[sym] for sym in syms] == families
    assert len(set(syms)) == len(set(families))
    assert symbols.markers == {sym for sym, family in zip(syms, families)
                               if search.loop_marker(family)}
    once = [sym for sym in set(syms) if syms.count(sym) == 1]
    symbols.forget(once)
    assert [symbols.of(name) == sym for name, sym in zip(names, syms)] == \
        [sym not in once for sym in syms]  # a kind forgotten is numbered anew, digits or not


def test_the_root_counts_tell_the_ops_of_kinds_seen_once_as_one_by_one():
    rnd = random.Random(5)
    counts = RootCounts()
    nodes = [Node(rnd.randrange(60), k, k + 1, 0) for k in range(120)]
    for node in nodes:
        counts.add(node, False)
    assert counts.seen_once(nodes) == [n for n in nodes if counts[n.sym] == 1]
    once = [n.sym for n in counts.seen_once(nodes)]
    singles = counts.singles
    counts.forget(once[:5])
    assert counts.singles == singles - 5 and not any(sym in counts for sym in once[:5])


def _observed(names: list, detector: StructureDetector | None = None) -> StructureDetector:
    """A detector that read ``names`` as top-level ops of a main thread, 6 µs apart."""
    detector = detector or StructureDetector()
    for i, name in enumerate(names):
        detector.observe((1, 1), [0], 6.0 * i, 6.0 * i + 5, name, 0)
    return detector


@pytest.mark.parametrize("seed", range(4))
def test_the_root_counts_tell_when_three_instances_can_be_exact(seed):
    # against a count of every pair: some op follows another of one kind three times, or
    # one of its own kind twice (what three exact instances of one op or more need)
    rnd = random.Random(seed)
    syms = [rnd.randrange(12 + 30 * seed) for _ in range(300)]
    counts = RootCounts()
    for k, sym in enumerate(syms):
        counts.add(Node(sym, k, k + 1, 0), False)
        pairs = Counter(zip(syms[:k + 1], syms[1:k + 1]))
        assert counts.exact == any(n >= 3 or (a == b and n >= 2) for (a, b), n in pairs.items())
        assert counts[sym] == counts.last_count == syms[:k + 1].count(sym)
        assert counts.singles == sum(1 for n in Counter(syms[:k + 1]).values() if n == 1)


def test_the_online_tries_skip_a_top_level_that_holds_no_unit_they_could_believe():
    rnd = random.Random(22)  # the ops of ``attacks.random_names``: no pair thrice, no marker
    kinds = [f"op_{_letters(j, 3)}" for j in range(400)]
    names = [rnd.choice(kinds) for _ in range(2000)]
    detector = _observed(names)
    # not one search paid for: the credit is the free one plus what the ops earned
    assert detector._budget.credit == \
        RULES.online.search_work_free + len(names) * RULES.online.search_work_per_op
    state = detector._skeletons.threads[((1, 1), 0)]
    assert not state.seen.may_confirm
    # a loop marker among them: the tries search again
    marked = _observed(names[:100] + ["Optimizer.step#SGD.step"] + names[100:200])
    assert marked._budget.credit < \
        RULES.online.search_work_free + 201 * RULES.online.search_work_per_op


def test_a_loop_of_exact_steps_is_still_searched_online():
    steps = [f"{op}x" for _ in range(6) for op in ("load", "fwd", "bwd", "opt")]
    detector = _observed(steps[:9])  # the third step's first op: no pair thrice yet
    state = detector._skeletons.threads[((1, 1), 0)]
    assert not state.seen.may_confirm
    _observed(steps[9:10], detector)
    assert state.seen.may_confirm
    assert detector._budget.credit < \
        RULES.online.search_work_free + 10 * RULES.online.search_work_per_op


def _few_singles(monkeypatch, count: int) -> None:
    memory = RULES.memory._replace(single_roots=count, single_roots_latest=count // 2)
    monkeypatch.setattr(skeleton, "RULES", RULES._replace(memory=memory))


def test_a_top_level_of_names_of_their_own_is_kept_bounded(monkeypatch):
    _few_singles(monkeypatch, 64)
    names = [f"u{chr(97 + i % 26)}{chr(97 + i // 26 % 26)}{chr(97 + i // 676)}"
             for i in range(5000)]
    detector = _observed(names)
    state = detector._skeletons.threads[((1, 1), 0)]
    assert len(state.roots) <= 64 + 2 * (5000 // 32)  # the latest, and two kept per sifting
    assert sum(1 for name in detector._names if name is not None) == len(state.roots)
    result = detector.close()  # one iteration, from the first op to the last, as before
    assert [b.start_ts for b in result.boundaries] == [0.0]
    assert result.last_end == 6.0 * 4999 + 5
    assert result.evidence["levels"][0]["forgotten_ops"] == 5000 - len(state.roots)


def test_forgetting_names_of_their_own_before_a_loop_changes_none_of_its_boundaries(
        monkeypatch):
    prologue = [f"init_{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(400)]
    loop = [f"{op}x" for _ in range(200) for op in ("load", "fwd", "mm", "bwd", "opt")]
    names = prologue + loop
    whole = [b.start_ts for b in _observed(names).close().boundaries]
    _few_singles(monkeypatch, 64)
    detector = _observed(names)
    assert detector._skeletons.threads[((1, 1), 0)].forgotten > 300
    assert [b.start_ts for b in detector.close().boundaries] == whole
    assert len(whole) == 200


def test_a_name_forgotten_at_the_top_level_keeps_its_kind_where_it_is_held_below(
        monkeypatch):
    _few_singles(monkeypatch, 8)
    detector = StructureDetector()
    detector.observe((1, 1), [0], 0.0, 50.0, "container", 0)
    detector.observe((1, 1), [0, 0], 1.0, 2.0, "shared", 0)  # below the top level
    detector.observe((1, 1), [0], 60.0, 65.0, "ua", 0)
    detector.observe((1, 1), [0], 70.0, 71.0, "shared", 0)  # and at it, short
    for i in range(20):
        detector.observe((1, 1), [0], 80.0 + 6 * i, 85.0 + 6 * i, f"u{chr(98 + i)}", 0)
    symbols = detector._skeletons.symbols
    state = detector._skeletons.threads[((1, 1), 0)]
    assert state.forgotten and all(symbols.names[n.sym] != "shared" for n in state.roots)
    assert "ub" not in symbols.names  # a name forgotten: held by no op
    assert symbols.names[symbols.of("shared")] == "shared"
    kid = state.roots[0].kids[0]
    assert symbols.of("shared") == kid.sym


def test_names_of_their_own_beyond_the_bound_keep_under_100_bytes_an_op(monkeypatch):
    # (unbounded, some 290 bytes an op were kept here, 370 with the names; 1 M of them
    # took 485 MB of peak RSS, now about 106 MB)
    _few_singles(monkeypatch, 1024)
    names = [f"n{_letters(i)}" for i in range(40_000)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        detector = _observed(names)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert detector._skeletons.threads[((1, 1), 0)].forgotten > 35_000
    assert held < 100 * len(names)
def test_numbered_names_of_their_own_leave_the_symbol_table_too(monkeypatch):
    # (their names with digits stayed in the table: 400 k ops of ``op_abcde_3`` and the
    # like took 205 MB of peak RSS, against 91 MB without the digits)
    _few_singles(monkeypatch, 64)
    detector = _observed([f"u{_letters(i, 3)}_{i % 7}" for i in range(3000)])
    state = detector._skeletons.threads[((1, 1), 0)]
    assert state.forgotten > 2500
    assert len(detector._skeletons.symbols.sym_of) <= 2 * len(state.roots) + 64


def test_numbered_names_of_one_family_are_remembered_up_to_a_bound(monkeypatch):
    memory = RULES.memory._replace(digit_names_remembered=100)
    monkeypatch.setattr(skeleton, "RULES", RULES._replace(memory=memory))
    symbols = Symbols()
    syms = {symbols.of(f"layer_{i}") for i in range(1000)}
    assert syms == {symbols.of("layer_N")} == {symbols.of("layer_5")}
    assert len(symbols.sym_of) <= 101


def _few_roots(monkeypatch, count: int) -> None:
    memory = RULES.memory._replace(max_roots=count)
    for module in (skeleton, structure):
        monkeypatch.setattr(module, "RULES", RULES._replace(memory=memory))


def _drawn_at_random(count: int, kinds: int, seed: int = 22) -> list:
    """``count`` names drawn from ``kinds`` (``attacks.random_names``' ops: no loop)."""
    rnd = random.Random(seed)
    names = [f"op_{_letters(j, 3)}" for j in range(kinds)]
    return [rnd.choice(names) for _ in range(count)]


def test_a_top_level_of_names_drawn_at_random_is_kept_bounded(monkeypatch):
    _few_roots(monkeypatch, 256)
    names = _drawn_at_random(5000, 400)
    detector = _observed(names)
    state = detector._skeletons.threads[((1, 1), 0)]
    assert 128 < len(state.roots) <= 256
    assert not state.seen.may_confirm
    held = {detector._names[n.sym] for n in state.roots}
    assert held == {name for name in detector._names if name is not None}  # the rest went
    result = detector.close()  # one iteration, from the first op to the last, as before
    assert [b.start_ts for b in result.boundaries] == [0.0]
    assert result.last_end == 6.0 * 4999 + 5
    assert result.evidence["levels"][0]["forgotten_ops"] == 5000 - len(state.roots)


@pytest.mark.parametrize("seed", range(6))
def test_the_counts_of_a_top_level_whose_oldest_ops_are_forgotten_are_those_of_the_rest(seed):
    # ``RootCounts.forget_ops`` (after ``forget_oldest``) against the ops kept counted anew
    rnd = random.Random(seed)
    syms = [rnd.randrange(1 + 20 * seed) for _ in range(2 + rnd.randrange(400))]
    nodes = [Node(sym, k, k + 1, 0) for k, sym in enumerate(syms)]
    counts = RootCounts()
    for node in nodes:
        counts.add(node, False)
    cut = rnd.randrange(1, len(syms))
    counts.forget_ops(syms[:cut])
    kept = Counter(syms[cut:])
    assert {sym: counts[sym] for sym in set(syms)} == {sym: kept[sym] for sym in set(syms)}
    assert counts.singles == sum(1 for n in kept.values() if n == 1)
    assert counts.last_count == kept[syms[-1]]
    assert all(sym in counts for sym in kept) and not any(sym in counts for sym in
                                                          set(syms) - set(kept))
    more = [rnd.randrange(1 + 20 * seed) for _ in range(50)]
    for k, sym in enumerate(more):  # and counted on from there, as ``add`` counts
        counts.add(Node(sym, 1000 + k, 1001 + k, 0), False)
        kept[sym] += 1
        assert counts[sym] == counts.last_count == kept[sym]
    assert counts.singles == sum(1 for n in kept.values() if n == 1)


def test_forgotten_ops_leave_what_made_the_row_believable():
    counts = RootCounts()
    for k, sym in enumerate([1, 2, 1, 2, 1, 2, 7]):  # 1 then 2, three times: may be exact
        counts.add(Node(sym, k, k + 1, 0), sym == 2)
    assert counts.exact and counts.marked
    counts.forget_ops([1, 2, 1, 2, 1, 2])
    assert counts.exact and counts.marked and counts.may_confirm
    assert counts[7] == 1 and 1 not in counts


def test_a_loop_the_online_tries_cannot_believe_is_decided_at_the_bound(monkeypatch):
    # exact steps after a prologue, no loop marker: believed only at close (whole), or
    # where the top level reaches its bound, with the same boundaries
    names = _drawn_at_random(100, 50) + \
        [f"{op}x" for _ in range(400) for op in ("load", "fwd", "mm", "bwd", "opt")]
    whole = _observed(names).close()
    assert whole.evidence["decided"] == "at close" and len(whole.boundaries) == 400
    _few_roots(monkeypatch, 256)
    detector, streamed = StructureDetector(), []
    detector._budget.credit = 0  # the online tries spent it all: the bound's search is free
    for i, name in enumerate(names):
        for found in detector.observe((1, 1), [0], 6.0 * i, 6.0 * i + 5, name, 0):
            if found.moves_last:
                streamed.pop()
            streamed.append(found.start_ts)
        if i == 256:  # decided at the 257th op, nothing forgotten
            assert detector.mode is Mode.MATCHING
    assert not detector._skeletons.threads[((1, 1), 0)].forgotten
    result = detector.close()
    assert "reached its bound of 256 ops" in result.evidence["why"]
    assert streamed == [b.start_ts for b in whole.boundaries]


def test_only_the_first_search_at_the_bound_is_free(monkeypatch):
    # names at random with a loop marker among them (may be believed online, holds no
    # loop): with no credit earned, the bound is searched once, then forgotten each time
    memory = RULES.memory._replace(max_roots=256)
    online = RULES.online._replace(search_work_per_op=0)
    monkeypatch.setattr(skeleton, "RULES", RULES._replace(memory=memory))
    monkeypatch.setattr(structure, "RULES", RULES._replace(memory=memory, online=online))
    searched = []

    def counted(*args, **kwargs):
        searched.append(len(args[0]))
        return None
    monkeypatch.setattr(structure, "find_unit", counted)
    detector = StructureDetector()
    detector._budget.credit = 0
    names = _drawn_at_random(3000, 600)
    _observed(names[:10] + ["Optimizer.step#SGD.step"] + names[10:], detector)
    state = detector._skeletons.threads[((1, 1), 0)]
    assert state.seen.may_confirm and state.forgotten > 2000  # many bounds reached
    assert searched == [257]


def test_forgetting_the_oldest_ops_forgets_what_their_containers_hold(monkeypatch):
    _few_roots(monkeypatch, 64)
    detector = StructureDetector()
    names = _drawn_at_random(400, 100)
    for i, name in enumerate(names):  # each top-level op holds one op
        detector.observe((1, 1), [0], 10.0 * i, 10.0 * i + 5, name, 0)
        detector.observe((1, 1), [0, 0], 10.0 * i + 1, 10.0 * i + 2, "kid_" + name, 0)
    state = detector._skeletons.threads[((1, 1), 0)]
    assert len(state.roots) <= 64
    assert state.below == sum(1 for n in state.roots if n.kids) == \
        detector._skeletons._nodes


def test_names_drawn_at_random_keep_memory_flat_beyond_the_bound(monkeypatch):
    # (unbounded, some 450 bytes an op were kept, and the close search over all of them:
    # 200 k ops took 224 MB of peak RSS, 1 M 657 MB)
    _few_roots(monkeypatch, 2048)
    sizes = []
    for count in (20_000, 40_000):
        names = _drawn_at_random(count, count // 5)
        sizes.append(_traced_growth(lambda: _observed(names))[0])
    assert sizes[1] < 1.25 * sizes[0]


def _traced_growth(make) -> tuple[int, int]:
    """(what ``make()`` leaves allocated, its peak), in bytes, traced by tracemalloc."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        kept = make()
        size, peak = tracemalloc.get_traced_memory()
        del kept
    finally:
        tracemalloc.stop()
    return size - before, peak - before


def test_the_gap_before_each_boundary_takes_under_24_bytes_a_boundary():
    n = 100_000  # a matcher gives every boundary a gap (1 M one-op iterations took 140 MB)

    def boundaries():
        windows = Windows()
        for i in range(n):
            windows.add(6.0 * i, 6.0 * i - 1.0, (1, 1))
        return windows
    size, _ = _traced_growth(boundaries)
    assert size < 24 * n


def test_outliers_of_many_iterations_are_judged_in_under_64_bytes_an_iteration():
    n = 200_000
    times = [6.0 + (i % 7) / 1000 for i in range(n)]
    kinds = [KIND_ITERATION] * n
    _, peak = _traced_growth(lambda: analyze(times, kinds))
    assert peak < 64 * n  # columns, not an index object and a float object per iteration


def test_a_loop_of_one_op_iterations_is_confirmed_online(tmp_path):
    path = tmp_path / "in.json"
    BY_NAME["one_op_iterations"].make(str(path), RULES.online.exact_row_instances * 3)
    manifest = stream_split.split(str(path), str(tmp_path / "out"))
    assert manifest["detection"]["decided"].startswith("online")
    assert "every one exact, make the whole row" in manifest["detection"]["why"]
    assert len(manifest["iterations"]) == RULES.online.exact_row_instances * 3
