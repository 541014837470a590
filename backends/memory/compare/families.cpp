// What dlock compare needs of memory:// (core/compare_spi: family.hpp): no server, so no server
// fault applies; a run opens it as it is (a process-scope lock: its clients are threads of one
// process, as the registry's scope says).
#include "dlock/compare_spi/family.hpp"

namespace dlock::compare_spi {

namespace {

constexpr family families[] = {
    {.prefix = "memory", .local_uri = "memory://"},
};

}  // namespace

std::span<const family> families_memory() noexcept { return families; }

}  // namespace dlock::compare_spi
