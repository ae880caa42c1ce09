"""One training run of the tiny model, its saved checkpoints, and which of them the series uses.

The run's checkpoints stand in for an open model's public checkpoints (notebook 00). A data mixture
that alternates between small, large and mixed operands, then the uniform mix while the learning rate anneals
and a short large phase, makes knowledge both appear and disappear between checkpoints, like pre-training on
shifting data. Every size and the mixture come from `config.world()`. Which saves the series studies is
`helpers.world.selection`; the cached run is built by `helpers.pipeline.training_run`.
"""
from __future__ import annotations

import copy
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from helpers import config
from helpers.world import loop, sums
from helpers.world.checkpoints import step_name
from helpers.world.decoding import greedy
from helpers.world.model import ASSISTANT, BOS, EOS, USER, build_model, build_tokenizer


# Control characters that stand for the special tokens while a batch is encoded by table look-up.
_MARKS = {"\x01": BOS, "\x02": USER, "\x03": ASSISTANT, "\x04": EOS}


def _byte_table(tokenizer) -> np.ndarray:
    """Token id of every ASCII byte: the vocabulary's characters, the marks of `_MARKS`, unknown elsewhere."""
    table = getattr(tokenizer, "_helpers_byte_table", None)
    if table is None:
        table = np.full(256, tokenizer.unk_token_id, dtype=np.int64)
        for token, i in tokenizer.get_vocab().items():
            if len(token) == 1 and ord(token) < 128:
                table[ord(token)] = i
        for mark, token in _MARKS.items():
            table[ord(mark)] = tokenizer.convert_tokens_to_ids(token)
        tokenizer._helpers_byte_table = table
    return table


