/*
 * gemm.c - sa_gemm: every simdev GEMM goes through here: TF's MatMul,
 * BatchMatMulV2, Einsum, Conv2D and its backprops (src/kernels), and the
 * XLA handlers' matmuls and convolutions (src/xla).
 *
 * OpenBLAS runs single-threaded (sa_blas_init) and simdev spreads large
 * products over the cores itself, cutting C into fixed blocks of rows that
 * each go to one single-threaded OpenBLAS call on a sim_parallel_for thread.
 * Why not OpenBLAS's own threads: after each call they keep spinning for a
 * long while (OPENBLAS_THREAD_TIMEOUT), and on a 2-core machine that spin
 * steals the cores from TF's threads and from the next kernel; measured on a
 * Keras CNN step it cost more than the threads gained. A product is cut into
 * one block of rows per core (at least GEMM_MIN_ROWS rows; each call packs
 * all of B, so fewer, larger blocks are cheaper). The cut depends only on
 * the shape and the machine's CPU count, never on timing, so results are
 * identical run to run and with SIMDEV_SYNC.
 *
 * The fused ops' epilogue (sa_epi: bias + activation) rides along:
 * sa_gemm applies it to each block of rows right after that block's
 * OpenBLAS call, on the same thread (in cache when the block is small; a
 * block is 1/cores of C, so for a large product it is not). The
 * blocks are the same with or without an epilogue, so a fused product has
 * the unfused product's bits before its epilogue.
 *
 * Thread contract: sa_gemm runs on a stream worker (or a pool thread, where
 * a nested sim_parallel_for runs inline).
 */
#include <cblas.h>
#include <string.h>

#include "arith/sa.h"
#include "device_sim/sim.h"

/* Fewest rows of C per OpenBLAS call when a product is split. */
#define GEMM_MIN_ROWS 64
/* Below this many multiply-adds one call on the worker is faster. */
#define GEMM_PARALLEL_MNK ((int64_t)1 << 21)

/* openblas_set_num_threads is in Debian's cblas.h for OpenBLAS. */
void sa_blas_init(void) {
  openblas_set_num_threads(1);
}

typedef struct gemm_job {
  sa_dtype dt;
  bool ta, tb;
  int64_t m, n, k;
  const char* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  double beta;
  char* c;
  int64_t ldc;
  int64_t block_rows;
  const sa_epi* ep; /* NULL: none */
} gemm_job;

static void gemm_call(const gemm_job* g, int64_t r0, int64_t rows) {
  enum CBLAS_TRANSPOSE ota = g->ta ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE otb = g->tb ? CblasTrans : CblasNoTrans;
  size_t es = sa_dtype_size(g->dt);
  /* Row r of op(A): row r of A, or column r of A when transposed. */
  const char* a = g->a + (size_t)(g->ta ? r0 : r0 * g->lda) * es;
  char* c = g->c + (size_t)(r0 * g->ldc) * es;
  if (g->dt == SA_F32)
    cblas_sgemm(CblasRowMajor, ota, otb, (blasint)rows, (blasint)g->n,
                (blasint)g->k, 1.f, (const float*)a, (blasint)g->lda, g->b,
                (blasint)g->ldb, (float)g->beta, (float*)c, (blasint)g->ldc);
  else
    cblas_dgemm(CblasRowMajor, ota, otb, (blasint)rows, (blasint)g->n,
                (blasint)g->k, 1., (const double*)a, (blasint)g->lda, g->b,
                (blasint)g->ldb, g->beta, (double*)c, (blasint)g->ldc);
  sa_epi_apply(g->ep, c, rows, g->n, g->ldc, 1);
}

static void gemm_blocks(void* arg, int64_t b0, int64_t b1) {
  const gemm_job* g = arg;
  for (int64_t blk = b0; blk < b1; blk++) {
    int64_t r0 = blk * g->block_rows;
    int64_t rows = g->m - r0 < g->block_rows ? g->m - r0 : g->block_rows;
    gemm_call(g, r0, rows);
  }
}

void sa_gemm(sa_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
             const void* a, int64_t lda, const void* b, int64_t ldb,
             double beta, void* c, int64_t ldc, const sa_epi* ep) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0) {
    /* An empty sum: C = beta * C, then ep. Not left to BLAS, which need
     * not write C at all when k is 0. Every caller relies on this. */
    size_t es = sa_dtype_size(dt);
    for (int64_t r = 0; r < m; r++) {
      char* row = (char*)c + (size_t)(r * ldc) * es;
      if (beta == 0.)
        memset(row, 0, (size_t)n * es);
      else if (beta != 1.)
        for (int64_t j = 0; j < n; j++) {
          if (dt == SA_F32)
            ((float*)row)[j] *= (float)beta;
          else
            ((double*)row)[j] *= beta;
        }
    }
    sa_epi_apply(ep, c, m, n, ldc, 1);
    return;
  }
  gemm_job g = {dt, ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc, m, ep};
  int64_t width = sim_parallel_width();
  if (width < 2 || m < 2 * GEMM_MIN_ROWS || m * n * k < GEMM_PARALLEL_MNK) {
    gemm_call(&g, 0, m);
    return;
  }
  int64_t rows = (m + width - 1) / width;
  rows = (rows + 15) / 16 * 16; /* whole register blocks of OpenBLAS */
  g.block_rows = rows < GEMM_MIN_ROWS ? GEMM_MIN_ROWS : rows;
  sim_parallel_for((m + g.block_rows - 1) / g.block_rows, 1, gemm_blocks, &g);
}
