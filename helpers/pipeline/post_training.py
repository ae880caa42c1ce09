"""Builds the `post_training` entry (notebook 01): a supervised fine-tune of one checkpoint, then GRPO
(`helpers.world.rl`); both models are saved."""
from __future__ import annotations


import numpy as np

from helpers import config
from helpers.cache import artifacts
from helpers.cache.artifacts import register
from helpers.pipeline.checkpoints import load_checkpoint, training_run
from helpers.world import sums
from helpers.world.checkpoints import POST_TRAINED
from helpers.world.rl import base_checkpoint, grpo, supervised_finetune


@register("post_training")
def _build_post_training(folder) -> dict:
    """Supervised fine-tuning of one checkpoint, then GRPO; both models are saved."""
    s, w = config.post_training(), training_run()
    base = base_checkpoint(w["log"], w["selected"])
    model, tokenizer = load_checkpoint(base)
    sft_set = sums.fresh_questions(np.random.default_rng(s.sft_seed), s.sft_questions)
    sft_losses = supervised_finetune(model, tokenizer, sft_set, epochs=s.sft_epochs, lr=s.sft_lr)
    model.save_pretrained(folder / "finetuned")
    tokenizer.save_pretrained(folder / "finetuned")
    pool = sums.fresh_questions(np.random.default_rng(s.grpo_pool_seed), max(1000, s.grpo_prompts))
    grpo_log = grpo(model, tokenizer, pool, steps=s.grpo_steps, prompts_per_step=s.grpo_prompts,
                    group_size=s.grpo_group, lr=s.grpo_lr)
    model.save_pretrained(folder / "rl")
    tokenizer.save_pretrained(folder / "rl")
    return {"base": base, "sft_questions": sft_set, "sft_losses": sft_losses, "grpo_log": grpo_log}


def post_training() -> dict:
    """The cached post-training run: base checkpoint name, SFT set and losses, GRPO log."""
    return artifacts.load_or_build("post_training")


def post_trained_path(name: str):
    """Folder of the fine-tuned or RL model."""
    if name not in POST_TRAINED:
        raise ValueError(f"unknown post-trained model {name!r}; choose one of {POST_TRAINED}")
    return artifacts.folder("post_training") / name
