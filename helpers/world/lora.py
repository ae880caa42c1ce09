"""The one LoRA implementation of the series: configure, wrap, save, attach, and the frozen base weights.

Used by the verbalized-confidence adapters (notebook 03, helpers.confidence.verbalized), the
confidence adapters (notebooks 05, 06, helpers.confidence.adapters) and the GCM (helpers.confidence.baselines).
Only the LoRA weights (and, for the verbalized adapters, a few token embeddings) ever train: the
base-weight helpers copy, swap and hash the frozen weights under plain GPT-2 parameter names, for a
plain model and a peft-wrapped one alike.
"""
from __future__ import annotations

import hashlib
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Mapping

import torch

# peft is imported inside the functions below: it takes about 2.5 s to import (measured), and the
# package imports this module (through the confidence builders) in notebooks that never use LoRA.

# Names of the weights peft adds; everything else is the frozen base model.
_ADDED = ("lora_", "trainable_tokens")


@contextmanager
def quiet():
    """Silence the known, harmless warnings peft raises while it wraps, loads or saves GPT-2.

    - peft reads transformers' deprecated `is_gradient_checkpointing` property (a FutureWarning about
      peft's code, not ours; seen on every wrap and load).
    - "fan_in_fan_out is set to False but the target module is `Conv1D`": GPT-2's layers store their
      weights transposed. `build_config` sets fan_in_fan_out=True, so it should not appear; if a
      config without it ever reaches peft, peft corrects the flag itself.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*is_gradient_checkpointing.*", category=FutureWarning)
        warnings.filterwarnings("ignore", message=r".*fan_in_fan_out.*")
        yield


def build_config(rank: int, alpha: int, targets: str, trainable_token_indices: list[int] | None = None,
                 task_type: str | None = None, inference_mode: bool = False):
    """A peft LoraConfig for GPT-2: rank, alpha (scale = alpha / rank), a regex of adapted modules.

    GPT-2's linear layers are Conv1D (fan_in_fan_out=True); no dropout, no bias. `trainable_token_indices`
    also trains those rows of the input embeddings; `task_type` and `inference_mode` go to peft as given.
    """
    from peft import LoraConfig  # local: peft takes 2.5 s to import (see the top)

    extra = {}
    if trainable_token_indices is not None:
        extra["trainable_token_indices"] = list(trainable_token_indices)
    if task_type is not None:
        extra["task_type"] = task_type
    if inference_mode:
        extra["inference_mode"] = True
    return LoraConfig(r=rank, lora_alpha=alpha, target_modules=targets, fan_in_fan_out=True,
                      lora_dropout=0.0, bias="none", **extra)


def wrap(model, lora_config):
    """`model` wrapped (in place) in a fresh adapter of `lora_config`; only the adapter's weights train."""
    from peft import get_peft_model  # local: peft takes 2.5 s to import (see the top)

    with quiet():
        return get_peft_model(model, lora_config)


def save(peft_model, folder: Path | str, base_name: str | None = None,
         save_embedding_layers: bool | str = "auto") -> None:
    """Save only the adapter's weights (peft `save_pretrained`).

    `base_name` replaces the base model's recorded path (a machine path) with a name. With
    save_embedding_layers=False peft does not look the base up (a checkpoint name is no Hub id) to
    check whether the vocabulary grew; pass it when the embeddings never train.
    """
    if base_name is not None:
        peft_model.peft_config["default"].base_model_name_or_path = base_name
    with quiet():
        peft_model.save_pretrained(folder, save_embedding_layers=save_embedding_layers)


def attach(base, folder: Path | str):
    """`base` (a plain GPT-2, wrapped in place) with the adapter saved in `folder`, in eval mode."""
    from peft import PeftModel  # local: peft takes 2.5 s to import (see the top)

    with quiet():
        model = PeftModel.from_pretrained(base, str(folder), is_trainable=False)
    model.eval()
    return model


# ---------------------------------------------------------------------------- base weights


def _plain_name(name: str) -> str:
    """A parameter's plain GPT-2 name: peft renames what it wraps (base_model.model.<name>,
    <layer>.base_layer.<weight>, <embedding>.token_adapter.base_layer.<weight>)."""
    return name.replace("base_model.model.", "").replace(".token_adapter", "").replace(".base_layer", "")


def _is_base(name: str) -> bool:
    return not any(tag in name for tag in _ADDED)


def base_parameters(model) -> dict[str, torch.nn.Parameter]:
    """The base (non-adapter) parameters under plain GPT-2 names, for a plain or a peft-wrapped model."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return {_plain_name(name): p for name, p in inner.named_parameters() if _is_base(name)}


def base_state(model) -> dict[str, torch.Tensor]:
    """A copy of the model's base weights (adapter excluded), keyed by plain GPT-2 parameter names."""
    return {name: p.detach().clone() for name, p in base_parameters(model).items()}


@torch.no_grad()
def load_base(model, state: Mapping[str, torch.Tensor]) -> None:
    """Copy base weights into a (peft-wrapped) model in place; its adapter weights stay as they are."""
    params = base_parameters(model)
    if set(params) != set(state):
        raise ValueError("base weights do not match the model's architecture; pass base_state() of a checkpoint")
    for name, p in params.items():
        p.copy_(state[name])


def base_weights_hash(model) -> str:
    """A short hash of the base weights (adapter weights excluded), under plain names.

    Equal hashes mean the same checkpoint weights, whether the model is plain or peft-wrapped.
    """
    h = hashlib.sha256()
    state = {_plain_name(name): t for name, t in model.state_dict().items() if _is_base(name)}
    for name, tensor in sorted(state.items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().float().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------------- training through merged weights


def lora_factors(peft_model) -> dict[str, tuple[torch.Tensor, torch.Tensor, float]]:
    """{plain GPT-2 weight name: (A, B, scale)} of every adapted Conv1D layer (the trainable parameters
    themselves, not copies): the layer computes x·(W + scale·(B·A)ᵀ) + b (GPT-2 stores W as (in, out))."""
    factors = {}
    for name, module in peft_model.named_modules():
        if hasattr(module, "lora_A") and "default" in module.lora_A:
            factors[_plain_name(name) + ".weight"] = (module.lora_A["default"].weight,
                                                      module.lora_B["default"].weight, module.scaling["default"])
    if not factors:
        raise ValueError("the model has no LoRA layers; wrap it with lora.wrap first")
    return factors


def merged_weights(base: Mapping[str, torch.Tensor], factors: Mapping[str, tuple]) -> dict[str, torch.Tensor]:
    """`base` (plain names) with each adapted weight replaced by W + scale·(B·A)ᵀ, differentiable in A and B.

    Run through `torch.func.functional_call` on a plain GPT-2, this is the LoRA model's forward up to float
    rounding, and faster to train: one full-width matmul per layer instead of peft's separate x·Aᵀ·Bᵀ path
    (its skinny rank-8 matmuls and their backward were about a fifth of an adapter step, measured)."""
    weights = dict(base)
    for name, (a, b, scale) in factors.items():
        weights[name] = base[name] + (b @ a).T * scale
    return weights
