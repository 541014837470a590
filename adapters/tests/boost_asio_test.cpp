// dlock/boost_asio.hpp on Boost.Asio 1.74: the cases standalone Asio passes (async_cases.ipp), with
// the stop token as the way to cancel (Boost 1.74 has no per-operation cancellation slots).
#include <dlock/boost_asio.hpp>
#include <dlock/dlock.hpp>

#include <boost/asio.hpp>
#include <boost/asio/use_future.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

#define ASYNC_NET ::boost::asio
#define ASYNC_API ::dlock::boost_asio
namespace {
// How this flavour's canceled operations complete.
bool is_canceled(std::error_code ec) { return ec == std::errc::operation_canceled; }
}  // namespace
#include "async_cases.ipp"
