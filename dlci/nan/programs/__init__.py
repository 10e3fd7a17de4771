"""Bundled training programs for the NaN/Inf search: buggy ones, each with one latent numerical bug that random
inputs rarely trigger, and guarded twins that must stay finite for anything their own random generators produce.

Each program is a plain module with one entry function taking no arguments; it builds a fresh model, draws its data
from the framework's random generators and runs one or a few training steps, returning the loss as a float. The
buggy line of each buggy program ends with the comment ``# vulnerable``; its line number is read from the file, so
the manifest stays right when a program is edited.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
MARKER = "# vulnerable"


@dataclass(frozen=True)
class Program:
    name: str
    path: Path
    function: str
    framework: str  # "torch" or "tensorflow"
    expected_op: str | None  # the operation whose output first turns NaN/Inf; None for a guarded program
    expected_line: int | None  # 1-based line of that operation in `path`
    bug: str = ""  # what goes wrong (buggy) or what guards it (guarded)
    twin: str | None = None  # the guarded twin of a buggy program, or the buggy twin of a guarded one

    @property
    def buggy(self) -> bool:
        return self.expected_op is not None

    def entry(self):
        """The entry function, from a plain import of the program's module (no search machinery)."""
        return getattr(importlib.import_module(f"{__name__}.{self.name}"), self.function)

    @property
    def spec(self) -> str:
        """`file.py:function`, the form `dlci.nan.load_program` takes."""
        return f"{self.path}:{self.function}"


def marker_lines(path: Path) -> list[int]:
    """1-based numbers of the lines that end with the `# vulnerable` marker."""
    return [i for i, line in enumerate(path.read_text().splitlines(), start=1) if line.rstrip().endswith(MARKER)]


# name -> (framework, expected op or None, twin, bug); the file is <name>.py and the entry function is train()
_TABLE = {
    # PyTorch, buggy
    "torch_xent": ("torch", "torch.log", "torch_xent_guarded",
                   "hand-written cross-entropy: log of a softmax probability that underflows to 0"),
    "torch_gan": ("torch", "torch.log", "torch_gan_guarded",
                  "minimax generator loss log(1 - sigmoid(d)) with sigmoid rounding to 1"),
    "torch_vae": ("torch", "torch.exp", "torch_vae_guarded",
                  "VAE KL term exp(logvar) overflows for a large encoder log-variance"),
    "torch_attention": ("torch", "torch.exp", "torch_attention_guarded",
                        "hand-written attention softmax exp(scores) overflows (no max subtraction)"),
    "torch_arcface": ("torch", "torch.acos", "torch_arcface_guarded",
                      "acos of a cosine similarity that rounds past 1"),
    "torch_layernorm": ("torch", "torch.div", "torch_layernorm_guarded",
                        "hand-written layer norm divides by a standard deviation that reaches 0"),
    "torch_vicreg": ("torch", "torch.sqrt", "torch_vicreg_guarded",
                     "sqrt of a one-pass variance E[z^2] - E[z]^2 that cancels below 0"),
    "torch_gamma": ("torch", "torch.pow", "torch_gamma_guarded",
                    "gamma encoding x ** (1/2.2) of a residual output that can go negative"),
    "torch_embed_norm": ("torch", "torch.div", None,
                         "L2 normalisation of ReLU embeddings whose norm is 0 when every unit is dead"),
    "torch_batch_std": ("torch", "torch.sqrt", "torch_batch_std_guarded",
                        "batch standardisation by hand: sqrt of a batch variance that is 0 for a constant column "
                        "(the eps guards the division, not sqrt's derivative)"),
    "torch_direction": ("torch", "torch.acos", "torch_direction_guarded",
                        "acos of a cosine similarity that reaches 1 for a prediction parallel to its target"),
    "torch_gram_std": ("torch", "torch.sqrt", "torch_gram_std_guarded",
                       "sqrt of a Gram-matrix diagonal that is 0 for a constant feature"),
    "torch_unit_head": ("torch", "torch.div", "torch_unit_head_guarded",
                        "normalisation by hand: division by a projection's norm, 0 for a zero projection"),
    # PyTorch, guarded
    "torch_xent_guarded": ("torch", None, "torch_xent", "cross-entropy from log_softmax"),
    "torch_gan_guarded": ("torch", None, "torch_gan", "log(1 - sigmoid(d)) written as -softplus(d)"),
    "torch_vae_guarded": ("torch", None, "torch_vae", "log-variance clamped to [-30, 20]"),
    "torch_attention_guarded": ("torch", None, "torch_attention", "torch.softmax (max subtracted)"),
    "torch_arcface_guarded": ("torch", None, "torch_arcface", "cosine clamped inside (-1, 1) before acos"),
    "torch_layernorm_guarded": ("torch", None, "torch_layernorm", "rsqrt(var + eps)"),
    "torch_vicreg_guarded": ("torch", None, "torch_vicreg", "two-pass variance plus eps under the sqrt"),
    "torch_gamma_guarded": ("torch", None, "torch_gamma", "output clamped to >= 1e-6 before the power"),
    "torch_batch_std_guarded": ("torch", None, "torch_batch_std", "eps under the square root"),
    "torch_direction_guarded": ("torch", None, "torch_direction", "cosine clamped inside (-1, 1) before acos"),
    "torch_gram_std_guarded": ("torch", None, "torch_gram_std", "eps under the square root of the Gram diagonal"),
    "torch_unit_head_guarded": ("torch", None, "torch_unit_head", "F.normalize (eps-floored norm)"),
    # TensorFlow / Keras, buggy
    "tf_xent": ("tensorflow", "tf.math.log", "tf_xent_guarded",
                "hand-written categorical cross-entropy: log of a softmax that underflows to 0"),
    "tf_churn": ("tensorflow", "tf.math.log", "tf_churn_guarded",
                 "hand-written BCE floors p in log(p) but not in log(1 - p)"),
    "tf_embed_norm": ("tensorflow", "tf.math.divide", "tf_embed_norm_guarded",
                      "L2 normalisation of ReLU embeddings divides by a norm that reaches 0"),
    "tf_vae": ("tensorflow", "tf.math.exp", None,
               "VAE KL term exp(logvar) overflows for a large encoder log-variance"),
    "tf_tweedie": ("tensorflow", "tf.math.pow", None,
                   "Tweedie deviance mu ** -0.5 of an identity-link mean that can go negative"),
    "tf_siamese": ("tensorflow", "tf.math.sqrt", "tf_siamese_guarded",
                   "sqrt of a squared distance, 0 for two equal embeddings"),
    "tf_batch_whiten": ("tensorflow", "tf.math.rsqrt", "tf_batch_whiten_guarded",
                        "rsqrt of a batch variance, 0 for a feature constant over the batch"),
    "tf_angular": ("tensorflow", "tf.math.acos", "tf_angular_guarded",
                   "acos of the dot product of two unit vectors, 1 (or a rounding past it) for equal views"),
    "tf_layer_std": ("tensorflow", "tf.math.divide", "tf_layer_std_guarded",
                     "layer standardisation by hand in a subclassed keras.Model: division by a per-sample std that "
                     "is 0 for a constant hidden row"),
    "tf_gram_corr": ("tensorflow", "tf.math.divide", "tf_gram_corr_guarded",
                     "Gram matrix divided by the square roots of its diagonal, 0 for a constant feature"),
    "tf_unit_proj": ("tensorflow", "tf.math.divide", "tf_unit_proj_guarded",
                     "normalisation by hand: division by sqrt of a summed square, 0 for a zero projection"),
    # TensorFlow / Keras, guarded
    "tf_xent_guarded": ("tensorflow", None, "tf_xent", "tf.nn.softmax_cross_entropy_with_logits"),
    "tf_churn_guarded": ("tensorflow", None, "tf_churn", "tf.nn.sigmoid_cross_entropy_with_logits on logits"),
    "tf_embed_norm_guarded": ("tensorflow", None, "tf_embed_norm", "tf.math.l2_normalize"),
    "tf_siamese_guarded": ("tensorflow", None, "tf_siamese", "squared distance floored at 1e-12 under the sqrt"),
    "tf_batch_whiten_guarded": ("tensorflow", None, "tf_batch_whiten", "eps added to the batch variance"),
    "tf_angular_guarded": ("tensorflow", None, "tf_angular", "cosine clipped inside (-1, 1) before acos"),
    "tf_layer_std_guarded": ("tensorflow", None, "tf_layer_std", "eps added to the standard deviation"),
    "tf_gram_corr_guarded": ("tensorflow", None, "tf_gram_corr", "eps under the square root"),
    "tf_unit_proj_guarded": ("tensorflow", None, "tf_unit_proj", "tf.math.l2_normalize"),
}


