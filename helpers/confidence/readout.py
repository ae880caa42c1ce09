"""The confidence adapters' read-out: "Correct?" after an answer, and P(`Y`) through the model's own head.

The prompt is the question, the checkpoint's answer and a second user turn `Correct?`; the confidence is
P(`Y`) / (P(`Y`) + P(`N`)) at the next position, read through the checkpoint's **own** LM head and
embeddings (paper A.7: no new head). The world's training stream holds verification conversations that
end in `Yes` or `No` (helpers.world.sums.training_batch), so every checkpoint has learned what `Y` and `N`
mean there: the bare checkpoint's read-out is P(True) (helpers.pipeline.p_true), and an adapter
(helpers.confidence.adapters) fine-tunes it.

Why the stream teaches `Yes` and `No`: a head that has never seen `Y` or `N` has near-identical output
embeddings for them, and the gap between their logits says almost nothing (the measurement is in the notes
of helpers.config.Adapters).
"""
from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from helpers import config
from helpers.world.model import conversation_prompt
from helpers.world.sums import REPLIES, VERIFY

COLUMNS = ["checkpoint", "question_id", "answer", "correct", "confidence"]  # the standard results frame
YES, NO = (reply[0] for reply in REPLIES)  # `Y` and `N`: the first tokens of `Yes` and `No`


def verification_prompt(question: str, answer: str) -> str:
    """`<bos><user>question<assistant>answer<eos><user>Correct?<assistant>`: the adapter's prompt."""
    return conversation_prompt((question, answer, VERIFY))


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


def encode_rows(tokenizer, questions: Sequence[str], answers: Sequence[str]) -> dict[str, torch.Tensor]:
    """Every verification prompt encoded once, left-padded to the longest, with its length ("lengths", (N,)).

    A training run encodes its rows once and cuts batches out of this with `batch_of`: the tokenizer and
    pandas ran once per step before, about a tenth of a step of the tiny model (measured)."""
    enc = encode_verification(tokenizer, questions, answers)
    return {**enc, "lengths": enc["attention_mask"].sum(1)}


def batch_of(encoded: Mapping[str, torch.Tensor], rows) -> dict[str, torch.Tensor]:
    """Rows of `encode_rows`, trimmed to their own longest prompt: the same tensors as `encode_verification`
    of those rows (left padding keeps every prompt's tokens in the last columns)."""
    rows = torch.as_tensor(rows)
    width = int(encoded["lengths"][rows].max())
    return {key: encoded[key][rows, -width:] for key in ("input_ids", "attention_mask", "position_ids")}


def yes_no_ids(tokenizer) -> tuple[int, int]:
    """Token ids of `Y` and `N` (in the vocabulary since before the base model trained)."""
    ids = tokenizer.convert_tokens_to_ids([YES, NO])
    if tokenizer.unk_token_id in ids:
        raise ValueError("the tokenizer has no `Y`/`N` tokens; use helpers.world.model.build_tokenizer")
    return ids[0], ids[1]


def yes_no_logits(model, batch: Mapping[str, torch.Tensor], tokenizer,
                  weights: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
    """Logits of `Y` and `N` at each prompt's last position, through the model's own head: (B, 2).

    `weights` (optional) replaces the model's parameters for this call (`torch.func.functional_call`): how an
    adapter trains through merged LoRA weights (`helpers.confidence.adapters.fit_adapter`)."""
    y, n = yes_no_ids(tokenizer)
    inputs = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                  position_ids=batch["position_ids"], logits_to_keep=1)
    out = model(**inputs) if weights is None else torch.func.functional_call(model, dict(weights), (), inputs)
    return out.logits[:, -1, [y, n]]  # (B, 1, V) -> (B, 2)


def margin(model, batch: Mapping[str, torch.Tensor], tokenizer,
           weights: Mapping[str, torch.Tensor] | None = None) -> torch.Tensor:
    """logit_Y − logit_N: the log-odds of `Y` over `N`, (B,)."""
    both = yes_no_logits(model, batch, tokenizer, weights)
    return both[:, 0] - both[:, 1]


@torch.no_grad()
def over_prompts(model, tokenizer, questions: Sequence[str], answers: Sequence[str], read: Callable,
                 batch_size: int | None = None) -> list:
    """`read(batch)` for each batch of encoded verification prompts, in eval mode and without gradients.

    `batch_size` defaults to `config.adapters().score_batch_size`. Used by `adapter_confidence` and
    `feature_variance.readout_features`."""
    questions, answers = list(questions), list(answers)
    if not questions:
        raise ValueError("questions is empty; pass at least one question with its answer")
    batch_size = batch_size or config.adapters().score_batch_size
    was_training = model.training
    model.eval()
    try:
        return [read(encode_verification(tokenizer, questions[i:i + batch_size], answers[i:i + batch_size]))
                for i in range(0, len(questions), batch_size)]
    finally:
        model.train(was_training)


def adapter_confidence(model, tokenizer, questions: Sequence[str], answers: Sequence[str],
                       batch_size: int | None = None) -> np.ndarray:
    """P(Y) / (P(Y) + P(N)) after `Correct?` for each (question, answer text) pair (notebooks 05, 06)."""
    out = over_prompts(model, tokenizer, questions, answers,
                       lambda batch: torch.sigmoid(margin(model, batch, tokenizer)).double(), batch_size)
    return torch.cat(out).numpy()


