#include "dlock/registry.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "dlock/error.hpp"
#include "dlock/spi.hpp"
#include "errors_caught.hpp"
#include "module_index.hpp"
#include "or_throw.hpp"

namespace dlock {

const std::vector<std::string>& common_parameters() {
  static const std::vector<std::string> keys = {"ttl", "watchdog", "renew", "poll"};
  return keys;
}

lock_options parse_common_options(const uri& u) {
  lock_options o;
  if (auto ttl = u.get_duration("ttl")) {
    if (ttl->count() <= 0) throw error(errc::invalid_uri, "ttl in " + u.redacted() + " must be at least 1ms");
    o.ttl = *ttl;
  }
  if (auto w = u.get_bool("watchdog")) o.watchdog = *w;
  if (auto r = u.get_duration("renew")) {
    if (r->count() <= 0 || *r >= o.ttl)
      throw error(errc::invalid_uri, "renew in " + u.redacted() + " must be positive and shorter than the ttl (" +
                                         format_duration(o.ttl) + ")");
    o.renew_every = *r;
  }
  if (auto poll = u.get("poll")) {
    const auto dots = poll->find("..");
    try {
      o.poll.min = parse_duration(poll->substr(0, dots));
      o.poll.max = dots == std::string::npos ? o.poll.min : parse_duration(poll->substr(dots + 2));
    } catch (const error&) {
      throw error(errc::invalid_uri,
                  "poll='" + *poll + "' in " + u.redacted() +
                      " is not a backoff range; expected MIN..MAX such as 10ms..800ms, or one duration");
    }
    if (o.poll.min.count() <= 0 || o.poll.max < o.poll.min)
      throw error(errc::invalid_uri, "poll='" + *poll + "' in " + u.redacted() + " must satisfy 0 < MIN <= MAX");
  }
  return o;
}

void registry::add(backend_info info) {
  std::unique_lock guard(mutex_);
  if (by_scheme_.contains(info.scheme))
    throw error(errc::invalid_argument, "backend scheme '" + info.scheme + "' is registered twice");
  info.caps = with_primitives(info.caps, info.primitives);
  auto scheme = info.scheme;
  by_scheme_.emplace(std::move(scheme), std::move(info));
}

std::vector<backend_info> registry::list() const {
  std::shared_lock guard(mutex_);
  std::vector<backend_info> out;
  for (const auto& [scheme, info] : by_scheme_) out.push_back(info);
  return out;
}

std::optional<backend_info> registry::find(std::string_view scheme) const {
  if (!contains(scheme)) try_load_plugin_for(scheme);
  std::shared_lock guard(mutex_);
  const auto it = by_scheme_.find(scheme);
  if (it == by_scheme_.end()) return std::nullopt;
  return it->second;
}

bool registry::contains(std::string_view scheme) const {
  std::shared_lock guard(mutex_);
  return by_scheme_.find(scheme) != by_scheme_.end();
}

void registry::add_plugin_dir(std::filesystem::path dir) {
  std::unique_lock guard(mutex_);
  plugin_dirs_.push_back(std::move(dir));
}

void registry::add_plugin_dirs_from_environment() {
  const char* path = std::getenv("DLOCK_PLUGIN_PATH");
  if (path == nullptr) return;
  std::string_view rest(path);
  while (!rest.empty()) {
    const auto colon = rest.find(':');
    if (const auto dir = rest.substr(0, colon); !dir.empty()) add_plugin_dir(std::filesystem::path(dir));
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
}

void registry::load_plugin(const std::filesystem::path& module) {
  // Never dlclose'd: leases and threads may still run the module's code at any time.
  void* handle = dlopen(module.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    throw error(errc::unknown_scheme, "cannot load backend module " + module.string() + ": " + (why ? why : "?"));
  }
  using abi_fn = int (*)();
  using register_fn = void (*)(registry&);
  auto abi = reinterpret_cast<abi_fn>(dlsym(handle, "dlock_plugin_abi_version"));
  auto reg = reinterpret_cast<register_fn>(dlsym(handle, "dlock_plugin_register"));
  if (abi == nullptr || reg == nullptr)
    throw error(errc::unknown_scheme, module.string() + " is not a dlock backend module (no DLOCK_PLUGIN entry point)");
  if (abi() != DLOCK_PLUGIN_ABI_VERSION)
    throw error(errc::unknown_scheme, module.string() + " was built for dlock plugin ABI " + std::to_string(abi()) +
                                          ", this program speaks " + std::to_string(DLOCK_PLUGIN_ABI_VERSION));
  reg(*this);
}

bool registry::try_load_plugin_for(std::string_view scheme) const {
  std::vector<std::filesystem::path> dirs;
  {
    std::shared_lock guard(mutex_);
    dirs = plugin_dirs_;
  }
  for (const auto& dir : dirs) {
    const auto module = detail::find_module(dir, scheme);
    if (!module) continue;
    // Loading registers into this registry; the registry is logically unchanged (it answers
    // open() for more schemes), hence the const_cast on a const lookup path.
    const_cast<registry*>(this)->load_plugin(*module);
    return contains(scheme);
  }
  return false;
}

void registry::load_all_plugins() {
  std::vector<std::filesystem::path> dirs;
  {
    std::shared_lock guard(mutex_);
    dirs = plugin_dirs_;
  }
  for (const auto& dir : dirs) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const auto file = entry.path().filename().string();
      if (!file.starts_with("libdlock_") || !file.ends_with(".so")) continue;
      try {
        load_plugin(entry.path());
      } catch (const error&) {
        // A module whose scheme is already built in, or a foreign .so: `dlock backends` lists
        // what did load; open() reports a failing module when it is actually asked for.
      }
    }
  }
}