# spellings of one operation: `a / b` is seen as Tensor.__truediv__ or Tensor.div, tf.math.divide as truediv, ...
_ALIASES = {"truediv": "div", "true_divide": "div", "divide": "div", "rtruediv": "div", "rdiv": "div",
            "realdiv": "div", "arccos": "acos", "power": "pow", "rpow": "pow", "float_power": "pow"}


def op_base(op: str) -> str:
    """The bare operation name: `torch.Tensor.__truediv__` -> `div`, `tf.math.log` -> `log`."""
    base = op.rsplit(".", 1)[-1].strip("_").lower()
    return _ALIASES.get(base, base)


def op_family(op: str) -> str:
    return "tensorflow" if op.startswith(("tf.", "tensorflow.", "keras.")) else "torch"


def op_matches(got: str | None, expected: str | None) -> bool:
    """Whether a reported operation is the expected one, whatever spelling (function, method, operator) was seen."""
    if not got or not expected:
        return got == expected
    return op_family(got) == op_family(expected) and op_base(got) == op_base(expected)


def _build() -> list[Program]:
    programs = []
    for name, (framework, op, twin, bug) in _TABLE.items():
        path = HERE / f"{name}.py"
        lines = marker_lines(path)
        if op is not None and len(lines) != 1:
            raise RuntimeError(f"{path}: a buggy program needs exactly one '{MARKER}' line, found {len(lines)}")
        if op is None and lines:
            raise RuntimeError(f"{path}: a guarded program has a '{MARKER}' line")
        programs.append(Program(name, path, "train", framework, op, lines[0] if op else None, bug, twin))
    return programs


PROGRAMS: list[Program] = _build()
BY_NAME = {p.name: p for p in PROGRAMS}


def get(name: str) -> Program:
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"no bundled program {name!r}; known: {', '.join(BY_NAME)}") from None


def bundled_path(name: str) -> str:
    """The `file.py:function` spec of a bundled program, for `dlci.nan.load_program`."""
    return get(name).spec
