# nnsight 0.8: the same sites, saved from the Hugging Face modules themselves during one traced forward.
from nnsight import NNsight

traced = NNsight(hf_model)
resid_pre, attn_out, mlp_out, resid_post = [], [], [], []
with torch.inference_mode(), traced.trace(input_ids, use_cache=False):
    for layer in traced.gpt_neox.layers:
        resid_pre.append(layer.input.save())  # the block input
        attn_out.append(layer.post_attention_dropout.output.save())  # attention write (dropout: identity)
        mlp_out.append(layer.post_mlp_dropout.output.save())  # MLP write
        resid_post.append(layer.output.save())  # the block output
    final = traced.gpt_neox.final_layer_norm.output.save()
