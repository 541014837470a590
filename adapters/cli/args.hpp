#pragma once
// The CLI's small argument parser: positionals, "--key value" / "--key=value" options, flags,
// and everything after "--" kept as the command. Errors throw usage_error (exit 64).
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace dlock::cli {

// sysexits.h codes, documented in `dlock --help`.
inline constexpr int exit_usage = 64;        // EX_USAGE
inline constexpr int exit_conflict = 65;     // EX_DATAERR: the server keeps the name as something else
inline constexpr int exit_unavailable = 69;  // EX_UNAVAILABLE: backend unreachable or failing
inline constexpr int exit_software = 70;     // EX_SOFTWARE: the lock was lost while running
inline constexpr int exit_timeout = 75;      // EX_TEMPFAIL: could not get the lock in time

struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class args {
 public:
  // `options` take a value, `flags` do not.
  args(const std::vector<std::string>& argv, const std::set<std::string>& options, const std::set<std::string>& flags);

  const std::vector<std::string>& positional() const { return positional_; }
  const std::vector<std::string>& command() const { return command_; }
  bool has_command_separator() const { return separator_; }
  bool flag(const std::string& name) const { return flags_.count(name) != 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::optional<std::chrono::milliseconds> duration(const std::string& name) const;  // dlock::parse_duration
  long integer(const std::string& name, long fallback, long min, long max) const;

 private:
  std::vector<std::string> positional_, command_;
  std::map<std::string, std::string> values_;
  std::set<std::string> flags_;
  bool separator_ = false;
};

}  // namespace dlock::cli
