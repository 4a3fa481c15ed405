#include "cli/bench_command.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/generate_command.h"
#include "common/http_client.h"
#include "common/json.h"
#include "grpcpp/grpcpp.h"
#include "pagoda/v1/generation.grpc.pb.h"

namespace pagoda {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// One request as the client saw it.
struct Record {
  bool ok = false;
  std::string error;
  int prompt_tokens = 0, output_tokens = 0, cached_tokens = 0;
  double ttft = 0, e2e = 0;
  std::vector<double> itl;  // between successive token arrivals
};

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

// The shared state of a run: the stub, its records and the progress bar.
class Run {
 public:
  Run(const BenchOptions& o, std::unique_ptr<v1::Generation::Stub> stub, std::ostream& err)
      : o_(o), stub_(std::move(stub)), limiter_(o.max_concurrency), err_(err) {}

  // One streamed request of up to `max_tokens`, ended by the client after `stop_after` tokens;
  // `output` (if set) gets the generated tokens.
  Record Send(const std::vector<int>& prompt, int max_tokens, int stop_after,
              std::vector<int>* output) {
    limiter_.Acquire();
    v1::GenerateRequest request;
    request.mutable_prompt_token_ids()->Add(prompt.begin(), prompt.end());
    request.set_max_tokens(max_tokens);
    request.mutable_sampling()->set_temperature(0);
    request.set_ignore_eos(o_.ignore_eos);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(o_.timeout_s * 1000)));
    Record r;
    r.prompt_tokens = static_cast<int>(prompt.size());
    const Clock::time_point start = Clock::now();
    Clock::time_point last = start;
    auto reader = stub_->Generate(&context, request);
    v1::GenerateResponse response;
    while (reader->Read(&response)) {
      if (response.token_ids_size() > 0) {
        const Clock::time_point now = Clock::now();
        if (r.output_tokens == 0) {
          r.ttft = Seconds(now - start);
        } else {
          r.itl.push_back(Seconds(now - last));
        }
        last = now;
        r.output_tokens += response.token_ids_size();
        if (output) {
          output->insert(output->end(), response.token_ids().begin(), response.token_ids().end());
        }
      }
      if (response.has_usage()) r.cached_tokens = response.usage().cached_tokens();
      if (r.output_tokens >= stop_after && stop_after < max_tokens) break;
    }
    const bool ended_by_us = r.output_tokens >= stop_after && stop_after < max_tokens;
    if (ended_by_us) context.TryCancel();
    const grpc::Status status = reader->Finish();
    r.e2e = Seconds(Clock::now() - start);
    r.ok = (status.ok() || ended_by_us) && r.output_tokens > 0;
    if (!r.ok) r.error = status.ok() ? "no tokens" : status.error_message();
    limiter_.Release();
    Done(r);
    return r;
  }

  std::vector<Record> records() {
    std::lock_guard<std::mutex> lock(mu_);
    return records_;
  }

 private:
  void Done(const Record& r) {
    std::lock_guard<std::mutex> lock(mu_);
    records_.push_back(r);
    if (!o_.progress) return;
    const int done = static_cast<int>(records_.size());
    const int width = 40, filled = width * done / std::max(1, o_.num_prompts);
    err_ << "\r[" << std::string(filled, '=') << std::string(width - filled, ' ') << "] " << done
         << "/" << o_.num_prompts << (done == o_.num_prompts ? "\n" : "") << std::flush;
  }

  const BenchOptions& o_;
  std::unique_ptr<v1::Generation::Stub> stub_;
  Limiter limiter_;
  std::ostream& err_;
  std::mutex mu_;
  std::vector<Record> records_;
};

