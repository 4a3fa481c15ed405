#!/usr/bin/env python3
"""Writes tool_turns.json: conversations with assistant tool calls and tool results, rendered
by Python jinja2 through real chat templates (shared/golden/chat_templates.json), set up as
transformers does (see shared/golden/chat_templates.md). The messages are stored as OpenAI
clients send them (function.arguments as JSON text); as vLLM does, the arguments are parsed
into a mapping before rendering, which is what Pagoda's request layer must do too.

  python3 make_tool_turns.py SHARED_DIR > tool_turns.json
"""
import copy
import datetime
import json
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

TEMPLATES = {  # name in the golden set: (bos_token, eos_token)
    "Qwen-Qwen2.5-7B-Instruct": (None, "<|im_end|>"),
    "Qwen-Qwen3-0.6B": (None, "<|im_end|>"),
    "meta-llama-Llama-3.1-8B-Instruct": ("<|begin_of_text|>", "<|eot_id|>"),
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use": ("<|begin_of_text|>", "<|im_end|>"),
    "mistralai-Mistral-Nemo-Instruct-2407": ("<s>", "</s>"),
    "Mistral-Small-3.2-24B-Instruct-2506": ("<s>", "</s>"),
}
FIXED_NOW = datetime.datetime(2026, 11, 22)

TOOLS = [{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}]


def call(id_, city):
    return {"id": id_, "type": "function",
            "function": {"name": "get_weather",
                         "arguments": json.dumps({"city": city, "unit": "celsius"})}}


CONVERSATIONS = {
    "one_call": [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [call("call12345", "Paris")]},
        {"role": "tool", "tool_call_id": "call12345", "content": "22 degrees and sunny"},
    ],
    "two_calls_then_answer": [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": "",
         "tool_calls": [call("call12345", "Paris"), call("call67890", "Oslo")]},
        {"role": "tool", "tool_call_id": "call12345", "content": "22 degrees"},
        {"role": "tool", "tool_call_id": "call67890", "content": "-3 degrees"},
        {"role": "assistant", "content": "Paris is warm, Oslo is cold."},
        {"role": "user", "content": "Thanks!"},
    ],
}


class GenerationTag(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def environment():
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[GenerationTag, jinja2.ext.loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = FIXED_NOW.strftime
    return env


def for_template(messages):
    """vLLM's preprocessing: tool call arguments as mappings, a null content as ""."""
    out = copy.deepcopy(messages)
    for m in out:
        if m.get("content") is None:
            m["content"] = ""
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return out


def main():
    golden = json.load(open(f"{sys.argv[1]}/golden/chat_templates.json"))
    env = environment()
    cases = []
    for name, (bos, eos) in TEMPLATES.items():
        template = env.from_string(golden["templates"][name])
        for conversation, messages in CONVERSATIONS.items():
            context = {"messages": for_template(messages), "tools": TOOLS, "documents": None,
                       "add_generation_prompt": True, "eos_token": eos}
            if bos is not None:
                context["bos_token"] = bos
            case = {"template": name, "conversation": conversation, "bos_token": bos,
                    "eos_token": eos}
            try:
                case["expected"] = template.render(**context)
            except jinja2.exceptions.TemplateError as e:  # the template's own refusal
                case["error"] = str(e)
            except Exception as e:  # jinja2's (e.g. a test on a null content)
                case["error"] = f"{type(e).__name__}: {e}"
            cases.append(case)
    json.dump({"generator": "tests/router/api/openai/tools/make_tool_turns.py",
               "engine": f"jinja2 {jinja2.__version__}", "fixed_date": FIXED_NOW.isoformat(),
               "tools": TOOLS, "conversations": CONVERSATIONS, "cases": cases},
              sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
