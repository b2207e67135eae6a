"""Synthetic Kineto traces with ground truth: the project's own test workloads.

What it is for: every acceptance case of stream-split (training, serving, diffusion, a single
unit of work, the four failure modes of PRODUCT.md, a trace with no CPU side) as a small,
realistic, seeded trace, together with the answer: the iteration windows and the expected owner
of every event. Tests feed these traces to the splitter and compare its owners with ours.

What it must never do: read real traces, use global state or a clock. The same
``(scenario, seed, params)`` always gives the same bytes.

How a trace is made. A scenario drives a ``TraceBuilder`` like a program being profiled: it
opens ops on CPU threads (``with b.op(...)``), launches GPU work from inside them, and marks
where each iteration begins. The builder keeps one simulated CPU clock (the threads run one at a
time, so correlation ids increase with launch order) and one GPU queue per stream: GPU work
starts no earlier than ``launch end + queue lag`` and after the previous work on its stream. All
times are integer nanoseconds internally and are written as float microseconds with 3 decimals.
Distinct instants are always at least ~100 ns apart, so that float rounding can never make two
of them touch or swap.

Ownership (the truth), decided from the built trace by rule, not by intent:

* Iteration *i* begins at ``b_i``, the start of its first CPU op on the loop thread; its window
  is ``[b_i, b_{i+1})``, the last one ``[b_last, end of its last loop-thread op]``.
* CPU events of any thread (ops, runtime calls, ``ac2g`` ``s`` flows, instants) belong to the
  window that contains their start; an ``X`` op that ends after that window's end (a wrapper
  spanning iterations) is -1 (outside), as is anything before ``b_0`` or after the last window,
  the ``Trace`` span and the global instants.
* GPU work and ``ac2g`` ``f`` flows belong to the owner of the runtime call with the same
  correlation, -1 when that call is not in the trace. ``gpu_user_annotation`` follows the
  ``user_annotation`` with the same ``External id``. Metadata (``ph: "M"``) is owned by None.

Library: ``generate(scenario, seed=0, **params)``, ``write_trace``, ``write_truth``,
``SCENARIOS``, ``random_variant(seed)``, ``scenario_params()`` (a hypothesis strategy),
``check_consistency(gen)``. CLI: ``python -m stream_split.generate --list``.
"""
from __future__ import annotations

import argparse
import bisect
import contextlib
import dataclasses
import gzip
import inspect
import io
import json
import random
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

__all__ = [
    "GeneratedTrace", "Truth", "TraceOptions", "TraceBuilder", "Variant", "SCENARIOS",
    "generate", "write_trace", "write_truth", "random_variant", "scenario_params",
    "check_consistency", "render", "truth_dict", "main",
]

OUTSIDE = -1
LAYOUTS = ("kineto", "time")
FORMS = ("object", "array", "jsonl")
GPU_PID = 0
FIRST_STREAM = 7

# Kernel names, shaped like the real ones (CUDA, cuBLAS, ATen, Triton, flash-attention).
K_GEMM = ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
          "execute_segment_k_off_kernel__5x_cublas")
K_GEMM_BWD = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nt"
K_ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::"
         "BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, "
         "std::array<char*, 3ul>)")
K_MUL = ("void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::"
         "BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >"
         ", std::array<char*, 3ul> >(int, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16"
         ", c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul>)")
K_GELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::"
          "TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()"
          "#4}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, ...)")
K_RELU = ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
          "launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::"
          "detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda(float)#1}, std::array<"
          "char*, 2ul> >(int, ...)")
K_LAYERNORM = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16"
               ", float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 "
               "const*, float*, float*, c10::BFloat16*)")
K_SOFTMAX = ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float"
             ", c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::"
             "BFloat16*, c10::BFloat16 const*, int)")
K_FLASH = ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
           "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, "
           "false, true, false, false, true, true, false, false>(flash::Flash_fwd_params)")
K_REDUCE = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::"
            "MeanOps<float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::"
            "native::MeanOps<float, float>, unsigned int, float, 4>)")
K_ARGMAX = ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native"
            "::ArgMaxOps<c10::BFloat16>, unsigned int, long, 4> >(...)")
K_ADAM = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::"
          "(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::"
          "FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, ...>")
K_FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
          "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)")
K_NORMAL = ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel"
            "<float, 4, ...>(long, at::PhiloxCudaState, ...)")
K_TRITON = ("triton_poi_fused_add_mul_0", "triton_red_fused_native_layer_norm_1",
            "triton_per_fused__softmax_2", "triton_poi_fused_gelu_3")
K_CONV = "void cudnn::ops::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true, (cudnnKernelDataType_t)2>(...)"

MEMCPY_NAMES = {
    "HtoD": "Memcpy HtoD (Pinned -> Device)",
    "DtoH": "Memcpy DtoH (Device -> Pinned)",
    "DtoD": "Memcpy DtoD (Device -> Device)",
}
_CBID = {"cudaLaunchKernel": 211, "cudaMemcpyAsync": 41, "cudaMemsetAsync": 51,
         "cudaGraphLaunch": 311, "cudaDeviceGetAttribute": 200, "cudaStreamIsCapturing": 317,
         "cudaGetDevice": 17, "cudaEventRecord": 135, "cudaStreamSynchronize": 131,
         "cudaPointerGetAttributes": 153}


# ----------------------------------------------------------------------------------------------
# Records


@dataclass(slots=True)
class Truth:
    """The expected answer for a generated trace.

    ``iterations``: ``{"index", "kind", "start_ts", "end_ts"}`` in order (µs, as in the trace);
    ``end_ts`` is the window end: the next iteration's start, or for the last one the end of its
    last loop-thread op, computed as a reader does (``ts + dur`` of the written floats). ``owners`` is parallel to ``GeneratedTrace.events``: an iteration
    index, -1 for outside, None for metadata.
    """
    iterations: list[dict]
    owners: list
    loop_thread: tuple | None
    description: str


@dataclass(slots=True)
class GeneratedTrace:
    """A trace in file order (for its layout), its header keys, and its truth."""
    scenario: str
    seed: int
    params: dict
    header_before: dict
    events: list[dict]
    header_after: dict
    truth: Truth


@dataclass(slots=True)
class TraceOptions:
    """Options common to every scenario (the rest are the scenario function's own keywords).

    layout: "kineto" (sections, see FORMAT.md) or "time" (sorted by ts, as a live writer).
    metadata: "first" or "last" (kineto layout only; the time layout writes it first).
    streams: how many GPU streams eager kernels spread over (7, 8, ...).
    queue_lag_us: minimum delay from a launch's end to its GPU start; None: the scenario's own.
    pre_trace_kernels: GPU work launched before the trace window (no runtime call in the file).
    distributed: add a ``distributedInfo`` header key.
    """
    layout: str = "kineto"
    metadata: str = "last"
    streams: int = 1
    queue_lag_us: float | None = None
    pre_trace_kernels: int = 0
    distributed: bool = True

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, not {self.layout!r}")
        if self.metadata not in ("first", "last"):
            raise ValueError(f"metadata must be 'first' or 'last', not {self.metadata!r}")
        if not 1 <= int(self.streams) <= 8:
            raise ValueError("streams must be between 1 and 8")


@dataclass(slots=True)
class _Rec:
    """One event while building: the dict that will be written plus what ownership needs."""
    ev: dict
    role: str          # cpu | instant | runtime | flow_s | gpu | flow_f | gpu_ann | meta | span
    ts: int            # ns
    end: int           # ns (== ts for instants)
    seq: int
    tid: Any = None
    corr: int | None = None
    ext: int | None = None


