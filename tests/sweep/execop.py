"""A tf.raw_ops-like callable for ops tf.raw_ops lacks: TF's underscore ops
(_FusedConv2D, _FusedMatMul, _FusedDepthwiseConv2dNative, which Grappler
writes) and ops a plugin defines at load time.

op_fn(op, opdef)(**kw) takes the OpDef's inputs and attributes by name, as
tf.raw_ops.<Op> does (its signature lists the inputs first, in OpDef order,
which sweep.Call relies on). In eager mode it runs the op with
tensorflow.python.eager.execute.execute: type, list(type) and number
attributes are inferred from the inputs, the others taken from kw or the
OpDef's defaults. In a graph (the sweep's tf.function pass) it adds the op
with op_def_library._apply_op_helper, as TF's generated wrappers do.
"""
import inspect


def _default(value):
    """An AttrValue default as execute.execute takes it."""
    kind = value.WhichOneof("value")
    if kind == "list":
        lst = value.list
        for field in ("s", "i", "f", "b", "type"):
            if len(getattr(lst, field)):
                return list(getattr(lst, field))
        return []
    return getattr(value, kind) if kind else None


def _enum(v):
    import tensorflow as tf
    if isinstance(v, tf.DType):
        return v.as_datatype_enum
    if isinstance(v, (list, tuple)) and v and isinstance(v[0], tf.DType):
        return [t.as_datatype_enum for t in v]
    return v


def op_fn(op, opdef):
    import tensorflow as tf
    from tensorflow.python.eager import context, execute
    from tensorflow.python.framework import op_def_library

    def run(**kw):
        for a in opdef.input_arg:  # a list input left out is empty (host_args)
            if (a.number_attr or a.type_list_attr) and a.name not in kw:
                kw[a.name] = []
        if not tf.executing_eagerly():
            inferred = {x for a in opdef.input_arg
                        for x in (a.type_attr, a.number_attr, a.type_list_attr) if x}
            full = dict(kw)
            for at in opdef.attr:  # the helper wants every other attribute
                if at.name not in full and at.name not in inferred and \
                        at.HasField("default_value"):
                    full[at.name] = _default(at.default_value)
            # node names may not start with "_"
            return op_def_library._apply_op_helper(op, name=op.lstrip("_"), **full)[3]
        inputs, attrs = [], {}
        for a in opdef.input_arg:
            v = kw[a.name]
            vs = [tf.convert_to_tensor(t) for t in (v if isinstance(v, (list, tuple)) else [v])]
            if a.number_attr:
                attrs.setdefault(a.number_attr, len(vs))
            if a.type_list_attr:
                attrs.setdefault(a.type_list_attr, [t.dtype.as_datatype_enum for t in vs])
            if a.type_attr and vs:
                attrs.setdefault(a.type_attr, vs[0].dtype.as_datatype_enum)
            inputs += vs
        for at in opdef.attr:
            if at.name in kw:
                attrs[at.name] = _enum(kw[at.name])
            elif at.name not in attrs and at.HasField("default_value"):
                attrs[at.name] = _default(at.default_value)
        n_out = 0
        for a in opdef.output_arg:
            n_out += (attrs[a.number_attr] if a.number_attr else
                      len(attrs[a.type_list_attr]) if a.type_list_attr else 1)
        flat = []
        for k, v in attrs.items():
            flat += [k, v]
        out = execute.execute(op, n_out, inputs=inputs, attrs=tuple(flat),
                              ctx=context.context())
        return out[0] if n_out == 1 else out

    names = [a.name for a in opdef.input_arg] + [a.name for a in opdef.attr]
    run.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names])
    run.__name__ = op
    return run
