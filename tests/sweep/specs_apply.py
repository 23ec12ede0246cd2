"""Sweep specs of the training kernels (src/kernels/variables/apply.c,
registered on TF 2.16-2.18): ResourceApply* and ResourceSparseApply*.

Their variables cannot come from NumPy arguments, so the property (Spec.prop
"apply", sweep.apply_run) makes a tf.Variable of each of case.kwargs["vars"]
on the device, runs the op on their handles with the case's scalars,
gradient and (sparse) indices, and reads every variable back; SIMDEV's runs
must be bit-equal to each other and to TF CPU's (Spec.exact), or within
Spec.ulps where Eigen's vectorized rsqrt / pow / exp enter
(tests/tf/test_kernels_apply.py states the bounds). The bad inputs (shapes,
ranks, indices) and the numerics per dtype are test_kernels_apply.py's,
against TF CPU and a NumPy reference.
"""
from specs_core import Case, Spec, vals

POS, ANY = (0.1, 1.0), (-1.0, 1.0)
SCALARS = {"alpha": 0.25, "lr": 0.0625, "momentum": 0.875, "beta1_power": 0.9,
           "beta2_power": 0.999, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-3, "rho": 0.9,
           "l1": 0.03, "l2": 0.02, "l2_shrinkage": 0.01, "lr_power": -0.5, "logbase": 0.7,
           "sign_decay": 0.5, "beta": 0.875}
# name: (variables with their value ranges, scalars, gradient name,
#        exact against TF CPU?)
OPTS = {
    "GradientDescent": ([("var", ANY)], ["alpha"], "delta", True),
    "Momentum": ([("var", ANY), ("accum", ANY)], ["lr", "momentum"], "grad", True),
    "KerasMomentum": ([("var", ANY), ("accum", ANY)], ["lr", "momentum"], "grad", True),
    "Adam": ([("var", ANY), ("m", ANY), ("v", POS)],
             ["beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"], "grad", True),
    "AdamWithAmsgrad": ([("var", ANY), ("m", ANY), ("v", POS), ("vhat", POS)],
                        ["beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"],
                        "grad", True),
    "AdaMax": ([("var", ANY), ("m", ANY), ("v", POS)],
               ["beta1_power", "lr", "beta1", "beta2", "epsilon"], "grad", True),
    "RMSProp": ([("var", ANY), ("ms", POS), ("mom", ANY)], ["lr", "rho", "momentum", "epsilon"],
                "grad", True),
    "CenteredRMSProp": ([("var", ANY), ("mg", ANY), ("ms", POS), ("mom", ANY)],
                        ["lr", "rho", "momentum", "epsilon"], "grad", True),
    "Adagrad": ([("var", ANY), ("accum", POS)], ["lr"], "grad", False),
    "AdagradV2": ([("var", ANY), ("accum", POS)], ["lr", "epsilon"], "grad", True),
    "Adadelta": ([("var", ANY), ("accum", POS), ("accum_update", POS)], ["lr", "rho", "epsilon"],
                 "grad", False),
    "ProximalAdagrad": ([("var", ANY), ("accum", POS)], ["lr", "l1", "l2"], "grad", False),
    "Ftrl": ([("var", ANY), ("accum", POS), ("linear", ANY)], ["lr", "l1", "l2", "lr_power"],
             "grad", True),
    "FtrlV2": ([("var", ANY), ("accum", POS), ("linear", ANY)],
               ["lr", "l1", "l2", "l2_shrinkage", "lr_power"], "grad", True),
    "AddSign": ([("var", ANY), ("m", ANY)], ["lr", "alpha", "sign_decay", "beta"], "grad", True),
    "PowerSign": ([("var", ANY), ("m", ANY)], ["lr", "logbase", "sign_decay", "beta"], "grad",
                  False),
}
SPARSE = ["Adadelta", "Adagrad", "AdagradV2", "ProximalAdagrad", "Ftrl", "FtrlV2",
          "KerasMomentum"]


def _case(name, opt, shape, indices=None):
    varspec, scalars, gname, _ = OPTS[opt]
    vs = {n: vals(shape, lo, hi, key=k) for k, (n, (lo, hi)) in enumerate(varspec)}
    gshape = shape if indices is None else (len(indices),) + tuple(shape[1:])
    kw = {"vars": vs, "scalars": {s: SCALARS[s] for s in scalars},
          "grad": (gname, vals(gshape, -1.0, 1.0, key=9))}
    if indices is not None:
        kw["indices"] = list(indices)
    return Case(name, kw)


def _spec(opt, sparse):
    op = ("ResourceSparseApply" if sparse else "ResourceApply") + opt
    if sparse:
        cases = [_case("rows 5x3 dup", opt, (5, 3), [3, 0, 3]), _case("rows 4", opt, (4,), [1, 2])]
    else:
        cases = [_case("3x4", opt, (3, 4)), _case("scalar", opt, ())]
    exact = OPTS[opt][3] and not (sparse and opt.startswith("Ftrl"))
    return Spec(op, lambda quick, c=cases: c[:1] if quick else c,
                no_bad="the variables cannot be made from the sweep's NumPy arguments: the bad "
                       "inputs (shapes, ranks, indices, TF CPU's messages) are tests/tf/"
                       "test_kernels_apply.py's",
                no_huge="no shape is computed: the variables keep their shapes",
                exact=exact, ulps=0.0 if exact else 64.0,
                try_types=tuple(dict(T=t, **({"Tindices": "int32"} if sparse else {}))
                                for t in ("float32", "float64", "float16")),
                prop="apply")


OPS = [_spec(o, False) for o in OPTS] + [_spec(o, True) for o in SPARSE]
