"""Serving phases: which iterations of an inference server's loop are prefill, decode, mixed or
idle, and which evidence decided. Pure: no I/O, no state beyond a cache of op-name roles.

The engine feeds each iteration's structural ops through ``PhaseFacts.observe`` (only the few
ops whose ``role_of(name)`` is not ``NONE``), counts its graph launches, and at the end asks
``infer_phases`` for one ``(phase, evidence)`` per iteration. The evidence, strongest first:

1. ``annotation``: the framework's own step annotation names the phase.
   vLLM (and SGLang's copy of it): ``execute_<t>_context_<n>(...)_generation_<m>(...)``
   (``n`` prefill and ``m`` decode requests: both -> mixed, only ``n`` -> prefill, only ``m``
   -> decode);
   SGLang: ``step[DECODE bs=64]``, ``step[EXTEND bs=4 toks=16384]`` (prefill),
   ``step[MIXED ...]``, ``step[IDLE]``.
2. ``kind``: a cycle the structure found to be idle (a server's empty poll) is ``idle``;
   ``no launches``: so is a step that launches no GPU work at all.
3. ``graph`` / ``shapes`` / ``graph+shapes``: a replayed CUDA graph (``cudaGraphLaunch``) is
   decode work (servers capture decode batches, never prompts); shapes with one token per
   sequence are decode work, with several prefill work: an attention query (``Input Dims``
   ``[b, h, s, d]`` or ``[b, s, h, d]``; paged/decode attention ops are decode, varlen,
   prefill and extend ops prefill) or a GEMM-like op's ``[batch, seq, hidden]`` input.
   Prefill work together with decode work (eager or replayed) is ``mixed``: a chunked-prefill
   step. TraceLens looks at batch sizes only and so cannot tell a mixed step from a prefill;
   the tokens per sequence can.
4. ``shapes`` (tokens): the tokens of a step are the most rows of its GEMM-like ops
   (``aten::linear``/``mm``/``addmm``/``matmul``) or of a varlen attention query
   (``[tokens, heads, dim]``). Prefill and decode steps split at the widest gap between the
   steps' token counts (at least ``TOKEN_GAP``x), or at ``DECODE_MAX_TOKENS`` when all steps
   are alike. Without attention query lengths, a step with graph replays and many tokens is
   ``mixed`` (piecewise graphs around eager attention over a prompt), an eager one
   ``prefill`` or ``decode`` by its tokens.

Only serving loops get phases: a trace with backward ops (training) gets none, and so does one
with no decode evidence anywhere (no annotation, no graph replay, no one-token query).

A diffusion model's denoising loop is no LLM server, though a compiled one replays CUDA graphs
(decode evidence above): when the ops that hold the loop (the detector's containers,
``evidence["levels"]``) name diffusion work (``DIFFUSION_WORDS``: xDiT's
``execute_diffusion_*`` request), every step is ``denoise`` (evidence ``container``), idle
cycles ``idle``; likewise (evidence ``frames``) when the trace holds Python frames of Hugging
Face Diffusers (``DIFFUSION_CODE``), as xDiT's CUDA-graph capture traces do, whose one
compiled region names nothing.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import msgspec

from stream_split.core.coded import CodedList
from stream_split.core.records import slots_reduce
from stream_split.pages import read_pages, reading
from stream_split.trace_format import DIMS_ARG

PREFILL, DECODE, MIXED, IDLE, DENOISE = "prefill", "decode", "mixed", "idle", "denoise"
PHASES = (PREFILL, DECODE, MIXED, IDLE, DENOISE)
#: A container of the loop whose name matches holds a diffusion model's denoising steps.
DIFFUSION_WORDS = re.compile(r"diffusion|denois", re.I)
#: Python frames whose name begins so run Hugging Face Diffusers (FLUX, Stable Diffusion
#: pipelines): a trace holding them is a diffusion model's, whatever its containers are named
#: (a compiled region captured into CUDA graphs names none).
DIFFUSION_CODE = "diffusers/"

#: Two clusters of per-step token counts are prefill and decode when the larger is at least
#: this many times the smaller (a prompt is hundreds of tokens; a decode step one per request).
TOKEN_GAP = 4.0
#: Without a gap: a step of at most this many tokens is a decode step (one token per request;
#: decode batches beyond 256 requests are rare).
DECODE_MAX_TOKENS = 256

# Roles of an op name for phase evidence.
NONE, GEMM, ATTENTION, BACKWARD, FRAMEWORK_STEP = range(5)

_GEMM_NAMES = {"aten::linear": 0, "aten::mm": 0, "aten::matmul": 0, "aten::addmm": 1}
_VLLM = re.compile(r"context_(\d+)(?:\([^)]*\))?_generation_(\d+)")
_SGLANG = re.compile(r"step\[(DECODE|EXTEND|PREFILL|MIXED|IDLE)\b([^\]]*)\]")
_SGLANG_PHASE = {"DECODE": DECODE, "EXTEND": PREFILL, "PREFILL": PREFILL, "MIXED": MIXED,
                 "IDLE": IDLE}
_CACHE_LIMIT = 10_000


#: Op name -> its role, for the names seen (``role_of``): at most ``_CACHE_LIMIT`` (bounded by
#: the program's op names), and no framework step name (one name per step: it carries the
#: step's number). A plain dict, that the engine's hot paths read themselves
#: (``ROLES[name] if name in ROLES else role_of(name)``): a dict subclass with
#: ``__missing__`` had each lookup go through its type's slot, and a name not held, through
#: two Python calls more (a new name took 5.5 k instructions, 4.9 k now: callgrind).
ROLES: dict = {}


def role_of(name: str) -> int:
    """The role of an op name for phase evidence (remembered in ``ROLES``)."""
    role = ROLES.get(name)
    if role is not None:
        return role
    if name in _GEMM_NAMES:
        role = GEMM
    elif name.startswith("autograd::engine::evaluate_function"):
        role = BACKWARD
    elif "_generation_" in name or name.startswith("step["):
        return FRAMEWORK_STEP  # not remembered (see ``ROLES``)
    elif "att" in (lower := name.lower()) and ("attention" in lower or "attn" in lower):
        role = ATTENTION
    else:
        role = NONE
    if len(ROLES) < _CACHE_LIMIT:
        ROLES[name] = role
    return role


def annotation_phase(name: str) -> str | None:
    """The phase a framework step annotation names, or None."""
    m = _VLLM.search(name)
    if m:
        prefills, decodes = int(m.group(1)), int(m.group(2))
        if prefills and decodes:
            return MIXED
        return PREFILL if prefills else DECODE if decodes else IDLE
    m = _SGLANG.search(name)
    if m:
        return _SGLANG_PHASE[m.group(1)]
    return None


def input_dims(args):
    """The ``Input Dims`` of an op's ``args`` (None without), parsed if a slim batch left
    them as JSON text (``decode.TraceDecoder.lazy_dims``)."""
    dims = args.get(DIMS_ARG) if args else None
    if dims.__class__ is msgspec.Raw:
        return msgspec.json.decode(dims)
    return dims


def _dims(args, i: int):
    dims = input_dims(args)
    if isinstance(dims, list) and len(dims) > i and isinstance(dims[i], list):
        return dims[i]
    return None


@dataclass(slots=True)
class PhaseFacts:
    """What one iteration's ops say about its phase."""
    annotation: str | None = None  # the phase its framework step annotation names
    max_tokens: int = 0            # most rows of a GEMM-like op's input, or of a varlen
    #                                attention query ([tokens, heads, dim]): tokens in the step
    decode_work: int = 0           # ops whose shapes show one token per sequence
    prefill_work: int = 0          # ops whose shapes show several tokens per sequence
    backward: int = 0              # autograd ops: a training step
    __reduce__ = slots_reduce  # paged through a file (``pages.PagedList``): pickled fast

    def observe(self, role: int, name: str, args) -> None:
        if role == GEMM:
            dims = _dims(args, _GEMM_NAMES[name])
            if dims and len(dims) >= 2 and all(isinstance(d, int) for d in dims):
                rows = 1
                for d in dims[:-1]:
                    rows *= d
                if rows > self.max_tokens:
                    self.max_tokens = rows
                if len(dims) == 3:  # [batch, seq, hidden]: seq tokens per sequence
                    self._count(DECODE if dims[1] == 1 else PREFILL)
        elif role == ATTENTION:
            q = _dims(args, 0)
            if q and len(q) == 3 and isinstance(q[0], int) and q[0] > self.max_tokens:
                self.max_tokens = q[0]  # a varlen query, [tokens, heads, dim]
            self._count(_query_kind(name, q))
        elif role == BACKWARD:
            self.backward += 1
        elif role == FRAMEWORK_STEP and self.annotation is None:
            self.annotation = annotation_phase(name)

    def _count(self, work: str | None) -> None:
        if work == DECODE:
            self.decode_work += 1
        elif work == PREFILL:
            self.prefill_work += 1


