// `pagoda bench --backend=openai`: POST {base}/v1/completions with "stream": true, read as
// Server-Sent Events on cpp-httplib, one connection per request. Everything the server sends is
// untrusted: a bad status, a malformed or oversized chunk, or an error event fails that request
// with a message, never the process.
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "cli/bench_backend.h"
#include "common/json.h"
#include "common/status_macros.h"

namespace pagoda {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

constexpr size_t kMaxLineBytes = 1 << 20;   // one SSE line (one chunk's JSON)
constexpr size_t kMaxErrorBytes = 1 << 16;  // the body of a refusal, kept for its message

// Splits a Server-Sent Events stream into the payloads of its `data:` lines ("[DONE]"
// included); other fields and comments are skipped. Each OpenAI chunk is one data line.
class SseReader {
 public:
  // Returns false to stop reading (`on_data` asked to, or a line over kMaxLineBytes).
  bool Feed(const char* data, size_t size, const std::function<bool(absl::string_view)>& on_data) {
    pending_.append(data, size);
    size_t start = 0;
    for (size_t end; (end = pending_.find('\n', start)) != std::string::npos; start = end + 1) {
      absl::string_view line(pending_.data() + start, end - start);
      absl::ConsumeSuffix(&line, "\r");
      if (absl::ConsumePrefix(&line, "data:")) {
        absl::ConsumePrefix(&line, " ");
        if (!on_data(line)) return false;
      }
    }
    pending_.erase(0, start);
    if (pending_.size() > kMaxLineBytes) {
      error = absl::StrCat("an event stream line over ", kMaxLineBytes, " bytes");
      return false;
    }
    return true;
  }

  std::string error;

 private:
  std::string pending_;  // an incomplete line
};

// "{"error": {"message": ...}}" (OpenAI's error object) or the body itself, shortened.
std::string ErrorMessage(const std::string& body) {
  if (absl::StatusOr<Json> j = ParseJson(body, "error"); j.ok()) {
    const Json* error = JsonMember(*j, "error");
    if (error != nullptr && error->is_string()) return error->get<std::string>();
    if (const Json* message = error ? JsonMember(*error, "message") : nullptr;
        message != nullptr && message->is_string()) {
      return message->get<std::string>();
    }
  }
  return body.substr(0, 200);
}

// httplib's error names ("Connection", "Read") in words.
std::string Describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "connection refused or unreachable";
    case httplib::Error::ConnectionTimeout:
      return "timed out connecting";
    case httplib::Error::Read:
      return "read failed or timed out";
    case httplib::Error::Write:
      return "write failed";
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLServerVerification:
      return "TLS handshake failed";
    default:
      return httplib::to_string(e);
  }
}

class OpenAiBackend final : public BenchBackend {
 public:
  explicit OpenAiBackend(const BenchOptions& o) : o_(o) {
    // A server that closes while we write must fail a request, not kill the process.
    signal(SIGPIPE, SIG_IGN);
  }

