"""The workloads: each scenario drives a ``TraceBuilder`` like a profiled program.

What it is for: one function per acceptance case (training, serving, diffusion, a single unit
of work, the four failure modes of PRODUCT.md, noisy and irregular loops, a trace with no CPU
side), registered in ``SCENARIOS``. A scenario takes the builder and its own keyword
parameters, marks where each iteration begins (``b.begin_iteration``) and returns nothing; the
truth is derived from what it built (``stream_split.testing.generate``), never from intent.
"""
from __future__ import annotations

import contextlib
from typing import Callable

from stream_split.testing.builder import (
    K_ADAM, K_ADD, K_ARGMAX, K_CONV, K_FLASH, K_GELU, K_GEMM, K_GEMM_BWD, K_LAYERNORM, K_MUL,
    K_NORMAL, K_REDUCE, K_TRITON, MEMCPY_NAMES, TraceBuilder)

# Building blocks


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
             memory_events: bool = False, graph_eval: bool = False, slow_step: int = -1,
             slow_us: float = 3000.0) -> None:
    """Training loop: data, forward, backward (autograd thread), optimizer, eval every few steps.
    Step `slow_step` waits `slow_us` longer for its batch (a straggling rank). Iterations:
    `steps`; the eval pass belongs to the step before it."""
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
                    if step == slow_step:
                        b.work(slow_us)
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


def diffusion(b: TraceBuilder, *, steps: int = 4, layers: int = 6, resolution: int = 1024,
              encoders: int = 1) -> None:
    """One request `execute_diffusion_0_RxR`: text encoding, `steps` denoising steps
    (`aten::cat` + `model_inference` + scheduler ops), VAE decode. Iterations: the `steps`
    denoising steps; the wrapper, text encoding (prologue) and VAE decode (epilogue) are -1."""
    b.thread("python", main=True, loop=True)
    b.set_default_lag(60)
    with b.op(f"execute_diffusion_0_{resolution}x{resolution}", "user_annotation"):
        for _ in range(encoders):  # SD3 runs its text encoders one after the other
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
               layers: int = 2, warmup_roots: int = 0) -> None:
    """Failure mode 3: `warmup_roots` top-level `step`s (a warm-up before the engine starts),
    then `serve_forever` > `engine_loop` > `run_engine` > `inner_steps` x `step`, then
    `minor_roots` top-level `step`s. Iterations: warmup_roots + inner_steps + minor_roots;
    the wrappers and the weight loading (before the warm-up when there is one, else before
    the first inner step) are -1."""
    b.thread("python", main=True, loop=True)
    b.set_default_lag(40)

    def steps(count: int) -> None:
        for _ in range(count):
            b.begin_iteration()
            with b.op("step", "user_annotation"):
                _to_device(b, 1 << 16)
                for _ in range(layers):
                    _mlp_layer(b)
            b.end_iteration()
            b.work(5, 15)

    def load_weights() -> None:
        with b.op("load_weights", "user_annotation"):
            _to_device(b, 8 << 20)

    if warmup_roots:  # a server loads its weights, warms up, then serves
        load_weights()
    steps(warmup_roots)
    with b.op("serve_forever", "user_annotation"):
        with b.op("engine_loop", "user_annotation"):
            with b.op("run_engine", "user_annotation"):
                if not warmup_roots:
                    load_weights()
                steps(inner_steps)
    b.work(5, 15)
    steps(minor_roots)


def warmup_root(b: TraceBuilder, *, warmup_roots: int = 1, inner_steps: int = 6,
                minor_roots: int = 0, layers: int = 2) -> None:
    """Failure mode 3 with the minor root first (``deep_roots``): a warm-up `step` called at
    the top level, with the same ops and GPU work, before the engine's busy loop
    (`serve_forever` > `engine_loop` > `run_engine` > `inner_steps` x `step`), and
    `minor_roots` after it. Iterations: warmup_roots + inner_steps + minor_roots."""
    deep_roots(b, inner_steps=inner_steps, minor_roots=minor_roots, layers=layers,
               warmup_roots=warmup_roots)


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


