// ninfer black-box test - coding agents' request shapes replayed against ninferd (scripted
// backend): Claude Code's first /v1/messages (system blocks plus a system message inside
// messages, a server tool, max_tokens 32000, stream) and its tool round; Codex's first
// /v1/responses (instructions plus two developer messages, namespace / web_search / local_shell /
// custom tools, stream) and its tool round. Checks the leading system/developer run merges into
// one system turn, uncallable tools are named in x-ninfer-ignored-tools, and a max_tokens beyond
// the context left is shortened (finish length) unless --strict-max-tokens.
'use strict';
const fs = require('fs');
const path = require('path');
const { main, check, request, TEST_DIR } = require('./harness');

const FIXTURES = path.join(process.env.NINFER_SOURCE_DIR || path.join(__dirname, '../../..'), 'tests/fixtures/agents');
const fixture = (name) => JSON.parse(fs.readFileSync(path.join(FIXTURES, name), 'utf8'));

const CALL_BASH = 'text: Listing.\\n</think>\\n\\n<tool_call>\\n<function=Bash>\\n<parameter=command>\\nls\\n</parameter>\\n</function>\\n</tool_call><|im_end|>';
const CALL_SHELL = 'text: Listing.\\n</think>\\n\\n<tool_call>\\n<function=shell>\\n<parameter=command>\\n["ls"]\\n</parameter>\\n</function>\\n</tool_call><|im_end|>';
const ANSWER = 'text: Done.\\n</think>\\n\\nTwo files: a.txt and b.txt.<|im_end|>';
const LONG = 'text: ' + 'one two three four five six seven eight nine ten '.repeat(8) + '<|im_end|>';
// One script per generation, in request order.
const SCRIPTS = [CALL_BASH, ANSWER, CALL_SHELL, ANSWER, LONG, LONG, LONG];

// SSE text -> [{event, data}] with data parsed.
function events(text) {
    return text.split('\n\n').filter((b) => b.includes('data: ')).map((b) => {
        const ev = (b.match(/^event: (.*)$/m) || [])[1];
        const data = b.slice(b.indexOf('data: ') + 6).trim();
        let json = null;
        try { json = JSON.parse(data); } catch (_) { /* [DONE] */ }
        return { event: ev || (json && json.type), data: json };
    });
}

