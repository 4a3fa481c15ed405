// Worker-to-worker KV block transfer (issue 28) between WorkerEngines whose transfer servers
// listen on loopback ports: real gRPC, the real stories260K model.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/model/llama2c_checkpoint.h"
#include "glog/logging.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"
#include "worker/transfer/kv_puller_service.h"
#include "worker/transfer/kv_transfer_service.h"
#include "worker/worker_engine.h"

namespace pagoda {
namespace {

constexpr char kToken[] = "cluster-secret";
constexpr int kBlockSize = 16;

// A worker: an engine with its transfer server on a loopback port.
struct Node {
  std::unique_ptr<WorkerEngine> engine;
  std::unique_ptr<KvTransferService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
  ~Node() {
    if (server) server->Shutdown(std::chrono::system_clock::now());
  }
};

std::unique_ptr<Node> StartNode(KvDtype dtype,
                                GrpcKvPullerOptions puller = {.worker_token = kToken},
                                const TlsPem& server_pem = {}) {
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  CHECK(w.ok()) << w.status();
  WorkerOptions options;
  options.num_blocks = 16;
  options.block_size = kBlockSize;
  options.kv_cache_dtype = dtype;
  options.max_num_batched_tokens = 64;
  options.max_num_seqs = 4;
  options.threads = 1;
  auto node = std::make_unique<Node>();
  absl::StatusOr<std::unique_ptr<WorkerEngine>> engine =
      WorkerEngine::Create(*std::move(w), options);
  CHECK(engine.ok()) << engine.status();
  node->engine = *std::move(engine);
  node->service = std::make_unique<KvTransferService>(&node->engine->kv_pool(), kToken);
  int port = 0;
  node->server = StartKvTransferServer("127.0.0.1:0", node->service.get(), server_pem, &port);
  CHECK(node->server != nullptr && port > 0);
  // By IP, TLS too (the test certificates carry IP:127.0.0.1, as a pod's would carry its IP): a
  // host name would go through c-ares, whose resolver leaks at exit under LeakSanitizer.
  node->address = absl::StrCat("127.0.0.1:", port);
  node->engine->EnableTransfers(std::make_unique<GrpcKvPuller>(std::move(puller)), node->address);
  return node;
}

// A 37-token prompt (3 blocks, the last partly filled), greedy.
const std::vector<int> kPrompt = {1,   403, 407, 261, 378, 500, 280, 411, 343, 268, 286, 271, 379,
                                  271, 285, 346, 261, 291, 272, 438, 268, 391, 299, 406, 271, 283,
                                  260, 294, 452, 398, 292, 263, 260, 307, 396, 273, 277};

NewSequence Greedy(int64_t seq_id, std::vector<int> output_ids = {}) {
  NewSequence n;
  n.seq_id = seq_id;
  n.sampling.temperature = 0;
  n.prompt_ids = kPrompt;
  n.output_ids = std::move(output_ids);
  return n;
}

// Prefills kPrompt as sequence `seq_id` on blocks `blocks` and returns its first token.
int Prefill(WorkerEngine& engine, int64_t seq_id, const std::vector<int>& blocks) {
  StepCommand c;
  c.step_id = seq_id;
  c.new_sequences.push_back(Greedy(seq_id));
  c.scheduled.push_back(
      {.seq_id = seq_id, .token_ids = kPrompt, .new_block_ids = blocks, .sample = true});
  absl::StatusOr<StepResult> r = engine.Execute(c);
  CHECK(r.ok()) << r.status();
  CHECK_EQ(r->sampled.size(), 1u);
  return r->sampled[0].token_id;
}

// Decodes `n` tokens after `token` at position `pos`, the sequence keeping its blocks.
std::vector<int> Decode(WorkerEngine& engine, int64_t seq_id, int token, int pos, int n,
                        int num_blocks) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    StepCommand c;
    c.step_id = 100 + i;
    c.scheduled.push_back({.seq_id = seq_id,
                           .token_ids = {token},
                           .num_computed_tokens = pos + i,
                           .num_kept_blocks = num_blocks,
                           .new_block_ids = {},
                           .sample = true});
    absl::StatusOr<StepResult> r = engine.Execute(c);
    CHECK(r.ok()) << r.status();
    token = r->sampled[0].token_id;
    out.push_back(token);
  }
  return out;
}

