#pragma once
// Where registry::open finds the run-time module of a scheme in a plugin folder, without loading
// any other module: libdlock_<scheme>.so itself, or the module whose index file
// (libdlock_<name>.schemes, one scheme a line, written by dlock_add_backend) lists the scheme.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dlock::detail {

// libdlock_<scheme>.so with '+' and '-' made '_': the module named after its scheme.
std::string module_file_name(std::string_view scheme);

// The module in `dir` that registers `scheme`, if the folder has one.
std::optional<std::filesystem::path> find_module(const std::filesystem::path& dir, std::string_view scheme);

// Every scheme the index files of `dir` list (for the message of an unknown scheme).
std::vector<std::string> indexed_schemes(const std::filesystem::path& dir);

}  // namespace dlock::detail
