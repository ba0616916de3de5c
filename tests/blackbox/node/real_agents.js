// ninfer black-box test - the real coding agents against ninferd: Claude Code (`claude -p`, the
// Anthropic Messages API) and Codex (`codex exec`, the OpenAI Responses API), run non-interactively
// through a logging proxy (agent_proxy.js), offline: every other host they try is refused and named.
//   1. Scripted backend: each agent's first request streams a tool call (Claude's Bash, Codex's
//      exec_command) which the agent runs (`ls` in a scratch directory), and the tool round
//      answers; the agent prints that answer. A --max-context below the first prompt gives the
//      Anthropic wording "prompt is too long: N tokens > M maximum", which Claude Code reads.
//   2. The CPU backend on the tiny random-weight artifact: replies are noise, cut by small output
//      limits, and every request must still be served: 200, well-formed SSE, a terminal event.
// Every request (method, path, status) is printed. Needs $NINFER_AGENTS_BIN with claude and/or
// codex (test_real_agents.sh skips without them).
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');
const { main, check, request, TEST_DIR } = require('./harness');
const { startProxy, checkAnthropicStream, checkResponsesStream } = require('./agent_proxy');

const BIN = process.env.NINFER_AGENTS_BIN;
const has = (name) => fs.existsSync(path.join(BIN, name));
const KEY = 'agents-test-key';
const AGENT_TIMEOUT_MS = 300000;
const ANSWER = 'The files are a.txt and b.txt.';
const CALL = (fn, param, value) => `text: Listing.\\n</think>\\n\\n<tool_call>\\n<function=${fn}>\\n<parameter=${param}>\\n${value}\\n</parameter>\\n</function>\\n</tool_call><|im_end|>`;
const ANSWER_SCRIPT = `text: Done.\\n</think>\\n\\n${ANSWER}<|im_end|>`;

