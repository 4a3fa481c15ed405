"""The soak's traffic: a fixed set of seeded or greedy requests (answered once on a quiet cluster
for the reference, then replayed under faults and checked against it), and unchecked requests
(fresh seeds, client aborts) drawn at random."""
import random

WORDS = ("the a cat dog sat on mat and then it ran far away little girl boy named Lily Tim "
         "happy sad sun park ball tree big red blue saw wanted to play with her his friend "
         "one day mom said").split()
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer"}},
                   "required": ["city"]}}}]
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer"}},
          "required": ["name", "age"]}


def _prompt(rng, words):
    return "Once upon a time " + " ".join(rng.choice(WORDS) for _ in range(words))


def _messages(rng):
    return [{"role": "system", "content": "You tell short stories."},
            {"role": "user", "content": _prompt(rng, rng.randrange(4, 30))}]


def _sampling(rng, greedy):
    return {"temperature": 0} if greedy else {"temperature": 0.9, "seed": rng.randrange(1 << 31)}


def reference_specs(seed, chat, embeddings):
    """The checked requests: every kind of the mix, each answered the same on every run."""
    rng = random.Random(seed)
    specs = []
    for i in range(4):
        greedy = i % 2 == 0
        specs.append({"name": f"completion{i}", "api": "http", "path": "/v1/completions",
                      "body": {"prompt": _prompt(rng, rng.randrange(5, 60)),
                               "max_tokens": rng.randrange(8, 64), **_sampling(rng, greedy)}})
        specs.append({"name": f"completion_n3_{i}", "api": "http", "path": "/v1/completions",
                      "body": {"prompt": _prompt(rng, rng.randrange(5, 40)), "n": 3,
                               "max_tokens": rng.randrange(8, 48), **_sampling(rng, False)}})
        specs.append({"name": f"completion_stream{i}", "api": "http",
                      "path": "/v1/completions", "stream": True,
                      "body": {"prompt": _prompt(rng, rng.randrange(5, 60)), "stream": True,
                               "max_tokens": rng.randrange(16, 96), **_sampling(rng, greedy)}})
        specs.append({"name": f"prompt_logprobs{i}", "api": "http", "path": "/v1/completions",
                      "body": {"prompt": _prompt(rng, rng.randrange(5, 40)), "max_tokens": 4,
                               "prompt_logprobs": 2, **_sampling(rng, True)}})
        specs.append({"name": f"grpc{i}", "api": "grpc",
                      "body": {"prompt": _prompt(rng, rng.randrange(5, 60)), "n": 1 + i % 2,
                               "max_tokens": rng.randrange(8, 64), **_sampling(rng, greedy)}})
        if embeddings:
            specs.append({"name": f"embeddings{i}", "api": "http", "path": "/v1/embeddings",
                          "body": {"input": [_prompt(rng, rng.randrange(3, 30))
                                             for _ in range(1 + i)]}})
        if not chat:
            continue
        specs.append({"name": f"chat{i}", "api": "http", "path": "/v1/chat/completions",
                      "body": {"messages": _messages(rng), "max_tokens": rng.randrange(8, 64),
                               **_sampling(rng, greedy)}})
        specs.append({"name": f"chat_stream{i}", "api": "http", "stream": True,
                      "path": "/v1/chat/completions",
                      "body": {"messages": _messages(rng), "stream": True, "n": 1 + i % 2,
                               "max_tokens": rng.randrange(16, 96), **_sampling(rng, greedy)}})
        specs.append({"name": f"json_schema{i}", "api": "http", "path": "/v1/chat/completions",
                      "stream": i % 2 == 1,
                      "body": {"messages": _messages(rng), "max_tokens": 120, "stream": i % 2 == 1,
                               "response_format": {"type": "json_schema", "json_schema": {
                                   "name": "person", "schema": SCHEMA}},
                               **_sampling(rng, False)}})
        specs.append({"name": f"tool_call{i}", "api": "http", "path": "/v1/chat/completions",
                      "stream": i % 2 == 1,
                      "body": {"messages": [{"role": "user", "content": "Weather in Paris?"}],
                               "tools": TOOLS, "tool_choice": "required", "max_tokens": 200,
                               "stream": i % 2 == 1, **_sampling(rng, False)}})
    return specs


def long_specs(seed, count):
    """Long checked streams started just before each fault, so the killed or drained worker
    holds sequences that must fail over (or move) and still answer as in the reference."""
    rng = random.Random(seed + 1)
    return [{"name": f"long{i}", "api": "http", "path": "/v1/completions", "stream": True,
             "body": {"prompt": _prompt(rng, rng.randrange(5, 40)), "stream": True,
                      "max_tokens": 320, "ignore_eos": True, **_sampling(rng, i % 2 == 0)}}
            for i in range(count)]


def unchecked_spec(rng, chat):
    """A request with a fresh seed (answered, not compared) or a client abort mid-stream."""
    kind = rng.random()
    if kind < 0.3:  # the client goes away after a few events: the router frees its blocks
        path = "/v1/chat/completions" if chat and rng.random() < 0.5 else "/v1/completions"
        body = ({"messages": _messages(rng)} if path.endswith("chat/completions")
                else {"prompt": _prompt(rng, rng.randrange(5, 60))})
        body.update({"stream": True, "max_tokens": 256, "temperature": 1.0})
        return {"name": "abort", "api": "http", "path": path, "stream": True, "body": body,
                "abort_after": rng.randrange(1, 6)}
    path = "/v1/chat/completions" if chat and kind < 0.65 else "/v1/completions"
    body = ({"messages": _messages(rng)} if path.endswith("chat/completions")
            else {"prompt": _prompt(rng, rng.randrange(5, 120))})
    body.update({"stream": True, "max_tokens": rng.randrange(8, 128), "temperature": 0.8,
                 "n": rng.choice([1, 1, 1, 2])})
    return {"name": "fresh", "api": "http", "path": path, "stream": True, "body": body}
