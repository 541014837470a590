// Fuzzes lock_file_name, which turns a lock name into a file name inside the lock directory.
// Properties: deterministic; "<key>.lock" with the key at most max_key_length bytes (so within
// NAME_MAX); no '/', no NUL, not starting with '.', so no name reaches outside the directory or
// hides; and two distinct names never share a file.
#include <cstdint>
#include <string>

#include "dlock_fuzz/check.hpp"
#include "lock_file.hpp"

using dlock::fuzz::check;

namespace {

std::string checked_file_name(const std::string& name) {
  const std::string file = dlock::file::lock_file_name(name);
  check(file == dlock::file::lock_file_name(name), "deterministic", name);
  check(file.ends_with(".lock"), "ends with .lock", name, file);
  check(file.size() <= dlock::file::max_key_length + 5, "within max_key_length + \".lock\"", name, file);
  check(file.find('/') == std::string::npos && file.find('\0') == std::string::npos, "no '/' and no NUL", name, file);
  check(!file.starts_with('.'), "does not start with '.'", name, file);
  return file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [a, b] = dlock::fuzz::two_strings(data, size);
  // The backend accepts names of 1 to max_name_length bytes (backend::make_lock refuses others).
  if (a.empty() || b.empty() || a.size() > dlock::file::max_name_length || b.size() > dlock::file::max_name_length)
    return 0;
  check((a == b) == (checked_file_name(a) == checked_file_name(b)), "distinct names, distinct files", a, b);
  return 0;
}
