// dlock demo [URI] [--workers N] [--stock S]: the classic flash sale (秒杀). N workers each
// repeatedly: take the lock, read the remaining stock from a shared file, and if it is above
// zero, pause a little (the "business logic"), write stock-1 and append a sale record; release.
// Then the SAME run without the lock, showing the oversell the lock prevents.
//
// Workers are processes (`dlock demo-worker`), except for a process-scoped backend (memory://),
// whose exclusion does not reach other processes: there they are threads, and the demo says so.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "dlock/dlock.hpp"

extern char** environ;

namespace dlock::cli {
namespace {

namespace fs = std::filesystem;
constexpr const char* default_uri = "file:///tmp/dlock-demo?poll=1ms..20ms";
constexpr const char* lock_name = "demo/flash-sale";

long read_stock(const fs::path& file) {
  std::ifstream in(file);
  long n = 0;
  in >> n;
  return n;
}

void write_file(const fs::path& file, const std::string& text) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + file.string());
  [[maybe_unused]] auto n = ::pwrite(fd, text.data(), text.size(), 0);
  [[maybe_unused]] auto r = ::ftruncate(fd, static_cast<off_t>(text.size()));
  ::close(fd);
}

void append_line(const fs::path& file, const std::string& line) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "open " + file.string());
  [[maybe_unused]] auto n = ::write(fd, line.data(), line.size());  // O_APPEND: one record per write
  ::close(fd);
}

// One worker's loop: the read-modify-write the lock must protect. Returns the number of sales.
long sell_until_sold_out(distributed_lock* lock, const fs::path& dir, const std::string& who) {
  long sold = 0;
  for (;;) {
    lease held;
    if (lock) held = lock->acquire();
    const long stock = read_stock(dir / "stock");
    if (stock <= 0) return sold;
    std::this_thread::sleep_for(std::chrono::microseconds(300));  // "checking the order"
    write_file(dir / "stock", std::to_string(stock - 1));
    append_line(dir / "sales", who + " " + std::to_string(stock) + "\n");
    ++sold;
    if (lock) held.release();  // throws not_owner if the lock was no longer ours
  }
}

struct outcome {
  long sold = 0, distinct_stock_values = 0, final_stock = 0;
  double seconds = 0;
};

outcome run_sale(const std::string& uri, const fs::path& dir, int workers, long stock, bool locked, bool threads) {
  fs::create_directories(dir);
  fs::remove(dir / "sales");
  write_file(dir / "stock", std::to_string(stock));
  const auto start = std::chrono::steady_clock::now();
  if (threads) {
    auto backend = dlock::open(uri);
    std::vector<std::thread> pool;
    for (int w = 0; w < workers; ++w)
      pool.emplace_back([&, w] {
        auto lock = locked ? backend->make_lock(lock_name) : nullptr;
        sell_until_sold_out(lock.get(), dir, "thread-" + std::to_string(w));
      });
    for (auto& t : pool) t.join();
  } else {
    // The URI goes to the workers in their environment, not on their command line, where `ps`
    // would show its password. Prepared before fork: after it, only async-signal-safe calls.
    const std::string self = self_executable();
    std::vector<std::string> env_storage = {std::string(uri_environment_variable) + "=" + uri};
    for (char** e = environ; *e; ++e)
      if (std::string_view(*e).rfind(std::string(uri_environment_variable) + "=", 0) != 0) env_storage.emplace_back(*e);
    std::vector<char*> envp;
    for (auto& s : env_storage) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<pid_t> pids;
    for (int w = 0; w < workers; ++w) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        const char* argv[] = {self.c_str(), "demo-worker", dir.c_str(), locked ? "locked" : "unlocked", nullptr};
        ::execve(self.c_str(), const_cast<char* const*>(argv), envp.data());
        ::_exit(127);
      }
      pids.push_back(pid);
    }
    for (pid_t p : pids) {
      int status = 0;
      ::waitpid(p, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        std::fprintf(stderr, "dlock demo: worker %d failed (status %d)\n", static_cast<int>(p), status);
    }
  }
  outcome o;
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ifstream sales(dir / "sales");
  std::set<long> seen;
  std::string who;
  long value = 0;
  while (sales >> who >> value) {
    ++o.sold;
    seen.insert(value);
  }
  o.distinct_stock_values = static_cast<long>(seen.size());
  o.final_stock = read_stock(dir / "stock");
  return o;
}