StepCommand Await() {
  StepCommand c;
  c.step_id = 1001;
  c.await_transfers = true;
  return c;
}

StepCommand Pulls(std::vector<BlockPull> pulls) {
  StepCommand c;
  c.step_id = 9;
  c.pulls = std::move(pulls);
  return c;
}

// Runs pulls on `engine`, then waits (await_transfers) until `n` results are in.
std::vector<TransferResult> PullAndWait(WorkerEngine& engine, std::vector<BlockPull> pulls) {
  StepCommand c;
  c.step_id = 1000;
  c.pulls = std::move(pulls);
  const size_t n = c.pulls.size();
  absl::StatusOr<StepResult> r = engine.Execute(c);
  CHECK(r.ok()) << r.status();
  std::vector<TransferResult> results = r->transfers;
  while (results.size() < n) {
    r = engine.Execute(Await());
    CHECK(r.ok()) << r.status();
    results.insert(results.end(), r->transfers.begin(), r->transfers.end());
  }
  return results;
}

TEST(KvTransferTest, ABlockReceivedEqualsTheBlockSentBitForBit) {
  for (KvDtype dtype : {KvDtype::kF32, KvDtype::kBf16, KvDtype::kInt8}) {
    SCOPED_TRACE(KvDtypeName(dtype));
    std::unique_ptr<Node> a = StartNode(dtype), b = StartNode(dtype);
    Prefill(*a->engine, 1, {0, 1, 2});
    const std::vector<int> src = {2, 0, 1}, dst = {7, 3, 12};
    const std::vector<TransferResult> results =
        PullAndWait(*b->engine, {{.transfer_id = 5,
                                  .peer_address = a->address,
                                  .src_block_ids = src,
                                  .dst_block_ids = dst}});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_TRUE(results[0].ok) << results[0].error;
    EXPECT_EQ(results[0].transfer_id, 5);
    const KvPool &from = a->engine->kv_pool(), &to = b->engine->kv_pool();
    EXPECT_EQ(results[0].bytes,
              3 * 2 * from.num_layers() * static_cast<int64_t>(from.block_bytes()));
    for (size_t i = 0; i < src.size(); ++i) {
      for (int l = 0; l < from.num_layers(); ++l) {
        for (KvPool::Part part : {KvPool::Part::kK, KvPool::Part::kV}) {
          std::span<const std::byte> sent = from.BlockBytes(src[i], l, part);
          std::span<const std::byte> got = to.BlockBytes(dst[i], l, part);
          ASSERT_TRUE(std::equal(sent.begin(), sent.end(), got.begin(), got.end()))
              << "block " << src[i] << " layer " << l;
        }
      }
    }
    // Not a pool of zeros: the prefill wrote it.
    std::span<const std::byte> k = from.BlockBytes(0, 0, KvPool::Part::kK);
    EXPECT_TRUE(std::any_of(k.begin(), k.end(), [](std::byte x) { return x != std::byte{0}; }));
  }
}

// A's running sequence moves to B with its KV: B decodes from the pulled blocks without
// computing the prompt again and gives exactly A's greedy tokens (int8: the rows' scales come
// with the blocks).
class KvTransferDtypeTest : public ::testing::TestWithParam<KvDtype> {};

TEST_P(KvTransferDtypeTest, BDecodesFromPulledBlocksExactlyAsA) {
  std::unique_ptr<Node> a = StartNode(GetParam()), b = StartNode(GetParam());
  const int first = Prefill(*a->engine, 1, {0, 1, 2, 3});
  const int pos = static_cast<int>(kPrompt.size());
  const std::vector<int> a_tokens = Decode(*a->engine, 1, first, pos, 20, 4);

  const std::vector<TransferResult> results =
      PullAndWait(*b->engine, {{.transfer_id = 1,
                                .peer_address = a->address,
                                .src_block_ids = {0, 1, 2},
                                .dst_block_ids = {9, 4, 6}}});
  ASSERT_TRUE(results[0].ok) << results[0].error;
  StepCommand c;  // the sequence arrives with its first token, its prompt already in the blocks
  c.step_id = 1;
  c.new_sequences.push_back(Greedy(7, {first}));
  c.scheduled.push_back({.seq_id = 7,
                         .token_ids = {first},
                         .num_computed_tokens = pos,
                         .new_block_ids = {9, 4, 6, 11},
                         .sample = true});
  absl::StatusOr<StepResult> r = b->engine->Execute(c);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<int> b_tokens = {r->sampled[0].token_id};
  const std::vector<int> rest = Decode(*b->engine, 7, b_tokens[0], pos + 1, 19, 4);
  b_tokens.insert(b_tokens.end(), rest.begin(), rest.end());
  EXPECT_EQ(b_tokens, a_tokens);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, KvTransferDtypeTest,
                         ::testing::Values(KvDtype::kF32, KvDtype::kInt8),
                         [](const ::testing::TestParamInfo<KvDtype>& info) {
                           return std::string(KvDtypeName(info.param));
                         });

