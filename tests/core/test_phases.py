"""Serving phases: every step of a generated serving loop gets its phase (prefill, decode,
mixed, idle), from the framework's annotations when present and from graph launches and op
shapes when not; training loops get none."""
import json
from pathlib import Path

import pytest

import stream_split
from conftest import SHARED_TRACES, needs_shared, run_cli
from stream_split.core import SplitOptions
from stream_split.core.serving import DENOISE, annotation_phase, infer_phases, loop_containers
from stream_split.run import scan_records
from stream_split.testing.generate import generate, write_trace


def _phases(tmp_path, scenario, seed, **params):
    gen = generate(scenario, seed=seed, **params)
    path = tmp_path / f"{scenario}-{seed}.json.gz"
    write_trace(gen, str(path))
    return gen, list(stream_split.iterations(str(path)))


@pytest.mark.parametrize("annotations", ["vllm", "sglang"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_serving_step_gets_the_phase_its_annotation_names(tmp_path, annotations, seed):
    gen, records = _phases(tmp_path, "serving_phases", seed, annotations=annotations)
    truth = [(it["kind"], it["phase"]) for it in gen.truth.iterations]
    assert [(r.kind, r.phase) for r in records] == truth
    assert {r.phase_evidence for r in records if r.kind != "idle"} == {"annotation"}
    assert {p for _, p in truth} == {"prefill", "decode", "mixed", "idle"}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_every_serving_step_gets_its_phase_from_graphs_and_shapes_without_annotations(
        tmp_path, seed):
    gen, records = _phases(tmp_path, "serving_phases", seed)
    assert [(r.kind, r.phase) for r in records] == [
        (it["kind"], it["phase"]) for it in gen.truth.iterations]
    evidence = {(r.phase, r.phase_evidence) for r in records}
    assert ("decode", "graph") in evidence  # replayed CUDA graphs
    assert ("mixed", "shapes") in evidence  # prefill and one-token queries in one step
    assert ("idle", "kind") in evidence


def test_decode_steps_run_eagerly_are_told_by_their_one_token_queries(tmp_path):
    gen, records = _phases(tmp_path, "serving_phases", 5, graph_share=0.0)
    assert [r.phase for r in records] == [it["phase"] for it in gen.truth.iterations]
    assert all(r.graph_launches == 0 for r in records)
    assert {r.phase_evidence for r in records if r.phase == "decode"} == {"shapes"}


@pytest.mark.parametrize("scenario, params", [
    ("training", {}), ("training", {"graph_eval": True}), ("serving_polls", {}),
    ("rollout", {})])
def test_loops_that_are_not_serving_get_no_phase(tmp_path, scenario, params):
    _, records = _phases(tmp_path, scenario, 1, **params)
    assert records and {(r.phase, r.phase_evidence) for r in records} == {(None, None)}


@pytest.mark.parametrize("name, phase", [
    ("execute_15360_context_15(sq15360sk15360sqsq15728640sqsk15728640)_generation_0"
     "(sq0sk0sqsq0sqsk0)", "prefill"),
    ("execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk32785sqsq32sqsk32785)",
     "decode"),
    ("execute_8192_context_9(sq8155sk8430)_generation_37(sq37sk34489)", "mixed"),
    ("step[DECODE bs=64]", "decode"), ("step[EXTEND bs=4 toks=16384]", "prefill"),
    ("step[MIXED bs=12 toks=2048]", "mixed"), ("step[IDLE]", "idle"),
    ("ProfilerStep#3", None), ("step_counter", None)])
def test_framework_step_annotations_name_their_phase(name, phase):
    assert annotation_phase(name) == phase


def test_phase_and_its_evidence_are_in_the_manifest(tmp_path):
    gen = generate("serving_phases", seed=0, annotations="sglang")
    write_trace(gen, str(tmp_path / "t.json.gz"))
    run_cli("split", tmp_path / "t.json.gz", "-o", tmp_path / "out")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert [(it["phase"], it["phase_evidence"] == "annotation" or it["kind"] == "idle")
            for it in manifest["iterations"]] == [
        (it["phase"], True) for it in gen.truth.iterations]


RECORDED = Path(__file__).parents[1] / "data" / "cuda"


@pytest.mark.parametrize("name", ["serving_graphs", "serving_graphs_annotated"])
def test_recorded_gpu_serving_steps_get_their_phase(name):
    """A toy server recorded on an H200 (scripts/record_cuda_traces.py): decode as a replayed
    CUDA graph, prefill eager, mixed steps both, idle polls that launch nothing."""
    truth = json.loads((RECORDED / "truth.json").read_text())["programs"][name]
    records = list(stream_split.iterations(str(RECORDED / f"{name}.json.gz")))
    assert [r.step for r in records] == sorted(map(int, truth))
    assert [r.phase for r in records] == [truth[str(r.step)]["phase"] for r in records]
    evidence = {r.phase_evidence for r in records if r.phase != "idle"}
    assert evidence == ({"annotation"} if name.endswith("annotated")
                        else {"graph", "shapes", "graph+shapes"})


@needs_shared
@pytest.mark.shared
@pytest.mark.parametrize("trace, phase, evidence", [
    ("inference/sglang_prefilldecode/sglang_Qwen3-8B_prefilldecode.json.gz", "prefill",
     "annotation"),
    ("inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz", "decode", "annotation"),
    ("inference/vllm_decode_full/graph_execution.json.gz", "decode", "annotation"),
    ("inference/vllm_prefilldecode_piecewise/graph_execution.json.gz", "mixed", "annotation"),
])
def test_real_serving_steps_get_their_phase(trace, phase, evidence):
    records = list(stream_split.iterations(str(SHARED_TRACES / "tracelens" / trace)))
    assert [(r.phase, r.phase_evidence) for r in records] == [(phase, evidence)]


def test_a_diffusion_request_s_denoising_steps_are_denoise_not_decode(tmp_path):
    """xDiT's compiled FLUX replays CUDA graphs (decode evidence for a server), but its steps
    sit inside an ``execute_diffusion_*`` request: they are denoising steps."""
    write_trace(generate("diffusion", seed=2), str(tmp_path / "d.json.gz"))
    records = [r for r in scan_records(str(tmp_path / "d.json.gz"), SplitOptions())
               if getattr(r, "kind", None) == "iteration"]
    assert [(r.phase, r.phase_evidence) for r in records] == [(DENOISE, "container")] * 4
    evidence = {"levels": [{"container": ["<thread top level>"]},
                           {"container": ["ProfilerStep#N", "execute_diffusion_N_NxN"]}]}
    assert loop_containers(evidence)[-1] == "execute_diffusion_N_NxN"
    assert infer_phases(["iteration", "idle"], [None, None], [3, 0], [5, 0],
                        loop_containers(evidence)) == [(DENOISE, "container"), ("idle", "kind")]


def test_steps_of_a_trace_that_runs_diffusers_code_are_denoise_whatever_its_containers():
    """xDiT's CUDA-graph capture traces hold one compiled region that names nothing, but
    their Python frames run Hugging Face Diffusers: no LLM phase (they were ``mixed``)."""
    assert infer_phases(["iteration", "idle"], [None, None], [3, 0], [5, 0], ["Torch-Compiled"],
                        diffusion_code=True) == [(DENOISE, "frames"), ("idle", "kind")]


@needs_shared
@pytest.mark.parametrize("trace", [
    "inference/xdit_flux.1/capture_traces/capture_trace_rank_0.json.gz",
    "inference/xdit_flux.1_aiter_sage/capture_traces/capture_trace_rank_0.json.gz",
    "inference/xdit_sd_3.5/profile_trace_rank_0.json.gz",
])
def test_real_diffusion_traces_get_no_llm_phase(trace):
    records = list(stream_split.iterations(str(SHARED_TRACES / "tracelens" / trace)))
    assert records and {(r.phase, r.phase_evidence) for r in records} == {(DENOISE, "frames")}


@pytest.mark.parametrize("graphs", [0, 1])
def test_facts_that_tell_nothing_are_read_a_page_at_a_time_to_the_same_answer(graphs):
    """``SeenFacts.all_nothing`` (no iteration's ops told anything: read a page at a time,
    paged or not) answers ``is_serving`` as the facts read one by one do."""
    from stream_split.core.serving import NOTHING_SEEN, PhaseFacts, SeenFacts, is_serving
    from stream_split.pages import PagedList
    paged = PagedList(page_items=4, resident_pages=1)
    for _ in range(10):
        paged.append(None)
        paged.trim()
    launches = [0] * 9 + [graphs]
    assert SeenFacts(paged).all_nothing() and SeenFacts([None] * 10).all_nothing()
    assert is_serving(SeenFacts(paged), launches) == is_serving([NOTHING_SEEN] * 10, launches) \
        == bool(graphs)
    told = PhaseFacts()
    told.decode_work = 1
    facts = SeenFacts([None] * 9 + [told])
    assert not facts.all_nothing() and is_serving(facts, [0] * 10)


def test_iterations_past_the_last_facts_kept_have_told_nothing():
    """The engine keeps phase facts up to the last iteration that has some
    (``Splitter._observe_phase``): ``SeenFacts`` of more iterations reads the others as
    having told nothing, and answers as the facts padded with None do."""
    from stream_split.core.serving import NOTHING_SEEN, PhaseFacts, SeenFacts, is_serving
    told = PhaseFacts()
    told.decode_work = 1
    short, padded = SeenFacts([None, told], 5), SeenFacts([None, told, None, None, None])
    assert len(short) == len(padded) == 5
    assert list(short) == list(padded) == [NOTHING_SEEN, told] + [NOTHING_SEEN] * 3
    assert not short.all_nothing() and is_serving(short, [0] * 5) == is_serving(padded, [0] * 5)
    assert SeenFacts([], 3).all_nothing() and list(SeenFacts([], 3)) == [NOTHING_SEEN] * 3


def test_phase_facts_of_a_late_iteration_alone_are_kept_at_its_index():
    """Phase evidence in the third of five iterations only: the facts list reaches it,
    padded with None before it (``Splitter._observe_phase``), and its phase is read there."""
    splitter = stream_split.Splitter(SplitOptions(detector="steps"))
    for i in range(5):
        splitter.feed({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}",
                       "pid": 1, "tid": 1, "ts": 100 * i, "dur": 90})
        name = "step[DECODE bs=1]" if i == 2 else "aten::add"
        splitter.feed({"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
                       "ts": 100 * i + 10, "dur": 20})
    splitter.end_of_input()
    while splitter.decided().more:
        pass
    phases = [(r.phase, r.phase_evidence) for r in splitter.iterations]
    assert len(phases) == 5 and phases[2] == ("decode", "annotation")