# Noisy and irregular loops (issue 8): real steps are never the same twice.

#: Small ops that come and go between the spine's ops of real steps.
SPORADIC = ("aten::zeros", "aten::zero_", "aten::empty", "aten::detach", "detach",
            "record_param_comms")


def _loss_backward_optimizer(b: TraceBuilder, grad: int, layers: int,
                             noise: float = 0.0) -> None:
    """The end of a training step: the loss, backward on the autograd thread, AdamW."""
    with b.op("aten::mse_loss"):
        b.launch(K_REDUCE, 3, 8)
    _sporadic(b, noise)
    with b.op("torch::autograd::backward"):
        with b.on_thread(grad):
            for _ in range(layers):
                _backward_layer(b)
        b.work(3, 8)
    _optimizer(b)


def _sporadic(b: TraceBuilder, noise: float) -> None:
    """With probability ``noise``: one to three small ops (a repeated ``detach`` run, a
    stray ``aten::zeros``), now and then a stray host sync."""
    if not noise or b.rng.random() >= noise:
        return
    name = b.rng.choice(SPORADIC)
    for _ in range(b.rng.randint(1, 3)):
        b.leaf(name, 1, 3)
    if b.rng.random() < 0.2:
        b.runtime("cudaStreamSynchronize")


def _train_step(b: TraceBuilder, grad: int, layers: int, noise: float, fetch: bool) -> None:
    """One training step (fetch, copy, zero_grad, forward, loss, backward, optimizer), with
    sporadic small ops between."""
    if fetch:
        with b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                  "user_annotation"):
            b.leaf("aten::stack", 20, 60)
    _sporadic(b, noise)
    _to_device(b, 1 << 20)
    _zero_grad(b)
    _sporadic(b, noise)
    for _ in range(layers):
        _mlp_layer(b)
    _loss_backward_optimizer(b, grad, layers, noise)
    for _ in range(b.rng.randint(0, 6) if noise else 0):  # a varying run of detach ops
        b.leaf("aten::detach", 1, 2)


def _loss_item(b: TraceBuilder) -> None:
    """``loss.item()``: the host waits for the GPU."""
    with b.op("aten::item"):
        with b.op("aten::_local_scalar_dense"):
            b.runtime("cudaStreamSynchronize")
            b.work(20, 60)


def noisy_training(b: TraceBuilder, *, steps: int = 8, layers: int = 3, noise: float = 0.5,
                   fetch: bool = True, sync: bool = True, eval_every: int = 3,
                   checkpoint_every: int = 4) -> None:
    """Training whose steps are never alike: sporadic small ops (``aten::zeros``, ``detach``
    runs of varying length, a stray sync) between the spine's ops, an eval pass every
    `eval_every` steps and a checkpoint every `checkpoint_every`, each step ending with its
    ``loss.item()`` sync. With ``fetch=False`` there is no data loader: the step begins
    right after the previous step's sync. Iterations: `steps`."""
    main = b.thread("python", main=True, loop=True)
    grad = b.thread("pt_autograd_0")
    b.set_default_lag(40)
    for step in range(steps):
        b.begin_iteration()
        _train_step(b, grad, layers, noise, fetch)
        if eval_every and (step + 1) % eval_every == 0:
            with b.op("eval", "user_annotation"):
                for _ in range(2):
                    for _ in range(layers):
                        _mlp_layer(b)
        if checkpoint_every and (step + 1) % checkpoint_every == 0:
            with b.op("save_checkpoint", "user_annotation"):
                _to_device(b, 2 << 20, "DtoH")
        if sync:
            _loss_item(b)
        b.end_iteration()
        b.work(5, 30)
    del main


