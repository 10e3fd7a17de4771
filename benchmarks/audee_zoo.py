"""Multi-operator models built around real single-operator bugs of the pinned stack, for benchmarks/localisation.py
and benchmarks/evolve.py: each case is a self-contained PyTorch file (``FILE.py:model``, what a user gives
``dlci test --model``) or an ONNX file, with one buggy operator at a chosen depth among other operators, and its clean
twin (the same file without the buggy operator).

The bugs (each reproduced alone by dlci on this stack before it is used here):
- TVM 0.27 ignores ``avg_pool2d(divisor_override=...)`` (tvm.from_exported_program, tvm.from_fx; functional and
  ``nn.AvgPool2d``);
- TVM 0.27's FX importer gets ``nn.BatchNorm2d`` in eval mode wrong (tvm.from_fx);
- OpenVINO 2026.4's PyTorch frontend ignores softplus ``beta`` and ``threshold`` (openvino.pytorch; functional and
  ``nn.Softplus``);
- OpenVINO's erfinv is inaccurate near 1 (about 2e-3 relative at 0.999; openvino.pytorch);
- OpenVINO's exp gives +inf for float32 inputs from about 88.38 to 88.72 (openvino.pytorch, openvino.onnx).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

C, H = 4, 8  # channels and spatial size of every model's (1, C, H, H) input

# filler operators: (constructor line or None, forward line); {i} is the layer's index. "saturating" ones squash
# large differences, so none follows a culprit whose error is small.
FILLERS = {
    "conv3": ("nn.Conv2d(4, 4, 3, padding=1)", "x = self.m{i}(x)"),
    "conv1": ("nn.Conv2d(4, 4, 1)", "x = self.m{i}(x)"),
    "relu": (None, "x = torch.relu(x)"),
    "addc": (None, "x = x + 0.25"),
    "mulc": (None, "x = x * 1.5"),
    # positional: TVM 0.27's FX importer ignores max_pool2d's keyword arguments (stride=1 gives a 2x2 output)
    "maxpool": (None, "x = F.max_pool2d(x, 3, 1, 1)"),
    "avgpool": (None, "x = F.avg_pool2d(x, 3, stride=1, padding=1)"),
    "residual": ("nn.Conv2d(4, 4, 1)", "x = x + self.m{i}(x)"),
    "center": (None, "x = x - x.mean(dim=(2, 3), keepdim=True)"),
    "tanh": (None, "x = torch.tanh(x)"),
    "sigmoid": (None, "x = torch.sigmoid(x)"),
}
SATURATING = {"tanh", "sigmoid"}
# fillers a target gets wrong on its own (one bug per model here): TVM 0.27's FX importer ignores max_pool2d's
# stride and padding (a 2x2 output for kernel 3, stride 1, padding 1 on 8x8), found while building this zoo
WRONG_ON = {"tvm.from_fx": {"maxpool"}}

# culprit kind -> (constructor line or None, forward line, operator id, parameters that matter, targets, exact error)
CULPRITS = {
    "avg_pool2d_divisor": (None, "x = F.avg_pool2d(x, 3, stride=1, padding=1, divisor_override=4)",
                           "aten::avg_pool2d", {"divisor_override"},
                           ("tvm.from_exported_program", "tvm.from_fx")),
    "AvgPool2d_divisor": ("nn.AvgPool2d(3, stride=1, padding=1, divisor_override=4)", "x = self.m{i}(x)",
                          "nn::AvgPool2d", {"divisor_override"}, ("tvm.from_exported_program", "tvm.from_fx")),
    "BatchNorm2d_eval": ("nn.BatchNorm2d(4)", "x = self.m{i}(x)", "nn::BatchNorm2d", set(), ("tvm.from_fx",)),
    "softplus_beta": (None, "x = F.softplus(x, beta=2.0)", "aten::softplus", {"beta"}, ("openvino.pytorch",)),
    "softplus_threshold": (None, "x = F.softplus(x.abs() + 1.5, threshold=1.0)", "aten::softplus", {"threshold"},
                           ("openvino.pytorch",)),
    "Softplus_beta": ("nn.Softplus(beta=3.0)", "x = self.m{i}(x)", "nn::Softplus", {"beta"}, ("openvino.pytorch",)),
    "erfinv_near_1": (None, "x = torch.erfinv(torch.sigmoid(x) * 0.002 + 0.9975)", "aten::erfinv", set(),
                      ("openvino.pytorch",)),
    "exp_near_overflow": (None, "x = torch.exp(torch.tanh(x) * 0.15 + 88.55) * 1e-37", "aten::exp", set(),
                          ("openvino.pytorch",)),
}
SMALL_ERROR = {"erfinv_near_1", "softplus_threshold", "softplus_beta", "Softplus_beta"}

# (fillers in all, position of the culprit among them): first, middle, last
PLACEMENTS = ((5, 0), (10, 5), (15, 15))


@dataclass
class Case:
    name: str
    kind: str
    fillers: list[str]
    position: int
    source: str = ""
    clean_source: str = ""
    onnx: bool = False
    truth: dict = field(default_factory=dict)


def _layers(steps: list[tuple[str | None, str]]) -> tuple[list[str], list[str]]:
    init, fwd = [], []
    for i, (ctor, line) in enumerate(steps):
        if ctor:
            init.append(f"        self.m{i} = {ctor}")
        fwd.append("        " + line.format(i=i))
    return init, fwd


def module_source(doc: str, init: list[str], forward: list[str], seed: int, body: list[str], inputs: str) -> str:
    """A self-contained FILE.py whose ``model()`` returns (Net().eval(), (inputs,))."""
    return "\n".join([
        f'"""{doc}"""', "import torch", "import torch.nn as nn", "import torch.nn.functional as F", "", "",
        "class Net(nn.Module):", "    def __init__(self):", "        super().__init__()", *(init or ["        pass"]),
        "", "    def forward(self, x):", *forward, "", "",
        "def model():", f"    torch.manual_seed({seed})", "    net = Net()", *body,
        f"    return net.eval(), ({inputs},)", ""])


def torch_source(steps: list[tuple[str | None, str]], seed: int, doc: str) -> str:
    init, fwd = _layers(steps)
    stats = ["    for m in net.modules():  # trained-looking normalisation statistics",
             "        if isinstance(m, nn.BatchNorm2d):",
             "            m.running_mean.normal_(0.0, 0.5)",
             "            m.running_var.uniform_(0.5, 2.0)",
             "            nn.init.uniform_(m.weight, 0.5, 1.5)",
             "            nn.init.normal_(m.bias, 0.0, 0.5)"]
    return module_source(doc, init, fwd + ["        return x"], seed, stats, "torch.randn(1, 4, 8, 8)")


def fillers_for(kind: str, n: int, position: int, rng: np.random.Generator) -> list[str]:
    wrong = set().union(*(WRONG_ON.get(t, set()) for t in CULPRITS[kind][4]))
    names = sorted(set(FILLERS) - wrong)
    out = []
    for k in range(n):
        pool = [f for f in names if not (k >= position and kind in SMALL_ERROR | {"exp_near_overflow"}
                                         and f in SATURATING)]
        out.append(pool[int(rng.integers(len(pool)))])
    return out


def torch_cases(seed: int = 0) -> list[Case]:
    rng = np.random.default_rng(seed)
    cases = []
    for kind, (ctor, line, op, params, targets) in CULPRITS.items():
        for n, pos in PLACEMENTS:
            fillers = fillers_for(kind, n, pos, rng)
            steps = [FILLERS[f] for f in fillers]
            buggy = steps[:pos] + [(ctor, line)] + steps[pos:]
            name = f"{kind}_{n}ops_at{pos}"
            doc = f"{kind} after {pos} of {n} other operators (benchmarks/audee_zoo.py)"
            cases.append(Case(name, kind, fillers, pos, torch_source(buggy, seed, doc),
                              torch_source(steps, seed, doc + ", without it"),
                              truth={"operator": op, "parameters": sorted(params), "targets": list(targets)}))
    return cases


# -- ONNX: OpenVINO's exp among ONNX operators --------------------------------------------------------------------

ONNX_FILLERS = ("Conv", "Relu", "Add", "Mul", "MaxPool", "Sigmoid", "Tanh")


def onnx_graph(fillers: list[str], position: int | None, seed: int):
    """A graph of ONNX operators with the exp-near-overflow block at ``position`` (None: without it)."""
    from dlci.models.graph import Graph, Node, Value
    rng = np.random.default_rng(seed)
    nodes, consts, x = [], {}, "x"

    def add(op, inputs, attrs=None):
        nonlocal x
        out = f"v{len(nodes)}"
        nodes.append(Node(op, inputs, [out], attrs or {}))
        x = out

    def const(name, value):
        consts[name] = np.asarray(value, np.float32)
        return name

    def culprit():
        add("Tanh", [x])
        add("Mul", [x, const(f"k{len(nodes)}", 0.15)])
        add("Add", [x, const(f"k{len(nodes)}", 88.55)])
        add("Exp", [x])
        add("Mul", [x, const(f"k{len(nodes)}", 1e-37)])

    for k, f in enumerate(fillers):
        if k == position:
            culprit()
        if f == "Conv":
            add("Conv", [x, const(f"w{len(nodes)}", rng.standard_normal((C, C, 3, 3)) * 0.3)], {"pads": [1, 1, 1, 1]})
        elif f == "MaxPool":
            add("MaxPool", [x], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
        elif f in ("Add", "Mul"):
            add(f, [x, const(f"k{len(nodes)}", 0.25 if f == "Add" else 1.5)])
        else:
            add(f, [x])
    if position is not None and position >= len(fillers):
        culprit()
    return Graph([Value("x", (1, C, H, H))], nodes, [x], consts, name="exp_net")


def onnx_cases(seed: int = 0) -> list[Case]:
    rng = np.random.default_rng(seed + 1)
    cases = []
    for n, pos in PLACEMENTS:
        fillers = []
        for k in range(n):
            pool = [f for f in ONNX_FILLERS if not (k >= pos and f in ("Sigmoid", "Tanh"))]
            fillers.append(pool[int(rng.integers(len(pool)))])
        cases.append(Case(f"onnx_exp_near_overflow_{n}ops_at{pos}", "onnx_exp_near_overflow", fillers, pos,
                          onnx=True, truth={"operator": "onnx::Exp", "parameters": [], "targets": ["openvino.onnx"]}))
    return cases


def write(case: Case, folder: Path, seed: int = 0) -> tuple[str, str]:
    """The case's model and its clean twin as files: (model spec, clean spec) for `dlci test --model`."""
    folder.mkdir(parents=True, exist_ok=True)
    if case.onnx:
        import onnx
        rng = np.random.default_rng(seed)
        x = rng.standard_normal((1, C, H, H)).astype(np.float32)
        specs = []
        for suffix, position in (("", case.position), ("_clean", None)):
            path = folder / f"{case.name}{suffix}.onnx"
            onnx.save(onnx_graph(case.fillers, position, seed).to_onnx(), path)
            np.savez(folder / f"{case.name}{suffix}.npz", x=x)
            specs.append(str(path))
        return specs[0], specs[1]
    (folder / f"{case.name}.py").write_text(case.source)
    (folder / f"{case.name}_clean.py").write_text(case.clean_source)
    return f"{folder / case.name}.py:model", f"{folder / case.name}_clean.py:model"