  absl::StatusOr<ServedModel> Connect() override {
    RETURN_IF_ERROR(ParseBaseUrl());
    auto client = NewClient(std::min(10.0, o_.timeout_s));
    const httplib::Result r = client->Get(prefix_ + "/v1/models", Headers());
    if (!r) {
      return absl::UnavailableError(
          absl::StrCat("cannot connect to ", o_.base_url, ": ", Describe(r.error())));
    }
    const std::string where = absl::StrCat(address_, prefix_, "/v1/models");
    if (r->status != 200) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": HTTP ", r->status, ": ", ErrorMessage(r->body)));
    }
    absl::StatusOr<Json> j = ParseJson(r->body, where);
    if (!j.ok()) return j.status();
    const Json* data = JsonMember(*j, "data");
    if (data == nullptr || !data->is_array() || data->empty() || !(*data)[0].is_object()) {
      return absl::FailedPreconditionError(absl::StrCat(where, ": no model in \"data\""));
    }
    const Json& first = (*data)[0];
    models_ = absl::StrSplit(o_.model_name, ',', absl::SkipEmpty());
    if (models_.empty()) {
      absl::StatusOr<std::string> id = JsonString(first, "id", where);
      if (!id.ok()) return id.status();
      models_ = {*id};
    }
    // vLLM and Pagoda say max_model_len; llama-server its slots' context and vocabulary in meta.
    const Json* meta = JsonMember(first, "meta");
    absl::StatusOr<int64_t> context = JsonIntOr(first, "max_model_len", 0, where);
    if (context.ok() && *context == 0 && meta != nullptr) {
      context = JsonIntOr(*meta, "n_ctx", 0, where);
    }
    absl::StatusOr<int64_t> vocab = o_.vocab_size;
    if (*vocab == 0 && meta != nullptr) vocab = JsonIntOr(*meta, "n_vocab", 0, where);
    if (!context.ok()) return context.status();
    if (!vocab.ok()) return vocab.status();
    constexpr int64_t kMax = int64_t{1} << 30;
    if (*context < 0 || *context > kMax || *vocab < 0 || *vocab > kMax) {
      return absl::FailedPreconditionError(absl::StrCat(where, ": context length ", *context,
                                                        " or vocabulary size ", *vocab,
                                                        " is out of range"));
    }
    if (*vocab == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, " does not give the vocabulary size: pass --vocab-size"));
    }
    return ServedModel{static_cast<int>(*context), static_cast<int>(*vocab)};
  }

  BenchRecord Send(const std::vector<int>& prompt, int max_tokens, int stop_after,
                   std::vector<int>* output) override {
    // Several models (or adapters) and llama-server's adapters are taken in turn.
    const uint64_t turn = next_turn_.fetch_add(1);
    OrderedJson body = {{"model", models_[turn % models_.size()]},
                        {"prompt", prompt},
                        {"max_tokens", max_tokens},
                        {"temperature", o_.temperature},
                        {"stream", true},
                        {"stream_options", {{"include_usage", true}}}};
    if (o_.lora_ids > 0) {
      body["lora"] = {{{"id", static_cast<int>(turn % o_.lora_ids)}, {"scale", 1.0}}};
    }
    if (o_.ignore_eos) body["ignore_eos"] = true;
    if (!o_.response_format.empty())
      body["response_format"] = OrderedJson::parse(o_.response_format);
    if (!o_.extra_request_body.empty()) body.update(OrderedJson::parse(o_.extra_request_body));
    httplib::Request request;
    request.method = "POST";
    request.path = prefix_ + "/v1/completions";
    request.headers = Headers();
    request.headers.emplace("Accept", "text/event-stream");
    request.set_header("Content-Type", "application/json");
    request.body = JsonDump(body);

    BenchRecord r;
    r.prompt_tokens = static_cast<int>(prompt.size());
    int status = -1;
    std::string refusal;  // the body of a non-200 answer
    SseReader sse;
    bool done = false, ended_by_us = false;
    int arrivals = 0, usage_tokens = -1;
    std::vector<int> ids;
    const Clock::time_point start = Clock::now();
    Clock::time_point last = start;
    // One event: a chunk, usage, an error object, or [DONE]. False ends the stream.
    auto on_data = [&](absl::string_view payload) {
      if (payload == "[DONE]") {
        done = true;
        return false;
      }
      absl::StatusOr<Json> chunk = ParseJson(payload, "a stream chunk");
      if (!chunk.ok()) {
        r.error = std::string(chunk.status().message());
        return false;
      }
      if (const Json* error = JsonMember(*chunk, "error"); error != nullptr) {
        r.error = absl::StrCat("error event: ", ErrorMessage(std::string(payload)));
        return false;
      }
      const Json* choices = JsonMember(*chunk, "choices");
      if (choices != nullptr && choices->is_array() && !choices->empty()) {
        const Json& choice = (*choices)[0];
        const Json* text = JsonMember(choice, "text");
        const Json* token_ids = JsonMember(choice, "token_ids");
        const bool has_ids = token_ids != nullptr && token_ids->is_array() && !token_ids->empty();
        if (has_ids) {
          for (const Json& id : *token_ids) {
            if (id.is_number_integer()) ids.push_back(id.get<int>());
          }
        }
        if (has_ids || (text != nullptr && text->is_string() && !text->empty())) {
          const Clock::time_point now = Clock::now();
          if (arrivals == 0) {
            r.ttft = Seconds(now - start);
          } else {
            r.itl.push_back(Seconds(now - last));
          }
          last = now;
          arrivals += has_ids ? static_cast<int>(token_ids->size()) : 1;
          // A stream the client ends at stop_after keeps that many, also when a chunk brings
          // several tokens (a speculative step's).
          if (stop_after < max_tokens) arrivals = std::min(arrivals, stop_after);
        }
      }
      if (const Json* usage = JsonMember(*chunk, "usage"); usage != nullptr) {
        usage_tokens =
            static_cast<int>(JsonIntOr(*usage, "completion_tokens", -1, "usage").value_or(-1));
        if (const Json* details = JsonMember(*usage, "prompt_tokens_details")) {
          r.cached_tokens =
              static_cast<int>(JsonIntOr(*details, "cached_tokens", 0, "usage").value_or(0));
        }
      }
      if (arrivals >= stop_after && stop_after < max_tokens) {
        ended_by_us = true;
        return false;
      }
      return true;
    };
    request.response_handler = [&](const httplib::Response& response) {
      status = response.status;
      return true;
    };
    request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
      if (status != 200) {
        refusal.append(data,
                       std::min(size, kMaxErrorBytes - std::min(kMaxErrorBytes, refusal.size())));
        return true;
      }
      return sse.Feed(data, size, on_data);
    };
    auto client = NewClient(o_.timeout_s);
    const httplib::Result result = client->send(request);
    r.e2e = Seconds(Clock::now() - start);
    r.output_tokens = usage_tokens >= 0 && !ended_by_us ? usage_tokens : arrivals;
    if (status != 200 && status != -1) {
      r.error = absl::StrCat("HTTP ", status, ": ", ErrorMessage(refusal));
    } else if (r.error.empty() && !sse.error.empty()) {
      r.error = sse.error;
    } else if (r.error.empty() && !done && !ended_by_us) {
      // Without an answer httplib says why (connection, read timeout); with one, it was cut.
      r.error = status == -1 ? absl::StrCat("HTTP: ", Describe(result.error()))
                             : "the stream ended before data: [DONE]";
    }
    if (r.error.empty() && r.output_tokens <= 0) r.error = "no tokens";
    r.ok = r.error.empty();
    if (ended_by_us && ids.size() > static_cast<size_t>(r.output_tokens))
      ids.resize(r.output_tokens);
    if (output != nullptr) {
      for (int i = 0; ids.empty() && i < r.output_tokens && !prompt.empty(); ++i) {
        // Stand-ins of the reply's length (see bench_backend.h): the prompt's last ids.
        output->push_back(prompt[prompt.size() - 1 - i % prompt.size()]);
      }
      output->insert(output->end(), ids.begin(), ids.end());
    }
    return r;
  }

 private:
  // "http://host:port[/prefix[/v1]]" into the client's address and the path prefix.
  absl::Status ParseBaseUrl() {
    absl::string_view url = o_.base_url;
    absl::string_view rest = url;
    if (!absl::ConsumePrefix(&rest, "http://") && !absl::ConsumePrefix(&rest, "https://")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--base-url must be http://HOST:PORT or https://HOST:PORT, not \"", url, "\""));
    }
    const size_t slash = rest.find('/');
    address_ =
        std::string(url.substr(0, url.size() - rest.size())) + std::string(rest.substr(0, slash));
    absl::string_view prefix = slash == absl::string_view::npos ? "" : rest.substr(slash);
    while (absl::ConsumeSuffix(&prefix, "/")) {
    }
    absl::ConsumeSuffix(&prefix, "/v1");  // OpenAI clients' base URLs end in /v1
    prefix_ = std::string(prefix);
    if (rest.empty() || rest[0] == '/' || !httplib::Client(address_).is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat("--base-url \"", url, "\" has no host"));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<httplib::Client> NewClient(double timeout_s) const {
    auto client = std::make_unique<httplib::Client>(address_);
    const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
    client->set_connection_timeout(
        std::min<std::chrono::milliseconds>(timeout, std::chrono::milliseconds(10000)));
    client->set_read_timeout(timeout);  // between two reads: a long prefill sends nothing
    client->set_write_timeout(timeout);
    return client;
  }

  httplib::Headers Headers() const {
    httplib::Headers headers;
    if (!o_.api_key.empty()) headers.emplace("Authorization", "Bearer " + o_.api_key);
    return headers;
  }

  const BenchOptions& o_;
  std::string address_;              // scheme://host:port
  std::string prefix_;               // before /v1; "" or "/path"
  std::vector<std::string> models_;  // set by Connect
  std::atomic<uint64_t> next_turn_{0};
};

}  // namespace

std::unique_ptr<BenchBackend> MakeOpenAiBenchBackend(const BenchOptions& options) {
  return std::make_unique<OpenAiBackend>(options);
}

}  // namespace pagoda
