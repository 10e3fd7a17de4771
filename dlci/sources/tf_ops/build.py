"""Building one candidate of a raw op (:class:`_Builder`): its arguments filled role by role from the operator's plan
(data inputs by :data:`DATA_SHAPES`, constants by ``consts.CONST_VALUES``, attributes by ``attrs.ATTR_VALUES``),
moved into the operator's value domain (:func:`dlci.operators.facts.value_domains`), then made a call.
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np

from dlci.operators.facts import DOMAINS_OUT, value_domains
from dlci.sources import stable_seed
from dlci.sources.tf_ops.attrs import _AttrValues
from dlci.sources.tf_ops.candidate import (_Cand, _Ctx, _Rt, _choose_dtypes, _const_dtype, _conv_out, _data_dtype,
                                           _floatish, _primary_shape, _related_shape, _spd, _spec, _values)
from dlci.sources.tf_ops.consts import _ConstValues
from dlci.sources.tf_ops.plan import _NODEFAULT, _In, _Plan, _Skip
from dlci.sources.tf_ops.roles import (_CONST_ROLES, _EQUATIONS, _FLOAT_ONLY_DOMAINS, _INDEX_ROLES, _RUNTIME_OK,
                                       BOUNDARY_DOMAINS, DOMAINS, INPUT_PRIORITY)


class _Builder(_ConstValues, _AttrValues):
    """Fills one candidate's arguments, role by role."""

    def __init__(self, p: _Plan, index: int):
        self.p = p
        self.index = index
        rng = np.random.default_rng(stable_seed("tf_ops", p.name, str(index)))
        self.c = _Ctx(p, rng, first=index == 0)
        self.domain_used = False  # whether some data input drew its values from the candidate's domain
        self.constraints = value_domains(p.name)

    def build(self) -> _Cand:
        c, p = self.c, self.p
        _choose_dtypes(c)
        df = p.attr("data_format")
        if df is not None:
            opts = [df.default] if df.default is not _NODEFAULT else []
            opts += [v for v in df.allowed if v not in opts]
            c.layout = str(c.pick(opts or ["NHWC"], p0=0.9))
            c.values[df.name] = c.layout
            if c.layout in ("CHANNELS_LAST", "CHANNELS_FIRST"):
                c.layout = "NHWC" if c.layout == "CHANNELS_LAST" else "NCHW"
            c.spatial = max(1, len(c.layout) - 2)
        ks = p.attr("ksize") or p.attr("ksizes") or p.attr("strides")
        if ks is not None and isinstance(ks.default, list) and len(ks.default) >= 3:
            c.spatial = len(ks.default) - 2
        r = int(c.rng.random() * 1e9)  # the value domain is drawn independently of the shapes
        dom_rng = np.random.default_rng(r)
        if c.first:
            c.domain = "normal"
        else:
            u = dom_rng.random()
            c.domain = (DOMAINS[int(dom_rng.integers(0, len(DOMAINS)))] if u < 0.72 else
                        BOUNDARY_DOMAINS[int(dom_rng.integers(0, len(BOUNDARY_DOMAINS)))])
        if any(c.domain in DOMAINS_OUT.get(k, ()) for k in self.constraints):
            c.domain = "normal"
        self.eq = None
        if p.attr("equation") is not None:
            self.eq = c.pick(_EQUATIONS, 0.3)
            c.values["equation"] = self.eq[0]
        # the primary data shape: the first data input, or input_sizes (transposed convolutions)
        prim_roles = ("data", "input_sizes", "counts_data", "cond", "boxes", "sorted")
        prim = next((i for i in p.inputs if i.role in prim_roles), None)
        c.shape = _primary_shape(c)
        if prim is not None and prim.role == "boxes":
            c.shape = list(c.pick([[5, 4], [1, 3, 1, 4], [1, 3, 4]], 0.4))
        elif prim is not None and prim.role == "sorted":
            c.shape = list(c.pick([[2, 5], [3, 4], [1, 6]], 0.5))
        self.prim = prim
        order = sorted(range(len(p.inputs)), key=lambda k: (self._priority(p.inputs[k]), k))
        attr_first = [a for a in p.attrs if a.role in ("ksize", "strides_attr", "dilations", "padding",
                                                        "explicit_paddings", "axis_attr", "seq_dim", "batch_dim",
                                                        "num_partitions", "block_size", "k_attr", "mode")]
        for a in attr_first:
            self._attr(a)
        for k in order:
            inp = p.inputs[k]
            if inp.kw not in c.values:
                self._input(inp)
        for a in p.attrs:
            if a.name not in c.values:
                self._attr(a)
        self._constrain()
        return self._finish()

    def _constrain(self) -> None:
        """Moves the filled-in data into the operator's value domain (dlci.operators.facts.TF_VALUE_DOMAINS)."""
        c, rng = self.c, self.c.rng
        data = [(i, c.values[i.kw]) for i in self.p.inputs if isinstance(c.values.get(i.kw), _Rt)]
        for k in self.constraints:
            if k == "shift_below_width":
                for inp, v in data:
                    if inp.name == "y" and v.array.dtype.kind in "iu":
                        bits = v.array.dtype.itemsize * 8
                        v.array = rng.integers(0, bits, v.array.shape).astype(v.array.dtype)
            elif k == "in_range_cast":
                dst = str(c.values.get("DstT", ""))
                if dst.startswith(("int", "uint")):
                    info = np.iinfo(dst)
                    for _, v in data:
                        a = v.array
                        if a.dtype.kind in "fc":
                            a = np.nan_to_num(np.real(a).astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0)
                            # half the range: the float's own rounding never carries it past the end
                            v.array = np.clip(a, info.min // 2, info.max // 2).astype(v.array.dtype)
            elif k == "well_conditioned":
                inp, v = data[0] if data else (None, None)
                a = v.array if v is not None else None
                if a is not None and a.ndim >= 2 and a.shape[-1] == a.shape[-2] and a.dtype.kind in "fc":
                    n = a.shape[-1]
                    m = rng.uniform(-1, 1, a.shape)
                    if "Triangular" in self.p.name:  # read from one triangle: the other is noise it ignores
                        m = np.where(np.eye(n, dtype=bool), 0, m)
                    # |diagonal| > n >= the sum of each row's other entries: diagonally dominant, cond <= 2n
                    diag = rng.choice([-1.0, 1.0], a.shape[:-1]) * (n + rng.uniform(0.5, 1.5, a.shape[:-1]))
                    v.array = (m + diag[..., None] * np.eye(n)).astype(a.dtype)
                    c.notes.append("well-conditioned")
            elif k == "hermitian":
                inp, v = data[0] if data else (None, None)
                a = v.array if v is not None else None
                if a is not None and a.ndim >= 2 and a.shape[-1] == a.shape[-2] and a.dtype.kind in "fc":
                    if "Cholesky" in self.p.name:
                        v.array = _spd(rng, a.shape, str(a.dtype))
                    else:
                        h = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
                        v.array = ((h + np.conj(np.swapaxes(h, -1, -2))) / 2).astype(a.dtype)

    def _priority(self, inp: _In) -> int:
        if inp is self.prim:
            return 0
        return INPUT_PRIORITY.get(inp.role, 5)

    # -- inputs ------------------------------------------------------------------------------------------------
    def _input(self, inp: _In) -> None:
        c = self.c
        role = inp.role
        if inp is self.prim and role not in ("input_sizes",):
            self._data(inp, list(c.shape) if c.shape is not None else [3, 4], primary=True)
            return
        if role in _CONST_ROLES:
            c.values[inp.kw] = self._const(inp)
            return
        s = list(c.shape) if c.shape is not None else [3, 4]
        shape = DATA_SHAPES.get(role)
        if shape is not None:
            shape = shape(self, inp, c, s)
        elif self.eq is not None:
            shape = list(self.eq[1][min(len(self.eq[1]) - 1, 1)])
        else:
            shape = _related_shape(c, "data")
        self._data(inp, shape)

    def _boxes_n(self) -> int:
        for i in self.p.inputs:
            if i.role == "boxes" and i.kw in self.c.values:
                v = self.c.values[i.kw]
                a = v.array if isinstance(v, _Rt) else None
                if a is not None and a.ndim >= 2:
                    return a.shape[1] if a.ndim >= 3 else a.shape[0]
        return 3

    def _data(self, inp: _In, shape: list[int], primary: bool = False) -> None:
        c = self.c
        dtype = _data_dtype(c, inp)
        role = inp.role
        domain = c.domain
        if role == "channel" and inp.name in ("variance", "scale"):
            domain = "positive"
        if inp.is_list:
            n = max(inp.min_len, int(c.pick([2, 3, 1], 0.6)))
            if self.eq is not None:
                shapes = [list(x) for x in self.eq[1]]
            else:
                shapes = [list(shape)] * n
            dtypes = [dtype] * len(shapes)
            if inp.type_attr is None and not inp.fixed:  # a type list: mixed dtypes
                dtypes = [inp.allowed[k % len(inp.allowed)] for k in range(len(shapes))]
            c.values[inp.kw] = [_Rt(self._array(sh, dt, domain, role, inp.name)) for sh, dt in zip(shapes, dtypes)]
            return
        c.values[inp.kw] = _Rt(self._array(shape, dtype, domain, role, inp.name))

    def _array(self, shape, dtype: str, domain: str, role: str, name: str = "") -> np.ndarray:
        c = self.c
        rng = c.rng
        if role == "boxes":
            lo = rng.uniform(0, 0.5, tuple(shape[:-1]) + (2,))
            hi = lo + rng.uniform(0.1, 0.5, lo.shape)
            return np.concatenate([lo, hi], -1).astype(dtype)[..., [0, 1, 2, 3]]
        if role == "scores":
            return rng.uniform(0, 1, shape).astype(dtype)
        if role == "shape_vec":
            s = list(c.shape or [2, 3, 4])
            v = s if name == "s0" else s[1:] or [1]
            v = [1 if (x > 1 and rng.random() < 0.3) else x for x in v]
            return np.asarray(v, dtype)
        if role == "transforms":
            t = np.tile(np.asarray([1, 0, 0, 0, 1, 0, 0, 0], np.float64), (shape[0], 1))
            t[:, :6] += rng.uniform(-0.2, 0.2, (shape[0], 6))
            return t.astype(dtype)
        if role == "offsets":
            return rng.uniform(-0.5, 0.5, shape).astype(dtype)
        if role == "colors":
            return rng.uniform(0, 1, shape).astype(dtype)
        if role == "vec2":
            return rng.uniform(0.5, 2.0, shape).astype(dtype) if name == "scale" else \
                rng.uniform(-1, 1, shape).astype(dtype)
        if role == "qrange":
            sign = -1.0 if name.endswith("min") else 1.0
            return (sign * rng.uniform(0.5, 3.0, shape)).astype(dtype)
        if role == "sorted" and dtype != "bool":
            return np.sort(_values(rng, shape, dtype, "normal" if domain in BOUNDARY_DOMAINS else domain), axis=-1)
        if role == "counts_data" and dtype.startswith(("int", "uint")):
            return rng.integers(0, 5, shape).astype(dtype)
        self.domain_used = True
        if (self.p.kind == "matrix" and len(shape) >= 2 and shape[-1] == shape[-2] and _floatish(dtype)
                and domain in ("normal", "positive") and (c.first or rng.random() < 0.5)):
            c.notes.append("spd")
            return _spd(rng, shape, dtype)
        return _values(rng, shape, dtype, domain)

    def _filter_shape(self, inp: _In) -> list[int]:
        c = self.c
        s = c.shape or [1, 5, 5, 3]
        ch = s[c.channel_axis] if len(s) >= 3 else 3
        ksz = c.values.get("ksize")
        k = int(c.pick([2, 3, 1], 0.5)) if not isinstance(ksz, list) else max(ksz)
        out = int(c.pick([2, 3, 1], 0.6))
        spatial = c.spatial
        if self.p.has_input("out_backprop") and "input_sizes" in c.values:
            spatial = len(c.values["input_sizes"]) - 2
        opts = [[k] * spatial + [ch, out], [k] * spatial + [ch]]
        if self.p.kind == "image" and "Dilation" in self.p.name:
            opts.reverse()
        shape = c.pick(opts, 0.85)
        self.filter_shape = shape
        return shape

    def _conv_output_shape(self) -> list[int]:
        c = self.c
        if "input_sizes" in c.values:
            img = list(c.values["input_sizes"])
        else:
            v = next((c.values[i.kw] for i in self.p.inputs if i is self.prim), None)
            img = list(v.array.shape) if isinstance(v, _Rt) else list(c.shape or [1, 5, 5, 3])
        fshape = getattr(self, "filter_shape", None) or [2, 2, img[-1], 2]
        spatial = len(img) - 2
        strides = c.values.get("strides") or [1] * (spatial + 2)
        dil = c.values.get("dilations") or [1] * (spatial + 2)
        padding = c.values.get("padding", "VALID")
        ep = c.values.get("explicit_paddings") or [0] * (2 * (spatial + 2))
        axes = list(range(2, spatial + 2)) if c.layout.startswith("NC") else list(range(1, spatial + 1))
        out = list(img)
        for j, ax in enumerate(axes):
            out[ax] = _conv_out(img[ax], fshape[j], strides[ax] if len(strides) > ax else 1,
                                dil[ax] if len(dil) > ax else 1, padding, (ep[2 * ax], ep[2 * ax + 1])
                                if len(ep) > 2 * ax + 1 else (0, 0))
        depthwise = "Depthwise" in self.p.name
        ch_ax = 1 if c.layout.startswith("NC") else -1
        out[ch_ax] = fshape[-1] * (fshape[-2] if depthwise and len(fshape) >= 2 else 1)
        return out

    def _updates_shape(self) -> list[int]:
        c = self.c
        idx = next((c.values[i.kw] for i in self.p.inputs if i.role == "indices" and i.kw in c.values), None)
        idx = np.asarray(idx.array if isinstance(idx, _Rt) else idx) if idx is not None else np.zeros((2, 1), int)
        s = list(c.shape or [4, 3])
        if idx.ndim >= 2:
            k = idx.shape[-1]
            return list(idx.shape[:-1]) + s[k:]
        return [int(idx.size)] + s[1:]

    def _scores_shape(self) -> list[int]:
        nb = self._boxes_n()
        return self.c.pick([[nb], [1, nb, 2]], 0.7)

    # -- the call ----------------------------------------------------------------------------------------------
    def _finish(self) -> _Cand:
        c, p = self.c, self.p
        kwargs: dict[str, Any] = {}
        consts: dict[str, Any] = {}
        for inp in p.inputs:
            v = c.values.get(inp.kw, _NODEFAULT)
            if v is _NODEFAULT:
                raise _Skip(f"unfilled:{inp.kw}")
            kwargs[inp.kw] = v
            if not isinstance(v, (_Rt, list)) or (isinstance(v, list) and not any(isinstance(x, _Rt) for x in v)):
                consts[inp.kw] = v
        runtime = [k for k, v in kwargs.items() if isinstance(v, _Rt) or
                   (isinstance(v, list) and v and isinstance(v[0], _Rt))]
        arrays = [x.array for v in kwargs.values() for x in (v if isinstance(v, list) else [v]) if isinstance(x, _Rt)]
        if c.domain in _FLOAT_ONLY_DOMAINS and not any(_floatish(str(a.dtype)) for a in arrays) \
                or not self.domain_used:
            c.domain = "normal"  # integer / bool data, or no data input drawn from the domain at all
        runtime_arg = None
        if not runtime:
            # no runtime input at all: the first index / scalar argument becomes one (a model has an input)
            order = sorted((i for i in p.inputs if i.kw in consts),
                           key=lambda i: ({"indices": 0, "scalar": 1, "counts_data": 2}.get(i.role, 3)))
            if not order:
                raise _Skip("no-runtime-input")
            self._to_runtime(order[0], kwargs, consts)
            runtime_arg = order[0].kw
        elif not c.first and c.rng.random() < 0.22:
            cands = [i for i in p.inputs if i.kw in consts and i.role in _RUNTIME_OK]
            if cands:
                inp = cands[int(c.rng.integers(0, len(cands)))]
                if self._to_runtime(inp, kwargs, consts):
                    runtime_arg = inp.kw
        for a in p.attrs:
            if a.name in c.values and not a.name.startswith("_"):
                kwargs[a.name] = c.values[a.name]
                consts[a.name] = c.values[a.name]
        kwargs = {k: kwargs[k] for k in [i.kw for i in p.inputs] + [a.name for a in p.attrs] if k in kwargs}
        detail = self._detail(kwargs, consts, runtime_arg)
        return _Cand(self.index, kwargs, {k: v for k, v in consts.items()}, c.domain, runtime_arg, detail)

    def _to_runtime(self, inp: _In, kwargs: dict, consts: dict) -> bool:
        v = consts[inp.kw]
        dtype = _const_dtype(self.c, inp)
        if inp.role in _INDEX_ROLES and not dtype.startswith(("int", "uint")):
            dtype = "int32" if "int32" in inp.allowed else next((t for t in inp.allowed if t.startswith("int")),
                                                                inp.allowed[0])
        try:
            arr = np.asarray(v, dtype=dtype)
        except (TypeError, ValueError):
            return False
        if arr.dtype == object:
            return False
        kwargs[inp.kw] = _Rt(arr)
        del consts[inp.kw]
        return True

    def _detail(self, kwargs: dict, consts: dict, runtime_arg: str | None) -> str:
        parts = []
        for k, v in kwargs.items():
            if isinstance(v, _Rt):
                parts.append(f"{k}:{_spec(v.array)}")
            elif isinstance(v, list) and v and isinstance(v[0], _Rt):
                parts.append(f"{k}:[{','.join(_spec(x.array) for x in v)}]")
        text = " ".join(parts)
        if self.c.domain != "normal":
            text += f" {self.c.domain}"
        for note in dict.fromkeys(self.c.notes):  # spd, well-conditioned
            text += f" {note}"
        shown = []
        for k, v in consts.items():
            a = self.p.attr(k)
            if a is not None and a.default is not _NODEFAULT and a.default == v:
                continue
            js = json.dumps(v, separators=(",", ":"))
            shown.append(f"{k}={js if len(js) <= 32 else js[:29] + '...'}")
        if shown:
            text += " " + " ".join(shown)
        if runtime_arg:
            text += f" runtime:{runtime_arg}"
        return text


# a data input's shape by its role (roles.DATA_ROLES), from the primary shape ``s``; any other data input takes an
# einsum operand's shape, or a shape related to the primary one (broadcasting, matmul partners)
DATA_SHAPES = {
    "filter": lambda b, inp, c, s: b._filter_shape(inp),
    "out_backprop": lambda b, inp, c, s: b._conv_output_shape(),
    "channel": lambda b, inp, c, s: c.pick([[c.dim(c.channel_axis) if s else 3], []], 0.85),
    "qrange": lambda b, inp, c, s: c.pick([[], [c.dim(-1) if s else 3]], 0.6),
    "cond": lambda b, inp, c, s: c.pick([s, s[1:] if s else [], []], 0.7),
    "updates": lambda b, inp, c, s: b._updates_shape(),
    "boxes": lambda b, inp, c, s: c.pick([[3, 4], [s[0] if s else 1, 2, 4], [1, 3, 1, 4]], 0.5),
    "scores": lambda b, inp, c, s: b._scores_shape(),
    "rhs": lambda b, inp, c, s: _related_shape(c, "rhs"),
    "sorted": lambda b, inp, c, s: c.pick([s, [2, 5], [6]], 0.3),
    "counts_data": lambda b, inp, c, s: s,
    "scalar_data": lambda b, inp, c, s: [],
    "shape_vec": lambda b, inp, c, s: [len(s)] if inp.name == "s0" else [max(1, len(s) - 1)],
    "transforms": lambda b, inp, c, s: c.pick([[1, 8], [s[0] if s else 1, 8]], 0.5),
    "offsets": lambda b, inp, c, s: [s[0] if s else 1, 2],
    "colors": lambda b, inp, c, s: c.pick([[2, 4], [1, 3]], 0.6),
    "vec2": lambda b, inp, c, s: [2],
}
