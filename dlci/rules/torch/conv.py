"""Convolution rules: 'same' padding vs explicit padding (category 2), a grouped (depthwise) convolution vs one
plain convolution per group (4), a dilated convolution vs a zero-inserted kernel (6)."""
import torch
import torch.nn.functional as F

from dlci.rules.torch.common import forward_args, is_fn, make, na, state, the_call, tup
from dlci.rules.torch.docs import param_names


def conv_parts(case, ts):
    """The instance's convolution: (callable, arguments by name, spatial rank, transposed?)."""
    obj, d = the_call(case, ts)
    names = param_names(obj)
    transposed = "output_padding" in names
    if is_fn(case):
        if not ({"weight", "groups"} <= set(names)):
            na("not a convolution (no weight/groups parameters)")
        nd = d["weight"].ndim - 2
    else:
        if not ({"in_channels", "kernel_size", "groups"} <= set(names)):
            na("not a convolution module (no in_channels/kernel_size/groups parameters)")
        nd = len(case.build_model().m.kernel_size)
    return obj, d, nd, transposed


def run_conv(case, obj, d, x_args, weights=None, dtype=None):
    """Call the convolution: a function with its arguments d, or a module of class obj built from constructor
    arguments d with the given weights, applied to the forward arguments."""
    with torch.no_grad():
        if is_fn(case):
            return obj(**d)
        m = make(obj, d, weights, dtype)
        a, k = x_args
        return m(*a, **k)


# -- 2. same padding --------------------------------------------------------------------------------------------------

