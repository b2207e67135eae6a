"""Beam's Dask runner with the defects that break ordinary pipelines fixed (Beam 2.77 only).

Apache Beam 2.77 ships ``apache_beam.runners.dask.dask_runner.DaskRunner``: it turns the
pipeline into ``dask.bag`` operations (``Create``, ``ParDo``, ``GroupByKey``, ``Flatten``;
every other primitive is passed through as a no-op) and computes them on a
``dask.distributed`` cluster. Read in its source (``dask_runner.py``,
``transform_evaluator.py``, ``overrides.py``) and confirmed on a real cluster
(``tests/beam/test_dask.py``), five of its behaviours break pipelines that are correct on every
other runner:

1. **Only the last leaf is computed.** ``run_pipeline`` computes "just the last value" of
   the bag graph: of two ``WriteToText`` branches only the second is written.
2. **Tagged outputs are not separated.** A multi-output ``ParDo`` hands every consumer the
   bag of all its outputs, whatever the tag; ``Partition`` (a multi-output ``ParDo``) mixes
   its partitions.
3. **Outputs of ``finish_bundle`` are dropped**: a bundle's results are collected before
   ``finish_bundle`` runs (``WriteToText`` with runner-chosen sharding emits its file names
   there, so the files are written and then never renamed into place).
4. **Side inputs are computed again inside the task that reads them**: the side input's
   whole bag graph is pickled into the consuming task and ``list(bag)`` recomputes it, every
   upstream step included (``WriteToText``'s finalizing step reads its written files as a
   side input: every trace would be split once more per output file).
5. **Nothing is ever spread over the workers**: ``Reshuffle`` is a no-op and ``GroupByKey``
   keeps the partition count of its input, so a pipeline that starts from one ``Create``
   element (one file pattern) runs on one worker however large the cluster.

``DaskRunner`` here keeps Beam's option handling, ``Create`` and ``Flatten`` translations
and result object, and replaces the translation of the graph: each ``PCollection`` (not each
transform) gets its own bag, so a consumer reads exactly its tag; every leaf is computed;
each bundle collects its outputs after ``finish_bundle``; side inputs are dependencies of the
consuming tasks (computed once, in the same graph); ``Reshuffle`` deals every input
partition over ``--dask_npartitions`` partitions (default: four per worker thread), and
``GroupByKey`` groups over that many. ``GroupByKey`` places an integer key ``k`` in
partition ``k % n``, so keys that are ranks (``stream_split.beam`` ranks traces by size) are
dealt round-robin.

What it must never do: patch Beam's classes in place, or run on a Beam version it was not
checked on (the translation uses Beam internals: ``DoFnInvoker``, ``_OutputHandler``, the
Dask overrides). ``CHECKED_BEAM_VERSIONS`` lists the versions checked; others are refused.

    python -m pipelines.split_archive ... --runner=stream_split.dask_runner.DaskRunner \\
        --dask_client_address=tcp://SCHEDULER:8786

(``pipelines.split_archive`` also swaps this runner in for Beam's own ``DaskRunner``.)
"""
from __future__ import annotations

import dataclasses
import typing as t
from functools import partial

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.pipeline import AppliedPTransform, PipelineVisitor
from apache_beam.runners.common import DoFnContext, DoFnInvoker, DoFnSignature, Receiver
from apache_beam.runners.common import _OutputHandler
from apache_beam.transforms.sideinputs import SideInputMap
from apache_beam.utils.windowed_value import WindowedValue

try:
    import dask
    import dask.bag as db
    import dask.distributed  # noqa: F401  (Beam's runner needs it; fail here, not later)
    from dask.bag.core import groupby_tasks
    from apache_beam.runners.dask import dask_runner as _beam_dask
    from apache_beam.runners.dask import overrides as _beam_overrides
    from apache_beam.runners.dask import transform_evaluator as _beam_ops
except ImportError as _error:  # pragma: no cover - depends on the installation
    raise ImportError(
        "stream_split.dask_runner needs Dask: pip install 'stream-split[dask]'") from _error

from stream_split.beam import BEAM_DASK_RUNNER

__all__ = ["DaskRunner", "CHECKED_BEAM_VERSIONS", "check_beam_version", "runner_for"]

#: Beam versions whose Dask runner internals this module was checked against.
CHECKED_BEAM_VERSIONS = ("2.77",)

#: Names under which a user selects Beam's own Dask runner (``--runner=...``).
_BEAM_DASK_RUNNER_NAMES = ("DaskRunner", BEAM_DASK_RUNNER)

#: Partitions per worker thread that ``Reshuffle`` and ``GroupByKey`` deal over: more than one
#: so that a worker that finishes early takes another partition.
_PARTITIONS_PER_THREAD = 4


def check_beam_version(version: str = beam.__version__) -> None:
    """Refuse a Beam whose Dask runner this module was not checked against."""
    if not any(version == v or version.startswith(v + ".") for v in CHECKED_BEAM_VERSIONS):
        checked = ", ".join(CHECKED_BEAM_VERSIONS)
        raise RuntimeError(
            f"stream_split.dask_runner was checked on Apache Beam {checked} only; this is "
            f"Beam {version}. Install a checked version "
            f"(pip install 'stream-split[dask]') or check the runner against this one.")


