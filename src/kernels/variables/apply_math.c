/*
 * apply_math.c - the optimizers' element updates (apply.h states the
 * numerics and the thread contract). Each formula is TF CPU's
 * (training_ops.cc's functors), operation for operation: R() rounds every
 * intermediate result to the dtype, so a half update is a chain of half
 * operations as Eigen's is, and float32 one of float32 operations.
 *
 * The loops are written once for all dtypes: the dtype is a constant in
 * each instantiation (always_inline with a literal), so R() and the loads
 * fold to the dtype's own code.
 */
#include <math.h>

#include "kernels/framework/f16.h"
#include "kernels/variables/apply.h"

#define AI static inline __attribute__((always_inline))

/* x rounded to float32. The empty asm keeps the rounding. Measured (GCC
 * 12.2, -O2, x86-64): without it, test_kernels_apply.py's dense Adam,
 * AdamWithAmsgrad, AdaMax and CenteredRMSProp float32 cases come out 9 ulp
 * from the reference in eager mode; -fno-tree-vectorize or -O1 also cure
 * it. Cause not identified: x86-64 SSE has no excess precision and the
 * baseline ISA no FMA, so C11 requires the (float) to round; until a
 * reduced case shows a compiler bug or a bug here, the barrier stays (it
 * costs the vectorisation of these loops). The constraint only names the
 * register class the float is in. */
AI double to_f32(double x) {
  float f = (float)x;
#if defined(__x86_64__) || defined(__i386__)
  __asm__("" : "+x"(f));
#elif defined(__aarch64__)
  __asm__("" : "+w"(f));
#else
  __asm__("" : "+m"(f));
#endif
  return f;
}

AI double rnd(TF_DataType dt, double x) {
  switch (dt) {
    case TF_FLOAT: return to_f32(x);
    case TF_HALF: return skh_half_to_float(skh_float_to_half((float)x));
    default: return x;
  }
}

AI double ld(TF_DataType dt, const void* p, int64_t i) {
  switch (dt) {
    case TF_FLOAT: return ((const float*)p)[i];
    case TF_HALF: return skh_half_to_float(((const uint16_t*)p)[i]);
    default: return ((const double*)p)[i];
  }
}

/* v is already a value of dt (rounded): the store is exact. */
AI void st(TF_DataType dt, void* p, int64_t i, double v) {
  switch (dt) {
    case TF_FLOAT: ((float*)p)[i] = (float)v; break;
    case TF_HALF: ((uint16_t*)p)[i] = skh_float_to_half((float)v); break;
    default: ((double*)p)[i] = v; break;
  }
}

#define R(x) rnd(dt, (x))
/* Eigen's sign: -1, 0 or 1. */
AI double sgn(double x) {
  return x > 0 ? 1.0 : x < 0 ? -1.0 : x;
}
/* Eigen's rsqrt on its scalar path: 1 / sqrt(x), each rounded. */
AI double rsq(TF_DataType dt, double x) {
  return R(1.0 / R(sqrt(x)));
}
/* pow and exp as TF CPU's scalar code calls them: powf / expf for float32
 * and float16 (Eigen's half widens to float), pow / exp for float64. */
AI double fpow(TF_DataType dt, double a, double b) {
  return dt == TF_DOUBLE ? pow(a, b) : R(powf((float)a, (float)b));
}
AI double fexp(TF_DataType dt, double a) {
  return dt == TF_DOUBLE ? exp(a) : R(expf((float)a));
}
AI double mx(double a, double b) {
  return a < b ? b : a;
}

/* Indices of the derived hyperparameters in skv_hp (after the scalars). */
enum { D0 = 8, D1, D2, D3 };

