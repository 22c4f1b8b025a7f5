#pragma once
// Muon's orthogonalization (Keller Jordan, "Muon: an optimizer for hidden layers", 2024): the
// quintic Newton-Schulz iteration that maps a matrix G = U S V^T to about U S' V^T, S' roughly in
// [0.5, 1.5] (the coefficients maximize the slope at zero instead of converging to 1):
//   X = G / (||G||_F + 1e-7)
//   repeat `steps` times:  A = X X^T;  B = b A + c A A;  X = a X + B X
// with (a, b, c) = (3.4445, -4.7750, 2.0315), on the shorter side: a tall X (rows > cols) is
// iterated as X^T (then A = X^T X, X = a X + X B), which is the reference's transpose without
// moving data. Stateless; fp32 GEMMs (OpenBLAS); the reference runs the iteration in bfloat16 on
// GPUs, which only rounds differently.
#include <cstddef>

namespace asteria {

inline constexpr float kNewtonSchulzA = 3.4445f, kNewtonSchulzB = -4.7750f, kNewtonSchulzC = 2.0315f;

// Floats of work newton_schulz5 needs for a rows x cols matrix: two r x r (r = the shorter side)
// and one rows x cols.
size_t newton_schulz_work(int rows, int cols);

// x [rows, cols] row-major, replaced in place by its orthogonalization; work as above.
void newton_schulz5(float* x, int rows, int cols, int steps, float* work);

// FLOPs of newton_schulz5 (the GEMMs): per step 4 r^2 s + 2 r^3, r / s the shorter / longer side.
double newton_schulz_flops(int rows, int cols, int steps);

}  // namespace asteria
