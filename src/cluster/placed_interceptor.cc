// The interceptor of placed_interceptor.h: it rewrites the received request message in place,
// after gRPC parsed it and before the handler runs (POST_RECV_MESSAGE).
#include "cluster/placed_interceptor.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <string_view>

#include "cluster/placed_fields.h"

namespace rosetctl {
namespace {

using grpc::experimental::InterceptionHookPoints;

// Whether `method` ("/package.Service/Method") is one this binary was generated with: only then
// does a registered service (not the generic proxy, which receives bytes) parse its request.
bool generated_method(std::string_view method) {
  size_t slash = method.rfind('/');
  if (method.size() < 2 || slash == 0 || slash == std::string_view::npos) return false;
  std::string name =
      std::string(method.substr(1, slash - 1)) + "." + std::string(method.substr(slash + 1));
  return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(name) != nullptr;
}

class LocalizeIds final : public grpc::experimental::Interceptor {
 public:
  explicit LocalizeIds(const std::string& node) : node_(node) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // Only created for methods of our generated (protobuf) services: a Message.
      auto* message = static_cast<google::protobuf::Message*>(methods->GetRecvMessage());
      if (message != nullptr) localize_ids(*message, node_);
    }
    methods->Proceed();
  }

 private:
  const std::string& node_;
};

class LocalizeIdsFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  LocalizeIdsFactory(std::string node, bool typed_node_services)
      : node_(std::move(node)), typed_node_services_(typed_node_services) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    std::string_view method = info->method();
    bool ours = method.starts_with("/csi.v1.Controller/") ||
                (typed_node_services_ && (method.starts_with("/csi.v1.Node/") ||
                                          method.starts_with("/rosetctl.v1.NodeState/")));
    return ours && generated_method(method) ? new LocalizeIds(node_) : nullptr;
  }

 private:
  std::string node_;
  bool typed_node_services_;
};

}  // namespace

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
placed_id_interceptors(std::string node, bool typed_node_services) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> out;
  out.push_back(std::make_unique<LocalizeIdsFactory>(std::move(node), typed_node_services));
  return out;
}

}  // namespace rosetctl
