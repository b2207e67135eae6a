#!/usr/bin/env python3
"""Record the hard loops of issue 21 with the PyTorch profiler on the CPU, as test material.

Each program runs its own loop under ``torch.profiler.profile`` with a schedule and calls
``prof.step()`` once per iteration of that loop, so ``ProfilerStep#N`` is the ground truth:
``stream_split.testing.accuracy`` strips the steps and checks the split against them. Torch is
not a dependency of the project: run this with a torch of its own (``torch==2.13.0``, CPU).

``dynamic_bucket``
    Random batch size and random sequence lengths every step; the sequences are truncated to
    the shortest and stacked, then a GRU classifier, one backward, one Adam step.
``dynamic_pad``
    The same draws; the sequences are padded (``pad_sequence``) and a key padding mask built
    for a small transformer encoder, one backward, one Adam step.
``serving_unannotated``
    A serving loop with no ``record_function`` at all: requests arrive at random and queue up;
    each turn is either an idle poll (a 1 ms sleep and one tiny heartbeat op) or a forward of
    a batch of up to 4 queued requests with softmax, topk and ``.tolist()``.
``train_with_stack``
    ``with_stack=True``: each step enters through 1-3 levels of the user's own functions
    (``training_step`` > ``optimise`` > ``forward_backward``, the depth drawn per step) and
    draws random numbers (``random.random``, ``torch.rand``) before its first big op.
``warmup_before_loop``
    An engine: one warm-up ``step`` at the top level, then ``engine.run`` (the loop's
    container, a ``record_function``) runs its busy loop of the same ``step``, then two more
    ``step`` calls at the top level after it (minor roots: a final step on the remainder
    batch, then one more to drain). Every ``step`` is one ``ProfilerStep``; the container's
    own span crosses steps.

Run (a few seconds; one intra-op thread, fixed seeds)::

    python scripts/record_cpu_loops.py OUT_DIR [--only NAME ...]

Writes ``OUT_DIR/<name>.json.gz`` per program and ``OUT_DIR/truth.json``: per program, per
``ProfilerStep`` number, what that step did.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import platform
import random
import time

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.profiler import record_function

from record_cuda_traces import Recorder

VOCAB, D, CLASSES = 500, 64, 8

# --------------------------------------------------------------------------- dynamic shapes


class GRUClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.gru = nn.GRU(D, D, batch_first=True)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, tokens):
        _, last = self.gru(self.embed(tokens))
        return self.head(last[-1])


class MaskedEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.encoder = nn.TransformerEncoderLayer(D, nhead=4, dim_feedforward=2 * D,
                                                  batch_first=True)
        self.head = nn.Linear(D, CLASSES)

    def forward(self, tokens, pad_mask=None):
        h = self.encoder(self.embed(tokens), src_key_padding_mask=pad_mask)
        if pad_mask is None:
            return self.head(h.mean(dim=1))
        keep = (~pad_mask).unsqueeze(-1).float()
        return self.head((h * keep).sum(dim=1) / keep.sum(dim=1))


def _truncate_and_stack(seqs: list) -> tuple[torch.Tensor, None]:
    """Bucketing: every sequence cut to the shortest one's length, then stacked."""
    length = min(len(s) for s in seqs)
    return torch.stack([s[:length] for s in seqs]), None


def _pad_and_mask(seqs: list) -> tuple[torch.Tensor, torch.Tensor]:
    """Padding: ``pad_sequence`` to the longest, and the key padding mask (True = padding)."""
    tokens = pad_sequence(seqs, batch_first=True)
    lengths = torch.tensor([len(s) for s in seqs])
    return tokens, torch.arange(tokens.shape[1])[None, :] >= lengths[:, None]


COLLATE = {"bucket": _truncate_and_stack, "pad": _pad_and_mask}


