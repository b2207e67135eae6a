"""Facts about Chrome / Kineto trace events: the one place that names categories and APIs.

Everything that decides "what kind of event is this" reads the sets below; no other module
spells a category or a launch API name. See ../shared/docs/FORMAT.md for where they come from.
"""

#: Phases of events that carry no work and are copied into every output piece.
METADATA_PHASE = "M"

#: Flow phases (start, step, finish).
FLOW_PHASES = frozenset({"s", "t", "f"})

#: Python frames (with_stack); `nn.Module: X` frames are evidence of model vs layer.
PYTHON_FRAME_CAT = "python_function"

#: The categories of the layout that the PyTorch profiler of torch 1.8 / 1.9 wrote (Kineto's
#: early ``output_json.cpp``; the TensorBoard plugin reads both), each with today's category
#: of the same events. ``Operator`` holds every CPU op, ``record_function`` annotations and
#: ``ProfilerStep#N`` included; runtime calls, kernels and copies carry ``args.correlation``
#: as today (and a lowercase ``"external id"``); CPU ops have no ``Ev Idx``. ``Trace`` (the
#: profiling span, pid ``"Traces"``) is the same in both.
LEGACY_CATS = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel",
               "Memcpy": "gpu_memcpy", "Memset": "gpu_memset"}



def _with_legacy(cats: set) -> frozenset:
    """``cats`` and the names that the old layout gives the same events."""
    return frozenset(cats | {old for old, today in LEGACY_CATS.items() if today in cats})


#: Categories of CPU ops counted as such in the per-iteration numbers.
CPU_OP_CATS = _with_legacy({"cpu_op"})

#: CPU-side ``record_function`` spans whose ``External id`` a GPU annotation may mirror.
ANNOTATION_CAT = "user_annotation"

#: Categories of CPU-side ops that form the call structure the detector reads.
STRUCTURE_CATS = CPU_OP_CATS | {ANNOTATION_CAT}

#: GPU work, owned through ``args.correlation`` by the runtime call that launched it.
GPU_WORK_CATS = _with_legacy({"kernel", "gpu_memcpy", "gpu_memset"})

#: GPU copies and memsets (the breakdown's memcpy and memset layers; every other GPU work is a
#: kernel).
MEMCPY_CATS = _with_legacy({"gpu_memcpy"})
MEMSET_CATS = _with_legacy({"gpu_memset"})

#: GPU work that counts as a kernel in the per-iteration numbers.
KERNEL_CATS = _with_legacy({"kernel"})

#: GPU-side mirror of a CPU ``user_annotation``, owned through ``args["External id"]``.
GPU_ANNOTATION_CAT = "gpu_user_annotation"

#: Flow category linking a launch to its GPU work (``id`` == correlation id), as Kineto
#: writes it today (name ``ac2g``).
LAUNCH_FLOW_CAT = "ac2g"

#: The launch flow's category in older layouts: ``async`` (name ``launch``; torch 1.8 / 1.9,
#: written only for kernel, copy and memset launches) and ``async_cpu_to_gpu`` (name
#: ``async_gpu``; the writer between those and ``ac2g``, which readers also meet as category
#: ``async_gpu``). The same ``s`` / ``f`` pair, ``id`` the correlation id.
LEGACY_LAUNCH_FLOW_CATS = frozenset({"async", "async_cpu_to_gpu", "async_gpu"})

#: Every launch flow category.
LAUNCH_FLOW_CATS = LEGACY_LAUNCH_FLOW_CATS | {LAUNCH_FLOW_CAT}

#: Runtime calls that launch GPU work (kernel, copy, memset or a whole graph).
LAUNCH_NAMES = frozenset({
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
    "cudaMemcpyAsync", "cudaMemsetAsync", "cudaMemcpy", "cudaMemset", "cudaGraphLaunch",
    "cudaLaunchCooperativeKernel", "cuGraphLaunch",
    "hipLaunchKernel", "hipExtModuleLaunchKernel", "hipModuleLaunchKernel", "hipExtLaunchKernel",
    "hipMemcpyAsync", "hipMemcpyWithStream", "hipMemsetAsync", "hipGraphLaunch",
})

#: Launches of a memory copy (an instance that opens with one copies its input to the device).
COPY_LAUNCH_NAMES = frozenset({"cudaMemcpyAsync", "cudaMemcpy", "hipMemcpyAsync",
                               "hipMemcpyWithStream"})

#: Launches of a whole captured graph: one correlation id, many kernels.
GRAPH_LAUNCH_NAMES = frozenset({"cudaGraphLaunch", "cuGraphLaunch", "hipGraphLaunch"})

