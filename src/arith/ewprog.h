/*
 * ewprog.h - elementwise expression programs: what `_SimdevFusedElementwise`
 * runs (prefix sa_ewprog_). Plain C, no TensorFlow: the graph optimizer's
 * elementwise pass (src/graph) includes it for the table of fusable ops
 * (sa_ewprog_arity), which is arith/ewops.h's rows: the same rows the
 * unfused SIMDEV kernels are generated from, so every fusable op has its
 * unfused kernel and every pure float elementwise kernel is fusable.
 *
 * The op (defined by the plugin, fused_elementwise.c):
 *   _SimdevFusedElementwise(x: N * T) -> y: T
 *   attrs T: {float, double}; N: int >= 1; program: string
 * y has the broadcast shape of all N inputs (NumPy/TF rules); each element
 * of y is the program evaluated on the inputs' elements at that position.
 *
 * A program is postfix (RPN), tokens separated by exactly one space:
 *   `$k`     push input k (0 <= k < N, decimal, no sign or leading zero)
 *   <OpName> a TF op name from the table: pop its arity operands, push the
 *            result. For a binary op the top of the stack is the SECOND
 *            operand: "$0 $1 Sub" is x0 - x1; "$0 $1 ReluGrad" is
 *            ReluGrad(gradients = x0, features = x1).
 * Every op has the semantics and operand order of TF's op of that name, and
 * simdev evaluates it with the same scalar function as its unfused SIMDEV
 * kernel (arith/scalar.h), in T, so a fused expression equals the chain of
 * unfused SIMDEV ops bit for bit. A program must leave exactly one value.
 * Inputs need not all be used (they still take part in the broadcast), and
 * may be pushed more than once ("$0 $0 Mul").
 *
 * Gradient ops (ReluGrad, TanhGrad, ...) broadcast here like the others;
 * TF's own kernels for them require equal shapes (or equal element counts,
 * for TanhGrad, SigmoidGrad, SqrtGrad, RsqrtGrad: then output = input 0's
 * shape). simdev's elementwise pass therefore never fuses them (it cannot
 * prove the shapes equal); the evaluator still runs them when asked.
 *
 * Thread contract: every function is reentrant; a parsed program and a plan
 * are read-only after they are made, shared by any number of threads.
 */
#ifndef SIMDEV_ARITH_EWPROG_H_
#define SIMDEV_ARITH_EWPROG_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits of a program (a longer one is InvalidArgument, never truncated). */
#define SA_EWPROG_MAX_INPUTS 16 /* N */
#define SA_EWPROG_MAX_OPS 64    /* op tokens */
#define SA_EWPROG_MAX_STACK 16  /* values on the stack at any point */
#define SA_EWPROG_MAX_LEN 4096  /* bytes of the program string */
/* Pushes are at most SA_EWPROG_MAX_OPS + 1 (one value must remain). */
#define SA_EWPROG_MAX_INS (2 * SA_EWPROG_MAX_OPS + 1)
/* Highest rank of the inputs (simdev's kernel limit, SK_MAX_DIMS). */
#define SA_EWPROG_MAX_DIMS 16

/* ---- the table ------------------------------------------------------- */

/* 1 (unary) or 2 (binary) for a TF op name the program may use; -1 when the
 * op is not in the table (NULL included). Case-sensitive, exact. */
int sa_ewprog_arity(const char* tf_op);
/* The table in order, for listing it: name of entry i (0 <= i <
 * sa_ewprog_count()), NULL outside. */
int sa_ewprog_count(void);
const char* sa_ewprog_name(int i);

/* ---- parsing --------------------------------------------------------- */

/* One instruction: push input `arg` (op < 0), or apply table entry `op`. */
typedef struct sa_ewprog_ins {
  int16_t op;
  int16_t arg;
} sa_ewprog_ins;

typedef struct sa_ewprog {
  int nins;      /* instructions */
  int nops;      /* of them ops */
  int max_depth; /* deepest stack */
  int ninputs;   /* N it was parsed for */
  sa_ewprog_ins ins[SA_EWPROG_MAX_INS];
} sa_ewprog;

/* Parses and validates `program` for n_inputs inputs. Returns true, or false
 * with a message in err (always NUL-terminated) naming the offending token
 * and its position: an unknown token, "$k" out of range, a stack underflow,
 * values left over, an empty program or token, or a limit exceeded. */
bool sa_ewprog_parse(const char* program, int n_inputs, sa_ewprog* out,
                     char* err, size_t errlen);

/* ---- broadcasting ---------------------------------------------------- */

/* The iteration space of one run: the output's dimensions collapsed (size-1
 * dimensions dropped, neighbours with the same pattern of broadcast inputs
 * merged), and each input's element stride per collapsed dimension (0 where
 * it is broadcast). `direct[k]`: input k has the output's shape, so element
 * i of the output reads element i of the input. */
typedef struct sa_ewprog_plan {
  int nin;
  int nd; /* >= 1 */
  int64_t n;
  int64_t d[SA_EWPROG_MAX_DIMS];
  int64_t s[SA_EWPROG_MAX_INPUTS][SA_EWPROG_MAX_DIMS];
  bool direct[SA_EWPROG_MAX_INPUTS];
} sa_ewprog_plan;

/* Broadcasts nin shapes (input k: rank[k] <= SA_EWPROG_MAX_DIMS dims in
 * dims[k]) into the output shape (*out_rank, out_dims) and plan. Returns
 * true, or false when two inputs do not broadcast: *bad_a and *bad_b are
 * then the first pair of inputs whose dimensions conflict. Empty inputs can
 * broadcast to a shape of more than 2**63 - 1 elements ([2**32,1,0] and
 * [1,2**32,0]): then plan->n is -1 and the plan is not filled in (the
 * kernel's sk_output refuses that shape). */
bool sa_ewprog_broadcast(int nin, const int* rank,
                         const int64_t (*dims)[SA_EWPROG_MAX_DIMS],
                         int* out_rank, int64_t* out_dims, sa_ewprog_plan* plan,
                         int* bad_a, int* bad_b);

/* ---- evaluation ------------------------------------------------------ */

/* Elements per block: the evaluator runs each instruction over this many
 * elements before the next, through a stack of block buffers on the calling
 * thread's stack (SA_EWPROG_MAX_STACK blocks of T). */
#define SA_EWPROG_BLOCK 256

/* Output elements [begin, end) of `plan`: out[i] = program(inputs at i), in
 * one pass over memory. in[k] is input k's data (float for _f32, double for
 * _f64). out may be an input with the output's shape (direct). Ranges of
 * one call per thread must not overlap. */
void sa_ewprog_eval_f32(const sa_ewprog* prog, const sa_ewprog_plan* plan,
                        const float* const* in, float* out, int64_t begin,
                        int64_t end);
void sa_ewprog_eval_f64(const sa_ewprog* prog, const sa_ewprog_plan* plan,
                        const double* const* in, double* out, int64_t begin,
                        int64_t end);

#endif /* SIMDEV_ARITH_EWPROG_H_ */