def _train_dynamic(out_dir: str, name: str, model: nn.Module, seed: int, choose_path) -> dict:
    """A loop over random batches: the batch size (2-16) and every sequence's length (4-32
    tokens) drawn with torch's RNG at the top of the step, the sequences collated by the path
    ``choose_path(rng)`` names; one backward and one Adam step per step."""
    rng = random.Random(seed)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rec = Recorder(out_dir, name, "cpu", active=7)
    with rec:
        for _ in range(rec.steps):
            size = int(torch.randint(2, 17, ()).item())
            lengths = torch.randint(4, 33, (size,)).tolist()
            seqs = [torch.randint(0, VOCAB, (n,)) for n in lengths]
            labels = torch.randint(0, CLASSES, (size,))
            path = choose_path(rng)
            tokens, pad_mask = COLLATE[path](seqs)
            loss = F.cross_entropy(model(tokens) if pad_mask is None else model(tokens, pad_mask),
                                   labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()
            rec.note(batch=size, lengths=lengths, path=path, length=tokens.shape[1])
            rec.step()
    return rec.recorded_truth()


def dynamic_bucket(out_dir: str) -> dict:
    torch.manual_seed(10)
    return _train_dynamic(out_dir, "dynamic_bucket", GRUClassifier(), 10, lambda rng: "bucket")


def dynamic_pad(out_dir: str) -> dict:
    torch.manual_seed(11)
    return _train_dynamic(out_dir, "dynamic_pad", MaskedEncoder(), 11, lambda rng: "pad")


def dynamic_mixed(out_dir: str) -> dict:
    torch.manual_seed(15)
    return _train_dynamic(out_dir, "dynamic_mixed", MaskedEncoder(), 15,
                          lambda rng: rng.choice(("bucket", "pad")))


# --------------------------------------------------------------------------- serving


def serving_unannotated(out_dir: str) -> dict:
    torch.manual_seed(12)
    rng = random.Random(12)
    model = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, 4 * D), nn.GELU(),
                          nn.Linear(4 * D, VOCAB)).eval()
    heartbeat = torch.zeros(1)
    queue: list[torch.Tensor] = []
    rec = Recorder(out_dir, "serving_unannotated", "cpu", active=12)
    with rec, torch.no_grad():
        for _ in range(rec.steps):
            arriving = rng.choice((0, 0, 0, 1, 1, 2, 3))
            queue.extend(torch.randn(D) for _ in range(arriving))
            if not queue:
                time.sleep(0.001)  # the server polls its queue
                heartbeat.add_(1)
                rec.note(turn="idle", arrived=0, batch=0, queued=0)
                rec.step()
                continue
            batch, queue[:] = queue[:4], queue[4:]
            probs = F.softmax(model(torch.stack(batch)), dim=-1)
            best = probs.topk(5, dim=-1)
            best.indices.tolist()
            best.values.tolist()
            rec.note(turn="batch", arrived=arriving, batch=len(batch), queued=len(queue))
            rec.step()
    return rec.recorded_truth()


# --------------------------------------------------------------------------- with_stack


def train_with_stack(out_dir: str) -> dict:
    torch.manual_seed(13)
    rng = random.Random(19)  # draws every depth in the recorded steps: 3 1 3 1 2 2
    model = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, CLASSES))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)

    def make_batch():
        noise = 0.1 if random.random() < 0.5 else 0.0  # the user's own augmentation draw
        scale = torch.rand(()) + 0.5
        return torch.randn(32, D) * scale + noise, torch.randint(0, CLASSES, (32,))

    def forward_backward(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss

    def optimise(x, y):
        loss = forward_backward(x, y)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def training_step():  # three levels: training_step > optimise > forward_backward
        return optimise(*make_batch()).item()

    def optimise_a_batch():  # two levels: optimise_a_batch > forward_backward
        loss = forward_backward(*make_batch())
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    def train_inline():  # one level
        x, y = make_batch()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    entries = {1: train_inline, 2: optimise_a_batch, 3: training_step}
    random.seed(13)
    rec = Recorder(out_dir, "train_with_stack", "cpu", active=6, with_stack=True)
    with rec:
        for _ in range(rec.steps):
            depth = rng.randint(1, 3)
            entries[depth]()
            rec.note(wrapper_depth=depth)
            rec.step()
    return rec.recorded_truth()


# --------------------------------------------------------------------------- warm-up root


def warmup_before_loop(out_dir: str) -> dict:
    torch.manual_seed(14)
    model = nn.Sequential(nn.Linear(D, 4 * D), nn.ReLU(), nn.Linear(4 * D, D), nn.ReLU(),
                          nn.Linear(D, CLASSES))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    loop_steps = 6

    def step(batch: int) -> None:
        with record_function("step"):
            x, y = torch.randn(batch, D), torch.randint(0, CLASSES, (batch,))
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()

    rec = Recorder(out_dir, "warmup_before_loop", "cpu", active=1 + loop_steps + 2)
    with rec:
        for _ in range(rec.steps - rec.active - 1):  # setup, before the recorded window
            torch.save(model.state_dict(), io.BytesIO())
            rec.step()
        step(32)  # the warm-up, at the top level
        rec.note(role="warm-up", root="step", batch=32)
        rec.step()
        with record_function("engine.run"):  # the busy loop's container
            for _ in range(loop_steps):
                step(32)
                rec.note(role="loop", root="step", batch=32)
                rec.step()
        step(12)  # minor roots after the container: the remainder batch, then a drain
        rec.note(role="after", root="step", batch=12)
        rec.step()
        step(32)
        rec.note(role="after", root="step", batch=32)
        rec.step()
    return rec.recorded_truth()


PROGRAMS = {
    "dynamic_bucket": dynamic_bucket,
    "dynamic_pad": dynamic_pad,
    "dynamic_mixed": dynamic_mixed,
    "serving_unannotated": serving_unannotated,
    "train_with_stack": train_with_stack,
    "warmup_before_loop": warmup_before_loop,
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--only", nargs="*", choices=sorted(PROGRAMS))
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(1)
    truth_path = os.path.join(args.out_dir, "truth.json")
    truth = {"torch": torch.__version__, "python": platform.python_version(), "programs": {}}
    if args.only and os.path.exists(truth_path):
        with open(truth_path) as f:
            truth["programs"] = json.load(f)["programs"]
    for name in args.only or PROGRAMS:
        started = time.perf_counter()
        truth["programs"][name] = PROGRAMS[name](args.out_dir)
        size = os.path.getsize(os.path.join(args.out_dir, name + ".json.gz"))
        print(f"{name}: {time.perf_counter() - started:.1f} s, {size / 1e3:.0f} kB", flush=True)
    with open(truth_path, "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
