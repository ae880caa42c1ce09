"""Post-training of a checkpoint: a short supervised fine-tune, then GRPO against the exact-answer verifier.

The GRPO step is written out here rather than taken from TRL: it is about forty lines, it keeps the
dependency list short, and the notebook can show every step of the algorithm. Sizes come from
`config.post_training()`; the cached run is `helpers.pipeline.post_training`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from helpers import config
from helpers.world import loop, sums
from helpers.world.decoding import MAX_NEW_TOKENS, answer_logprobs, encode_prompts, read_replies
from helpers.world.training import training_step_loss


def supervised_finetune(model, tokenizer, questions: pd.DataFrame, epochs: int, lr: float, batch_size: int = 32,
                        seed: int = 0, progress: bool = True) -> list[float]:
    """Fine-tune on (canonical question, bare answer) pairs for a few epochs; returns the loss per epoch.

    A small set seen many times is how this post-training step makes a model overconfident.
    """
    if epochs < 1 or batch_size < 1 or not lr > 0:
        raise ValueError("epochs and batch_size must be >= 1 and lr > 0")
    pairs = [(q, sums.answer_text(f, int(t)))
             for q, f, t in zip(questions["question"], questions["family"], questions["target"])]
    rng = np.random.default_rng(seed)
    optim = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    per_epoch = -(-len(pairs) // batch_size)

    def batches():
        for _ in range(epochs):
            order = rng.permutation(len(pairs))
            for start in range(0, len(pairs), batch_size):
                yield [pairs[i] for i in order[start:start + batch_size]]

    losses = loop.train(model, optim, batches(), lambda batch: training_step_loss(model, tokenizer, batch, 1),
                        total=epochs * per_epoch, desc="supervised fine-tuning", progress=progress)
    return [float(np.mean(losses[e * per_epoch:(e + 1) * per_epoch])) for e in range(epochs)]


def group_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """GRPO advantages: each reward minus its group's mean, over the group's std. rewards: (P, G).

    A group whose samples all got the same reward carries no signal: its advantages are 0.
    """
    if rewards.ndim != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be (prompts, group) with a group of at least 2, got {tuple(rewards.shape)}")
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True)
    return torch.where(std > 0, (rewards - mean) / (std + 1e-6), torch.zeros_like(rewards))


def sequence_logprobs(model, sequences: torch.Tensor, prompt_mask: torch.Tensor,
                      eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities of the generated part of left-padded `sequences`, with gradients.

    sequences: (B, P+T) prompt then generated tokens; prompt_mask: (B, P). Positions follow the
    attention mask, as in generation. Returns (logp (B, T) zeroed after the first end mark, mask (B, T)).
    """
    n_prompt = prompt_mask.shape[1]
    generated = sequences[:, n_prompt:]
    is_eos = generated == eos_id
    gen_mask = ((is_eos.cumsum(1) - is_eos.long()) == 0).long()  # up to and including the first end mark
    mask = torch.cat([prompt_mask, gen_mask], dim=1)
    position_ids = (mask.cumsum(1) - 1).clamp(min=0)
    logits = model(input_ids=sequences, attention_mask=mask, position_ids=position_ids).logits
    logits = logits[:, n_prompt - 1 : -1]  # the logits that predicted each generated token
    logp, _ = answer_logprobs(logits, generated, eos_id)
    return logp, gen_mask.float()


def grpo(model, tokenizer, questions: pd.DataFrame, steps: int = 40, prompts_per_step: int = 64, group_size: int = 8,
         lr: float = 3e-4, seed: int = 0, progress: bool = True) -> pd.DataFrame:
    """GRPO with reward 1 for an exactly right, properly ended answer and 0 otherwise.

    Each step samples `group_size` replies (T = 1) to `prompts_per_step` questions, scores them with the
    verifier, and takes one policy-gradient step on the group-normalized advantages. One update per
    batch keeps it on-policy, so the PPO ratio is 1 and needs no clipping; there is no KL penalty.
    Returns a log with the mean reward per step.
    """
    if steps < 1 or prompts_per_step < 1 or group_size < 2:
        raise ValueError("steps and prompts_per_step must be >= 1 and group_size >= 2")
    if len(questions) < prompts_per_step:
        raise ValueError(f"need at least {prompts_per_step} questions, got {len(questions)}")
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    optim = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    eos = tokenizer.eos_token_id
    log = []

    def batches():
        for _ in range(steps):
            yield questions.iloc[rng.choice(len(questions), prompts_per_step, replace=False)]

    def loss(batch: pd.DataFrame) -> torch.Tensor:
        enc = encode_prompts(tokenizer, batch["question"].tolist())
        model.eval()
        with torch.no_grad():
            seqs = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                  num_return_sequences=group_size, max_new_tokens=MAX_NEW_TOKENS,
                                  pad_token_id=tokenizer.pad_token_id, eos_token_id=eos)
        targets = np.repeat(batch["target"].to_numpy(), group_size)
        _, _, correct, _ = read_replies(tokenizer, seqs[:, enc["input_ids"].shape[1]:], targets)
        rewards = torch.tensor(correct, dtype=torch.float).view(prompts_per_step, group_size)
        adv = group_advantages(rewards).view(-1, 1)
        model.train()
        prompt_mask = enc["attention_mask"].repeat_interleave(group_size, dim=0)
        logp, mask = sequence_logprobs(model, seqs, prompt_mask, eos)
        log.append({"step": len(log) + 1, "reward": rewards.mean().item(),
                    "groups_with_signal": (rewards.std(dim=1) > 0).float().mean().item()})
        return -(adv * logp * mask).sum() / mask.sum()

    loop.train(model, optim, batches(), loss, clip_norm=1.0, total=steps, desc="GRPO", progress=progress)
    return pd.DataFrame(log)


def base_checkpoint(log: pd.DataFrame, selected: list[str]) -> str:
    """The selected checkpoint whose monitor accuracy is closest to `config.post_training().base_accuracy`."""
    acc = log.set_index("step")["accuracy"]
    goal = config.post_training().base_accuracy
    return min(selected, key=lambda name: abs(acc[int(name.split("-")[1])] - goal))


