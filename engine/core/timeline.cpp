// engine/core/timeline.cpp — memory per GPU of a parallel run's stage.
#include "core/timeline.h"

#include "core/forecast.h"

namespace ns {

const timeline_device* critical_device(const parallel_timeline& t) {
  const timeline_device* crit = nullptr;
  for (const auto& d : t.devices)
    if (!crit || d.finish_s > crit->finish_s) crit = &d;
  return crit;
}

double device_state_bytes(const timeline_device& d, const parallel_timeline& t, const state_layout& s) {
  double bytes = state_bytes(d.params, s);
  if (t.distributed_optimizer && t.dp > 1)  // the optimizer's share lives on 1/dp of the ranks
    bytes -= d.params * s.sharded() * (1 - 1.0 / double(t.dp));
  return bytes;
}

double device_memory_bytes(const timeline_device& d, const parallel_timeline& t, const state_layout& s) {
  return device_state_bytes(d, t, s) + d.activation_bytes;
}

}  // namespace ns
