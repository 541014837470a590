#include "args.hpp"

#include <cerrno>
#include <cstdlib>

#include "dlock/error.hpp"
#include "dlock/uri.hpp"

namespace dlock::cli {

args::args(const std::vector<std::string>& argv, const std::set<std::string>& options,
           const std::set<std::string>& flags) {
  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--") {
      separator_ = true;
      command_.assign(argv.begin() + static_cast<long>(i) + 1, argv.end());
      return;
    }
    if (a.size() > 2 && a.rfind("--", 0) == 0) {
      std::string key = a.substr(2), value;
      const auto eq = key.find('=');
      const bool inline_value = eq != std::string::npos;
      if (inline_value) {
        value = key.substr(eq + 1);
        key.resize(eq);
      }
      if (flags.count(key)) {
        if (inline_value) throw usage_error("--" + key + " takes no value");
        flags_.insert(key);
      } else if (options.count(key)) {
        if (!inline_value) {
          if (i + 1 >= argv.size()) throw usage_error("--" + key + " needs a value");
          value = argv[++i];
        }
        values_[key] = value;
      } else {
        throw usage_error("unknown option --" + key);
      }
      continue;
    }
    positional_.push_back(a);
  }
}

std::optional<std::string> args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::chrono::milliseconds> args::duration(const std::string& name) const {
  auto v = get(name);
  if (!v) return std::nullopt;
  if (*v == "0") return std::chrono::milliseconds::zero();
  try {
    return dlock::parse_duration(*v);
  } catch (const dlock::error& e) {
    throw usage_error("--" + name + ": " + e.what());
  }
}

long args::integer(const std::string& name, long fallback, long min, long max) const {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(v->c_str(), &end, 10);
  if (errno || end == v->c_str() || *end || n < min || n > max)
    throw usage_error("--" + name + " " + *v + ": expected an integer in [" + std::to_string(min) + ", " +
                      std::to_string(max) + "]");
  return n;
}

}  // namespace dlock::cli
