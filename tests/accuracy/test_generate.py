"""Tests of the synthetic trace generator and of the ground truth it promises."""
from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict

import pytest
from hypothesis import HealthCheck, given, settings

from stream_split.testing import generate as g

LAYOUTS = ("kineto", "time")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
CPU_CATS = ("cpu_op", "user_annotation")


def ns(x: float) -> int:
    return round(x * 1000)


def pairs(gen):
    return list(zip(gen.events, gen.truth.owners))


def owners_by_name(gen, name, gpu_mirror=False):
    """Owners of the events named ``name`` (CPU side; with their GPU mirrors if asked)."""
    return [o for e, o in pairs(gen) if e.get("name") == name
            and (gpu_mirror or e.get("cat") != "gpu_user_annotation")]


def kernels_by_owner(gen):
    out = defaultdict(list)
    for e, o in pairs(gen):
        if e.get("cat") == "kernel":
            out[o].append(e)
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("scenario", list(g.SCENARIOS))
def test_every_scenario_is_consistent(scenario, layout):
    gen = g.generate(scenario, seed=3, layout=layout)
    assert len(gen.truth.owners) == len(gen.events)
    assert g.check_consistency(gen) == []


@pytest.mark.parametrize("scenario", list(g.SCENARIOS))
def test_generation_is_deterministic_from_the_seed(scenario):
    a = g.render(g.generate(scenario, seed=5))
    assert a == g.render(g.generate(scenario, seed=5))
    assert a != g.render(g.generate(scenario, seed=6))


@pytest.mark.parametrize("scenario", ["training", "serving", "sample", "idle_steps"])
def test_every_gpu_event_links_to_its_launch_by_correlation(scenario):
    gen = g.generate(scenario, seed=1, streams=2, pre_trace_kernels=4)
    runtime = {e["args"]["correlation"]: (e, o) for e, o in pairs(gen)
               if e.get("cat") == "cuda_runtime"}
    first = min(runtime)
    flows_s = {e["id"] for e in gen.events if e.get("ph") == "s"}
    flows_f = Counter(e["id"] for e in gen.events if e.get("ph") == "f")
    gpu = Counter()
    for e, o in pairs(gen):
        if e.get("cat") not in GPU_CATS:
            continue
        corr = e["args"]["correlation"]
        gpu[corr] += 1
        if corr not in runtime:  # launched before the trace window
            assert corr < first and o == -1
            continue
        launch, launch_owner = runtime[corr]
        assert o == launch_owner
        assert e["args"]["External id"] == launch["args"]["External id"]
        assert ns(e["ts"]) >= ns(launch["ts"]) + ns(launch["dur"])
        assert corr in flows_s
    assert flows_f == gpu  # one ac2g "f" per GPU activity, id == correlation
    assert sum(1 for c in gpu if c not in runtime) == 4


def test_correlations_increase_with_launch_order():
    gen = g.generate("training", seed=2, layout="time")
    corrs = [e["args"]["correlation"] for e in gen.events if e.get("cat") == "cuda_runtime"]
    assert corrs == sorted(corrs) and len(set(corrs)) == len(corrs)


def test_a_graph_launch_has_one_correlation_for_many_kernels():
    gen = g.generate("serving", seed=0, graph_kernels=[20, 60])
    per_corr = Counter(e["args"]["correlation"] for e in gen.events if e.get("cat") == "kernel")
    graphs = [e["args"]["correlation"] for e in gen.events if e.get("name") == "cudaGraphLaunch"]
    assert graphs
    assert all(20 <= per_corr[c] <= 60 for c in graphs)
    sample = g.generate("sample", seed=0)
    assert any(e.get("name") == "cudaGraphLaunch" for e in sample.events)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cpu_ops_nest_and_are_sorted_per_thread(layout):
    gen = g.generate("training", seed=4, layout=layout, autograd_thread=True)
    per_thread = defaultdict(list)
    for e in gen.events:
        if e.get("ph") == "X" and e.get("cat") in CPU_CATS:
            per_thread[e["tid"]].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
    assert len(per_thread) == 2  # the main thread and pt_autograd_0
    for spans in per_thread.values():
        assert [s for s, _ in spans] == sorted(s for s, _ in spans)
        stack = []
        for s, t in spans:
            while stack and stack[-1] <= s:
                stack.pop()
            assert not stack or t < stack[-1]
            stack.append(t)


