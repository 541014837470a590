// async_service: a small Asio coroutine server that takes a distributed lock per request, awaiting
// it with co_await instead of blocking a thread, and cancels every pending acquire when it shuts down.
//
//   async_service URI [PORT]        e.g. async_service redis://127.0.0.1:6379?ttl=10s 7000
//
// A client sends one line per request, "NAME SECONDS": the server waits up to SECONDS for the lock
// NAME, answers "granted NAME" (with the fencing token where the backend has one), holds the lock
// until the client sends another line or leaves, then releases it (async_release) and answers
// "released NAME", or "error NAME: ..." when the lock was lost meanwhile. A wait that runs out
// answers "timeout NAME". On SIGINT or SIGTERM the server stops accepting, cancels the pending
// acquires (each answers "canceled NAME"), releases what it holds and exits 0.
#include <dlock/asio.hpp>
#include <dlock/dlock.hpp>

#include <asio.hpp>
#include <asio/experimental/as_tuple.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <stop_token>
#include <string>

namespace {

using asio::ip::tcp;
using namespace std::chrono_literals;
constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);

struct service {
  std::shared_ptr<dlock::backend> backend;
  std::stop_source shutdown;  // every pending acquire waits with its token
  int pending = 0;
};

asio::awaitable<void> serve(service& s, tcp::socket socket) {
  asio::streambuf input;
  for (;;) {
    auto [read_error, n] = co_await asio::async_read_until(socket, input, '\n', use_tuple);
    if (read_error) co_return;
    std::string line(asio::buffers_begin(input.data()), asio::buffers_begin(input.data()) + static_cast<long>(n));
    input.consume(n);
    std::istringstream request(line);
    std::string name;
    double seconds = 0;
    if (!(request >> name >> seconds) || seconds < 0) {
      co_await asio::async_write(socket, asio::buffer(std::string("error: expected \"NAME SECONDS\"\n")), use_tuple);
      continue;
    }
    auto lock = s.backend->make_lock(name);
    ++s.pending;
    auto [ec, held] =
        co_await dlock::async_acquire(*lock, std::chrono::duration<double>(seconds), s.shutdown.get_token(), use_tuple);
    --s.pending;
    std::string answer;
    if (ec == asio::error::operation_aborted) {
      answer = "canceled " + name + "\n";
    } else if (ec) {
      answer = "error " + name + ": " + ec.message() + "\n";
    } else if (!held) {
      answer = "timeout " + name + "\n";
    } else {
      answer = "granted " + name;
      if (auto token = held.fencing_token()) answer += " token " + std::to_string(*token);
      answer += "\n";
    }
    co_await asio::async_write(socket, asio::buffer(answer), use_tuple);
    if (!held) continue;
    // Held until the client's next line (or its leaving), or until the service shuts down.
    co_await asio::async_read_until(socket, input, '\n', use_tuple);
    // Off this thread: a round trip here would hold up every other request of the service.
    auto [released] = co_await dlock::async_release(std::move(held), use_tuple);
    // not_owner: the lock was lost meanwhile, and the client must know its work was not protected.
    answer = released ? "error " + name + ": " + released.message() + "\n" : "released " + name + "\n";
    co_await asio::async_write(socket, asio::buffer(answer), use_tuple);
  }
}

asio::awaitable<void> accept(service& s, tcp::acceptor& acceptor) {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(use_tuple);
    if (ec) co_return;  // closed: shutting down
    asio::co_spawn(acceptor.get_executor(), serve(s, std::move(socket)), [](std::exception_ptr e) {
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& what) {
        std::cerr << "async_service: a request failed: " << what.what() << '\n';
      }
    });
  }
}

// Lets the canceled acquires answer their clients, then ends the sessions: the locks still held are
// released as their sessions are destroyed with the io_context.
asio::awaitable<void> drain_then_stop(service& s, asio::io_context& io) {
  asio::steady_timer tick(io);
  for (int i = 0; i < 500 && s.pending > 0; ++i) {
    tick.expires_after(10ms);
    co_await tick.async_wait(use_tuple);
  }
  tick.expires_after(50ms);  // the answers' writes
  co_await tick.async_wait(use_tuple);
  io.stop();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: async_service URI [PORT]\n";
    return 64;
  }
  try {
    service s;
    s.backend = dlock::open(argv[1]);
    asio::io_context io;
    tcp::acceptor acceptor(
        io, {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(argc == 3 ? std::stoi(argv[2]) : 0)});
    std::cout << "listening on 127.0.0.1:" << acceptor.local_endpoint().port() << std::endl;
    asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](std::error_code, int) {
      std::cout << "shutting down: canceling " << s.pending << " pending acquire(s)" << std::endl;
      acceptor.close();
      s.shutdown.request_stop();
      asio::co_spawn(io, drain_then_stop(s, io), asio::detached);
    });
    asio::co_spawn(io, accept(s, acceptor), asio::detached);
    io.run();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "async_service: " << e.what() << '\n';
    return 1;
  }
}