void print(const char* title, const outcome& o, long stock) {
  std::printf("%s\n", title);
  std::printf("  stock %ld, sold %ld, oversold %ld, stock left %ld, %.0f sales/s (%.2fs)\n", stock, o.sold,
              std::max(0L, o.sold - stock), o.final_stock, static_cast<double>(o.sold) / o.seconds, o.seconds);
  std::printf("  lost updates: %ld sale(s) were made against a stock count another worker had already sold\n",
              o.sold - o.distinct_stock_values);
}

}  // namespace

int cmd_demo_worker(const arguments& argv) {
  const args a(argv, {}, {});
  const auto [uri, operands] = take_uri(a, 2, "internal: expected [URI] DIR locked|unlocked");
  if (!uri) throw usage_error("internal: no URI in DLOCK_URI");
  const bool locked = operands[1] == "locked";
  std::unique_ptr<distributed_lock> lock;
  std::shared_ptr<backend> b;
  if (locked) {
    b = dlock::open(*uri);
    lock = b->make_lock(lock_name);
  }
  sell_until_sold_out(lock.get(), operands[0], "pid-" + std::to_string(::getpid()));
  return 0;
}

int cmd_demo(const arguments& argv) {
  const args a(argv, {"workers", "stock", "uri-file"}, {"help"});
  if (a.flag("help")) {
    std::printf("usage: dlock demo [URI] [--uri-file PATH] [--workers N] [--stock S]\n"
                "the flash-sale demo: N workers (default 4) sell S items (default 100) from a shared file,\n"
                "first under the lock NAME '%s' on URI (or --uri-file PATH, or DLOCK_URI; default %s),\n"
                "then without it.\n"
                "exit 0 when the locked run sold exactly the stock.\n",
                lock_name, default_uri);
    return 0;
  }
  const std::string uri = take_uri(a, 0, "expected at most one URI").uri.value_or(default_uri);
  const int workers = static_cast<int>(a.integer("workers", 4, 1, 256));
  const long stock = a.integer("stock", 100, 1, 1'000'000);
  auto backend = dlock::open(uri);  // fails early (exit 64/69) on a bad URI or unreachable server
  const bool threads = backend->scope() == lock_scope::process;
  const fs::path dir = fs::temp_directory_path() / ("dlock-demo-data-" + std::to_string(::getpid()));

  std::printf("flash sale: %d %s sell %ld items; lock '%s' on %s\n", workers,
              threads ? "threads (this backend's lock is process-scoped)" : "processes", stock, lock_name,
              backend->redacted_uri().c_str());
  const outcome with = run_sale(uri, dir, workers, stock, true, threads);
  print("with the lock:", with, stock);
  const outcome without = run_sale(uri, dir, workers, stock, false, threads);
  print("without the lock (the same workers, the same files):", without, stock);
  std::error_code ignored;
  fs::remove_all(dir, ignored);

  const bool correct = with.sold == stock && with.final_stock == 0 && with.distinct_stock_values == stock;
  std::printf("%s\n", correct ? "result: the lock sold exactly the stock; without it the sale went wrong as shown"
                              : "result: WRONG: the locked run did not sell exactly the stock");
  if (correct && without.sold == stock && without.distinct_stock_values == stock)
    std::printf("(the unlocked run happened not to race this time; try more --workers)\n");
  return correct ? 0 : 1;
}

}  // namespace dlock::cli