def test_runtime_calls_sit_inside_the_op_that_launches():
    gen = g.generate("training", seed=4)
    ops = {e["args"]["External id"]: e for e in gen.events
           if e.get("ph") == "X" and e.get("cat") in CPU_CATS}
    for e in gen.events:
        if e.get("cat") == "cuda_runtime" and "External id" in e["args"]:
            op = ops[e["args"]["External id"]]
            assert (op["pid"], op["tid"]) == (e["pid"], e["tid"])
            assert ns(op["ts"]) < ns(e["ts"])
            assert ns(e["ts"]) + ns(e["dur"]) < ns(op["ts"]) + ns(op["dur"])


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ev_idx_increases_strictly_in_file_order(layout):
    gen = g.generate("sample", seed=0, layout=layout)
    idx = [e["args"]["Ev Idx"] for e in gen.events
           if isinstance(e.get("args"), dict) and "Ev Idx" in e["args"]]
    assert idx == list(range(len(idx))) and len(idx) > 100


@pytest.mark.parametrize("metadata", ["first", "last"])
def test_kineto_layout_writes_sections(metadata):
    gen = g.generate("training", seed=0, layout="kineto", metadata=metadata)
    cats = [e.get("cat") for e in gen.events]
    last_cpu = max(i for i, c in enumerate(cats) if c in CPU_CATS)
    first_gpu = min(i for i, c in enumerate(cats) if c in GPU_CATS + ("cuda_runtime", "ac2g"))
    assert last_cpu < first_gpu
    assert min(i for i, c in enumerate(cats) if c == "gpu_user_annotation") > \
        max(i for i, c in enumerate(cats) if c in GPU_CATS)
    meta = [i for i, e in enumerate(gen.events) if e.get("ph") == "M"]
    if metadata == "first":
        assert meta[0] == 0
    else:
        assert meta[0] > first_gpu
    assert gen.events[-1]["name"] == "Record Window End"
    # grouped by thread: all of the main thread, then all of the autograd thread
    tids = [e["tid"] for e in gen.events if e.get("cat") in CPU_CATS]
    assert tids == sorted(tids, key=lambda t: tids.index(t))
    assert len(set(tids)) == 2
    # so the file is not in time order: the CPU section ends later than GPU events begin
    ts = [e["ts"] for e in gen.events if e.get("ph") != "M"]
    assert ts != sorted(ts)


def test_time_layout_is_sorted_by_ts_with_metadata_first():
    gen = g.generate("serving", seed=0, layout="time")
    phs = [e["ph"] for e in gen.events]
    n_meta = phs.count("M")
    assert set(phs[:n_meta]) == {"M"}
    ts = [e["ts"] for e in gen.events[n_meta:]]
    assert ts == sorted(ts)


def test_header_keys_come_before_and_after_the_events():
    gen = g.generate("training", seed=0)
    assert {"schemaVersion", "deviceProperties", "distributedInfo"} <= set(gen.header_before)
    assert {"traceName", "displayTimeUnit", "baseTimeNanoseconds"} <= set(gen.header_after)
    text = g.render(gen)
    assert text.index('"schemaVersion"') < text.index('"traceEvents"') < text.index('"traceName"')


