"""The values of a candidate's constant arguments (index, shape, count and scalar roles: ``roles.INPUT_ROLES``), one
method per role in :data:`CONST_VALUES`: graph constants in the call, the way models present them to converters.
"""
from __future__ import annotations

import re

import numpy as np

from dlci.sources.tf_ops.candidate import _Ctx, _Rt, _const_dtype, _divisors, _list_attr, _primary_shape, _scalar_for
from dlci.sources.tf_ops.plan import _In, _Skip


class _ConstValues:
    """The builder's constant arguments (a part of :class:`dlci.sources.tf_ops.build._Builder`)."""

    def _const(self, inp: _In):
        c = self.c
        role = inp.role
        s = list(c.shape) if c.shape is not None else [3, 4]
        r = len(s)
        value = CONST_VALUES.get(role)
        if value is None:
            raise _Skip(f"no-role-value:{role}")
        return value(self, inp, c, s, r, c.rng)

    def _const_axis(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        if r == 0:
            return c.pick([[], 0], 0.7)
        a = int(rng.integers(-r, r)) if not c.first else r - 1
        b = sorted({a % r, int(rng.integers(0, r))})
        return c.pick([a, [a], b, r, []], 0.55)

    def _const_axes(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        return c.pick([[r - 1] if r else [0], list(range(max(0, r - 2), r))], 0.5)

    def _const_perm(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        return list(range(r))[::-1] if c.first else [int(x) for x in rng.permutation(r)]

    def _const_input_sizes(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        img = _primary_shape(c) if self.p.kind in ("image", "volume") else [1, 5, 5, 3]
        c.shape = img
        return img

    def _const_paddings(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        bs = c.values.get("block_shape")
        if not isinstance(bs, list) and isinstance(c.values.get("block_size"), int) and r == 4:
            bs = [c.values["block_size"]] * 2  # SpaceToBatch: 2-D paddings making H, W divisible
        if isinstance(bs, list):
            sp = s[1:1 + len(bs)]
            return [[0, (-d) % b] for d, b in zip(sp, bs)]
        pads = []
        for d in s:
            hi = max(0, min(2, d - 1))
            pads.append([int(rng.integers(0, hi + 1)), int(rng.integers(0, hi + 1))])
        if "FusedPad" in self.p.name or self.p.attr("mode") is not None:
            pads = [[min(x, max(0, d - 1)) for x in pr] for pr, d in zip(pads, s)]
        return c.pick([pads, [[0, 0]] * r, [[1, 1]] * r], 0.7)

    def _const_block_shape(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        m = max(1, r - 2)
        return c.pick([[2] * m, [2] + [1] * (m - 1), [1] * m], 0.6)

    def _const_crops(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        bs = c.values.get("block_shape")
        m = len(bs) if isinstance(bs, list) else max(1, r - 2)
        return c.pick([[[0, 0]] * m, [[0, 1]] + [[0, 0]] * (m - 1)], 0.7)

    def _const_begin(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        return self._slice()

    def _const_end_or_strides(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        return c.values.get(f"_{inp.role}", [1] * r)

    def _const_size(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        if "begin" in c.values or any(i.role == "begin" for i in self.p.inputs):
            if "_size" in c.values:
                return c.values["_size"]
            return [-1] * r
        if self.p.kind in ("image", "volume"):
            h, w = (s[1], s[2]) if r == 4 else (4, 4)
            return c.pick([[2 * h, 2 * w], [max(1, h - 1), w + 2], [3, 5], [h, w]], 0.5)
        return int(c.pick([5, 3, 1], 0.6))

    def _const_multiples(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        return [int(x) for x in rng.integers(1, 3, r)] if not c.first else [2] + [1] * (r - 1)

    def _const_k(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        if self.p.has_input("diagonal", "padding_value") or self.p.kind == "matrix":
            return c.pick([0, 1, -1, [-1, 1]], 0.5)
        last = s[-1] if s else 1
        return int(rng.integers(1, last + 1)) if not c.first else min(2, last)

    def _const_n(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        last = s[-1] if s else 1
        return int(rng.integers(0, last))

    def _const_ksize(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        k = int(c.pick([2, 3, 1], 0.5))
        return _list_attr(c, [k] * c.spatial, r)

    def _const_fft_length(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        n = 1 if re.search(r"FFT$", self.p.name) else (3 if "3D" in self.p.name else
                                                        (2 if "2D" in self.p.name else max(1, min(r, 2))))
        dims = s[-n:] if r >= n else [4] * n
        if self.p.name.startswith("IRFFT"):
            dims = dims[:-1] + [2 * (dims[-1] - 1) if dims[-1] > 1 else 1]
        return c.pick([dims, [max(1, d - 1) for d in dims], [d + 1 for d in dims]], 0.6)

    def _const_shift(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        ax = c.values.get("axis")
        if isinstance(ax, list):
            return [int(x) for x in rng.integers(-3, 4, len(ax))]
        return int(rng.integers(-3, 4))

    def _const_size_splits(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        ax = c.values.get("axis", 0)
        ax = ax if isinstance(ax, int) else 0
        d = c.dim(ax, 4)
        if d <= 1:
            return [d]
        cut = int(rng.integers(1, d))
        return c.pick([[cut, d - cut], [cut, -1], [d]], 0.6)

    def _const_indices(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        return self._indices(inp)

    def _const_segment_ids(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        n = c.dim(0, 4) if r else 1
        idx = next((c.values[i.kw] for i in self.p.inputs if i.role == "indices" and i.kw in c.values), None)
        if idx is not None:
            n = len(np.asarray(idx.array if isinstance(idx, _Rt) else idx).reshape(-1))
        k = int(rng.integers(1, max(1, n // 2 + 1) + 1)) if n else 1
        # every segment below the largest id holds a row: empty segments come only from num_segments
        ids = np.sort(np.concatenate([np.arange(min(k, n)), rng.integers(0, k, max(0, n - k))])).astype(int)
        if "Unsorted" in self.p.name:
            ids = rng.permutation(ids)
        c.values["_segments"] = int(ids.max()) + 1 if ids.size else 1
        return [int(x) for x in ids]

    def _const_num_segments(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        return int(c.values.get("_segments", 3)) + int(c.pick([0, 1], 0.7))

    def _const_partitions(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        k = int(c.values.get("num_partitions", 2))
        shape = c.pick([s[:1], s], 0.5) if r else []
        return rng.integers(0, k, shape).tolist()

    def _const_seq_lengths(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        bd = int(c.values.get("batch_dim", 0))
        sd = int(c.values.get("seq_dim", 1))
        n, t = c.dim(bd, 2), c.dim(sd, 3)
        return [int(x) for x in rng.integers(0, t + 1, n)]

    def _const_box_ind(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        nb = self._boxes_n()
        return [int(x) for x in rng.integers(0, max(1, c.dim(0, 1)), nb)]

    def _const_targets(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        return [int(x) for x in rng.integers(0, max(1, s[-1] if s else 1), s[0] if s else 1)]

    def _const_count(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        name = inp.name
        if name in ("num_rows", "num_cols"):
            return -1
        if name == "num_bits":
            return int(c.pick([8, 4], 0.7))
        if name in ("num_lower", "num_upper"):
            return int(c.pick([1, -1, 0, 2], 0.4))
        return int(c.pick([4, 3, 2, 1], 0.5))

    def _const_dims_mask(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        return [bool(x) for x in rng.random(r) < 0.5]

    def _const_shape(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        return self._shape_value(inp)

    def _const_scalar(self, inp: _In, c: _Ctx, s: list[int], r: int, rng):
        return self._scalar(inp)

    def _scalar(self, inp: _In):
        c = self.c
        dtype = _const_dtype(c, inp)
        name = inp.name
        table = {"on_value": 1.0, "off_value": 0.0, "value": 1.5, "constant_values": 2.0, "padding_value": 0.0,
                 "clip_value_min": -0.5, "clip_value_max": 0.5, "start": 0.0, "limit": 6.0, "stop": 3.0,
                 "delta": 1.0, "iou_threshold": 0.5, "score_threshold": 0.1, "overlap_threshold": 0.5,
                 "soft_nms_sigma": 0.5, "nms_threshold": 0.7, "min_size": 0.0, "contrast_factor": 1.5,
                 "extrapolation_value": 0.0, "fill_value": 0.0, "default_value": 0.0, "l2_regularizer": 0.0}
        if name == "delta" and self.p.has_input("images"):
            return float(c.pick([0.2, -0.1], 0.5))
        if name == "value_range":
            return [-2.0, 2.0]
        x = table.get(name, 1.0)
        if not c.first and name in ("start", "limit", "delta", "clip_value_min", "clip_value_max", "value",
                                    "constant_values"):
            x = {"start": c.pick([0.0, -2.0, 1.0]), "limit": c.pick([6.0, 5.0, 9.0]),
                 "delta": c.pick([1.0, 2.0, 3.0]), "clip_value_min": c.pick([-0.5, 0.0, -2.0]),
                 "clip_value_max": c.pick([0.5, 1.0, 2.0]), "value": c.pick([1.5, -3.0, 0.0]),
                 "constant_values": c.pick([2.0, -1.0, 0.0])}[name]
        return _scalar_for(dtype, x)

    def _slice(self):
        """begin; end, strides and Slice's size kept for their own roles."""
        c = self.c
        rng = c.rng
        s = list(c.shape) if c.shape is not None else [3, 4]
        r = len(s)
        n = r if (c.first or rng.random() < 0.75) else max(0, r - 1)
        begin, end, strides = [], [], []
        mode = "forward" if c.first else c.pick(["forward", "step", "negative"], 0.5)
        for j, d in enumerate(s[:n]):
            if c.first:
                b = 1 if j == 1 and d > 1 else 0
                begin.append(b), end.append(d), strides.append(1)
            elif mode == "negative" and d > 1:
                b = int(rng.integers(1, d))
                begin.append(b), end.append(0 if rng.random() < 0.6 else -d - 1), strides.append(-1)
            else:
                b = int(rng.integers(0, d)) if d else 0
                e = int(rng.integers(b + 1, d + 1)) if d > b else d
                begin.append(b), end.append(e), strides.append(2 if mode == "step" and rng.random() < 0.6 else 1)
        c.values["_end"], c.values["_strides"] = end, strides
        c.values["_size"] = [e - b if st == 1 else -1 for b, e, st in zip(begin, end, strides)]
        return begin

    def _indices(self, inp: _In):
        c = self.c
        rng = c.rng
        s = list(c.shape) if c.shape is not None else [4]
        r = len(s)
        if (self.prim is None and not any(i.role == "updates" for i in self.p.inputs)) or not s:
            # the indices are the data (OneHot, UnravelIndex): values below the default depth / size
            return rng.integers(0 if c.first else -1, 4, c.pick([[3], [2, 3], []], 0.6)).tolist()
        ax = c.values.get("axis", 0)
        ax = ax if isinstance(ax, int) and not isinstance(ax, bool) else 0
        m = max(1, s[ax % r])
        one = rng.integers(0, m, int(c.pick([3, 2, 1, 5], 0.5))).tolist()
        if inp.name == "i":  # InplaceAdd & co: distinct rows
            return sorted(rng.permutation(s[0])[:max(1, min(2, s[0]))].tolist())
        if self.p.has_input("segment_ids"):
            return rng.integers(0, s[0], int(c.pick([4, 3, 5], 0.5))).tolist()
        k = min(r, 2) if c.first else int(rng.integers(1, r + 1))
        nd = np.stack([rng.integers(0, d, 3) for d in s[:k]], -1).tolist()
        if any(i.role == "updates" for i in self.p.inputs) or "Nd" in self.p.name or inp.name == "sparse_indices":
            if not any(i.role == "data" for i in self.p.inputs):
                c.values["_scatter_shape"] = s  # ScatterNd: the output shape
            return nd
        two = rng.integers(0, m, (2, 2)).tolist()
        return c.pick([one, two, nd], 0.6)

    def _shape_value(self, inp: _In):
        c = self.c
        rng = c.rng
        if "_scatter_shape" in c.values:
            return list(c.values["_scatter_shape"])
        s = list(c.shape) if c.shape is not None else [3, 4]
        numel = int(np.prod(s)) if s else 1
        divs = _divisors(numel)
        a = int(divs[int(rng.integers(0, len(divs)))])
        reshape = [a, numel // a]
        opts = [reshape, [-1], [numel // a, -1], [2] + s, s, [1] + s]
        if self.prim is None or self.p.has_input("value") and self.p.name == "Fill":
            return c.pick([[2, 3], [4], [1, 2, 3], []], 0.6)
        if re.search(r"Broadcast|Ones|Zeros", self.p.name):
            opts = [[2] + s, [3] + s, s]
        return c.pick(opts, 0.45)


# constant role -> its value (roles.INPUT_ROLES; an input role with no entry here is data)
CONST_VALUES = {
    "axis": _ConstValues._const_axis,
    "axes": _ConstValues._const_axes,
    "perm": _ConstValues._const_perm,
    "input_sizes": _ConstValues._const_input_sizes,
    "paddings": _ConstValues._const_paddings,
    "block_shape": _ConstValues._const_block_shape,
    "crops": _ConstValues._const_crops,
    "begin": _ConstValues._const_begin,
    "end": _ConstValues._const_end_or_strides,
    "strides": _ConstValues._const_end_or_strides,
    "size": _ConstValues._const_size,
    "multiples": _ConstValues._const_multiples,
    "k": _ConstValues._const_k,
    "n": _ConstValues._const_n,
    "ksize": _ConstValues._const_ksize,
    "fft_length": _ConstValues._const_fft_length,
    "shift": _ConstValues._const_shift,
    "size_splits": _ConstValues._const_size_splits,
    "indices": _ConstValues._const_indices,
    "segment_ids": _ConstValues._const_segment_ids,
    "num_segments": _ConstValues._const_num_segments,
    "partitions": _ConstValues._const_partitions,
    "seq_lengths": _ConstValues._const_seq_lengths,
    "box_ind": _ConstValues._const_box_ind,
    "targets": _ConstValues._const_targets,
    "count": _ConstValues._const_count,
    "dims_mask": _ConstValues._const_dims_mask,
    "shape": _ConstValues._const_shape,
    "scalar": _ConstValues._const_scalar,
}
