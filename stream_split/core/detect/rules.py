"""Every threshold of the structural detector, named, with the reason for its value.

``Rules`` holds them in four groups:

- **search** (``Rules``' own fields): which repeating unit cuts a list of sibling ops
  (``search.find_unit``): when instances are alike, when a cut qualifies, which cut wins,
  where each instance opens, where the last one ends, which cycles are idle;
- **verdict** (``Rules.verdict``, ``VerdictRules``): whether a unit found is an iteration
  (``verdict.py``);
- **online** (``Rules.online``, ``OnlineRules``): when the detector tries to decide before the
  end of the input, and what the matcher keeps while it streams boundaries;
- **memory** (``Rules.memory``, ``MemoryRules``): bounds on what the detector keeps.

No other module of ``core/detect`` holds a bare threshold: a band or a limit is named here
(``REPEAT``, the fewest occurrences that repeat, too).

Each group is a ``typing.NamedTuple``: frozen, its fields in ``_fields``, a copy with some
changed from ``_replace``. As frozen slotted dataclasses, the four classes' generated methods
(94 fields) were compiled at every start: 43 M instructions of the 594 M of a ``boundaries``
run of a two-event trace (callgrind; 5.5 ms against 0.8 ms as NamedTuples). Their
annotations are the types themselves (no ``from __future__ import annotations``): a string
would be compiled into a ``ForwardRef`` for each field.
"""
from typing import NamedTuple

#: Two occurrences are the fewest that repeat: a row, a kind of op or a unit seen fewer times
#: holds no repeating unit to search for (``search.py``), nor an inner one below the unit
#: chosen (``close.lower_level``).
REPEAT = 2

#: ``search._Hope`` reads a cut's instances one by one, then in runs of this fraction of
#: those read (an eighth: little is read past the instance that rules the cut out, and a
#: loop of a million one-op instances is checked per run, not per instance) ...
HOPE_RUNS = 8
#: ... its bound on a cut's summed similarity has this relative margin (rounding errors are
#: some 1e-16 per instance added) ...
HOPE_MARGIN = 1e-9
#: ... and adds this much to each similarity, for ``Unit.similarity``'s rounding (to three
#: decimals: at most 0.0005 up).
HOPE_ROUNDING = 1e-3
#: ``search._LikenessBounds`` sums an instance's shares in another order than
#: ``search.similarity``: each similarity it bounds is raised by this much (a rounding error
#: on sums of a few thousand shares of about 1 is some 1e-13) ...
BOUND_MARGIN = 1e-9
#: ... it weighs the cuts whose median instance holds this many ops at least: on shorter
#: instances the comparisons one by one cost less than its arrays (a loop of a million
#: one-op instances is compared as before) ...
BOUND_OPS = 16
#: ... and whose instances times the row's kinds of op are at most this many (its arrays
#: hold that many numbers each, three of them and one per representative tried: some
#: 4 MB at most).
BOUND_CELLS = 1 << 16


class VerdictRules(NamedTuple):
    """Is a unit found an iteration (``verdict.py``)?"""
    #: A unit found inside a container must hold at least this many ops (with its
    #: children): a repeated ``aten::slice`` is no unit of work ...
    min_unit_ops: int = 8
    #: ... and the repeated sub-unit that makes one instance a whole piece of work must be
    #: that big too: a block of work, not the q/k/v/o projections of one attention layer.
    #: One instance is flattened to at most this many ops for that search.
    inner_flat_ops: int = 50_000
    #: Layers of one model: a single outermost ``nn.Module`` call holds this many instances.
    module_instances: int = 2
    #: The longest op of a level is a container to look inside when it holds at least
    #: 1/this of the level's time (a third: a wrapper, a request, a single ``ProfilerStep``).
    container_parts: int = 3
    #: An instance opens by copying its input to the device when its first op launches a
    #: copy and lasts at most 1/this of the instance (half: a step, not a layer).
    copy_parts: int = 2
    #: Ops of the loop thread's other sections open instances when found before this share
    #: of the instances (the first aside) ...
    opening_share: float = 0.5
    #: ... and there are at least this many instances to vote.
    opening_instances: int = 3
    #: Confidence of a unit grows with its instances up to this many.
    confident_instances: int = 3
    #: Confidence reported for ``ProfilerStep#N`` spans repeating at the top of a thread.
    steps_confidence: float = 0.95
    #: ``ProfilerStep#N`` spans numbered in a row are trusted, whatever their nesting, when
    #: they cover this share of the time from the first one's start to the last one's end
    #: (the profiler's own steps leave a few microseconds between them; spans that leave
    #: most of the loop's time out mark something else).
    steps_cover: float = 0.5
    #: Confidence reported when nothing repeats and the loop thread's work is one iteration.
    single_confidence: float = 0.6


