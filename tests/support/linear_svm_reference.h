// libsvm's linear C-SVC as the reference the estimator is checked against (in
// tests) and timed against (in bench): trains on a prepared problem and
// returns the primal hyperplane w1 x + w2 y = rho.
#pragma once

#include <svm.h>

namespace chronolink::testing {

struct LinearSvmSolution {
  double w1 = 0;
  double w2 = 0;
  double rho = 0;
};

inline LinearSvmSolution SolveLinearSvm(const svm_problem& prob, const svm_parameter& param) {
  svm_model* model = svm_train(&prob, &param);
  LinearSvmSolution s;
  for (int i = 0; i < model->l; ++i) {
    const double c = model->sv_coef[0][i];
    for (const svm_node* nd = model->SV[i]; nd->index != -1; ++nd) {
      (nd->index == 1 ? s.w1 : s.w2) += c * nd->value;
    }
  }
  s.rho = model->rho[0];
  svm_free_and_destroy_model(&model);
  return s;
}

}  // namespace chronolink::testing
