// ninfer black-box test - the OpenAI Responses surface through the official `openai` SDK:
// create and stream on the tiny model (the SDK's strict stream accumulator checks the event
// sequence; stream equals create), max_output_tokens -> incomplete, the store (retrieve,
// delete, previous_response_id), errors, /v1/responses/input_tokens; then scripted outputs for reasoning + message items
// and a function-call round trip.
'use strict';
const fs = require('fs');
const path = require('path');
const OpenAI = require('openai');
const { main, check, request, TEST_DIR } = require('./harness');

async function errorOf(promise) {
    try { await promise; } catch (e) { return e; }
    return null;
}

async function streamed(client, params) {
    const stream = client.responses.stream(params);
    const events = [];
    for await (const ev of stream) events.push(ev);
    return { events, final: await stream.finalResponse() };
}

const itemText = (item) => item.type === 'message' ? item.content.map((c) => c.text).join('')
    : item.type === 'reasoning' ? (item.content || []).map((c) => c.text).join('') : item.arguments;

const weatherTool = { type: 'function', name: 'get_weather', description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } };
const TOOL = 'text: The user wants the weather.\\n</think>\\n\\n<tool_call>\\n<function=get_weather>\\n<parameter=city>\\nParis\\n</parameter>\\n</function>\\n</tool_call><|im_end|>';
const ANSWER = 'text: The tool answered.\\n</think>\\n\\nIt is sunny in Paris.<|im_end|>';
const SCRIPTS = [TOOL, ANSWER, TOOL, ANSWER];

