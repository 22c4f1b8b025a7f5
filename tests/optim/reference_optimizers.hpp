#pragma once
// Plain fp64 reference implementations of Shampoo, SOAP and KL-Shampoo on one matrix block,
// written straight from the papers' update rules and the reference implementations' source
// (Distributed Shampoo's refresh schedule, grafting and weight-decay order; the SOAP and
// KL-Shampoo authors' decay after the update) with a naive dense matrix type and a Jacobi
// eigensolver, independent of the production code (no LAPACK, no BLAS, no shared helpers).
// Each optimizer's apply() is its parameter update with decoupled weight decay.
// SOAP keeps its first moment in the original space (the production code keeps it in the
// eigenbasis and rotates it at each refresh: the two must agree).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace asteria::reference {

struct Mat {
  int r = 0, c = 0;
  std::vector<double> a;
  Mat() = default;
  Mat(int rows, int cols, double v = 0) : r(rows), c(cols), a(static_cast<size_t>(rows) * cols, v) {}
  double& operator()(int i, int j) { return a[static_cast<size_t>(i) * c + j]; }
  double operator()(int i, int j) const { return a[static_cast<size_t>(i) * c + j]; }
};

inline Mat eye(int n) {
  Mat m(n, n);
  for (int i = 0; i < n; ++i) m(i, i) = 1;
  return m;
}
inline Mat mul(const Mat& A, const Mat& B) {
  Mat C(A.r, B.c);
  for (int i = 0; i < A.r; ++i)
    for (int k = 0; k < A.c; ++k)
      for (int j = 0; j < B.c; ++j) C(i, j) += A(i, k) * B(k, j);
  return C;
}
inline Mat tr(const Mat& A) {
  Mat T(A.c, A.r);
  for (int i = 0; i < A.r; ++i)
    for (int j = 0; j < A.c; ++j) T(j, i) = A(i, j);
  return T;
}
inline Mat axpby(double a, const Mat& X, double b, const Mat& Y) {  // a X + b Y
  Mat Z(X.r, X.c);
  for (size_t i = 0; i < X.a.size(); ++i) Z.a[i] = a * X.a[i] + b * Y.a[i];
  return Z;
}
inline Mat scale(double a, const Mat& X) { return axpby(a, X, 0, X); }
inline double fro(const Mat& A) {
  double s = 0;
  for (double x : A.a) s += x * x;
  return std::sqrt(s);
}

// Cyclic Jacobi: A = V diag(w) V^T, eigenvalues ascending.
inline void jacobi_eigh(const Mat& A0, std::vector<double>& w, Mat& V) {
  const int n = A0.r;
  Mat A = A0;
  V = eye(n);
  for (int sweep = 0; sweep < 100; ++sweep) {
    double off = 0;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j) off += A(i, j) * A(i, j);
    if (off < 1e-30) break;
    for (int p = 0; p < n; ++p)
      for (int q = p + 1; q < n; ++q) {
        if (std::abs(A(p, q)) < 1e-300) continue;
        const double theta = (A(q, q) - A(p, p)) / (2 * A(p, q));
        const double t = (theta >= 0 ? 1 : -1) / (std::abs(theta) + std::sqrt(theta * theta + 1));
        const double c = 1 / std::sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; ++k) {  // A <- J^T A J
          const double akp = A(k, p), akq = A(k, q);
          A(k, p) = c * akp - s * akq;
          A(k, q) = s * akp + c * akq;
        }
        for (int k = 0; k < n; ++k) {
          const double apk = A(p, k), aqk = A(q, k);
          A(p, k) = c * apk - s * aqk;
          A(q, k) = s * apk + c * aqk;
        }
        for (int k = 0; k < n; ++k) {
          const double vkp = V(k, p), vkq = V(k, q);
          V(k, p) = c * vkp - s * vkq;
          V(k, q) = s * vkp + c * vkq;
        }
      }
  }
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return A(a, a) < A(b, b); });
  Mat Vs(n, n);
  w.resize(n);
  for (int k = 0; k < n; ++k) {
    w[k] = A(idx[k], idx[k]);
    for (int i = 0; i < n; ++i) Vs(i, k) = V(i, idx[k]);
  }
  V = Vs;
}

inline Mat eigvecs_descending(const Mat& A) {
  std::vector<double> w;
  Mat V;
  jacobi_eigh(A, w, V);
  Mat D(A.r, A.r);
  for (int i = 0; i < A.r; ++i)
    for (int k = 0; k < A.r; ++k) D(i, k) = V(i, A.r - 1 - k);
  return D;
}

