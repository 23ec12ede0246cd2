/*
 * arith/dims.h - checked shape arithmetic, the part of the kernel framework
 * (sk.h) that needs no TensorFlow, so that tests/unit/test_dims.c can test
 * it alone (dims.c; library simdev_dims).
 *
 * Why it exists: TF's TensorShape aborts the process (a CHECK failure in
 * TensorShapeBase) when it is built from a negative dimension or from
 * dimensions whose element count overflows int64, and TF_AllocateOutput /
 * TF_AllocateTemp / TF_NewTensor build one from whatever dims they get. So
 * every shape a kernel computes (from input values such as num_segments or
 * a shape tensor, from attributes, or as sums and products of dims) is
 * checked here before any TF call: sk_output, sk_output_forward,
 * sk_output_alias and sk_temp do it for every kernel (launch.c), and the
 * sums and products kernels form on the way use sa_add_ok / sa_mul_ok (or
 * their failing forms sk_size_add / sk_size_mul in sk.h).
 *
 * TF's rule, which sa_dims_check follows exactly: dims are multiplied from
 * the first on; the shape is refused when one is negative or a partial
 * product overflows int64. A 0 makes every later product 0, so [0, 2**62, 4]
 * is a valid (empty) shape and [2**62, 4, 0] is not, as in TF.
 */
#ifndef SIMDEV_ARITH_DIMS_H_
#define SIMDEV_ARITH_DIMS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* a + b and a * b without wrapping: false (and *out unspecified) when the
 * exact result does not fit int64. */
static inline bool sa_add_ok(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}
static inline bool sa_mul_ok(int64_t a, int64_t b, int64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

/* Checks nd dims d (nd >= 0) of elements of elsize bytes (0: bytes not
 * checked) as TF's TensorShape and allocator will see them. Returns SIM_OK
 * (0) and sets *n to the element count; otherwise writes why into msg
 * (NUL-terminated, cut to len) and returns
 *   SIM_EINVAL  a dim < 0, or the element count overflows int64 (TF CPU
 *               raises InvalidArgument for both);
 *   SIM_ENOMEM  elements * elsize bytes exceed INT64_MAX (TF CPU's
 *               allocator refuses it: ResourceExhausted).
 * msg may be NULL when len is 0. */
int sa_dims_check(const int64_t* d, int nd, size_t elsize, int64_t* n,
                  char* msg, size_t len);

/* Row-major element strides of dims d: st[nd-1] = 1, st[i] = st[i+1] *
 * d[i+1]. For a shape with an element (count > 0) every stride fits int64
 * (it divides the count). For an empty one every stride is 0: no element is
 * addressed, and products of its dims need not fit int64 ([0, 2**62, 4]). */
void sa_dims_strides(const int64_t* d, int nd, int64_t* st);

/* "[2,3,4]" into buf (cut short, still NUL-terminated, if len is too
 * small; len > 0); returns buf. */
const char* sa_dims_str(const int64_t* d, int nd, char* buf, size_t len);

#endif /* SIMDEV_ARITH_DIMS_H_ */
