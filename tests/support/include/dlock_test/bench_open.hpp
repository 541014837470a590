#pragma once
// For the Google Benchmark programs built with the test support (tools/bench/*): a target whose
// server is not there is a skipped benchmark with the reason, not an aborted program.
#include <benchmark/benchmark.h>

#include <exception>
#include <memory>
#include <string>

#include "dlock/dlock.hpp"

namespace dlock::testing {

// dlock::open(uri), or null after marking `state` skipped with open's message.
inline std::shared_ptr<dlock::backend> open_or_skip(benchmark::State& state, const std::string& uri) {
  try {
    return dlock::open(uri);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
    return nullptr;
  }
}

}  // namespace dlock::testing