void skv_apply_prep(const skv_apply* a, skv_hp* hp) {
  double* h = hp->h;
  const TF_DataType dt = a->dt;
  for (int i = 0; i < a->nscalars; i++) h[i] = ld(dt, a->scalars[i], 0);
  switch (a->opt) {
    case SKV_ADAM:
    case SKV_AMSGRAD: /* beta1_power, beta2_power, lr, beta1, beta2, eps */
      /* alpha = lr * sqrt(1 - beta2_power) / (1 - beta1_power) */
      h[D0] = R(R(h[2] * R(sqrt(R(1 - h[1])))) / R(1 - h[0]));
      h[D1] = R(1 - h[3]);
      h[D2] = R(1 - h[4]);
      break;
    case SKV_ADAMAX:                 /* beta1_power, lr, beta1, beta2, eps */
      h[D0] = R(h[1] / R(1 - h[0])); /* lr / (1 - beta1_power) */
      h[D1] = R(1 - h[2]);
      break;
    case SKV_RMSPROP:
    case SKV_CENTERED_RMSPROP: /* lr, rho, momentum, eps */
    case SKV_ADADELTA: /* lr, rho, eps */ h[D1] = R(1 - h[1]); break;
    case SKV_FTRL:
    case SKV_FTRL_V2: { /* lr, l1, l2, [l2_shrinkage], lr_power */
      const bool v2 = a->opt == SKV_FTRL_V2;
      h[D0] = h[v2 ? 4 : 3];        /* lr_power */
      h[D1] = R(2 * h[2]);          /* 2 * l2 */
      h[D2] = R(h[1] * h[0]);       /* l1 * lr */
      h[D3] = v2 ? R(2 * h[3]) : 0; /* 2 * l2_shrinkage */
      break;
    }
    case SKV_ADDSIGN:
    case SKV_POWERSIGN: /* lr, alpha | logbase, sign_decay, beta */
      h[D1] = R(1 - h[3]);
      h[D2] = R(h[1] * h[2]); /* PowerSign: logbase * sign_decay */
      break;
    default: break;
  }
}

/* ---- the updates: x[0] is var, x[1..] its slots, g the gradient -------- */

