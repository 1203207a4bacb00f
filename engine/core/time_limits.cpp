// engine/core/time_limits.cpp — the measured-time check (time_limits.h).
#include "core/time_limits.h"

#include <fmt/format.h>

#include <cmath>

#include "core/text.h"

namespace ns {

namespace {

// A power of ten as the messages write it: 1e-6, 1e9.
std::string power_of_ten(double x) { return "1e" + std::to_string(std::lround(std::log10(x))); }

}  // namespace

bool time_ok(double x, time_unit unit, bool zero_ok) {
  if (zero_ok && x == 0) return true;
  return std::isfinite(x) && x >= time_min(unit) && x <= time_max(unit);
}

double time_check(std::optional<double> x, time_unit unit, bool zero_ok, const std::string& what,
                  const std::string& got) {
  if (x && time_ok(*x, unit, zero_ok)) return *x;
  std::string msg = what + " must be " + (zero_ok ? "0 or " : "") + "a time of " + power_of_ten(time_min(unit)) +
                    " to " + power_of_ten(time_max(unit)) + (unit == time_unit::s ? " s" : " ms") +
                    " (got " + (!got.empty() ? got : x ? fmt::format("{:g}", *x) : "no number") + ")";
  if (x && std::isfinite(*x) && *x > 0)
    msg += std::string(": a time that ") + (*x < time_min(unit) ? "short" : "long") + " is a unit slip, not a measurement";
  throw error(msg);
}

}  // namespace ns