def two_steps(b: TraceBuilder, *, layers: int = 3, noise: float = 0.0) -> None:
    """A profile of two training steps (``schedule(active=2)``), no annotations, model setup
    before and a checkpoint after. Iterations: 2."""
    b.thread("python", main=True, loop=True)
    grad = b.thread("pt_autograd_0")
    b.set_default_lag(40)
    with b.op("aten::empty"):
        b.work(5, 10)
    for _ in range(2):
        b.begin_iteration()
        _train_step(b, grad, layers, noise, fetch=True)
        b.end_iteration()
        b.work(5, 30)
    with b.op("save_checkpoint", "user_annotation"):
        _to_device(b, 2 << 20, "DtoH")
        b.work(50, 120)


def dynamic_shapes(b: TraceBuilder, *, steps: int = 8, layers: int = 3) -> None:
    """Variable batch and sequence lengths: each step pads its batch or takes a bucketed path
    (a different number of layer calls and a ``aten::constant_pad_nd`` or not), with shapes
    in ``Input Dims``. Iterations: `steps`."""
    b.thread("python", main=True, loop=True)
    grad = b.thread("pt_autograd_0")
    b.set_default_lag(40)
    for _ in range(steps):
        b.begin_iteration()
        seq = b.rng.choice([128, 256, 384, 512])
        with b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                  "user_annotation", args={"Input Dims": [[b.rng.randint(4, 32), seq]]}):
            b.leaf("aten::stack", 20, 60)
        if b.rng.random() < 0.5:
            with b.op("aten::constant_pad_nd"):
                b.launch(K_ADD, 2, 6)
        _to_device(b, seq << 10)
        _zero_grad(b)
        for _ in range(layers + (seq // 256)):
            _mlp_layer(b)
        _loss_backward_optimizer(b, grad, layers)
        b.end_iteration()
        b.work(5, 30)


def serving_polls(b: TraceBuilder, *, steps: int = 14, layers: int = 3) -> None:
    """An inference server's loop: each cycle polls its queue (``get_requests``), pops 0 to 4
    requests, and when it has any runs a step (``forward`` + ``sample``); an empty poll waits
    (``idle_wait``). Records: busy cycles are iterations, empty polls ``idle``."""
    b.thread("server_loop", main=True, loop=True)
    b.set_default_lag(200)
    pops = [b.rng.randint(0, 4) for _ in range(steps)]
    pops[0] = max(1, pops[0])
    for n in pops:
        b.begin_iteration("iteration" if n else "idle")
        with b.op("get_requests", "user_annotation"):
            b.leaf("aten::empty", 1, 3)
            b.work(10, 30)
        if n:
            with b.op("forward", "user_annotation", args={"Input Dims": [[n, 128]]}):
                for _ in range(layers):
                    _mlp_layer(b)
            with b.op("sample", "user_annotation"):
                with b.op("aten::argmax"):
                    b.launch(K_ARGMAX, 2, 6)
        else:
            with b.op("idle_wait", "user_annotation"):
                b.work(200, 500)
        b.end_iteration()
        b.work(5, 20)


def rollout(b: TraceBuilder, *, steps: int = 6, layers: int = 2) -> None:
    """An RL step: a rollout of a variable number of ``generate_token`` calls (2 to 8), then
    the update (forward, loss, backward, optimizer). Iterations: `steps` (never the rollout's
    tokens, never the update alone)."""
    b.thread("python", main=True, loop=True)
    grad = b.thread("pt_autograd_0")
    b.set_default_lag(40)
    for _ in range(steps):
        b.begin_iteration()
        with b.op("rollout", "user_annotation"):
            for _ in range(b.rng.randint(2, 8)):
                with b.op("generate_token", "user_annotation"):
                    _mlp_layer(b)
                    with b.op("aten::multinomial"):
                        b.launch(K_ARGMAX, 2, 5)
        with b.op("compute_advantages", "user_annotation"):
            _eltwise(b, "aten::sub", K_ADD)
        for _ in range(layers):
            _mlp_layer(b)
        _loss_backward_optimizer(b, grad, layers)
        b.end_iteration()
        b.work(5, 30)


_HIDDEN, _HEADS, _HEAD_DIM, _VOCAB = 4096, 32, 128, 128_256


def _serving_layer(b: TraceBuilder, prefill_tokens: int, decodes: int, context: int) -> None:
    """One decoder layer of a serving step over ``prefill_tokens`` prompt tokens and
    ``decodes`` one-token requests, with shapes as the profiler records them (``Input Dims``):
    the projections see every token; prefill and decode attention run apart (a query of the
    prompt's length, a query of one token against ``context`` cached tokens)."""
    tokens = prefill_tokens + decodes
    with b.op("aten::linear", args={"Input Dims": [[tokens, _HIDDEN], [3 * _HIDDEN, _HIDDEN], []]}):
        b.leaf("aten::t", 1, 3)
        b.launch(K_GEMM, 8, 40)
    if prefill_tokens:
        q = [1, _HEADS, prefill_tokens, _HEAD_DIM]
        with b.op("aten::scaled_dot_product_attention", args={"Input Dims": [q, q, q]}):
            with b.op("aten::_scaled_dot_product_flash_attention", args={"Input Dims": [q, q, q]}):
                b.launch(K_FLASH, 20, 60)
    if decodes:
        q, kv = [decodes, _HEADS, 1, _HEAD_DIM], [decodes, _HEADS, context, _HEAD_DIM]
        with b.op("aten::scaled_dot_product_attention", args={"Input Dims": [q, kv, kv]}):
            with b.op("aten::_scaled_dot_product_efficient_attention",
                      args={"Input Dims": [q, kv, kv]}):
                b.launch(K_FLASH, 5, 15)
    with b.op("aten::linear", args={"Input Dims": [[tokens, _HIDDEN], [_HIDDEN, _HIDDEN], []]}):
        b.launch(K_GEMM, 8, 40)
    _eltwise(b, "aten::add", K_ADD)


def _phase_annotation(style: str, phase: str, prefills: int, prefill_tokens: int,
                      decodes: int) -> str | None:
    if style == "vllm":
        return (f"execute_{prefills + decodes}_context_{prefills}({prefill_tokens})"
                f"_generation_{decodes}({decodes})")
    if style == "sglang":
        if phase == "decode":
            return f"step[DECODE bs={decodes}]"
        mode = "EXTEND" if phase == "prefill" else "MIXED"
        return f"step[{mode} bs={prefills + decodes} toks={prefill_tokens + decodes}]"
    return None


def serving_phases(b: TraceBuilder, *, steps: int = 30, annotations: str = "none",
                   layers: int = 2, graph_share: float = 0.85, prefill_wait_us: float = 0.0,
                   warmup_decodes: int = 0, warmup_us: float = 0.0) -> None:
    """An LLM server's loop with every serving phase: each cycle polls for requests, then runs
    an eager prefill, a decode step (replayed as a CUDA graph for a `graph_share` of them,
    eager when the batch was not captured), a chunked-prefill mixed step, or waits (an idle
    poll). `annotations`: "none", "vllm" (`execute_..._context_N(..)_generation_M(..)`) or
    "sglang" (`step[DECODE bs=..]`, `step[EXTEND ..]`, `step[MIXED ..]`). Truth: each record's
    `phase`; idle polls are records of kind idle. Step times as a server's: a step with
    prompts (prefill, mixed) waits `prefill_wait_us` longer for its sample (the GPU computing
    the prompts), and the first `warmup_decodes` decode steps spend `warmup_us` more (graph
    capture, compilation); both 0 by default."""
    if annotations not in ("none", "vllm", "sglang"):
        raise ValueError(f"annotations must be none, vllm or sglang, not {annotations!r}")
    b.thread("EngineCore", main=True, loop=True)
    b.set_default_lag(300)
    order = ["prefill", "decode", "decode", "mixed", "idle"]
    order += b.rng.choices(["decode", "prefill", "mixed", "idle"], weights=[12, 1, 2, 1],
                           k=max(0, int(steps) - len(order)))
    decodes, context = b.rng.randint(8, 48), 512
    for phase in order[:int(steps)]:
        b.begin_iteration("idle" if phase == "idle" else "iteration", phase=phase)
        with b.op("get_requests", "user_annotation"):
            b.leaf("aten::empty", 1, 3)
            b.work(10, 30)
        if phase == "idle":
            with b.op("idle_wait", "user_annotation"):
                b.work(200, 500)
            b.end_iteration()
            b.work(5, 20)
            continue
        prefills = b.rng.randint(1, 4) if phase != "decode" else 0
        prefill_tokens = prefills * b.rng.randint(200, 1500) if prefills else 0
        active = 0 if phase == "prefill" else decodes
        with b.op("schedule", "user_annotation"):
            b.work(40, 120)
        with b.op("prepare_inputs", "user_annotation"):
            with b.op("aten::copy_"):
                b.memcpy("HtoD", 4096)
        name = _phase_annotation(annotations, phase, prefills, prefill_tokens, active)
        with b.op(name, "user_annotation") if name else contextlib.nullcontext():
            if phase == "decode" and b.rng.random() < graph_share:
                with b.op("CUDAGraph.replay"):
                    b.graph_launch([K_GEMM, K_FLASH, K_GEMM, K_ADD] * int(layers), 2.0, 8.0)
            else:
                for _ in range(int(layers)):
                    _serving_layer(b, prefill_tokens, active, context)
        seqs = prefills + active
        with b.op("aten::linear", args={"Input Dims": [[seqs, _HIDDEN], [_VOCAB, _HIDDEN], []]}):
            b.launch(K_GEMM, 8, 30)
        with b.op("sample", "user_annotation"):
            with b.op("aten::argmax", args={"Input Dims": [[seqs, _VOCAB]]}):
                b.launch(K_ARGMAX, 2, 6)
            if prefills and prefill_wait_us:
                b.work(prefill_wait_us)
            if phase == "decode" and warmup_decodes > 0 and warmup_us:
                warmup_decodes -= 1
                b.work(warmup_us)
        b.end_iteration()
        b.work(5, 20)
        decodes = max(1, decodes + prefills + b.rng.randint(-3, 1))
        context += 1


# The loop's edge (issue 21): what runs at the very start of each step belongs to it.

#: The user's Python wrappers around a step, outermost first (``wrapped_steps``).
STEP_WRAPPERS = ("train.py(88): training_step", "train.py(71): optimise",
                 "train.py(52): forward_backward")


def _fetch_with_frames(b: TraceBuilder) -> None:
    """The data loader's ``__next__`` frame around its ``enumerate(DataLoader)`` annotation."""
    with b.frame("torch/utils/data/dataloader.py(733): __next__"):
        with b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                  "user_annotation"):
            with b.frame("torch/utils/data/_utils/collate.py(171): default_collate"):
                b.leaf("aten::stack", 20, 60)


def wrapped_steps(b: TraceBuilder, *, steps: int = 6, layers: int = 2, wrappers: int = 3,
                  rng_calls: int = 2, annotate_steps: bool = False) -> None:
    """Training recorded with ``with_stack=True``: each step runs inside `wrappers` (1 to 3)
    levels of the user's Python functions (``training_step > optimise > forward_backward``)
    and makes `rng_calls` Python RNG calls (``random.random``, no aten op) before its first
    op, the data fetch; the program's own frames (``<module>``, ``main``) hold every step.
    Iterations: `steps`, each beginning at its outermost wrapper frame (`annotate_steps`:
    in a ``ProfilerStep#N`` that opens right after the previous step's frames end, as
    ``prof.step()`` called at the end of the loop's body)."""
    b.thread("python", main=True, loop=True)
    grad = b.thread("pt_autograd_0")
    b.set_default_lag(40)
    with b.frame("train.py(140): <module>"), b.frame("train.py(121): main"):
        with b.op("aten::empty"):  # the model is built: outside
            b.work(5, 10)
        for step in range(steps):
            b.begin_iteration()
            with contextlib.ExitStack() as wrapped:
                if annotate_steps:
                    wrapped.enter_context(b.op(f"ProfilerStep#{step}", "user_annotation"))
                for name in STEP_WRAPPERS[:max(1, min(3, int(wrappers)))]:
                    wrapped.enter_context(b.frame(name))
                    if name == STEP_WRAPPERS[0]:
                        for _ in range(rng_calls):
                            with b.frame("random.py(878): random"):
                                b.work(1, 3)
                _fetch_with_frames(b)
                _to_device(b, 1 << 20)
                _zero_grad(b)
                for _ in range(layers):
                    with b.frame("torch/nn/modules/module.py(1762): _call_impl"):
                        _mlp_layer(b)
                _loss_backward_optimizer(b, grad, layers)
            b.end_iteration()
            b.work(5, 30)


def step_bookkeeping(b: TraceBuilder, *, steps: int = 8, layers: int = 3,
                     idle_us: float = 50.0, annotate_steps: bool = False) -> None:
    """Training as the profiler records it, its steps stripped (`annotate_steps`: kept, each
    step inside its ``ProfilerStep#N``): each step opens with the profiler's own step
    bookkeeping (``aten::empty``, ``aten::zeros`` > ``aten::zero_`` > ``aten::fill_``)
    before its data fetch, and the host idles about `idle_us` between the previous step's
    ``Optimizer.step`` and it: the widest gap between ops marks the edge. Iterations:
    `steps`, each beginning at its bookkeeping."""
    b.thread("python", main=True, loop=True)
    grad = b.thread("pt_autograd_0")
    b.set_default_lag(40)
    with b.op("aten::empty"):  # the model is built: outside
        b.work(5, 10)
    b.work(idle_us * 0.8, idle_us * 1.2)
    for step in range(steps):
        b.begin_iteration()
        with (b.op(f"ProfilerStep#{step}", "user_annotation") if annotate_steps
              else contextlib.nullcontext()):
            _bookkept_step(b, grad, layers)
        b.end_iteration()
        b.work(idle_us * 0.8, idle_us * 1.2)


def _bookkept_step(b: TraceBuilder, grad: int, layers: int) -> None:
    """``step_bookkeeping``'s step: the profiler's bookkeeping, then a training step."""
    b.leaf("aten::empty", 1, 3)
    with b.op("aten::zeros"):
        b.leaf("aten::empty", 1, 2)
        with b.op("aten::zero_"):
            b.leaf("aten::fill_", 1, 3)
    with b.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
              "user_annotation"):
        b.leaf("aten::stack", 20, 60)
    _to_device(b, 1 << 20)
    _zero_grad(b)
    for _ in range(layers):
        _mlp_layer(b)
    _loss_backward_optimizer(b, grad, layers)

