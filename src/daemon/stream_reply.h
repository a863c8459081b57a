// A server-streaming answer written from a handler thread: the handler runs on the pool (it
// may block), writes each message and waits until gRPC has taken it (a write reactor takes one
// at a time, which also keeps a slow reader from piling messages up here), and its status ends
// the call. Authorization, logging and the call's limits are run_logged's (call_log.h).
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "daemon/call_log.h"

namespace rosetctl {

template <typename Message>
class StreamReply final : public grpc::ServerWriteReactor<Message> {
 public:
  // Sends one message; CANCELLED once the caller has gone away.
  using Write = std::function<Status(const Message&)>;
  using Handler = std::function<Status(const Write&)>;

  // Starts `handler` on `pool`; the reactor deletes itself when the call is done.
  static grpc::ServerWriteReactor<Message>* start(HandlerPool& pool,
                                                  grpc::CallbackServerContext* call,
                                                  std::string method,
                                                  const google::protobuf::Message* request,
                                                  Handler handler) {
    auto* reply = new StreamReply(call, std::move(method), request, std::move(handler));
    pool.run([reply] { reply->run(); });
    return reply;
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    write_failed_ = !ok;
    written_.notify_all();
  }

  void OnDone() override { delete this; }

 private:
  StreamReply(grpc::CallbackServerContext* call, std::string method,
              const google::protobuf::Message* request, Handler handler)
      : call_(call), method_(std::move(method)), request_(request), handler_(std::move(handler)) {}

  void run() {
    Message none;  // what the call log shows as the answer: the stream is not logged
    Write write = [this](const Message& message) { return send(message); };
    grpc::Status status =
        run_logged(*call_, method_, *request_, &none, [&] { return handler_(write); });
    this->Finish(status);  // the last use of this reactor on this thread
  }

  Status send(const Message& message) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (write_failed_) return error(Code::kCancelled, "the caller went away");
    message_ = message;
    writing_ = true;
    this->StartWrite(&message_);
    written_.wait(lock, [this] { return !writing_; });
    if (write_failed_) return error(Code::kCancelled, "the caller went away");
    return Status::ok();
  }

  grpc::CallbackServerContext* call_;
  const std::string method_;
  const google::protobuf::Message* request_;
  Handler handler_;
  std::mutex mutex_;
  std::condition_variable written_;
  Message message_;            // the message being written; guarded by mutex_
  bool writing_ = false;       // guarded by mutex_
  bool write_failed_ = false;  // guarded by mutex_
};

}  // namespace rosetctl