def runner_for(name: str | None):
    """This module's runner if ``name`` selects Beam's Dask runner, else ``None``."""
    return DaskRunner() if name in _BEAM_DASK_RUNNER_NAMES else None


# -- per-bundle execution (runs on the workers) --------------------------------------------


class _TagCollector(dict):
    """Receivers by output tag, all appending ``(tag, value)`` to one list (one bundle)."""

    def __init__(self):
        super().__init__()
        self.outputs: list[tuple[str | None, t.Any]] = []

    def __missing__(self, tag):
        receiver = self[tag] = _TagReceiver(tag, self.outputs)
        return receiver


@dataclasses.dataclass
class _TagReceiver(Receiver):
    tag: str | None
    outputs: list

    def receive(self, windowed_value: WindowedValue):
        # Values leave their window, as Beam's own translation does for the main output: the
        # next step puts them back in the global window (batch pipelines only).
        self.outputs.append((self.tag, windowed_value.value))


@dataclasses.dataclass
class _SideInputSpec:
    view_class: type
    view_options: dict
    window_mapping_fn: t.Any


@dataclasses.dataclass
class _BundleSpec:
    """What a task needs to run one ``ParDo`` over one partition (pickled with the task)."""
    fn: beam.DoFn
    window_fn: t.Any
    label: str
    args: list
    kwargs: dict
    side_inputs: list[_SideInputSpec]


def _run_bundle(items, spec: _BundleSpec, *side_values) -> list:
    """Run ``spec.fn`` over one partition; ``(tag, value)`` for every output, in order."""
    collector = _TagCollector()  # per bundle: never shared between partitions
    handler = _OutputHandler(
        window_fn=spec.window_fn, main_receivers=collector[None], tagged_receivers=collector,
        per_element_output_counter=None, output_batch_converter=None,
        process_yields_batches=False, process_batch_yields_elements=False)
    side_inputs = [
        SideInputMap(side.view_class, side.view_options,
                     [_beam_ops.get_windowed_value(v, side.window_mapping_fn) for v in values])
        for side, values in zip(spec.side_inputs, side_values)]
    invoker = DoFnInvoker.create_invoker(
        DoFnSignature(spec.fn), handler, context=DoFnContext(spec.label, state=None),
        side_inputs=side_inputs or None, input_args=spec.args, input_kwargs=spec.kwargs,
        user_state_context=None, bundle_finalizer_param=beam.DoFn.BundleFinalizerParam())
    invoker.invoke_setup()
    invoker.invoke_start_bundle()
    for item in items:
        invoker.invoke_process(_beam_ops.get_windowed_value(item, spec.window_fn))
    invoker.invoke_finish_bundle()  # before collecting: finish_bundle may emit (defect 3)
    invoker.invoke_teardown()
    return collector.outputs


def _has_tag(tag, pair) -> bool:
    return pair[0] == tag


def _value(pair):
    return pair[1]


def _concat(partitions) -> list:
    return [element for partition in partitions for element in partition]


def _deal(partition, parts: int, offset: int = 0) -> tuple:
    """Element ``i`` to part ``(offset + i) % parts``, order kept within each part."""
    elements = list(partition)
    return tuple(elements[(j - offset) % parts::parts] for j in range(parts))


