"""Category 9, image scale: 0-255 images vs normalized ones, through each layer's scaling law."""
import numpy as np

from dlci.rules.tf.common import layer_class, layer_name
from dlci.rules.tf.laws import IMAGE_SCALE, SCALING


def rescaled(case, inputs):
    """The layer on the inputs times 255 (its input-unit parameters scaled alike), divided by 255 ** degree."""
    law = SCALING[layer_name(case)]
    config = dict(case.config)
    for key, power in law.get("config", {}).items():
        if config.get(key) is not None:
            config[key] = config[key] * IMAGE_SCALE ** power
    xs = [x * np.asarray(IMAGE_SCALE, x.dtype) for x in inputs]
    layer = layer_class(case).from_config(config)
    case.call_layer(layer, xs)
    if case.weights:
        layer.set_weights(case.weights)
    for v in layer.weights:
        power = law.get("weights", {}).get(v.name)
        if power:
            v.assign(np.asarray(v.numpy()) * np.asarray(IMAGE_SCALE ** power, v.numpy().dtype))
    return [o / np.asarray(IMAGE_SCALE ** law["degree"], o.dtype) if o.dtype.kind == "f" else o
            for o in case.flatten(case.call_layer(layer, xs))]
