#!/usr/bin/env python3
"""Render tests/oracle/template/conversations.json through the official Qwen3.5 chat template with
transformers' apply_chat_template and write one golden per conversation (NN.txt, or NN.error holding
the template's exception message for conversations marked expect_error).

The template is NOT in the repository: it is models/templates/Qwen3.5-4B.jinja of the llama.cpp
source bundled in node-llama-cpp 3.22.1 (llama/gitRelease.bundle). Pass it with --template.

Conventions applied before rendering (they are the server's, documented in docs/MODEL.md §15):
- OpenAI role "developer" becomes "system" (the Qwen3.5 template rejects "developer").
- preserve_thinking: the Qwen3.5 template ignores it; Qwen3.6's official template gates history
  reasoning on `(preserve_thinking is defined and preserve_thinking is true) or (loop.index0 >
  ns.last_query_index)`. We apply exactly that one-condition change, so the goldens for those
  conversations are what the Qwen3.6 template renders.

--local-jinja renders with plain jinja2 mimicking transformers (for debugging the conversations
only; committed goldens come from transformers). Output: OUT/goldens.json ({"NN.txt": text}) plus
the individual files when --split is given.
"""
import argparse
import copy
import json
import os
import sys

QWEN35_GATE = "{%- if loop.index0 > ns.last_query_index %}"
QWEN36_GATE = ("{%- if (preserve_thinking is defined and preserve_thinking is true) "
               "or (loop.index0 > ns.last_query_index) %}")


def prepare(conv):
    messages = copy.deepcopy(conv["messages"])
    for m in messages:
        if m.get("role") == "developer":
            m["role"] = "system"
    kwargs = {}
    for key in ("enable_thinking", "preserve_thinking", "add_vision_id"):
        if key in conv:
            kwargs[key] = conv[key]
    return messages, conv.get("tools"), conv.get("add_generation_prompt", True), kwargs


def template_for(base, conv):
    if "preserve_thinking" not in conv:
        return base
    assert base.count(QWEN35_GATE) == 1, "template changed: reasoning gate not found exactly once"
    return base.replace(QWEN35_GATE, QWEN36_GATE)


def make_transformers_renderer(tokenizer_file):
    import transformers
    from transformers import PreTrainedTokenizerFast
    print("transformers", transformers.__version__, flush=True)
    tok = PreTrainedTokenizerFast(tokenizer_file=tokenizer_file)

    def render(template, messages, tools, add_gen, kwargs):
        return tok.apply_chat_template(messages, tools=tools, tokenize=False,
                                       add_generation_prompt=add_gen, chat_template=template,
                                       **kwargs)
    return render


def make_local_renderer():
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.exceptions import TemplateError

    def raise_exception(message):
        raise TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception

    def render(template, messages, tools, add_gen, kwargs):
        return env.from_string(template).render(messages=messages, tools=tools,
                                                add_generation_prompt=add_gen, **kwargs)
    return render


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser()
    ap.add_argument("--template", required=True)
    ap.add_argument("--tokenizer", help="tokenizer.json for the tokenizer object (no download)")
    ap.add_argument("--conversations", default=os.path.join(here, "conversations.json"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--local-jinja", action="store_true")
    ap.add_argument("--split", action="store_true", help="also write NN.txt / NN.error files")
    args = ap.parse_args()

    base = open(args.template, encoding="utf-8").read()
    convs = json.load(open(args.conversations, encoding="utf-8"))
    render = make_local_renderer() if args.local_jinja else make_transformers_renderer(args.tokenizer)

    goldens = {}
    failures = 0
    for i, conv in enumerate(convs, start=1):
        messages, tools, add_gen, kwargs = prepare(conv)
        try:
            text = render(template_for(base, conv), messages, tools, add_gen, kwargs)
            name, body = "%02d.txt" % i, text
            if conv.get("expect_error"):
                print("UNEXPECTED SUCCESS", i, conv["name"], flush=True)
                failures += 1
        except Exception as e:  # the template's raise_exception and filter errors
            name, body = "%02d.error" % i, str(e) + "\n"
            if not conv.get("expect_error"):
                print("UNEXPECTED ERROR", i, conv["name"], repr(e), flush=True)
                failures += 1
        goldens[name] = body
        print(name, conv["name"], len(body), flush=True)

    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "goldens.json"), "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=False, indent=0, sort_keys=True)
    if args.split:
        for name, body in goldens.items():
            with open(os.path.join(args.out, name), "w", encoding="utf-8", newline="") as f:
                f.write(body)
    print("rendered", len(goldens), "failures", failures, flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