# Loops recorded on the CPU alone (issue 21): no GPU work to weigh, the backward on the loop
# thread, and every op's time following the shapes.


def _step_span(b: TraceBuilder, annotate: bool, step: int):
    """``ProfilerStep#N`` around a step when ``annotate`` (the truth a noisy variant keeps:
    ``noise.noisy_events``), else nothing."""
    return b.op(f"ProfilerStep#{step}", "user_annotation") if annotate \
        else contextlib.nullcontext()


def _cpu_op(b: TraceBuilder, name: str, scale: float, lo_us: float = 4.0,
            hi_us: float = 12.0) -> None:
    """A CPU op whose time follows the size of its input (``scale``: elements against a
    typical batch), with a floor: a tiny batch still pays the dispatch."""
    b.leaf(name, 1.0 + lo_us * scale, 1.5 + hi_us * scale)


def _cpu_batch(b: TraceBuilder, batch: int, seq: int, padded: bool) -> int:
    """A batch of variable-length sequences made on the host, bucketed (truncated to the
    shortest and stacked) or padded (``pad_sequence`` and a key padding mask). Returns the
    sequence length the model sees."""
    chunks = b.rng.randint(8, 20)  # the samples' tokens, as the loop over them makes them
    for _ in range(chunks):
        b.leaf("aten::randint", 1.5, 4)
    if padded:
        with b.op("aten::pad_sequence"):
            b.leaf("aten::full", 2, 4)
            for _ in range(chunks):
                b.leaf("aten::copy_", 0.5, 1.5)
        for name in ("aten::arange", "aten::unsqueeze", "aten::ge"):
            b.leaf(name, 1, 3)
        return seq
    for _ in range(chunks):
        b.leaf("aten::slice", 0.5, 1.5)
    with b.op("aten::stack"):
        b.work(2 + batch * seq / 400, 4 + batch * seq / 300)
    return b.rng.choice([16, 32, 64, 96, 128])


