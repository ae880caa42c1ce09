"""Reading a verbalized-confidence adapter: the stated and the expected confidence after given answers.

Two readouts of the same adapted model (notebook 03), on the checkpoint's own greedy answers:

- **stated**: decode the continuation greedily and parse the percentage with `parse_confidence`;
  a continuation that does not parse is counted, never guessed;
- **expected**: teacher-force ``"\\nConfidence: "`` and score the eleven levels "0%" .. "100%"; the
  expected level under the model's distribution over them (renormalized over the eleven).

Both come from one forward pass per batch (`score_levels`); only rows whose greedy continuation
leaves the marker-level-end path are generated token by token. Used by helpers.confidence.verbalized.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from helpers.world.decoding import check_questions
from helpers.world.model import chat_prompt
from .verbalized_text import LEVELS, MARKER, parse_confidence

STATED_MAX_TOKENS = len(MARKER) + len("100%") + 4  # room for the longest level, its end mark and a little slack


def check_answers(questions: pd.DataFrame, answers) -> list[str]:
    """`answers` as a list of reply texts, one per question, or a ValueError saying what to pass."""
    check_questions(questions)
    answers = list(answers)
    if len(answers) != len(questions):
        raise ValueError(f"got {len(answers)} answers for {len(questions)} questions; "
                         "pass one answer text per question")
    if not all(isinstance(a, str) for a in answers):
        raise ValueError("answers must be texts (the `text` column of decoding.greedy), not parsed numbers")
    return answers


def _encode_scoring_batch(tokenizer, prefixes: list[str]):
    """Inputs of one scoring pass: each left-padded `prefix + MARKER`, then the eleven level strings.

    Returns (input_ids, 4D additive attention mask, position_ids, n_prefix, segment starts, level ids).
    Every level string "d%" sees the prefix and its own earlier tokens only, at the positions it would
    have right after the prefix, so one pass scores all eleven as if each had been fed alone.
    """
    tokenizer.padding_side = "left"
    enc = tokenizer([p + MARKER for p in prefixes], return_tensors="pt", padding=True, add_special_tokens=False)
    ids, mask = enc["input_ids"], enc["attention_mask"].bool()
    batch, n_prefix = ids.shape
    level_ids = [tokenizer(f"{level}%", add_special_tokens=False)["input_ids"] for level in LEVELS]
    starts = np.cumsum([0] + [len(x) for x in level_ids])  # offset of each level string after the prefix
    n_cont = int(starts[-1])
    total = n_prefix + n_cont
    flat = torch.tensor([t for x in level_ids for t in x])
    input_ids = torch.cat([ids, flat.expand(batch, n_cont)], dim=1)
    allowed = torch.zeros(batch, total, total, dtype=torch.bool)
    allowed[:, :n_prefix, :n_prefix] = torch.ones(n_prefix, n_prefix, dtype=torch.bool).tril() & mask[:, None, :]
    allowed[:, n_prefix:, :n_prefix] = mask[:, None, :]
    for i, x in enumerate(level_ids):
        a, b = n_prefix + starts[i], n_prefix + starts[i + 1]
        allowed[:, a:b, a:b] = torch.ones(len(x), len(x), dtype=torch.bool).tril()
    allowed |= torch.eye(total, dtype=torch.bool)  # padding rows attend to themselves (no empty softmax)
    additive = torch.zeros(batch, 1, total, total)
    additive.masked_fill_(~allowed[:, None], torch.finfo(additive.dtype).min)
    prefix_pos = (mask.long().cumsum(1) - 1).clamp(min=0)
    offsets = torch.tensor([o for x in level_ids for o in range(len(x))])
    position_ids = torch.cat([prefix_pos, prefix_pos[:, -1:] + 1 + offsets], dim=1)
    return input_ids, additive, position_ids, n_prefix, starts, level_ids


@torch.no_grad()
def score_levels(model, tokenizer, prefixes: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """Score the eleven stated levels after each prefix (a chat prompt followed by an answer).

    Returns (logprobs, greedy): logprobs (B, 11) are the log-probabilities of "0%" .. "100%" after
    `prefix + "\\nConfidence: "` (teacher forcing); greedy (B,) is the index of the level that greedy
    decoding after the bare prefix would produce, marker, digits, "%" and end mark included, or -1
    if greedy decoding leaves that path (then only real generation can tell what it says).
    Both come from one forward pass per batch (see `_encode_scoring_batch`).
    """
    input_ids, additive, position_ids, n_prefix, starts, level_ids = _encode_scoring_batch(tokenizer, prefixes)
    logits = model(input_ids=input_ids, attention_mask=additive, position_ids=position_ids).logits.float()
    logp = torch.log_softmax(logits, dim=-1)  # position t predicts token t+1
    top = logits.argmax(-1)
    batch = len(prefixes)
    # Greedy follows the marker if every marker token is the argmax after the tokens before it; the
    # prefixes are left-padded, so the marker is the last n_marker tokens of every row.
    marker = input_ids[0, n_prefix - len(tokenizer(MARKER, add_special_tokens=False)["input_ids"]):n_prefix]
    on_path = (top[:, n_prefix - 1 - len(marker):n_prefix - 1] == marker).all(dim=1)
    out = torch.zeros(batch, len(LEVELS))
    greedy = torch.full((batch,), -1, dtype=torch.long)
    eos = tokenizer.eos_token_id
    for j, ids in enumerate(level_ids):
        # the level's first token follows the prefix; each later one follows the level's previous token
        where = [n_prefix - 1] + [n_prefix + int(starts[j]) + t for t in range(len(ids) - 1)]
        out[:, j] = sum(logp[:, w, tok] for w, tok in zip(where, ids))
        follows = on_path.clone()
        for w, tok in zip(where, ids):
            follows &= top[:, w] == tok
        follows &= top[:, n_prefix + int(starts[j]) + len(ids) - 1] == eos  # then the end mark
        greedy[follows & (greedy < 0)] = j
    return out, greedy


def level_logprobs(model, tokenizer, prefixes: list[str]) -> torch.Tensor:
    """(B, 11) log-probabilities of "0%" .. "100%" after each `prefix + "\\nConfidence: "`."""
    return score_levels(model, tokenizer, prefixes)[0]


def expected_level(logprobs: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(expected stated level in [0, 1], probability mass on the eleven levels) from `level_logprobs`."""
    levels = torch.tensor(LEVELS, dtype=torch.float64) / 100
    lp = logprobs.double()
    weights = torch.softmax(lp, dim=1)
    return (weights @ levels).numpy(), lp.logsumexp(dim=1).exp().numpy()