main('agents', async (start) => {
    const script = path.join(TEST_DIR, 'agents.script');
    fs.writeFileSync(script, SCRIPTS.join('\n') + '\n');
    const d = await start(['--device', 'script:' + script, '--max-concurrency', '1']);

    // --- Claude Code --------------------------------------------------------------------
    const cc = fixture('claude_code_messages.json');
    const first = await request(d.base, 'POST', '/v1/messages?beta=true', { body: cc, headers: { 'anthropic-version': '2023-06-01' } });
    const ccEvents = events(first.text);
    const delta = ccEvents.find((e) => e.event === 'message_delta');
    const toolStart = ccEvents.find((e) => e.event === 'content_block_start' && e.data.content_block.type === 'tool_use');
    check(first.status === 200 && delta && delta.data.delta.stop_reason === 'tool_use' && toolStart &&
        toolStart.data.content_block.name === 'Bash', 'Claude Code first request: 200, streams a Bash tool_use',
        first.status + ' ' + first.text.slice(0, 400));
    check(first.headers['x-ninfer-ignored-tools'] === 'web_search_20250305:web_search',
        'the server tool is dropped and named in x-ninfer-ignored-tools', JSON.stringify(first.headers));
    check(/ignored tools the model cannot call: web_search_20250305:web_search/.test(d.log()), 'and in a log line');
    const input = ccEvents.filter((e) => e.event === 'content_block_delta' && e.data.delta.type === 'input_json_delta')
        .map((e) => e.data.delta.partial_json).join('');
    const round = { ...cc, messages: [...cc.messages,
        { role: 'assistant', content: [{ type: 'tool_use', id: toolStart ? toolStart.data.content_block.id : 'x', name: 'Bash', input: JSON.parse(input || '{}') }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: toolStart ? toolStart.data.content_block.id : 'x', content: 'a.txt\nb.txt' }] }] };
    const second = events((await request(d.base, 'POST', '/v1/messages?beta=true', { body: round })).text);
    const end = second.find((e) => e.event === 'message_delta');
    const text = second.filter((e) => e.event === 'content_block_delta' && e.data.delta.type === 'text_delta').map((e) => e.data.delta.text).join('');
    check(end && end.data.delta.stop_reason === 'end_turn' && text === 'Two files: a.txt and b.txt.', 'Claude Code tool round: end_turn with the text',
        JSON.stringify(second.slice(-3)));
    // The system field and the system message merge into the one system turn: same prompt as one system text.
    const count = async (body) => (await request(d.base, 'POST', '/v1/messages/count_tokens', { body })).json;
    const split = await count({ model: 'm', system: 'Rules A.', messages: [{ role: 'system', content: 'Rules B.' }, { role: 'user', content: 'hi' }] });
    const merged = await count({ model: 'm', system: 'Rules A.\n\nRules B.', messages: [{ role: 'user', content: 'hi' }] });
    check(split && merged && split.input_tokens === merged.input_tokens, 'a system message in messages merges with the system field',
        JSON.stringify([split, merged]));
    const robot = await request(d.base, 'POST', '/v1/messages', { body: { model: 'm', max_tokens: 5, messages: [{ role: 'robot', content: 'x' }] } });
    check(robot.status === 400, 'an unknown role is still a 400', robot.text);

    // --- Codex ---------------------------------------------------------------------------
    // Codex names the model its config sets (`model = "<id>"`): the served one, which OpenAI routes check.
    const served = (await request(d.base, 'GET', '/v1/models')).json.data[0].id;
    const cx = { ...fixture('codex_responses.json'), model: served };
    const cxFirst = await request(d.base, 'POST', '/v1/responses', { body: cx });
    const done = events(cxFirst.text).find((e) => e.event === 'response.completed');
    const call = done && done.data.response.output.find((o) => o.type === 'function_call');
    check(cxFirst.status === 200 && call && call.name === 'shell' && JSON.parse(call.arguments).command[0] === 'ls',
        'Codex first request: 200, streams a shell function_call', cxFirst.status + ' ' + cxFirst.text.slice(0, 400));
    check(cxFirst.headers['x-ninfer-ignored-tools'] === 'web_search, local_shell, custom:apply_patch',
        'web_search, local_shell and the custom tool are named in x-ninfer-ignored-tools', JSON.stringify(cxFirst.headers));
    const cxRound = { ...cx, input: [...cx.input, { type: 'function_call', call_id: call ? call.call_id : 'c', name: 'shell', arguments: call ? call.arguments : '{}' },
        { type: 'function_call_output', call_id: call ? call.call_id : 'c', output: 'a.txt\nb.txt' }] };
    const cxDone = events((await request(d.base, 'POST', '/v1/responses', { body: cxRound })).text).find((e) => e.event === 'response.completed');
    const message = cxDone && cxDone.data.response.output.find((o) => o.type === 'message');
    check(message && message.content[0].text === 'Two files: a.txt and b.txt.', 'Codex tool round: the answer message',
        JSON.stringify(cxDone && cxDone.data.response.output));
    const usage = async (body) => {
        const r = await request(d.base, 'POST', '/v1/responses', { body: { ...body, stream: false, max_output_tokens: 1 } });
        return r.json && r.json.usage ? r.json.usage.input_tokens : r.text;
    };
    const dev = (t) => ({ type: 'message', role: 'developer', content: [{ type: 'input_text', text: t }] });
    const u = { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hi' }] };
    const a = await usage({ instructions: 'I.', input: [dev('D1.'), dev('D2.'), u] });
    const b = await usage({ instructions: 'I.\n\nD1.\n\nD2.', input: [u] });
    check(typeof a === 'number' && a === b, 'instructions and two developer messages merge into one system turn', JSON.stringify([a, b]));

    // --- max_tokens beyond the context left --------------------------------------------
    const prompt = 'word '.repeat(1990);
    const long = await request(d.base, 'POST', '/v1/chat/completions', { body: { messages: [{ role: 'user', content: prompt }], max_tokens: 100000 } });
    const lu = long.json && long.json.usage;
    check(long.status === 200 && long.json.choices[0].finish_reason === 'length' && lu && lu.prompt_tokens + lu.completion_tokens === 2048,
        'max_tokens beyond the context is shortened to what is left, finish length', long.text.slice(0, 300));
    await d.stop();
    const strict = await start(['--device', 'script:' + script, '--strict-max-tokens']);
    const rejected = await request(strict.base, 'POST', '/v1/chat/completions', { body: { messages: [{ role: 'user', content: 'hi' }], max_tokens: 100000 } });
    check(rejected.status === 400 && rejected.json.error.code === 'context_length_exceeded', '--strict-max-tokens rejects it', rejected.text);
});
