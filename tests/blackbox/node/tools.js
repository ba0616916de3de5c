// ninfer black-box test - tool calls streamed end to end through the SDK, using the test-only
// scripted backend (--device script:FILE) so the "model" writes a known Qwen XML tool call.
'use strict';
const fs = require('fs');
const path = require('path');
const { main, check, user, TEST_DIR } = require('./harness');

const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather by city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] } } }];

main('tools', async (start) => {
    const script = path.join(TEST_DIR, 'script.txt');
    // The prompt opens <think> (thinking on), so the script starts inside the reasoning.
    fs.writeFileSync(script, '# one generation per line, round robin\n' +
        'text: Let me look that up.\\n</think>\\n\\n<tool_call>\\n<function=get_weather>\\n<parameter=city>\\nParis, France\\n' +
        '</parameter>\\n<parameter=days>\\n3\\n</parameter>\\n</function>\\n</tool_call><|im_end|>\n');
    const d = await start(['--device', `script:${script}`]);
    const client = d.client();
    const params = { model: 'tiny', messages: user('Weather in Paris for 3 days?'), tools, max_tokens: 200 };

    const full = await client.chat.completions.create(params);
    const msg = full.choices[0].message;
    check(full.choices[0].finish_reason === 'tool_calls', 'finish_reason tool_calls', full.choices[0].finish_reason);
    check(msg.reasoning_content === 'Let me look that up.', 'reasoning before the call', JSON.stringify(msg.reasoning_content));
    check(msg.content === null || msg.content === '', 'no content beside the call', JSON.stringify(msg.content));
    const call = msg.tool_calls && msg.tool_calls[0];
    check(call && call.type === 'function' && call.function.name === 'get_weather' && /^call_/.test(call.id), 'one get_weather call');
    check(call && JSON.stringify(JSON.parse(call.function.arguments)) === '{"city":"Paris, France","days":3}',
        'arguments typed by the schema', call && call.function.arguments);

    const stream = await client.chat.completions.create({ ...params, stream: true });
    const calls = [];
    let argDeltas = 0;
    let finish = null;
    let reasoning = '';
    for await (const chunk of stream) {
        for (const c of chunk.choices) {
            reasoning += c.delta.reasoning_content || '';
            if (c.finish_reason) finish = c.finish_reason;
            for (const t of c.delta.tool_calls || []) {
                if (!calls[t.index]) calls[t.index] = { id: t.id, name: '', arguments: '' };
                if (t.function && t.function.name) calls[t.index].name += t.function.name;
                if (t.function && t.function.arguments) { calls[t.index].arguments += t.function.arguments; argDeltas++; }
            }
        }
    }
    check(calls.length === 1 && calls[0].name === 'get_weather' && calls[0].id && calls[0].id.startsWith('call_'), 'streamed call id and name');
    check(calls[0] && calls[0].arguments === call.function.arguments, 'streamed arguments equal the non-streamed ones',
        calls[0] && calls[0].arguments);
    check(argDeltas > 1, 'arguments arrive in several deltas as they are parsed', String(argDeltas));
    check(finish === 'tool_calls' && reasoning === 'Let me look that up.', 'streamed finish_reason and reasoning');

    const none = await client.chat.completions.create({ ...params, tool_choice: 'none' });
    check(!none.choices[0].message.tool_calls && none.choices[0].message.content.includes('<tool_call>'),
        'tool_choice none: the XML stays content');
    await d.stop();
});
