// What dlock compare needs of file:// (core/compare_spi: family.hpp): no server, so no server
// fault applies; a run's locks live in a folder of its own.
#include "dlock/compare_spi/family.hpp"

namespace dlock::compare_spi {

namespace {

constexpr family families[] = {
    {.prefix = "file", .local_uri = "file://{dir}/file-locks"},
};

}  // namespace

std::span<const family> families_file() noexcept { return families; }

}  // namespace dlock::compare_spi
