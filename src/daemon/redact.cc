// Descriptor walk for csi_secret fields.
#include "daemon/redact.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/text_format.h>

#include "csi.pb.h"
#include "rosetctl.pb.h"

namespace rosetctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

void redact_secret_field(Message* message, const FieldDescriptor* field) {
  const Reflection* reflection = message->GetReflection();
  if (field->is_map()) {
    // Map entries are messages with `key` and `value`; keep keys, hide values.
    const FieldDescriptor* value_field = field->message_type()->map_value();
    for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
      Message* entry = reflection->MutableRepeatedMessage(message, field, i);
      if (value_field->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
        entry->GetReflection()->SetString(entry, value_field, kRedacted);
      } else {
        entry->GetReflection()->ClearField(entry, value_field);
      }
    }
  } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_STRING && !field->is_repeated()) {
    if (reflection->HasField(*message, field) || !reflection->GetString(*message, field).empty()) {
      reflection->SetString(message, field, kRedacted);
    }
  } else {
    reflection->ClearField(message, field);
  }
}

void redact_in_place(Message* message) {
  const Reflection* reflection = message->GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(*message, &fields);
  for (const FieldDescriptor* field : fields) {
    if (field->options().GetExtension(csi::v1::csi_secret) ||
        field->options().GetExtension(v1::secret)) {
      redact_secret_field(message, field);
      continue;
    }
    if (field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < reflection->FieldSize(*message, field); ++i) {
        redact_in_place(reflection->MutableRepeatedMessage(message, field, i));
      }
    } else {
      redact_in_place(reflection->MutableMessage(message, field));
    }
  }
}

}  // namespace

std::unique_ptr<Message> redacted_copy(const Message& message) {
  std::unique_ptr<Message> copy(message.New());
  copy->CopyFrom(message);
  // Fields this build does not know could be secrets of a newer spec: never print them.
  copy->DiscardUnknownFields();
  redact_in_place(copy.get());
  return copy;
}

std::string redacted_text(const Message& message) {
  std::string text;
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  printer.PrintToString(*redacted_copy(message), &text);
  if (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

}  // namespace rosetctl
