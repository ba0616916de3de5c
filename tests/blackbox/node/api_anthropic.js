// ninfer black-box test - the Anthropic Messages surface through the official @anthropic-ai/sdk:
// messages and streams on the tiny model (stream equals non-stream, event order, usage,
// count_tokens), then scripted outputs (--device script:FILE) for thinking blocks, a tool_use
// round trip, stop sequences and the thinking budget, and the error shapes (400, 401, 529).
'use strict';
const fs = require('fs');
const path = require('path');
const Anthropic = require('@anthropic-ai/sdk');
const { main, check, request, TEST_DIR } = require('./harness');

const anthropic = (d, opts = {}) => new Anthropic({ baseURL: d.base, apiKey: 'none', maxRetries: 0, ...opts });

async function errorOf(promise) {
    try { await promise; } catch (e) { return e; }
    return null;
}

// The stream's events in order and the SDK's accumulated final message.
async function streamed(client, params) {
    const stream = client.messages.stream(params);
    const events = [];
    for await (const ev of stream) events.push(ev);
    return { events, final: await stream.finalMessage() };
}

const weatherTool = {
    name: 'get_weather', description: 'Weather of a city',
    input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const TOOL = 'text: The user wants the weather.\\n</think>\\n\\n<tool_call>\\n<function=get_weather>\\n<parameter=city>\\nParis\\n</parameter>\\n</function>\\n</tool_call><|im_end|>';
const ANSWER = 'text: The tool answered.\\n</think>\\n\\nIt is sunny in Paris.<|im_end|>';
const STOP = 'text: Short.\\n</think>\\n\\nHello STOP world<|im_end|>';
const BUDGET = 'text: one two three four five six seven eight nine ten eleven twelve<|im_end|>';
// One script per generation, in request order (the script backend takes them round robin).
const SCRIPTS = [TOOL, ANSWER, TOOL, ANSWER, STOP, BUDGET, TOOL, TOOL, TOOL, ANSWER];

main('api_anthropic', async (start) => {
    // --- the tiny model: real generation --------------------------------------------------
    const d = await start();
    const client = anthropic(d);
    const off = { type: 'disabled' };
    const base = { model: 'tiny', max_tokens: 16, temperature: 0, messages: [{ role: 'user', content: 'Tell me a story.' }] };
    const full = await client.messages.create({ ...base, thinking: { type: 'disabled' } });
    check(/^msg_/.test(full.id) && full.type === 'message' && full.role === 'assistant', 'message id, type, role');
    check(full.stop_reason === 'max_tokens' && full.usage.output_tokens === 16, 'max_tokens: stop_reason max_tokens',
        JSON.stringify([full.stop_reason, full.usage]));
    check(full.content.length === 1 && full.content[0].type === 'text', 'thinking disabled: one text block', JSON.stringify(full.content));
    const raw = await request(d.base, 'POST', '/v1/messages', { body: { ...base, thinking: { type: 'disabled' } } });
    check(/^req_\d+$/.test(raw.headers['request-id'] || ''), 'request-id header', JSON.stringify(raw.headers));

    const s = await streamed(client, { ...base, thinking: { type: 'disabled' } });
    const types = s.events.map((e) => e.type);
    check(types[0] === 'message_start' && types[types.length - 2] === 'message_delta' && types[types.length - 1] === 'message_stop',
        'stream: message_start ... message_delta, message_stop', types.join(','));
    check(JSON.stringify(s.final.content) === JSON.stringify(full.content) && s.final.stop_reason === 'max_tokens',
        'stream accumulates to the non-streamed message', JSON.stringify([s.final.content, full.content]));
    const inputOf = (u) => u.input_tokens + u.cache_read_input_tokens;
    check(inputOf(s.final.usage) === inputOf(full.usage) && s.final.usage.output_tokens === 16, 'stream usage equals non-stream usage',
        JSON.stringify([full.usage, s.final.usage]));
    const rawStream = await request(d.base, 'POST', '/v1/messages', { body: { ...base, max_tokens: 2, stream: true, thinking: off } });
    check(rawStream.headers['content-type'] === 'text/event-stream' && /^event: message_start\ndata: \{/.test(rawStream.text) &&
        /\nevent: ping\ndata: \{"type":"ping"\}\n\n/.test(rawStream.text), 'SSE: named events, a ping after message_start',
        rawStream.text.slice(0, 300));
    const first = JSON.parse(rawStream.text.split('\n')[1].slice(6));
    check(inputOf(first.message.usage) === inputOf(full.usage) && first.message.usage.output_tokens === 0,
        'message_start carries the input tokens', JSON.stringify(first));

    const thinking = await client.messages.create({ ...base, thinking: { type: 'enabled', budget_tokens: 1024 } });
    check(thinking.content[0].type === 'thinking' && thinking.content[0].thinking.length > 0, 'thinking enabled: thinking block first',
        JSON.stringify(thinking.content));
    const sys = await client.messages.countTokens({ model: 'tiny', system: [{ type: 'text', text: 'You are terse.' }],
        messages: base.messages, thinking: off });
    const plain = await client.messages.countTokens({ model: 'tiny', messages: base.messages, thinking: off });
    check(sys.input_tokens > plain.input_tokens && plain.input_tokens > 0, 'count_tokens: system blocks add tokens',
        JSON.stringify([sys, plain]));
    check(plain.input_tokens === full.usage.input_tokens + full.usage.cache_read_input_tokens, 'count_tokens equals usage',
        JSON.stringify([plain, full.usage]));
    const withTools = await client.messages.countTokens({ model: 'tiny', messages: base.messages, tools: [weatherTool], thinking: off });
    check(withTools.input_tokens > plain.input_tokens, 'count_tokens: tools add tokens');
    const stringSystem = await client.messages.create({ ...base, max_tokens: 2, system: 'You are terse.', thinking: off });
    check(stringSystem.usage.input_tokens + stringSystem.usage.cache_read_input_tokens === sys.input_tokens,
        'system as a string renders like system text blocks', JSON.stringify([stringSystem.usage, sys]));

    // Errors: {"type":"error","error":{type,message}}.
    const badJson = await request(d.base, 'POST', '/v1/messages', { body: '{"messages": [' });
    check(badJson.status === 400 && badJson.json && badJson.json.type === 'error' &&
        badJson.json.error.type === 'invalid_request_error' && typeof badJson.json.error.message === 'string',
        'bad JSON: 400 invalid_request_error in the Anthropic shape', badJson.text);
    const noMax = await errorOf(client.messages.create({ model: 'tiny', messages: base.messages }));
    check(noMax instanceof Anthropic.BadRequestError && noMax.error.error.type === 'invalid_request_error' &&
        /max_tokens/.test(noMax.error.error.message), 'missing max_tokens: BadRequestError', noMax && noMax.message);
    const badBlock = await errorOf(client.messages.create({ ...base, messages: [{ role: 'user', content: [{ type: 'image',
        source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }] }));
    check(badBlock instanceof Anthropic.BadRequestError, 'image block: 400');
    const route = await request(d.base, 'GET', '/v1/messages');
    check(route.status === 405 && route.json.type === 'error', 'wrong method on /v1/messages: Anthropic error shape');
    await d.stop();

    const k = await start(['--api-key', 'sekrit']);
    const denied = await errorOf(anthropic(k, { apiKey: 'wrong' }).messages.create(base));
    check(denied instanceof Anthropic.AuthenticationError && denied.error.error.type === 'authentication_error',
        'wrong x-api-key: 401 authentication_error', denied && denied.message);
    const allowed = await anthropic(k, { apiKey: 'sekrit' }).messages.create({ ...base, max_tokens: 2 });
    check(allowed.usage.output_tokens === 2, 'right x-api-key accepted');
    await k.stop();

    // Queue full: one lane busy, nothing may wait -> 529 overloaded_error.
    const o = await start(['--max-concurrency', '1', '--max-pending', '0']);
    const oc = anthropic(o);
    const busy = oc.messages.stream({ ...base, max_tokens: 1500, thinking: { type: 'disabled' } });
    busy.done().catch(() => {});
    await new Promise((resolve) => busy.on('streamEvent', (ev) => ev.type === 'message_start' && resolve()));
    const over = await errorOf(oc.messages.create({ ...base, max_tokens: 4 }));
    check(over && over.status === 529 && over.error.error.type === 'overloaded_error', 'queue full: 529 overloaded_error',
        over && `${over.status} ${over.message}`);
    busy.abort();
    const t = await start(['--max-concurrency', '1', '--pending-timeout-ms', '100']);
    const tc = anthropic(t);
    const busy2 = tc.messages.stream({ ...base, max_tokens: 1500, thinking: { type: 'disabled' } });
    busy2.done().catch(() => {});
    await new Promise((resolve) => busy2.on('streamEvent', (ev) => ev.type === 'message_start' && resolve()));
    const late = await errorOf(tc.messages.create({ ...base, max_tokens: 4 }));
    check(late && late.status === 503 && late.error.type === 'error', 'queue timeout: 503', late && `${late.status} ${late.message}`);
    busy2.abort();
    await o.stop();
    await t.stop();

    // --- scripted outputs ---------------------------------------------------------------
    const script = path.join(TEST_DIR, 'anthropic.script');
    fs.writeFileSync(script, SCRIPTS.join('\n') + '\n');
    const sd = await start(['--device', 'script:' + script, '--max-concurrency', '1']);
    const sc = anthropic(sd);
    const ask = { model: 'tiny', max_tokens: 200, tools: [weatherTool],
        messages: [{ role: 'user', content: 'Weather in Paris?' }] };
    const call = await sc.messages.create(ask);
    const use = call.content.find((b) => b.type === 'tool_use');
    check(call.stop_reason === 'tool_use' && call.content[0].type === 'thinking' &&
        call.content[0].thinking === 'The user wants the weather.', 'tool_use: thinking block then tool_use, stop_reason tool_use',
        JSON.stringify(call.content));
    check(use && use.name === 'get_weather' && JSON.stringify(use.input) === '{"city":"Paris"}' && /^call_/.test(use.id),
        'tool_use block: name, id and input object', JSON.stringify(use));
    check(!call.content.some((b) => b.type === 'text'), 'no whitespace-only text block before the tool call');
    const answer = await sc.messages.create({ ...ask, messages: [...ask.messages,
        { role: 'assistant', content: call.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: [{ type: 'text', text: 'sunny, 24C' }] }] }] });
    check(answer.stop_reason === 'end_turn' && answer.content[1].type === 'text' && answer.content[1].text === 'It is sunny in Paris.',
        'tool_result round trip: end_turn with the text', JSON.stringify(answer.content));

    const callStream = await streamed(sc, ask);
    const order = callStream.events.filter((e) => e.type !== 'ping').map((e) =>
        e.type === 'content_block_start' ? 'start:' + e.content_block.type
            : e.type === 'content_block_delta' ? 'delta:' + e.delta.type : e.type);
    const squeezed = order.filter((x, i) => x !== order[i - 1]);
    check(JSON.stringify(squeezed) === JSON.stringify(['message_start', 'start:thinking', 'delta:thinking_delta',
        'content_block_stop', 'start:tool_use', 'delta:input_json_delta', 'content_block_stop', 'message_delta', 'message_stop']),
    'stream event order: thinking, then tool_use with input_json_delta', squeezed.join(','));
    check(JSON.stringify(callStream.final.content.map((b) => b.type === 'tool_use' ? b.input : b.thinking)) ===
        JSON.stringify(call.content.map((b) => b.type === 'tool_use' ? b.input : b.thinking)) &&
        callStream.final.stop_reason === 'tool_use', 'streamed tool_use equals the non-streamed one');
    const textStream = await streamed(sc, { ...ask, messages: [...ask.messages,
        { role: 'assistant', content: call.content },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'sunny' }] }] });
    check(textStream.final.content[1].text === 'It is sunny in Paris.' && textStream.events.some((e) =>
        e.type === 'content_block_delta' && e.delta.type === 'text_delta'), 'streamed text_delta');

    const stopped = await sc.messages.create({ ...ask, stop_sequences: ['STOP'] });
    check(stopped.stop_reason === 'stop_sequence' && stopped.stop_sequence === 'STOP' &&
        stopped.content[stopped.content.length - 1].text === 'Hello ', 'stop_sequences: stop_reason stop_sequence', JSON.stringify(stopped));

    // Thinking budget: 4 reasoning tokens, then the engine writes "\n</think>\n\n" without sampling.
    const budget = await sc.messages.create({ ...ask, tools: undefined, thinking: { type: 'enabled', budget_tokens: 4 } });
    const tok = await request(sd.base, 'POST', '/tokenize', { body: { content: 'one two three four five six seven eight nine ten eleven twelve<|im_end|>' } });
    check(budget.content[0].type === 'thinking' && budget.content[0].thinking === 'one two three four' &&
        budget.content[1].type === 'text' && /twelve$/.test(budget.content[1].text) && !/five/.test(budget.content[1].text),
        'budget_tokens closes the reasoning after 4 tokens', JSON.stringify(budget.content));
    check(budget.usage.output_tokens === tok.json.tokens.length, 'forced close counted in output_tokens',
        JSON.stringify([budget.usage, tok.json.tokens.length]));
    const choiceNone = await sc.messages.create({ ...ask, tool_choice: { type: 'none' } }); // TOOL, but no tools rendered
    check(choiceNone.stop_reason === 'end_turn' && !choiceNone.content.some((b) => b.type === 'tool_use'),
        'tool_choice none: the call stays text', JSON.stringify(choiceNone.content));
    const choiceTool = await sc.messages.create({ ...ask, tool_choice: { type: 'tool', name: 'get_weather' } }); // TOOL
    check(choiceTool.stop_reason === 'tool_use', 'tool_choice tool: the forced call', JSON.stringify(choiceTool.content));
    const choiceAny = await sc.messages.create({ ...ask, tool_choice: { type: 'any' } }); // TOOL
    check(choiceAny.stop_reason === 'tool_use', 'tool_choice any: tool_use');
    // A forced tool constrains the reply (issue 32); the script backend cannot follow the mask, so
    // its text answer is refused token by token and ends the request with a 500, not a reply.
    const refused = await errorOf(sc.messages.create({ ...ask, tool_choice: { type: 'tool', name: 'get_weather' } })); // ANSWER
    check(refused instanceof Anthropic.InternalServerError && /grammar/.test(refused.message),
        'a reply the forced tool\'s grammar refuses: 500', String(refused));
    const unknownTool = await errorOf(sc.messages.create({ ...ask, tool_choice: { type: 'tool', name: 'nope' } }));
    check(unknownTool instanceof Anthropic.BadRequestError, 'tool_choice naming an unknown tool: 400');
    await sd.stop();
});