function runAgent(name, args, env, cwd) {
    return new Promise((resolve) => {
        const proc = spawn(path.join(BIN, name), args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
        let stdout = '';
        let stderr = '';
        proc.stdout.on('data', (d) => (stdout += d));
        proc.stderr.on('data', (d) => (stderr += d));
        const timer = setTimeout(() => proc.kill('SIGKILL'), AGENT_TIMEOUT_MS);
        proc.on('exit', (code, signal) => { clearTimeout(timer); resolve({ code, signal, stdout, stderr }); });
    });
}

// A fresh home and work directory (two files to list) per agent run: no state carries over.
function scratch(tag) {
    const dir = fs.mkdtempSync(path.join(TEST_DIR, tag + '-'));
    fs.mkdirSync(path.join(dir, 'home'));
    fs.mkdirSync(path.join(dir, 'work'));
    fs.writeFileSync(path.join(dir, 'work/a.txt'), 'a\n');
    fs.writeFileSync(path.join(dir, 'work/b.txt'), 'b\n');
    return dir;
}

// The environment an offline agent gets: PATH, a scratch HOME, every other host through the proxy
// (which refuses it), and the documented switches for telemetry, update checks and error reports.
function baseEnv(dir, proxy) {
    const via = `http://127.0.0.1:${proxy.port}`;
    return { PATH: process.env.PATH, HOME: path.join(dir, 'home'), LANG: 'C.UTF-8', TERM: 'dumb',
        HTTPS_PROXY: via, HTTP_PROXY: via, https_proxy: via, http_proxy: via, NO_PROXY: '127.0.0.1,localhost', no_proxy: '127.0.0.1,localhost' };
}

function claudeEnv(dir, proxy, model, extra = {}) {
    return { ...baseEnv(dir, proxy), ANTHROPIC_BASE_URL: `http://127.0.0.1:${proxy.port}`, ANTHROPIC_AUTH_TOKEN: KEY,
        ANTHROPIC_MODEL: model, ANTHROPIC_DEFAULT_HAIKU_MODEL: model, ANTHROPIC_SMALL_FAST_MODEL: model,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', DISABLE_AUTOUPDATER: '1', DISABLE_TELEMETRY: '1',
        DISABLE_ERROR_REPORTING: '1', ...extra };
}

// Codex reads $CODEX_HOME/config.toml: a provider speaking the Responses API at ninferd, its
// context window, and no update check, analytics, telemetry export or plugin sync.
function codexEnv(dir, proxy, model, maxContext) {
    const home = path.join(dir, 'home');
    fs.writeFileSync(path.join(home, 'config.toml'), [
        `model = "${model}"`, 'model_provider = "ninfer"', `model_context_window = ${maxContext}`,
        'check_for_update_on_startup = false', '', '[model_providers.ninfer]', 'name = "ninfer"',
        `base_url = "http://127.0.0.1:${proxy.port}/v1"`, 'wire_api = "responses"', 'env_key = "NINFER_API_KEY"',
        '', '[analytics]', 'enabled = false', '', '[otel]', 'exporter = "none"', '',
        // The curated plugin sync reaches github.com and chatgpt.com at every start.
        '[features]', 'plugins = false', 'remote_plugin = false', 'apps = false', ''].join('\n'));
    return { ...baseEnv(dir, proxy), CODEX_HOME: home, NINFER_API_KEY: KEY };
}

// Prints every exchange and checks each: 2xx and a well-formed stream (or JSON body).
function checkExchanges(who, proxy) {
    let ok = proxy.exchanges.length > 0;
    for (const x of proxy.exchanges) {
        let verdict = 'ok';
        try {
            if (x.status < 200 || x.status > 299) throw new Error(x.responseText.slice(0, 300));
            const sse = /text\/event-stream/.test(x.responseHeaders['content-type'] || '');
            if (sse && who === 'claude') verdict = 'sse ok, stop_reason ' + checkAnthropicStream(x.responseText).stop_reason;
            else if (sse) verdict = 'sse ok, ' + checkResponsesStream(x.responseText).status;
            else JSON.parse(x.responseText);
        } catch (e) {
            verdict = 'BAD: ' + e.message;
            ok = false;
        }
        console.log(`  ${who}: ${x.method} ${x.url} -> ${x.status} (${verdict})`);
    }
    check(ok, `${who}: every request is served (${proxy.exchanges.length} requests)`);
    check(proxy.outbound.length === 0, `${who}: no connection to another host`, proxy.outbound.join(', '));
}

// The id ninferd serves (Claude Code sends any name; Codex's must match, as for every OpenAI route).
async function servedModel(d) {
    return (await request(d.base, 'GET', '/v1/models', { headers: { authorization: 'Bearer ' + KEY } })).json.data[0].id;
}

const bodies = (proxy) => proxy.exchanges.map((x) => { try { return JSON.parse(x.requestBody); } catch (_) { return {}; } });

async function scriptedDaemon(start, tag, scripts, extra = []) {
    const file = path.join(TEST_DIR, tag + '.script');
    fs.writeFileSync(file, scripts.join('\n') + '\n');
    return start(['--device', 'script:' + file, '--max-context', '65536', '--api-key', KEY, ...extra]);
}

async function claudeScripted(start) {
    const d = await scriptedDaemon(start, 'claude', [CALL('Bash', 'command', 'ls'), ANSWER_SCRIPT]);
    const model = await servedModel(d);
    const proxy = await startProxy(d.port);
    const dir = scratch('claude');
    const r = await runAgent('claude', ['-p', 'List the files here.', '--max-turns', '3', '--allowedTools', 'Bash',
        '--output-format', 'json'], claudeEnv(dir, proxy, model), path.join(dir, 'work'));
    checkExchanges('claude', proxy);
    let result = null;
    try { result = JSON.parse(r.stdout); } catch (_) { /* checked below */ }
    check(r.code === 0 && result && result.result === ANSWER, 'claude: runs Bash (ls) and prints the answer of the tool round',
        `exit ${r.code} ${r.signal || ''}\n${r.stdout.slice(-800)}\n${r.stderr.slice(-800)}`);
    const round = bodies(proxy).find((b) => (b.messages || []).some((m) => Array.isArray(m.content) &&
        m.content.some((c) => c.type === 'tool_result' && /a\.txt/.test(JSON.stringify(c.content)) && /b\.txt/.test(JSON.stringify(c.content)))));
    check(round !== undefined, 'claude: the tool round carries the listing as a tool_result');
    await proxy.close();
    await d.stop();

    // The first prompt (about 12K tokens with Claude Code's tools) against a 4096-token server.
    const small = await scriptedDaemon(start, 'claude-small', [ANSWER_SCRIPT], ['--max-context', '4096']);
    const p2 = await startProxy(small.port);
    const dir2 = scratch('claude-small');
    const r2 = await runAgent('claude', ['-p', 'List the files here.', '--max-turns', '2'], claudeEnv(dir2, p2, model), path.join(dir2, 'work'));
    const refused = p2.exchanges.find((x) => x.status === 400);
    check(refused && /prompt is too long: \d+ tokens > 4096 maximum/.test(refused.responseText),
        'claude: a prompt beyond --max-context is refused in the Anthropic wording', refused ? refused.responseText : 'no 400');
    check(/4096/.test(r2.stdout + r2.stderr), 'claude: and Claude Code reports the limit it read from it', (r2.stdout + r2.stderr).slice(-600));
    await p2.close();
}

async function codexScripted(start) {
    const d = await scriptedDaemon(start, 'codex', [CALL('exec_command', 'cmd', 'ls'), ANSWER_SCRIPT]);
    const model = await servedModel(d);
    const proxy = await startProxy(d.port);
    const dir = scratch('codex');
    const r = await runAgent('codex', ['exec', '--skip-git-repo-check', '-s', 'danger-full-access', 'List the files here.'],
        codexEnv(dir, proxy, model, 65536), path.join(dir, 'work'));
    checkExchanges('codex', proxy);
    check(r.code === 0 && r.stdout.trim().endsWith(ANSWER), 'codex: runs exec_command (ls) and prints the answer of the tool round',
        `exit ${r.code} ${r.signal || ''}\n${r.stdout.slice(-800)}\n${r.stderr.slice(-800)}`);
    const round = bodies(proxy).find((b) => (b.input || []).some((i) => i.type === 'function_call_output' &&
        /a\.txt/.test(JSON.stringify(i.output)) && /b\.txt/.test(JSON.stringify(i.output))));
    check(round !== undefined, 'codex: the tool round carries the listing as a function_call_output');
    await proxy.close();
}

// The CPU backend on random weights: replies are noise, so outputs are kept short and tools are
// not allowed to run (Claude: none allowed in -p; Codex: a read-only sandbox).
async function cpuNoise(start) {
    const d = await start(['--device', 'cpu', '--max-context', '32768', '--default-max-tokens', '16', '--api-key', KEY]);
    const model = await servedModel(d);
    if (has('claude')) {
        const proxy = await startProxy(d.port);
        const dir = scratch('claude-cpu');
        const r = await runAgent('claude', ['-p', 'Say hello.', '--max-turns', '1'],
            claudeEnv(dir, proxy, model, { CLAUDE_CODE_MAX_OUTPUT_TOKENS: '16' }), path.join(dir, 'work'));
        check(r.signal === null, 'claude on the CPU backend: ends by itself', r.stderr.slice(-400));
        checkExchanges('claude', proxy);
        await proxy.close();
    }
    if (has('codex')) {
        const proxy = await startProxy(d.port);
        const dir = scratch('codex-cpu');
        const r = await runAgent('codex', ['exec', '--skip-git-repo-check', '-s', 'read-only', 'Say hello.'],
            codexEnv(dir, proxy, model, 32768), path.join(dir, 'work'));
        check(r.signal === null, 'codex on the CPU backend: ends by itself', r.stderr.slice(-400));
        checkExchanges('codex', proxy);
        await proxy.close();
    }
    const health = await request(d.base, 'GET', '/health');
    check(health.status === 200, 'ninferd is healthy after the agents');
}

main('real_agents', async (start) => {
    for (const name of ['claude', 'codex']) if (!has(name)) console.log(`skip ${name}: not in ${BIN}`);
    if (has('claude')) await claudeScripted(start);
    if (has('codex')) await codexScripted(start);
    await cpuNoise(start);
});
