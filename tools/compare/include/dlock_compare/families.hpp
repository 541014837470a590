#pragma once
// What dlock compare knows of the built backends' schemes: the families each backend declares in
// its own folder (backends/<name>/compare/families.cpp, against dlock::compare_spi's family.hpp),
// gathered at build time. The harness links those declarations; no backend knows the harness.
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dlock/compare_spi/family.hpp"
#include "dlock/compare_spi/server_tools.hpp"
#include "dlock_compare/shared_clock.hpp"

namespace dlock::compare {

using compare_spi::connection_kill;
using compare_spi::family;
using compare_spi::first_line;
using compare_spi::killed_connections;
using compare_spi::no_kill;
using compare_spi::quorum_kind;
using compare_spi::run_tool;

// Every family the built backends declared.
std::span<const family* const> families() noexcept;

// The family covering `scheme`, or nullptr (a scheme whose backend declared none).
const family* family_of_scheme(std::string_view scheme) noexcept;

// The families whose servers take the quorum faults of `kind` (each runs them on its own servers).
std::vector<const family*> families_of_quorum(quorum_kind kind);

// For a scheme without a server: the URI its family declares (family::local_uri), "{dir}" replaced
// by `dir`; nullopt for a scheme whose family declares none.
std::optional<std::string> local_uri_for(std::string_view scheme, const std::filesystem::path& dir);

}  // namespace dlock::compare