def _query_kind(name: str, q) -> str | None:
    """Decode (one-token query) or prefill work, from an attention op's name and query dims."""
    lower = name.lower()
    if "decode" in lower or "paged_attention" in lower:
        return DECODE
    if q and len(q) == 4 and all(isinstance(d, int) for d in q):
        # [batch, heads, seq, dim] (aten SDPA) or [batch, seq, heads, dim] (flash_attn): a
        # query of one token has a 1 in one of the middle two places.
        return DECODE if 1 in (q[1], q[2]) else PREFILL
    if "varlen" in lower or "prefill" in lower or "extend" in lower:
        return PREFILL
    return None


def _token_threshold(counts: list[int]) -> float:
    """Token count above which a step is prefill: the widest gap, else DECODE_MAX_TOKENS."""
    values = sorted(set(c for c in counts if c > 0))
    best, threshold = TOKEN_GAP, DECODE_MAX_TOKENS
    for lo, hi in zip(values, values[1:]):
        if hi / lo >= best:
            best, threshold = hi / lo, (lo * hi) ** 0.5
    return threshold


def tells_nothing(role: int, args) -> bool:
    """Whether an op of ``role`` with ``args`` leaves any ``PhaseFacts`` as they are (read
    without a ``PhaseFacts`` at hand): a GEMM without ``Input Dims``, whose rows ``observe``
    reads from them (a trace recorded without shapes: every GEMM op)."""
    return role == GEMM and not (args and DIMS_ARG in args)