def _cpu_forward(b: TraceBuilder, layers: int, scale: float, padded: bool) -> None:
    """An encoder's forward on the CPU: each op top-level (no module frames recorded)."""
    _cpu_op(b, "aten::embedding", scale)
    for _ in range(layers):
        for name in ("aten::layer_norm", "aten::linear", "aten::relu", "aten::linear",
                     "aten::add"):
            _cpu_op(b, name, scale, 20, 60)
        if padded:
            _cpu_op(b, "aten::masked_fill", scale)
    _cpu_op(b, "aten::mean", scale)
    _cpu_op(b, "aten::linear", scale)
    _cpu_op(b, "aten::cross_entropy_loss", scale)


def _cpu_backward(b: TraceBuilder, layers: int, scale: float) -> None:
    """The backward on the loop thread (the CPU runs it where ``backward()`` is called): one
    root, then each node's function and each parameter's gradient accumulation top-level."""
    b.leaf("autograd::engine::evaluate_function: torch::autograd::GraphRoot", 1, 3)
    for fn in ("NllLossBackward0", "LogSoftmaxBackward0", "AddmmBackward0", "MeanBackward1"):
        _cpu_op(b, f"autograd::engine::evaluate_function: {fn}", scale, 8, 30)
    for _ in range(layers):
        for fn in ("AddBackward0", "AddmmBackward0", "ReluBackward0", "AddmmBackward0",
                   "NativeLayerNormBackward0"):
            _cpu_op(b, f"autograd::engine::evaluate_function: {fn}", scale, 30, 90)
        for _ in range(4):
            b.leaf("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad",
                   1, 4)
    _cpu_op(b, "autograd::engine::evaluate_function: EmbeddingBackward0", scale)
    b.leaf("autograd::engine::evaluate_function: torch::autograd::AccumulateGrad", 1, 4)


