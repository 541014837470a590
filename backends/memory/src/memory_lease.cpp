#include "memory_lease.hpp"

namespace dlock::memory {

memory_lease::memory_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<table> owner_table,
                           ticket t)
    : lease_state(std::move(name), ttl, validity_after(t.granted_at, ttl)),
      table_(std::move(owner_table)),
      ticket_(std::move(t)) {
  ticket_.link->attach(this);
}

memory_lease::~memory_lease() { ticket_.link->detach(); }

void memory_lease::do_release(std::error_code& ec) noexcept {
  try {
    table_->release(name(), ticket_.id, ticket_.link, ec);
  } catch (const std::exception& e) {  // allocation failure while formatting a message
    set_error(ec, errc::backend_error, e.what());
  }
}

void memory_lease::do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept {
  try {
    table_->renew(name(), ticket_.id, ttl, ec);
  } catch (const std::exception& e) {
    set_error(ec, errc::backend_error, e.what());
  }
}

}  // namespace dlock::memory
