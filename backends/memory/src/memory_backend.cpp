#include "memory_backend.hpp"

#include "memory_lock.hpp"
#include "memory_primitives.hpp"

namespace dlock::memory {

std::string namespace_of(const uri& u) {
  if (!u.user().empty() || u.password())
    throw error(errc::invalid_uri,
                u.redacted() + ": memory:// takes no user or password; expected memory://[namespace]");
  if (u.hosts().size() > 1)
    throw error(errc::invalid_uri, u.redacted() + ": memory:// takes one namespace; expected memory://[namespace]");
  std::string ns;
  if (!u.hosts().empty()) {
    if (u.hosts().front().port)
      throw error(errc::invalid_uri, u.redacted() + ": memory:// takes no port; expected memory://[namespace]");
    ns = u.hosts().front().host;
  }
  ns += u.path();
  // A trailing '/' names no other namespace: memory://ns/ is memory://ns, memory:/// is memory://
  // (as file:///dir/ is file:///dir), so a URI written either way shares one table.
  while (!ns.empty() && ns.back() == '/') ns.pop_back();
  return ns;
}

memory_backend::memory_backend(const uri& u, const lock_options& defaults)
    : backend(memory_caps, memory_primitives, lock_scope::process, name_limits{memory_max_name_length}, defaults,
              u.redacted()),
      ns_(namespace_of(u)),
      table_(table_for(ns_)) {}

std::unique_ptr<distributed_lock> memory_backend::do_make_lock(std::string name, lock_options options) {
  return std::make_unique<memory_lock>(std::move(name), caps(), std::move(options), table_);
}

std::unique_ptr<rw_lock> memory_backend::do_make_rw_lock(std::string name, lock_options options) {
  return std::make_unique<memory_rw_lock>(std::move(name), rw_caps(), std::move(options), table_);
}

std::unique_ptr<semaphore> memory_backend::do_make_semaphore(std::string name, std::uint32_t max_count,
                                                             lock_options options) {
  return std::make_unique<memory_semaphore>(std::move(name), max_count, semaphore_caps(), std::move(options), table_);
}

lock_info memory_backend::do_inspect(const std::string& name) { return table_->inspect(name); }

std::vector<std::string> memory_backend::do_list(const std::string& prefix) { return table_->held_names(prefix); }

std::vector<lock_holder> memory_backend::do_force_release(const std::string& name) {
  return table_->force_release(name);
}

bool break_grant(const std::string& ns, const std::string& name) { return table_for(ns)->break_grants(name) > 0; }

bool is_held(const std::string& ns, const std::string& name) { return table_for(ns)->holders(name) > 0; }

}  // namespace dlock::memory