// Samples the router's /metrics every 100 ms while the run lasts.
class MetricsSampler {
 public:
  explicit MetricsSampler(const std::string& address) {
    const size_t colon = address.rfind(':');
    host_ = address.substr(0, colon);
    port_ = colon == std::string::npos ? 0 : std::atoi(address.c_str() + colon + 1);
    thread_ = std::thread([this] {
      while (!stop_) {
        Sample(HttpGet(host_, port_, "/metrics"));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  ~MetricsSampler() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  int num_samples = 0, num_busy = 0;  // all, and those with sequences running
  double peak_running = 0, usage_sum = 0, peak_usage = 0, utilization_sum = 0;

 private:
  void Sample(const HttpResult& r) {
    if (r.status != 200) return;
    double running = 0, usage = 0, utilization = 0;
    int workers = 0, holding = 0;
    for (absl::string_view line : absl::StrSplit(r.body, '\n')) {
      if (line.empty() || line[0] == '#') continue;
      const size_t space = line.rfind(' ');
      double v = 0;
      if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &v)) {
        continue;
      }
      const absl::string_view name = line.substr(0, line.find_first_of("{ "));
      if (name == "pagoda_num_requests_running") running = v;
      if (name == "pagoda_kv_cache_usage") {
        usage += v;
        ++workers;
      }
      if (name == "pagoda_kv_cache_utilization" && v > 0) {
        utilization += v;
        ++holding;
      }
    }
    ++num_samples;
    peak_running = std::max(peak_running, running);
    if (running > 0) {
      ++num_busy;
      const double mean_usage = workers ? usage / workers : 0;
      usage_sum += mean_usage;
      peak_usage = std::max(peak_usage, mean_usage);
      utilization_sum += holding ? utilization / holding : 0;
    }
  }

  std::string host_;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// numpy.percentile's default (linear interpolation between closest ranks).
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = p / 100.0 * (sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo);
}

struct Stat {
  double mean = 0, median = 0, p90 = 0, p99 = 0;
};

Stat Summarize(std::vector<double> v) {  // seconds in, milliseconds out
  Stat s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / v.size() * 1e3;
  s.median = Percentile(v, 50) * 1e3;
  s.p90 = Percentile(v, 90) * 1e3;
  s.p99 = Percentile(v, 99) * 1e3;
  return s;
}

}  // namespace

int BenchCommand(const BenchOptions& o, std::ostream& out, std::ostream& err) {
  if (o.dataset != "random" && o.dataset != "chat") {
    err << "error: --dataset must be random or chat\n";
    return 2;
  }
  if (o.num_prompts < 1 || o.input_len < 1 || o.output_len < 1 || o.max_concurrency < 0 ||
      o.range_ratio < 0 || o.range_ratio >= 1 || !(o.request_rate > 0) || o.turns < 1 ||
      o.system_prompt_len < 0 || !(o.max_tokens_ratio >= 1)) {
    err << "error: need --num-prompts, --input-len, --output-len, --turns >= 1, "
           "--max-concurrency >= 0, --range-ratio in [0, 1), --request-rate > 0, "
           "--max-tokens-ratio >= 1\n";
    return 2;
  }
  auto channel = grpc::CreateChannel(o.server, grpc::InsecureChannelCredentials());
  auto stub = v1::Generation::NewStub(channel);
  v1::ModelInfo info;
  {
    // Fail fast (no wait for the channel): a refused connection is reported at once.
    grpc::ClientContext context;
    context.set_deadline(
        std::chrono::system_clock::now() +
        std::chrono::milliseconds(static_cast<int64_t>(std::min(10.0, o.timeout_s) * 1000)));
    const grpc::Status status = stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info);
    if (!status.ok()) {
      const bool unreachable = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                               status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      err << "error: " << (unreachable ? "cannot connect to " : "") << o.server << ": "
          << DescribeStatus(status.error_code(), status.error_message()) << "\n";
      return 2;
    }
  }
  auto max_len = [&](int len) { return static_cast<int>(std::ceil(len * (1 + o.range_ratio))); };
  auto asked = [&](int output_len) {  // the max_tokens sent for an output of output_len
    return static_cast<int>(std::ceil(output_len * o.max_tokens_ratio));
  };
  const int longest = o.dataset == "random"
                          ? max_len(o.input_len) + asked(max_len(o.output_len))
                          : 1 + o.system_prompt_len +
                                o.turns * (max_len(o.input_len) + asked(max_len(o.output_len)));
  if (longest > info.context_length()) {
    err << "error: a request may need " << longest << " tokens but the model length is "
        << info.context_length() << "; lower the lengths"
        << (o.dataset == "chat" ? " or --turns" : "") << "\n";
    return 2;
  }