@dataclass(slots=True)
class _Frame:
    name: str
    cat: str
    start: int
    ext: int
    args: dict
    corrs: list = field(default_factory=list)


def _us(ns: int) -> float:
    return round(ns / 1000.0, 3)


# ----------------------------------------------------------------------------------------------
# The builder: a simulated profiled program


class TraceBuilder:
    """Simulates one profiled process: CPU threads that open ops and launch GPU work.

    Scenarios call ``thread``, ``op``, ``work``, ``launch``, ``memcpy``, ``memset``,
    ``graph_launch``, ``runtime``, ``instant``, ``begin_iteration`` and ``end_iteration``.
    """

    def __init__(self, rng: random.Random, options: TraceOptions):
        self.rng = rng
        self.options = options
        self.pid = rng.randint(1_000, 60_000)
        self.t0 = rng.randint(4_900_000, 5_100_000) * 1_000_000_000  # ns, ts ~ 5e12 µs
        self.now = self.t0 + rng.randint(20_000, 80_000)
        self.threads: dict[int, str] = {}
        self.tid: int | None = None
        self.loop_tid: int | None = None
        self._stacks: dict[int, list[_Frame]] = {}
        self.recs: list[_Rec] = []
        self._seq = 0
        self._ext = rng.randint(1, 3_000)
        self.first_corr = rng.randint(10_000, 400_000)
        self._corr = self.first_corr
        self.streams = [FIRST_STREAM + i for i in range(int(options.streams))]
        self.stream_free = {s: 0 for s in self.streams}
        self.lag_ns = 0 if options.queue_lag_us is None else int(options.queue_lag_us * 1000)
        self.boundaries: list[tuple[int, str]] = []
        self.last_end: int | None = None
        self._loop_op_end = 0
        self._pending_boundary: int | None = None
        self._mirrors: list[tuple[_Rec, list[int]]] = []  # user annotations with GPU work

    # -- small helpers --------------------------------------------------------------------------
    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def cost(self, lo_us: float, hi_us: float) -> int:
        return self.rng.randint(int(lo_us * 1000), int(hi_us * 1000))

    def work(self, lo_us: float, hi_us: float | None = None) -> None:
        """Spend CPU time in the current op."""
        self.now += self.cost(lo_us, hi_us if hi_us is not None else lo_us * 1.3)

    def set_default_lag(self, us: float) -> None:
        if self.options.queue_lag_us is None:
            self.lag_ns = int(us * 1000)

    def _add(self, ev: dict, role: str, ts: int, end: int, **kw) -> _Rec:
        rec = _Rec(ev, role, ts, end, self._next_seq(), **kw)
        self.recs.append(rec)
        return rec

    # -- threads --------------------------------------------------------------------------------
    def thread(self, name: str, *, main: bool = False, loop: bool = False) -> int:
        """Declare a CPU thread; the main thread's tid is the pid (as on Linux)."""
        tid = self.pid if main else self.pid + self.rng.randint(10, 900)
        while tid in self.threads and not main:
            tid += 1
        self.threads[tid] = name
        self._stacks.setdefault(tid, [])
        if self.tid is None:
            self.tid = tid
        if loop:
            self.loop_tid = tid
        return tid

    @contextlib.contextmanager
    def on_thread(self, tid: int) -> Iterator[None]:
        """Run the body on another thread (the caller's thread is blocked meanwhile)."""
        previous = self.tid
        self.tid = tid
        try:
            yield
        finally:
            self.tid = previous

    # -- iterations -----------------------------------------------------------------------------
    def begin_iteration(self, kind: str = "iteration") -> None:
        """The next op opened on the loop thread is this iteration's first CPU op."""
        assert self.tid == self.loop_tid, "iterations begin on the loop thread"
        self.boundaries.append((self.now, kind))
        self._pending_boundary = self.now

    def end_iteration(self) -> None:
        self.last_end = self._loop_op_end

    # -- CPU ops --------------------------------------------------------------------------------
    @contextlib.contextmanager
    def op(self, name: str, cat: str = "cpu_op", args: dict | None = None) -> Iterator[_Frame]:
        """An ``X`` op on the current thread, nesting whatever the body does."""
        tid = self.tid
        start = self.now
        if self._pending_boundary is not None and tid == self.loop_tid:
            assert start == self._pending_boundary
            self._pending_boundary = None
        self._ext += 1
        frame = _Frame(name, cat, start, self._ext, dict(args or {}))
        stack = self._stacks[tid]
        stack.append(frame)
        self.now += self.cost(0.8, 4.0)
        try:
            yield frame
        finally:
            self.now += self.cost(0.5, 2.0)
            stack.pop()
            end = self.now
            ev_args = {"External id": frame.ext, "Record function id": 0}
            ev_args.update(frame.args)
            ev = {"ph": "X", "cat": cat, "name": name, "pid": self.pid, "tid": tid,
                  "ts": _us(start), "dur": _us(end - start), "args": ev_args}
            rec = self._add(ev, "cpu", start, end, tid=tid, ext=frame.ext)
            if cat == "user_annotation" and frame.corrs:
                self._mirrors.append((rec, list(frame.corrs)))
            if tid == self.loop_tid:
                self._loop_op_end = end
            self.now += self.cost(0.15, 1.5)  # a gap: no two ops touch

    def leaf(self, name: str, lo_us: float, hi_us: float | None = None, cat: str = "cpu_op",
             args: dict | None = None) -> None:
        """An op with no children that only spends CPU time."""
        with self.op(name, cat, args):
            self.work(lo_us, hi_us)

    def instant(self, name: str = "[memory]") -> None:
        """A ``cpu_instant_event`` (``[memory]`` as with profile_memory)."""
        ts = self.now
        ev = {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": name, "pid": self.pid,
              "tid": self.tid, "ts": _us(ts),
              "args": {"Total Reserved": 2629828608, "Total Allocated": 1003059712,
                       "Bytes": self.rng.choice([512, 4096, 262144, 18317312]),
                       "Addr": 137877174353920 + self.rng.randint(0, 1 << 30),
                       "Device Id": 0, "Device Type": 1}}
        self._add(ev, "instant", ts, ts, tid=self.tid)
        self.now += self.cost(0.2, 1.0)

    # -- runtime calls and GPU work -------------------------------------------------------------
    def _runtime_call(self, api: str, lo_us: float, hi_us: float) -> tuple[int, int, int, int | None]:
        start = self.now
        end = start + self.cost(lo_us, hi_us)
        self._corr += 1
        corr = self._corr
        stack = self._stacks[self.tid]
        ext = stack[-1].ext if stack else None
        args = {"cbid": _CBID.get(api, 0), "correlation": corr}
        if ext is not None:
            args = {"External id": ext, **args}
        ev = {"ph": "X", "cat": "cuda_runtime", "name": api, "pid": self.pid, "tid": self.tid,
              "ts": _us(start), "dur": _us(end - start), "args": args}
        rec = self._add(ev, "runtime", start, end, tid=self.tid, corr=corr, ext=ext)
        for frame in stack:
            if frame.cat == "user_annotation":
                frame.corrs.append(corr)
        self.now = end + self.cost(0.2, 1.2)
        return start, end, corr, rec.ext

    def runtime(self, api: str = "cudaDeviceGetAttribute") -> None:
        """A runtime call that launches nothing (it still has a correlation id)."""
        self._runtime_call(api, 0.3, 2.0)

    def _flow_s(self, ts: int, corr: int) -> None:
        ev = {"ph": "s", "id": corr, "pid": self.pid, "tid": self.tid, "ts": _us(ts),
              "cat": "ac2g", "name": "ac2g"}
        self._add(ev, "flow_s", ts, ts, tid=self.tid, corr=corr)

    def _gpu(self, cat: str, name: str, stream: int, ready: int, dur: int, corr: int,
             ext: int | None, extra: dict) -> tuple[int, int]:
        start = max(self.stream_free[stream], ready) + self.cost(0.3, 2.5)
        end = start + dur
        self.stream_free[stream] = end + self.cost(0.2, 1.0)
        args: dict = {}
        if ext is not None:
            args["External id"] = ext
        if cat == "kernel":
            args.update({"queued": 0, "device": 0, "context": 1, "stream": stream,
                         "correlation": corr})
        else:
            args.update({"device": 0, "context": 1, "stream": stream, "correlation": corr})
        args.update(extra)
        ev = {"ph": "X", "cat": cat, "name": name, "pid": GPU_PID, "tid": stream,
              "ts": _us(start), "dur": _us(dur), "args": args}
        self._add(ev, "gpu", start, end, tid=stream, corr=corr, ext=ext)
        fev = {"ph": "f", "id": corr, "pid": GPU_PID, "tid": stream, "ts": _us(start),
               "cat": "ac2g", "name": "ac2g", "bp": "e"}
        self._add(fev, "flow_f", start, start, tid=stream, corr=corr)
        return start, end

    def _pick_stream(self, stream: int | None) -> int:
        if stream is not None:
            return stream if stream in self.stream_free else self.streams[0]
        if len(self.streams) > 1 and self.rng.random() < 0.3:
            return self.rng.choice(self.streams[1:])
        return self.streams[0]

    def _kernel_args(self) -> dict:
        grid = self.rng.choice([[17888, 1, 1], [132, 1, 1], [64, 8, 1], [1024, 1, 1]])
        return {"registers per thread": self.rng.choice([16, 32, 64, 128, 168]),
                "shared memory": self.rng.choice([0, 16384, 49152]),
                "grid": grid, "block": [self.rng.choice([128, 256, 512]), 1, 1]}

    def launch(self, kernel: str, lo_us: float = 4.0, hi_us: float = 20.0,
               stream: int | None = None, api: str = "cudaLaunchKernel") -> None:
        """A kernel launch from the current op."""
        start, end, corr, ext = self._runtime_call(api, 2.5, 9.0)
        self._flow_s(start, corr)
        self._gpu("kernel", kernel, self._pick_stream(stream), end + self.lag_ns,
                  self.cost(lo_us, hi_us), corr, ext, self._kernel_args())

    def memcpy(self, kind: str = "HtoD", nbytes: int = 1 << 20, stream: int | None = None) -> None:
        start, end, corr, ext = self._runtime_call("cudaMemcpyAsync", 3.0, 12.0)
        self._flow_s(start, corr)
        dur = max(1_500, nbytes // 20)  # ~20 GB/s
        self._gpu("gpu_memcpy", MEMCPY_NAMES[kind], self._pick_stream(stream or self.streams[0]),
                  end + self.lag_ns, dur, corr, ext,
                  {"bytes": nbytes, "memory bandwidth (GB/s)": round(nbytes / dur, 3)})

    def memset(self, nbytes: int = 4096, stream: int | None = None) -> None:
        start, end, corr, ext = self._runtime_call("cudaMemsetAsync", 2.0, 6.0)
        self._flow_s(start, corr)
        dur = self.cost(0.7, 3.0)
        self._gpu("gpu_memset", "Memset (Device)", self._pick_stream(stream or self.streams[0]),
                  end + self.lag_ns, dur, corr, ext,
                  {"bytes": nbytes, "memory bandwidth (GB/s)": round(nbytes / dur, 3)})

    def graph_launch(self, kernels: list[str], lo_us: float = 3.0, hi_us: float = 12.0,
                     stream: int | None = None) -> None:
        """``cudaGraphLaunch``: one correlation id, many kernels in a row on one stream."""
        start, end, corr, ext = self._runtime_call("cudaGraphLaunch", 8.0, 25.0)
        self._flow_s(start, corr)
        s = stream if stream in self.stream_free else self.streams[0]
        ready = end + self.lag_ns
        for name in kernels:
            _, kend = self._gpu("kernel", name, s, ready, self.cost(lo_us, hi_us), corr, ext,
                                self._kernel_args())
            ready = kend

    def pre_trace_gpu(self, count: int) -> None:
        """GPU work launched before the trace window: correlations below every runtime call."""
        t = self.t0 + self.cost(1, 5)
        for i in range(count):
            corr = self.first_corr - 50 - count + i
            name = self.rng.choice([K_GEMM, K_ADD, K_FLASH])
            dur = self.cost(5, 40)
            stream = self.streams[i % len(self.streams)]
            self._gpu("kernel", name, stream, t, dur, corr, None, self._kernel_args())



# ----------------------------------------------------------------------------------------------
# Scenario building blocks


def _linear(b: TraceBuilder, kdur=(8, 40)) -> None:
    with b.op("aten::linear"):
        b.leaf("aten::t", 1, 3)
        with b.op("aten::addmm"):
            b.launch(K_GEMM, *kdur)


def _eltwise(b: TraceBuilder, op: str, kernel: str, kdur=(2, 8)) -> None:
    with b.op(op):
        b.launch(kernel, *kdur)


def _layer_norm(b: TraceBuilder) -> None:
    with b.op("aten::layer_norm"):
        with b.op("aten::native_layer_norm"):
            b.launch(K_LAYERNORM, 3, 10)


def _mlp_layer(b: TraceBuilder, memory: bool = False) -> None:
    """One transformer-ish layer: norm, two linears, gelu, residual add."""
    _layer_norm(b)
    _linear(b)
    if memory:
        b.instant()
    _eltwise(b, "aten::gelu", K_GELU)
    _linear(b)
    _eltwise(b, "aten::add", K_ADD)


def _attention_layer(b: TraceBuilder) -> None:
    _layer_norm(b)
    _linear(b)
    with b.op("aten::_scaled_dot_product_flash_attention"):
        b.leaf("aten::empty", 1, 3)
        b.launch(K_FLASH, 20, 60)
    _linear(b)
    _eltwise(b, "aten::add", K_ADD)
    _mlp_layer(b)


def _to_device(b: TraceBuilder, nbytes: int, kind: str = "HtoD") -> None:
    with b.op("aten::to"):
        with b.op("aten::_to_copy"):
            b.leaf("aten::empty_strided", 1, 4)
            with b.op("aten::copy_"):
                b.memcpy(kind, nbytes)


def _backward_layer(b: TraceBuilder) -> None:
    for fn in ("AddmmBackward0", "GeluBackward0", "AddmmBackward0", "NativeLayerNormBackward0"):
        with b.op(f"autograd::engine::evaluate_function: {fn}"):
            with b.op(fn):
                if fn == "AddmmBackward0":
                    with b.op("aten::mm"):
                        b.launch(K_GEMM_BWD, 10, 45)
                    with b.op("aten::mm"):
                        b.launch(K_GEMM_BWD, 10, 45)
                elif fn == "GeluBackward0":
                    with b.op("aten::gelu_backward"):
                        b.launch(K_GELU, 3, 9)
                else:
                    with b.op("aten::native_layer_norm_backward"):
                        b.launch(K_LAYERNORM, 5, 14)
                        b.launch(K_REDUCE, 3, 8)
        with b.op("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"):
            with b.op("torch::autograd::AccumulateGrad"):
                b.leaf("aten::detach", 1, 2)


def _optimizer(b: TraceBuilder, annotated: bool = True) -> None:
    ctx = b.op("Optimizer.step#AdamW.step", "user_annotation") if annotated else contextlib.nullcontext()
    with ctx:
        b.leaf("aten::_foreach_add", 5, 15)
        with b.op("aten::_fused_adamw_"):
            b.runtime("cudaDeviceGetAttribute")
            for _ in range(3):
                b.launch(K_ADAM, 15, 40)


def _zero_grad(b: TraceBuilder) -> None:
    with b.op("Optimizer.zero_grad#AdamW.zero_grad", "user_annotation"):
        b.work(5, 20)


# ----------------------------------------------------------------------------------------------
# Scenarios. Each takes the builder and its own keyword parameters, and returns nothing.


def training(b: TraceBuilder, *, steps: int = 8, layers: int = 3, annotate_steps: bool = True,
             eval_every: int = 4, eval_forwards: int = 3, autograd_thread: bool = True,
             prologue: bool = True, epilogue: bool = True, outer_wrapper: bool = False,
             memory_events: bool = False, graph_eval: bool = False) -> None:
    """Training loop: data, forward, backward (autograd thread), optimizer, eval every few steps.
    Iterations: `steps`; the eval pass belongs to the step before it."""
    main = b.thread("python", main=True, loop=True)
    grad = b.thread("pt_autograd_0") if autograd_thread else main
    b.set_default_lag(40)
    if prologue:  # model init: weights, an RNG init kernel, a copy: all outside
        with b.op("aten::empty", args={"Input Dims": [[1024, 1024]]}):
            b.work(5, 10)
        for _ in range(layers):
            with b.op("aten::normal_"):
                b.launch(K_NORMAL, 10, 30)
        _to_device(b, 4 << 20)
        b.runtime("cudaGetDevice")
    outer = b.op("train_loop", "user_annotation") if outer_wrapper else contextlib.nullcontext()
    with outer:
        for step in range(steps):
            b.begin_iteration()
            ann = (b.op(f"ProfilerStep#{step}", "user_annotation") if annotate_steps
                   else contextlib.nullcontext())
            with ann:
                with b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                          "user_annotation"):
                    b.leaf("aten::stack", 20, 60)
                    b.leaf("aten::cat", 5, 15)
                _to_device(b, 1 << 20)
                _zero_grad(b)
                for _ in range(layers):
                    _mlp_layer(b, memory=memory_events)
                with b.op("aten::mse_loss"):
                    b.launch(K_REDUCE, 3, 8)
                with b.op("torch::autograd::backward"):
                    with b.on_thread(grad):
                        with b.op("autograd::engine::evaluate_function: MseLossBackward0"):
                            with b.op("MseLossBackward0"):
                                b.launch(K_MUL, 2, 6)
                        for _ in range(layers):
                            _backward_layer(b)
                    b.work(3, 8)
                _optimizer(b)
                if eval_every and (step + 1) % eval_every == 0:
                    for _ in range(eval_forwards):
                        if graph_eval:
                            with b.op("aten::copy_"):
                                b.memcpy("HtoD", 1 << 18)
                            with b.op("CUDAGraph.replay", "user_annotation"):
                                b.graph_launch([K_LAYERNORM, K_GEMM, K_GELU, K_GEMM, K_ADD]
                                               * layers)
                        else:
                            for _ in range(layers):
                                _mlp_layer(b)
                        with b.op("aten::argmax"):
                            b.launch(K_ARGMAX, 2, 5)
                b.work(2, 10)
            b.end_iteration()
            b.work(5, 30)
    if epilogue:
        with b.op("save_checkpoint", "user_annotation"):
            _to_device(b, 2 << 20, "DtoH")
            with b.op("aten::item"):
                b.runtime("cudaStreamSynchronize")
            b.work(50, 120)