inline Mat inverse_root(const Mat& A, double p, double eps) {
  std::vector<double> w;
  Mat V;
  jacobi_eigh(A, w, V);
  Mat D(A.r, A.r);
  for (int k = 0; k < A.r; ++k) D(k, k) = std::pow(std::max(w[k] + eps, eps), -1.0 / p);
  return mul(mul(V, D), tr(V));
}

// Q of a QR factorization by modified Gram-Schmidt (column signs may differ from LAPACK's;
// the algorithms below do not depend on them).
inline Mat qr_q(const Mat& A) {
  Mat Q = A;
  for (int j = 0; j < Q.c; ++j) {
    for (int k = 0; k < j; ++k) {
      double d = 0;
      for (int i = 0; i < Q.r; ++i) d += Q(i, k) * Q(i, j);
      for (int i = 0; i < Q.r; ++i) Q(i, j) -= d * Q(i, k);
    }
    double nrm = 0;
    for (int i = 0; i < Q.r; ++i) nrm += Q(i, j) * Q(i, j);
    nrm = std::sqrt(nrm);
    for (int i = 0; i < Q.r; ++i) Q(i, j) /= nrm;
  }
  return Q;
}

struct Hyper {
  double beta1, beta2, shampoo_beta, eps, root_eps = 0, weight_decay = 0;
  int freq = 1, start = 1;
  int offset = 0;   // the block's stagger offset (0: the reference schedule)
  bool graft = true;
  double init_factor = 0.1, max_clamp = 4000;
};

// Returns the update direction D (empty when the call only initializes).
struct Shampoo {
  Hyper h;
  Mat L, R, M, V, Linv, Rinv;
  int t = 0;
  bool have = false;
  Mat step(const Mat& G) {
    if (L.r == 0) {
      L = Mat(G.r, G.r), R = Mat(G.c, G.c), M = Mat(G.r, G.c), V = Mat(G.r, G.c);
    }
    ++t;
    const double b = h.shampoo_beta, add = b >= 1 ? 1 : 1 - b;
    L = axpby(b, L, add, mul(G, tr(G)));
    R = axpby(b, R, add, mul(tr(G), G));
    Mat G2 = G;
    for (auto& x : G2.a) x *= x;
    M = axpby(h.beta1, M, 1 - h.beta1, G);
    V = axpby(h.beta2, V, h.beta2 >= 1 ? 1 : 1 - h.beta2, G2);
    // distributed_shampoo.py: the amortized computation runs at step == start_preconditioning_step
    // and at every step > start that is a multiple of precondition_frequency.
    if (t == h.start || (t > h.start && (t + h.offset) % h.freq == 0)) {
      const double bc = b < 1 ? 1 - std::pow(b, t) : 1;
      Linv = inverse_root(scale(1 / bc, L), 4, h.root_eps);
      Rinv = inverse_root(scale(1 / bc, R), 4, h.root_eps);
      have = true;
    }
    const double bc1 = h.beta1 > 0 ? 1 - std::pow(h.beta1, t) : 1;
    const double bc2 = h.beta2 < 1 ? 1 - std::pow(h.beta2, t) : 1;
    Mat Mh = scale(1 / bc1, M), adam = Mh;
    for (size_t i = 0; i < adam.a.size(); ++i) adam.a[i] = Mh.a[i] / (std::sqrt(V.a[i] / bc2) + h.eps);
    if (!have) return h.graft ? adam : Mh;
    Mat D = mul(mul(Linv, Mh), Rinv);
    if (h.graft) D = scale(fro(adam) / (fro(D) + 1e-16), D);
    return D;
  }
  // W <- W - lr * (P + wd * W): the decay is added to the grafted direction.
  static double apply(double w, double d, double lr, double wd) { return w - lr * (d + wd * w); }
};

// The SOAP and KL-Shampoo authors' order: the update, then decay of the updated weights.
inline double decay_after_update(double w, double d, double lr, double wd) {
  const double stepped = w - lr * d;
  return stepped - lr * wd * stepped;
}