#: Step annotations written by ``torch.profiler.profile.step()``.
PROFILER_STEP_PREFIX = "ProfilerStep#"


def is_main_thread(pid, tid) -> bool:
    """Whether thread ``tid`` is the main thread of process ``pid`` (its id is the pid). The
    layout of torch 1.8 / 1.9 writes a CPU thread's id as a string (``"tid": "123"``) and the
    pid as a number."""
    return pid == tid or (tid.__class__ is str and tid == str(pid))


#: The largest step number: what the records' ``step`` (a protobuf int64) holds. A
#: ``ProfilerStep#`` with a larger number (20 digits and more) is only a name.
MAX_STEP_NUMBER = 2**63 - 1
#: ... so a step number has at most this many digits.
_MAX_STEP_DIGITS = len(str(MAX_STEP_NUMBER))


def profiler_step_number(name) -> int | None:
    """N of a ``ProfilerStep#N`` annotation's name (ASCII digits, at most
    ``MAX_STEP_NUMBER``), else None."""
    if not name or not name.startswith(PROFILER_STEP_PREFIX):
        return None
    digits = name[len(PROFILER_STEP_PREFIX):]
    if not (digits.isascii() and digits.isdigit()) or len(digits) > _MAX_STEP_DIGITS:
        return None  # also keeps int() under Python's limit on digits
    number = int(digits)
    return number if number <= MAX_STEP_NUMBER else None


#: The fields of an event that the engine reads (``Splitter.feed`` and what it calls), and
#: those of its ``args``: all that a batch read for the engine alone holds
#: (``TraceDecoder.slim``); a held event keeps fewer (``engine._held_view``).
ENGINE_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "id")
ENGINE_ARGS = ("correlation", "External id", "Input Dims")
#: The ``args`` key the engine reads of few ops (those that are phase evidence,
#: ``core.serving``): a batch for ``drive`` keeps it as its JSON text (``msgspec.Raw``,
#: ``TraceDecoder.lazy_dims``), parsed when read (``core.serving.input_dims``).
DIMS_ARG = "Input Dims"

#: Header key that holds the events in the object form.
EVENTS_KEY = "traceEvents"

#: Host calls that block until the GPU catches up: the previous iteration's last act, so an
#: iteration begins right after one (never between a step's last op and its own sync).
BLOCKING_SYNC_NAMES = frozenset({
    "aten::item", "aten::_local_scalar_dense", "cudaDeviceSynchronize", "cudaStreamSynchronize",
    "hipDeviceSynchronize", "hipStreamSynchronize", "cudaEventSynchronize"})

#: Ops that fetch the next input: where a loop's iteration begins when one is present
#: (``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``, a named batch fetch, a
#: server's request poll).
INPUT_FETCH_PATTERN = (r"enumerate\(DataLoader\)|DataLoaderIter\.__next__|"
                       r"(?i:get_next_batch|next_batch|fetch_batch|load_batch|get_batch|"
                       r"(get|recv|poll|fetch)_(new_)?requests?)")

#: Ops that happen once per turn of a training loop: the input fetch and the optimizer's step
#: and ``zero_grad`` (``Optimizer.step#AdamW.step``). A cut whose every instance holds one of
#: them once is the loop's own turn; a finer cut whose instances do not (the forward passes of
#: an eval, the tokens of a rollout) is a part of it, however regular.
LOOP_MARKER_PATTERN = INPUT_FETCH_PATTERN + r"|^Optimizer\.(step|zero_grad)#"
#: The fewest characters of a name that ``LOOP_MARKER_PATTERN`` matches (``get_batch``).
LOOP_MARKER_SHORTEST = 9
#: Every name that ``LOOP_MARKER_PATTERN`` matches, if it is ASCII, holds one of these once
#: lowered (an alternative of the input fetch holds ``_batch`` or ``_request``, of any case, or
#: ``DataLoader``; the optimizer's begins with ``Optimizer.``): a name that holds none is no
#: loop marker, told without the pattern's search (``core.detect.search.marker_match``).
LOOP_MARKER_WORDS = ("_batch", "_request", "dataloader", "optimizer.")

#: The loop marker that ends a turn: the optimizer's step applies what the turn computed, so
#: nothing of the turn comes after it but its bookkeeping (``loss.item()``); a turn never
#: begins with it. (``zero_grad`` may come first or last; the input fetch comes first.)
TURN_END_PATTERN = r"^Optimizer\.step#"