@pytest.mark.parametrize("scenario", ["serving", "preamble"])
def test_gpu_of_an_iteration_runs_after_the_next_one_began(scenario):
    gen = g.generate(scenario, seed=0)
    its = gen.truth.iterations
    ks = kernels_by_owner(gen)
    late = [i for i in range(len(its) - 1)
            if ks[i] and max(ns(k["ts"]) for k in ks[i]) > ns(its[i + 1]["start_ts"])]
    assert len(late) >= len(its) - 2
    if scenario == "serving":  # the whole GPU queue lags: even the first kernel of a step
        assert all(min(ns(k["ts"]) for k in ks[i]) > ns(its[i + 1]["start_ts"])
                   for i in range(len(its) - 1))


def reference_owners(gen):
    """The ownership rules of the module docstring, applied in the floats a reader sees."""
    its = gen.truth.iterations
    starts = [it["start_ts"] for it in its]
    ends = [it["end_ts"] for it in its]

    def window(e):
        i = max((k for k, s in enumerate(starts) if s <= e["ts"]), default=-1)
        if i < 0 or e["ts"] >= ends[i]:
            return -1
        if e.get("ph") == "X" and e["ts"] + e["dur"] > ends[i]:
            return -1
        return i

    cpu = [window(e) if e.get("ph") != "M" and isinstance(e.get("pid"), int) and e["pid"] != 0
           else None for e in gen.events]
    launch = {e["args"]["correlation"]: o for e, o in zip(gen.events, cpu)
              if e.get("cat") == "cuda_runtime"}
    annotation = {e["args"]["External id"]: o for e, o in zip(gen.events, cpu)
                  if e.get("cat") == "user_annotation"}
    out = []
    for e, o in zip(gen.events, cpu):
        if e.get("ph") == "M":
            out.append(None)
        elif e.get("cat") == "gpu_user_annotation":
            out.append(annotation.get(e["args"]["External id"], -1))
        elif e.get("pid") == 0:
            corr = e["id"] if e.get("ph") == "f" else e["args"]["correlation"]
            out.append(launch.get(corr, -1))
        elif o is None:  # Trace span, global instants
            out.append(-1)
        else:
            out.append(o)
    return out


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("scenario", list(g.SCENARIOS))
def test_owners_follow_the_rules_in_reader_floats(scenario, layout):
    gen = g.generate(scenario, seed=11, layout=layout, pre_trace_kernels=2, streams=2)
    assert gen.truth.owners == reference_owners(gen)


# ---- the truth of each scenario ----------------------------------------------------------------

def test_training_truth():
    gen = g.generate("training", seed=0, steps=8, eval_every=4, outer_wrapper=True)
    its = gen.truth.iterations
    assert len(its) == 8 and {it["kind"] for it in its} == {"iteration"}
    assert set(owners_by_name(gen, "train_loop")) == {-1}
    assert set(owners_by_name(gen, "save_checkpoint")) == {-1}
    assert set(owners_by_name(gen, "aten::normal_")) == {-1}  # model init prologue
    assert [o for o in owners_by_name(gen, "Optimizer.step#AdamW.step")] == list(range(8))
    # the autograd thread's ops belong to the step whose backward they run in
    pid, main_tid = gen.truth.loop_thread
    grad = {(e["tid"], o) for e, o in pairs(gen)
            if e.get("cat") == "cpu_op" and e["name"].startswith("autograd::engine")}
    assert {t for t, _ in grad} != {main_tid} and {o for _, o in grad} == set(range(8))
    # the eval pass (argmax) of step 3 lies in step 3's window
    assert Counter(owners_by_name(gen, "aten::argmax")) == {3: 3, 7: 3}
    names = {e["args"]["name"] for e in gen.events if e.get("name") == "thread_name"}
    assert any("pt_autograd_0" in n for n in names) and any("(python)" in n for n in names)


def test_training_without_step_annotations_has_the_same_windows():
    a = g.generate("training", seed=9, annotate_steps=True)
    b = g.generate("training", seed=9, annotate_steps=False)
    assert len(a.truth.iterations) == len(b.truth.iterations) == 8
    assert not any(e["name"].startswith("ProfilerStep") for e in b.events if "name" in e)