class OnlineRules(NamedTuple):
    """When the detector tries to decide before the end, and what the matcher keeps."""
    #: ``ProfilerStep#N`` spans repeat (each new one a boundary at once) from this many on.
    min_steps: int = 2
    #: The first online try at a thread's top level comes after this many times
    #: ``Rules.min_instances`` top-level ops ...
    first_try_per_instance: int = 4
    #: ... the next ones after this many more top-level ops, or this growth of the top
    #: level, whichever is later ...
    try_step: int = 8
    try_growth: float = 1.25
    #: ... besides each time a top-level op is read for the ``min_instances``-th to this many
    #: times (the 4th instance's first op is the earliest moment a unit of three instances
    #: can be certain).
    eager_tries: int = 8
    #: The children of containers this shallow (depth of the container) are tried.
    container_depth: int = 4
    #: Unit search work (``search.SearchBudget``: ops covered by the anchors' cuts) that
    #: each op read earns the online tries: a few tens of microseconds of search per op, and
    #: twice what one search may grow by per op (``Rules.search_work_per_op``), so a try put
    #: off is caught up with ...
    search_work_per_op: int = 8
    #: A search of a row costs at least this much per instance its anchors cut (ops of a
    #: symbol that repeats): each instance is weighed against a few candidate
    #: representatives, some ten ops' worth of work; on a row of short instances (a loop of
    #: one op: 1 M one-op iterations) that, not the ops covered, is the search's time.
    search_work_per_instance: int = 16
    #: ... beyond this much, free at the start: a loop found among a few dozen names is tried
    #: as without a budget. The recorded ``train_eval`` (eval passes and checkpoints make its
    #: steps unlike; tests/core/test_sections.py) needs between 0.5 M and 1 M before its loop is
    #: confirmed online; twice the larger (a constant, paid once: time per event stays bounded).
    search_work_free: int = 2_000_000
    #: Instance starts kept online, for the typical instance duration.
    typical_of: int = 64
    #: Ops of the matched level kept while matching, to weigh the work between an opening op
    #: of another section and an instance's first op (``matcher.RootMatcher``).
    recent_ops: int = 256
    #: Ops kept of one instance while matching (a bound, not a limit on instance size).
    max_instance_ops: int = 100_000
    #: A unit whose instances, every one exact, make the whole row from its first op, is
    #: believed online from this many on, even when one instance is no whole piece of work
    #: (a loop of one op: ``verdict.exact_row``). A layer repeats a few dozen times among
    #: other ops, never a thousand times with nothing else at the top of the loop thread;
    #: and a loop never confirmed online is searched whole at each try (the top level of
    #: 1 M one-op iterations held 1.2 GB at close).
    exact_row_instances: int = 1000


