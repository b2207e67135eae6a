#!/usr/bin/env python3
"""Record real GPU loops with the PyTorch profiler, as test material for the detector.

Each program below runs its own loop under ``torch.profiler.profile`` with a schedule and calls
``prof.step()`` once per iteration of that loop, so the trace's ``ProfilerStep#N`` annotations are
the ground truth: ``stream_split.testing.accuracy`` strips them and checks the split against them.
What each loop varies is what the detector must tolerate (issue 8) and what must be cut online
(issue 9):

``train_eval``
    A transformer-encoder classifier trained from a ``DataLoader`` (so ``enumerate(DataLoader)``
    opens each step), bf16 autocast, AdamW, ``loss.item()`` every step, an eval pass after every
    3rd step and a checkpoint (``state_dict`` copied to host) after every 4th.
``train_wrapped``
    A small MLP step reached through three levels of the user's own Python functions, recorded
    ``with_stack=True`` so ``python_function`` events open the step.
``serving_graphs`` / ``serving_graphs_annotated``
    A toy decoder served by a scheduler loop: each step admits 0-3 arriving requests (prefill,
    eager kernels), decodes one token for the running ones (CUDA graph replay, one graph per batch
    bucket), or idles with a short poll when there is nothing to do.  The annotated variant names
    its steps as SGLang does (``step[DECODE bs=4]``, ``step[EXTEND bs=2 toks=96]``,
    ``step[MIXED ...]``).  The phase of every step is written to the truth file.
``rollout``
    An RL step: a rollout of variable length (sampling with one ``.item()`` per token) before a
    policy update.
``dynamic_shapes``
    Variable batch size and sequence length; a padded path or a bucketed path chosen per step.

Run on a machine with a CUDA GPU (``--device cpu`` is a dry run of the same programs, CPU activity
only, no CUDA graphs)::

    python scripts/record_cuda_traces.py OUT_DIR [--device cuda|cpu] [--only NAME ...]

Writes ``OUT_DIR/<name>.json.gz`` per program and ``OUT_DIR/truth.json``: per program, per
``ProfilerStep`` number, what that step did (phase, batch, tokens, eval, checkpoint).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import time

import torch
from torch import nn
from torch.nn import functional as F
from torch.profiler import ProfilerActivity, profile, record_function, schedule

WAIT, WARMUP = 1, 1


class Recorder:
    """One profiled loop: ``step()`` per iteration of the program's loop; ``note()`` records truth."""

    def __init__(self, out_dir: str, name: str, device: str, active: int, **profile_kwargs):
        self.path = os.path.join(out_dir, name + ".json.gz")
        self.name = name
        self.active = active
        activities = [ProfilerActivity.CPU]
        if device == "cuda":
            activities.append(ProfilerActivity.CUDA)
        self.prof = profile(
            activities=activities,
            schedule=schedule(wait=WAIT, warmup=WARMUP, active=active, repeat=1),
            on_trace_ready=lambda p: p.export_chrome_trace(self.path),
            record_shapes=True,
            **profile_kwargs,
        )
        self.truth: dict[int, dict] = {}
        self.steps = WAIT + WARMUP + active + 1

    def __enter__(self):
        self.prof.__enter__()
        return self

    def __exit__(self, *exc):
        return self.prof.__exit__(*exc)

    def note(self, **facts) -> None:
        self.truth.setdefault(self.prof.step_num, {}).update(facts)

    def step(self) -> None:
        self.prof.step()

    def recorded_truth(self) -> dict:
        first = WAIT + WARMUP
        return {str(n): facts for n, facts in self.truth.items() if first <= n < first + self.active}


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


# --------------------------------------------------------------------------- training


class EncoderClassifier(nn.Module):
    def __init__(self, vocab=2000, d=256, layers=2, classes=10):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=4 * d, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, classes)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def train_eval(out_dir: str, device: str) -> dict:
    torch.manual_seed(0)
    model = EncoderClassifier().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.utils.data.TensorDataset(torch.randint(0, 2000, (32 * 64, 64)),
                                          torch.randint(0, 10, (32 * 64,)))
    loader = torch.utils.data.DataLoader(data, batch_size=32, shuffle=True, num_workers=0,
                                         pin_memory=device == "cuda")
    held_out = torch.randint(0, 2000, (64, 64), device=device)
    rec = Recorder(out_dir, "train_eval", device, active=9)
    with rec:
        for i, (tokens, labels) in enumerate(loader):
            if i == rec.steps:
                break
            tokens = tokens.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            with torch.autocast(device, dtype=torch.bfloat16):
                loss = F.cross_entropy(model(tokens), labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()
            evaluated = i % 3 == 2
            if evaluated:
                model.eval()
                with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16):
                    for chunk in held_out.split(32):
                        model(chunk).argmax(dim=1).sum().item()
                model.train()
            checkpointed = i % 4 == 3
            if checkpointed:
                torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, io.BytesIO())
            rec.note(eval=evaluated, checkpoint=checkpointed)
            rec.step()
    return rec.recorded_truth()