def _spread(bag: db.Bag, partitions: int) -> db.Bag:
    """``bag`` over at least ``partitions`` partitions, each input partition dealt round-robin.

    Dealing, not splitting into runs: the elements of a size-ordered partition (largest
    first) land in every part, largest first in each.
    """
    if bag.npartitions >= partitions:
        return bag
    parts = -(-partitions // bag.npartitions)
    pieces = []
    for partition in bag.to_delayed(optimize_graph=False):
        pieces.extend(dask.delayed(_deal, nout=parts)(partition, parts))
    return db.from_delayed(pieces)


def _partitioned(bag: db.Bag, partitions: int) -> db.Bag:
    """``bag`` over exactly ``partitions`` partitions: adjacent ones joined, or each dealt
    (``_spread``). A ``Flatten`` adds its inputs' partitions up: without this, every
    ``GroupByKey`` after one would keep them all, and the graph (a shuffle's tasks grow with
    the square of its partitions) would grow with the pipeline's depth."""
    if bag.npartitions > partitions:
        return bag.repartition(npartitions=partitions)
    return _spread(bag, partitions)


def _reshuffle(bag: db.Bag, partitions: int) -> db.Bag:
    """``bag`` dealt over exactly ``partitions`` partitions: element ``k`` of input partition
    ``i`` to partition ``(i + k) % partitions``. Every input partition is dealt over all of
    them, however the input was partitioned: the ranges of one trace, all in one partition
    (one trace was cut by one task), are spread over the workers."""
    dealt = [dask.delayed(_deal, nout=partitions)(partition, partitions, i)
             for i, partition in enumerate(bag.to_delayed(optimize_graph=False))]
    return db.from_delayed([dask.delayed(_concat)([parts[j] for parts in dealt])
                            for j in range(partitions)])


def _group_key(pair):
    return pair[0]


def _group_hash(key) -> int:
    """Integer keys land in partition ``key % n``; others by a hash stable across processes."""
    if type(key) is int:
        return key
    return int(dask.base.tokenize(key), 16)


def _group_values(group):
    key, pairs = group
    return key, [_beam_ops.defenestrate(pair[1]) for pair in pairs]


# -- translation ------------------------------------------------------------------------------


class _Graph(PipelineVisitor):
    """The pipeline as bags: one per PCollection, and the leaves that must all be computed."""

    def __init__(self, bag_kwargs: dict, spread: int):
        self._bag_kwargs = bag_kwargs
        self._spread = spread
        self._bags: dict[pvalue.PCollection, db.Bag] = {}
        self._results: list[tuple[AppliedPTransform, db.Bag]] = []
        self._consumed: set = set()

    def leaves(self) -> list[db.Bag]:
        """The bags of the steps nobody reads: computing them all computes the pipeline."""
        leaves = {}  # by bag name: a no-op step hands on its input's bag
        for node, bag in self._results:
            if not any(pcoll in self._consumed for pcoll in node.outputs.values()):
                leaves[bag.name] = bag
        return list(leaves.values())

    def visit_transform(self, node: AppliedPTransform) -> None:
        inputs = [value for value in node.inputs if not isinstance(value, pvalue.PBegin)]
        self._consumed.update(inputs)
        self._consumed.update(side.pvalue for side in node.side_inputs)
        input_bags = [self._bags[value] for value in inputs]
        transform = node.transform

        # Exact classes, as in Beam's translation table: ``_GroupAlsoByWindow`` is a ParDo
        # subclass that must stay a no-op (the grouping step already took values out of
        # their windows).
        kind = type(transform)
        if kind is beam.ParDo:
            result = self._par_do(node, input_bags[0])
            for pcoll in node.outputs.values():
                self._bags[pcoll] = result.filter(partial(_has_tag, pcoll.tag)).map(_value)
        else:
            if kind is _beam_overrides._Create:
                result = _beam_ops.Create(node, bag_kwargs=self._bag_kwargs).apply(None)
            elif kind is _beam_overrides._Flatten:
                result = db.concat(input_bags) if input_bags else db.from_sequence([])
            elif kind is _beam_overrides._GroupByKeyOnly:
                spread = _partitioned(input_bags[0], self._spread)
                result = groupby_tasks(spread, _group_key, hash=_group_hash).map(_group_values)
            elif kind is _beam_overrides._Reshuffle:
                result = _reshuffle(input_bags[0], self._spread)
            elif len(input_bags) == 1:  # any other primitive: identity, as in Beam's runner
                result = input_bags[0]
            else:
                raise NotImplementedError(
                    f"{node.full_label}: {type(transform).__name__} has no Dask translation")
            for pcoll in node.outputs.values():
                self._bags[pcoll] = result
        self._results.append((node, result))

    def _par_do(self, node: AppliedPTransform, input_bag: db.Bag) -> db.Bag:
        transform = node.transform
        args, kwargs = transform.raw_side_inputs
        main_input = next(iter(node.main_inputs.values()))
        side_specs, side_values = [], []
        for side in node.side_inputs:
            side_specs.append(_SideInputSpec(type(side), side._view_options(),
                                             side._window_mapping_fn))
            # A dependency of every task of this ParDo: computed once, in this graph.
            side_values.append(dask.delayed(_concat)(
                self._bags[side.pvalue].to_delayed(optimize_graph=False)))
        spec = _BundleSpec(fn=transform.fn, window_fn=main_input.windowing.windowfn,
                           label=transform.label, args=list(args), kwargs=kwargs,
                           side_inputs=side_specs)
        return input_bag.map_partitions(_run_bundle, spec, *side_values)


class DaskRunner(_beam_dask.DaskRunner):
    """Beam's ``DaskRunner``, every leaf computed and every tag routed (see the module)."""

    def run_pipeline(self, pipeline, options):
        check_beam_version()
        import dask.distributed as ddist

        dask_options = options.view_as(_beam_dask.DaskOptions).get_all_options(
            drop_default=True, current_only=True)
        bag_kwargs = _beam_dask.DaskOptions._extract_bag_kwargs(dask_options)
        client = ddist.Client(**dask_options)
        spread = bag_kwargs.get("npartitions") or _PARTITIONS_PER_THREAD * max(
            1, sum(client.nthreads().values()))

        pipeline.replace_all(_beam_overrides.dask_overrides())
        graph = _Graph(bag_kwargs, spread)
        pipeline.visit(graph)
        # All leaves in one call, not optimized one by one first (as ``dask.optimize`` on
        # each would): their graphs are merged, so a step that several leaves read runs once.
        futures = client.compute(graph.leaves())
        return _beam_dask.DaskRunnerResult(client, futures)