  std::mt19937_64 rng(o.seed);
  auto length = [&](int len) {
    const int lo = std::max(1, static_cast<int>(len * (1 - o.range_ratio)));
    return std::uniform_int_distribution<int>(lo, max_len(len))(rng);
  };
  // Random ids above the special ones (llama2.c: 0 unk, 1 BOS, 2 EOS); BOS first.
  std::uniform_int_distribution<int> token(3, std::max(3, info.vocab_size() - 1));
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
    const int requests = o.dataset == "chat" ? std::min(o.turns, left) : 1;
    for (int t = 0; t < requests; ++t) {
      std::vector<int>& m = job.messages.emplace_back();
      if (o.dataset == "random") m.push_back(1);
      tokens(length(o.input_len) - (o.dataset == "random" ? 1 : 0), &m);
      job.output_len.push_back(length(o.output_len));
    }
    left -= requests;
  }
  std::vector<double> arrivals(jobs.size(), 0);  // seconds after the start
  if (std::isfinite(o.request_rate)) {
    std::exponential_distribution<double> gap(o.request_rate);
    for (size_t i = 1; i < jobs.size(); ++i) arrivals[i] = arrivals[i - 1] + gap(rng);
  }

  Run run(o, std::move(stub), err);
  std::unique_ptr<MetricsSampler> sampler;
  if (!o.metrics.empty()) sampler = std::make_unique<MetricsSampler>(o.metrics);
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (size_t j = 0; j < jobs.size(); ++j) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(arrivals[j])));
    threads.emplace_back([&, j] {
      const Job& job = jobs[j];
      if (o.dataset == "random") {
        run.Send(job.messages[0], asked(job.output_len[0]), job.output_len[0], nullptr);
        return;
      }
      std::vector<int> history = system;
      for (size_t t = 0; t < job.messages.size(); ++t) {
        history.insert(history.end(), job.messages[t].begin(), job.messages[t].end());
        std::vector<int> reply;
        if (!run.Send(history, asked(job.output_len[t]), job.output_len[t], &reply).ok) {
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

  const std::vector<Record> records = run.records();
  int completed = 0;
  int64_t input = 0, output = 0, cached = 0;
  std::vector<double> ttft, tpot, itl, e2el;
  std::string first_error;
  for (const Record& r : records) {
    if (!r.ok) {
      if (first_error.empty()) first_error = r.error;
      continue;
    }
    ++completed;
    input += r.prompt_tokens;
    output += r.output_tokens;
    cached += r.cached_tokens;
    ttft.push_back(r.ttft);
    e2el.push_back(r.e2e);
    if (r.output_tokens > 1) tpot.push_back((r.e2e - r.ttft) / (r.output_tokens - 1));
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
  }
  const int failed = o.num_prompts - completed;
  const Stat s_ttft = Summarize(ttft), s_tpot = Summarize(tpot), s_itl = Summarize(itl),
             s_e2el = Summarize(e2el);
  const double hit_rate = input ? static_cast<double>(cached) / input : 0;

  if (o.json) {
    std::string j = absl::StrFormat(
        "{\"dataset\":\"%s\",\"num_prompts\":%d,\"request_rate\":%s,\"max_concurrency\":%d,"
        "\"completed\":%d,\"failed\":%d,\"duration\":%.3f,\"total_input_tokens\":%d,"
        "\"total_output_tokens\":%d,\"request_throughput\":%.3f,\"input_throughput\":%.2f,"
        "\"output_throughput\":%.2f,\"total_token_throughput\":%.2f,"
        "\"prefix_cache_hit_rate\":%.4f",
        o.dataset, o.num_prompts,
        std::isfinite(o.request_rate) ? absl::StrCat(o.request_rate) : "\"inf\"", o.max_concurrency,
        completed, failed, duration, input, output, completed / duration, input / duration,
        output / duration, (input + output) / duration, hit_rate);
    for (const auto& [name, s] : {std::pair<const char*, Stat>{"ttft", s_ttft},
                                  {"tpot", s_tpot},
                                  {"itl", s_itl},
                                  {"e2el", s_e2el}}) {
      absl::StrAppendFormat(&j,
                            ",\"mean_%s_ms\":%.3f,\"median_%s_ms\":%.3f,\"p90_%s_ms\":%.3f,"
                            "\"p99_%s_ms\":%.3f",
                            name, s.mean, name, s.median, name, s.p90, name, s.p99);
    }
    if (sampler && sampler->num_samples > 0) {
      absl::StrAppendFormat(
          &j,
          ",\"peak_running\":%.0f,\"mean_kv_cache_usage\":%.4f,\"peak_kv_cache_usage\":%.4f,"
          "\"mean_kv_cache_utilization\":%.4f",
          sampler->peak_running, sampler->num_busy ? sampler->usage_sum / sampler->num_busy : 0,
          sampler->peak_usage,
          sampler->num_busy ? sampler->utilization_sum / sampler->num_busy : 0);
    } else if (sampler) {  // /metrics never answered: unknown, not zero
      absl::StrAppend(&j,
                      ",\"peak_running\":null,\"mean_kv_cache_usage\":null,"
                      "\"peak_kv_cache_usage\":null,\"mean_kv_cache_utilization\":null");
    }
    if (!first_error.empty()) absl::StrAppend(&j, ",\"first_error\":", JsonDump(Json(first_error)));
    out << j << "}\n";
  } else {
    auto line = [&](const std::string& k, const std::string& v) {
      out << absl::StrFormat("%-40s%s\n", k, v);
    };
    out << "============ Serving Benchmark Result ============\n";
    line("Successful requests:", absl::StrCat(completed));
    line("Failed requests:", absl::StrCat(failed));
    line("Benchmark duration (s):", absl::StrFormat("%.2f", duration));
    line("Total input tokens:", absl::StrCat(input));
    line("Total generated tokens:", absl::StrCat(output));
    line("Request throughput (req/s):", absl::StrFormat("%.2f", completed / duration));
    line("Input token throughput (tok/s):", absl::StrFormat("%.2f", input / duration));
    line("Output token throughput (tok/s):", absl::StrFormat("%.2f", output / duration));
    line("Total token throughput (tok/s):", absl::StrFormat("%.2f", (input + output) / duration));
    line("Prefix cache hit rate:", absl::StrFormat("%.2f%%", 100 * hit_rate));
    for (const auto& [title, name, s] :
         {std::tuple<const char*, const char*, Stat>{"Time to First Token", "TTFT", s_ttft},
          {"Time per Output Token", "TPOT", s_tpot},
          {"Inter-token Latency", "ITL", s_itl},
          {"End-to-end Latency", "E2EL", s_e2el}}) {
      out << absl::StrFormat("%s\n", std::string(16, '-') + std::string(title) +
                                         std::string(std::max<int>(2, 34 - strlen(title)), '-'));
      line(absl::StrFormat("Mean %s (ms):", name), absl::StrFormat("%.2f", s.mean));
      line(absl::StrFormat("Median %s (ms):", name), absl::StrFormat("%.2f", s.median));
      line(absl::StrFormat("P90 %s (ms):", name), absl::StrFormat("%.2f", s.p90));
      line(absl::StrFormat("P99 %s (ms):", name), absl::StrFormat("%.2f", s.p99));
    }
    if (sampler) {
      out << "-------------Router (sampled /metrics)------------\n";
      const bool sampled = sampler->num_samples > 0;
      auto percent = [&](double sum) {
        if (!sampled) return std::string("n/a");
        return absl::StrFormat("%.1f%%", sampler->num_busy ? 100 * sum / sampler->num_busy : 0.0);
      };
      line("Peak running sequences:",
           sampled ? absl::StrFormat("%.0f", sampler->peak_running) : std::string("n/a"));
      line("Mean KV cache usage (busy):", percent(sampler->usage_sum));
      line("Mean KV utilization (busy):", percent(sampler->utilization_sum));
    }
    out << "==================================================\n";
  }
  if (!first_error.empty()) err << "first failure: " << first_error << "\n";
  return failed > 0 ? 1 : 0;
}

}  // namespace pagoda
