"""One training run of the tiny model, its saved checkpoints, and which of them the series uses.

The run's checkpoints stand in for an open model's public checkpoints (notebook 00). A data mixture
that alternates between small, large and mixed operands, then the uniform mix while the learning rate anneals
and a short large phase, makes knowledge both appear and disappear between checkpoints, like pre-training on
shifting data. Every size and the mixture come from `config.world()`. Which checkpoints were selected, and where they
live, is `helpers.world.checkpoints` (re-exported here for the notebooks).
"""
from __future__ import annotations

import copy
import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from helpers.cache import artifacts
from helpers import config
from helpers.world import loop, sums
from helpers.cache.artifacts import register
from helpers.evaluation.contrast import consecutive_pairs, flip_counts
from helpers.world.checkpoints import (  # noqa: F401 (re-exported)
    Checkpoints, checkpoint_path, get_checkpoints, saved_steps, step_name, window_changes, world,
)
from helpers.world.decoding import greedy, greedy_results
from helpers.world.model import ASSISTANT, BOS, EOS, USER, build_model, build_tokenizer, load_pretrained


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


def first_save(log: pd.DataFrame, first_below: float | None = None) -> int:
    """Index of the last save before monitor accuracy first reaches `first_below` (0 if it starts there).

    `first_below` defaults to `config.world().first_below`."""
    first_below = config.world().first_below if first_below is None else first_below
    reached = np.flatnonzero(log["accuracy"].to_numpy() >= first_below)
    return max(int(reached[0]) - 1, 0) if reached.size else 0


def select_checkpoints(log: pd.DataFrame, n: int, first_below: float | None = None, changes=None) -> list[int]:
    """Pick `n` saved steps by what the model knows, not by step number.

    The first pick is the last save before accuracy first reaches `first_below` (so the series starts
    from a checkpoint that knows little, wherever the seed put the learning curve), the last is the
    final save. In between, picks are spread evenly along the cumulative `changes` (one count per save:
    how many monitor answers flipped since the previous save), so stretches where knowledge moves get
    more checkpoints and a plateau does not fill up with near-copies. Without `changes`, they are
    spread evenly over the saves.
    """
    if n < 2:
        raise ValueError(f"need at least 2 checkpoints, got n={n}")
    steps = log["step"].to_numpy()
    start = first_save(log, first_below)
    last = len(steps) - 1
    if last - start + 1 < n:
        raise ValueError(f"only {last - start + 1} saves after the start; lower n or save more often")
    if changes is None:
        position = np.arange(len(steps), dtype=float)
    else:
        changes = np.asarray(changes, dtype=float)
        if changes.shape != steps.shape or np.isnan(changes).any() or (changes < 0).any():
            raise ValueError(f"changes must hold one non-negative count per save ({len(steps)}), got {changes!r}")
        position = np.cumsum(changes)
    targets = np.linspace(position[start], position[last], n)
    picks = [start]
    for j, target in enumerate(targets[1:], start=1):
        nearest = start + int(np.argmin(np.abs(position[start:] - target)))
        # strictly after the previous pick, and leaving room for the picks still to come
        picks.append(min(max(nearest, picks[-1] + 1), last - (n - 1 - j)))
    return [int(steps[i]) for i in picks]


