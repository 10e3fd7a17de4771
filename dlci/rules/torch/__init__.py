"""PyTorch equivalence rules: for one operator instance, two graphs that must agree (see dlci.rules.base).

This module declares the rules; their graphs are functions in the modules next to it (one per category or concern:
``optimization``, ``conv``, ``dim_lift``, ``formula``, ``sparse``, ``image_scale``, ``time_major``, ``batch``,
``dtypes``, ``pad``, ``save_load``, ``layout``, ``autograd``; shared helpers in ``common`` and ``docs``), named by
``"module:function"`` so that listing the rules imports no torch. Applicability (``why_not``) comes from metadata
(``meta``: OpInfo / ModuleInfo attributes, aten operator tags, signatures, the documentation's Shape sections);
where a graph derives the applicable form from the documentation (batch dims, time-major layout, dimension lifting),
``why_not`` runs that same derivation, so the planner and the reproducer can never disagree.

No rule for two EAGLE categories, because PyTorch lacks the feature:
  - separable (5): PyTorch has no separable-convolution API (only grouped conv, covered by ``torch.depthwise``);
  - codec (13): torch ships no image codec (torchvision is not part of the stack).
"""
from __future__ import annotations

from dlci.rules.base import Rule
from dlci.rules.torch import meta

LIB = "torch"
_M = "dlci.rules.torch."
PLAIN = _M + "common:plain"  # graph A of most rules: the instance as it is

# torch.export refusing a program (data-dependent shapes, dynamo's unsupported constructs) is a documented limit
_EXPORT_UNSUPPORTED = (r"torch\._dynamo\.exc\.(Unsupported|UserError)", r"^Unsupported:", r"^UserError:",
                       r"GuardOnDataDependentSymNode", r"[Dd]ata.dependent", r"Could not guard on",
                       r"Could not extract specialized integer", r"unbacked", r"non-tensor output",
                       r"not a valid output", r"^TorchRuntimeError: Dynamo failed to run FX node with fake tensors",
                       r"^(DataDependentOutputException|DynamicOutputShapeException):")
# the op's sparse kernels do not cover this layout/rank/argument combination: a documented coverage gap
_SPARSE_UNSUPPORTED = (r"with arguments from the '(Sparse|SparseCsr)CPU' backend", r"not implemented for '?Sparse",
                       r"NotImplementedError", r"(sparse|Sparse)[^\n]*(not supported|unsupported|is not implemented)",
                       r"does not (have|support) (strides|is_contiguous)", r"expected .*strided",
                       r"to_sparse_csr[^\n]*(dimension|dim)", r"Sparse CSR tensors",
                       r"only supports strided", r"is_coalesced", r"unsupported layout", r"layout",
                       r"expects explicit mask", r"is unsupported", r"operands have incompatible sizes")
_VMAP_UNSUPPORTED = (r"vmap: .*(not supported|It looks like you're|data-dependent|does not support)",
                     r"Batching rule not implemented", r"vmap.*\.item\(\)", r"randomness")
# index arguments must be int64 ("Expected a long tensor for index", "dtype of indices should be Long"): the int32
# copy of an index input is outside what the operator accepts, not a wrong result
_INT32_UNSUPPORTED = (r"(?i)\blong\b", r"(?i)\bint64\b", r"LongTensor")
_AUTOGRAD_UNSUPPORTED = (r"[Tt]rying to use forward AD", r"not implemented for forward", r"does not support forward",
                         r"forward AD", r"[Ff]orward grad", r"functorch|torch\.func|vmap", r"does not require grad",
                         r"derivative for .* is not implemented", r"not differentiable",
                         r"Cannot access data pointer of Tensor that doesn't have storage")
_BATCH_DERIVED = ("dim 0 is a batch dim: aten pointwise tag, or the (module form's) documented Shape section, with "
                  "dim / normalized_shape / reduction / batch statistics not reducing dim 0")
_batch_dims = meta.derivation(_M + "batch:batch_slots")

