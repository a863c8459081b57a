// The metrics endpoint's HTTP listener on cpp-httplib: the module of metrics_http.h.
#include <httplib.h>
#include <sys/socket.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include "metrics_http/metrics_http.h"

namespace rosetctl {
namespace {

// Workers serving connections. cpp-httplib gives a connection to one worker for its whole life:
// a client that connects and sends nothing, or half a request, holds it until a timeout below.
// Eight that mostly wait instead of two: serve's resident memory grew by less than its spread
// from run to run (bench/README.md, "Metrics").
constexpr size_t kWorkers = 8;
// Between two reads or writes of a connection, and while it idles between requests: a scraper
// sends its request at once and reads the answer at once; a client that does not is dropped.
constexpr time_t kIdleSeconds = 2;
// Accepted connections waiting for a worker. Each holds a file descriptor, and the serve's CSI
// and node sockets draw on the same limit (often 1,024): a crowd that kept connecting would
// otherwise exhaust it. Past this many, the accepting thread itself serves the oldest (bounded
// by kIdleSeconds per exchange) before it accepts again, so the kernel's backlog holds the rest.
constexpr size_t kMaxWaiting = 256;

// cpp-httplib's own pool serves connections in the order they came. Behind a crowd of idle
// connections, a scrape then waits for each of them to time out, a few at a time (200 of them
// hold eight workers for 50 s). Newest first, it waits for one worker to come free: when more
// come than the workers serve, the newest client is the one most likely still waiting, and the
// older ones, whose clients gave up or never meant to ask, are dropped by their timeouts in turn.
class NewestFirstQueue : public httplib::TaskQueue {
 public:
  explicit NewestFirstQueue(size_t workers) {
    for (size_t i = 0; i < workers; ++i)
      workers_.emplace_back([this] { work(); });
  }
  ~NewestFirstQueue() override { shutdown(); }

  void enqueue(std::function<void()> connection) override {
    std::function<void()> overflow;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      pending_.push_back(std::move(connection));
      if (pending_.size() > kMaxWaiting) {
        overflow = std::move(pending_.front());
        pending_.pop_front();
      }
    }
    ready_.notify_one();
    if (overflow) overflow();  // on the accepting thread: no accept until it is done
  }

  // Serves what is pending (each task closes its socket; the server has stopped, so at once),
  // then joins the workers.
  void shutdown() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (std::thread& worker : workers_)
      worker.join();
    workers_.clear();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> connection;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return !pending_.empty() || stopping_; });
        if (pending_.empty()) return;
        connection = std::move(pending_.back());
        pending_.pop_back();
      }
      connection();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> pending_;  // guarded by mutex_; the newest at the back
  bool stopping_ = false;                      // guarded by mutex_
  std::vector<std::thread> workers_;
};

class Listener final : public MetricsHttp {
 public:
  ~Listener() override {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  int port() const override { return port_; }

  bool listen(const std::string& host, int port, std::function<std::string()> body) {
    httplib::Server& server = server_;
    // cpp-httplib binds with SO_REUSEPORT, which would let a second serve on the same address
    // start and take half the scrapes. SO_REUSEADDR alone still binds past the connections a
    // stopped serve left in TIME_WAIT.
    server.set_socket_options([](socket_t socket) {
      int on = 1;
      ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    });
    server.new_task_queue = [] { return new NewestFirstQueue(kWorkers); };
    server.set_read_timeout(kIdleSeconds, 0);
    server.set_write_timeout(kIdleSeconds, 0);
    server.set_keep_alive_timeout(kIdleSeconds);
    // A scraper's next scrape comes seconds later, past kIdleSeconds, on a new connection
    // anyway; a client asking on and on holds its worker for five requests at most.
    server.set_keep_alive_max_count(5);
    server.Get("/metrics",
               [body = std::move(body)](const httplib::Request&, httplib::Response& response) {
                 response.set_content(body(), "text/plain; version=0.0.4; charset=utf-8");
               });
    if (port == 0) {
      port = server.bind_to_any_port(host);
    } else if (!server.bind_to_port(host, port)) {
      port = -1;
    }
    if (port <= 0) return false;
    port_ = port;
    thread_ = std::thread([&server] { server.listen_after_bind(); });
    return true;
  }

 private:
  httplib::Server server_;
  std::thread thread_;  // runs the server's accept loop
  int port_ = 0;
};

}  // namespace
}  // namespace rosetctl

extern "C" rosetctl::MetricsHttp* rosetctl_metrics_http_listen(const std::string& host, int port,
                                                               std::function<std::string()> body) {
  auto listener = std::make_unique<rosetctl::Listener>();
  if (!listener->listen(host, port, std::move(body))) return nullptr;
  return listener.release();
}

static_assert(std::is_same_v<decltype(&rosetctl_metrics_http_listen), rosetctl::MetricsHttpListen>,
              "the entry point must have the type metrics_http.h gives its callers");
