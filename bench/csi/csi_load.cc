// Load client for `rosetctl serve`: drives the CSI services over the unix socket the way a busy
// CO would, and reports throughput, latency percentiles and the server's memory.
//
//   csi_load --endpoint unix:///path/csi.sock --serve-pid PID --work-dir DIR
//   csi_load --endpoint 192.0.2.1:9443 --tls-cert C --tls-key K --tls-ca CA ... (serve --listen)
//            [--seconds N] [--pairs N] [--existing N] [--targets N] [--fanout-clients N]
//            [--probes N]
//            [--only create-delete|publish-fanout|scale|floor|probe|controller-publish]
//
// Scenarios (all run in order; see bench/README.md for the targets):
//   1. create-delete: 8 clients, each CreateVolume + DeleteVolume of unique names, for N seconds
//   2. publish-fanout: one staged volume published to 100 (--targets) targets by as many
//      concurrent calls, then as many concurrent NodeGetCapabilities calls (no work in serve):
//      the fan-out's floor
//   3. scale: CreateVolume latency with 0 vs 10,000 existing volumes; list all in pages of 100
// On request only: `floor` (GetPluginInfo from the same clients), `probe` (--probes Probe
// calls from the clients) and `controller-publish` (each client publishes its own volume to the
// plugin's node and unpublishes it again, --pairs pairs in all: ControllerPublishVolume's cost).
// --pairs N makes create-delete a fixed count instead of N seconds, and
// --fanout-clients N makes the fan-out N threads working through the targets (as a CO's worker
// pool would) instead of one thread per target; both as issue 35's comparison has them
// (bench/csi/vs-hostpath.sh drives csi-driver-host-path the same way).
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "csi.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::duration<double, std::milli>;

struct Options {
  std::string endpoint;
  int serve_pid = 0;
  std::string work_dir;
  int clients = 8;
  double seconds = 10;
  int targets = 100;
  int fanout_clients = 0;  // 0: one thread per target
  long pairs = 0;          // 0: create-delete runs for `seconds`
  long probes = 20000;
  int existing = 10000;
  std::string only;  // one scenario by name; all when empty
  // A TCP endpoint (serve --listen) is reached with mutual TLS from these PEM files.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr, "csi_load: cannot read %s\n", path.c_str());
    std::exit(2);
  }
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::shared_ptr<grpc::ChannelCredentials> credentials_of(const Options& options) {
  if (options.tls_ca.empty()) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = read_file(options.tls_ca);
  ssl.pem_cert_chain = read_file(options.tls_cert);
  ssl.pem_private_key = read_file(options.tls_key);
  return grpc::SslCredentials(ssl);
}

struct Memory {
  long rss_anon_kb = 0;
  long rss_kb = 0;
};

Memory memory_of(int pid) {
  Memory memory;
  std::ifstream status(fmt::format("/proc/{}/status", pid));
  std::string key;
  long value = 0;
  std::string unit;
  while (status >> key) {
    if (key == "RssAnon:" && status >> value >> unit) memory.rss_anon_kb = value;
    if (key == "VmRSS:" && status >> value >> unit) memory.rss_kb = value;
  }
  return memory;
}

