"""The sum world: questions (`sums`), the tiny GPT-2 (`model`), its training loop (`loop`) and LoRA
(`lora`), the training run and its checkpoint selection (`training`), which checkpoints exist and how to
load them (`checkpoints`), decoding (`decoding`) and notebook 01's post-training (`rl`)."""
