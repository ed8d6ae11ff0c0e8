# TransformerLens 4.3: the residual states and writes of every block, from a TransformerBridge around the model.
from transformer_lens import TransformerBridge

bridge = TransformerBridge.boot_transformers(model_dir, hf_model=hf_model, device="cpu")
with torch.inference_mode():
    logits, cache = bridge.run_with_cache(input_ids)
depth = bridge.cfg.n_layers
resid_pre = [cache[f"blocks.{b}.hook_resid_pre"] for b in range(depth)]  # the block input
attn_out = [cache[f"blocks.{b}.hook_attn_out"] for b in range(depth)]  # attention write
mlp_out = [cache[f"blocks.{b}.hook_mlp_out"] for b in range(depth)]  # MLP write
resid_post = [cache[f"blocks.{b}.hook_resid_post"] for b in range(depth)]  # the block output
final = cache["ln_final.hook_out"]  # the final LayerNorm's output (no block has a resid_mid here)
