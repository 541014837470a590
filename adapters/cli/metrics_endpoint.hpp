#pragma once
// `--metrics HOST:PORT` of dlock hold and dlock bench: the backend's lock metrics (dlock/prometheus.hpp)
// served at http://HOST:PORT/metrics while the command runs, for a Prometheus server or curl.
#include <memory>
#include <string>

#include "args.hpp"
#include "dlock/observer.hpp"

namespace dlock::cli {

class metrics_endpoint {
 public:
  // Listens at once. HOST:PORT as "127.0.0.1:9464", "[::1]:9464" or ":9464" (every interface);
  // port 0 takes a free one. Throws usage_error for an address of another shape, and dlock::error
  // (backend_unavailable, exit 69) when nothing can listen there.
  explicit metrics_endpoint(const std::string& address);
  ~metrics_endpoint();
  metrics_endpoint(const metrics_endpoint&) = delete;
  metrics_endpoint& operator=(const metrics_endpoint&) = delete;

  // What to set on the backend (backend::set_observer).
  std::shared_ptr<dlock::observer> observer() const;
  std::string url() const;  // http://HOST:PORT/metrics with the port it listens on

 private:
  struct serving;
  std::unique_ptr<serving> serving_;
};

// The endpoint `--metrics` asks for, announced on stderr ("dlock: metrics at URL"); nullptr
// without the option.
std::unique_ptr<metrics_endpoint> serve_metrics(const args& a);

}  // namespace dlock::cli