RULES = [
    # -- 1. optimization
    Rule(name="torch.compile.inductor", category="optimization", library=LIB,
         summary="torch.compile (inductor, fullgraph=False) must compute what eager PyTorch computes",
         graph_a="the instance in eager mode",
         graph_b="torch.compile(model, backend='inductor')(inputs), dynamo reset per test",
         graph_a_fn=PLAIN, graph_b_fn=_M + "optimization:compile_run", why_not=meta.compile_checked,
         needs=("torch._inductor",), timeout=240.0,
         derived_from="every torch instance, minus OpInfo.skip_correctness_check_compile_vs_eager"),
    Rule(name="torch.jit.script", category="optimization", library=LIB,
         summary="a TorchScript-compiled call must compute what the Python call computes",
         graph_a="the instance in eager mode",
         graph_b="torch.jit.script(module) / torch.jit.CompilationUnit of a function calling the operator",
         graph_a_fn=PLAIN, graph_b_fn=_M + "optimization:script_run",
         why_not=meta.opinfo_flag("supports_scripting"),
         # the scripted signature is typed from the annotations: a call the annotations exclude is refused
         unsupported=(r"^RuntimeError: cannot script", r"Expected a value of type .* for argument"),
         derived_from="OpInfo.supports_scripting (functions); every module (scripting refusals: unsupported)"),
    Rule(name="torch.jit.trace", category="optimization", library=LIB,
         summary="a traced graph replayed on the tracing inputs must compute what eager PyTorch computes",
         graph_a="the instance in eager mode", graph_b="torch.jit.trace(model, inputs)(inputs)",
         graph_a_fn=PLAIN, graph_b_fn=_M + "optimization:trace_run", why_not=meta.opinfo_flag("supports_tracing"),
         unsupported=(r"Only tensors, lists, tuples of tensors, or dictionary of tensors can be output",
                      r"[Tt]racer cannot infer type", r"cannot be traced", r"not supported in tracing",
                      r"Tracing .* is currently not supported"),
         derived_from="OpInfo.supports_tracing (functions); every module"),
    Rule(name="torch.export", category="optimization", library=LIB,
         summary="an exported program's module must compute what eager PyTorch computes",
         graph_a="the instance in eager mode", graph_b="torch.export.export(model, inputs).module()(inputs)",
         graph_a_fn=PLAIN, graph_b_fn=_M + "optimization:export_run", unsupported=_EXPORT_UNSUPPORTED,
         timeout=120.0, derived_from="every torch instance (export's refusals of a program are unsupported)"),
    # -- 2. same padding
    Rule(name="torch.same_padding", category="same_padding", library=LIB,
         summary="conv(padding='same') must equal F.pad by dilation*(k-1) (odd amount at the end) then "
                 "conv(padding=0)",
         graph_a="the convolution with stride 1, padding='same'",
         graph_b="explicit F.pad (the module's padding_mode) then the convolution with padding 0",
         graph_a_fn=_M + "conv:same_padding", graph_b_fn=_M + "conv:explicit_padding",
         why_not=meta.all_of(meta.conv_like, meta.not_transposed, meta.string_padding),
         unsupported=(r"not implemented for 'Long'|\"slow_conv\w*\" not implemented",),
         derived_from="signature has weight+groups (kernel_size+groups for modules); padding accepts 'same' "
                      "(constructor annotation / function docs); not transposed (output_padding)"),
    # -- 3. dim lift
    Rule(name="torch.dim_lift", category="dim_lift", library=LIB,
         summary="an N-d operator must equal its (N+1)-d form on the input with a size-1 spatial dim inserted",
         graph_a="the instance (1-d or 2-d operator)",
         graph_b="the 2-d/3-d sibling with a leading size-1 spatial dim (kernel 1, stride 1, padding 0) then squeezed",
         graph_a_fn=PLAIN, graph_b_fn=_M + "dim_lift:lifted", why_not=meta.derivation(_M + "dim_lift:lift_plan"),
         derived_from="name suffix 1d/2d with an importable (N+1)d sibling; the input rank must be a documented "
                      "form (Shape section) whose (N+1)-d form exists"),
    # -- 4. depthwise
    Rule(name="torch.depthwise", category="depthwise", library=LIB,
         summary="a grouped (depthwise) convolution must equal one plain convolution per group, concatenated",
         graph_a="the instance's grouped conv, or its depthwise variant (groups=in_channels, weight[:, :1]) if "
                 "groups=1",
         graph_b="per group: the channel slice through a groups=1 conv with that group's weights; torch.cat on "
                 "channels",
         graph_a_fn=_M + "conv:grouped_conv", graph_b_fn=_M + "conv:per_group",
         why_not=meta.all_of(meta.conv_like, meta.derivation(_M + "conv:grouped")),
         derived_from="signature has weight+groups (kernel_size+groups for modules)"),
    # -- 6. dilated
    Rule(name="torch.dilated", category="dilated", library=LIB,
         summary="a dilated convolution must equal the convolution with the zero-inserted kernel and dilation 1",
         graph_a="the conv with its dilation (dilation 2 when the instance has none and the input allows it)",
         graph_b="the same conv with dilation-1 zeros inserted between kernel taps, dilation 1",
         graph_a_fn=_M + "conv:dilated_conv", graph_b_fn=_M + "conv:zero_inserted_conv",
         why_not=meta.all_of(meta.conv_like, meta.derivation(_M + "conv:dilated")),
         unsupported=(r"output padding must be smaller than either stride or dilation",),
         derived_from="signature has weight+groups+dilation (kernel_size+groups for modules)"),
    # -- 7. formula
    Rule(name="torch.formula", category="formula", library=LIB,
         summary="an activation/normalization/pooling/loss API must equal the formula its documentation gives",
         graph_a="the instance",
         graph_b="the documented formula (torch.nn docs), evaluated in float64 and rounded to the output dtype",
         graph_a_fn=PLAIN, graph_b_fn=_M + "formula:documented_formula",
         why_not=meta.all_of(meta.float_input, meta.derivation(_M + "formula:formula_checks")),
         derived_from="the function's name (module: the F.<name> its forward calls) in the table of documented "
                      "formulas"),
    # -- 8. sparse
    Rule(name="torch.sparse.coo", category="sparse", library=LIB,
         summary="an operator on a sparse COO input (x.to_sparse()) must equal it on the dense input",
         graph_a="the instance on dense inputs", graph_b="input 0 as x.to_sparse(); sparse outputs .to_dense()",
         graph_a_fn=PLAIN, graph_b_fn=_M + "sparse:coo", why_not=meta.sparse_layout("supports_sparse"),
         unsupported=_SPARSE_UNSUPPORTED, derived_from="OpInfo.supports_sparse"),
    Rule(name="torch.sparse.csr", category="sparse", library=LIB,
         summary="an operator on a sparse CSR input (x.to_sparse_csr()) must equal it on the dense input",
         graph_a="the instance on dense inputs", graph_b="input 0 as x.to_sparse_csr(); sparse outputs .to_dense()",
         graph_a_fn=PLAIN, graph_b_fn=_M + "sparse:csr", why_not=meta.sparse_layout("supports_sparse_csr"),
         unsupported=_SPARSE_UNSUPPORTED, derived_from="OpInfo.supports_sparse_csr, input rank >= 2"),
    # -- 9. image scale
    Rule(name="torch.image_scale", category="image_scale", library=LIB,
         summary="a positively homogeneous operator: op(255 x) / 255 == op(x) (0-255 images vs normalized ones)",
         graph_a="the instance", graph_b="input 0 times 255, outputs divided by 255",
         graph_a_fn=PLAIN, graph_b_fn=_M + "image_scale:rescaled",
         why_not=meta.all_of(meta.float_input, meta.scale_in_range, meta.homogeneity_probe),
         derived_from="probe: f(c x) == c f(x) for c in 2, 255, 1/255 on random data of the instance's shape "
                      "(float64, other inputs as in the instance); first input floating; 255 x within float32"),
    # -- 10. time major
    Rule(name="torch.time_major", category="time_major", library=LIB,
         summary="a sequence module with batch_first flipped, on transposed inputs, must give the transposed "
                 "outputs",
         graph_a="the instance's module",
         graph_b="the same weights with batch_first flipped; the inputs/outputs whose documented shape depends on "
                 "batch_first transposed (dims 0, 1); unbatched inputs unchanged (batch_first is ignored for them)",
         graph_a_fn=PLAIN, graph_b_fn=_M + "time_major:other_layout",
         why_not=meta.all_of(meta.kind_is("torch_module"), meta.derivation(_M + "time_major:layout_plan")),
         derived_from="constructor with a batch_first parameter; which inputs/outputs: their docstring entries "
                      "mention batch_first; every forward tensor must have a documented shape"),
    # -- 11. pipeline
    Rule(name="torch.pipeline", category="pipeline", library=LIB,
         summary="feeding the batch through DataLoader(TensorDataset) in mini-batches must give the same outputs",
         graph_a="the instance on the whole batch",
         graph_b="DataLoader(TensorDataset(batch inputs), batch_size=ceil(N/2)), outputs concatenated",
         graph_a_fn=PLAIN, graph_b_fn=_M + "batch:data_loader", why_not=_batch_dims, derived_from=_BATCH_DERIVED),
    # -- 12. dtype
    Rule(name="torch.dtype.int32", category="dtype", library=LIB,
         summary="an integer operator on int64 values that fit int32 must give the same values in int32",
         graph_a="the instance in int64", graph_b="the int64 inputs as int32 (results must fit int32 too)",
         graph_a_fn=_M + "dtypes:in_int64", graph_b_fn=_M + "dtypes:in_int32_too",
         why_not=meta.all_of(meta.dtypes_have("int32", "int64"), meta.int64_inputs), unsupported=_INT32_UNSUPPORTED,
         derived_from="OpInfo/ModuleInfo dtypes (CPU) include int32 and int64; int64 inputs within int32"),
    Rule(name="torch.dtype.float64", category="dtype", library=LIB,
         summary="an operator that selects/moves values must give the same values in float32 and float64",
         graph_a="the operator in float64 on the float32 values, rounded back to float32",
         graph_b="the operator in float32 (the instance)",
         graph_a_fn=_M + "dtypes:float64_rounded", graph_b_fn=_M + "dtypes:float32_run",
         why_not=meta.all_of(meta.dtypes_have("float32", "float64"), meta.selection("float32", "float64")),
         derived_from="OpInfo/ModuleInfo dtypes (CPU) include float64; probe: on random data the results are "
                      "bit-identical across the dtypes and are input values (selection, not arithmetic)"),
    Rule(name="torch.dtype.float16", category="dtype", library=LIB,
         summary="on float16 values, an operator that selects/moves values must give the same values in float16 "
                 "and float32",
         graph_a="the operator in float32 on the inputs (and weights) rounded to float16, results rounded to "
                 "float16",
         graph_b="the operator in float16 on the same values",
         graph_a_fn=_M + "dtypes:float32_rounded", graph_b_fn=_M + "dtypes:float16_run",
         why_not=meta.all_of(meta.dtypes_have("float16", "float32"), meta.f16_range,
                             meta.selection("float16", "float32")),
         unsupported=(r"ComplexHalf",),
         derived_from="OpInfo/ModuleInfo dtypes (CPU) include float16; values within the float16 range; probe "
                      "as torch.dtype.float64"),
    # -- 14. pad -> unpad
    Rule(name="torch.pad_unpad", category="pad_unpad", library=LIB,
         summary="padding then slicing the padding off must give back the input exactly",
         graph_a="input 0", graph_b="the pad operator, then narrow() by the pad amounts on each padded dim",
         graph_a_fn=_M + "pad:first_input", graph_b_fn=_M + "pad:unpadded",
         why_not=meta.all_of(meta.documented_pad, meta.derivation(_M + "pad:no_cropping")), exact=True,
         derived_from="documented as padding (docstring 'Pads tensor' / 'Pads the input tensor'), no negative "
                      "pads"),
    # -- 15. batch
    Rule(name="torch.batch", category="batch", library=LIB,
         summary="in eval mode each sample's output must not depend on the rest of the batch",
         graph_a="the instance on the whole batch", graph_b="each sample alone (a batch of one), outputs concatenated",
         graph_a_fn=PLAIN, graph_b_fn=_M + "batch:one_by_one", why_not=_batch_dims, derived_from=_BATCH_DERIVED),
    Rule(name="torch.vmap", category="batch", library=LIB,
         summary="torch.vmap over the batch must equal the batched call",
         graph_a="the instance on the whole batch", graph_b="torch.vmap of the model over samples given as batches "
                                                            "of one",
         graph_a_fn=PLAIN, graph_b_fn=_M + "batch:vmapped", why_not=_batch_dims, unsupported=_VMAP_UNSUPPORTED,
         derived_from="as torch.batch"),
    # -- 16. save / load
    Rule(name="torch.save_load.state_dict", category="save_load", library=LIB,
         summary="a state_dict saved and loaded (weights_only=True) into a fresh module must reproduce the outputs",
         graph_a="the module", graph_b="a freshly built module (other initial weights) given the reloaded "
                                       "state_dict",
         graph_a_fn=PLAIN, graph_b_fn=_M + "save_load:fresh_state_dict", why_not=meta.has_state, exact=True,
         derived_from="torch_module instances with a state"),
    Rule(name="torch.save_load.module", category="save_load", library=LIB,
         summary="a whole module saved with torch.save and loaded back must reproduce the outputs",
         graph_a="the module", graph_b="torch.load(torch.save(module)) (weights_only=False)",
         graph_a_fn=PLAIN, graph_b_fn=_M + "save_load:pickled_module", why_not=meta.kind_is("torch_module"),
         exact=True, derived_from="torch_module instances"),
    Rule(name="torch.export.save_load", category="save_load", library=LIB,
         summary="an exported program saved as a .pt2 archive and loaded back must reproduce its outputs",
         graph_a="torch.export.export(model).module()", graph_b="the same program through torch.export.save / load",
         graph_a_fn=_M + "save_load:exported_program", graph_b_fn=_M + "save_load:reloaded_program", exact=True,
         unsupported=_EXPORT_UNSUPPORTED, timeout=120.0, derived_from="every torch instance torch.export accepts"),
    # -- beyond EAGLE: layout, autograd
    Rule(name="torch.channels_last", category="layout", library=LIB,
         summary="channels_last inputs (and weights) must give the values contiguous ones give",
         graph_a="the instance (contiguous)", graph_b="inputs .to(memory_format=channels_last[_3d]), module likewise",
         graph_a_fn=PLAIN, graph_b_fn=_M + "layout:channels_last", why_not=meta.spatial_input,
         derived_from="a 4-d or 5-d floating-point input"),
    Rule(name="torch.autograd.jvp_vjp", category="autograd", library=LIB,
         summary="forward-mode and reverse-mode derivatives must agree: <u, J v> == <J^T u, v> (float64)",
         graph_a="<u, J v>, J v from torch.func.jvp", graph_b="<J^T u, v>, J^T u from torch.func.vjp",
         graph_a_fn=_M + "autograd:forward_mode", graph_b_fn=_M + "autograd:reverse_mode",
         why_not=meta.all_of(meta.opinfo_flag("supports_forward_ad", missing_ok=False),
                             meta.opinfo_flag("supports_autograd", missing_ok=False), meta.derivatives_tested,
                             meta.float_input),
         unsupported=_AUTOGRAD_UNSUPPORTED,
         derived_from="OpInfo.supports_forward_ad and .supports_autograd, default gradcheck_wrapper, no skipped "
                      "derivative tests; a floating input; finite outputs"),
]
