#!/usr/bin/env python3
"""Writes tests/golden/chat_templates_extra.json: jinja2 renders of tool-calling chat templates.

The second, public chat-template golden set (the first is shared/golden/chat_templates.json,
described in shared/golden/chat_templates.md). Same layout and the same engine, set up as
transformers' _compile_jinja_template does: ImmutableSandboxedEnvironment(trim_blocks,
lstrip_blocks), loopcontrols, the {% generation %} tag, tojson = json.dumps(ensure_ascii=False,
...), raise_exception and strftime_now at a fixed date.

Templates come from two places, both named in the output's `sources`:
  - tests/golden/chat_templates_extra/<name>.jinja, stored byte-exact from their upstream file;
  - templates of the shared golden set (Qwen2.5, Llama 3.1, Mistral Nemo, Hermes 3), reused
    from shared/golden/chat_templates.json for their tool-calling turns.

Usage: tools/make_chat_golden_extra.py [--shared ../shared] [--out tests/golden/...json]
"""

import argparse
import copy
import datetime
import json
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

FIXED_NOW = datetime.datetime(2026, 11, 22, 0, 0, 0)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE_DIR = os.path.join(REPO, "tests", "golden", "chat_templates_extra")

# name -> (source, bos_token or None, eos_token or None, extra kwargs variants)
LLAMA_CPP = "ggml-org/llama.cpp models/templates/"
STORED = {
    "ByteDance-Seed-OSS": (
        LLAMA_CPP + "ByteDance-Seed-OSS.jinja (commit b1933d306f928b19e1601e640c4f1a2eb84b238a)",
        None, None),
    "meetkai-functionary-medium-v3.1": (
        LLAMA_CPP + "meetkai-functionary-medium-v3.1.jinja "
        "(ggerganov/llama.cpp commit e884d3d530dc808a59abc9dda1c7219215a2efbb)",
        "<|begin_of_text|>", "<|eot_id|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B": (
        LLAMA_CPP + "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja "
        "(commit 20bdc4fac4e8779e5b73646f4b3b24a9964aa566)",
        "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "llama-cpp-deepseek-r1": (
        LLAMA_CPP + "llama-cpp-deepseek-r1.jinja "
        "(ggerganov/llama.cpp commit 1c302e18ba95329432e7bf0a3888dc462a93dfa6)",
        "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
    "tencent-Hunyuan-A13B-Instruct-tool": (
        "vllm-project/vllm examples/tool_chat_template_hunyuan_a13b.jinja "
        "(commit 630fe7e7a7a4f13533d4c130804bff933130f1fd)",
        "<|startoftext|>", "<|eos|>"),
    # Not a tool template: the one real template found that calls str.format (with a format
    # spec and a keyword argument), which issue 25 named.
    "TIGER-Lab-VLM2Vec-Full": (
        "vllm-project/vllm examples/template_vlm2vec.jinja "
        "(commit 28c4cf57170e3671c1906e1ab8b42616e9a4fcb4)",
        "<s>", "</s>"),
}
FROM_SHARED = {
    "Qwen-Qwen2.5-7B-Instruct": (None, "<|im_end|>"),
    "meta-llama-Llama-3.1-8B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("<s>", "</s>"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": ("<|begin_of_text|>", "<|im_end|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B": ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"),
}
# Template kwargs worth a case of their own.
# What an assistant message that only calls tools carries as content: None (OpenAI's form),
# or "" for templates that concatenate it unconditionally.
CALL_CONTENT = {"tencent-Hunyuan-A13B-Instruct-tool": ""}
EXTRA_KWARGS = {
    "ByteDance-Seed-OSS": [("thinking_budget_0", {"thinking_budget": 0}),
                           ("thinking_budget_600", {"thinking_budget": 600}),
                           ("thinking_budget_99999", {"thinking_budget": 99999}),
                           ("json_tooldef", {"use_json_tooldef": True})],
    "tencent-Hunyuan-A13B-Instruct-tool": [("no_thinking", {"enable_thinking": False})],
}

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a given city.",
        "parameters": {
            "type": "object",
            "properties": {
                "location": {"type": "string", "description": "City and country, e.g. Paris, France"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                         "description": "Temperature unit"},
            },
            "required": ["location"],
        },
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current local time in a time zone. ",
        "parameters": {
            "type": "object",
            "properties": {"tz": {"type": "string", "description": "IANA zone, e.g. Europe/Paris"},
                           "seconds": {"type": "boolean"}, "retries": {"type": "integer"}},
            "required": ["tz", "retries"],
        },
    },
}
CODE_TOOL = {"type": "code_interpreter"}

USER = {"role": "user", "content": "What's the weather like in Paris right now?"}
SYSTEM = {"role": "system", "content": "You are a careful assistant. Answer in one sentence."}


def tool_call(call_id, name, args, string_args):
    return {"id": call_id, "type": "function",
            "function": {"name": name,
                         "arguments": json.dumps(args, ensure_ascii=False) if string_args else args}}


def assistant_calls(string_args, two=False, content=None):
    calls = [tool_call("a1B2c3D4e", "get_weather", {"location": "Paris, France", "unit": "celsius"},
                       string_args)]
    if two:
        calls.append(tool_call("f5G6h7I8j", "get_time", {"tz": "Europe/Paris", "retries": 2},
                               string_args))
    return {"role": "assistant", "content": content, "tool_calls": calls}


def tool_result(call_id, name, content):
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def conversations(call_content):
    """(name, messages, tools, add_generation_prompt) for every template."""
    out = [
        ("plain_chat", [{"role": "user", "content": "Hello!"}], None, True),
        ("multi_turn", [{"role": "user", "content": "Hi"},
                        {"role": "assistant", "content": "Hello! How can I help?"},
                        {"role": "user", "content": "Tell me a joke."}], None, True),
        ("system_prompt", [SYSTEM, {"role": "user", "content": "Hi"}], None, True),
        ("no_generation_prompt", [SYSTEM, {"role": "user", "content": "Hi"},
                                  {"role": "assistant", "content": "Hello."}], None, False),
        ("tools_offered", [USER], [WEATHER_TOOL, TIME_TOOL], True),
        ("tools_offered_with_system", [SYSTEM, USER], [WEATHER_TOOL], True),
        ("tools_empty_list", [USER], [], True),
        ("code_interpreter_tool", [USER], [CODE_TOOL, WEATHER_TOOL], True),
    ]
    for string_args in (True, False):
        suffix = "" if string_args else "_dict_args"
        out += [
            ("assistant_tool_call" + suffix, [USER, assistant_calls(string_args, content=call_content)], [WEATHER_TOOL],
             False),
            ("tool_result" + suffix,
             [USER, assistant_calls(string_args, content=call_content),
              tool_result("a1B2c3D4e", "get_weather", '{"temperature": 18, "condition": "sunny"}')],
             [WEATHER_TOOL], True),
            ("tool_result_no_generation_prompt" + suffix,
             [USER, assistant_calls(string_args, content=call_content),
              tool_result("a1B2c3D4e", "get_weather", '{"temperature": 18}')], [WEATHER_TOOL],
             False),
            ("tool_answer_turn" + suffix,
             [SYSTEM, USER, assistant_calls(string_args, content=call_content),
              tool_result("a1B2c3D4e", "get_weather", '{"temperature": 18}'),
              {"role": "assistant", "content": "It is 18 °C and sunny in Paris."},
              {"role": "user", "content": "And the time?"}], [WEATHER_TOOL, TIME_TOOL], True),
            ("parallel_tool_calls" + suffix,
             [USER, assistant_calls(string_args, two=True, content=call_content),
              tool_result("a1B2c3D4e", "get_weather", "18 C"),
              tool_result("f5G6h7I8j", "get_time", "09:15")], [WEATHER_TOOL, TIME_TOOL], True),
        ]
    out.append(("assistant_thinking",
                [USER, {"role": "assistant", "content": "<think>\nLook it up.\n</think>\n\nSunny."},
                 {"role": "user", "content": "Thanks"}], None, True))
    out.append(("assistant_content_and_tool_call",
                [USER, dict(assistant_calls(False), content="Let me check.")], [WEATHER_TOOL], False))
    return out


def image_text(*parts):
    """One user message of content parts: "image" or a text."""
    return {"role": "user", "content": [{"type": "image"} if p == "image" else
                                        {"type": "text", "text": p} for p in parts]}


# Templates whose messages are not chat turns get these instead of conversations().
OWN_CONVERSATIONS = {
    "TIGER-Lab-VLM2Vec-Full": [
        ("text_only", [image_text("A photo of a cat.")], None, False),
        ("image_then_text", [image_text("image", "Represent the given image.")], None, False),
        ("three_images", [image_text("image", "Compare", "image", "and", "image")], None, False),
        ("no_parts", [{"role": "user", "content": []}], None, False),
        ("two_messages", [image_text("a"), image_text("b")], None, False),
    ],
}


class GenerationTag(Extension):
    """transformers' {% generation %}: with no assistant mask asked for, the body renders as is."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return FIXED_NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render(env, text, context):
    try:
        return {"expected": env.from_string(text).render(**copy.deepcopy(context))}
    except jinja2.exceptions.TemplateError as e:
        if type(e) is jinja2.exceptions.TemplateError:
            return {"error": str(e), "error_source": "raise_exception"}
        return {"error": f"{type(e).__name__}: {e}", "error_source": "engine"}
    except Exception as e:  # jinja2 lets Python's own errors (TypeError, ...) through
        return {"error": f"{type(e).__name__}: {e}", "error_source": "engine"}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--shared", default=os.path.join(REPO, "..", "shared"))
    parser.add_argument("--out", default=os.path.join(REPO, "tests", "golden",
                                                      "chat_templates_extra.json"))
    args = parser.parse_args()

    shared = json.load(open(os.path.join(args.shared, "golden", "chat_templates.json"),
                            encoding="utf-8"))
    templates, sources, tokens = {}, {}, {}
    for name, (source, bos, eos) in STORED.items():
        with open(os.path.join(TEMPLATE_DIR, name + ".jinja"), encoding="utf-8", newline="") as f:
            templates[name] = f.read()
        sources[name] = source
        tokens[name] = (bos, eos)
    for name, (bos, eos) in FROM_SHARED.items():
        templates[name] = shared["templates"][name]
        sources[name] = "shared/golden/chat_templates.json (" + shared["source"] + ")"
        tokens[name] = (bos, eos)

    env = make_environment()
    cases = []
    for name, text in templates.items():
        bos, eos = tokens[name]
        variants = [("", {})] + [("_" + n, kw) for n, kw in EXTRA_KWARGS.get(name, [])]
        convs = OWN_CONVERSATIONS.get(name) or conversations(CALL_CONTENT.get(name))
        for case_name, messages, tools, agp in convs:
            for suffix, kwargs in variants:
                if suffix and case_name not in ("tools_offered", "tool_result", "plain_chat"):
                    continue
                context = {"messages": messages, "tools": tools, "documents": None,
                           "add_generation_prompt": agp}
                if bos is not None:
                    context["bos_token"] = bos
                if eos is not None:
                    context["eos_token"] = eos
                context.update(kwargs)
                case = {"template": name, "name": case_name + suffix, "context": context}
                case.update(render(env, text, context))
                cases.append(case)

    golden = {
        "engine": f"python jinja2 {jinja2.__version__}",
        "settings": shared["settings"],
        "fixed_date": FIXED_NOW.isoformat(),
        "source": "tools/make_chat_golden_extra.py; templates named in `sources`",
        "sources": sources,
        "context_note": shared["context_note"],
        "skipped": {},
        "templates": templates,
        "cases": cases,
    }
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum(1 for c in cases if "error" in c)
    print(f"{args.out}: {len(templates)} templates, {len(cases)} cases, {errors} errors",
          file=sys.stderr)


if __name__ == "__main__":
    main()
