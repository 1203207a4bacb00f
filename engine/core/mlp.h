// engine/core/mlp.h — a small ReLU multilayer perceptron in Eigen: batched inference, backprop and Adam.
#pragma once
#include <Eigen/Dense>
#include <cstdint>
#include <vector>

namespace ns {

// Samples are columns: input is (inputs × n), output (outputs × n). Hidden layers use ReLU, the last is linear.
struct mlp {
  std::vector<Eigen::MatrixXf> w;  // layer l: (out × in)
  std::vector<Eigen::VectorXf> b;

  // sizes = {inputs, hidden..., outputs}; He-uniform initialisation from `seed` (deterministic).
  static mlp make(const std::vector<int>& sizes, uint64_t seed);
  std::vector<int> sizes() const;
  size_t param_count() const;

  struct cache {
    std::vector<Eigen::MatrixXf> a;  // a[0] = input, a[l+1] = output of layer l (post-ReLU for hidden layers)
  };
  Eigen::MatrixXf forward(const Eigen::MatrixXf& x) const;
  Eigen::MatrixXf forward(const Eigen::MatrixXf& x, cache& c) const;

  struct grad {
    std::vector<Eigen::MatrixXf> w;
    std::vector<Eigen::VectorXf> b;
    void zero_like(const mlp& m);
    void add(const grad& o);
  };
  // Accumulates dLoss/dparams into g, given dLoss/doutput (outputs × n) and the forward cache.
  void backward(const cache& c, const Eigen::MatrixXf& dout, grad& g) const;
};

// Adam with decoupled weight decay (AdamW); state sized on first use.
struct adam {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  int64_t t = 0;
  mlp::grad m, v;
  void step(mlp& net, const mlp::grad& g);
};

}  // namespace ns
