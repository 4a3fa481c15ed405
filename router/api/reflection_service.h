// gRPC server reflection for the public port that describes only what that port serves.
//
// gRPC's own reflection (libgrpc++_reflection) answers from every descriptor linked into the
// process, so on the router it would list and resolve worker.proto, the internal step
// protocol. This one resolves only the files of the services it is given and the files they
// import; any other file or symbol is NOT_FOUND, exactly as if it were not compiled in.
//
//   stream of requests ──► list_services:    the given services
//                      ──► file_by_filename / file_containing_symbol / ..._extension:
//                          allowed file? its FileDescriptorProto and its imports : NOT_FOUND
//
// Both protocol versions (grpc.reflection.v1, which newer clients ask first, and v1alpha) are
// served by one reactor per stream on gRPC's callback API: an idle stream holds no thread.
// Thread-safe: constant after construction.
#ifndef PAGODA_ROUTER_API_REFLECTION_SERVICE_H_
#define PAGODA_ROUTER_API_REFLECTION_SERVICE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "google/protobuf/descriptor.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"

namespace pagoda {

// What both versions' services answer from.
class ReflectionIndex {
 public:
  // `services`: fully qualified names of the services to describe. Those found in the
  // generated descriptor pool make their files (and imports) resolvable; every name is listed.
  explicit ReflectionIndex(std::vector<std::string> services);

  const std::vector<std::string>& services() const { return services_; }
  // The file if it may be shown; null otherwise (unknown or not public).
  const google::protobuf::FileDescriptor* File(const std::string& name) const;
  // The file that declares `symbol` if it may be shown; null otherwise.
  const google::protobuf::FileDescriptor* FileContainingSymbol(const std::string& symbol) const;
  // The public message type of that name, or null.
  const google::protobuf::Descriptor* Message(const std::string& name) const;
  bool Allowed(const google::protobuf::FileDescriptor* file) const {
    return file != nullptr && files_.contains(file->name());
  }

 private:
  void Allow(const google::protobuf::FileDescriptor* file);

  const google::protobuf::DescriptorPool* const pool_;
  std::vector<std::string> services_;
  absl::flat_hash_set<std::string> files_;  // names of the files that may be shown
};

class ReflectionServiceV1 final : public grpc::reflection::v1::ServerReflection::CallbackService {
 public:
  explicit ReflectionServiceV1(const ReflectionIndex* index) : index_(index) {}  // Not owned.
  grpc::ServerBidiReactor<grpc::reflection::v1::ServerReflectionRequest,
                          grpc::reflection::v1::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

 private:
  const ReflectionIndex* const index_;
};

class ReflectionServiceV1Alpha final
    : public grpc::reflection::v1alpha::ServerReflection::CallbackService {
 public:
  explicit ReflectionServiceV1Alpha(const ReflectionIndex* index) : index_(index) {}  // Not owned.
  grpc::ServerBidiReactor<grpc::reflection::v1alpha::ServerReflectionRequest,
                          grpc::reflection::v1alpha::ServerReflectionResponse>*
  ServerReflectionInfo(grpc::CallbackServerContext* context) override;

 private:
  const ReflectionIndex* const index_;
};

// The reflection services of a public port, with their index.
struct PublicReflection {
  explicit PublicReflection(std::vector<std::string> services)
      : index(std::move(services)), v1(&index), v1alpha(&index) {}
  ReflectionIndex index;
  ReflectionServiceV1 v1;
  ReflectionServiceV1Alpha v1alpha;
};

}  // namespace pagoda

#endif  // PAGODA_ROUTER_API_REFLECTION_SERVICE_H_