class MemoryRules(NamedTuple):
    """Bounds on what the detector keeps, whatever the length of the trace."""
    #: Ops kept below the top level of the skeleton (main threads only) ...
    max_nodes: int = 100_000
    #: ... and how deep.
    max_depth: int = 8
    #: Top-level ops kept of a side thread (pid != tid): enough to rank it as a loop thread.
    side_thread_roots: int = 10_000
    #: Top-level ops of kinds seen once (names of their own) kept of a main thread
    #: (``skeleton.Skeletons.forget_singles``): beyond, the older ones are forgotten, with
    #: their names. A kind of the loop recurs within a few turns, not 16,384 ops of names of
    #: their own later (the recorded traces' top levels hold at most a few hundred such
    #: ops); a million names each seen once kept some 370 bytes each (485 MB). Under
    #: ``max_roots``, which forgets ops of every kind, so that kinds that recur are kept
    #: longer.
    single_roots: int = 1 << 14
    #: ... the latest this many top-level ops are never forgotten (half: each sifting
    #: forgets about as many as it keeps, so each op is sifted about once).
    single_roots_latest: int = 1 << 13
    #: Top-level ops kept of a main thread whose loop is not confirmed, whatever their kinds
    #: (``structure.StructureDetector._at_the_bound``): there the close decision's search is
    #: made at once; if it finds no loop, the older half is forgotten (but the first op, and
    #: the longest and the latest-ending of them: ``skeleton.Skeletons.forget_oldest``),
    #: containers and what they hold too. A loop the online tries can believe is confirmed
    #: within a few dozen turns, and of the recorded traces (../shared, tests/data) the
    #: longest top level the close decision searches holds 1,867 ops. Names drawn at random,
    #: each seen a few times (no kind of its own, nothing to confirm), kept some 450 bytes an
    #: op and a close search over all of them (200 k ops: 224 MB of peak RSS, 1 M: 657 MB);
    #: that search over 65,000 ops of 32,000 names peaks at 179 MB, over half as many at
    #: most 129 MB.
    max_roots: int = 1 << 15
    #: Levels whose last search is kept for the next online try on them
    #: (``search.SearchMemo``): the top level and the chain of containers below it
    #: (``OnlineRules.container_depth`` + 1).
    memos: int = 5
    #: What a ``SearchMemo`` keeps per search, in ops covered by its values (a bag or
    #: composition of an instance of 40 ops counts 40): about 90 bytes each (measured), some
    #: 6 MB. The searches of the resnet trace's top level (600 ops, 19 anchors) keep under
    #: 30 000; those of the denoising loop of ``xdit_flux.1``'s capture trace (../shared) some
    #: 50 000: with half this budget its online tries weighed 69.0 k instances against
    #: representatives, not 45.1 k, and its split took 1.40-1.46 s of CPU, not 1.17-1.21
    #: (twice this budget: as with no bound).
    memo_budget: int = 1 << 16
    #: ``verdict.inner_repeat``'s answers the online tries keep (``verdict.InnerAnswers``):
    #: they alternate between a few rows (the top level, a container's children) and units.
    #: Each holds its first instance's ops flattened (at most ``VerdictRules.inner_flat_ops``
    #: references, 400 KB; on the real traces of ../shared at most 170 ops, 1.4 KB).
    inner_answers: int = 4
    #: Op names whose loop-marker and input-fetch tests are remembered (``search.loop_marker``,
    #: ``search.input_fetch``): the rows searched hold a few dozen names (the resnet trace's
    #: top level 58); about 150 bytes each, and the name kept.
    names_remembered: int = 4096
    #: Names with digits whose symbol is remembered (``skeleton.Symbols``: found with one
    #: lookup, not folded again); beyond, the table keeps only the families, and names are
    #: folded anew as they come. The recorded traces' ops have a few hundred such names;
    #: a million numbered names of one family (``op_17``, each seen once) would keep a
    #: million entries (a name that makes its own family is not remembered until it recurs).
    digit_names_remembered: int = 1 << 16
    #: Python frames kept while waiting for the top-level op they may open (a bound: the
    #: frames read within one top-level op of a file in time order).
    max_pending_frames: int = 4096
    #: Frames kept that open one top-level op (a wrapper chain; the program's own module
    #: frame opens the first op too).
    max_openers: int = 16
    #: ``ProfilerStep`` spans kept per thread until they are regular (``verdict.regular_steps``
    #: reads the latest two): the steps before that become boundaries too, as
    #: ``--detector steps`` makes them.
    max_steps_kept: int = 1024
    #: Of the threads the engine finds idle (beyond ``stack.LIVE_THREADS`` threads), the
    #: skeletons that ``close.loop_thread`` ranks first are kept, this many: the loop
    #: thread's choice among them stays what it would have been.
    loop_candidates_kept: int = 16


