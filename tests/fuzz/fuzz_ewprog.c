/*
 * fuzz_ewprog.c - libFuzzer target for _SimdevFusedElementwise's program
 * parser and evaluator (src/arith/ewprog.c, no TensorFlow). The program
 * string comes from a GraphDef attribute, i.e. from whoever wrote the
 * graph: any bytes must give a clean error or a program that evaluates
 * within its bounds.
 *
 * Input: byte 0 -> N (0..17, outside [1, 16] included), byte 1 -> which of
 * the N inputs are scalars (bit k; the others have 300 elements, more than
 * one evaluation block), the rest -> the program (cut at a NUL byte).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "arith/ewprog.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

enum { LEN = 300 };

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  int n = data[0] % 18;
  unsigned scalars = data[1];
  char* program = malloc(size - 1);
  if (program == NULL) return 0;
  memcpy(program, data + 2, size - 2);
  program[size - 2] = '\0';
  static sa_ewprog prog;
  char err[200];
  bool ok = sa_ewprog_parse(program, n, &prog, err, sizeof(err));
  free(program);
  if (!ok) {
    if (strlen(err) == 0) abort(); /* every refusal says why */
    return 0;
  }
  if (prog.nins < 1 || prog.max_depth > SA_EWPROG_MAX_STACK) abort();
  int rank[SA_EWPROG_MAX_INPUTS];
  int64_t dims[SA_EWPROG_MAX_INPUTS][SA_EWPROG_MAX_DIMS];
  static double xd[SA_EWPROG_MAX_INPUTS][LEN];
  static float xf[SA_EWPROG_MAX_INPUTS][LEN];
  const double* ind[SA_EWPROG_MAX_INPUTS];
  const float* inf[SA_EWPROG_MAX_INPUTS];
  for (int k = 0; k < n; k++) {
    rank[k] = k < 8 && ((scalars >> k) & 1) ? 0 : 1;
    dims[k][0] = LEN;
    for (int i = 0; i < LEN; i++) xd[k][i] = xf[k][i] = (float)(i - k) / 7;
    ind[k] = xd[k];
    inf[k] = xf[k];
  }
  static sa_ewprog_plan plan;
  int64_t out[SA_EWPROG_MAX_DIMS];
  int nd, a, b;
  if (!sa_ewprog_broadcast(n, rank, (const int64_t(*)[SA_EWPROG_MAX_DIMS])dims,
                           &nd, out, &plan, &a, &b))
    abort(); /* [300] and [] always broadcast */
  /* exact-size heap outputs: a write past the end is an ASan report */
  double* zd = malloc(sizeof(double) * (size_t)plan.n);
  float* zf = malloc(sizeof(float) * (size_t)plan.n);
  if (zd != NULL && zf != NULL) {
    sa_ewprog_eval_f64(&prog, &plan, ind, zd, 0, plan.n);
    sa_ewprog_eval_f32(&prog, &plan, inf, zf, 0, plan.n);
  }
  free(zd);
  free(zf);
  return 0;
}
