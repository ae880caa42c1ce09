"""The confidence adapters' read-out: "Correct?" after an answer, and P(`Y`) through the model's own head.

The prompt is the question, the checkpoint's answer and a second user turn `Correct?`; the confidence is
P(`Y`) / (P(`Y`) + P(`N`)) at the next position, read through the checkpoint's **own** LM head and
embeddings (paper A.7: no new head). Used by the confidence adapters (helpers.confidence.adapters,
notebooks 05, 06) and the GCM (helpers.confidence.baselines).

Read-out temperature. `Y` and `N` never occur in the LM's training text, so their output embeddings are
two near-copies of the "unused token" vector: ‖w_Y − w_N‖ is 0.16 at the first selected checkpoint and
0.05 at the last (weight decay keeps shrinking it). After the final layer norm, the raw logit gap
h·(w_Y − w_N) cannot leave ±0.62 at the last checkpoint (±2.06 at the first), so whatever the adapter
learns, its confidence stays within [0.35, 0.65] there, and the same adapter gets less confident on
every later checkpoint. The gap is therefore divided by ‖w_Y − w_N‖ of the checkpoint being read: the
Y/N softmax at temperature ‖w_Y − w_N‖, still read through that checkpoint's own head, with no new
parameter (`config.adapters().normalize_readout`; full mode, step-03000 oracle, test AUC 0.63 raw vs
0.83 normalized; a learned temperature stayed within 10% of ‖w_Y − w_N‖⁻¹).
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch

from .. import config
from ..model import ASSISTANT, EOS, USER, chat_prompt

VERIFY = "Correct?"  # the second user turn
YES, NO = "Y", "N"


def verification_prompt(question: str, answer: str) -> str:
    """`<bos><user>question<assistant>answer<eos><user>Correct?<assistant>`: the adapter's prompt."""
    return f"{chat_prompt(question)}{answer}{EOS}{USER}{VERIFY}{ASSISTANT}"


def encode_verification(tokenizer, questions: Sequence[str], answers: Sequence[str]) -> dict[str, torch.Tensor]:
    """Left-padded verification prompts with attention mask and position ids (positions start at 0)."""
    if len(questions) != len(answers):
        raise ValueError(f"got {len(questions)} questions but {len(answers)} answers; pass one answer per question")
    texts = [verification_prompt(q, a) for q, a in zip(questions, answers)]
    enc = tokenizer(texts, add_special_tokens=False, padding=True, padding_side="left", return_tensors="pt")
    # Left padding puts every prompt's last token in the last column; explicit positions keep each
    # prompt's positions as in training (0 at <bos>), whatever its padding.
    position_ids = (enc["attention_mask"].cumsum(1) - 1).clamp(min=0)
    return {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"], "position_ids": position_ids}


def yes_no_ids(tokenizer) -> tuple[int, int]:
    """Token ids of `Y` and `N` (in the vocabulary since before the base model trained)."""
    ids = tokenizer.convert_tokens_to_ids([YES, NO])
    if tokenizer.unk_token_id in ids:
        raise ValueError("the tokenizer has no `Y`/`N` tokens; use helpers.model.build_tokenizer")
    return ids[0], ids[1]


def readout_temperature(model, tokenizer) -> float:
    """‖w_Y − w_N‖ of the model's own output embeddings: the Y/N softmax's temperature."""
    y, n = yes_no_ids(tokenizer)
    head = model.get_output_embeddings().weight
    return float((head[y] - head[n]).norm())


def yes_no_logits(model, batch: Mapping[str, torch.Tensor], tokenizer) -> torch.Tensor:
    """Logits of `Y` and `N` at each prompt's last position, through the model's own head: (B, 2)."""
    y, n = yes_no_ids(tokenizer)
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                   position_ids=batch["position_ids"], logits_to_keep=1).logits  # (B, 1, V)
    return logits[:, -1, [y, n]]


def margin(model, batch: Mapping[str, torch.Tensor], tokenizer, temperature: float) -> torch.Tensor:
    """(logit_Y − logit_N) / temperature: the log-odds of `Y` over `N`, (B,)."""
    both = yes_no_logits(model, batch, tokenizer)
    return (both[:, 0] - both[:, 1]) / temperature


def temperature(model, tokenizer, normalize: bool | None = None) -> float:
    """The read-out temperature: ‖w_Y − w_N‖ if `normalize` (default: `config.adapters().normalize_readout`), else 1."""
    normalize = config.adapters().normalize_readout if normalize is None else normalize
    return readout_temperature(model, tokenizer) if normalize else 1.0


@torch.no_grad()
def adapter_confidence(model, tokenizer, questions: Sequence[str], answers: Sequence[str],
                       normalize: bool | None = None, batch_size: int | None = None) -> np.ndarray:
    """P(Y) / (P(Y) + P(N)) after `Correct?` for each (question, answer text) pair (notebooks 05, 06).

    `normalize` (default: `config.adapters().normalize_readout`) reads the Y/N softmax at temperature
    ‖w_Y − w_N‖ of the model's own head; False gives the raw P(Y) / (P(Y) + P(N)). `batch_size`
    defaults to `config.adapters().score_batch_size`.
    """
    questions, answers = list(questions), list(answers)
    if not questions:
        raise ValueError("questions is empty; pass at least one question with its answer")
    batch_size = batch_size or config.adapters().score_batch_size
    scale = temperature(model, tokenizer, normalize)
    was_training = model.training
    model.eval()
    out = []
    for start in range(0, len(questions), batch_size):
        batch = encode_verification(tokenizer, questions[start:start + batch_size], answers[start:start + batch_size])
        out.append(torch.sigmoid(margin(model, batch, tokenizer, scale)).double())
    model.train(was_training)
    return torch.cat(out).numpy()