// A sender that streams the header and part of the blocks, then hangs until it is shut down.
class StallingSender final : public v1::KvTransfer::Service {
 public:
  explicit StallingSender(const KvPool* pool) : pool_(pool) {}
  grpc::Status Pull(grpc::ServerContext* context, const v1::PullBlocksRequest*,
                    grpc::ServerWriter<v1::PullBlocksChunk>* writer) override {
    v1::PullBlocksChunk chunk;
    *chunk.mutable_header() = KvGeometryOf(*pool_);
    writer->Write(chunk);
    chunk.Clear();
    chunk.set_data(std::string(pool_->block_bytes(), 'x'));  // one layer's K of the first block
    writer->Write(chunk);
    sent_.Notify();
    while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(5));
    return grpc::Status::OK;
  }
  absl::Notification& sent() { return sent_; }

 private:
  const KvPool* pool_;
  absl::Notification sent_;
};

// A pull whose sender goes away mid-stream reports ok = false; until then its blocks are off
// limits, and afterwards they are free for the router to recompute the prompt in.
TEST(KvTransferTest, APullCutShortFailsAndItsBlocksCanBeRecomputed) {
  std::unique_ptr<Node> a = StartNode(KvDtype::kF32), b = StartNode(KvDtype::kF32);
  const int first = Prefill(*a->engine, 1, {0, 1, 2});
  StallingSender sender(&a->engine->kv_pool());
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&sender);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);

  StepCommand pull;
  pull.step_id = 1;
  pull.pulls.push_back({.transfer_id = 3,
                        .peer_address = absl::StrCat("127.0.0.1:", port),
                        .src_block_ids = {0, 1, 2},
                        .dst_block_ids = {5, 6, 7}});
  ASSERT_TRUE(b->engine->Execute(pull).ok());
  sender.sent().WaitForNotification();
  // In flight: no sequence may use the blocks, no copy or second pull may touch them.
  StepCommand use;
  use.step_id = 2;
  use.new_sequences.push_back(Greedy(2));
  use.scheduled.push_back(
      {.seq_id = 2, .token_ids = kPrompt, .new_block_ids = {5, 6, 7}, .sample = true});
  absl::StatusOr<StepResult> r = b->engine->Execute(use);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  EXPECT_NE(r.status().message().find("still being received (transfer 3)"), std::string::npos)
      << r.status();
  pull.pulls[0].transfer_id = 4;
  pull.pulls[0].dst_block_ids = {8, 7, 9};
  EXPECT_EQ(b->engine->Execute(pull).status().code(), absl::StatusCode::kInvalidArgument);
  StepCommand copy;
  copy.block_copies = {{6, 10}};
  EXPECT_EQ(b->engine->Execute(copy).status().code(), absl::StatusCode::kInvalidArgument);

  server->Shutdown(std::chrono::system_clock::now());  // the sender goes away mid-stream
  std::vector<TransferResult> results;
  while (results.empty()) {
    r = b->engine->Execute(Await());
    ASSERT_TRUE(r.ok()) << r.status();
    results = r->transfers;
  }
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].transfer_id, 3);
  EXPECT_FALSE(results[0].ok);
  EXPECT_NE(results[0].error.find("pull from 127.0.0.1:"), std::string::npos) << results[0].error;

  // The router's fallback: the same blocks, the prompt recomputed, A's token.
  r = b->engine->Execute(use);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sampled[0].token_id, first);
}