@torch.no_grad()
def generate_continuations(model, tokenizer, prefixes: list[str], max_new_tokens: int = STATED_MAX_TOKENS) -> list[str]:
    """Greedy continuations of each prefix (chat prompt + answer), cut at the end mark."""
    tokenizer.padding_side = "left"
    enc = tokenizer(prefixes, return_tensors="pt", padding=True, add_special_tokens=False)
    eos = tokenizer.eos_token_id
    seqs = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens,
                          pad_token_id=tokenizer.pad_token_id, eos_token_id=eos)
    new = seqs[:, enc["input_ids"].shape[1]:].tolist()
    return [tokenizer.decode(r[: r.index(eos)] if eos in r else r, skip_special_tokens=True) for r in new]


@torch.no_grad()
def read_confidence(model, tokenizer, questions: pd.DataFrame, answers, batch_size: int = 128,
                    progress: bool = True, desc: str = "verbalized") -> pd.DataFrame:
    """Both readouts of an adapted model after given answers, one row per question.

    Columns: question_id, stated_text (the greedy continuation after the answer), stated (parsed by
    `parse_confidence`, in [0, 1], NaN if it did not parse), parsed, expected (expected level under
    the model's distribution over the eleven levels, renormalized), likeliest (the most probable of
    the eleven levels), level_mass (their total probability after the marker, before renormalizing).

    The greedy continuation is read off the scoring pass when greedy decoding says the marker, a
    level and the end mark (the usual case); only the other rows are generated token by token.
    """
    answers = check_answers(questions, answers)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    prefixes = [chat_prompt(q) + a for q, a in zip(questions["question"], answers)]
    logprobs, texts = [], []
    for start in tqdm(range(0, len(prefixes), batch_size), desc=desc, disable=not progress, leave=False):
        scores, greedy = score_levels(model, tokenizer, prefixes[start:start + batch_size])
        logprobs.append(scores)
        texts += [f"{MARKER}{LEVELS[j]}%" if j >= 0 else None for j in greedy.tolist()]
    off_path = [i for i, t in enumerate(texts) if t is None]
    for start in range(0, len(off_path), 4 * batch_size):  # the rest, decoded token by token
        some = off_path[start:start + 4 * batch_size]
        for i, text in zip(some, generate_continuations(model, tokenizer, [prefixes[i] for i in some])):
            texts[i] = text
    stated = [parse_confidence(t) for t in texts]
    logprobs = torch.cat(logprobs)
    expected, mass = expected_level(logprobs)
    return pd.DataFrame({
        "question_id": questions["question_id"].to_numpy(),
        "stated_text": texts,
        "stated": np.array([np.nan if v is None else v for v in stated], dtype=float),
        "parsed": [v is not None for v in stated],
        "expected": expected,
        "likeliest": np.asarray(LEVELS, dtype=float)[logprobs.argmax(dim=1).numpy()] / 100,
        "level_mass": mass,
    })