// CPU time `pid` has used (all threads, user + system), from /proc/PID/stat: a scenario's cost
// in serve apart from the load client's, which shares the machine.
double cpu_seconds_of(int pid) {
  std::ifstream stat(fmt::format("/proc/{}/stat", pid));
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // Fields after the command name, which is in parentheses and may contain spaces.
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; fields >> field && i <= 15; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

void print_memory(const char* when, int pid) {
  Memory memory = memory_of(pid);
  std::printf("memory %-22s RssAnon %6.2f MiB   VmRSS %6.2f MiB\n", when,
              memory.rss_anon_kb / 1024.0, memory.rss_kb / 1024.0);
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  std::size_t index = std::min(values.size() - 1, static_cast<std::size_t>(p * values.size()));
  return values[index];
}

csi::v1::VolumeCapability mount_capability() {
  csi::v1::VolumeCapability capability;
  capability.mutable_mount();
  capability.mutable_access_mode()->set_mode(
      csi::v1::VolumeCapability::AccessMode::SINGLE_NODE_WRITER);
  return capability;
}

void check(const grpc::Status& status, const char* what) {
  if (!status.ok()) {
    std::fprintf(stderr, "csi_load: %s failed: %s\n", what, status.error_message().c_str());
    std::exit(1);
  }
}

std::string create(csi::v1::Controller::Stub& stub, const std::string& name) {
  csi::v1::CreateVolumeRequest request;
  request.set_name(name);
  *request.add_volume_capabilities() = mount_capability();
  csi::v1::CreateVolumeResponse response;
  grpc::ClientContext context;
  check(stub.CreateVolume(&context, request, &response), "CreateVolume");
  return response.volume().volume_id();
}

void remove(csi::v1::Controller::Stub& stub, const std::string& id) {
  csi::v1::DeleteVolumeRequest request;
  request.set_volume_id(id);
  csi::v1::DeleteVolumeResponse response;
  grpc::ClientContext context;
  check(stub.DeleteVolume(&context, request, &response), "DeleteVolume");
}

// Runs `iteration(client, i)` in a closed loop on options.clients threads until
// options.seconds have passed; returns the seconds it took.
double closed_loop(const Options& options, const std::function<void(int, long)>& iteration) {
  auto deadline = Clock::now() + std::chrono::duration<double>(options.seconds);
  std::vector<std::thread> clients;
  auto start = Clock::now();
  for (int c = 0; c < options.clients; ++c) {
    clients.emplace_back([&, c] {
      for (long i = 0; Clock::now() < deadline; ++i)
        iteration(c, i);
    });
  }
  for (auto& client : clients)
    client.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The same with `total` iterations shared out among the clients instead of a duration.
double counted_loop(const Options& options, long total,
                    const std::function<void(int, long)>& iteration) {
  std::atomic<long> next = 0;
  std::vector<std::thread> clients;
  auto start = Clock::now();
  for (int c = 0; c < options.clients; ++c) {
    clients.emplace_back([&, c] {
      for (long i = next++; i < total; i = next++)
        iteration(c, i);
    });
  }
  for (auto& client : clients)
    client.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void create_delete(const std::shared_ptr<grpc::Channel>& channel, const Options& options) {
  std::atomic<long> pairs = 0;
  std::vector<std::vector<double>> latencies(options.clients);
  auto stub = csi::v1::Controller::NewStub(channel);  // gRPC stubs are thread-safe
  double cpu_before = cpu_seconds_of(options.serve_pid);
  auto pair = [&](int c, long i) {
    auto begin = Clock::now();
    std::string id = create(*stub, fmt::format("bench-{}-{}", c, i));
    remove(*stub, id);
    latencies[c].push_back(Millis(Clock::now() - begin).count());
    ++pairs;
  };
  double elapsed =
      options.pairs > 0 ? counted_loop(options, options.pairs, pair) : closed_loop(options, pair);
  double cpu = cpu_seconds_of(options.serve_pid) - cpu_before;
  std::vector<double> all;
  for (auto& l : latencies)
    all.insert(all.end(), l.begin(), l.end());
  std::printf(
      "create-delete   %d clients: %ld pairs in %.3f s = %.0f pairs/s (pair p50 %.2f ms, p99 %.2f "
      "ms; serve CPU %.0f us/pair)\n",
      options.clients, pairs.load(), elapsed, pairs / elapsed, percentile(all, 0.5),
      percentile(all, 0.99), cpu / static_cast<double>(pairs.load()) * 1e6);
}

// ControllerPublishVolume + ControllerUnpublishVolume pairs, each client on a volume of its own
// (the local provider maps a volume to its own node only: the call's checks and record are all
// that costs).
void controller_publish(const std::shared_ptr<grpc::Channel>& channel, const Options& options) {
  auto controller = csi::v1::Controller::NewStub(channel);
  auto node = csi::v1::Node::NewStub(channel);
  csi::v1::NodeGetInfoResponse info;
  {
    grpc::ClientContext context;
    check(node->NodeGetInfo(&context, {}, &info), "NodeGetInfo");
  }
  std::vector<std::string> ids;
  for (int c = 0; c < options.clients; ++c)
    ids.push_back(create(*controller, fmt::format("bench-publish-{}", c)));
  std::vector<std::vector<double>> latencies(options.clients);
  double cpu_before = cpu_seconds_of(options.serve_pid);
  auto pair = [&](int c, long) {
    auto begin = Clock::now();
    csi::v1::ControllerPublishVolumeRequest request;
    request.set_volume_id(ids[c]);
    request.set_node_id(info.node_id());
    *request.mutable_volume_capability() = mount_capability();
    csi::v1::ControllerPublishVolumeResponse response;
    grpc::ClientContext context;
    check(controller->ControllerPublishVolume(&context, request, &response), "ControllerPublish");
    csi::v1::ControllerUnpublishVolumeRequest undo;
    undo.set_volume_id(ids[c]);
    undo.set_node_id(info.node_id());
    csi::v1::ControllerUnpublishVolumeResponse undone;
    grpc::ClientContext undo_context;
    check(controller->ControllerUnpublishVolume(&undo_context, undo, &undone),
          "ControllerUnpublish");
    latencies[c].push_back(Millis(Clock::now() - begin).count());
  };
  long total = options.pairs > 0 ? options.pairs : 2000;
  double elapsed = counted_loop(options, total, pair);
  double cpu = cpu_seconds_of(options.serve_pid) - cpu_before;
  std::vector<double> all;
  for (auto& l : latencies)
    all.insert(all.end(), l.begin(), l.end());
  std::printf(
      "controller-publish %d clients: %ld publish+unpublish pairs in %.3f s = %.0f pairs/s (pair "
      "p50 %.2f ms, p99 %.2f ms; serve CPU %.0f us/pair)\n",
      options.clients, total, elapsed, total / elapsed, percentile(all, 0.5), percentile(all, 0.99),
      cpu / static_cast<double>(total) * 1e6);
  for (const std::string& id : ids)
    remove(*controller, id);
}

// The transport's floor: the same clients calling GetPluginInfo, which does no work in serve.
void probe_floor(const std::shared_ptr<grpc::Channel>& channel, const Options& options) {
  std::atomic<long> calls = 0;
  auto stub = csi::v1::Identity::NewStub(channel);
  double elapsed = closed_loop(options, [&](int, long) {
    csi::v1::GetPluginInfoResponse response;
    grpc::ClientContext context;
    check(stub->GetPluginInfo(&context, {}, &response), "GetPluginInfo");
    ++calls;
  });
  std::printf("floor           %d clients: %ld GetPluginInfo calls in %.1f s = %.0f calls/s\n",
              options.clients, calls.load(), elapsed, calls / elapsed);
}

// Probe, the call kubelet's liveness probe makes forever: --probes calls from the clients.
void probe(const std::shared_ptr<grpc::Channel>& channel, const Options& options) {
  auto stub = csi::v1::Identity::NewStub(channel);
  double cpu_before = cpu_seconds_of(options.serve_pid);
  double elapsed = counted_loop(options, options.probes, [&](int, long) {
    csi::v1::ProbeResponse response;
    grpc::ClientContext context;
    check(stub->Probe(&context, {}, &response), "Probe");
  });
  double cpu = cpu_seconds_of(options.serve_pid) - cpu_before;
  std::printf(
      "probe           %d clients: %ld Probe calls in %.3f s = %.0f calls/s (serve CPU %.0f "
      "us/call)\n",
      options.clients, options.probes, elapsed, options.probes / elapsed,
      cpu / static_cast<double>(options.probes) * 1e6);
}

// `calls` concurrent calls, one thread each (as many goroutines would make them).
struct FanOut {
  int calls = 0;
  double elapsed = 0;
  double serve_cpu = 0;
  std::vector<double> latencies;

  void print(const char* label, const char* unit, const char* what) const {
    std::printf("%s %d %s%s: %.3f s total (per call p50 %.2f ms, p99 %.2f ms; serve CPU %.0f ms)\n",
                label, calls, unit, what, elapsed, percentile(latencies, 0.5),
                percentile(latencies, 0.99), serve_cpu * 1e3);
  }
};

FanOut fan_out(const Options& options, const std::function<void(int)>& call) {
  FanOut result;
  result.calls = options.targets;
  result.latencies.resize(options.targets);
  std::vector<std::thread> threads;
  double cpu_before = cpu_seconds_of(options.serve_pid);
  auto start = Clock::now();
  auto one = [&](int t) {
    auto begin = Clock::now();
    call(t);
    result.latencies[t] = Millis(Clock::now() - begin).count();
  };
  if (options.fanout_clients > 0) {
    std::atomic<int> next = 0;
    for (int c = 0; c < options.fanout_clients; ++c) {
      threads.emplace_back([&] {
        for (int t = next++; t < options.targets; t = next++)
          one(t);
      });
    }
  } else {
    for (int t = 0; t < options.targets; ++t)
      threads.emplace_back([&, t] { one(t); });
  }
  for (auto& thread : threads)
    thread.join();
  result.elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  result.serve_cpu = cpu_seconds_of(options.serve_pid) - cpu_before;
  return result;
}

void publish_fanout(const std::shared_ptr<grpc::Channel>& channel, const Options& options) {
  auto controller = csi::v1::Controller::NewStub(channel);
  auto node = csi::v1::Node::NewStub(channel);
  csi::v1::NodeGetInfoResponse info;
  {
    grpc::ClientContext context;
    check(node->NodeGetInfo(&context, {}, &info), "NodeGetInfo");
  }
  std::string id = create(*controller, "bench-fanout");
  std::string staging = options.work_dir + "/staging";
  std::filesystem::create_directories(staging);
  // kubelet's layout: each pod's target in a directory of its own, which kubelet creates before
  // NodePublishVolume; the plugin creates the target itself.
  auto target_of = [&](int t) {
    return fmt::format("{}/pods/pod{}/volumes/kubernetes.io~csi/bench/mount", options.work_dir, t);
  };
  for (int t = 0; t < options.targets; ++t)
    std::filesystem::create_directories(std::filesystem::path(target_of(t)).parent_path());
  {
    csi::v1::ControllerPublishVolumeRequest request;
    request.set_volume_id(id);
    request.set_node_id(info.node_id());
    *request.mutable_volume_capability() = mount_capability();
    csi::v1::ControllerPublishVolumeResponse response;
    grpc::ClientContext context;
    check(controller->ControllerPublishVolume(&context, request, &response), "ControllerPublish");
    csi::v1::NodeStageVolumeRequest stage;
    stage.set_volume_id(id);
    stage.set_staging_target_path(staging);
    *stage.mutable_volume_capability() = mount_capability();
    csi::v1::NodeStageVolumeResponse staged;
    grpc::ClientContext stage_context;
    check(node->NodeStageVolume(&stage_context, stage, &staged), "NodeStage");
  }

  FanOut published = fan_out(options, [&](int t) {
    csi::v1::NodePublishVolumeRequest request;
    request.set_volume_id(id);
    request.set_staging_target_path(staging);
    request.set_target_path(target_of(t));
    *request.mutable_volume_capability() = mount_capability();
    csi::v1::NodePublishVolumeResponse response;
    grpc::ClientContext context;
    check(node->NodePublishVolume(&context, request, &response), "NodePublish");
  });
  published.print("publish-fanout ", "targets", "");
  // The same fan-out of a call serve answers without any work: what the client's threads and
  // the transport cost before NodePublish does anything.
  FanOut floor = fan_out(options, [&](int) {
    csi::v1::NodeGetCapabilitiesResponse response;
    grpc::ClientContext context;
    check(node->NodeGetCapabilities(&context, {}, &response), "NodeGetCapabilities");
  });
  floor.print("fanout floor   ", "calls", " of NodeGetCapabilities");

  FanOut unpublishing = fan_out(options, [&](int t) {
    csi::v1::NodeUnpublishVolumeRequest request;
    request.set_volume_id(id);
    request.set_target_path(target_of(t));
    csi::v1::NodeUnpublishVolumeResponse response;
    grpc::ClientContext context;
    check(node->NodeUnpublishVolume(&context, request, &response), "NodeUnpublish");
  });
  unpublishing.print("unpublish      ", "targets", "");
  csi::v1::NodeUnstageVolumeRequest unstage;
  unstage.set_volume_id(id);
  unstage.set_staging_target_path(staging);
  csi::v1::NodeUnstageVolumeResponse unstaged;
  grpc::ClientContext unstage_context;
  check(node->NodeUnstageVolume(&unstage_context, unstage, &unstaged), "NodeUnstage");
  csi::v1::ControllerUnpublishVolumeRequest unpublish;
  unpublish.set_volume_id(id);
  unpublish.set_node_id(info.node_id());
  csi::v1::ControllerUnpublishVolumeResponse unpublished;
  grpc::ClientContext unpublish_context;
  check(controller->ControllerUnpublishVolume(&unpublish_context, unpublish, &unpublished),
        "ControllerUnpublish");
  remove(*controller, id);
}

double create_latency_p50(csi::v1::Controller::Stub& stub, const std::string& prefix, int samples) {
  std::vector<double> latencies;
  std::vector<std::string> ids;
  for (int i = 0; i < samples; ++i) {
    auto begin = Clock::now();
    ids.push_back(create(stub, fmt::format("{}-{}", prefix, i)));
    latencies.push_back(Millis(Clock::now() - begin).count());
  }
  for (const auto& id : ids)
    remove(stub, id);
  return percentile(latencies, 0.5);
}

void scale(const std::shared_ptr<grpc::Channel>& channel, const Options& options) {
  auto stub = csi::v1::Controller::NewStub(channel);
  double empty_p50 = create_latency_p50(*stub, "bench-empty", 200);

  std::vector<std::thread> fillers;
  for (int c = 0; c < options.clients; ++c) {
    fillers.emplace_back([&, c] {
      auto own = csi::v1::Controller::NewStub(channel);
      for (int i = c; i < options.existing; i += options.clients)
        create(*own, fmt::format("bench-fill-{}", i));
    });
  }
  for (auto& filler : fillers)
    filler.join();
  double full_p50 = create_latency_p50(*stub, "bench-full", 200);
  std::printf(
      "scale           CreateVolume p50 %.2f ms with 0 volumes, %.2f ms with %d (ratio %.2f)\n",
      empty_p50, full_p50, options.existing, full_p50 / empty_p50);

  auto start = Clock::now();
  csi::v1::ListVolumesRequest request;
  request.set_max_entries(100);
  long listed = 0;
  do {
    csi::v1::ListVolumesResponse response;
    grpc::ClientContext context;
    check(stub->ListVolumes(&context, request, &response), "ListVolumes");
    listed += response.entries_size();
    request.set_starting_token(response.next_token());
  } while (!request.starting_token().empty());
  std::printf("scale           listed %ld volumes in pages of 100 in %.3f s\n", listed,
              std::chrono::duration<double>(Clock::now() - start).count());
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--endpoint")
      options.endpoint = value;
    else if (flag == "--serve-pid")
      options.serve_pid = std::stoi(value);
    else if (flag == "--work-dir")
      options.work_dir = value;
    else if (flag == "--seconds")
      options.seconds = std::stod(value);
    else if (flag == "--existing")
      options.existing = std::stoi(value);
    else if (flag == "--targets")
      options.targets = std::stoi(value);
    else if (flag == "--pairs")
      options.pairs = std::stol(value);
    else if (flag == "--probes")
      options.probes = std::stol(value);
    else if (flag == "--fanout-clients")
      options.fanout_clients = std::stoi(value);
    else if (flag == "--only")
      options.only = value;
    else if (flag == "--tls-cert")
      options.tls_cert = value;
    else if (flag == "--tls-key")
      options.tls_key = value;
    else if (flag == "--tls-ca")
      options.tls_ca = value;
    else {
      std::fprintf(stderr, "csi_load: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (options.endpoint.empty() || options.serve_pid == 0 || options.work_dir.empty()) {
    std::fprintf(stderr,
                 "usage: csi_load --endpoint unix:///x.sock --serve-pid PID --work-dir DIR\n");
    return 2;
  }
  auto channel = grpc::CreateChannel(options.endpoint, credentials_of(options));
  print_memory("idle", options.serve_pid);
  auto wanted = [&](std::string_view name) { return options.only.empty() || options.only == name; };
  if (wanted("create-delete")) create_delete(channel, options);
  if (wanted("publish-fanout")) publish_fanout(channel, options);
  if (wanted("scale")) scale(channel, options);
  if (options.only == "floor") probe_floor(channel, options);  // only when asked
  if (options.only == "probe") probe(channel, options);
  if (options.only == "controller-publish") controller_publish(channel, options);
  print_memory("after the runs", options.serve_pid);
  // What serve keeps once the load is over (it trims its heap when idle).
  std::this_thread::sleep_for(std::chrono::seconds(3));
  print_memory("3 s after the runs", options.serve_pid);
  return 0;
}
