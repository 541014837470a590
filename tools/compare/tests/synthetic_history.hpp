#pragma once
// Hand-made histories for the checker's unit tests: instants in milliseconds from 0.
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "dlock_compare/event.hpp"

namespace dlock::compare::testing {

// One section, built step by step: section_of(1).token(5).granted(0).write(10, 50).released(51).
class section_of {
 public:
  explicit section_of(std::uint32_t client, std::uint32_t attempt = 0) : client_(client), attempt_(attempt) {}
  section_of& token(std::uint64_t t) {
    token_ = t;
    return *this;
  }
  section_of& started(int ms) {
    started_ms_ = ms;
    return *this;
  }
  section_of& granted(int ms) {
    granted_ms_ = ms;
    return *this;
  }
  // A write that never ends: its process died while writing.
  section_of& write(int begin_ms) {
    begin_ms_ = begin_ms;
    return *this;
  }
  section_of& write(int begin_ms, int end_ms) {
    begin_ms_ = begin_ms;
    end_ms_ = end_ms;
    return *this;
  }
  section_of& lost(int ms) {
    lost_ms_ = ms;
    return *this;
  }
  section_of& released(int ms, event_kind outcome = event_kind::released) {
    release_ms_ = ms;
    release_ = outcome;
    return *this;
  }
  section_of& verdict(fence_verdict v) {
    verdict_ = v;
    return *this;
  }
  // lease.held() as the worker saw it when the write began and ended (held by default).
  section_of& held(bool at_begin, bool at_end) {
    held_at_begin_ = at_begin;
    held_at_end_ = at_end;
    return *this;
  }

 private:
  friend class synthetic_history;
  std::uint32_t client_;
  std::uint32_t attempt_;
  std::optional<std::uint64_t> token_;
  int started_ms_ = 0;
  int granted_ms_ = 0;
  int begin_ms_ = 0;
  std::optional<int> end_ms_;
  std::optional<int> release_ms_;
  std::optional<int> lost_ms_;
  event_kind release_ = event_kind::released;
  fence_verdict verdict_ = fence_verdict::accepted;
  bool held_at_begin_ = true;
  bool held_at_end_ = true;
};

class synthetic_history {
 public:
  synthetic_history& add(event_kind kind, std::uint32_t client, std::uint32_t attempt, int at_ms,
                         std::optional<std::uint64_t> token = std::nullopt, fence_verdict verdict = fence_verdict::none,
                         bool held = false) {
    events_.push_back(
        make_event(kind, client, attempt, instant(std::chrono::milliseconds(at_ms)), token, verdict, held));
    return *this;
  }

  synthetic_history& add(const section_of& s) {
    add(event_kind::acquire_started, s.client_, s.attempt_, s.started_ms_);
    add(event_kind::granted, s.client_, s.attempt_, s.granted_ms_, s.token_);
    add(event_kind::write_begin, s.client_, s.attempt_, s.begin_ms_, s.token_, s.verdict_, s.held_at_begin_);
    if (s.end_ms_)
      add(event_kind::write_end, s.client_, s.attempt_, *s.end_ms_, s.token_, fence_verdict::none, s.held_at_end_);
    if (s.lost_ms_) add(event_kind::lost, s.client_, s.attempt_, *s.lost_ms_, s.token_);
    if (s.release_ms_) add(s.release_, s.client_, s.attempt_, *s.release_ms_, s.token_);
    return *this;
  }

  const std::vector<event>& events() const { return events_; }

 private:
  std::vector<event> events_;
};

inline shared_clock::duration ms(int n) { return std::chrono::milliseconds(n); }
inline instant at_ms(int n) { return instant(ms(n)); }

}  // namespace dlock::compare::testing
