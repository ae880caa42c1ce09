"""Batched decoding of a checkpoint over a question set, with the answer's probability.

Greedy decoding (notebooks 00, 01 and later) gives `confidence` = the product of the probabilities of
the greedy answer's tokens, end mark included. Results are cached per checkpoint and split.
"""
from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from helpers import config
from helpers.world import sums
from helpers.world.model import chat_prompt

MAX_NEW_TOKENS = 24  # the longest answer form ("The difference is 999.") plus the end mark


class _DropPaddingAdvice(logging.Filter):
    """We always pass the attention mask; when every prompt of a batch has the same length, transformers
    drops the all-ones mask, then warns about the pad tokens it wrote itself after finished replies."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "strongly recommend passing in an `attention_mask`" not in record.getMessage()


logging.getLogger("transformers.modeling_utils").addFilter(_DropPaddingAdvice())


def check_questions(questions: pd.DataFrame) -> None:
    if not isinstance(questions, pd.DataFrame) or len(questions) == 0:
        raise ValueError("questions is empty; pass a non-empty question table from helpers.world.sums")
    missing = {"question_id", "question", "target"} - set(questions.columns)
    if missing:
        raise ValueError(f"questions lacks columns {sorted(missing)}; build it with helpers.world.sums.make_questions")


def encode_prompts(tokenizer, questions: list[str]) -> dict[str, torch.Tensor]:
    """Left-padded chat prompts with their attention mask (both are needed for batched generation)."""
    tokenizer.padding_side = "left"
    return tokenizer([chat_prompt(q) for q in questions], return_tensors="pt", padding=True, add_special_tokens=False)


def answer_logprobs(logits: torch.Tensor, tokens: torch.Tensor, eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities of generated tokens, masked after the first end mark.

    logits: (B, T, V) raw next-token logits, tokens: (B, T). Returns (logprobs (B, T) with 0 after the
    end mark, ended (B,) whether an end mark was produced). The end mark itself is counted.
    """
    logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    is_eos = tokens == eos_id
    before_or_at_eos = (is_eos.cumsum(dim=1) - is_eos.long()) == 0  # True up to and including the first eos
    return logp * before_or_at_eos, is_eos.any(dim=1)


def read_replies(tokenizer, tokens: torch.Tensor, targets) -> tuple[list[str], list, list[bool], list[bool]]:
    """Texts (cut at the first end mark), parsed answers, correctness and whether each reply ended.

    tokens: (B, T) generated ids. A reply with no end mark is wrong, whatever it says.
    """
    eos = tokenizer.eos_token_id
    texts, ended = [], []
    for row in tokens.tolist():
        ended.append(eos in row)
        texts.append(tokenizer.decode(row[: row.index(eos)] if eos in row else row, skip_special_tokens=True))
    answers = [sums.parse_answer(t) for t in texts]
    correct = [e and a is not None and a == int(y) for a, y, e in zip(answers, targets, ended)]
    return texts, answers, correct, ended


@torch.no_grad()
def greedy(model, tokenizer, questions: pd.DataFrame, batch_size: int = 500, progress: bool = True,
           desc: str = "greedy") -> pd.DataFrame:
    """Greedy answers with their confidence: question_id, text, answer, correct, confidence, ended.

    An answer with no end mark within MAX_NEW_TOKENS is wrong.
    """
    check_questions(questions)
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    eos = tokenizer.eos_token_id
    rows = []
    starts = range(0, len(questions), batch_size)
    for start in tqdm(starts, desc=desc, disable=not progress, leave=False):
        chunk = questions.iloc[start:start + batch_size]
        enc = encode_prompts(tokenizer, chunk["question"].tolist())
        out = model.generate(
            **enc, do_sample=False, max_new_tokens=MAX_NEW_TOKENS, output_logits=True,
            return_dict_in_generate=True, pad_token_id=tokenizer.pad_token_id, eos_token_id=eos,
        )
        new = out.sequences[:, enc["input_ids"].shape[1]:]  # (B, T)
        logits = torch.stack(out.logits, dim=1)  # (B, T, V) raw logits
        logp, _ = answer_logprobs(logits, new, eos)
        texts, answers, correct, ended = read_replies(tokenizer, new, chunk["target"])
        rows.append(pd.DataFrame({
            "question_id": chunk["question_id"].to_numpy(),
            "text": texts,
            "answer": pd.array(answers, dtype="Int64"),
            "correct": correct,
            "confidence": logp.sum(dim=1).exp().double().numpy(),
            "ended": ended,
        }))
    return pd.concat(rows, ignore_index=True)


