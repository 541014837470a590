#include "dlock/prometheus.hpp"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "dlock/error.hpp"

namespace dlock {

namespace {

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

// A loss's reason as a label value: the few a loss can have, so that the label stays bounded.
std::string_view reason_label(const std::error_code& reason) {
  if (reason == errc::lock_lost) return "lock_lost";
  if (reason == errc::not_owner) return "not_owner";
  return "other";
}

// A loss is reported as one (dlock_leases_lost_total), not as a backend error.
bool is_loss(const std::error_code& ec) { return ec == errc::lock_lost || ec == errc::not_owner; }

// One family's series by label values. Family::Add looks a series up by a map of label strings
// under the family's mutex; the series are looked up here by one flat key instead, so that an
// event costs one short string and one hash lookup.
template <class Metric>
class series_of {
 public:
  series_of(prometheus::Family<Metric>& family, const char* extra_label, bool name_label)
      : family_(family), extra_label_(extra_label), name_label_(name_label) {}

  template <class... Args>
  Metric& at(const observed_lock& lock, std::string_view extra, const Args&... args) {
    const auto primitive = to_string(lock.primitive);
    std::string key;
    key.reserve(lock.backend.size() + primitive.size() + extra.size() + (name_label_ ? lock.name.size() : 0) + 3);
    key.append(lock.backend).push_back('\x1f');
    key.append(primitive).push_back('\x1f');
    key.append(extra);
    if (name_label_) key.append("\x1f").append(lock.name);
    std::lock_guard guard(mutex_);
    if (auto found = by_key_.find(key); found != by_key_.end()) return *found->second;
    prometheus::Labels labels{{"backend", std::string(lock.backend)}, {"primitive", std::string(primitive)}};
    if (extra_label_ != nullptr) labels.emplace(extra_label_, std::string(extra));
    if (name_label_) labels.emplace("name", std::string(lock.name));
    auto& made = family_.Add(labels, args...);
    by_key_.emplace(std::move(key), &made);
    return made;
  }

 private:
  prometheus::Family<Metric>& family_;
  const char* extra_label_;  // nullptr: none
  bool name_label_;
  std::mutex mutex_;
  std::unordered_map<std::string, Metric*> by_key_;  // the series live in the family
};

}  // namespace

class prometheus_observer::metrics {
 public:
  metrics(std::shared_ptr<prometheus::Registry> registry, prometheus_options options)
      : registry_(registry ? std::move(registry)
                           : throw error(errc::invalid_argument, "dlock::prometheus_observer: the registry is null")),
        options_(std::move(options)),
        acquire_duration_(prometheus::BuildHistogram()
                              .Name("dlock_acquire_duration_seconds")
                              .Help("How long each acquire call took, by its outcome")
                              .Register(*registry_),
                          "outcome", options_.name_label),
        hold_duration_(prometheus::BuildHistogram()
                           .Name("dlock_hold_duration_seconds")
                           .Help("How long each grant was held, from its acquire to its release")
                           .Register(*registry_),
                       nullptr, options_.name_label),
        leases_held_(prometheus::BuildGauge()
                         .Name("dlock_leases_held")
                         .Help("Grants not yet released (a lost one counts until its holder releases it)")
                         .Register(*registry_),
                     nullptr, options_.name_label),
        waiters_(prometheus::BuildGauge()
                     .Name("dlock_waiters")
                     .Help("Acquire calls waiting for a grant")
                     .Register(*registry_),
                 nullptr, options_.name_label),
        renewals_(prometheus::BuildCounter()
                      .Name("dlock_renewals_total")
                      .Help("Renewals of a grant's ttl, renewed or failed")
                      .Register(*registry_),
                  "outcome", options_.name_label),
        renewal_margin_(prometheus::BuildHistogram()
                            .Name("dlock_renewal_margin_seconds")
                            .Help("The validity a grant had left when its renewal succeeded")
                            .Register(*registry_),
                        nullptr, options_.name_label),
        leases_lost_(prometheus::BuildCounter()
                         .Name("dlock_leases_lost_total")
                         .Help("Grants lost before their release, by reason")
                         .Register(*registry_),
                     "reason", options_.name_label),
        backend_errors_(prometheus::BuildCounter()
                            .Name("dlock_backend_errors_total")
                            .Help("Acquire, release and renew calls that failed (not contention, a stop or a loss)")
                            .Register(*registry_),
                        "operation", options_.name_label) {}

  void acquired(const acquire_event& e) {
    acquire_duration_.at(e.lock, to_string(e.outcome), options_.duration_buckets).Observe(seconds(e.waited));
    if (e.outcome == acquire_outcome::granted) leases_held_.at(e.lock, {}).Increment();
    if (e.outcome == acquire_outcome::error) backend_errors_.at(e.lock, "acquire").Increment();
  }

  void released(const release_event& e) {
    hold_duration_.at(e.lock, {}, options_.duration_buckets).Observe(seconds(e.held));
    leases_held_.at(e.lock, {}).Decrement();
    if (e.error && !is_loss(e.error)) backend_errors_.at(e.lock, "release").Increment();
  }

  void renewed(const renewal_event& e) {
    renewals_.at(e.lock, e.renewed ? "renewed" : "failed").Increment();
    if (e.renewed) renewal_margin_.at(e.lock, {}, options_.margin_buckets).Observe(seconds(e.margin));
    if (!e.renewed && !is_loss(e.error)) backend_errors_.at(e.lock, "renew").Increment();
  }

  void lost(const loss_event& e) { leases_lost_.at(e.lock, reason_label(e.reason)).Increment(); }

  void waiting(const waiters_event& e) { waiters_.at(e.lock, {}).Increment(e.change); }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus_options options_;
  series_of<prometheus::Histogram> acquire_duration_;
  series_of<prometheus::Histogram> hold_duration_;
  series_of<prometheus::Gauge> leases_held_;
  series_of<prometheus::Gauge> waiters_;
  series_of<prometheus::Counter> renewals_;
  series_of<prometheus::Histogram> renewal_margin_;
  series_of<prometheus::Counter> leases_lost_;
  series_of<prometheus::Counter> backend_errors_;
};

prometheus_observer::prometheus_observer(std::shared_ptr<prometheus::Registry> registry, prometheus_options options)
    : metrics_(std::make_unique<metrics>(std::move(registry), std::move(options))) {}

prometheus_observer::~prometheus_observer() = default;

// An observer must not throw: a metric that cannot be recorded (out of memory) is dropped.
void prometheus_observer::on_acquire(const acquire_event& event) noexcept try {
  metrics_->acquired(event);
} catch (...) {
}

void prometheus_observer::on_release(const release_event& event) noexcept try {
  metrics_->released(event);
} catch (...) {
}

void prometheus_observer::on_renewal(const renewal_event& event) noexcept try {
  metrics_->renewed(event);
} catch (...) {
}

void prometheus_observer::on_lost(const loss_event& event) noexcept try { metrics_->lost(event); } catch (...) {
}

void prometheus_observer::on_waiters(const waiters_event& event) noexcept try {
  metrics_->waiting(event);
} catch (...) {
}

std::shared_ptr<prometheus_observer> make_prometheus_observer(std::shared_ptr<prometheus::Registry> registry,
                                                              prometheus_options options) {
  return std::make_shared<prometheus_observer>(std::move(registry), std::move(options));
}

}  // namespace dlock
