#pragma once
// The one clock every process of a comparison run stamps its history with. It lives in
// dlock::compare_spi (core/compare_spi), where the backends' declarations see it too (the instant
// a connection kill was issued); the harness names it here.
#include "dlock/compare_spi/shared_clock.hpp"

namespace dlock::compare {

using compare_spi::instant;
using compare_spi::shared_clock;
using compare_spi::sleep_until;

}  // namespace dlock::compare
