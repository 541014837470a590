#pragma once
// dlock::prometheus: an observer (dlock/observer.hpp) that keeps a backend's lock metrics in a
// prometheus::Registry (prometheus-cpp), for a service's /metrics endpoint:
//
//   auto registry = std::make_shared<prometheus::Registry>();
//   auto backend = dlock::open(uri, dlock::make_prometheus_observer(registry));
//   prometheus::Exposer exposer{"127.0.0.1:9464"};
//   exposer.RegisterCollectable(registry);
//
// Every series has the labels `backend` (the URI's scheme) and `primitive` (mutex, read, write,
// semaphore); lock names are not labels unless prometheus_options::name_label asks for them, as
// one series per lock name can swamp a Prometheus server.
//   dlock_acquire_duration_seconds{outcome}  histogram: how long each acquire call took, by its
//                                            outcome (granted, timed_out, cancelled, error)
//   dlock_hold_duration_seconds              histogram: from each grant to its release
//   dlock_leases_held                        gauge: grants not yet released (a lost one counts until
//                                            its holder releases it)
//   dlock_waiters                            gauge: acquires waiting (a deadline in the future)
//   dlock_renewals_total{outcome}            counter: renewals, renewed or failed
//   dlock_renewal_margin_seconds             histogram: validity left when a renewal succeeded
//   dlock_leases_lost_total{reason}          counter: grants lost before their release (lock_lost,
//                                            not_owner)
//   dlock_backend_errors_total{operation}    counter: acquire, release and renew calls that failed
//                                            for another reason than contention, a stop or a loss
// One observer may serve several backends: the `backend` label tells them apart.
#include <memory>
#include <vector>

#include "dlock/observer.hpp"

namespace prometheus {
class Registry;
}

namespace dlock {

struct prometheus_options {
  // Adds the label `name` (the lock's name) to every series.
  bool name_label = false;
  // The buckets of the duration histograms (acquire, hold), in seconds.
  std::vector<double> duration_buckets{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                       0.25,   0.5,   1,      2.5,   5,    10,    30,   60};
  // The buckets of dlock_renewal_margin_seconds, in seconds.
  std::vector<double> margin_buckets{0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60};
};

class prometheus_observer final : public observer {
 public:
  // Registers the metric families in `registry`, which it keeps alive.
  explicit prometheus_observer(std::shared_ptr<prometheus::Registry> registry, prometheus_options options = {});
  ~prometheus_observer() override;
  prometheus_observer(const prometheus_observer&) = delete;
  prometheus_observer& operator=(const prometheus_observer&) = delete;

  void on_acquire(const acquire_event& event) noexcept override;
  void on_release(const release_event& event) noexcept override;
  void on_renewal(const renewal_event& event) noexcept override;
  void on_lost(const loss_event& event) noexcept override;
  void on_waiters(const waiters_event& event) noexcept override;

 private:
  class metrics;
  std::unique_ptr<metrics> metrics_;
};

std::shared_ptr<prometheus_observer> make_prometheus_observer(std::shared_ptr<prometheus::Registry> registry,
                                                              prometheus_options options = {});

}  // namespace dlock
