// slow_reader_load: clients that stop reading, for measuring what they cost the router.
// Opens --streams Generate calls over one connection with a small receive window that never
// grows, each with n samples and top logprobs, reads nothing for --stall-s seconds, prints the
// router's resident memory (VmRSS of --router-pid) before and after, then reads every stream
// to its end and checks it finished.
//
//   build/bin/slow_reader_load --server=127.0.0.1:50051 --router-pid=PID --streams=100
//       --n=16 --logprobs=20 --max-tokens=200
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "common/process/command_line.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "the router's public address");
ABSL_FLAG(int, router_pid, 0, "the router's pid, for its VmRSS");
ABSL_FLAG(int, streams, 100, "calls that stop reading");
ABSL_FLAG(int, n, 16, "samples per call");
ABSL_FLAG(int, logprobs, 20, "top logprobs per token");
ABSL_FLAG(int, max_tokens, 200, "tokens per sample");
ABSL_FLAG(double, stall_s, 10, "seconds without reading");

namespace {

std::string RouterRss(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmRSS:", 0) == 0) return line.substr(6);
  }
  return " unknown";
}

}  // namespace

int main(int argc, char** argv) {
  pagoda::ParseCommandLine(argc, argv,
                           {"slow_reader_load",
                            "slow_reader_load --server=HOST:PORT --router-pid=PID [--streams=N] "
                            "[--n=N] [--logprobs=N] [--max-tokens=N] [--stall-s=S]",
                            {}});
  const int pid = absl::GetFlag(FLAGS_router_pid);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8192);
  args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, -1);
  auto stub = pagoda::v1::Generation::NewStub(grpc::CreateCustomChannel(
      absl::GetFlag(FLAGS_server), grpc::InsecureChannelCredentials(), args));
  std::cout << "router RSS before:" << RouterRss(pid) << "\n";
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<grpc::ClientReader<pagoda::v1::GenerateResponse>>> readers;
  for (int i = 0; i < absl::GetFlag(FLAGS_streams); ++i) {
    pagoda::v1::GenerateRequest request;
    request.set_prompt("Once upon a time");
    request.set_n(absl::GetFlag(FLAGS_n));
    request.set_logprobs(absl::GetFlag(FLAGS_logprobs));
    request.set_max_tokens(absl::GetFlag(FLAGS_max_tokens));
    request.set_ignore_eos(true);
    request.mutable_sampling()->set_seed(i);
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    readers.push_back(stub->Generate(contexts.back().get(), request));
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(absl::GetFlag(FLAGS_stall_s)));
  std::cout << "router RSS after " << absl::GetFlag(FLAGS_stall_s)
            << " s of clients not reading:" << RouterRss(pid) << "\n";
  int64_t tokens = 0, failed = 0;
  for (auto& reader : readers) {
    pagoda::v1::GenerateResponse response;
    while (reader->Read(&response)) tokens += response.token_ids_size();
    failed += !reader->Finish().ok();
  }
  std::cout << "then read " << tokens << " tokens; " << failed << " calls failed\n";
  return failed == 0 ? 0 : 1;
}