std::shared_ptr<backend> registry::open(std::string_view uri_text, capabilities required) const {
  return detail::or_throw([&](std::error_code& ec) { return open(uri_text, required, ec); });
}

std::shared_ptr<backend> registry::open(std::string_view uri_text, std::shared_ptr<observer> target) const {
  return open(uri_text, {}, std::move(target));
}

std::shared_ptr<backend> registry::open(std::string_view uri_text, capabilities required,
                                        std::shared_ptr<observer> target) const {
  return detail::or_throw([&](std::error_code& ec) { return open(uri_text, required, std::move(target), ec); });
}

std::shared_ptr<backend> registry::open(std::string_view uri_text, capabilities required,
                                        std::shared_ptr<observer> target, std::error_code& ec) const noexcept {
  auto b = open(uri_text, required, ec);
  if (b) b->set_observer(std::move(target));  // a mutex and a shared_ptr: cannot fail
  return b;
}

std::shared_ptr<backend> registry::open(std::string_view uri_text, capabilities required,
                                        std::error_code& ec) const noexcept {
  clear_last_error_message();
  ec.clear();
  return detail::errors_caught(ec, [&]() -> std::shared_ptr<backend> {
    const uri u = uri::parse(uri_text);
    // Only the module that has the scheme is loaded (module_index.hpp says how it is found).
    if (!contains(u.scheme())) try_load_plugin_for(u.scheme());
    backend_info info;
    {
      std::shared_lock guard(mutex_);
      auto it = by_scheme_.find(u.scheme());
      if (it == by_scheme_.end()) {
        // "postgres://", "mysql://": the server is named, not the way to lock on it.
        std::string strategies;
        for (const auto& [scheme, i] : by_scheme_)
          if (scheme.starts_with(u.scheme() + "+")) strategies += (strategies.empty() ? "" : ", ") + scheme;
        if (!strategies.empty()) {
          set_error(ec, errc::unknown_scheme,
                    "scheme '" + u.scheme() + "' in " + u.redacted() + " names a server, not a way to lock on it; " +
                        "choose one of " + strategies + " (e.g. " +
                        by_scheme_.lower_bound(u.scheme() + "+")->second.example_uri +
                        "); each backend's README says what each one does");
          return nullptr;
        }
        std::string known;
        for (const auto& [scheme, i] : by_scheme_) known += "\n  " + scheme + "  e.g. " + i.example_uri;
        std::string modules;
        for (const auto& dir : plugin_dirs_)
          for (const auto& scheme : detail::indexed_schemes(dir)) modules += " " + scheme;
        set_error(ec, errc::unknown_scheme,
                  "unknown scheme '" + u.scheme() + "' in " + u.redacted() + "; the backends built in are:" + known +
                      (modules.empty() ? "" : "\nand those of the modules in the plugin folders:" + modules) +
                      "\n(a backend built as a module is found in the folders of DLOCK_PLUGIN_PATH, as " +
                      detail::module_file_name(u.scheme()) +
                      " or the module whose libdlock_*.schemes lists the scheme)");
        return nullptr;
      }
      info = it->second;
    }
    if (const auto missing = info.caps.missing(required); !missing.empty()) {
      std::string offered;  // the schemes that would do, so the message says where to go
      {
        std::shared_lock guard(mutex_);
        for (const auto& [scheme, other] : by_scheme_)
          if (other.caps.has_all(required) && other.unsafe_because.empty())
            offered += (offered.empty() ? "" : ", ") + scheme;
      }
      set_error(ec, errc::missing_capability,
                "backend '" + info.scheme + "' lacks the required capabilities " + missing.to_string() + " (it has " +
                    info.caps.to_string() + "); " +
                    (offered.empty() ? std::string("no registered backend has them all")
                                     : "the registered backends that have them: " + offered));
      return nullptr;
    }
    if (info.scope == lock_scope::network && u.hosts().empty()) {
      set_error(
          ec, errc::invalid_uri,
          "no host in " + u.redacted() + "; " + info.scheme + " talks to a server: expected e.g. " + info.example_uri);
      return nullptr;
    }
    auto accepted = common_parameters();
    accepted.insert(accepted.end(), info.parameters.begin(), info.parameters.end());
    if (!info.unsafe_because.empty()) {
      accepted.emplace_back("unsafe");
      if (!u.get_bool("unsafe").value_or(false)) {
        set_error(ec, errc::invalid_uri,
                  "backend '" + info.scheme + "' in " + u.redacted() +
                      " is an UNSAFE lock kept to show how it fails (" + info.unsafe_because +
                      "); add unsafe=true to the URI to open it anyway");
        return nullptr;
      }
    }
    u.require_known_keys(accepted);
    const lock_options defaults = parse_common_options(u);
    auto b = info.open(u, defaults);
    if (!b) set_error(ec, errc::backend_error, "backend '" + info.scheme + "' failed to open " + u.redacted());
    return b;
  });
}

}  // namespace dlock
