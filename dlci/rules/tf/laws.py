"""Scaling laws of keras layers, read off their formulas (documentation turned into data): with the input multiplied
by s, the layer whose config entries and weights named here are multiplied by s ** power gives s ** degree times
the original output. "activation": the layer's activation must be positively homogeneous. Used by the image_scale
rule's graph (and pasted into its reproducers) and by its applicability check (dlci.rules.tf.meta)."""

IMAGE_SCALE = 255.0  # normalized [0, 1] images vs 0-255 images

_AFFINE = {"degree": 1, "weights": {"bias": 1}, "activation": True}
_NORM = {"degree": 0, "config": {"epsilon": 2}}
_RANKED = ("MaxPooling", "AveragePooling", "GlobalMaxPooling", "GlobalAveragePooling", "AdaptiveMaxPooling",
           "AdaptiveAveragePooling", "ZeroPadding", "Cropping", "UpSampling")
SCALING = {
    "ReLU": {"degree": 1, "config": {"max_value": 1, "threshold": 1}},
    "LeakyReLU": {"degree": 1}, "PReLU": {"degree": 1},
    "Activation": {"degree": 1, "activation": True},
    "Masking": {"degree": 1, "config": {"mask_value": 1}},
    "Dense": _AFFINE, "EinsumDense": _AFFINE,
    "BatchNormalization": {"degree": 0, "config": {"epsilon": 2}, "weights": {"moving_mean": 1, "moving_variance": 2}},
    "LayerNormalization": _NORM, "GroupNormalization": _NORM, "RMSNormalization": _NORM,
    "UnitNormalization": {"degree": 0},
    "Flatten": {"degree": 1}, "Reshape": {"degree": 1}, "Permute": {"degree": 1}, "RepeatVector": {"degree": 1},
    "Identity": {"degree": 1},
    **{f"Conv{n}D{t}": _AFFINE for n in (1, 2, 3) for t in ("", "Transpose")},
    # keras has depthwise and separable convolutions in 1-D and 2-D only
    **{f"{kind}{n}D": _AFFINE for kind in ("DepthwiseConv", "SeparableConv") for n in (1, 2)},
    **{f"{family}{n}D": {"degree": 1} for family in _RANKED for n in (1, 2, 3)},
}