def _cpu_adam(b: TraceBuilder, layers: int) -> None:
    with b.op("Optimizer.step#Adam.step", "user_annotation"):
        for name in ("aten::_foreach_add_", "aten::_foreach_lerp_", "aten::_foreach_mul_",
                     "aten::_foreach_addcmul_", "aten::_foreach_sqrt", "aten::_foreach_div_",
                     "aten::_foreach_add_", "aten::_foreach_addcdiv_"):
            b.leaf(name, 5 + 4 * layers, 12 + 8 * layers)


def dynamic_shapes_cpu(b: TraceBuilder, *, steps: int = 8, layers: int = 6,
                       annotate_steps: bool = False) -> None:
    """Dynamic shapes on the CPU alone: each step draws a batch size (8-56) and sequence
    length (16-128) and either buckets (truncate + stack) or pads (``pad_sequence`` and a key
    padding mask); the forward, the backward (on the loop thread) and ``zero_grad`` are
    top-level ops whose times follow the shapes, some 130-160 of them a step, never the same
    sequence twice, but one ``Optimizer.step#Adam.step`` and one backward root each.
    `annotate_steps`: each step inside ``ProfilerStep#N`` (for noisy variants). Iterations:
    `steps`."""
    b.thread("python", main=True, loop=True)
    b.set_default_lag(40)
    for step in range(steps):
        b.begin_iteration()
        with _step_span(b, annotate_steps, step + 1):
            batch, seq = b.rng.randint(8, 56), b.rng.randint(16, 128)
            padded = b.rng.random() < 0.5
            seq = _cpu_batch(b, batch, seq, padded)
            scale = batch * seq / 2048
            b.leaf("Optimizer.zero_grad#Adam.zero_grad", 3, 8, cat="user_annotation")
            _cpu_forward(b, layers, scale, padded)
            _cpu_backward(b, layers, scale)
            _cpu_adam(b, layers)
            b.leaf("aten::item", 1, 3)  # loss.item() for the log
        b.end_iteration()
        b.work(8, 30)


