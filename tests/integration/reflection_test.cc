// Server reflection on the public port (--enable-reflection, issue 23 row 11): it lists and
// resolves the public services (Generation, health, reflection) and their files, and answers
// NOT_FOUND for worker.proto, the internal step protocol, whatever way it is asked for. Both
// protocol versions, through their generated stubs against a real router.
#include <set>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "tests/integration/serving_fixture.h"

namespace pagoda {
namespace {

using ::testing::UnorderedElementsAre;

class ReflectionTest : public ServingTest {
 protected:
  std::vector<std::string> ExtraRouterFlags() const override { return {"--enable-reflection"}; }

  // Asks each request in turn on one stream of version `Service`; the answers in order.
  template <typename Service, typename Request, typename Response>
  std::vector<Response> Ask(const std::vector<Request>& requests) {
    auto stub = Service::NewStub(channel_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto stream = stub->ServerReflectionInfo(&context);
    std::vector<Response> out;
    for (const Request& r : requests) {
      EXPECT_TRUE(stream->Write(r));
      Response response;
      if (!stream->Read(&response)) break;
      out.push_back(response);
    }
    stream->WritesDone();
    const grpc::Status status = stream->Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
    return out;
  }

  // The names of the files in a file_descriptor_response.
  template <typename Response>
  static std::set<std::string> FileNames(const Response& r) {
    std::set<std::string> names;
    for (const std::string& bytes : r.file_descriptor_response().file_descriptor_proto()) {
      google::protobuf::FileDescriptorProto file;
      EXPECT_TRUE(file.ParseFromString(bytes));
      names.insert(file.name());
    }
    return names;
  }

  template <typename Service, typename Request, typename Response>
  void ExpectOnlyPublicServices() {
    std::vector<Request> requests(8);
    requests[0].set_list_services("");
    requests[1].set_file_containing_symbol("pagoda.v1.Generation");
    requests[2].set_file_containing_symbol("pagoda.v1.GenerateRequest");
    requests[3].set_file_containing_symbol("grpc.health.v1.Health");
    requests[4].set_file_containing_symbol("pagoda.v1.WorkerLink");
    requests[5].set_file_containing_symbol("pagoda.v1.StepCommand");
    requests[6].set_file_by_filename("pagoda/v1/worker.proto");
    requests[7].set_all_extension_numbers_of_type("pagoda.v1.StepCommand");
    const std::vector<Response> answers = Ask<Service, Request, Response>(requests);
    ASSERT_EQ(answers.size(), requests.size());
    std::vector<std::string> services;
    for (const auto& s : answers[0].list_services_response().service())
      services.push_back(s.name());
    EXPECT_THAT(services, UnorderedElementsAre("pagoda.v1.Generation", "grpc.health.v1.Health",
                                               "grpc.reflection.v1.ServerReflection",
                                               "grpc.reflection.v1alpha.ServerReflection"));
    google::protobuf::FileDescriptorProto first;  // the file asked for comes first
    ASSERT_GT(answers[1].file_descriptor_response().file_descriptor_proto_size(), 0);
    ASSERT_TRUE(
        first.ParseFromString(answers[1].file_descriptor_response().file_descriptor_proto(0)));
    EXPECT_EQ(first.name(), "pagoda/v1/generation.proto");
    EXPECT_TRUE(FileNames(answers[2]).contains("pagoda/v1/generation.proto"));
    EXPECT_TRUE(FileNames(answers[3]).contains("grpc/health/v1/health.proto"));
    for (int i : {1, 2, 3}) {
      EXPECT_FALSE(FileNames(answers[i]).contains("pagoda/v1/worker.proto")) << i;
    }
    for (int i : {4, 5, 6, 7}) {
      EXPECT_EQ(answers[i].error_response().error_code(), grpc::StatusCode::NOT_FOUND)
          << i << ": " << answers[i].DebugString().substr(0, 300);
      EXPECT_FALSE(answers[i].has_file_descriptor_response()) << i;
    }
    EXPECT_EQ(answers[4].original_request().file_containing_symbol(), "pagoda.v1.WorkerLink");
  }
};

TEST_F(ReflectionTest, V1ListsAndResolvesOnlyThePublicServices) {
  ExpectOnlyPublicServices<grpc::reflection::v1::ServerReflection,
                           grpc::reflection::v1::ServerReflectionRequest,
                           grpc::reflection::v1::ServerReflectionResponse>();
}

TEST_F(ReflectionTest, V1AlphaListsAndResolvesOnlyThePublicServices) {
  ExpectOnlyPublicServices<grpc::reflection::v1alpha::ServerReflection,
                           grpc::reflection::v1alpha::ServerReflectionRequest,
                           grpc::reflection::v1alpha::ServerReflectionResponse>();
}

}  // namespace
}  // namespace pagoda