#: What ``SeenFacts`` gives for an iteration whose ops told nothing (read, never changed;
#: the engine keeps None for it: ``Splitter._observe_phase``).
NOTHING_SEEN = PhaseFacts()


class SeenFacts:
    """The ``PhaseFacts`` of ``iterations`` iterations (all of ``facts`` where None) to be
    read, as often as wanted (``facts``: a list, or a ``pages.PagedList``, read only:
    ``reading``), where None stands for an iteration none of whose ops told anything (the
    facts of a new ``PhaseFacts``), and so does each iteration past the end of ``facts``:
    the engine makes one at an iteration's first op with a role only, and keeps the list
    no longer than its last one (``Splitter._observe_phase``)."""
    __slots__ = ("_facts", "_len")

    def __init__(self, facts, iterations: int | None = None):
        self._facts = facts
        self._len = len(facts) if iterations is None else iterations

    def __len__(self) -> int:
        return self._len

    def __iter__(self):
        for facts in reading(self._facts):
            yield NOTHING_SEEN if facts is None else facts
        for _ in range(self._len - len(self._facts)):
            yield NOTHING_SEEN

    def all_nothing(self) -> bool:
        """Whether no iteration's ops told anything (every one None: a loop without phase
        evidence), read a page at a time (``pages.read_pages``: no step of Python an
        iteration)."""
        return all(page.count(None) == len(page) for page in read_pages(self._facts))


def is_serving(facts: list[PhaseFacts], graph_launches: list[int]) -> bool:
    """A serving loop: no backward pass, and decode evidence somewhere. The facts are read
    once (a long trace's are paged through a file); ``SeenFacts`` of which none tells
    anything, a page at a time (``SeenFacts.all_nothing``)."""
    if facts.__class__ is SeenFacts and facts.all_nothing():
        return any(graph_launches)  # (no backward pass, no evidence: as the loop below)
    evidence = False
    for f in facts:
        if f.backward:
            return False
        evidence = evidence or f.annotation is not None or bool(f.decode_work)
    return evidence or any(graph_launches)


def loop_containers(evidence: dict) -> list[str]:
    """The names of the ops that hold the loop's levels (the detector's ``levels``)."""
    return [name for level in evidence.get("levels") or () if isinstance(level, dict)
            for name in level.get("container") or ()]


def infer_phases(kinds: list[str], facts: list[PhaseFacts], graph_launches: list[int],
                 launches: list[int], containers=(), diffusion_code: bool = False
                 ) -> list[tuple[str | None, str | None]] | CodedList:
    """One ``(phase, evidence)`` per iteration; ``(None, None)`` everywhere when the loop is
    not a serving loop; ``denoise`` when ``containers`` (``loop_containers``) name a
    diffusion request (evidence ``container``), or the trace ran a diffusion library's code
    (``diffusion_code``: Python frames of ``DIFFUSION_CODE``; evidence ``frames``)."""
    if any(DIFFUSION_WORDS.search(name) for name in containers):
        return [(IDLE, "kind") if kind == IDLE else (DENOISE, "container") for kind in kinds]
    if diffusion_code:
        return [(IDLE, "kind") if kind == IDLE else (DENOISE, "frames") for kind in kinds]
    if not is_serving(facts, graph_launches):
        return CodedList(((None, None),), len(facts))  # a byte each: 1 M iterations
    threshold = _token_threshold([f.max_tokens for f, kind in zip(facts, kinds)
                                  if kind != IDLE and f.annotation is None])
    out = []
    for kind, f, graphs, launched in zip(kinds, facts, graph_launches, launches):
        if f.annotation is not None:
            out.append((f.annotation, "annotation"))
        elif kind == IDLE:
            out.append((IDLE, "kind"))
        elif not launched:
            out.append((IDLE, "no launches"))
        elif f.prefill_work and (f.decode_work or graphs):
            out.append((MIXED, "shapes" if f.decode_work and not graphs else "graph+shapes"))
        elif f.prefill_work:
            out.append((PREFILL, "shapes"))
        elif graphs:
            large = f.max_tokens > threshold
            out.append((MIXED, "graph+shapes") if large else (DECODE, "graph"))
        elif f.decode_work:
            out.append((DECODE, "shapes"))
        elif f.max_tokens:
            out.append((PREFILL if f.max_tokens > threshold else DECODE, "shapes"))
        else:
            out.append((None, None))
    return out