def window_picks(log: pd.DataFrame, correct, n_training: int, n_evaluation: int, cut: float,
                 first_below: float | None = None, last_at_least: float | None = None,
                 enough: int | None = None, kinds=None, at_least: float = 0.0) -> tuple[list[int], list[int]]:
    """Training and evaluation steps: two windows of saves, picked by knowledge change in each.

    `correct` is (saves, test questions) booleans. The run from `first_save(log, first_below)` to the
    final save is cut at share `cut` of its saves: the training window before, the evaluation window
    after. Training picks are spread along the cumulative flips (`monitor_flips`); evaluation picks end
    at a save whose accuracy on `correct` reaches `last_at_least` (None: the final save), keep `enough`
    regressions between neighbours, so that "the later checkpoint is right" is wrong often, and move as
    many of `kinds` (accuracy per kind of question and save) both ways as the run allows
    (`evaluation_picks`); with `kinds`, the training picks are chosen the same way (from the window's
    first save to its last, no regressions asked), so that what moves in one window moves in the other.
    Where a window has too few saves the cut moves, and where the run learns too late for both, the
    start does. `at_least` is one threshold, or one per kind.
    """
    correct = _saves_by_questions(correct)
    total, needed = len(log), n_training + n_evaluation
    if total < needed or correct.shape[0] != total:
        raise ValueError(f"the run saved {total} checkpoints ({correct.shape[0]} scored) but {needed} are to be "
                         "picked; save more often or pick fewer")
    # A run that learns late starts earlier than `first_below` asks, so that every pick exists
    # (notebook 00's rules then report the first accuracy).
    start = min(first_save(log, first_below), total - needed)
    split = start + int(round(cut * (total - start)))
    split = min(max(split, start + n_training), total - n_evaluation)
    flips = monitor_flips(correct)
    if kinds is None:
        training = select_checkpoints(log.iloc[start:split], n_training, first_below=0.0,
                                      changes=flips[start:split])
    else:
        picks = evaluation_picks(correct[:split], n_training, earliest=start, enough=0,
                                 kinds=np.asarray(kinds)[:, :split], at_least=at_least, first=start)
        training = [int(log["step"].iloc[i]) for i in picks]
    ends = None if last_at_least is None else np.flatnonzero(correct.mean(axis=1) >= last_at_least)
    picks = evaluation_picks(correct, n_evaluation, earliest=split, ends=ends, enough=enough, kinds=kinds,
                             at_least=at_least)
    return training, [int(log["step"].iloc[i]) for i in picks]


def evaluation_picks(correct, n: int, earliest: int = 0, ends=None, enough: int | None = None,
                     kinds=None, at_least=0.0, first: int | None = None) -> list[int]:
    """Indices of `n` saves from `earliest` on for the evaluation window.

    `correct` is (saves, questions) booleans; `kinds` (optional) is (kinds of question, saves) accuracies,
    one row per kind whose knowledge must move both ways in the window (rise and fall by more than
    `at_least` between neighbouring picks). The last pick is one of `ends` (save indices; by default,
    and where none is given or possible, the final save): a run that has converged by its end barely
    forgets anything into its final save, so the window may stop at an earlier save that is accurate
    enough. Among the chains that keep at least `enough` regressions (right at a pick, wrong at the
    next) between every two neighbours, the pick moves the most kinds both ways, then ends latest
    (later saves know more), then keeps the most regressions, then starts earliest. Where no chain
    keeps `enough`, the chain that keeps the most regressions. Every chain is tried (up to about 660,000
    for the series' 40 saves). `at_least` is one threshold or one per kind; `first` (optional) fixes
    the first pick.
    """
    correct = _saves_by_questions(correct)
    last = correct.shape[0] - 1
    if n < 1 or last - earliest + 1 < n:
        raise ValueError(f"cannot pick {n} evaluation saves from saves {earliest}..{last}")
    if math.comb(last - earliest + 1, n) > 2_000_000:
        raise ValueError(f"too many chains of {n} among saves {earliest}..{last}; save less often or pick fewer")
    ends = [int(j) for j in (ends if ends is not None else []) if earliest + n - 1 <= j <= last] or [last]
    c = correct.astype(np.int32)
    lost = c @ (1 - c).T  # lost[i, j]: right at i, wrong at j
    chains = np.array([ch for ch in itertools.combinations(range(earliest, last + 1), n)
                       if ch[-1] in ends and (first is None or ch[0] == first)])
    if len(chains) == 0:
        raise ValueError(f"no chain of {n} saves from save {first} to one of {ends}")
    fewest = lost[chains[:, :-1], chains[:, 1:]].min(axis=1) if n > 1 else np.full(len(chains), np.inf)
    moved = np.zeros(len(chains), dtype=int)
    if kinds is not None and n > 1:
        step = np.diff(np.asarray(kinds, dtype=float)[:, chains], axis=2).round(3)  # (kinds, chains, n - 1)
        threshold = np.broadcast_to(np.asarray(at_least, dtype=float), (step.shape[0],))[:, None]
        moved = ((step.max(axis=2) > threshold) & (-step.min(axis=2) > threshold)).sum(axis=0)
    good = fewest >= enough if enough is not None else np.zeros(len(chains), dtype=bool)
    order = -np.arange(len(chains))  # the last key of all: the first chain in order
    if good.any():
        keys = (order, -chains[:, 0], fewest, chains[:, -1], moved, good)
    else:
        keys = (order, -chains[:, 0], chains[:, -1], moved, fewest)
    return [int(i) for i in chains[np.lexsort(keys)[-1]]]


