# TransformerLens 4.3: run_with_cache caches the model's HookPoint modules, whatever the model. The copy model's
# hook points are residlab's own, so a copy of it gets TransformerLens's HookPoints in their places.
import copy

from transformer_lens import HookedRootModule
from transformer_lens.hook_points import HookPoint

POINTS = ("hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out", "hook_resid_post")


class HookedCopyModel(HookedRootModule):
    def __init__(self, model):
        super().__init__()
        self.model = copy.deepcopy(model)  # the model you were given keeps its own hook points
        for point in POINTS:
            setattr(self.model.block, point, HookPoint())
        self.setup()  # names each HookPoint by its path, e.g. model.block.hook_resid_pre

    def forward(self, tokens):
        return self.model(tokens)


with torch.inference_mode():
    logits, cache = HookedCopyModel(copy_model).run_with_cache(tokens)
resid_pre, attn_out, resid_mid, mlp_out, resid_post = (cache[f"model.block.{point}"] for point in POINTS)
