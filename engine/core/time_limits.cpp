// engine/core/time_limits.cpp — the measured-time check (time_limits.h).
#include "core/time_limits.h"

#include <fmt/format.h>

#include <cmath>

#include "core/text.h"

namespace ns {

bool time_ok(double x, time_unit unit, bool zero_ok) {
  if (zero_ok && x == 0) return true;
  return std::isfinite(x) && x >= time_min(unit) && x <= time_max(unit);
}

double time_check(std::optional<double> x, time_unit unit, bool zero_ok, const std::string& what,
                  const std::string& got) {
  if (x && time_ok(*x, unit, zero_ok)) return *x;
  std::string msg = what + " must be " + (zero_ok ? "0 or " : "") + "a time of " + text_limit(time_min(unit)) +
                    " to " + text_limit(time_max(unit)) + (unit == time_unit::s ? " s" : " ms") +
                    " (got " + (!got.empty() ? got : x ? fmt::format("{:g}", *x) : "no number") + ")";
  if (x && std::isfinite(*x) && *x > 0)
    msg += std::string(": a time that ") + (*x < time_min(unit) ? "short" : "long") + " is a unit slip, not a measurement";
  throw error(msg);
}

}  // namespace ns