def _saves_by_questions(correct) -> np.ndarray:
    correct = np.asarray(correct, dtype=bool)
    if correct.ndim != 2 or correct.shape[0] == 0:
        raise ValueError(f"correct must be a (saves, questions) boolean array, got shape {correct.shape}")
    return correct


def monitor_flips(correct: np.ndarray) -> np.ndarray:
    """Per save, how many monitor questions changed correctness since the previous save (0 for the first).

    `correct` is (n_saves, n_questions) booleans.
    """
    correct = _saves_by_questions(correct)
    return np.concatenate([[0], (correct[1:] != correct[:-1]).sum(axis=1)])


@register("world")
def _build_world(folder: Path) -> dict:
    """Train the model and save every checkpoint (the `selection` artifact picks the ones used)."""
    return {"log": train_run(folder)}


@register("selection")
def _build_selection(folder: Path) -> dict:
    """Score every save on the whole test and transfer_test splits, then pick the checkpoints the series uses.

    The whole splits, not the monitor: the rules (`world_rules`) count regressions and contrast sets on
    them, and a 1,000-question sample misjudged them (the 57 regressions that a pick made on the sample
    left between two neighbours of the seed-0 run, where the whole split allowed 132). The evaluation
    picks move as many operand ranges and subtraction both ways as the run allows (`evaluation_picks`).
    About two minutes.
    """
    s, log = config.world(), artifacts.load_or_build("world")["log"]
    rules = dict(s.rules)
    test, sub = sums.split("test"), sums.split("transfer_test")
    saves = artifacts.folder("world") / "checkpoints"
    correct, sub_correct = [], []
    for step in tqdm(log["step"], desc="scoring saves", mininterval=2):
        model, tokenizer = load_pretrained(saves / step_name(int(step)))
        correct.append(greedy(model, tokenizer, test, progress=False)["correct"].to_numpy())
        sub_correct.append(greedy(model, tokenizer, sub, progress=False)["correct"].to_numpy())
    correct, sub_correct = np.array(correct), np.array(sub_correct)  # (saves, questions)
    ranges = sums.operand_range(test["a"], test["b"])
    family = sums.in_mistake_family(test["a"], test["b"])
    kinds = [correct[:, ranges == r].mean(axis=1) for r in sums.RANGES] + [sub_correct.mean(axis=1)]
    kinds.append(correct[:, family].mean(axis=1))
    at_least = [rules["both_ways_at_least"]] * (len(kinds) - 1) + [rules["mistake_both_ways_at_least"]]
    changes = monitor_flips(correct)
    training, evaluation = window_picks(log, correct, s.n_training_checkpoints,
                                        s.n_checkpoints - s.n_training_checkpoints, s.evaluation_start,
                                        last_at_least=rules["last_at_least"],
                                        enough=round(rules["regressions_per_5000"] * correct.shape[1] / 5000),
                                        kinds=kinds, at_least=at_least)
    steps = training + evaluation
    return {"selected": [step_name(x) for x in steps], "n_training": s.n_training_checkpoints,
            "changes": pd.Series(changes, index=log["step"], name="test answers flipped since the previous save")}


