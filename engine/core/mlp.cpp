// engine/core/mlp.cpp — MLP forward/backward with named Eigen results (no `auto` on expressions).
#include "core/mlp.h"

#include <cmath>
#include <random>

namespace ns {

mlp mlp::make(const std::vector<int>& sizes, uint64_t seed) {
  mlp net;
  std::mt19937_64 rng(seed);
  for (size_t l = 0; l + 1 < sizes.size(); ++l) {
    const int in = sizes[l], out = sizes[l + 1];
    const float bound = std::sqrt(6.0f / float(in));
    std::uniform_real_distribution<float> dist(-bound, bound);
    Eigen::MatrixXf w(out, in);
    for (int i = 0; i < w.size(); ++i) w.data()[i] = dist(rng);
    net.w.push_back(std::move(w));
    net.b.push_back(Eigen::VectorXf::Zero(out));
  }
  return net;
}

std::vector<int> mlp::sizes() const {
  std::vector<int> s;
  if (w.empty()) return s;
  s.push_back(int(w.front().cols()));
  for (const auto& m : w) s.push_back(int(m.rows()));
  return s;
}

size_t mlp::param_count() const {
  size_t n = 0;
  for (size_t l = 0; l < w.size(); ++l) n += size_t(w[l].size() + b[l].size());
  return n;
}

Eigen::MatrixXf mlp::forward(const Eigen::MatrixXf& x) const {
  Eigen::MatrixXf a = x;
  for (size_t l = 0; l < w.size(); ++l) {
    Eigen::MatrixXf z = w[l] * a;
    z.colwise() += b[l];
    if (l + 1 < w.size()) z = z.cwiseMax(0.0f);
    a = std::move(z);
  }
  return a;
}

Eigen::MatrixXf mlp::forward(const Eigen::MatrixXf& x, cache& c) const {
  c.a.resize(w.size() + 1);
  c.a[0] = x;
  for (size_t l = 0; l < w.size(); ++l) {
    Eigen::MatrixXf z = w[l] * c.a[l];
    z.colwise() += b[l];
    if (l + 1 < w.size()) z = z.cwiseMax(0.0f);
    c.a[l + 1] = std::move(z);
  }
  return c.a.back();
}

void mlp::grad::zero_like(const mlp& net) {
  w.resize(net.w.size());
  b.resize(net.b.size());
  for (size_t l = 0; l < net.w.size(); ++l) {
    w[l] = Eigen::MatrixXf::Zero(net.w[l].rows(), net.w[l].cols());
    b[l] = Eigen::VectorXf::Zero(net.b[l].size());
  }
}

void mlp::grad::add(const grad& o) {
  for (size_t l = 0; l < w.size(); ++l) {
    w[l] += o.w[l];
    b[l] += o.b[l];
  }
}

void mlp::backward(const cache& c, const Eigen::MatrixXf& dout, grad& g) const {
  Eigen::MatrixXf delta = dout;  // dL/dz of the current layer
  for (size_t l = w.size(); l-- > 0;) {
    g.w[l].noalias() += delta * c.a[l].transpose();
    g.b[l] += delta.rowwise().sum();
    if (l == 0) break;
    Eigen::MatrixXf prev = w[l].transpose() * delta;
    // ReLU derivative: a > 0 where the pre-activation was positive.
    prev = prev.cwiseProduct((c.a[l].array() > 0.0f).cast<float>().matrix());
    delta = std::move(prev);
  }
}

void adam::step(mlp& net, const mlp::grad& g) {
  if (m.w.empty()) {
    m.zero_like(net);
    v.zero_like(net);
  }
  ++t;
  const float c1 = 1.0f - std::pow(beta1, float(t)), c2 = 1.0f - std::pow(beta2, float(t));
  auto update = [&](auto& param, const auto& grad, auto& mom, auto& vel) {
    mom = beta1 * mom + (1.0f - beta1) * grad;
    vel = beta2 * vel + (1.0f - beta2) * grad.cwiseProduct(grad);
    param.array() -= lr * ((mom.array() / c1) / ((vel.array() / c2).sqrt() + eps) + weight_decay * param.array());
  };
  for (size_t l = 0; l < net.w.size(); ++l) {
    update(net.w[l], g.w[l], m.w[l], v.w[l]);
    update(net.b[l], g.b[l], m.b[l], v.b[l]);
  }
}

}  // namespace ns