class Rules(NamedTuple):
    """Every threshold of the detector, with why it has its value: the unit search's are its
    own fields; the verdict's, the online tries' and the memory bounds are in their groups."""

    # -- search: how many instances, when a cut qualifies ------------------------------

    #: A unit must be seen this often before it is believed: two things look alike by chance
    #: (the text encoder runs twice in a diffusion request). See ``two_*`` for the exception.
    min_instances: int = 3
    #: Two instances make a unit only when they are this alike (two noisy steps are about
    #: 0.8; a step against a different phase, far less) ...
    two_similarity: float = 0.75
    #: ... and hold this share of the level's work: a two-step profile (schedule active=2)
    #: is all steps; two encoder calls in a request are a small part of it.
    two_coverage: float = 0.9
    #: At least this share of the instances (idle cycles aside) must be like the
    #: representative, and ``min_like`` of them: an eval step now and then is tolerated. Two
    #: alternating shapes (a sub-step unit, two per step) may qualify, but lose to the step
    #: (``super_period_floor``).
    like_share: float = 0.5
    min_like: int = 2
    #: At most this share of the instances may be fragments (under ``fragment_ops`` of the
    #: unit's ops): the anchor then also occurs inside the unit and cuts it apart.
    fragment_share: float = 0.25
    #: A fragment has under this share of the representative's ops (half) and, where work is
    #: weighed, under ``piece_work_share`` of its work.
    fragment_ops: float = 0.5
    #: The like instances must cover this share of the level's work (GPU work where known,
    #: else time): a loop of four heavy denoising steps beats twenty light encoder layers.
    min_coverage: float = 0.5
    #: Coverage counts the instances from this share of the median instance's ops ...
    cover_shortest: float = 0.5
    #: ... up to this many times them (an eval step is unlike a plain one, yet part of the
    #: loop; two steps merged where the anchor was dropped still count).
    cover_longest: float = 4
    #: Each instance's time counts at most this many times the median instance's: a single
    #: blocking sync cannot make a unit of a few tiny instances cover the trace.
    time_cap: float = 10.0
    #: A cut must be good as a whole: its mean similarity times its coverage reaches this. A
    #: rare op that happens to cut the loop into a few unlike pieces does not.
    min_quality: float = 0.45

    #: One search tries the anchors in the order they first occur until their cuts have
    #: covered this many ops (each anchor's cut costs about the ops it covers, some ten
    #: times over) ...
    search_work: int = 1_000_000
    #: ... plus this many per op of the row. The searches of the accuracy harness's traces
    #: cover 282 000 ops at most; a row of many names each seen a few times (no loop at all)
    #: would cost its ops times its names.
    search_work_per_op: int = 4
    #: ... and at most this many times the ops of the row (``search.search_cap``): a small
    #: row pays for a small search (2,000 ops of 400 names each seen five times: 128,000,
    #: not 1 M: the search's time is bounded per op). The searches of the accuracy harness's
    #: traces, whole and online, cover at most 38 times their row's ops.
    search_work_ratio: int = 64

    # -- search: how alike two instances are -------------------------------------------

    #: An instance is like the unit from this weighted similarity on. A step with an eval pass
    #: of three forwards scores about 0.6 against a plain step; another phase or model, or
    #: two steps merged into one instance (its anchor dropped), 0.5 or less.
    like: float = 0.55
    #: Weights of an op in an instance's bag: its time, its kernels, its count. Time and GPU
    #: work are what the user cares about; the count keeps cheap ops from weighing nothing.
    time_weight: float = 0.45
    gpu_weight: float = 0.45
    count_weight: float = 0.1
    #: Compare by cost (True) or by op counts alone (False: for flattened subtrees, where time
    #: and GPU work would be counted at several depths).
    weigh: bool = True
    #: An instance up to this many times the work of the representative (or down to its
    #: inverse) loses nothing for its size; beyond, its similarity shrinks with the square of
    #: the excess: two steps merged into one instance score under 0.45, a rollout 1.5x as
    #: long keeps 0.75 of its similarity.
    length_slack: float = 1.3
    #: Representatives tried when looking for the medoid instance (cost: this x instances).
    medoid_trials: int = 7
    #: The evidence names this many ops that differ most between the representative and the
    #: least like instance.
    differing_ops: int = 3
    #: A cut whose inner instances each hold at least this many kinds of op exactly once
    #: (the loss, ``Optimizer.step``, ``zero_grad``, the input fetch) has a *spine*: an instance
    #: that holds the whole spine once is one turn of the loop, like the unit, however much
    #: else it does (an eval pass, a checkpoint, a rollout of any length). Two kinds could be
    #: a coincidence; three are the program's own loop body. Only where instances are weighed
    #: (``weigh``): the exact search inside a container compares op for op.
    spine_ops: int = 3

    # -- search: which qualifying cut wins ---------------------------------------------

    #: Two cuts whose counts are within this ratio cut the same loop (rotations, or a cut that
    #: lost an instance where its anchor was missing): the more regular one wins.
    same_loop_ratio: float = 0.75
    #: ... by a margin of this much similarity per instance; within it the cuts are equally
    #: regular (rotations of one loop differ by timing noise) and the earlier one wins.
    score_margin: float = 0.1
    #: A coarse unit is a super-period of a finer one when the finer one has this many times
    #: its instances, and the finer one is a whole step: this share of its instances are like
    #: it (or idle) and all of them cover this share of the work ...
    super_period_ratio: float = 1.5
    super_period_like: float = 0.6
    super_period_coverage: float = 0.9
    #: ... and none of its instances (but idle cycles and the edges) is this unlike it: a step
    #: with an eval pass, or a noisy one, still holds a step (about 0.4 and up); layers do
    #: not: the instance that holds the loss, backward and optimizer is nothing like a layer
    #: (under 0.2).
    super_period_floor: float = 0.25
    #: ... nor is a piece of a step: unlike it and doing less than this share of its work.
    piece_work_share: float = 0.5
    #: A cut is *even* (cycles of one loop head: an idle poll is as long as a step, not a
    #: step and a sub-step) when every instance but the last has from this share ...
    even_shortest: float = 0.5
    #: ... to this many times the representative's number of ops.
    even_longest: float = 1.5

    # -- search: where an instance opens -----------------------------------------------

    #: The spine of a unit: the ops found in this share of its like instances (a step's
    #: data fetch, its sync); an op noise drops now and then still belongs to it.
    spine_share: float = 0.8
    #: A head op (before the anchor, opening the step) is found in at least this share of the
    #: instances' head windows (noise drops small head ops: ``aten::randn`` may be missing in
    #: a third of the steps) ...
    head_share: float = 0.5
    #: ... or found in a head window at this share of its occurrences (a head op that noise
    #: dropped from most steps is still only ever seen there) ...
    head_only_share: float = 0.8
    #: ... and either way in at least this many head windows.
    head_windows: int = 2
    #: A small op before an instance that the vote cannot place (its kind seen in one head
    #: window only: the step's first op that noise dropped from the other steps, or the
    #: previous step's last op) opens the instance when the idle gap before it is more than
    #: this many times the gap after it. Between two steps the host runs the loop itself
    #: (``prof.step()``, the ``for`` statement), so the widest gap is where the loop turns;
    #: any wider gap says so (``_after_loop_edge``).
    edge_gap_ratio: float = 1.0
    #: The first instance has no previous one to measure the loop's edge from: its step's
    #: own first ops (``search._first_edge``) reach back to a gap of this share of the
    #: edge's typical width before the other instances (a prologue's last op lies before
    #: about as wide a gap; the ops of the step's bookkeeping are a microsecond apart).
    edge_gap_share: float = 0.5
    #: The step's own first ops before its fetch (the profiler's step bookkeeping) each take
    #: at most this share of a step's time (``search._fetch_edge``); the previous step's
    #: optimizer, its backward, take more.
    edge_op_share: float = 0.1
    #: A unit whose instances each hold the loop's once-per-turn ops (``spine`` with a loop
    #: marker) begins at the loop's edge: between the two of its spine's kinds where the
    #: widest idle gap lies in (the median of) the instances, when that gap is at least this
    #: many times the widest between any other two (``search._at_loop_edge``); else no edge
    #: stands out and the head is read as usual.
    loop_edge_ratio: float = 2.0
    #: Symbols seen in fewer than this share of the instances are sporadic: a head walk steps
    #: over them.
    sporadic_share: float = 0.5

    # -- search: where the last instance ends ------------------------------------------

    #: The last instance has for sure this share of the shortest instance's ops.
    sure_share: float = 0.8
    #: While searching, the last instance runs until it has the median instance's ops and
    #: this share of its time (noise may add ops to it).
    last_time_share: float = 0.9
    #: Ops of a new kind after the last instance are noise (part of it) when they are this
    #: small (share of the median instance's time) and an op of a known kind follows; a big
    #: one (``save_checkpoint``) begins the epilogue.
    small_op_share: float = 0.05
    #: A run of this many small ops of new kinds after the last instance is no noise.
    max_head: int = 16

    # -- search: idle cycles -----------------------------------------------------------

    #: While searching, an instance unlike the representative that does less than this share
    #: of its GPU work is taken for an idle cycle (a poll that finds no work): it neither
    #: counts for nor against the unit.
    idle_work_share: float = 0.5
    #: ... and it spends at least this share of its time in ops of kinds the representative
    #: has not (``idle_step``).
    idle_own_ops: float = 0.5
    #: A cycle unlike the unit with fewer kernels than this share of the median cycle's is an
    #: idle cycle (failure mode 2: ``get_next_batch`` + ``idle_step``), reported apart.
    idle_gpu_share: float = 0.25
    #: A server's idle poll sleeps, then does a tiny op (a heartbeat): an op after an idle gap
    #: this many times the loop's narrowest edge (the gap before an instance: the loop's own
    #: Python between turns) and the median gap between two ops begins a turn of its own
    #: (``search._waits_apart``) ...
    wait_gap_ratio: float = 8.0
    #: A serving loop's turns each end waiting for the device (the tokens it needs on the
    #: host): the idle gaps after a blocking host sync fall in two clusters, the loop's own
    #: Python between turns and the host's work after a copy inside one, when the narrowest
    #: of the wide ones is this many times the widest of the narrow ones (recorded H200
    #: server: 48.8 against 15.9 µs) (``search._turns_apart``) ...
    turn_edge_ratio: float = 2.0
    #: ... and those wide gaps are the loop's edges when more than this share of the unit's
    #: instances (the first aside) already begin at one.
    turn_start_share: float = 0.5
    #: ... when the ops up to the next turn do at most this share of the representative's
    #: time (and, as an idle cycle, little of its GPU work, mostly in ops of their own).
    wait_work_share: float = 0.25

    # -- the other groups --------------------------------------------------------------

    verdict: VerdictRules = VerdictRules()
    online: OnlineRules = OnlineRules()
    memory: MemoryRules = MemoryRules()


#: The rules for finding iterations.
RULES = Rules()
#: Whether one instance is a whole piece of work (it repeats a sub-unit: a model's layers)
#: is asked op for op: a quarter of the blocks exactly alike (by op counts), covering a
#: third of the ops. Tolerance here would make a layer's q/k/v projections a model.
INNER_RULES = RULES._replace(weigh=False, like=1.0, like_share=0.24, min_like=4,
                              min_coverage=0.3)
#: Online, when every instance so far is like the unit, three exactly alike blocks inside
#: an instance make it a whole piece of work: a model of three layers.
ONLINE_INNER_RULES = INNER_RULES._replace(min_like=3)