TEST(KvTransferTest, APullWithoutTheTokenIsUnauthenticatedAndReadsNothing) {
  std::unique_ptr<Node> a = StartNode(KvDtype::kF32);
  auto stub =
      v1::KvTransfer::NewStub(grpc::CreateChannel(a->address, grpc::InsecureChannelCredentials()));
  for (const char* header : {"", "Bearer wrong", "Basic cluster-secret"}) {
    grpc::ClientContext context;
    if (*header) context.AddMetadata("authorization", header);
    v1::PullBlocksRequest request;
    request.add_block_ids(0);
    auto reader = stub->Pull(&context, request);
    v1::PullBlocksChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk)) << "a chunk for '" << header << "'";
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED) << header;
  }
  // A worker with the wrong token fails its pull the same way.
  std::unique_ptr<Node> intruder = StartNode(KvDtype::kF32, {.worker_token = "guess"});
  const std::vector<TransferResult> results = PullAndWait(
      *intruder->engine,
      {{.transfer_id = 1, .peer_address = a->address, .src_block_ids = {0}, .dst_block_ids = {0}}});
  EXPECT_FALSE(results[0].ok);
  EXPECT_EQ(results[0].bytes, 0);
  EXPECT_NE(results[0].error.find("worker token"), std::string::npos) << results[0].error;
}