def test_serving_truth():
    gen = g.generate("serving", seed=0, steps=12, prefill_every=5)
    assert len(gen.truth.iterations) == 12
    assert owners_by_name(gen, "schedule") == list(range(12))
    assert set(owners_by_name(gen, "initialize_kv_cache")) == {-1}
    prefills = [o for e, o in pairs(gen) if e.get("cat") == "user_annotation"
                 and "_context_1(" in e["name"]]
    assert prefills == [0, 5, 10]
    names = {e["args"]["name"] for e in gen.events if e.get("name") == "thread_name"}
    assert any("VLLM::EngineCor" in n for n in names)


def test_diffusion_truth():
    gen = g.generate("diffusion", seed=0, steps=4)
    assert len(gen.truth.iterations) == 4
    assert owners_by_name(gen, "execute_diffusion_0_1024x1024", gpu_mirror=True) == [-1, -1]
    assert set(owners_by_name(gen, "encode_prompt")) == {-1}
    assert set(owners_by_name(gen, "vae_decode")) == {-1}
    assert sorted(set(owners_by_name(gen, "model_inference"))) == [0, 1, 2, 3]


def test_single_forward_is_one_iteration():
    gen = g.generate("single_forward", seed=0, layers=12)
    assert len(gen.truth.iterations) == 1
    assert Counter(o for e, o in pairs(gen) if e.get("cat") == "kernel") == {0: 12 * 5 + 1}  # 5 kernels a layer, then argmax


@pytest.mark.parametrize("family", ["layer", "compiled"])
def test_layer_annotations_are_not_iterations(family):
    gen = g.generate("layer_annotations", seed=0, steps=6, layers=8, family=family)
    assert len(gen.truth.iterations) == 6
    family_names = {e["name"] for e in gen.events if e.get("cat") == "user_annotation"}
    assert len(family_names) == 8
    assert not any(n.startswith("ProfilerStep") for n in family_names)


def test_idle_steps_truth():
    gen = g.generate("idle_steps", seed=0, iterations=10, idle=3)
    kinds = [it["kind"] for it in gen.truth.iterations]
    assert Counter(kinds) == {"iteration": 10, "idle": 3} and kinds[0] == "iteration"
    owners_idle = owners_by_name(gen, "idle_step")
    assert [kinds[o] for o in owners_idle] == ["idle"] * 3
    # idle cycles launch nothing from idle_step; each cycle starts at its get_next_batch
    starts = {ns(e["ts"]) for e in gen.events if e.get("name") == "get_next_batch"
              and e.get("cat") == "user_annotation"}
    assert {ns(it["start_ts"]) for it in gen.truth.iterations} == starts


def test_idle_positions_depend_on_the_seed():
    kinds = {tuple(it["kind"] for it in g.generate("idle_steps", seed=s).truth.iterations)
             for s in range(6)}
    assert len(kinds) > 1


def test_deep_roots_truth():
    gen = g.generate("deep_roots", seed=0, inner_steps=6, minor_roots=2)
    assert len(gen.truth.iterations) == 8
    for wrapper in ("serve_forever", "engine_loop", "run_engine", "load_weights"):
        assert set(owners_by_name(gen, wrapper)) == {-1}
    steps = [o for e, o in pairs(gen) if e.get("name") == "step" and e["cat"] == "user_annotation"]
    assert steps == list(range(8))


def test_preamble_iterations_begin_at_the_scheduler_step():
    gen = g.generate("preamble", seed=0, iterations=8)
    starts = [ns(e["ts"]) for e in gen.events if e.get("name") == "scheduler_step"
              and e.get("cat") == "user_annotation"]
    assert [ns(it["start_ts"]) for it in gen.truth.iterations] == starts


def test_gpu_only_has_no_iterations():
    gen = g.generate("gpu_only", seed=0, kernels=50)
    assert gen.truth.iterations == [] and gen.truth.loop_thread is None
    assert {o for e, o in pairs(gen) if e.get("ph") != "M"} == {-1}
    assert not any(e.get("cat") in CPU_CATS + ("cuda_runtime",) for e in gen.events)


