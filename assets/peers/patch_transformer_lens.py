# TransformerLens 4.3: patch one attention write (clean into corrupt: denoising) and zero it (zero ablation;
# the total effect is the clean run's logit difference minus `ablated`, what zeroing the write removes).
from transformer_lens import TransformerBridge

bridge = TransformerBridge.boot_transformers(model_dir, hf_model=hf_model, device="cpu")
site = f"blocks.{block}.hook_attn_out"
with torch.inference_mode():
    _, clean_cache = bridge.run_with_cache(clean_ids, names_filter=[site])


def put_clean(write, hook):
    write = write.clone()
    write[:, position] = clean_cache[site][:, position]
    return write


def zero(write, hook):
    write = write.clone()
    write[:, position] = 0.0
    return write


with torch.inference_mode():
    patched_logits = bridge.run_with_hooks(corrupt_ids, fwd_hooks=[(site, put_clean)])
    ablated_logits = bridge.run_with_hooks(clean_ids, fwd_hooks=[(site, zero)])
patched = float(patched_logits[0, -1, target] - patched_logits[0, -1, rival])
ablated = float(ablated_logits[0, -1, target] - ablated_logits[0, -1, rival])
