#pragma once
// dlock::boost_asio::async_acquire, async_wait_lost and async_release on Boost.Asio (Debian's
// Boost 1.74), for services on Boost's io_context (Beast, Boost.MySQL): the same operations as
// dlock/asio.hpp, from the same source. Boost 1.74's Asio has no per-operation cancellation slots,
// so there the std::stop_token argument is the way to cancel a wait. Link dlock::boost_asio.
//
//   using dlock::boost_asio::async_acquire;
//   async_acquire(lock, 5s, stop_source.get_token(), [](std::error_code ec, dlock::lease held) { ... });
#include <dlock/detail/async_waiters.hpp>
#include <dlock/distributed_lock.hpp>
#include <dlock/election.hpp>
#include <dlock/lease.hpp>
#include <dlock/lease_state.hpp>
#include <dlock/rw_lock.hpp>
#include <dlock/semaphore.hpp>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <tuple>
#include <type_traits>

#define DLOCK_ASIO ::boost::asio
#define DLOCK_ASIO_HAS_CANCELLATION_SLOTS 0
namespace dlock::boost_asio {
#include <dlock/detail/asio_operations.ipp>
}  // namespace dlock::boost_asio
#undef DLOCK_ASIO_HAS_CANCELLATION_SLOTS
#undef DLOCK_ASIO
