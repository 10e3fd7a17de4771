"""Category 13, codec: the layer's output as an 8/16-bit image through PNG, which is lossless."""
import numpy as np
import tensorflow as tf


def quantize(y, levels):
    """y mapped linearly onto 0..levels (its min to 0, its max to levels) and rounded."""
    y = y.astype(np.float64)
    lo, hi = float(np.min(y)), float(np.max(y))
    q = np.zeros(y.shape) if hi == lo else np.round((y - lo) / (hi - lo) * levels)
    return q.astype(np.uint8 if levels == 255 else np.uint16)


def images(case, inputs, dtype=None):
    """The layer's first output quantized to uint8 and uint16 images (channels last, 1, 3 or 4 channels)."""
    y = case.flatten(case.call_layer(case.build_layer(None, inputs), inputs))[0]
    if case.config.get("data_format") == "channels_first" and y.ndim in (3, 4):
        y = np.moveaxis(y, 1, -1)
    if y.ndim not in (3, 4) or y.shape[-1] not in (1, 3, 4) or y.dtype.kind not in "fiu" or 0 in y.shape:
        raise NotImplementedError(f"not applicable: output {y.dtype}{list(y.shape)} is not image-shaped")
    if not np.all(np.isfinite(y)):
        raise NotImplementedError("not applicable: non-finite output")
    return [quantize(y, 255), quantize(y, 65535)]


def png_round_trip(case, inputs):
    """The quantized output through tf.io.encode_png and tf.io.decode_png (lossless), image by image."""
    outs = []
    for q in images(case, inputs):
        batch = q if q.ndim == 4 else q[None]
        dtype = tf.uint8 if q.dtype == np.uint8 else tf.uint16
        decoded = np.stack([tf.io.decode_png(tf.io.encode_png(img), dtype=dtype).numpy() for img in batch])
        outs.append(decoded if q.ndim == 4 else decoded[0])
    return outs
