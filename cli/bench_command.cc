#include "cli/bench_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "cli/bench_backend.h"
#include "cli/bench_metrics_sampler.h"
#include "cli/bench_report.h"
#include "common/json.h"

namespace pagoda {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// At most `cap` holders at once (0: no cap).
class Limiter {
 public:
  explicit Limiter(int cap) : cap_(cap) {}
  void Acquire() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return cap_ == 0 || held_ < cap_; });
    ++held_;
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      --held_;
    }
    cv_.notify_one();
  }

 private:
  const int cap_;
  std::mutex mu_;
  std::condition_variable cv_;
  int held_ = 0;
};

// The shared state of a run: the backend, the concurrency cap, the records and the progress bar.
class Run {
 public:
  Run(const BenchOptions& o, BenchBackend* backend, std::ostream& err)
      : o_(o), backend_(backend), limiter_(o.max_concurrency), err_(err) {}

  // One request (see BenchBackend::Send), under the concurrency cap.
  bool Send(const std::vector<int>& prompt, int max_tokens, int stop_after,
            std::vector<int>* output) {
    limiter_.Acquire();
    const BenchRecord r = backend_->Send(prompt, max_tokens, stop_after, output);
    limiter_.Release();
    Done(r);
    return r.ok;
  }

  std::vector<BenchRecord> records() {
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }

 private:
  void Done(const BenchRecord& r) {
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(r);
    if (!o_.progress) return;
    const int done = static_cast<int>(records_.size());
    const int width = 40, filled = width * done / std::max(1, o_.num_prompts);
    err_ << "\r[" << std::string(filled, '=') << std::string(width - filled, ' ') << "] " << done
         << "/" << o_.num_prompts << (done == o_.num_prompts ? "\n" : "") << std::flush;
  }

  const BenchOptions& o_;
  BenchBackend* const backend_;  // Not owned.
  Limiter limiter_;
  std::ostream& err_;
  std::mutex mu_;
  std::vector<BenchRecord> records_;
};

}  // namespace

