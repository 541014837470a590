#pragma once
// dlock::async_acquire, async_campaign, async_wait_lost and async_release on standalone Asio
// (Debian's libasio-dev 1.22): any completion token (a callback, asio::use_future,
// asio::use_awaitable, as_tuple, deferred) and per-operation cancellation (bind_cancellation_slot,
// parallel_group, awaitable_operators' ||).
// Link dlock::asio. The core stays free of Asio; dlock/boost_asio.hpp serves Boost.Asio the same way.
//
//   asio::awaitable<void> handle(dlock::distributed_lock& lock) {
//     auto [ec, held] = co_await dlock::async_acquire(lock, 5s, asio::as_tuple(asio::use_awaitable));
//     if (!held) co_return;
//     ...work under the lock...
//     auto [released] = co_await dlock::async_release(std::move(held), asio::as_tuple(asio::use_awaitable));
//   }
#include <dlock/detail/async_waiters.hpp>
#include <dlock/distributed_lock.hpp>
#include <dlock/election.hpp>
#include <dlock/lease.hpp>
#include <dlock/lease_state.hpp>
#include <dlock/rw_lock.hpp>
#include <dlock/semaphore.hpp>

#include <asio/associated_cancellation_slot.hpp>
#include <asio/associated_executor.hpp>
#include <asio/async_result.hpp>
#include <asio/error.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>

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

#define DLOCK_ASIO ::asio
#define DLOCK_ASIO_HAS_CANCELLATION_SLOTS 1
namespace dlock {
#include <dlock/detail/asio_operations.ipp>
}  // namespace dlock
#undef DLOCK_ASIO_HAS_CANCELLATION_SLOTS
#undef DLOCK_ASIO