// The transfer port with the worker link's certificates (made here): a peer with a client
// certificate the CA signed pulls; a TLS peer without one, or a plaintext one, does not.
TEST(KvTransferTest, WithTlsOnlyPeersTheCaSignedPull) {
  const std::string d = testing::TempDir() + "/kv_transfer_tls";
  std::filesystem::create_directories(d);
  testing::WriteFile(d + "/san.cnf", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  auto run = [](std::vector<std::string> argv) {
    for (const char* a : {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"}) {
      if (argv[1] == "req") argv.push_back(a);
    }
    const testing::CommandResult r = testing::RunCommand(argv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  };
  run({"/usr/bin/openssl", "req", "-x509", "-days", "1", "-subj", "/CN=pagoda-test-ca", "-keyout",
       d + "/ca.key", "-out", d + "/ca.pem"});
  for (const std::string name : {"a", "b"}) {
    run({"/usr/bin/openssl", "req", "-subj", "/CN=localhost", "-keyout", d + "/" + name + ".key",
         "-out", d + "/" + name + ".csr"});
    run({"/usr/bin/openssl", "x509", "-req", "-days", "1", "-in", d + "/" + name + ".csr", "-CA",
         d + "/ca.pem", "-CAkey", d + "/ca.key", "-CAcreateserial", "-extfile", d + "/san.cnf",
         "-out", d + "/" + name + ".pem"});
  }
  auto pem = [&](const std::string& name) {
    return TlsPem{testing::ReadFile(d + "/" + name + ".pem"),
                  testing::ReadFile(d + "/" + name + ".key"), testing::ReadFile(d + "/ca.pem")};
  };
  std::unique_ptr<Node> a = StartNode(KvDtype::kF32, {.worker_token = kToken}, pem("a"));
  Prefill(*a->engine, 1, {0, 1, 2});
  std::unique_ptr<Node> b = StartNode(
      KvDtype::kF32, {.worker_token = kToken, .tls = true, .tls_pem = pem("b")}, pem("b"));
  TlsPem no_client_cert;
  no_client_cert.ca = pem("b").ca;
  std::unique_ptr<Node> anonymous =
      StartNode(KvDtype::kF32, {.worker_token = kToken, .tls = true, .tls_pem = no_client_cert});
  std::unique_ptr<Node> plaintext = StartNode(KvDtype::kF32);
  const BlockPull pull = {
      .transfer_id = 1, .peer_address = a->address, .src_block_ids = {0}, .dst_block_ids = {0}};
  std::vector<TransferResult> results = PullAndWait(*b->engine, {pull});
  EXPECT_TRUE(results[0].ok) << results[0].error;
  for (Node* stranger : {anonymous.get(), plaintext.get()}) {
    results = PullAndWait(*stranger->engine, {pull});
    EXPECT_FALSE(results[0].ok);
    EXPECT_EQ(results[0].bytes, 0);
  }
  std::filesystem::remove_all(d);
}

TEST(KvTransferTest, BadRequestsGetClearErrors) {
  std::unique_ptr<Node> a = StartNode(KvDtype::kF32), b = StartNode(KvDtype::kBf16);
  auto stub =
      v1::KvTransfer::NewStub(grpc::CreateChannel(a->address, grpc::InsecureChannelCredentials()));
  auto pull = [&](const std::vector<int>& ids) {
    grpc::ClientContext context;
    context.AddMetadata("authorization", absl::StrCat("Bearer ", kToken));
    v1::PullBlocksRequest request;
    request.mutable_block_ids()->Add(ids.begin(), ids.end());
    auto reader = stub->Pull(&context, request);
    v1::PullBlocksChunk chunk;
    EXPECT_FALSE(reader->Read(&chunk));
    return reader->Finish();
  };
  for (const auto& [ids, says] : std::vector<std::pair<std::vector<int>, std::string>>{
           {{3, 16}, "block 16 outside the pool of 16"},
           {{-1}, "block -1 outside the pool"},
           {{}, "block_ids: 0 ids"},
           {std::vector<int>(kMaxBlocksPerPull + 1, 0), "block_ids: 4097 ids; 1 to 4096"}}) {
    const grpc::Status status = pull(ids);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find(says), std::string::npos) << status.error_message();
  }
  // Another KV dtype: the pull fails, saying both geometries.
  std::vector<TransferResult> results = PullAndWait(
      *b->engine,
      {{.transfer_id = 1, .peer_address = a->address, .src_block_ids = {0}, .dst_block_ids = {0}}});
  EXPECT_FALSE(results[0].ok);
  EXPECT_NE(results[0].error.find("KV geometry differs: the peer's is "), std::string::npos)
      << results[0].error;
  EXPECT_NE(results[0].error.find("f32, this worker's"), std::string::npos) << results[0].error;
  // The peer's refusal comes back as the pull's error.
  results = PullAndWait(*a->engine, {{.transfer_id = 2,
                                      .peer_address = a->address,
                                      .src_block_ids = {99},
                                      .dst_block_ids = {1}}});
  EXPECT_NE(results[0].error.find("block 99 outside the pool"), std::string::npos)
      << results[0].error;

  // What the receiving worker refuses before any transfer starts.
  const std::vector<std::pair<BlockPull, std::string>> bad_pulls = {
      {{1, a->address, {0, 1}, {2}}, "2 src_block_ids and 1 dst_block_ids"},
      {{1, a->address, {}, {}}, "0 src_block_ids"},
      {{1, a->address, {0}, {16}}, "dst block 16 outside the pool of 16"},
      {{1, a->address, {0, 1}, {3, 3}}, "dst block 3 repeated"},
      {{1, a->address, {-2}, {3}}, "src block -2"},
      {{1, "", {0}, {3}}, "peer_address of 0 bytes"},
      {{1, std::string(300, 'h'), {0}, {3}}, "peer_address of 300 bytes"},
  };
  for (const auto& [p, says] : bad_pulls) {
    absl::StatusOr<StepResult> r = b->engine->Execute(Pulls({p}));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << says;
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status();
  }
  // Into a block a sequence holds.
  Prefill(*b->engine, 1, {0, 1, 2});
  absl::StatusOr<StepResult> r = b->engine->Execute(Pulls({{1, a->address, {0}, {1}}}));
  EXPECT_NE(r.status().message().find("dst block 1 is held by a sequence"), std::string::npos)
      << r.status();
  // Transfers off: refused by name.
  absl::StatusOr<ModelWeights> w = LoadLlama2cCheckpoint(testing::Stories260KModel());
  ASSERT_TRUE(w.ok());
  WorkerOptions options;
  options.num_blocks = 4;
  options.max_num_batched_tokens = 64;
  options.max_num_seqs = 4;
  auto off = WorkerEngine::Create(*std::move(w), options);
  ASSERT_TRUE(off.ok());
  r = (*off)->Execute(Pulls({{1, a->address, {0}, {1}}}));
  EXPECT_NE(r.status().message().find("KV transfers are off on this worker"), std::string::npos)
      << r.status();
}

}  // namespace
}  // namespace pagoda