def serving(b: TraceBuilder, *, steps: int = 12, prefill_every: int = 5,
            graph_kernels: tuple = (20, 60), layers: int = 4, prologue: bool = True) -> None:
    """vLLM-like engine loop on "VLLM::EngineCor": schedule, prepare_inputs, execute_model
    (a cudaGraphLaunch for decode, eager launches for a prefill every `prefill_every` steps,
    the first step included), sample. The GPU runs steps behind. Iterations: `steps`."""
    b.thread("VLLM::EngineCor", main=True, loop=True)
    b.set_default_lag(1500)
    lo, hi = (int(x) for x in graph_kernels)
    if prologue:
        with b.op("initialize_kv_cache", "user_annotation"):
            for _ in range(2):
                with b.op("aten::zeros"):
                    b.memset(1 << 20)
            b.runtime("cudaDeviceGetAttribute")
        b.work(50, 100)
    batch = b.rng.randint(8, 64)
    for step in range(steps):
        prefill = bool(prefill_every) and step % int(prefill_every) == 0
        b.begin_iteration()
        with b.op("schedule", "user_annotation"):
            b.leaf("aten::empty", 1, 3)
            b.work(100, 250)
        with b.op("prepare_inputs", "user_annotation"):
            b.work(20, 60)
            with b.op("aten::copy_"):
                b.memcpy("HtoD", b.rng.choice([4096, 65536]))
            with b.op("aten::copy_"):
                b.memcpy("HtoD", 4096)
        if prefill:
            toks = b.rng.randint(200, 2000)
            name = f"execute_{batch}_context_1({toks})_generation_{batch - 1}({batch - 1})"
        else:
            name = f"execute_{batch}_context_0(0)_generation_{batch}({batch})"
        with b.op(name, "user_annotation"):
            if prefill:
                for _ in range(layers):
                    _attention_layer(b)
            else:
                with b.op("CUDAGraph.replay"):
                    n = b.rng.randint(lo, hi)
                    b.graph_launch([b.rng.choice([K_GEMM, K_FLASH, K_ADD, K_LAYERNORM, K_GELU])
                                    for _ in range(n)], 2.0, 8.0)
        with b.op("sample", "user_annotation"):
            with b.op("aten::argmax"):
                b.launch(K_ARGMAX, 2, 6)
            with b.op("aten::to"):
                b.memcpy("DtoH", 4 * batch)
            b.work(10, 30)
        b.end_iteration()
        b.work(10, 40)
        batch = max(1, batch + b.rng.randint(-2, 2))


