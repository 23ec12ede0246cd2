/*
 * fused.c - the TF-side half of the fused ops' epilogue (fused.h): which
 * fusions a node asks for (construction) and its bias input (launch).
 *
 * TF's fused ops carry the fusion as attributes: fused_ops (a list of op
 * names), num_args (how many extra inputs: 1 for the bias), epsilon (for
 * FusedBatchNorm fusions) and leakyrelu_alpha. SIMDEV implements
 * ["BiasAdd"] and ["BiasAdd", act] for act in Relu, Relu6, Elu, LeakyRelu,
 * Tanh, Sigmoid. Anything else (the FusedBatchNorm and Add fusions, GELU,
 * num_args != 1, an unknown name) fails at construction, naming the fusion,
 * so a node SIMDEV cannot run never gives a wrong result. The messages are
 * TF CPU's where it has one for the same case.
 *
 * Thread contract: skf_attrs_read runs at kernel construction, skf_bias in
 * a compute function (TF's thread).
 */
#include "kernels/framework/fused.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* More fused_ops entries, or more bytes of names, than these cannot be a
 * supported fusion: refused with a count, without reading the names. */
#define SKF_MAX_OPS 8
#define SKF_STORAGE 512

static const struct {
  const char* name;
  enum sa_act act;
} kActs[] = {
    {"Relu", SA_ACT_RELU}, {"Relu6", SA_ACT_RELU6},
    {"Elu", SA_ACT_ELU},   {"LeakyRelu", SA_ACT_LEAKYRELU},
    {"Tanh", SA_ACT_TANH}, {"Sigmoid", SA_ACT_SIGMOID},
};

/* "[BiasAdd,Relu]" into buf, as TF CPU's messages print a fusion. */
static const char* ops_str(char** ops, const size_t* lens, int n, char* buf,
                           size_t len) {
  size_t at = 0;
  buf[0] = '\0';
  at += (size_t)snprintf(buf, len, "[");
  for (int i = 0; i < n && at < len; i++)
    at += (size_t)snprintf(buf + at, len - at, "%s%.*s", i ? "," : "",
                           (int)(lens[i] > 64 ? 64 : lens[i]), ops[i]);
  if (at < len) snprintf(buf + at, len - at, "]");
  return buf;
}

static bool is_op(const char* s, size_t n, const char* name) {
  return n == strlen(name) && memcmp(s, name, n) == 0;
}

/* Reads fused_ops into ops/lens (pointers into storage); *n its length. */
static bool read_ops(TF_OpKernelConstruction* c, char** ops, size_t* lens,
                     char* storage, int* n) {
  int32_t size = 0, total = 0;
  if (!sk_attr_size(c, "fused_ops", &size, &total)) return false;
  if (size > SKF_MAX_OPS || total > SKF_STORAGE) {
    sk_construction_fail(c, TF_UNIMPLEMENTED,
                         "Fusion is not implemented: %d fused ops (SIMDEV "
                         "fuses [BiasAdd] or [BiasAdd,<activation>])",
                         (int)size);
    return false;
  }
  *n = size > 0 ? size : 0;
  if (size <= 0) return true;
  return sk_attr_strings(c, "fused_ops", ops, lens, size, storage, SKF_STORAGE);
}

bool skf_attrs_read(TF_OpKernelConstruction* c, const char* what,
                    skf_attrs* out) {
  char* ops[SKF_MAX_OPS];
  size_t lens[SKF_MAX_OPS];
  char storage[SKF_STORAGE], shown[256];
  int n = 0;
  if (!read_ops(c, ops, lens, storage, &n)) return false;
  if (n == 0) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Fused %s must have at least one fused op.", what);
    return false;
  }
  out->act = SA_ACT_NONE;
  bool known = is_op(ops[0], lens[0], "BiasAdd") && n <= 2;
  if (known && n == 2) {
    known = false;
    for (size_t i = 0; i < sizeof(kActs) / sizeof(kActs[0]); i++) {
      if (is_op(ops[1], lens[1], kActs[i].name)) {
        out->act = kActs[i].act;
        known = true;
      }
    }
  }
  if (!known) {
    sk_construction_fail(
        c, TF_UNIMPLEMENTED,
        "Fusion is not implemented: %s (SIMDEV's fused %s implements "
        "[BiasAdd] and [BiasAdd,<Relu|Relu6|Elu|LeakyRelu|Tanh|Sigmoid>])",
        ops_str(ops, lens, n, shown, sizeof(shown)), what);
    return false;
  }
  int64_t num_args = 0;
  if (!sk_attr_int(c, "num_args", &num_args) ||
      !sk_attr_float(c, "leakyrelu_alpha", &out->alpha))
    return false;
  if (num_args != 1) {
    sk_construction_fail(c, TF_INVALID_ARGUMENT,
                         "Fused %s with BiasAdd must have one extra argument: "
                         "bias (SIMDEV got num_args = %lld)",
                         what, (long long)num_args);
    return false;
  }
  return true;
}

bool skf_bias(sk_launch* l, int input, int64_t channels, const sk_shape* out,
              const skf_attrs* at, TF_DataType dt, sa_epi* e) {
  TF_Tensor* b = sk_input(l, input);
  sk_shape bs;
  char s1[256], s2[256];
  if (b == NULL || !sk_shape_of(l, b, &bs)) return false;
  if (bs.nd != 1) {
    sk_fail(l, TF_INVALID_ARGUMENT, "bias must be 1-dimensional%s",
            sk_shape_str(&bs, s1, sizeof(s1)));
    return false;
  }
  if (TF_TensorType(b) != dt) {
    sk_fail(l, TF_INVALID_ARGUMENT, "bias must be %s like the input, got %s",
            sk_dtype_name(dt), sk_dtype_name(TF_TensorType(b)));
    return false;
  }
  if (bs.d[0] != channels) {
    sk_fail(l, TF_INVALID_ARGUMENT,
            "Must provide as many biases as the channel dimension of the "
            "output: %s vs. %s",
            sk_shape_str(&bs, s1, sizeof(s1)),
            sk_shape_str(out, s2, sizeof(s2)));
    return false;
  }
  *e = (sa_epi){(sa_dtype)dt, sk_data(b), at->act, at->alpha};
  return true;
}
