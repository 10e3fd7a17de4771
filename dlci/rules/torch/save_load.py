"""Category 16, save -> load: a state_dict, a whole module, an exported program through save and load."""
import io

import torch


def fresh_state_dict(case, inputs):
    """state_dict -> torch.save -> torch.load(weights_only=True) -> load_state_dict into a freshly built module."""
    buf = io.BytesIO()
    torch.save(case.build_model().m.state_dict(), buf)
    buf.seek(0)
    torch.manual_seed(1)  # a fresh module whose own initial weights differ from the saved ones
    model = case.model_class()
    model.m.load_state_dict(torch.load(buf, weights_only=True))
    model.eval()
    with torch.no_grad():
        return case.flatten(model(*case.to_torch(inputs)))


def pickled_module(case, inputs):
    """The whole module pickled with torch.save and loaded back (weights_only=False)."""
    model = case.build_model()
    buf = io.BytesIO()
    torch.save(model.m, buf)
    buf.seek(0)
    model.m = torch.load(buf, weights_only=False)
    with torch.no_grad():
        return case.flatten(model(*case.to_torch(inputs)))


def export_program(case, inputs):
    return torch.export.export(case.build_model(), tuple(case.to_torch(inputs)))


def exported_program(case, inputs, dtype=None):
    """torch.export.export(model).module() called on the inputs."""
    with torch.no_grad():
        return case.flatten(export_program(case, inputs).module()(*case.to_torch(inputs)))


def reloaded_program(case, inputs):
    """The exported program through torch.export.save / torch.export.load (a .pt2 archive in memory)."""
    buf = io.BytesIO()
    torch.export.save(export_program(case, inputs), buf)
    buf.seek(0)
    ep = torch.export.load(buf)
    with torch.no_grad():
        return case.flatten(ep.module()(*case.to_torch(inputs)))
