"""Memory layout: channels_last inputs and weights vs contiguous ones."""
import torch


def channels_last(case, inputs):
    """Inputs (and 4-d / 5-d weights) in channels_last / channels_last_3d memory format."""
    ts = [t.to(memory_format=torch.channels_last) if t.ndim == 4 else
          t.to(memory_format=torch.channels_last_3d) if t.ndim == 5 else t for t in case.to_torch(inputs)]
    model = case.build_model()
    weights = list(model.parameters()) + list(model.buffers())
    if any(w.ndim == 4 for w in weights):
        model = model.to(memory_format=torch.channels_last)
    if any(w.ndim == 5 for w in weights):
        model = model.to(memory_format=torch.channels_last_3d)
    with torch.no_grad():
        return case.flatten(model(*ts))
