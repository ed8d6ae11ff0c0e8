# nnsight 0.8: any torch module can be traced; the copy model's five hook points saved during one forward.
from nnsight import NNsight

traced = NNsight(copy_model)
with torch.inference_mode(), traced.trace(tokens):
    block = traced.block
    resid_pre = block.hook_resid_pre.output.save()  # the block input
    attn_out = block.hook_attn_out.output.save()  # attention write
    resid_mid = block.hook_resid_mid.output.save()  # between the two writes
    mlp_out = block.hook_mlp_out.output.save()  # MLP write
    resid_post = block.hook_resid_post.output.save()  # the block output