AI void upd(TF_DataType dt, skv_opt opt, unsigned fl, const double* h,
            double* x, double g) {
  switch (opt) {
    case SKV_GRADIENT_DESCENT: /* var -= grad * lr */
      x[0] = R(x[0] - R(g * h[0]));
      break;
    case SKV_MOMENTUM: { /* lr, momentum */
      x[1] = R(R(x[1] * h[1]) + g);
      if (fl & SKV_NESTEROV)
        x[0] = R(x[0] - R(R(g * h[0]) + R(R(x[1] * h[1]) * h[0])));
      else
        x[0] = R(x[0] - R(x[1] * h[0]));
      break;
    }
    case SKV_KERAS_MOMENTUM: {
      x[1] = R(R(x[1] * h[1]) - R(g * h[0]));
      if (fl & SKV_NESTEROV)
        x[0] = R(x[0] + R(R(x[1] * h[1]) - R(g * h[0])));
      else
        x[0] = R(x[0] + x[1]);
      break;
    }
    case SKV_ADAM:
    case SKV_AMSGRAD: { /* var, m, v, [vhat] */
      x[1] = R(x[1] + R(R(g - x[1]) * h[D1]));
      x[2] = R(x[2] + R(R(R(g * g) - x[2]) * h[D2]));
      double den;
      if (opt == SKV_AMSGRAD) {
        x[3] = mx(x[3], x[2]);
        den = R(R(sqrt(x[3])) + h[5]);
      } else {
        den = R(R(sqrt(x[2])) + h[5]);
      }
      if (fl & SKV_NESTEROV)
        x[0] = R(x[0] - R(R(R(R(g * h[D1]) + R(h[3] * x[1])) * h[D0]) / den));
      else
        x[0] = R(x[0] - R(R(x[1] * h[D0]) / den));
      break;
    }
    case SKV_ADAMAX: /* beta1_power, lr, beta1, beta2, eps */
      x[1] = R(x[1] + R(R(g - x[1]) * h[D1]));
      x[2] = mx(R(h[3] * x[2]), fabs(g));
      x[0] = R(x[0] - R(h[D0] * R(x[1] / R(x[2] + h[4]))));
      break;
    case SKV_RMSPROP: /* var, ms, mom; lr, rho, momentum, eps */
      x[1] = R(x[1] + R(R(R(g * g) - x[1]) * h[D1]));
      x[2] = R(R(x[2] * h[2]) + R(R(g * h[0]) / R(sqrt(R(x[1] + h[3])))));
      x[0] = R(x[0] - x[2]);
      break;
    case SKV_CENTERED_RMSPROP: { /* var, mg, ms, mom */
      x[2] = R(x[2] + R(R(R(g * g) - x[2]) * h[D1]));
      x[1] = R(x[1] + R(R(g - x[1]) * h[D1]));
      const double den = R(R(x[2] - R(x[1] * x[1])) + h[3]);
      x[3] = R(R(x[3] * h[2]) + R(R(g * h[0]) / R(sqrt(den))));
      x[0] = R(x[0] - x[3]);
      break;
    }
    case SKV_ADAGRAD: /* lr */
      if (fl & SKV_UPDATE_SLOTS) x[1] = R(x[1] + R(g * g));
      x[0] = R(x[0] - R(R(g * h[0]) * rsq(dt, x[1])));
      break;
    case SKV_ADAGRAD_V2: /* lr, eps */
      if (fl & SKV_UPDATE_SLOTS) x[1] = R(x[1] + R(g * g));
      x[0] = R(x[0] - R(R(g * h[0]) / R(R(sqrt(x[1])) + h[1])));
      break;
    case SKV_ADADELTA: { /* var, accum, accum_update; lr, rho, eps */
      x[1] = R(R(x[1] * h[1]) + R(R(g * g) * h[D1]));
      const double u =
          R(R(R(sqrt(R(x[2] + h[2]))) * rsq(dt, R(x[1] + h[2]))) * g);
      x[0] = R(x[0] - R(u * h[0]));
      x[2] = R(R(x[2] * h[1]) + R(R(u * u) * h[D1]));
      break;
    }
    case SKV_PROXIMAL_ADAGRAD: { /* lr, l1, l2 */
      x[1] = R(x[1] + R(g * g));
      const double lrt = R(h[0] * rsq(dt, x[1]));
      const double p = R(x[0] - R(g * lrt));
      const double den = R(1 + R(h[2] * lrt));
      if (h[1] > 0)
        x[0] = R(R(sgn(p) * mx(R(fabs(p) - R(lrt * h[1])), 0)) / den);
      else
        x[0] = R(p / den);
      break;
    }
    case SKV_FTRL:
    case SKV_FTRL_V2: { /* var, accum, linear */
      const double lr = h[0], l1 = h[1], lrp = h[D0];
      const double gs = opt == SKV_FTRL_V2 ? R(g + R(h[D3] * x[0])) : g;
      const double na = R(x[1] + R(g * g));
      double pa, pb;
      if (lrp == -0.5) {
        pa = R(sqrt(na));
        pb = R(sqrt(x[1]));
      } else {
        pa = fpow(dt, na, -lrp);
        pb = fpow(dt, x[1], -lrp);
      }
      const double d = R(pa - pb);
      double xx, y, thr;
      if (fl & SKV_MULTIPLY_LR) {
        x[2] = R(x[2] + R(R(gs * lr) - R(d * x[0])));
        thr = h[D2];
        xx = R(R(thr * sgn(x[2])) - x[2]);
        y = R(pa + R(h[D1] * lr));
      } else {
        x[2] = R(x[2] + R(gs - R(R(d / lr) * x[0])));
        thr = l1;
        xx = R(R(l1 * sgn(x[2])) - x[2]);
        y = R(R(pa / lr) + h[D1]);
      }
      x[0] = fabs(x[2]) > thr ? R(xx / y) : 0;
      x[1] = na;
      break;
    }
    case SKV_ADDSIGN: /* var, m; lr, alpha, sign_decay, beta */
      x[1] = R(R(x[1] * h[3]) + R(g * h[D1]));
      x[0] =
          R(x[0] - R(R(h[0] * R(h[1] + R(h[2] * (sgn(g) * sgn(x[1]))))) * g));
      break;
    case SKV_POWERSIGN: { /* lr, logbase, sign_decay, beta */
      x[1] = R(R(x[1] * h[3]) + R(g * h[D1]));
      const double sc = fexp(dt, R(h[D2] * (sgn(g) * sgn(x[1]))));
      x[0] = R(x[0] - R(R(h[0] * sc) * g));
      break;
    }
  }
}

AI void range_dt(TF_DataType dt, const skv_apply* a, const skv_hp* hp,
                 int64_t xo, int64_t go, int64_t n) {
  const int nv = a->nvars;
  for (int64_t i = 0; i < n; i++) {
    double x[SKV_MAX_VARS] = {0};
    for (int k = 0; k < nv; k++) x[k] = ld(dt, a->x[k], xo + i);
    upd(dt, a->opt, a->flags, hp->h, x, ld(dt, a->g, go + i));
    for (int k = 0; k < nv; k++) st(dt, a->x[k], xo + i, x[k]);
  }
}

void skv_apply_range(const skv_apply* a, const skv_hp* hp, int64_t xo,
                     int64_t go, int64_t n) {
  switch (a->dt) {
    case TF_FLOAT: range_dt(TF_FLOAT, a, hp, xo, go, n); break;
    case TF_HALF: range_dt(TF_HALF, a, hp, xo, go, n); break;
    default: range_dt(TF_DOUBLE, a, hp, xo, go, n); break;
  }
}
