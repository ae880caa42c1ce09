"""Post-training of a checkpoint: a short supervised fine-tune, then GRPO against the exact-answer verifier.

Used by notebook 01 (seed 002's "fine-tuned model" and "RL model"). The GRPO loop is written out here
rather than taken from TRL: it is about forty lines, it keeps the dependency list short, and the
notebook can show every step of the algorithm.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from . import sums
from .artifacts import artifact_dir, load_or_build, register
from .config import POST_TRAINING_KEYS, settings
from .decoding import MAX_NEW_TOKENS, answer_logprobs, encode_prompts, read_replies
from .training import training_step_loss


def fresh_questions(rng: np.random.Generator, n: int, family: str = "sum") -> pd.DataFrame:
    """n distinct canonical questions that belong to no evaluation split."""
    held = set(sums.held_out_ids().tolist())
    a, b = rng.integers(0, sums.max_operand() + 1, size=(2, 4 * n))
    if family == "sub":
        a, b = np.maximum(a, b), np.minimum(a, b)
    ids = sums.question_id(family, a, b)
    _, first = np.unique(ids, return_index=True)
    keep = np.sort(first[~np.isin(ids[first], list(held))])
    keep = rng.permutation(keep)[:n]
    if len(keep) < n:
        raise ValueError(f"could not draw {n} fresh questions; ask for fewer")
    return sums.make_questions(family, a[keep], b[keep])


def supervised_finetune(model, tokenizer, questions: pd.DataFrame, epochs: int, lr: float, batch_size: int = 32,
                        seed: int = 0, progress: bool = True) -> list[float]:
    """Fine-tune on (canonical question, bare answer) pairs for a few epochs; returns the loss per epoch.

    A small set seen many times is how this post-training step makes a model overconfident.
    """
    if epochs < 1 or batch_size < 1 or not lr > 0:
        raise ValueError("epochs and batch_size must be >= 1 and lr > 0")
    pairs = [(q, sums.answer_text(f, int(t))) for q, f, t in zip(questions["question"], questions["family"], questions["target"])]
    rng = np.random.default_rng(seed)
    optim = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    losses = []
    for _ in tqdm(range(epochs), desc="supervised fine-tuning", disable=not progress, leave=False):
        order = rng.permutation(len(pairs))
        epoch = []
        for start in range(0, len(pairs), batch_size):
            optim.zero_grad(set_to_none=True)
            epoch.append(training_step_loss(model, tokenizer, [pairs[i] for i in order[start:start + batch_size]], 1).item())
            optim.step()
        losses.append(float(np.mean(epoch)))
    model.eval()
    return losses


def group_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """GRPO advantages: each reward minus its group's mean, over the group's std. rewards: (P, G).

    A group whose samples all got the same reward carries no signal: its advantages are 0.
    """
    if rewards.ndim != 2 or rewards.shape[1] < 2:
        raise ValueError(f"rewards must be (prompts, group) with a group of at least 2, got {tuple(rewards.shape)}")
    mean = rewards.mean(dim=1, keepdim=True)
    std = rewards.std(dim=1, keepdim=True)
    return torch.where(std > 0, (rewards - mean) / (std + 1e-6), torch.zeros_like(rewards))


def sequence_logprobs(model, sequences: torch.Tensor, prompt_mask: torch.Tensor, eos_id: int) -> tuple[torch.Tensor, torch.Tensor]:
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
    for step in tqdm(range(1, steps + 1), desc="GRPO", disable=not progress, leave=False):
        batch = questions.iloc[rng.choice(len(questions), prompts_per_step, replace=False)]
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
        loss = -(adv * logp * mask).sum() / mask.sum()
        optim.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        log.append({"step": step, "reward": rewards.mean().item(),
                    "groups_with_signal": (rewards.std(dim=1) > 0).float().mean().item()})
    model.eval()
    return pd.DataFrame(log)


POST_TRAINED = ("finetuned", "rl")
BASE_ACCURACY = 0.65  # the plate's fine-tuned model is right on about 70% of the hundred sums


def base_checkpoint(log: pd.DataFrame, selected: list[str]) -> str:
    """The selected checkpoint whose monitor accuracy is closest to BASE_ACCURACY (picked by accuracy)."""
    acc = log.set_index("step")["accuracy"]
    return min(selected, key=lambda name: abs(acc[int(name.split("-")[1])] - BASE_ACCURACY))


@register("post_training", version="1", deps=lambda: [("selection", {})], settings_keys=POST_TRAINING_KEYS)
def _build_post_training(folder) -> dict:
    """Supervised fine-tuning of one checkpoint, then GRPO; both models are saved."""
    from .model import load_checkpoint
    from .training import world

    s, w = settings(), world()
    base = base_checkpoint(w["log"], w["selected"])
    model, tokenizer = load_checkpoint(base)
    sft_set = fresh_questions(np.random.default_rng(11), s.sft_questions)
    sft_losses = supervised_finetune(model, tokenizer, sft_set, epochs=s.sft_epochs, lr=s.sft_lr)
    model.save_pretrained(folder / "finetuned")
    tokenizer.save_pretrained(folder / "finetuned")
    pool = fresh_questions(np.random.default_rng(12), max(1000, s.grpo_prompts))
    grpo_log = grpo(model, tokenizer, pool, steps=s.grpo_steps, prompts_per_step=s.grpo_prompts,
                    group_size=s.grpo_group, lr=s.grpo_lr)
    model.save_pretrained(folder / "rl")
    tokenizer.save_pretrained(folder / "rl")
    return {"base": base, "sft_questions": sft_set, "sft_losses": sft_losses, "grpo_log": grpo_log}


def post_training() -> dict:
    """The cached post-training run: base checkpoint name, SFT set and losses, GRPO log."""
    return load_or_build("post_training")


def post_trained_path(name: str):
    """Folder of the fine-tuned or RL model."""
    if name not in POST_TRAINED:
        raise ValueError(f"unknown post-trained model {name!r}; choose one of {POST_TRAINED}")
    post_training()
    return artifact_dir("post_training") / name
