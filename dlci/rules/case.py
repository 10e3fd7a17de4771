"""The operator instance as a rule's graph functions see it (the first argument of ``graph_a`` / ``graph_b``).

This module is pasted into reproducers: it imports nothing, and nothing from dlci.
"""


class Case:
    """What every rule reads: the instance's inputs (numpy arrays; the graphs get copies), its non-tensor settings
    ``params``, the canonical operator id ``op`` (e.g. "aten::conv2d", "nn::Conv2d", "keras::Conv2D"), its recipe
    ``call`` (the ``Instance.call`` dict, tensors encoded as {"$t": i}) and ``flatten(out)``, the model code's
    outputs as a list of numpy arrays."""

    def __init__(self, *, inputs, params, op, call, flatten):
        self.inputs = inputs
        self.params = params
        self.op = op
        self.call = call
        self.flatten = flatten


class TorchCase(Case):
    """A torch instance: ``build_model()`` (a fresh eval-mode ``nn.Module`` whose forward takes the inputs),
    ``model_class`` (its class, building a module with fresh weights), ``to_torch(arrays)`` and ``state`` (a module
    instance's weights as numpy arrays by state_dict key; empty for functions)."""

    def __init__(self, *, build_model, model_class, to_torch, state, **common):
        super().__init__(**common)
        self.build_model = build_model
        self.model_class = model_class
        self.to_torch = to_torch
        self.state = state


class KerasCase(Case):
    """A keras layer instance: its ``config`` (get_config()) and ``weights`` (get_weights()), ``build_layer(dtype=None,
    xs=None)`` (the layer built on xs, holding the weights; in `dtype` when given), ``call_layer(layer, xs)`` and
    ``build_keras_model()`` (a one-layer keras.Model)."""

    def __init__(self, *, build_layer, call_layer, build_keras_model, config, weights, **common):
        super().__init__(**common)
        self.build_layer = build_layer
        self.call_layer = call_layer
        self.build_keras_model = build_keras_model
        self.config = config
        self.weights = weights
