#pragma once
// The reader-writer lock and counting semaphore of the unique-index strategy (units.hpp: the
// tables and statements). Internal to sql_common: index_strategy.cpp makes them.
#include <cstdint>
#include <memory>
#include <string>
#include <system_error>

#include "dlock_sql/units.hpp"
#include "strategy_common.hpp"

namespace dlock::sql::detail {

struct units_state;

// What one backend's primitives share: their pool (a copy of the backend's setup: the same
// connections) and the dialect's statements.
class units_primitives {
 public:
  // Runs the DDL when params.create_table.
  units_primitives(backend_setup setup, units_sql sql);

  std::unique_ptr<rw_lock> make_rw_lock(std::string name, capabilities caps, lock_options options) const;
  std::unique_ptr<semaphore> make_semaphore(std::string name, std::uint32_t max_count, capabilities caps,
                                            lock_options options) const;
  // Expired holder rows (backend::sweep_expired).
  std::size_t sweep(std::error_code& ec) const noexcept;
  // The mutex of `name` (the index strategy's lock row) waiting behind the name's readers marks
  // its reader-writer lock as a waiting writer does, so new readers stay out (writer preference
  // holds for the mutex too); cleared once it is granted or gives up (the mark expires anyway).
  void mark_writer(const std::string& name, const std::string& owner, std::chrono::milliseconds ttl,
                   std::error_code& ec) const noexcept;
  void clear_writer(const std::string& name, const std::string& owner) const noexcept;

 private:
  std::shared_ptr<units_state> st_;
};

}  // namespace dlock::sql::detail