main('api_responses', async (start) => {
    const d = await start();
    const client = d.client();
    const base = { model: 'tiny', input: 'Tell me a story.', temperature: 0, max_output_tokens: 12 };

    const r = await client.responses.create(base);
    check(/^resp_/.test(r.id) && r.object === 'response' && r.model === 'tiny', 'response id, object, model');
    check(r.status === 'incomplete' && r.incomplete_details && r.incomplete_details.reason === 'max_output_tokens',
        'max_output_tokens reached: incomplete', JSON.stringify([r.status, r.incomplete_details]));
    check(r.usage.output_tokens === 12 && r.usage.total_tokens === r.usage.input_tokens + 12 &&
        r.usage.output_tokens_details.reasoning_tokens > 0, 'usage with reasoning_tokens', JSON.stringify(r.usage));
    check(r.output[0].type === 'reasoning' && itemText(r.output[0]).length > 0, 'thinking on by default: a reasoning item first');

    const s = await streamed(client, base);
    const types = s.events.map((e) => e.type);
    check(types[0] === 'response.created' && types[1] === 'response.in_progress' &&
        types[types.length - 1] === 'response.incomplete', 'stream: created, in_progress ... incomplete', types.join(','));
    check(s.events.every((e, i) => e.sequence_number === i), 'sequence_number counts up from 0');
    check(JSON.stringify(s.final.output.map(itemText)) === JSON.stringify(r.output.map(itemText)) &&
        JSON.stringify(s.final.output.map((i) => i.type)) === JSON.stringify(r.output.map((i) => i.type)),
        'stream accumulates to the created response', JSON.stringify([s.final.output, r.output]));
    const perItem = types.filter((t) => /output_item|content_part|\.done$|\.delta$/.test(t)).filter((t, i, a) => t !== a[i - 1]);
    check(perItem.slice(0, 5).join(',') === 'response.output_item.added,response.content_part.added,' +
        'response.reasoning_text.delta,response.reasoning_text.done,response.content_part.done', 'reasoning item events', perItem.join(','));

    const off = { ...base, reasoning: { effort: 'none' }, max_output_tokens: 10 };
    const plain = await client.responses.create(off);
    check(plain.output.length === 1 && plain.output[0].type === 'message' && plain.output_text.length > 0,
        'reasoning.effort none: one message item, output_text', JSON.stringify(plain.output));
    const ps = await streamed(client, off);
    const msgEvents = ps.events.map((e) => e.type).filter((t, i, a) => t !== a[i - 1]);
    check(msgEvents.join(',') === 'response.created,response.in_progress,response.output_item.added,response.content_part.added,' +
        'response.output_text.delta,response.output_text.done,response.content_part.done,response.output_item.done,response.incomplete',
    'message item event sequence', msgEvents.join(','));
    check(ps.final.output_text === plain.output_text, 'streamed output_text equals created');
    const rawHdr = await request(d.base, 'POST', '/v1/responses', { body: { ...off, max_output_tokens: 1 } });
    check(/^\d+$/.test(rawHdr.headers['x-request-id'] || ''), 'x-request-id header');

    // Store: retrieve, continue, delete.
    const got = await client.responses.retrieve(plain.id);
    check(got.id === plain.id && got.output_text === plain.output_text, 'retrieve returns the stored response');
    const next = await client.responses.create({ ...off, input: 'And then?', previous_response_id: plain.id });
    const fresh = await client.responses.create({ ...off, input: 'And then?' });
    check(next.previous_response_id === plain.id && next.usage.input_tokens > fresh.usage.input_tokens + plain.usage.output_tokens - 2,
        'previous_response_id continues the stored conversation', JSON.stringify([next.usage, fresh.usage, plain.usage]));
    check(next.usage.input_tokens_details.cached_tokens > plain.usage.input_tokens / 2,
        'the continued conversation reuses the cached prefix', JSON.stringify(next.usage));
    const notStored = await client.responses.create({ ...off, max_output_tokens: 1, store: false });
    const missing = await errorOf(client.responses.retrieve(notStored.id));
    check(missing instanceof OpenAI.NotFoundError, 'store: false is not retrievable');
    const del = await request(d.base, 'DELETE', '/v1/responses/' + plain.id);
    check(del.status === 200 && del.json.deleted === true && del.json.id === plain.id && del.json.object === 'response.deleted',
        'DELETE /v1/responses/{id}', del.text);
    check((await errorOf(client.responses.retrieve(plain.id))) instanceof OpenAI.NotFoundError, 'deleted response: 404');
    const gone = await errorOf(client.responses.create({ ...off, previous_response_id: plain.id }));
    check(gone instanceof OpenAI.NotFoundError && gone.param === 'previous_response_id', 'unknown previous_response_id: 404',
        gone && gone.message);

    // Errors in the OpenAI shape.
    const cases = [
        ['unknown model', { ...off, model: 'gpt-9' }, 404, 'model_not_found'],
        ['text.format of an unknown type', { ...off, text: { format: { type: 'yaml' } } }, 400, 'response_format_not_supported'],
        ['image input', { ...off, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] }] }, 400, 'invalid_media_url'],
    ];
    for (const [label, params, status, code] of cases) {
        const e = await errorOf(client.responses.create(params));
        check(e instanceof OpenAI.APIError && e.status === status && e.code === code, `${label}: ${status} ${code}`,
            e && `${e.status} ${e.code} ${e.message}`);
    }

    // POST /v1/responses/input_tokens: the prompt tokens create would use (instructions, history).
    const counted = { model: 'tiny', instructions: 'Answer briefly.', input: 'What is two plus two?' };
    const used = await client.responses.create({ ...counted, max_output_tokens: 1 });
    const it = await request(d.base, 'POST', '/v1/responses/input_tokens', { body: counted });
    check(it.status === 200 && it.json.object === 'response.input_tokens' && it.json.input_tokens === used.usage.input_tokens,
        'input_tokens counts what create uses', it.text + ' vs ' + used.usage.input_tokens);
    const chained = { model: 'tiny', previous_response_id: used.id, input: 'And three?' };
    const withHistory = await request(d.base, 'POST', '/v1/responses/input_tokens', { body: chained });
    const usedChained = await client.responses.create({ ...chained, max_output_tokens: 1 });
    check(withHistory.status === 200 && withHistory.json.input_tokens === usedChained.usage.input_tokens,
        'input_tokens with previous_response_id counts the history too', withHistory.text + ' vs ' + usedChained.usage.input_tokens);
    for (const [label, body, status] of [['unknown model', { model: 'gpt-9', input: 'x' }, 404],
        ['bad input', { input: 5 }, 400], ['unknown previous_response_id', { input: 'x', previous_response_id: 'resp_nope' }, 404]]) {
        const r = await request(d.base, 'POST', '/v1/responses/input_tokens', { body });
        check(r.status === status && r.json && r.json.error, `input_tokens, ${label}: ${status}`, r.text);
    }
    await d.stop();

    // Scripted outputs: reasoning + function_call items, then the call's output continues.
    const script = path.join(TEST_DIR, 'responses.script');
    fs.writeFileSync(script, SCRIPTS.join('\n') + '\n');
    const sd = await start(['--device', 'script:' + script, '--max-concurrency', '1']);
    const sc = sd.client();
    const ask = { model: 'tiny', input: [{ role: 'user', content: 'Weather in Paris?' }], tools: [weatherTool],
        instructions: 'Use tools when useful.' };
    const call = await sc.responses.create(ask);
    const fc = call.output.find((i) => i.type === 'function_call');
    check(call.status === 'completed' && call.output[0].type === 'reasoning' && itemText(call.output[0]) === 'The user wants the weather.',
        'function call: reasoning item first', JSON.stringify(call.output));
    check(fc && fc.name === 'get_weather' && JSON.parse(fc.arguments).city === 'Paris' && /^call_/.test(fc.call_id) && /^fc_/.test(fc.id),
        'function_call item: name, call_id, arguments', JSON.stringify(fc));
    check(call.output.length === 2 && call.instructions === 'Use tools when useful.', 'no stray message item; instructions echoed');
    const answer = await sc.responses.create({ ...ask, input: [...ask.input, ...call.output,
        { type: 'function_call_output', call_id: fc.call_id, output: '{"sky":"sunny"}' }] });
    check(answer.output_text === 'It is sunny in Paris.', 'function_call_output round trip (full input)', JSON.stringify(answer.output));

    const callStream = await streamed(sc, ask);
    const fcTypes = callStream.events.map((e) => e.type).filter((t, i, a) => t !== a[i - 1]);
    check(fcTypes.join(',').includes('response.output_item.added,response.function_call_arguments.delta,' +
        'response.function_call_arguments.done,response.output_item.done,response.completed'), 'function call event sequence',
    fcTypes.join(','));
    const sfc = callStream.final.output.find((i) => i.type === 'function_call');
    check(sfc && sfc.arguments === fc.arguments && sfc.name === fc.name, 'streamed function call equals the created one');
    const followUp = await streamed(sc, { model: 'tiny', tools: [weatherTool], previous_response_id: callStream.final.id,
        input: [{ type: 'function_call_output', call_id: sfc.call_id, output: 'sunny' }] });
    check(followUp.final.output_text === 'It is sunny in Paris.' && followUp.final.status === 'completed',
        'function_call_output round trip via previous_response_id (stream)', JSON.stringify(followUp.final.output));
    await sd.stop();
});
