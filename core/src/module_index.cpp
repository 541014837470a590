#include "module_index.hpp"

#include <algorithm>
#include <fstream>

namespace dlock::detail {
namespace {

constexpr std::string_view index_extension = ".schemes";

// Calls on_scheme(scheme, module) for each line of each libdlock_*.schemes in `dir` until it
// returns true; an unreadable folder or file lists nothing.
template <class OnScheme>
void walk_indexes(const std::filesystem::path& dir, OnScheme on_scheme) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const auto& path = entry.path();
    const auto file = path.filename().string();
    if (!file.starts_with("libdlock_") || path.extension() != index_extension) continue;
    auto module = path;
    module.replace_extension(".so");
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);)
      if (!line.empty() && on_scheme(line, module)) return;
  }
}

}  // namespace

std::string module_file_name(std::string_view scheme) {
  std::string name = "libdlock_" + std::string(scheme) + ".so";
  std::replace_if(
      name.begin(), name.end(), [](char c) { return c == '+' || c == '-'; }, '_');
  return name;
}

std::optional<std::filesystem::path> find_module(const std::filesystem::path& dir, std::string_view scheme) {
  std::error_code ec;
  if (auto named = dir / module_file_name(scheme); std::filesystem::exists(named, ec)) return named;
  std::optional<std::filesystem::path> found;
  walk_indexes(dir, [&](const std::string& listed, const std::filesystem::path& module) {
    if (listed != scheme) return false;
    found = module;
    return true;
  });
  return found;
}

std::vector<std::string> indexed_schemes(const std::filesystem::path& dir) {
  std::vector<std::string> schemes;
  walk_indexes(dir, [&](const std::string& listed, const std::filesystem::path&) {
    schemes.push_back(listed);
    return false;
  });
  std::sort(schemes.begin(), schemes.end());
  return schemes;
}

}  // namespace dlock::detail
