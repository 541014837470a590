#pragma once
// One hold of a memory:// grant. Reentrant acquisitions each get their own lease (one hold each),
// sharing the grant's generation and fencing token.
#include <memory>

#include "dlock/spi.hpp"
#include "memory_table.hpp"

namespace dlock::memory {

class memory_lease final : public spi::lease_state {
 public:
  memory_lease(std::string name, std::chrono::milliseconds ttl, std::shared_ptr<table> owner_table,
               grant_ticket ticket);
  ~memory_lease() override;

  std::optional<std::uint64_t> fencing_token() const noexcept override { return ticket_.token; }

 protected:
  void do_release(std::error_code& ec) noexcept override;
  void do_renew(std::chrono::milliseconds ttl, std::error_code& ec) noexcept override;

 private:
  std::shared_ptr<table> table_;
  grant_ticket ticket_;
};

}  // namespace dlock::memory
