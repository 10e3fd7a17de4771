"""Category 16, save -> load: a .keras file, get_config/from_config with get_weights/set_weights, a SavedModel."""
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf


def model_outputs(case, model, inputs):
    return case.flatten(model(inputs[0] if len(inputs) == 1 else list(inputs)))


def keras_model(case, inputs, dtype=None):
    """The single-layer keras model, called eagerly."""
    return model_outputs(case, case.build_keras_model(), inputs)


def keras_file(case, inputs):
    """The model saved with model.save("x.keras") and loaded back with keras.models.load_model."""
    model = case.build_keras_model()
    with tempfile.TemporaryDirectory() as d:
        model.save(os.path.join(d, "x.keras"))
        loaded = keras.models.load_model(os.path.join(d, "x.keras"))
    return model_outputs(case, loaded, inputs)


def config_copy(case, inputs):
    """A copy: type(layer).from_config(layer.get_config()), built, then set_weights(layer.get_weights())."""
    layer = case.build_layer(None, inputs)
    copy = type(layer).from_config(layer.get_config())
    case.call_layer(copy, inputs)
    copy.set_weights(layer.get_weights())
    return case.flatten(case.call_layer(copy, inputs))


def serving(case, model):
    """tf.function over the model with a fixed input signature (inputs named in0, in1, ...)."""
    spec = [tf.TensorSpec(x.shape, tf.as_dtype(x.dtype), name=f"in{i}") for i, x in enumerate(case.inputs)]

    def serve(*xs):
        return model(xs[0] if len(xs) == 1 else list(xs))
    return tf.function(serve, input_signature=spec, autograph=False)


def serving_function(case, inputs, dtype=None):
    """The model's serving function, called before saving."""
    return case.flatten(serving(case, case.build_keras_model())(*[tf.constant(x) for x in inputs]))


def saved_model(case, inputs):
    """tf.saved_model.save with that serving signature, tf.saved_model.load, the "serving_default" signature."""
    module = tf.Module()
    module.model = case.build_keras_model()
    module.serve = serving(case, module.model)
    with tempfile.TemporaryDirectory() as d:
        tf.saved_model.save(module, os.path.join(d, "sm"), signatures={"serving_default": module.serve})
        sig = tf.saved_model.load(os.path.join(d, "sm")).signatures["serving_default"]
        out = sig(**{f"in{i}": tf.constant(x) for i, x in enumerate(inputs)})
    return [np.asarray(out[k]) for k in sorted(out, key=lambda k: int(k.rsplit("_", 1)[-1]))]