def same_pads(kernel, dilation):
    """F.pad amounts 'same' amounts to: dilation * (kernel - 1) in all, the odd one at the end (last dim first)."""
    pads = []
    for k, d in zip(reversed(kernel), reversed(dilation)):
        total = d * (k - 1)
        pads += [total // 2, total - total // 2]
    return pads


def same_padding(case, inputs, dtype=None):
    """The convolution with stride 1 and padding="same"."""
    ts = case.to_torch(inputs)
    obj, d, nd, transposed = conv_parts(case, ts)
    d.update(stride=1, padding="same")  # 'same' is only defined for stride 1
    return case.flatten(run_conv(case, obj, d, None if is_fn(case) else forward_args(case, ts),
                                 None if is_fn(case) else state(case, dtype), dtype))


def explicit_padding(case, inputs):
    """F.pad by the 'same' amounts (the module's padding_mode), then the convolution with padding 0."""
    ts = case.to_torch(inputs)
    obj, d, nd, transposed = conv_parts(case, ts)
    if is_fn(case):
        pads = same_pads(d["weight"].shape[2:], tup(d.get("dilation", 1), nd))
        d.update(input=F.pad(d["input"], pads), stride=1, padding=0)
        return case.flatten(run_conv(case, obj, d, None))
    m = case.build_model().m
    mode = {"zeros": "constant"}.get(m.padding_mode, m.padding_mode)
    d.update(stride=1, padding=0, padding_mode="zeros")
    a, k = forward_args(case, ts)
    x = F.pad(a[0], same_pads(m.kernel_size, m.dilation), mode=mode)
    return case.flatten(run_conv(case, obj, d, ([x] + list(a[1:]), k), state(case)))


# -- 4. depthwise (grouped) -------------------------------------------------------------------------------------------

def grouped(case, ts, dtype=None):
    """(callable, arguments, weights, nd, groups): the instance's grouped conv, or, when it has groups=1, its
    depthwise variant (groups = in_channels, weight[:, :1]) where out_channels is a multiple of in_channels."""
    obj, d, nd, transposed = conv_parts(case, ts)
    weights = None if is_fn(case) else state(case, dtype)
    w = d["weight"] if is_fn(case) else weights["weight"]
    g = d.get("groups", 1)
    if g == 1:
        cin = w.shape[0] if transposed else w.shape[1]
        if transposed or cin < 2 or w.shape[0] % cin:
            na("groups=1 and no depthwise variant (transposed, one channel, or out_channels % in_channels)")
        g = cin
        if is_fn(case):
            d["weight"] = w[:, :1].contiguous()
        else:
            weights["weight"] = w[:, :1].contiguous()
        d["groups"] = g
    return obj, d, weights, nd, g


def planned_conv(case, inputs, plan, dtype=None):
    """The convolution as ``plan(case, tensors, dtype)`` sets it up: (callable, arguments, weights, ...)."""
    ts = case.to_torch(inputs)
    obj, d, weights = plan(case, ts, dtype)[:3]
    return case.flatten(run_conv(case, obj, d, None if is_fn(case) else forward_args(case, ts), weights, dtype))


def grouped_conv(case, inputs, dtype=None):
    """The grouped convolution."""
    return planned_conv(case, inputs, grouped, dtype)


def per_group(case, inputs):
    """One plain (groups=1) convolution per group on its slice of channels, concatenated."""
    ts = case.to_torch(inputs)
    obj, d, weights, nd, g = grouped(case, ts)
    x = d["input"] if is_fn(case) else forward_args(case, ts)[0][0]
    cdim = x.ndim - nd - 1
    w = d["weight"] if is_fn(case) else weights["weight"]
    b = d.get("bias") if is_fn(case) else weights.get("bias")
    outs = []
    for j, (xj, wj) in enumerate(zip(x.chunk(g, cdim), w.chunk(g, 0))):
        bj = None if b is None else b.chunk(g, 0)[j]
        if is_fn(case):
            outs.append(run_conv(case, obj, {**d, "input": xj, "weight": wj, "bias": bj, "groups": 1}, None))
        else:
            kw = {**d, "in_channels": d["in_channels"] // g, "out_channels": d["out_channels"] // g, "groups": 1}
            wts = {"weight": wj} if bj is None else {"weight": wj, "bias": bj}
            outs.append(run_conv(case, obj, kw, ([xj], {}), wts))
    return case.flatten(torch.cat(outs, cdim))


# -- 6. dilated -------------------------------------------------------------------------------------------------------

def dilated(case, ts, dtype=None):
    """(callable, arguments, weights, nd, dilation): the instance's conv with its dilation, or dilation 2 where the
    instance has none, when the input is large enough for it."""
    obj, d, nd, transposed = conv_parts(case, ts)
    weights = None if is_fn(case) else state(case, dtype)
    dil = tup(d.get("dilation", 1), nd)
    if all(v == 1 for v in dil):
        dil = (2,) * nd
        w = d["weight"] if is_fn(case) else weights["weight"]
        x = d["input"] if is_fn(case) else forward_args(case, ts)[0][0]
        pad = d.get("padding", 0)
        if not transposed and not isinstance(pad, str):
            for size, p, k in zip(x.shape[-nd:], tup(pad, nd), w.shape[2:]):
                if size + 2 * p < 2 * (k - 1) + 1:
                    na("input smaller than the kernel dilated by 2")
    d["dilation"] = dil
    return obj, d, weights, nd, dil


def zero_inserted(w, dil):
    """The kernel with dilation-1 zeros between its taps: a dilation-1 kernel of size dilation*(k-1)+1."""
    size = [d * (k - 1) + 1 for k, d in zip(w.shape[2:], dil)]
    out = w.new_zeros(tuple(w.shape[:2]) + tuple(size))
    out[(slice(None), slice(None)) + tuple(slice(None, None, d) for d in dil)] = w
    return out


def dilated_conv(case, inputs, dtype=None):
    """The convolution with its dilation."""
    return planned_conv(case, inputs, dilated, dtype)


def zero_inserted_conv(case, inputs):
    """The same convolution with dilation 1 and the zero-inserted kernel."""
    ts = case.to_torch(inputs)
    obj, d, weights, nd, dil = dilated(case, ts)
    if is_fn(case):
        d.update(weight=zero_inserted(d["weight"], dil), dilation=1)
        return case.flatten(run_conv(case, obj, d, None))
    weights["weight"] = zero_inserted(weights["weight"], dil)
    d.update(dilation=1, kernel_size=tuple(weights["weight"].shape[2:]))
    return case.flatten(run_conv(case, obj, d, forward_args(case, ts), weights))