def describe(cases: list[Case]) -> str:
    return json.dumps([{"name": c.name, "kind": c.kind, "fillers": c.fillers, "position": c.position,
                        **c.truth} for c in cases], indent=1)


# -- seeds for the search (benchmarks/evolve.py): each bug latent, its trigger far from the example values ----------

SEED_HEADS = {
    # OpenVINO's exp is +inf only for inputs in [88.38, 88.72]; the head's exp inputs start within a few units of 0
    "exp": ("torch.log1p(torch.exp(z))", "openvino.pytorch"),
    # OpenVINO's erfinv is off by ~1e-3 only for inputs within ~4e-3 of 1; tanh(z) starts well inside (-0.9, 0.9)
    "erfinv": ("torch.erfinv(torch.tanh(z))", "openvino.pytorch"),
    # OpenVINO ignores softplus' threshold: wrong only where an input exceeds it; the inputs start below 3
    "softplus": ("F.softplus(z, threshold=6.0)", "openvino.pytorch"),
    # the clean twin: no buggy operator, the search must find nothing
    "clean": ("torch.tanh(z) + torch.sigmoid(z)", "openvino.pytorch"),
}


def seed_source(head: str, seed: int = 0) -> str:
    expr = SEED_HEADS[head][0]
    return module_source(f"A small MLP ending in {expr} (benchmarks/audee_zoo.py).",
                         ["        self.fc1 = nn.Linear(8, 16)", "        self.fc2 = nn.Linear(16, 4)"],
                         ["        z = self.fc2(torch.tanh(self.fc1(x)) * 2.0)", f"        return {expr}"], seed, [],
                         "torch.randn(2, 8)")