def world_rules() -> dict:
    """The rules the series needs from its world, measured on the selected checkpoints (notebook 00).

    Returns `values`: name -> (measured value, whether the rule holds), for the first and last test
    accuracy, the evaluation pairs with a contrast set of at least `config.contrast().min_size` (most of
    them), the fewest regressions between neighbouring evaluation checkpoints, and the evaluation pairs
    whose subtraction contrast set reaches `config.contrast().min_size_transfer` (at least one: notebook
    06's domain transfer); and `windows`: `checkpoints.window_changes` of each operand range and
    subtraction inside the training and the evaluation window, and of the mistake family
    (`sums.in_mistake_family`), "both ways" when accuracy rises and falls by more than `both_ways_at_least`
    (the mistake family: `mistake_both_ways_at_least`, so that checkpoints are really wrong and then
    right again), and "needed" where an experiment relies on it: every row but
    subtraction in the training window (no confidence method trains on subtraction answers; notebook 06
    judges on them at the evaluation checkpoints only). Thresholds: `config.world().rules`.
    """
    ck, rules, c = get_checkpoints(), dict(config.world().rules), config.contrast()
    test, sub = greedy_results("test"), greedy_results("transfer_test")
    accuracy = test.groupby("checkpoint", sort=False)["correct"].mean()
    flips = flip_counts(test, ck.evaluation)
    neighbours = flips.merge(pd.DataFrame(consecutive_pairs(ck.evaluation), columns=["ckpt_i", "ckpt_j"]))
    need_regressions = max(1, round(rules["regressions_per_5000"] * config.splits().n_test / 5000))
    big, big_sub = (int((flips["contrast"] >= c.min_size).sum()),
                    int((flip_counts(sub, ck.evaluation)["contrast"] >= c.min_size_transfer).sum()))
    values = {
        f"first accuracy (< {rules['first_below']})":
            (round(float(accuracy[ck.all[0]]), 3), accuracy[ck.all[0]] < rules["first_below"]),
        f"last accuracy (>= {rules['last_at_least']})":
            (round(float(accuracy[ck.all[-1]]), 3), accuracy[ck.all[-1]] >= rules["last_at_least"]),
        f"evaluation pairs with >= {c.min_size} contrast questions (most)":
            (f"{big}/{len(flips)}", big > len(flips) / 2),
        f"fewest regressions between neighbouring evaluation checkpoints (>= {need_regressions})":
            (int(neighbours["regressions"].min()), neighbours["regressions"].min() >= need_regressions),
        f"evaluation pairs with >= {c.min_size_transfer} subtraction contrast questions (>= 1)":
            (big_sub, big_sub >= 1),
    }
    questions = sums.split("test")
    ranges = sums.operand_range(questions["a"], questions["b"])
    groups = {f"{r} operands": questions["question_id"][ranges == r] for r in sums.RANGES}
    family = f"{sums.MISTAKE_FAMILY} family"
    groups[family] = questions["question_id"][sums.in_mistake_family(questions["a"], questions["b"])]
    windows = {"training": ck.training, "evaluation": ck.evaluation}
    at_least = {g: rules["both_ways_at_least"] for g in [*groups, "subtraction"]}
    at_least[family] = rules["mistake_both_ways_at_least"]
    table = pd.concat([window_changes(test, windows, groups, at_least),
                       window_changes(sub, windows, {"subtraction": sums.split("transfer_test")["question_id"]},
                                      at_least)])
    order = [(w, g) for w in windows for g in [*groups, "subtraction"]]
    table = table.loc[order]
    table["needed"] = [not (w == "training" and g == "subtraction") for w, g in order]
    return {"values": {k: (v, bool(ok)) for k, (v, ok) in values.items()}, "windows": table}
