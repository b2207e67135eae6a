"""The simulated profiled program behind the project's test workloads: ``TraceBuilder``.

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

The package: ``builder`` (this module: records, options, the builder), ``scenarios`` (the
workloads a builder runs), ``generate`` (assembling a built program into a trace in file order
with its truth, writing it, random variants, the CLI ``python -m stream_split.testing.generate
--list``), ``noise`` (noisy variants of real traces) and ``accuracy`` (the harness).
"""
from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from typing import Any, Iterator

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

    ``iterations``: ``{"index", "kind", "start_ts", "end_ts"}`` in order (µs, as in the trace),
    plus ``"phase"`` where a serving scenario labels its steps;
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
    rank, world_size: this trace's place in a distributed job (``distributedInfo``).
    """
    layout: str = "kineto"
    metadata: str = "last"
    streams: int = 1
    queue_lag_us: float | None = None
    pre_trace_kernels: int = 0
    distributed: bool = True
    rank: int = 0
    world_size: int = 1

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
        self.phases: dict[int, str] = {}  # iteration index -> serving phase, where labelled
        self.last_end: int | None = None
        self._loop_op_end = 0
        self._pending_boundary: int | None = None
        self._mirrors: list[tuple[_Rec, list[int]]] = []  # user annotations with GPU work
        self._python_ids: dict[int, list[int]] = {}  # per thread: the open frames' Python ids
        self._python_id = 0

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
    def begin_iteration(self, kind: str = "iteration", phase: str | None = None) -> None:
        """The next op opened on the loop thread is this iteration's first CPU op; ``phase``
        labels a serving step (prefill, decode, mixed, idle) in the truth."""
        assert self.tid == self.loop_tid, "iterations begin on the loop thread"
        if phase is not None:
            self.phases[len(self.boundaries)] = phase
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

    @contextlib.contextmanager
    def frame(self, name: str) -> Iterator[None]:
        """A Python frame (``python_function``, as ``with_stack=True`` records it) on the
        current thread, holding whatever the body does. A frame can open an iteration: it
        is then the iteration's first CPU event."""
        tid = self.tid
        start = self.now
        if self._pending_boundary is not None and tid == self.loop_tid:
            assert start == self._pending_boundary
            self._pending_boundary = None
        open_ids = self._python_ids.setdefault(tid, [])
        self._python_id += 1
        args = {"Python parent id": open_ids[-1] if open_ids else None,
                "Python id": self._python_id}
        open_ids.append(self._python_id)
        self.now += self.cost(0.3, 1.5)
        try:
            yield
        finally:
            self.now += self.cost(0.3, 1.0)
            open_ids.pop()
            end = self.now
            ev = {"ph": "X", "cat": "python_function", "name": name, "pid": self.pid,
                  "tid": tid, "ts": _us(start), "dur": _us(end - start), "args": args}
            self._add(ev, "frame", start, end, tid=tid)
            if tid == self.loop_tid:
                self._loop_op_end = end
            self.now += self.cost(0.1, 0.5)

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