def test_gpu_user_annotation_follows_its_cpu_annotation():
    gen = g.generate("sample", seed=0)
    cpu = {e["args"]["External id"]: o for e, o in pairs(gen) if e.get("cat") == "user_annotation"}
    mirrored = [(e, o) for e, o in pairs(gen) if e.get("cat") == "gpu_user_annotation"]
    assert mirrored
    for e, o in mirrored:
        assert o == cpu[e["args"]["External id"]]


# ---- writing -----------------------------------------------------------------------------------

@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
@pytest.mark.parametrize("form", ["object", "array", "jsonl"])
def test_written_files_load(tmp_path, form, suffix):
    gen = g.generate("single_forward", seed=0, layers=2)
    path = tmp_path / f"t{suffix}"
    g.write_trace(gen, str(path), form=form)
    opener = gzip.open if suffix.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        if form == "jsonl":
            events = [json.loads(line) for line in f if line.strip()]
        else:
            data = json.load(f)
            events = data["traceEvents"] if form == "object" else data
    assert events == gen.events
    if form == "object":
        assert set(gen.header_before) | set(gen.header_after) | {"traceEvents"} == set(data)


def test_open_array_can_be_closed_by_a_reader(tmp_path):
    gen = g.generate("single_forward", seed=0, layers=2)
    path = tmp_path / "open.json"
    g.write_trace(gen, str(path), form="array", close_array=False)
    text = path.read_text()
    assert not text.rstrip().endswith("]")
    assert json.loads(text.rstrip().rstrip(",") + "]") == gen.events


def test_write_truth(tmp_path):
    gen = g.generate("idle_steps", seed=0)
    g.write_truth(gen, str(tmp_path / "truth.json"))
    truth = json.loads((tmp_path / "truth.json").read_text())
    assert truth["owners"] == gen.truth.owners
    assert truth["iterations"] == gen.truth.iterations
    assert tuple(truth["loop_thread"]) == gen.truth.loop_thread


def test_cli_writes_trace_and_truth(tmp_path, capsys):
    out, truth = tmp_path / "s.json.gz", tmp_path / "truth.json"
    rc = g.main(["serving", str(out), "--seed", "2", "--layout", "time", "--truth", str(truth),
                 "--param", "steps=3", "--param", "graph_kernels=[5,9]"])
    assert rc == 0
    data = json.load(gzip.open(out, "rt"))
    owners = json.loads(truth.read_text())["owners"]
    assert len(owners) == len(data["traceEvents"])
    assert len(json.loads(truth.read_text())["iterations"]) == 3
    assert g.main(["--list"]) == 0
    assert "idle_steps" in capsys.readouterr().out
    assert g.main(["nonsense", str(out)]) == 2
    assert g.main(["serving", str(out), "--param", "bogus=1"]) == 2


def test_embedded_sample_is_small(tmp_path):
    path = tmp_path / "sample.json.gz"
    assert g.main(["sample", str(path)]) == 0
    assert path.stat().st_size < 60_000
    assert len(g.generate("sample").truth.iterations) == 8


# ---- properties over random variants -----------------------------------------------------------

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(g.scenario_params())
def test_truth_is_consistent_for_random_variants(variant):
    gen = variant.generate()
    assert g.check_consistency(gen) == []
    assert gen.truth.owners == reference_owners(gen)
    its = gen.truth.iterations
    assert [it["index"] for it in its] == list(range(len(its)))
    for a, b in zip(its, its[1:]):
        assert a["start_ts"] < a["end_ts"] <= b["start_ts"]
    for e, o in pairs(gen):
        assert (o is None) == (e.get("ph") == "M")
        assert o is None or (isinstance(o, int) and -1 <= o < len(its))
    # every CPU event owned by an iteration starts inside its window
    for e, o in pairs(gen):
        if o is not None and o >= 0 and e.get("pid") != 0:
            assert its[o]["start_ts"] <= e["ts"] < its[o]["end_ts"]