def diffusion(b: TraceBuilder, *, steps: int = 4, layers: int = 6, resolution: int = 1024) -> None:
    """One request `execute_diffusion_0_RxR`: text encoding, `steps` denoising steps
    (`aten::cat` + `model_inference` + scheduler ops), VAE decode. Iterations: the `steps`
    denoising steps; the wrapper, text encoding (prologue) and VAE decode (epilogue) are -1."""
    b.thread("python", main=True, loop=True)
    b.set_default_lag(60)
    with b.op(f"execute_diffusion_0_{resolution}x{resolution}", "user_annotation"):
        with b.op("encode_prompt", "user_annotation"):
            _to_device(b, 1 << 16)
            for _ in range(2):
                _attention_layer(b)
        b.work(20, 50)
        for _ in range(steps):
            b.begin_iteration()
            with b.op("aten::cat"):
                b.launch(K_ADD, 3, 8)
            with b.op("model_inference", "user_annotation"):
                for _ in range(layers):
                    _attention_layer(b)
            with b.op("FlowMatchEulerDiscreteScheduler.step", "user_annotation"):
                _eltwise(b, "aten::sub", K_ADD)
                _eltwise(b, "aten::mul", K_MUL)
                _eltwise(b, "aten::add", K_ADD)
            b.end_iteration()
            b.work(10, 30)
        with b.op("vae_decode", "user_annotation"):
            for _ in range(3):
                with b.op("aten::conv2d"):
                    with b.op("aten::cudnn_convolution"):
                        b.launch(K_CONV, 30, 90)
            _to_device(b, 3 * resolution * resolution, "DtoH")


