#include "metrics_endpoint.hpp"

#include <cstdio>
#include <exception>
#include <string_view>

#include "dlock/error.hpp"

#ifdef DLOCK_CLI_METRICS
#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include "dlock/prometheus.hpp"
#endif

namespace dlock::cli {

namespace {

struct host_port {
  std::string host;  // as civetweb takes it: empty for every interface, brackets kept for IPv6
  std::string port;
};

// HOST:PORT, the port 0 to 65535; a bad one is a usage error naming the expected shape.
host_port parse_address(const std::string& address) {
  const auto bad = [&](std::string_view why) {
    return usage_error("--metrics '" + address + "': " + std::string(why) +
                       "; expected HOST:PORT, e.g. 127.0.0.1:9464, [::1]:9464 or :9464 (every interface), "
                       "port 0 for a free one");
  };
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) throw bad("no port");
  host_port parsed{address.substr(0, colon), address.substr(colon + 1)};
  if (parsed.port.empty() || parsed.port.size() > 5 ||
      parsed.port.find_first_not_of("0123456789") != std::string::npos || std::stol(parsed.port) > 65535)
    throw bad("the port must be a number from 0 to 65535");
  const bool bracketed = !parsed.host.empty() && parsed.host.front() == '[';
  if (bracketed ? parsed.host.back() != ']' : parsed.host.find(':') != std::string::npos)
    throw bad("an IPv6 host goes in brackets");
  return parsed;
}

}  // namespace

#ifdef DLOCK_CLI_METRICS

struct metrics_endpoint::serving {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<dlock::observer> observer = make_prometheus_observer(registry);
  std::string host;
  std::unique_ptr<prometheus::Exposer> exposer;
};

metrics_endpoint::metrics_endpoint(const std::string& address) : serving_(std::make_unique<serving>()) {
  const auto [host, port] = parse_address(address);
  serving_->host = host.empty() ? "0.0.0.0" : host;
  try {
    serving_->exposer = std::make_unique<prometheus::Exposer>(host.empty() ? port : host + ":" + port, 1);
  } catch (const std::exception& e) {
    throw error(errc::backend_unavailable, "--metrics: cannot listen on " + address + ": " + e.what());
  }
  serving_->exposer->RegisterCollectable(serving_->registry);
}

std::string metrics_endpoint::url() const {
  const auto ports = serving_->exposer->GetListeningPorts();
  return "http://" + serving_->host + ":" + (ports.empty() ? std::string("?") : std::to_string(ports.front())) +
         "/metrics";
}

std::shared_ptr<dlock::observer> metrics_endpoint::observer() const { return serving_->observer; }

#else

struct metrics_endpoint::serving {};

metrics_endpoint::metrics_endpoint(const std::string& address) {
  parse_address(address);
  throw usage_error("--metrics: this dlock was built without dlock::prometheus (configure with DLOCK_PROMETHEUS=ON)");
}

std::string metrics_endpoint::url() const { return {}; }

std::shared_ptr<dlock::observer> metrics_endpoint::observer() const { return nullptr; }

#endif

metrics_endpoint::~metrics_endpoint() = default;

std::unique_ptr<metrics_endpoint> serve_metrics(const args& a) {
  const auto address = a.get("metrics");
  if (!address) return nullptr;
  auto endpoint = std::make_unique<metrics_endpoint>(*address);
  std::fprintf(stderr, "dlock: metrics at %s\n", endpoint->url().c_str());
  std::fflush(stderr);
  return endpoint;
}

}  // namespace dlock::cli