def train_wrapped(out_dir: str, device: str) -> dict:
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(),
                          nn.Linear(512, 10)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)

    def forward_backward(x, y):
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss

    def optimise(x, y):
        loss = forward_backward(x, y)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def training_step(step):
        x = torch.randn(64, 128, device=device)
        y = torch.randint(0, 10, (64,), device=device)
        return optimise(x, y).item()

    rec = Recorder(out_dir, "train_wrapped", device, active=5, with_stack=True)
    with rec:
        for step in range(rec.steps):
            training_step(step)
            rec.note(wrapper_depth=3)
            rec.step()
    return rec.recorded_truth()


def dynamic_shapes(out_dir: str, device: str) -> dict:
    torch.manual_seed(2)
    d = 256
    model = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)).to(device)
    head = nn.Linear(d, 1).to(device)
    opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=1e-3)
    shapes = [(8, 40), (64, 64), (16, 100), (32, 96), (48, 17), (24, 128), (8, 32), (56, 72),
              (40, 50), (16, 64), (64, 120)]
    rec = Recorder(out_dir, "dynamic_shapes", device, active=8)
    with rec:
        for batch, seq in shapes[:rec.steps]:
            x = torch.randn(batch, seq, d, device=device)
            bucketed = seq % 32 == 0
            if bucketed:
                out = model(x)
                score = head(out).mean(dim=1)
            else:
                padded = (seq + 31) // 32 * 32
                x = F.pad(x, (0, 0, 0, padded - seq))
                mask = torch.arange(padded, device=device) < seq
                out = model(x) * mask[None, :, None]
                score = head(out).sum(dim=1) / seq
            loss = F.mse_loss(score, torch.zeros_like(score))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            loss.item()
            rec.note(batch=batch, seq=seq, path="bucketed" if bucketed else "padded")
            rec.step()
    return rec.recorded_truth()


def rollout(out_dir: str, device: str) -> dict:
    torch.manual_seed(3)
    policy = nn.Sequential(nn.Linear(64, 256), nn.Tanh(), nn.Linear(256, 256), nn.Tanh(),
                           nn.Linear(256, 8)).to(device)
    opt = torch.optim.Adam(policy.parameters(), lr=3e-4)
    lengths = [3, 9, 5, 12, 4, 7, 10, 6, 8, 2, 11]
    rec = Recorder(out_dir, "rollout", device, active=8)
    with rec:
        for length in lengths[:rec.steps]:
            state = torch.randn(16, 64, device=device)
            states, actions, rewards = [], [], []
            with torch.no_grad():
                for _ in range(length):
                    probs = F.softmax(policy(state), dim=-1)
                    action = torch.multinomial(probs, 1).squeeze(1)
                    rewards.append((action == 0).float().mean().item())
                    states.append(state)
                    actions.append(action)
                    state = torch.tanh(state + 0.1 * torch.randn_like(state))
            s = torch.cat(states)
            a = torch.cat(actions)
            ret = torch.tensor(rewards, device=device).repeat_interleave(16)
            logp = F.log_softmax(policy(s), dim=-1).gather(1, a[:, None]).squeeze(1)
            loss = -(logp * (ret - ret.mean())).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            rec.note(rollout=length)
            rec.step()
    return rec.recorded_truth()


# --------------------------------------------------------------------------- serving


class ToyDecoder(nn.Module):
    """Embedding, a few MLP blocks with residuals, logits: enough kernels per token to matter."""

    def __init__(self, vocab=4000, d=512, blocks=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
            for _ in range(blocks))
        self.logits = nn.Linear(d, vocab)

    def forward(self, tokens):
        h = self.embed(tokens)
        for block in self.blocks:
            h = h + block(h)
        return self.logits(h[..., -1, :] if h.dim() == 3 else h)