struct Soap {
  Hyper h;
  static double apply(double w, double d, double lr, double wd) { return decay_after_update(w, d, lr, wd); }
  Mat L, R, QL, QR, Mo, V;
  int t = 0;
  bool init = false;
  Mat step(const Mat& G) {
    const double b = h.shampoo_beta;
    if (!init) {
      L = scale(1 - b, mul(G, tr(G)));
      R = scale(1 - b, mul(tr(G), G));
      QL = eigvecs_descending(L);
      QR = eigvecs_descending(R);
      Mo = Mat(G.r, G.c);
      V = Mat(G.r, G.c);
      init = true;
      return Mat();
    }
    ++t;
    Mat Gp = mul(mul(tr(QL), G), QR);
    Mo = axpby(h.beta1, Mo, 1 - h.beta1, G);
    for (size_t i = 0; i < V.a.size(); ++i) V.a[i] = h.beta2 * V.a[i] + (1 - h.beta2) * Gp.a[i] * Gp.a[i];
    Mat Mp = mul(mul(tr(QL), Mo), QR);
    for (size_t i = 0; i < Mp.a.size(); ++i) Mp.a[i] /= std::sqrt(V.a[i]) + h.eps;
    Mat D = mul(mul(QL, Mp), tr(QR));
    D = scale(std::sqrt(1 - std::pow(h.beta2, t)) / (1 - std::pow(h.beta1, t)), D);
    L = axpby(b, L, 1 - b, mul(G, tr(G)));
    R = axpby(b, R, 1 - b, mul(tr(G), G));
    if ((t + h.offset) % h.freq == 0) {
      refresh(L, QL, /*rows=*/true);
      refresh(R, QR, /*rows=*/false);
    }
    return D;
  }
  void refresh(const Mat& F, Mat& Q, bool rows) {
    const int n = Q.r;
    Mat FQ = mul(F, Q);
    std::vector<double> est(n, 0.0);
    for (int k = 0; k < n; ++k)
      for (int i = 0; i < n; ++i) est[k] += Q(i, k) * FQ(i, k);
    std::vector<int> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return est[a] > est[b]; });
    Mat Qs(n, n), Vs = V;
    for (int k = 0; k < n; ++k)
      for (int i = 0; i < n; ++i) Qs(i, k) = Q(i, idx[k]);
    for (int i = 0; i < V.r; ++i)
      for (int j = 0; j < V.c; ++j) Vs(i, j) = rows ? V(idx[i], j) : V(i, idx[j]);
    V = Vs;
    Q = qr_q(mul(F, Qs));
  }
};

struct KLShampoo {
  Hyper h;
  static double apply(double w, double d, double lr, double wd) { return decay_after_update(w, d, lr, wd); }
  Mat SL, SR, QL, QR, M;
  std::vector<double> dL, dR;
  int t = 0;
  bool init = false;
  Mat inv_factor(const Mat& Q, const std::vector<double>& d) {  // Q diag(d^2) Q^T
    Mat D(Q.r, Q.r);
    for (int i = 0; i < Q.r; ++i) D(i, i) = d[i] * d[i];
    return mul(mul(Q, D), tr(Q));
  }
  Mat step(const Mat& G) {
    const double b = h.shampoo_beta;
    const int m = G.r, n = G.c;
    if (!init) {
      SL = scale((1 - b) / n, mul(G, tr(G)));
      SR = scale((1 - b) / m, mul(tr(G), G));
      QL = eigvecs_descending(SL);
      QR = eigvecs_descending(SR);
      dL.assign(m, 1 / std::sqrt(h.init_factor));
      dR.assign(n, 1 / std::sqrt(h.init_factor));
      M = Mat(m, n);
      init = true;
      return Mat();
    }
    ++t;
    M = axpby(h.beta1, M, 1 - h.beta1, G);
    Mat P = mul(mul(tr(QL), M), QR);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        const double s = dL[i] * dR[j];
        P(i, j) *= s / (1 + s * h.eps);
      }
    Mat D = mul(mul(QL, P), tr(QR));
    Mat GRG = mul(mul(G, inv_factor(QR, dR)), tr(G));   // G S_R^-1 G^T
    Mat GLG = mul(mul(tr(G), inv_factor(QL, dL)), G);   // G^T S_L^-1 G
    Mat dl = mul(mul(tr(QL), GRG), QL), dr = mul(mul(tr(QR), GLG), QR);
    SL = axpby(b, SL, (1 - b) / n, GRG);
    SR = axpby(b, SR, (1 - b) / m, GLG);
    auto upd = [&](std::vector<double>& d, const Mat& diag, double denom) {
      const double cap = std::max(10.0, std::min<double>(d.size(), h.max_clamp));
      for (size_t i = 0; i < d.size(); ++i) {
        double lam = b / (d[i] * d[i]) + (1 - b) * diag(i, i) / denom;
        d[i] = std::min(1 / std::sqrt(lam), cap);
      }
    };
    upd(dL, dl, n);
    upd(dR, dr, m);
    if ((t + h.offset) % h.freq == 0) {
      QL = qr_q(mul(SL, QL));
      QR = qr_q(mul(SR, QR));
    }
    return D;
  }
};

}  // namespace asteria::reference
