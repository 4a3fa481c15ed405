#include "router/api/reflection_service.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.pb.h"

namespace pagoda {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

// Appends `file` and, depth first, the files it imports (each once) as serialized
// FileDescriptorProtos.
template <typename FileResponse>
void AddFileAndImports(const FileDescriptor* file, absl::flat_hash_set<std::string>* seen,
                       FileResponse* out) {
  if (!seen->insert(file->name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file->CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file->dependency_count(); ++i)
    AddFileAndImports(file->dependency(i), seen, out);
}

// The answer to one request, in either version's types (they are the same messages).
template <typename Request, typename Response>
void Answer(const ReflectionIndex& index, const Request& request, Response* response) {
  *response->mutable_original_request() = request;
  response->set_valid_host(request.host());
  auto not_found = [&](const std::string& what) {
    response->mutable_error_response()->set_error_code(grpc::StatusCode::NOT_FOUND);
    response->mutable_error_response()->set_error_message(absl::StrCat(what, " not found"));
  };
  auto send_file = [&](const FileDescriptor* file) {
    absl::flat_hash_set<std::string> seen;
    AddFileAndImports(file, &seen, response->mutable_file_descriptor_response());
  };
  switch (request.message_request_case()) {
    case Request::kListServices:
      for (const std::string& name : index.services()) {
        response->mutable_list_services_response()->add_service()->set_name(name);
      }
      return;
    case Request::kFileByFilename:
      if (const FileDescriptor* f = index.File(request.file_by_filename())) return send_file(f);
      return not_found(absl::StrCat("file ", request.file_by_filename()));
    case Request::kFileContainingSymbol:
      if (const FileDescriptor* f = index.FileContainingSymbol(request.file_containing_symbol())) {
        return send_file(f);
      }
      return not_found(absl::StrCat("symbol ", request.file_containing_symbol()));
    case Request::kFileContainingExtension: {
      const auto& ext = request.file_containing_extension();
      const Descriptor* type = index.Message(ext.containing_type());
      const FieldDescriptor* field =
          type ? type->file()->pool()->FindExtensionByNumber(type, ext.extension_number())
               : nullptr;
      if (field != nullptr && index.Allowed(field->file())) return send_file(field->file());
      return not_found(
          absl::StrCat("extension ", ext.extension_number(), " of ", ext.containing_type()));
    }
    case Request::kAllExtensionNumbersOfType: {
      const Descriptor* type = index.Message(request.all_extension_numbers_of_type());
      if (type == nullptr) {
        return not_found(absl::StrCat("type ", request.all_extension_numbers_of_type()));
      }
      std::vector<const FieldDescriptor*> extensions;
      type->file()->pool()->FindAllExtensions(type, &extensions);
      auto* numbers = response->mutable_all_extension_numbers_response();
      numbers->set_base_type_name(type->full_name());
      for (const FieldDescriptor* e : extensions) {
        if (index.Allowed(e->file())) numbers->add_extension_number(e->number());
      }
      return;
    }
    default:
      response->mutable_error_response()->set_error_code(grpc::StatusCode::INVALID_ARGUMENT);
      response->mutable_error_response()->set_error_message("no request set");
  }
}

// One reflection stream: reads a request, writes its answer, reads the next, until the
// client half-closes (OK) or goes away. Deletes itself when done.
template <typename Request, typename Response>
class ReflectionReactor final : public grpc::ServerBidiReactor<Request, Response> {
 public:
  explicit ReflectionReactor(const ReflectionIndex* index) : index_(index) {
    this->StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) return this->Finish(grpc::Status::OK);  // the client is done asking
    response_.Clear();
    Answer(*index_, request_, &response_);
    this->StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (!ok) return this->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the client went away"));
    this->StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  const ReflectionIndex* const index_;  // Not owned.
  Request request_;
  Response response_;
};

}  // namespace

ReflectionIndex::ReflectionIndex(std::vector<std::string> services)
    : pool_(google::protobuf::DescriptorPool::generated_pool()), services_(std::move(services)) {
  for (const std::string& name : services_) {
    if (const auto* service = pool_->FindServiceByName(name)) Allow(service->file());
  }
}

void ReflectionIndex::Allow(const FileDescriptor* file) {
  if (!files_.insert(file->name()).second) return;
  for (int i = 0; i < file->dependency_count(); ++i) Allow(file->dependency(i));
}

const FileDescriptor* ReflectionIndex::File(const std::string& name) const {
  return files_.contains(name) ? pool_->FindFileByName(name) : nullptr;
}

const FileDescriptor* ReflectionIndex::FileContainingSymbol(const std::string& symbol) const {
  const FileDescriptor* file = pool_->FindFileContainingSymbol(symbol);
  return Allowed(file) ? file : nullptr;
}

const Descriptor* ReflectionIndex::Message(const std::string& name) const {
  const Descriptor* type = pool_->FindMessageTypeByName(name);
  return type != nullptr && Allowed(type->file()) ? type : nullptr;
}

grpc::ServerBidiReactor<grpc::reflection::v1::ServerReflectionRequest,
                        grpc::reflection::v1::ServerReflectionResponse>*
ReflectionServiceV1::ServerReflectionInfo(grpc::CallbackServerContext*) {
  return new ReflectionReactor<grpc::reflection::v1::ServerReflectionRequest,
                               grpc::reflection::v1::ServerReflectionResponse>(index_);
}

grpc::ServerBidiReactor<grpc::reflection::v1alpha::ServerReflectionRequest,
                        grpc::reflection::v1alpha::ServerReflectionResponse>*
ReflectionServiceV1Alpha::ServerReflectionInfo(grpc::CallbackServerContext*) {
  return new ReflectionReactor<grpc::reflection::v1alpha::ServerReflectionRequest,
                               grpc::reflection::v1alpha::ServerReflectionResponse>(index_);
}

}  // namespace pagoda