class GraphDecoder:
    """One captured CUDA graph per batch bucket for a single decode token (eager on CPU)."""

    BUCKETS = (1, 2, 4, 8)

    def __init__(self, model: ToyDecoder, device: str):
        self.model = model
        self.device = device
        self.graphs = {}
        if device != "cuda":
            return
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for bs in self.BUCKETS:
                tokens = torch.zeros(bs, dtype=torch.long, device=device)
                for _ in range(3):
                    model(tokens)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    out = model(tokens)
                self.graphs[bs] = (graph, tokens, out)
        torch.cuda.current_stream().wait_stream(stream)

    def bucket(self, n: int) -> int:
        return next(b for b in self.BUCKETS if b >= n)

    def __call__(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[0]
        if not self.graphs:
            with torch.no_grad():
                return self.model(tokens)
        graph, static_in, static_out = self.graphs[self.bucket(n)]
        static_in[:n].copy_(tokens)
        graph.replay()
        return static_out[:n]


# Arrivals per scheduler step: (prompt_length, new_tokens) of each request that arrives.
ARRIVALS = {0: [(48, 5)], 1: [(32, 4), (64, 6)], 5: [(24, 3)], 9: [(96, 4)], 10: [(40, 2)],
            16: [(56, 5), (16, 3), (80, 4)], 22: [(64, 2)], 27: [(32, 3)]}
SERVING_STEPS = 30


def serving(out_dir: str, device: str, annotated: bool) -> dict:
    torch.manual_seed(4)
    model = ToyDecoder().to(device).eval()
    decode = GraphDecoder(model, device)
    name = "serving_graphs_annotated" if annotated else "serving_graphs"
    rec = Recorder(out_dir, name, device, active=SERVING_STEPS - WAIT - WARMUP - 1)
    running: list[list] = []  # [last_token, tokens_left]
    with rec, torch.no_grad():
        for step in range(SERVING_STEPS):
            arriving = ARRIVALS.get(step, [])
            decoding = len(running)
            if arriving and decoding:
                phase = "mixed"
            elif arriving:
                phase = "prefill"
            elif decoding:
                phase = "decode"
            else:
                phase = "idle"
            label = None
            if annotated and phase != "idle":
                toks = sum(p for p, _ in arriving)
                kind = {"prefill": "EXTEND", "decode": "DECODE", "mixed": "MIXED"}[phase]
                label = f"step[{kind} bs={len(arriving) + decoding}" + (f" toks={toks}]" if toks else "]")
            ctx = record_function(label) if label else contextlib.nullcontext()
            with ctx:
                if phase == "idle":
                    time.sleep(0.003)  # the scheduler polls its queue
                new = []
                for prompt, budget in arriving:
                    prompt_tokens = torch.randint(0, 4000, (1, prompt), device=device)
                    first = model(prompt_tokens).argmax(dim=-1)
                    new.append([first, budget])
                if running:
                    tokens = torch.cat([r[0] for r in running])
                    nxt = decode(tokens).argmax(dim=-1)
                    nxt_host = nxt.cpu()  # the server needs the tokens on the host
                    for r, tok in zip(running, nxt_host):
                        r[0] = tok.view(1).to(device)
                        r[1] -= 1
                    running = [r for r in running if r[1] > 0]
                for r in new:
                    r[0].cpu()
                running.extend(new)
            rec.note(phase=phase, prefill_requests=len(arriving), decode_batch=decoding,
                     prefill_tokens=sum(p for p, _ in arriving), annotation=label)
            rec.step()
    return rec.recorded_truth()


PROGRAMS = {
    "train_eval": train_eval,
    "train_wrapped": train_wrapped,
    "serving_graphs": lambda out, dev: serving(out, dev, annotated=False),
    "serving_graphs_annotated": lambda out, dev: serving(out, dev, annotated=True),
    "rollout": rollout,
    "dynamic_shapes": dynamic_shapes,
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--only", nargs="*", choices=sorted(PROGRAMS))
    args = parser.parse_args(argv)
    os.makedirs(args.out_dir, exist_ok=True)
    truth = {"torch": torch.__version__, "python": platform.python_version(),
             "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None, "programs": {}}
    for name in args.only or PROGRAMS:
        started = time.perf_counter()
        truth["programs"][name] = PROGRAMS[name](args.out_dir, args.device)
        sync(args.device)
        size = os.path.getsize(os.path.join(args.out_dir, name + ".json.gz"))
        print(f"{name}: {time.perf_counter() - started:.1f} s, {size / 1e6:.2f} MB", flush=True)
    with open(os.path.join(args.out_dir, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
