# nnsight 0.8: the same patch and zero ablation, set on the Hugging Face module's output inside a trace (the
# total effect is the clean run's logit difference minus `ablated`).
from nnsight import NNsight

traced = NNsight(hf_model)
write = traced.gpt_neox.layers[block].post_attention_dropout  # the attention write, where it is added
with torch.inference_mode():
    with traced.trace(clean_ids, use_cache=False):
        clean_write = write.output[:, position].save()
    with traced.trace(corrupt_ids, use_cache=False):
        write.output[:, position] = clean_write
        patched_logits = traced.output.logits.save()
    with traced.trace(clean_ids, use_cache=False):
        write.output[:, position] = 0.0
        ablated_logits = traced.output.logits.save()
patched = float(patched_logits[0, -1, target] - patched_logits[0, -1, rival])
ablated = float(ablated_logits[0, -1, target] - ablated_logits[0, -1, rival])