def single_forward(b: TraceBuilder, *, layers: int = 12) -> None:
    """One `ProfilerStep#0` with one forward of `layers` identical layers. Iterations: 1."""
    b.thread("python", main=True, loop=True)
    b.set_default_lag(30)
    b.begin_iteration()
    with b.op("ProfilerStep#0", "user_annotation"):
        _to_device(b, 1 << 18)
        for _ in range(layers):
            _mlp_layer(b)
        with b.op("aten::argmax"):
            b.launch(K_ARGMAX, 2, 5)
    b.end_iteration()


def layer_annotations(b: TraceBuilder, *, steps: int = 6, layers: int = 8,
                      family: str = "layer") -> None:
    """Failure mode 1: every layer wrapped in one annotation family (`layer_N`, or
    `## Call CompiledFxGraph <hash> ##` with family="compiled"); no ProfilerStep; an
    unannotated data copy first and optimizer last. Iterations: `steps`, not layers."""
    b.thread("python", main=True, loop=True)
    b.set_default_lag(40)
    hashes = ["f" + "".join(b.rng.choice("0123456789abcdefghijklmnopqrstuvwxyz") for _ in range(51))
              for _ in range(layers)]
    for _ in range(steps):
        b.begin_iteration()
        _to_device(b, 1 << 20)
        for j in range(layers):
            name = f"layer_{j}" if family == "layer" else f"## Call CompiledFxGraph {hashes[j]} ##"
            with b.op(name, "user_annotation"):
                if family == "layer":
                    _mlp_layer(b)
                else:
                    with b.op("aten::mm"):
                        b.launch(K_GEMM, 8, 30)
                    for k in K_TRITON[:3]:
                        b.launch(k, 3, 10)
        with b.op("aten::mse_loss"):
            b.launch(K_REDUCE, 3, 8)
        for _ in range(max(1, layers // 2)):
            with b.op("autograd::engine::evaluate_function: AddmmBackward0"):
                with b.op("aten::mm"):
                    b.launch(K_GEMM_BWD, 10, 40)
        with b.op("aten::_foreach_add_"):
            b.launch(K_ADAM, 10, 30)
        b.end_iteration()
        b.work(5, 20)


def idle_steps(b: TraceBuilder, *, iterations: int = 10, idle: int = 3, layers: int = 3) -> None:
    """Failure mode 2: cycles of `get_next_batch` (a copy and a kernel) + `run_batch` (main GPU
    work), with `idle` cycles of `get_next_batch` + `idle_step` (no GPU work) at seeded
    positions (never the first). Records: iterations + idle, kinds "iteration" and "idle"."""
    b.thread("python", main=True, loop=True)
    b.set_default_lag(40)
    total = iterations + idle
    idle_at = set(b.rng.sample(range(1, total), min(idle, total - 1))) if total > 1 else set()
    for c in range(total):
        is_idle = c in idle_at
        b.begin_iteration("idle" if is_idle else "iteration")
        with b.op("get_next_batch", "user_annotation"):
            _to_device(b, 1 << 19)
            _eltwise(b, "aten::div", K_MUL)
        if is_idle:
            with b.op("idle_step", "user_annotation"):
                b.leaf("aten::empty", 1, 3)
                b.work(150, 400)
        else:
            with b.op("run_batch", "user_annotation"):
                for _ in range(layers):
                    _mlp_layer(b)
                with b.op("aten::sum"):
                    b.launch(K_REDUCE, 3, 8)
        b.end_iteration()
        b.work(5, 20)


def deep_roots(b: TraceBuilder, *, inner_steps: int = 6, minor_roots: int = 2,
               layers: int = 2) -> None:
    """Failure mode 3: `serve_forever` > `engine_loop` > `run_engine` > `inner_steps` x `step`,
    then `minor_roots` top-level `step`s. Iterations: inner_steps + minor_roots; the wrappers
    and the weight loading before the first step are -1."""
    b.thread("python", main=True, loop=True)
    b.set_default_lag(40)

    def step() -> None:
        with b.op("step", "user_annotation"):
            _to_device(b, 1 << 16)
            for _ in range(layers):
                _mlp_layer(b)

    with b.op("serve_forever", "user_annotation"):
        with b.op("engine_loop", "user_annotation"):
            with b.op("run_engine", "user_annotation"):
                with b.op("load_weights", "user_annotation"):
                    _to_device(b, 8 << 20)
                for _ in range(inner_steps):
                    b.begin_iteration()
                    step()
                    b.end_iteration()
                    b.work(5, 15)
    b.work(5, 15)
    for _ in range(minor_roots):
        b.begin_iteration()
        step()
        b.end_iteration()
        b.work(5, 15)


def preamble(b: TraceBuilder, *, iterations: int = 8, layers: int = 3) -> None:
    """Failure mode 4: `scheduler_step` and `prepare_input` (CPU only, long) before `forward`
    (launches); the GPU tail of each iteration runs during the next one's preamble.
    Iterations: `iterations`, each beginning at its `scheduler_step`."""
    b.thread("python", main=True, loop=True)
    b.set_default_lag(400)
    for _ in range(iterations):
        b.begin_iteration()
        with b.op("scheduler_step", "user_annotation"):
            b.leaf("aten::empty", 1, 3)
            b.work(120, 200)
        with b.op("prepare_input", "user_annotation"):
            b.leaf("aten::cat", 10, 30)
            b.leaf("aten::stack", 10, 30)
            b.work(60, 120)
        with b.op("forward", "user_annotation"):
            for _ in range(layers):
                _mlp_layer(b)
        b.end_iteration()
        b.work(5, 20)


def gpu_only(b: TraceBuilder, *, kernels: int = 200) -> None:
    """No CPU side at all: kernels and copies on the GPU streams only. Iterations: 0."""
    b.pre_trace_gpu(0)
    t = b.t0 + b.cost(2, 10)
    corr = b.first_corr
    names = [K_GEMM, K_ADD, K_LAYERNORM, K_GELU, K_FLASH]
    for i in range(kernels):
        corr += b.rng.randint(1, 4)
        stream = b.streams[i % len(b.streams)] if b.rng.random() < 0.5 else b.streams[0]
        if b.rng.random() < 0.05:
            nbytes = 1 << 18
            b._gpu("gpu_memcpy", MEMCPY_NAMES["HtoD"], stream, t, max(1_500, nbytes // 20), corr,
                   None, {"bytes": nbytes, "memory bandwidth (GB/s)": 20.0})
        else:
            b._gpu("kernel", b.rng.choice(names), stream, t, b.cost(3, 30), corr, None,
                   b._kernel_args())
        t += b.cost(1, 10)


def sample(b: TraceBuilder, *, steps: int = 8, layers: int = 2) -> None:
    """The package's embedded sample: a small annotated training trace with an autograd thread
    and CUDA-graph eval passes. Iterations: `steps`."""
    training(b, steps=steps, layers=layers, annotate_steps=True, eval_every=4, eval_forwards=2,
             autograd_thread=True, graph_eval=True, memory_events=True)


SCENARIOS: dict[str, Callable[..., None]] = {
    "training": training,
    "serving": serving,
    "diffusion": diffusion,
    "single_forward": single_forward,
    "layer_annotations": layer_annotations,
    "idle_steps": idle_steps,
    "deep_roots": deep_roots,
    "preamble": preamble,
    "gpu_only": gpu_only,
    "sample": sample,
}


# ----------------------------------------------------------------------------------------------
# Assembling the trace: metadata, spans, GPU annotations, ownership, file order


def _metadata(b: TraceBuilder, ts: int) -> list[_Rec]:
    recs = []

    def meta(name: str, pid, tid, args: dict) -> None:
        ev = {"name": name, "ph": "M", "ts": _us(ts), "pid": pid, "tid": tid, "args": args}
        recs.append(_Rec(ev, "meta", ts, ts, b._next_seq()))

    if b.threads:
        meta("process_name", b.pid, 0, {"name": "python3"})
        meta("process_labels", b.pid, 0, {"labels": "CPU"})
        meta("process_sort_index", b.pid, 0, {"sort_index": b.pid})
    meta("process_name", GPU_PID, 0, {"name": "python3"})
    meta("process_labels", GPU_PID, 0, {"labels": "GPU 0"})
    meta("process_sort_index", GPU_PID, 0, {"sort_index": 5000000})
    for s in b.streams:
        meta("thread_name", GPU_PID, s, {"name": f"stream {s} "})
        meta("thread_sort_index", GPU_PID, s, {"sort_index": s})
    for tid, name in b.threads.items():
        meta("thread_name", b.pid, tid, {"name": f"thread {tid} ({name})"})
        meta("thread_sort_index", b.pid, tid, {"sort_index": tid})
    return recs


def _spans(b: TraceBuilder, end: int) -> list[_Rec]:
    t0 = b.t0
    trace = {"ph": "X", "cat": "Trace", "ts": _us(t0), "dur": _us(end - t0), "pid": "Spans",
             "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}}
    sort = {"name": "process_sort_index", "ph": "M", "ts": _us(t0), "pid": "Spans", "tid": 0,
            "args": {"sort_index": 536870912}}
    start = {"name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g", "pid": "Traces",
             "tid": "Trace PyTorch Profiler", "ts": _us(t0)}
    stop = {"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": _us(end)}
    return [_Rec(trace, "span", t0, end, b._next_seq()), _Rec(sort, "meta", t0, t0, b._next_seq()),
            _Rec(start, "span", t0, t0, b._next_seq()), _Rec(stop, "span", end, end, b._next_seq())]


def _gpu_annotations(b: TraceBuilder) -> list[_Rec]:
    by_corr: dict[int, list[_Rec]] = {}
    for r in b.recs:
        if r.role == "gpu":
            by_corr.setdefault(r.corr, []).append(r)
    out = []
    for cpu_rec, corrs in b._mirrors:
        work = [g for c in corrs for g in by_corr.get(c, ())]
        if not work:
            continue
        start = min(g.ts for g in work)
        end = max(g.end for g in work)
        stream = min(work, key=lambda g: g.ts).tid
        ev = {"ph": "X", "cat": "gpu_user_annotation", "name": cpu_rec.ev["name"], "pid": GPU_PID,
              "tid": stream, "ts": _us(start), "dur": _us(end - start),
              "args": {"External id": cpu_rec.ext}}
        out.append(_Rec(ev, "gpu_ann", start, end, b._next_seq(), tid=stream, ext=cpu_rec.ext))
    return out


def _owners(recs: list[_Rec], boundaries: list[tuple[int, str]], last_end: int | None) -> dict:
    """Owner of every record by the rules of the module docstring (keyed by seq)."""
    starts = [t for t, _ in boundaries]
    ends = starts[1:] + ([last_end] if starts else [])

    def window(ts: int, end: int) -> int:
        i = bisect.bisect_right(starts, ts) - 1
        if i < 0 or ts >= ends[i] or end > ends[i]:
            return OUTSIDE
        return i

    owner: dict[int, Any] = {}
    corr_owner: dict[int, int] = {}
    ext_owner: dict[int, int] = {}
    for r in recs:
        if r.role in ("cpu", "instant", "runtime", "flow_s"):
            o = window(r.ts, r.end)
            owner[r.seq] = o
            if r.role == "runtime":
                corr_owner[r.corr] = o
            elif r.role == "cpu":
                ext_owner[r.ext] = o
    for r in recs:
        if r.role in ("gpu", "flow_f"):
            owner[r.seq] = corr_owner.get(r.corr, OUTSIDE)
        elif r.role == "gpu_ann":
            owner[r.seq] = ext_owner.get(r.ext, OUTSIDE)
        elif r.role == "meta":
            owner[r.seq] = None
        elif r.role == "span":
            owner[r.seq] = OUTSIDE
    return owner


def _file_order(b: TraceBuilder, recs: list[_Rec], meta: list[_Rec], spans: list[_Rec],
                anns: list[_Rec], options: TraceOptions) -> list[_Rec]:
    if options.layout == "time":
        body = recs + anns + [r for r in spans if r.role != "meta"]
        body.sort(key=lambda r: (r.ts, -r.end, r.seq))
        return meta + [r for r in spans if r.role == "meta"] + body
    cpu: list[_Rec] = []
    thread_order = ([b.loop_tid] if b.loop_tid is not None else []) + \
        [t for t in b.threads if t != b.loop_tid]
    for tid in thread_order:
        ops = [r for r in recs if r.role == "cpu" and r.tid == tid]
        ops.sort(key=lambda r: (r.ts, -r.end, r.seq))
        cpu.extend(ops)
    instants = sorted((r for r in recs if r.role == "instant"), key=lambda r: (r.ts, r.seq))
    # GPU activity block in completion order; a flow goes right after its activity.
    keyed = []
    by_corr_runtime = {r.corr: r for r in recs if r.role == "runtime"}
    gpu_by_key = {(r.corr, r.ts): r for r in recs if r.role == "gpu"}
    for r in recs:
        if r.role == "runtime" or r.role == "gpu":
            keyed.append(((r.end, r.seq, 0), r))
        elif r.role == "flow_s":
            p = by_corr_runtime[r.corr]
            keyed.append(((p.end, p.seq, 1), r))
        elif r.role == "flow_f":
            p = gpu_by_key[(r.corr, r.ts)]
            keyed.append(((p.end, p.seq, 1), r))
    keyed.sort(key=lambda kr: kr[0])
    gpu_block = [r for _, r in keyed]
    anns = list(anns)
    b.rng.shuffle(anns)  # "in no useful order"
    spans_x = [r for r in spans if r.role != "meta"]
    spans_m = [r for r in spans if r.role == "meta"]
    if options.metadata == "first":
        return meta + cpu + instants + gpu_block + anns + spans_m + spans_x
    return cpu + instants + gpu_block + anns + meta + spans_m + spans_x


def _header(b: TraceBuilder, options: TraceOptions, scenario: str) -> tuple[dict, dict]:
    before: dict = {
        "schemaVersion": 1,
        "deviceProperties": [{
            "id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": 85029158912,
            "computeMajor": 9, "computeMinor": 0, "maxThreadsPerBlock": 1024,
            "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "warpSize": 32,
            "sharedMemPerBlock": 49152, "numSms": 132, "regsPerMultiprocessor": 65536,
            "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472}],
        "cupti_version": 24,
        "cuda_runtime_version": 12060,
    }
    if options.distributed:
        before["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": 1,
                                     "pg_count": 1, "pg_config": [], "nccl_version": "2.21.5"}
    before.update({"record_shapes": 1, "cuda_driver_version": 12080, "profile_memory": 0,
                   "with_stack": 0,
                   "trace_id": "".join(b.rng.choice("0123456789ABCDEF") for _ in range(32))})
    after = {"traceName": f"./traces/{scenario}_rank0.pt.trace.json",
             "displayTimeUnit": "ms",
             "baseTimeNanoseconds": 1767189312000000000 + b.rng.randint(0, 10**9) * 1000}
    return before, after


def _split_params(params: dict) -> tuple[TraceOptions, dict]:
    names = {f.name for f in dataclasses.fields(TraceOptions)}
    common = {k: v for k, v in params.items() if k in names}
    own = {k: v for k, v in params.items() if k not in names}
    return TraceOptions(**common), own


def generate(scenario: str, seed: int = 0, **params: Any) -> GeneratedTrace:
    """Build scenario ``scenario`` with ``seed``; ``params`` are ``TraceOptions`` fields and the
    scenario's own keywords (see ``SCENARIOS[name]``). Deterministic."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    options, own = _split_params(params)
    fn = SCENARIOS[scenario]
    accepted = set(inspect.signature(fn).parameters) - {"b"}
    unknown = set(own) - accepted
    if unknown:
        raise TypeError(f"scenario {scenario!r} has no parameter(s) {sorted(unknown)}; "
                        f"it takes {sorted(accepted)} and {sorted(f.name for f in dataclasses.fields(TraceOptions))}")
    rng = random.Random(seed)
    b = TraceBuilder(rng, options)
    if options.pre_trace_kernels and scenario != "gpu_only":
        b.pre_trace_gpu(int(options.pre_trace_kernels))
    fn(b, **own)
    if b.boundaries and b.last_end is None:
        raise AssertionError(f"scenario {scenario} began an iteration but never ended one")

    recs = b.recs
    anns = _gpu_annotations(b)
    end = max([r.end for r in recs + anns] + [b.now]) + b.cost(20, 80)
    meta = _metadata(b, b.t0 + b.cost(50, 150))
    spans = _spans(b, end)
    owner = _owners(recs + anns + meta + spans, b.boundaries, b.last_end)
    ordered = _file_order(b, recs, meta, spans, anns, options)
    ev_idx = 0
    for r in ordered:
        if r.role in ("cpu", "instant"):
            r.ev["args"]["Ev Idx"] = ev_idx
            ev_idx += 1

    starts = [t for t, _ in b.boundaries]
    ends = starts[1:] + ([b.last_end] if starts else [])
    iterations = [{"index": i, "kind": kind, "start_ts": _us(t), "end_ts": _us(ends[i])}
                  for i, (t, kind) in enumerate(b.boundaries)]
    if iterations:  # the last window ends where a reader computes its last op's end: ts + dur
        last_op = next(r for r in recs if r.role == "cpu" and r.tid == b.loop_tid
                       and r.end == b.last_end)
        iterations[-1]["end_ts"] = last_op.ev["ts"] + last_op.ev["dur"]
    doc = (inspect.getdoc(fn) or scenario).split("\n")[0]
    loop = (b.pid, b.loop_tid) if b.loop_tid is not None else None
    truth = Truth(iterations, [owner[r.seq] for r in ordered], loop,
                  f"{scenario}: {doc} ({len(iterations)} records)")
    before, after = _header(b, options, scenario)
    return GeneratedTrace(scenario, seed, dict(params), before, [r.ev for r in ordered], after,
                          truth)


# ----------------------------------------------------------------------------------------------
# Self-check: the invariants the truth promises (used by the tests, handy for debugging)


def _ns(x: float) -> int:
    return round(x * 1000)


def check_consistency(gen: GeneratedTrace) -> list[str]:
    """Problems with ``gen``'s events or truth (an empty list when all invariants hold)."""
    problems: list[str] = []
    ev, owners, its = gen.events, gen.truth.owners, gen.truth.iterations
    if len(ev) != len(owners):
        return [f"{len(ev)} events but {len(owners)} owners"]
    for i, (e, o) in enumerate(zip(ev, owners)):
        if e.get("ph") == "M":
            if o is not None:
                problems.append(f"metadata event {i} has owner {o}")
        elif not isinstance(o, int) or not -1 <= o < len(its):
            problems.append(f"event {i} has owner {o!r}")
    for a, c in zip(its, its[1:]):
        if not (a["start_ts"] < a["end_ts"] <= c["start_ts"]):
            problems.append(f"windows {a} and {c} are not ordered and disjoint")
    if its and not its[-1]["start_ts"] < its[-1]["end_ts"]:
        problems.append("last window is empty")
    # correlation linkage
    runtime = {e["args"]["correlation"]: (e, o) for e, o in zip(ev, owners)
               if e.get("cat") == "cuda_runtime"}
    for e, o in zip(ev, owners):
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") or (
                e.get("cat") == "ac2g" and e.get("ph") == "f"):
            corr = e["args"]["correlation"] if e.get("ph") == "X" else e["id"]
            want = runtime[corr][1] if corr in runtime else OUTSIDE
            if o != want:
                problems.append(f"GPU event {e['name'][:30]} corr {corr}: owner {o}, launch {want}")
            if corr in runtime and e.get("ph") == "X":
                r = runtime[corr][0]
                if _ns(e["ts"]) < _ns(r["ts"]) + _ns(r["dur"]):
                    problems.append(f"kernel of corr {corr} starts before its launch ends")
    # Ev Idx strictly increasing in file order
    idx = [e["args"]["Ev Idx"] for e in ev if isinstance(e.get("args"), dict)
           and "Ev Idx" in e["args"]]
    if any(x >= y for x, y in zip(idx, idx[1:])):
        problems.append("Ev Idx not strictly increasing in file order")
    # per-thread nesting of CPU X events (ops and runtime calls), and per-stream serialization
    per: dict = {}
    for e in ev:
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "user_annotation", "cuda_runtime",
                                                     "kernel", "gpu_memcpy", "gpu_memset"):
            per.setdefault((e["pid"], e["tid"], e["pid"] == GPU_PID), []).append(
                (_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
    for (pid, tid, gpu), spans in per.items():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[int] = []
        for s, t in spans:
            if gpu:
                if stack and s < stack[-1]:
                    problems.append(f"stream {tid}: overlapping GPU work at {s}")
                stack = [t]
                continue
            while stack and stack[-1] <= s:
                stack.pop()
            if stack and t > stack[-1]:
                problems.append(f"thread {tid}: op at {s} crosses its parent")
            stack.append(t)
    # boundaries: only wrappers (owner -1) may straddle one on the loop thread
    if gen.truth.loop_thread is not None:
        pid, tid = gen.truth.loop_thread
        starts = [_ns(it["start_ts"]) for it in its]
        for e, o in zip(ev, owners):
            if e.get("ph") == "X" and e.get("pid") == pid and e.get("tid") == tid and o != OUTSIDE:
                s, t = _ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])
                if any(s < b < t for b in starts):
                    problems.append(f"op {e['name']} straddles a boundary but is owned by {o}")
        loop_starts = {_ns(e["ts"]) for e in ev if e.get("ph") == "X" and e.get("pid") == pid
                       and e.get("tid") == tid and e.get("cat") in ("cpu_op", "user_annotation")}
        for it in its:
            if _ns(it["start_ts"]) not in loop_starts:
                problems.append(f"iteration {it['index']} does not start at a loop-thread op")
    return problems


# ----------------------------------------------------------------------------------------------
# Writing


def _open_out(path: str):
    if path == "-":
        return contextlib.nullcontext(sys.stdout)
    if str(path).endswith(".gz"):
        return gzip.open(path, "wt", encoding="utf-8", compresslevel=6)
    return open(path, "w", encoding="utf-8")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(", ", ": "), ensure_ascii=False)


def render(gen: GeneratedTrace, form: str = "object", close_array: bool = True) -> str:
    """The trace as text in ``form`` ("object", "array" or "jsonl")."""
    if form not in FORMS:
        raise ValueError(f"form must be one of {FORMS}, not {form!r}")
    out = io.StringIO()
    body = ",\n".join("  " + _dumps(e) for e in gen.events)
    if form == "jsonl":
        for e in gen.events:
            out.write(_dumps(e) + "\n")
    elif form == "array":
        out.write("[\n" + body)
        out.write("\n]\n" if close_array else ",\n")
    else:
        out.write("{\n")
        for k, v in gen.header_before.items():
            out.write(f"  {_dumps(k)}: {_dumps(v)},\n")
        out.write('  "traceEvents": [\n' + body + "\n  ]")
        for k, v in gen.header_after.items():
            out.write(f",\n  {_dumps(k)}: {_dumps(v)}")
        out.write("\n}\n")
    return out.getvalue()


def write_trace(gen: GeneratedTrace, path: str, form: str = "object",
                close_array: bool = True) -> None:
    """Write the trace to ``path`` (gzip if it ends with ``.gz``; ``-`` is stdout).

    ``close_array=False`` (array form only) leaves the array open, ending in ``},``, as a
    killed or still-running writer does."""
    text = render(gen, form, close_array)
    with _open_out(path) as f:
        f.write(text)


def truth_dict(gen: GeneratedTrace) -> dict:
    t = gen.truth
    return {"scenario": gen.scenario, "seed": gen.seed, "params": gen.params,
            "description": t.description,
            "loop_thread": list(t.loop_thread) if t.loop_thread else None,
            "iterations": t.iterations, "owners": t.owners}


def write_truth(gen: GeneratedTrace, path: str) -> None:
    """Write the truth as JSON: iterations, owners parallel to the events, loop thread."""
    with _open_out(path) as f:
        json.dump(truth_dict(gen), f)
        f.write("\n")


# ----------------------------------------------------------------------------------------------
# Random variants for property tests


@dataclass(slots=True, frozen=True)
class Variant:
    scenario: str
    seed: int
    params: dict

    def generate(self) -> GeneratedTrace:
        return generate(self.scenario, self.seed, **self.params)


def random_variant(seed: int) -> Variant:
    """A random scenario with random parameters, kept small (a few hundred to a few thousand
    events). Deterministic from ``seed``."""
    rng = random.Random(seed)
    scenario = rng.choice([s for s in SCENARIOS if s != "sample"])
    p: dict[str, Any] = {
        "layout": rng.choice(LAYOUTS),
        "metadata": rng.choice(("first", "last")),
        "streams": rng.randint(1, 3),
        "pre_trace_kernels": rng.choice([0, 0, 3]),
        "distributed": rng.random() < 0.5,
    }
    if rng.random() < 0.5:
        p["queue_lag_us"] = rng.choice([0, 20, 300, 2000])
    if scenario == "training":
        p.update(steps=rng.randint(3, 6), layers=rng.randint(1, 3),
                 annotate_steps=rng.random() < 0.5, eval_every=rng.choice([0, 2, 4]),
                 eval_forwards=rng.randint(1, 3), autograd_thread=rng.random() < 0.7,
                 prologue=rng.random() < 0.7, epilogue=rng.random() < 0.7,
                 outer_wrapper=rng.random() < 0.3, memory_events=rng.random() < 0.3,
                 graph_eval=rng.random() < 0.3)
        if p["eval_every"]:
            # Structure alone cannot tell an eval pass exactly every k steps from an
            # optimizer step after k micro-batches (the coarser unit is chosen), nor an eval
            # pass after the very last step from an epilogue: keep one eval, mid-run.
            p.update(eval_every=4, steps=rng.randint(5, 7))
        if p["outer_wrapper"] and not p["annotate_steps"]:
            # Unannotated steps inside one wrapper look like the layers of one forward unless
            # a step holds a model with layers of its own.
            p["layers"] = rng.randint(4, 6)
    elif scenario == "serving":
        lo = rng.randint(5, 40)
        p.update(steps=rng.randint(3, 10), prefill_every=rng.choice([0, 3, 5]),
                 graph_kernels=[lo, lo + rng.randint(0, 30)], layers=rng.randint(1, 3),
                 prologue=rng.random() < 0.7)
    elif scenario == "diffusion":
        # A denoiser has blocks: with fewer than 4 it looks like layers of one forward.
        p.update(steps=rng.randint(3, 5), layers=rng.randint(4, 8))
    elif scenario == "single_forward":
        p.update(layers=rng.randint(1, 16))
    elif scenario == "layer_annotations":
        p.update(steps=rng.randint(3, 6), layers=rng.randint(1, 8),
                 family=rng.choice(["layer", "compiled"]))
    elif scenario == "idle_steps":
        p.update(iterations=rng.randint(3, 10), idle=rng.randint(0, 4), layers=rng.randint(1, 3))
    elif scenario == "deep_roots":
        p.update(inner_steps=rng.randint(3, 6), minor_roots=rng.randint(1, 3),
                 layers=rng.randint(1, 2))
    elif scenario == "preamble":
        p.update(iterations=rng.randint(3, 8), layers=rng.randint(1, 3))
    elif scenario == "gpu_only":
        p.update(kernels=rng.randint(0, 200))
    return Variant(scenario, rng.randint(0, 2**31 - 1), p)


def scenario_params():
    """A hypothesis strategy of ``Variant``s (imports hypothesis only when called)."""
    from hypothesis import strategies as st
    return st.builds(random_variant, st.integers(min_value=0, max_value=2**31 - 1))


# ----------------------------------------------------------------------------------------------
# CLI


def _parse_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        return text


def _describe() -> str:
    lines = []
    for name, fn in SCENARIOS.items():
        params = ", ".join(f"{p.name}={p.default!r}" for p in inspect.signature(fn).parameters.values()
                           if p.kind is p.KEYWORD_ONLY)
        doc = " ".join((inspect.getdoc(fn) or "").split())
        lines.append(f"{name}({params})\n    {doc}")
    common = ", ".join(f"{f.name}={f.default!r}" for f in dataclasses.fields(TraceOptions))
    lines.append(f"common to all: {common}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m stream_split.generate",
                                 description="Write a synthetic Kineto trace with ground truth.")
    ap.add_argument("scenario", nargs="?", help="scenario name (see --list)")
    ap.add_argument("out", nargs="?", help="output path (.gz: gzip; -: stdout)")
    ap.add_argument("--list", action="store_true", help="list scenarios and their parameters")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layout", choices=LAYOUTS, default=None)
    ap.add_argument("--form", choices=FORMS, default="object")
    ap.add_argument("--no-close", action="store_true", help="array form: omit the closing ]")
    ap.add_argument("--truth", metavar="TRUTH.json", help="also write the ground truth here")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a scenario or common parameter (value parsed as JSON if it can be)")
    args = ap.parse_args(argv)
    if args.list:
        print(_describe())
        return 0
    if not args.scenario or not args.out:
        ap.error("SCENARIO and OUT are required (or --list)")
    params: dict[str, Any] = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key:
            ap.error(f"--param wants KEY=VALUE, not {item!r}")
        params[key.strip()] = _parse_value(value)
    if args.layout:
        params["layout"] = args.layout
    try:
        gen = generate(args.scenario, args.seed, **params)
        write_trace(gen, args.out, args.form, close_array=not args.no_close)
        if args.truth:
            write_truth(gen, args.truth)
    except (ValueError, TypeError, OSError) as exc:
        print(f"generate: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
