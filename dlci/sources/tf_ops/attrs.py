"""The values of a candidate's attributes: by role (``roles.ATTR_ROLES``: values from the inputs' shapes and layout),
one method per role in :data:`ATTR_VALUES`; an attribute without one keeps its default, takes another allowed
value or a flipped flag.
"""
from __future__ import annotations

from dlci.sources.tf_ops.candidate import _Ctx, _attr_len, _divisors, _list_attr
from dlci.sources.tf_ops.plan import _NODEFAULT, _Attr, _Skip
from dlci.sources.tf_ops.roles import _INTERP, SUPPORTED


class _AttrValues:
    """The builder's attributes (a part of :class:`dlci.sources.tf_ops.build._Builder`)."""

    def _attr(self, a: _Attr) -> None:
        c = self.c
        v = self._attr_value(a)
        if v is not _NODEFAULT:
            c.values[a.name] = v

    def _attr_value(self, a: _Attr):
        c = self.c
        s = list(c.shape) if c.shape is not None else [3, 4]
        value = ATTR_VALUES.get(a.role)
        if value is not None:
            return value(self, a, c, s, len(s), c.rng, a.default)
        d = a.default
        # no role: the default, another allowed value, a flipped flag
        if a.type == "bool":
            base = d if isinstance(d, bool) else False
            return bool(c.pick([base, not base], 0.7))
        if a.allowed and a.type == "string":
            opts = ([d] if d is not _NODEFAULT else []) + [x for x in a.allowed if x != d]
            return c.pick(opts, 0.6)
        if d is _NODEFAULT:
            if a.allowed:
                return c.pick(list(a.allowed), 0.6)
            raise _Skip(f"unknown-attr:{a.name}")
        return d

    def _attr_ksize(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        k = int(c.pick([2, 3, 1], 0.5))
        return _list_attr(c, [k] * c.spatial, _attr_len(c, a))

    def _attr_strides_attr(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        st = int(c.pick([1, 2], 0.6))
        return _list_attr(c, [st] * c.spatial, _attr_len(c, a))

    def _attr_dilations(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        if d is not _NODEFAULT and d == [] and self.p.attr("data_format") is not None:
            return d
        dl = int(c.pick([1, 2], 0.8))
        if dl == 2:
            st = c.values.get("strides")
            if isinstance(st, list) and any(x != 1 for x in st):
                dl = 1
        return _list_attr(c, [dl] * c.spatial, _attr_len(c, a))

    def _attr_padding(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        opts = [x for x in (a.allowed or ("VALID", "SAME")) if x in ("VALID", "SAME", "EXPLICIT")]
        if d is not _NODEFAULT:
            opts = [d] + [x for x in opts if x != d]
        return c.pick(opts or ["VALID"], 0.45)

    def _attr_explicit_paddings(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        if c.values.get("padding") == "EXPLICIT":
            n = _attr_len(c, self.p.attr("strides")) if self.p.attr("strides") else c.spatial + 2
            sp = self.c.spatial_axes() if len(s) == n else list(range(1, n - 1))
            return [1 if (j // 2) in sp else 0 for j in range(2 * n)]
        return d if d is not _NODEFAULT else []

    def _attr_data_format(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return c.values.get(a.name, d)

    def _attr_resize_flag(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        if a.name == "half_pixel_centers" and c.values.get("align_corners"):
            return False
        return bool(c.pick([d if d is not _NODEFAULT else False, not d if isinstance(d, bool) else True], 0.6))

    def _attr_mask(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        n = len(c.values.get("begin", s)) if isinstance(c.values.get("begin"), list) else r
        return 0 if c.first else int(c.pick([0, int(rng.integers(0, 2 ** max(1, n)))], 0.6))

    def _attr_mask_bit(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        n = len(c.values.get("begin", s)) if isinstance(c.values.get("begin"), list) else r
        return 0 if c.first else int(c.pick([0, 1 << int(rng.integers(0, max(1, n)))], 0.8))

    def _attr_axis_attr(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        if self.p.name == "Pack" or self.p.name == "ParallelConcat":
            return int(c.pick([0, r, -1, int(rng.integers(-r - 1, r + 1))], 0.5))
        if self.p.name == "OneHot":
            return int(c.pick([-1, 0], 0.6))
        if r == 0:
            return d if d is not _NODEFAULT else 0
        return int(c.pick([d if isinstance(d, int) and not isinstance(d, bool) else 0,
                           int(rng.integers(-r, r))], 0.5))

    def _attr_squeeze(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        ones = [k for k, x in enumerate(s) if x == 1]
        return c.pick([[], ones[:1]] if ones else [[]], 0.5)

    def _attr_num(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        ax = c.values.get("axis", 0)
        return c.dim(ax if isinstance(ax, int) else 0, 1) if r else 1

    def _attr_num_split(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        ss = next((c.values[i.kw] for i in self.p.inputs if i.role == "size_splits" and i.kw in c.values), None)
        if isinstance(ss, list):
            return len(ss)
        ax = c.values.get("axis", 0)
        dd = c.dim(ax if isinstance(ax, int) else 0, 1)
        divs = _divisors(dd)
        return int(c.pick(divs[1:] + divs[:1] if len(divs) > 1 else divs, 0.6))

    def _attr_num_partitions(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return int(c.pick([2, 3], 0.5))

    def _attr_seq_dim(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return 1 if r > 1 else 0

    def _attr_batch_dim(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return 0

    def _attr_block_size(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return 2

    def _attr_k_attr(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        last = s[-1] if s else 1
        return int(rng.integers(1, last + 1)) if not c.first else min(2, last)

    def _attr_flag(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return bool(c.pick([d if isinstance(d, bool) else False, not d if isinstance(d, bool) else True], 0.5))

    def _attr_shape_attr(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        if self.p.name == "ParallelConcat":
            vals = c.values.get("values")
            n = len(vals) if isinstance(vals, list) else 2
            return [n * (s[0] if s else 1)] + s[1:]
        return s

    def _attr_equation(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return c.values.get("equation", "ij->ji")

    def _attr_boundaries(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return c.pick([[-1.0, 0.0, 1.0], [0.0], [-0.5, 0.5, 2.0, 3.0]], 0.5)

    def _attr_interpolation(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return c.pick(a.allowed or _INTERP, 0.6)

    def _attr_kernel_type(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return c.pick(["lanczos3", "triangle", "gaussian", "box"], 0.5)

    def _attr_noise(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return "uniform" if d is _NODEFAULT else d

    def _attr_mode(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        opts = list(a.allowed) or (["REFLECT", "SYMMETRIC"] if d is _NODEFAULT else [d])
        if d is not _NODEFAULT and d in opts:
            opts = [d] + [x for x in opts if x != d]
        return c.pick(opts, 0.5)

    def _attr_window_size(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return 4

    def _attr_stride(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return 2

    def _attr_small_count(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return 1

    def _attr_qbound(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return float(d) if d is not _NODEFAULT else (-6.0 if a.name == "min" else 6.0)

    def _attr_last_axis(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return -1

    def _attr_format_string(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        return d if d is not _NODEFAULT else "NHWC"

    def _attr_dtype(self, a: _Attr, c: _Ctx, s: list[int], r: int, rng, d):
        opts = [x for x in (a.allowed or SUPPORTED) if x in SUPPORTED]
        if d is not _NODEFAULT:
            opts = [d] + [x for x in opts if x != d]
        if not opts:
            return d if d is not _NODEFAULT else _NODEFAULT
        if self.p.name == "Bitcast":
            return c.pick([x for x in opts if x.startswith(("int", "uint", "float"))] or opts, 0.3)
        used = set(c.dtypes.values())  # a cast to the input's own dtype is no cast: other dtypes first
        return c.pick(sorted(opts, key=lambda t: (t != d, t in used, SUPPORTED.index(t))), 0.5)


# attribute role -> its value (roles.ATTR_ROLES, and "dtype" for a type attribute not inferred from the inputs)
ATTR_VALUES = {
    "ksize": _AttrValues._attr_ksize,
    "strides_attr": _AttrValues._attr_strides_attr,
    "dilations": _AttrValues._attr_dilations,
    "padding": _AttrValues._attr_padding,
    "explicit_paddings": _AttrValues._attr_explicit_paddings,
    "data_format": _AttrValues._attr_data_format,
    "resize_flag": _AttrValues._attr_resize_flag,
    "mask": _AttrValues._attr_mask,
    "mask_bit": _AttrValues._attr_mask_bit,
    "axis_attr": _AttrValues._attr_axis_attr,
    "squeeze": _AttrValues._attr_squeeze,
    "num": _AttrValues._attr_num,
    "num_split": _AttrValues._attr_num_split,
    "num_partitions": _AttrValues._attr_num_partitions,
    "seq_dim": _AttrValues._attr_seq_dim,
    "batch_dim": _AttrValues._attr_batch_dim,
    "block_size": _AttrValues._attr_block_size,
    "k_attr": _AttrValues._attr_k_attr,
    "flag": _AttrValues._attr_flag,
    "shape_attr": _AttrValues._attr_shape_attr,
    "equation": _AttrValues._attr_equation,
    "boundaries": _AttrValues._attr_boundaries,
    "interpolation": _AttrValues._attr_interpolation,
    "kernel_type": _AttrValues._attr_kernel_type,
    "noise": _AttrValues._attr_noise,
    "mode": _AttrValues._attr_mode,
    "window_size": _AttrValues._attr_window_size,
    "stride": _AttrValues._attr_stride,
    "small_count": _AttrValues._attr_small_count,
    "qbound": _AttrValues._attr_qbound,
    "last_axis": _AttrValues._attr_last_axis,
    "format_string": _AttrValues._attr_format_string,
    "dtype": _AttrValues._attr_dtype,
}