def encode_training_pairs(tokenizer, pairs: list[tuple[str, ...]]) -> dict[str, torch.Tensor]:
    """Right-padded (prompt + reply + end mark) ids; the loss sees only the reply and end mark.

    Each conversation is (question, answer) or longer (`helpers.world.sums.training_batch`): every turn but
    the last makes the prompt (`helpers.world.model.conversation_prompt`), the last is the reply. The ids
    are those the character-level tokenizer gives (tests/test_model.py checks it), found by one table
    look-up over the batch's bytes: calling the tokenizer was 15% of a training step."""
    bos, user, assistant, eos = _MARKS
    prompts = []
    for turns in pairs:
        text = bos
        for i, turn in enumerate(turns[:-1]):
            text += f"{user}{turn}{assistant}" if i % 2 == 0 else f"{turn}{eos}"
        prompts.append(text)
    texts = [p + turns[-1] + eos for p, turns in zip(prompts, pairs)]
    lengths = np.array([len(t) for t in texts])
    prompt_len = np.array([len(p) for p in prompts])
    width = int(lengths.max())
    try:
        data = "".join(texts).encode("ascii")
    except UnicodeEncodeError as error:
        raise ValueError(f"training conversations are ASCII text; found {error.object[error.start]!r}") from None
    ids = _byte_table(tokenizer)[np.frombuffer(data, dtype=np.uint8)]
    rows = np.repeat(np.arange(len(texts)), lengths)
    cols = np.arange(len(ids)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    input_ids = np.full((len(texts), width), tokenizer.pad_token_id, dtype=np.int64)
    input_ids[rows, cols] = ids
    positions = np.arange(width)
    attention_mask = positions < lengths[:, None]
    labels = np.where(attention_mask & (positions >= prompt_len[:, None]), input_ids, -100)
    return {"input_ids": torch.from_numpy(input_ids), "labels": torch.from_numpy(labels),
            "attention_mask": torch.from_numpy(attention_mask.astype(np.int64))}


def lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Summed next-token cross-entropy; logits (B, T, V), labels (B, T) with -100 where ignored."""
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100, reduction="sum"
    )


def training_step_loss(model, tokenizer, pairs: list[tuple[str, str]], n_buckets: int = 4) -> torch.Tensor:
    """Mean answer-token loss of a batch, computed in length buckets to waste less padding.

    Sorting by length and running a few narrower forward passes is much cheaper on CPU than padding
    the whole batch to its longest phrasing. Gradients accumulate as if it were one batch.
    """
    pairs = sorted(pairs, key=lambda turns: sum(len(t) for t in turns))
    size = math.ceil(len(pairs) / n_buckets)
    chunks = [encode_training_pairs(tokenizer, pairs[i : i + size]) for i in range(0, len(pairs), size)]
    n_tokens = sum(int((c["labels"][:, 1:] != -100).sum()) for c in chunks)
    total = 0.0
    for c in chunks:
        logits = model(input_ids=c["input_ids"], attention_mask=c["attention_mask"]).logits
        loss = lm_loss(logits, c["labels"]) / n_tokens
        loss.backward()
        total += loss.item()
    return torch.tensor(total)


def lr_factor(step: int, s) -> float:
    """Learning-rate multiplier: linear warm-up, constant, then a cosine anneal from `lr_decay_start`.

    `s` has train_steps, warmup_steps, lr_decay_start and min_lr_ratio (`config.world()`)."""
    warm = min(1.0, (step + 1) / s.warmup_steps)
    t = (step / s.train_steps - s.lr_decay_start) / max(1.0 - s.lr_decay_start, 1e-9)
    if t <= 0:
        return warm
    return warm * (s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(t, 1.0))))


def _monitor(model, tokenizer, monitor: pd.DataFrame) -> dict[str, float]:
    model.eval()
    res = greedy(model, tokenizer, monitor, progress=False)
    model.train()
    ranges = sums.operand_range(monitor["a"], monitor["b"])
    correct = res["correct"].to_numpy()
    family = sums.in_mistake_family(monitor["a"], monitor["b"])
    return {"accuracy": correct.mean(), **{f"accuracy_{r}": correct[ranges == r].mean() for r in sums.RANGES},
            "accuracy_mistake_family": correct[family].mean()}


def train_run(folder: Path, seed: int | None = None, stop_after: int | None = None, resume: dict | None = None,
              keep_state: bool = False):
    """Train from scratch (sizes from `config.world()`), saving a checkpoint every `save_every` steps; returns the log.

    `stop_after` ends the run after that many steps of the same schedule (the training-prefix check of
    tests/test_shipped_world.py compares such a prefix with the shipped run). With `keep_state` it returns
    (log, state): the model, optimizer, scheduler and data-stream states after the last step. `resume` (such
    a state) continues from there, under the settings in force now, so a run can branch at a step into
    endings with other phases (tests/benchmarks/world_sweep.py --branch-at); a branch whose settings equal the
    run's reproduces it bit for bit (tests/test_robustness.py)."""
    s = config.world()
    seed = s.seed if seed is None else seed
    config.set_seed(seed)
    config.set_threads()
    tokenizer = build_tokenizer()
    model = build_model(tokenizer)
    optim = torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=s.weight_decay, betas=(0.9, 0.98))
    sched = torch.optim.lr_scheduler.LambdaLR(optim, lambda step: lr_factor(step, s))
    rng = np.random.default_rng([seed, 7])
    held_out = sums.held_out_ids()
    monitor = sums.split("test").iloc[: s.n_monitor]
    log, window, first = [], [], 1
    if resume is not None:
        model.load_state_dict(resume["model"])
        optim.load_state_dict(resume["optimizer"])
        sched.load_state_dict(resume["scheduler"])
        rng.bit_generator.state = resume["stream"]
        window, first = list(resume["window"]), resume["step"] + 1
    last = min(s.train_steps, stop_after or s.train_steps)

    def batches():
        for step in range(first, last + 1):
            yield sums.training_batch(rng, s.batch_size, sums.phase_at(step - 1, s.train_steps), held_out,
                                      sums.mistaken_at(step - 1, s.train_steps))

    def after_step(i: int, loss: float) -> None:
        step = first + i - 1
        window.append(loss)
        if step % s.save_every == 0:
            model.save_pretrained(folder / "checkpoints" / step_name(step))
            tokenizer.save_pretrained(folder / "checkpoints" / step_name(step))
            log.append({"step": step, "phase": sums.phase_at(step - 1, s.train_steps),
                        "taught wrong": sums.mistaken_at(step - 1, s.train_steps), "loss": float(np.mean(window)),
                        **_monitor(model, tokenizer, monitor)})
            window.clear()

    loop.train(model, optim, batches(), lambda pairs: training_step_loss(model, tokenizer, pairs), scheduler=sched,
               clip_norm=1.0, after_step=after_step, total=max(last - first + 1, 0), desc="training")
    log = pd.DataFrame(log)
    if not keep_state:
        return log
    state = {"step": last, "model": {k: v.clone() for k, v in model.state_dict().items()},
             "optimizer": copy.deepcopy(optim.state_dict()), "scheduler": sched.state_dict(),
             "stream": rng.bit_generator.state, "window": list(window)}
    return log, state


