// Walking a message's fields by descriptor (see placed_fields.h).
#include "cluster/placed_fields.h"

#include <google/protobuf/descriptor.h>

#include <functional>
#include <memory>

#include "cluster/placed_id.h"

namespace rosetctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

bool is_id_field(const FieldDescriptor& field) {
  if (field.cpp_type() != FieldDescriptor::CPPTYPE_STRING) return false;
  const std::string& name = field.name();
  if (field.is_repeated()) return name == "volume_ids" || name == "snapshot_ids";
  // The Catalog's snapshot details name their snapshot `id` (their parent is a commit id).
  if (name == "id") return field.containing_type()->full_name() == "rosetctl.v1.SnapshotDetails";
  return name == "volume_id" || name == "source_volume_id" || name == "snapshot_id";
}

// Calls `rewrite` on every id field's value in `message` and the messages it holds; the first
// failure stops the walk.
Status rewrite_ids(Message& message, const std::function<Status(std::string&)>& rewrite) {
  const auto* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);  // only the fields that are set
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (field->is_repeated()) {
        for (int i = 0; i < reflection->FieldSize(message, field); ++i)
          ROSETCTL_RETURN_IF_ERROR(
              rewrite_ids(*reflection->MutableRepeatedMessage(&message, field, i), rewrite));
      } else {
        ROSETCTL_RETURN_IF_ERROR(
            rewrite_ids(*reflection->MutableMessage(&message, field), rewrite));
      }
      continue;
    }
    if (!is_id_field(*field)) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i) {
        std::string value = reflection->GetRepeatedString(message, field, i);
        ROSETCTL_RETURN_IF_ERROR(rewrite(value));
        reflection->SetRepeatedString(&message, field, i, value);
      }
    } else {
      std::string value = reflection->GetString(message, field);
      ROSETCTL_RETURN_IF_ERROR(rewrite(value));
      reflection->SetString(&message, field, value);
    }
  }
  return Status::ok();
}

}  // namespace

std::vector<std::string> placed_nodes_of(const Message& message) {
  // A copy for the one walker of id fields (this runs only for calls of node certificates).
  std::unique_ptr<Message> copy(message.New());
  copy->CopyFrom(message);
  std::vector<std::string> nodes;
  (void)rewrite_ids(*copy, [&nodes](std::string& id) {
    for (auto placed = decode_placed_id(id); placed; placed = decode_placed_id(placed->local_id))
      nodes.push_back(placed->node);
    return Status::ok();
  });
  return nodes;
}

Status check_answer_names_its_own(const Message& message, std::string_view node) {
  const auto* reflection = message.GetReflection();
  const std::string& type = message.GetDescriptor()->full_name();
  // A Catalog answer names the node's own volume (a lookup by name) the same way: an id naming
  // another node would have the controller's caller act there on the lying node's word.
  bool volume = type == "csi.v1.Volume" || type == "rosetctl.v1.FindVolumeResponse" ||
                type == "rosetctl.v1.VolumeDetails";
  const char* own_id = volume                                  ? "volume_id"
                       : type == "csi.v1.Snapshot"             ? "snapshot_id"
                       : type == "rosetctl.v1.SnapshotDetails" ? "id"
                                                               : nullptr;
  if (own_id != nullptr) {
    const FieldDescriptor* field = message.GetDescriptor()->FindFieldByName(own_id);
    const std::string& id = reflection->GetString(message, field);
    if (decode_placed_id(id)) {
      return error(Code::kDataLoss,
                   "node \"{}\" answered with {} \"{}\", which names a node: a node's volumes and "
                   "snapshots have ids of its own; nothing was done with it",
                   node, own_id, id.substr(0, 128));
    }
  }
  return for_each_submessage(
      message, [node](const Message& inner) { return check_answer_names_its_own(inner, node); });
}

Status for_each_submessage(const Message& message,
                           const std::function<Status(const Message&)>& visit) {
  const auto* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);  // only the fields that are set
  for (const FieldDescriptor* field : fields) {
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || field->is_map()) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(message, field); ++i)
        ROSETCTL_RETURN_IF_ERROR(visit(reflection->GetRepeatedMessage(message, field, i)));
    } else {
      ROSETCTL_RETURN_IF_ERROR(visit(reflection->GetMessage(message, field)));
    }
  }
  return Status::ok();
}

void localize_ids(Message& message, std::string_view node) {
  (void)rewrite_ids(message, [node](std::string& id) {
    auto placed = decode_placed_id(id);
    if (placed && placed->node == node) id = placed->local_id;
    return Status::ok();
  });
}

Status place_ids(Message& message, std::string_view node) {
  return rewrite_ids(message, [node](std::string& id) {
    if (id.empty() || decode_placed_id(id)) return Status::ok();
    auto placed = encode_placed_id(node, id);
    if (!placed) return placed.status();
    id = std::move(*placed);
    return Status::ok();
  });
}

}  // namespace rosetctl