int BenchCommand(const BenchOptions& o, std::ostream& out, std::ostream& err) {
  if (o.dataset != "random" && o.dataset != "chat" && o.dataset != "repeat") {
    err << "error: --dataset must be random, chat or repeat\n";
    return 2;
  }
  if (o.backend != "grpc" && o.backend != "openai") {
    err << "error: --backend must be grpc or openai\n";
    return 2;
  }
  // --response-format and --extra-request-body: JSON objects sent in OpenAI requests.
  const auto object_flag = [&](const char* flag, const std::string& value, const char* example,
                               Json* parsed) {
    if (o.backend != "openai") {
      err << "error: --" << flag << " needs --backend=openai\n";
      return false;
    }
    *parsed = Json::parse(value, nullptr, /*allow_exceptions=*/false);
    if (!parsed->is_object()) {
      err << "error: --" << flag << " must be a JSON object, e.g. " << example << "\n";
      return false;
    }
    return true;
  };
  Json parsed;
  if (!o.response_format.empty() &&
      !object_flag("response-format", o.response_format, R"({"type":"json_object"})", &parsed)) {
    return 2;
  }
  if (!o.extra_request_body.empty()) {
    if (!object_flag("extra-request-body", o.extra_request_body, R"({"logit_bias":{"3":-100}})",
                     &parsed)) {
      return 2;
    }
    for (const char* own : kOpenAiBenchFields) {
      if (parsed.contains(own)) {
        err << "error: --extra-request-body may not set \"" << own
            << "\": the bench sets it (use its own flag)\n";
        return 2;
      }
    }
  }
  if (o.backend == "openai" && o.base_url.empty()) {
    err << "error: --backend=openai needs --base-url=http://HOST:PORT\n";
    return 2;
  }
  if (o.num_prompts < 1 || o.input_len < 1 || o.output_len < 1 || o.max_concurrency < 0 ||
      o.range_ratio < 0 || o.range_ratio >= 1 || !(o.request_rate > 0) || o.turns < 1 ||
      o.system_prompt_len < 0 || !(o.max_tokens_ratio >= 1) || o.vocab_size < 0 ||
      !(o.temperature >= 0) || !std::isfinite(o.temperature)) {
    err << "error: need --num-prompts, --input-len, --output-len, --turns >= 1, "
           "--max-concurrency >= 0, --range-ratio in [0, 1), --request-rate > 0, "
           "--max-tokens-ratio >= 1, --vocab-size >= 0, --temperature >= 0\n";
    return 2;
  }
  const std::unique_ptr<BenchBackend> backend =
      o.backend == "grpc" ? MakeGrpcBenchBackend(o) : MakeOpenAiBenchBackend(o);
  const absl::StatusOr<ServedModel> model = backend->Connect();
  if (!model.ok()) {
    err << "error: " << model.status().message() << "\n";
    return 2;
  }
  auto max_len = [&](int len) { return static_cast<int>(std::ceil(len * (1 + o.range_ratio))); };
  auto asked = [&](int output_len) {  // the max_tokens sent for an output of output_len
    return static_cast<int>(std::ceil(output_len * o.max_tokens_ratio));
  };
  const bool single = o.dataset != "chat";  // one request per job
  const int longest = single ? max_len(o.input_len) + asked(max_len(o.output_len))
                             : 1 + o.system_prompt_len +
                                   o.turns * (max_len(o.input_len) + asked(max_len(o.output_len)));
  // 0: the server did not say (some OpenAI-compatible ones); it refuses what does not fit.
  if (model->context_length > 0 && longest > model->context_length) {
    err << "error: a request may need " << longest << " tokens but the model length is "
        << model->context_length << "; lower the lengths"
        << (o.dataset == "chat" ? " or --turns" : "") << "\n";
    return 2;
  }

  std::mt19937_64 rng(o.seed);
  auto length = [&](int len) {
    const int lo = std::max(1, static_cast<int>(len * (1 - o.range_ratio)));
    return std::uniform_int_distribution<int>(lo, max_len(len))(rng);
  };
  // Random ids above the special ones (llama2.c: 0 unk, 1 BOS, 2 EOS); BOS first.
  std::uniform_int_distribution<int> token(3, std::max(3, model->vocab_size - 1));
  auto tokens = [&](int count, std::vector<int>* into) {
    for (int i = 0; i < count; ++i) into->push_back(token(rng));
  };
  // A job is what one arrival starts: a request, or a whole conversation.
  struct Job {
    std::vector<std::vector<int>> messages;  // the prompt; for chat one user message per turn
    std::vector<int> output_len;             // per request
  };
  std::vector<Job> jobs;
  std::vector<int> system = {1};
  if (o.dataset == "chat") tokens(o.system_prompt_len, &system);
  for (int left = o.num_prompts; left > 0;) {
    Job& job = jobs.emplace_back();
    const int requests = single ? 1 : std::min(o.turns, left);
    for (int t = 0; t < requests; ++t) {
      std::vector<int>& m = job.messages.emplace_back();
      if (single) m.push_back(1);
      const int len = length(o.input_len) - (single ? 1 : 0);
      if (o.dataset == "repeat") {
        // A passage of two thirds of the prompt, then its first third again: the text the
        // model goes on with is one it has just seen (quoting, rewriting, editing).
        const int passage = len - len / 3;
        tokens(passage, &m);
        m.insert(m.end(), m.begin() + 1, m.begin() + 1 + len / 3);
      } else {
        tokens(len, &m);
      }
      job.output_len.push_back(length(o.output_len));
    }
    left -= requests;
  }
  std::vector<double> arrivals(jobs.size(), 0);  // seconds after the start
  if (std::isfinite(o.request_rate)) {
    std::exponential_distribution<double> gap(o.request_rate);
    for (size_t i = 1; i < jobs.size(); ++i) arrivals[i] = arrivals[i - 1] + gap(rng);
  }

  Run run(o, backend.get(), err);
  std::unique_ptr<MetricsSampler> sampler;
  if (!o.metrics.empty()) sampler = std::make_unique<MetricsSampler>(o.metrics);
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (size_t j = 0; j < jobs.size(); ++j) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(arrivals[j])));
    threads.emplace_back([&, j] {
      const Job& job = jobs[j];
      if (single) {
        run.Send(job.messages[0], asked(job.output_len[0]), job.output_len[0], nullptr);
        return;
      }
      std::vector<int> history = system;
      for (size_t t = 0; t < job.messages.size(); ++t) {
        history.insert(history.end(), job.messages[t].begin(), job.messages[t].end());
        std::vector<int> reply;
        if (!run.Send(history, asked(job.output_len[t]), job.output_len[t], &reply)) {
          return;  // the later turns would fail too
        }
        history.insert(history.end(), reply.begin(), reply.end());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double duration = Seconds(Clock::now() - start);
  if (sampler) {
    sampler->Stop();
    if (sampler->num_samples == 0) {
      err << "warning: no metrics could be read from http://" << o.metrics << "/metrics\n";
    }
  }
  const int failed = PrintBenchReport(o, run.records(), duration, sampler.get(), out, err);
  return failed > 0 ? 1 : 0;
}

}  // namespace pagoda