def exp_seed_graph(seed: int = 0):
    """The ONNX seed: a two-layer perceptron whose output is exp of its second layer, scaled down."""
    from dlci.models.graph import Graph, Node, Value
    rng = np.random.default_rng(seed)
    return Graph([Value("x", (2, 8))],
                 [Node("MatMul", ["x", "W1"], ["h"]), Node("Tanh", ["h"], ["t"]), Node("Mul", ["t", "two"], ["u"]),
                  Node("MatMul", ["u", "W2"], ["z0"]), Node("Add", ["z0", "b2"], ["z"]), Node("Exp", ["z"], ["e"]),
                  Node("Mul", ["e", "tiny"], ["y"])], ["y"],
                 {"W1": (rng.standard_normal((8, 16)) * 0.35).astype(np.float32),
                  "two": np.array(2.0, np.float32),
                  "W2": (rng.standard_normal((16, 4)) * 0.25).astype(np.float32),
                  "b2": (rng.standard_normal(4) * 0.1).astype(np.float32), "tiny": np.array(1e-30, np.float32)},
                 name="exp_seed")


def write_seeds(folder: Path, seed: int = 0) -> list[tuple[str, str, str | None]]:
    """(name, model spec, target) of every search seed, written under ``folder``."""
    import onnx
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for head, (_, target) in SEED_HEADS.items():
        path = folder / f"seed_{head}.py"
        path.write_text(seed_source(head, seed))
        out.append((head, f"{path}:model", target))
    path = folder / "seed_onnx_exp.onnx"
    onnx.save(exp_seed_graph(seed).to_onnx(), path)
    out.append(("onnx_exp", str(path), "openvino.onnx"))
    return out
