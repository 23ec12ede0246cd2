"""NumPy reference of TF's NHWC 2-D convolutions (child side).

Imported by the TF children of test_kernels_conv.py, test_kernels_depthwise.py
and test_kernels_fused.py (conftest's PRELUDE puts this folder on sys.path);
NumPy only, no TensorFlow.

Geometry is TF's output size and padding for one convolution (SAME, VALID
or EXPLICIT; strides, dilations), and each filter tap's strided view of the
zero-padded input. The references sum, in float64, one product per tap:
a matrix product per group for Conv2D (groups = in_depth / filter in_depth),
a broadcast product for DepthwiseConv2dNative (output channel c*m + k is
input channel c times filter [.., c, k]). The backprops are their exact
adjoints. The same functions on |x|, |w|, |dy| give the sum of |terms| each
error bound needs (the callers' sum_bound).

Strides are (h, w) or one int for both (the depthwise ops allow no other).
"""
import numpy as np


def _pair(s):
    return (s, s) if isinstance(s, int) else tuple(s)


def attrs(strides, pad, dil, explicit, nchw=False):
    """Keyword attributes of TF's Conv2D and DepthwiseConv2dNative families;
    explicit: (top, bottom, left, right) or None."""
    sh, sw = _pair(strides)
    sp = lambda h, w: [1, 1, h, w] if nchw else [1, h, w, 1]
    kw = {"strides": sp(sh, sw), "padding": pad, "dilations": sp(*dil),
          "explicit_paddings": [], "data_format": "NCHW" if nchw else "NHWC"}
    if explicit is not None:
        kw["explicit_paddings"] = [0, 0, 0, 0, *explicit[:2], *explicit[2:]] if nchw else \
            [0, 0, *explicit[:2], *explicit[2:], 0, 0]
    return kw


def dim(n, k, s, d, pad, ex):
    """(outputs, padding before, padding after) along one spatial dimension
    of size n, filter size k, stride s, dilation d; ex: EXPLICIT's
    (before, after)."""
    ek = (k - 1) * d + 1
    if pad == "SAME":
        out = -(-n // s)
        before = max((out - 1) * s + ek - n, 0) // 2
    elif pad == "VALID":
        out, before = (n - ek + s) // s, 0
    else:
        before = ex[0]
        out = (n + ex[0] + ex[1] - ek) // s + 1
    out = max(out, 0)
    after = max((out - 1) * s + ek - n - before, 0)
    return out, before, after


class Geometry:
    """One convolution of an NHWC input of shape xs with an HWIO filter of
    shape fs (depthwise: [kh, kw, in_depth, multiplier]); ys is the output
    shape."""

    def __init__(self, xs, fs, strides, pad, dil, explicit, depthwise=False):
        self.xs, self.fs, self.s, self.d = xs, fs, _pair(strides), dil
        self.depthwise = depthwise
        self.oh, self.pt, self.pb = dim(xs[1], fs[0], self.s[0], dil[0], pad,
                                        explicit[:2] if explicit else None)
        self.ow, self.pl, self.pr = dim(xs[2], fs[1], self.s[1], dil[1], pad,
                                        explicit[2:] if explicit else None)
        if depthwise:
            self.groups = 1
            self.ys = (xs[0], self.oh, self.ow, fs[2] * fs[3])
        else:
            self.groups = xs[3] // fs[2] if fs[2] else 1
            self.ys = (xs[0], self.oh, self.ow, fs[3])

    def pad(self, x):
        return np.pad(x, ((0, 0), (self.pt, self.pb), (self.pl, self.pr), (0, 0)))

    def crop(self, x):
        return x[:, self.pt:self.pt + self.xs[1], self.pl:self.pl + self.xs[2], :]

    def taps(self, xp):
        """(i, j, view of xp read by tap (i, j): [n, oh, ow, c])."""
        (sh, sw), (dh, dw) = self.s, self.d
        for i in range(self.fs[0]):
            for j in range(self.fs[1]):
                v = xp[:, i * dh:i * dh + (self.oh - 1) * sh + 1:sh,
                       j * dw:j * dw + (self.ow - 1) * sw + 1:sw, :]
                yield i, j, v[:, :self.oh, :self.ow]


def fwd_ref(G, x, w):
    """The convolution of x with w, float64."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    y = np.zeros(G.ys)
    if G.depthwise:
        for i, j, v in G.taps(G.pad(x)):
            y += (v[..., :, None] * w[i, j]).reshape(y.shape)
        return y
    ci, co = w.shape[2], w.shape[3]
    cog = co // G.groups if G.groups else 0
    for i, j, v in G.taps(G.pad(x)):
        for g in range(G.groups):
            y[..., g * cog:(g + 1) * cog] += v[..., g * ci:(g + 1) * ci] @ \
                w[i, j, :, g * cog:(g + 1) * cog]
    return y


def bpi_ref(G, w, dy):
    """The input gradient for output gradient dy (ungrouped), float64."""
    w, dy = w.astype(np.float64), dy.astype(np.float64)
    dxp = G.pad(np.zeros(G.xs))
    if G.depthwise:
        c, m = G.fs[2], G.fs[3]
        dy4 = dy.reshape(dy.shape[:3] + (c, m))
        for i, j, v in G.taps(dxp):
            v += (dy4 * w[i, j]).sum(-1)
    else:
        for i, j, v in G.taps(dxp):
            v += dy @ w[i, j].T
    return G.crop(dxp)


def bpf_ref(G, x, dy):
    """The filter gradient for output gradient dy (ungrouped), float64."""
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    dw = np.zeros(G.fs)
    if G.depthwise:
        c, m = G.fs[2], G.fs[3]
        dy4 = dy.reshape(dy.shape[:3] + (c, m))
        for i, j, v in G.taps(G.pad(x)):
            dw[i, j] = (v[..., :, None] * dy4).sum((0, 1, 2))
        return dw
    n = dy.shape[0] * dy.shape[1] * dy.shape[2]
    for i, j, v in G.taps(G.pad(x)):
        dw[i, j] = v.reshape(n, v.shape[3]).T @ dy.reshape(n, dy.shape[3])
    return dw


def stuffed(w, dil):
    """The undilated filter equivalent to w with dilations dil (zeros
    between the taps): how TF CPU, which lacks some dilated kernels, runs
    the same computation."""
    kh, kw_, c, o = w.shape
    out = np.zeros(((kh - 1) * dil[0] + 1, (kw_ - 1) * dil[1] + 1, c, o), w.dtype)
    out[::dil[0], ::dil[1]] = w
    return out


def error_args(a0, a1, dys, kw):
    """(args, attrs) of an error case: a tuple is a shape (an array of ones),
    a list a sizes vector as given; dys the out_backprop's shape or None;
    kw overrides stride 1 and SAME padding."""
    args = [np.ones(a0, np.float32) if isinstance(a0, tuple) else a0,
            np.ones(a1, np.float32) if isinstance(a1, tuple) else a1]
    if dys is not None:
        args.append(np.ones(dys, np.float32))
    return args, dict({"strides": [1, 1, 1, 1], "padding": "SAME"}, **kw)