def _candidates(tokenizer, chunk: pd.DataFrame, new: torch.Tensor, rank: str, logprob: torch.Tensor,
                with_ended: bool) -> pd.DataFrame:
    """k candidate replies per question (rows grouped by question): question_id, `rank` (0..k-1), text,
    answer, correct, logprob (and ended). new: (len(chunk) * k, T) generated ids; logprob: (len(chunk) * k,)."""
    k = len(new) // len(chunk)
    texts, answers, correct, ended = read_replies(tokenizer, new, np.repeat(chunk["target"].to_numpy(), k))
    out = pd.DataFrame({
        "question_id": np.repeat(chunk["question_id"].to_numpy(), k),
        rank: np.tile(np.arange(k), len(chunk)),
        "text": texts,
        "answer": pd.array(answers, dtype="Int64"),
        "correct": correct,
        "logprob": logprob.double().numpy(),
    })
    if with_ended:
        out["ended"] = ended
    return out


@torch.no_grad()
def sample(model, tokenizer, questions: pd.DataFrame, k: int = 10, seed: int = 0, temperature: float = 1.0,
           batch_size: int = 256, progress: bool = True, desc: str = "sampling") -> pd.DataFrame:
    """k sampled replies per question at temperature T (pure sampling: no top-k, no top-p).

    Returns one row per (question, sample): question_id, sample, text, answer, correct, logprob
    (summed log-probability of the reply, end mark included). Reproducible for a given seed.
    """
    check_questions(questions)
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k (samples per question) must be an integer >= 1, got {k!r}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    eos = tokenizer.eos_token_id
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    rows = []
    try:
        for start in tqdm(range(0, len(questions), batch_size), desc=desc, disable=not progress, leave=False):
            chunk = questions.iloc[start:start + batch_size]
            enc = encode_prompts(tokenizer, chunk["question"].tolist())
            out = model.generate(
                **enc, do_sample=True, temperature=temperature, top_k=0, top_p=1.0, num_return_sequences=k,
                max_new_tokens=MAX_NEW_TOKENS, output_logits=True, return_dict_in_generate=True,
                pad_token_id=tokenizer.pad_token_id, eos_token_id=eos,
            )
            new = out.sequences[:, enc["input_ids"].shape[1]:]
            logits = torch.stack(out.logits, dim=1) / temperature
            logp, _ = answer_logprobs(logits, new, eos)
            rows.append(_candidates(tokenizer, chunk, new, "sample", logp.sum(dim=1), with_ended=False))
    finally:
        torch.random.set_rng_state(generator_state)
    return pd.concat(rows, ignore_index=True)


@torch.no_grad()
def beams(model, tokenizer, questions: pd.DataFrame, num_beams: int | None = None,
          num_return_sequences: int | None = None, batch_size: int = 100, progress: bool = True,
          desc: str = "beam search") -> pd.DataFrame:
    """Beam search: one row per (question, returned beam), best first.

    `num_beams` defaults to `config.self_consistency().num_beams`, `num_return_sequences` to `num_beams`.

    `logprob` is the beam's summed log-probability, end mark included, with no length normalization
    (`length_penalty=0`; transformers otherwise divides by length**length_penalty). Columns:
    question_id, beam, text, answer, correct, logprob, ended. A beam with no end mark is wrong.
    """
    check_questions(questions)
    num_beams = config.self_consistency().num_beams if num_beams is None else num_beams
    num_return_sequences = num_beams if num_return_sequences is None else num_return_sequences
    for name, value in [("num_beams", num_beams), ("num_return_sequences", num_return_sequences),
                        ("batch_size", batch_size)]:
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if num_return_sequences > num_beams:
        raise ValueError(f"num_return_sequences ({num_return_sequences}) cannot exceed num_beams ({num_beams})")
    rows = []
    for start in tqdm(range(0, len(questions), batch_size), desc=desc, disable=not progress, leave=False):
        chunk = questions.iloc[start:start + batch_size]
        enc = encode_prompts(tokenizer, chunk["question"].tolist())
        out = model.generate(
            **enc, do_sample=False, num_beams=num_beams, num_return_sequences=num_return_sequences, length_penalty=0.0,
            max_new_tokens=MAX_NEW_TOKENS, output_scores=True, return_dict_in_generate=True,
            pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        )
        new = out.sequences[:, enc["input_ids"].shape[1]:]
        rows.append(_candidates(tokenizer, chunk, new, "beam", out.sequences_scores, with_ended=True))
    return pd.concat(rows, ignore_index=True)
