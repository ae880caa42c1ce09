"""The tiny chat model: a character-level tokenizer and a GPT-2 built from a config.

Used by every notebook through `load_checkpoint`; notebook 00 shows how it is made.
"""
from __future__ import annotations

import string
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast
from transformers.utils import logging as hf_logging

# from_pretrained draws a "Loading weights" bar for every checkpoint; notebooks load dozens.
hf_logging.disable_progress_bar()

from .config import Settings, settings

PAD, BOS, EOS, UNK, USER, ASSISTANT = "<pad>", "<bos>", "<eos>", "<unk>", "<user>", "<assistant>"
SPECIAL_TOKENS = [PAD, BOS, EOS, UNK, USER, ASSISTANT]
# Every character any notebook needs, `Y`, `N` and `%` included, is in the vocabulary before
# the base model trains, so later adapters never have to grow the embedding matrix.
CHARACTERS = list(string.digits + string.ascii_letters + " .,?!:;%+-=*/'()\n")
MAX_POSITIONS = 96
# GPT-2's "gelu_new" is the tanh approximation written out in Python; "gelu_pytorch_tanh" is the same
# formula as one fused kernel, and was a quarter of the forward time on CPU (measured).
ACTIVATION = "gelu_pytorch_tanh"


def chat_prompt(question: str) -> str:
    """The prompt the model answers: `<bos><user>question<assistant>`."""
    return f"{BOS}{USER}{question}{ASSISTANT}"


def build_tokenizer() -> PreTrainedTokenizerFast:
    """A character-level fast tokenizer with pad/end tokens and left padding for generation."""
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + CHARACTERS)}
    core = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()  # without it, decode() puts spaces between characters
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        bos_token=BOS,
        eos_token=EOS,
        pad_token=PAD,
        unk_token=UNK,
        additional_special_tokens=[USER, ASSISTANT],
        padding_side="left",  # batched generation needs left padding and the attention mask
        clean_up_tokenization_spaces=False,
    )


def build_model(tokenizer: PreTrainedTokenizerFast, s: Settings | None = None) -> GPT2LMHeadModel:
    """A fresh GPT-2 of the configured (tiny) size, with no dropout."""
    s = s or settings()
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=MAX_POSITIONS,
        n_embd=s.n_embd,
        n_layer=s.n_layer,
        n_head=s.n_head,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        attn_implementation="eager",  # faster than SDPA for this tiny model on CPU (measured)
        activation_function=ACTIVATION,
    )
    return GPT2LMHeadModel(config)


def n_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def load_pretrained(path: Path | str) -> tuple[GPT2LMHeadModel, PreTrainedTokenizerFast]:
    """Load a saved model and tokenizer from a folder, in eval mode."""
    path = Path(path)
    model = GPT2LMHeadModel.from_pretrained(path, attn_implementation="eager", activation_function=ACTIVATION)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(path)
    tokenizer.padding_side = "left"
    model.eval()
    return model, tokenizer


def list_checkpoints() -> list[str]:
    """Names of the selected checkpoints, in training order (trains the world if needed)."""
    from .training import get_checkpoints

    return list(get_checkpoints().all)


def load_checkpoint(name: str, revision: str | None = None):
    """(model, tokenizer) of a checkpoint of this series (`step-01200`, `finetuned`, `rl`), or of any model.

    A local folder or a Hugging Face model id is loaded with the Auto classes; `revision` picks an
    intermediate checkpoint: a subfolder of a local folder (`run/step-1000`), or a branch or tag
    of a hub repository (Pythia publishes `step143000`, OLMo `stage1-step...`). The series itself
    never downloads anything; see the README's "Running on real checkpoints".
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"checkpoint name must be a non-empty string, got {name!r}")
    if revision is None and not ("/" in name or Path(name).is_dir()):
        from .training import checkpoint_path

        return load_pretrained(checkpoint_path(name))
    return load_any(name, revision)


def load_any(name_or_path: str, revision: str | None = None):
    """A causal LM and its tokenizer from a local folder (revision = subfolder) or a hub id (revision = git ref)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(name_or_path)
    kwargs = {}
    if path.is_dir():
        if revision is not None:
            path = path / revision
            if not path.is_dir():
                options = sorted(p.name for p in Path(name_or_path).iterdir() if p.is_dir())
                raise ValueError(f"no revision {revision!r} in {Path(name_or_path).name}; available: {options}")
        source = str(path)
    else:
        source, kwargs = name_or_path, ({"revision": revision} if revision else {})
    model = AutoModelForCausalLM.from_pretrained(source, **kwargs)
    tokenizer = AutoTokenizer.from_pretrained(source, **kwargs)
    tokenizer.padding_side = "left"  # batched generation needs left padding
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.eval()
    return model, tokenizer