def serving_cpu(b: TraceBuilder, *, turns: int = 24, layers: int = 3, rate: float = 0.6,
                annotate_steps: bool = False) -> None:
    """A server on the CPU with no annotations: requests arrive at random (`rate` a turn) and
    queue up; each turn of its loop either polls idle (a 1 ms sleep, then one tiny heartbeat
    op) or pops up to 8 requests and runs a batch forward, ``softmax``, ``topk`` and the
    tokens' ``.tolist()`` (no op: Python). Every turn, idle or busy, is one iteration (the CPU
    does no GPU work that could tell an idle one). `annotate_steps`: each turn inside
    ``ProfilerStep#N`` (for noisy variants). Iterations: `turns`."""
    b.thread("python", main=True, loop=True)
    queue = 0
    for turn in range(turns):
        queue += sum(1 for _ in range(4) if b.rng.random() < rate / 4)
        if turn == 0:
            queue = max(queue, 1)
        if not queue and not annotate_steps:
            b.work(1000, 1100)  # time.sleep(0.001): no op (the turn begins at its first op)
        b.begin_iteration()
        with _step_span(b, annotate_steps, turn + 1):
            if not queue:
                if annotate_steps:
                    b.work(1000, 1100)
                b.leaf("aten::add_", 1, 2)  # the heartbeat
            else:
                batch = min(queue, 8)
                queue -= batch
                scale = batch / 4
                b.leaf("aten::stack", 3 + batch, 6 + batch)
                _cpu_op(b, "aten::embedding", scale)
                for _ in range(layers):
                    for name in ("aten::layer_norm", "aten::linear", "aten::gelu",
                                 "aten::linear", "aten::add"):
                        _cpu_op(b, name, scale, 6, 20)
                _cpu_op(b, "aten::linear", scale, 10, 30)
                _cpu_op(b, "aten::softmax", scale)
                _cpu_op(b, "aten::topk", scale)
                b.work(5 + 3 * batch, 10 + 5 * batch)  # .tolist() and the replies
        b.end_iteration()
        b.work(3, 10)


SCENARIOS: dict[str, Callable[..., None]] = {
    "training": training,
    "serving": serving,
    "diffusion": diffusion,
    "single_forward": single_forward,
    "layer_annotations": layer_annotations,
    "idle_steps": idle_steps,
    "deep_roots": deep_roots,
    "warmup_root": warmup_root,
    "wrapped_steps": wrapped_steps,
    "step_bookkeeping": step_bookkeeping,
    "preamble": preamble,
    "gpu_only": gpu_only,
    "sample": sample,
    "noisy_training": noisy_training,
    "two_steps": two_steps,
    "dynamic_shapes": dynamic_shapes,
    "serving_polls": serving_polls,
    "serving_phases": serving_phases,
    "rollout": rollout,
    "dynamic_shapes_cpu": dynamic_shapes_cpu,
    "serving_cpu": serving_cpu,
}


