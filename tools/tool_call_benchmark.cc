// The streamed tool-call parser's cost per token (ToolCallStream::Add), by output length: one
// Hermes call whose arguments run the whole output (an agent writing a file through a tool),
// and plain content with no call (a server with tools, a model that answers in prose). Flat in
// the output's length when each token's text is read once.
//   build/bin/tool_call_benchmark
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "router/api/openai/tools/tool_call_parser.h"

namespace pagoda {
namespace {

// `tokens` pieces of about 4 bytes, as a tokenizer cuts text.
std::vector<std::string> Pieces(bool call, int tokens) {
  std::vector<std::string> out;
  if (call) {
    out = {"<tool_call>", "\n{\"",     "name",    "\": \"", "write", "_file",
           "\", \"",      "arguments", "\": {\"", "text",   "\": \""};
  }
  const char* words[] = {"the ", "cat ", "sat", " on", " a ", "mat.", "\\n"};
  for (int i = 0; static_cast<int>(out.size()) < tokens - 3; ++i) out.push_back(words[i % 7]);
  if (call) {
    out.push_back("\"}}");
    out.push_back("\n</tool_call>");
  }
  return out;
}

void BM_ToolCallStream(benchmark::State& state) {
  const bool call = state.range(0) == 1;
  const std::vector<std::string> pieces = Pieces(call, static_cast<int>(state.range(1)));
  size_t sent = 0;
  for (auto _ : state) {
    ToolCallStream stream(ToolCallFormat::kHermes);
    for (const std::string& p : pieces) {
      const ToolCallStreamDelta d = stream.Add(p);
      sent += d.content.size() + (d.calls.empty() ? 0 : d.calls[0].arguments.size());
    }
    benchmark::DoNotOptimize(stream.Finish());
  }
  benchmark::DoNotOptimize(sent);
  state.SetLabel(call ? "one call" : "content");
  state.counters["per_token"] =
      benchmark::Counter(static_cast<double>(pieces.size()) * state.iterations(),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_ToolCallStream)->ArgsProduct({{0, 1}, {1000, 8000}})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pagoda

BENCHMARK_MAIN();
