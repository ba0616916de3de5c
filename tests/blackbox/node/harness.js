// ninfer black-box tests - start the real ninferd on the tiny artifact and talk to it: an OpenAI
// client, raw HTTP helpers, RSS sampling, and a tiny assertion runner that prints one line per check.
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const path = require('path');
const http = require('http');
const OpenAI = require('openai');

const TEST_DIR = process.env.NINFER_TEST_DIR || fs.mkdtempSync('/tmp/ninfer-bb-');

async function startDaemon(args = [], { env = {}, waitReady = true } = {}) {
    const conf = path.join(TEST_DIR, 'empty.conf');
    fs.writeFileSync(conf, '');
    const argv = ['--config', conf, '--artifact', process.env.NINFER_TINY_ARTIFACT, '--host', '127.0.0.1',
        '--port', '0', '--threads', '1', '--max-context', '2048', ...args];
    const proc = spawn(process.env.NINFERD, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
    let log = '';
    const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
    const port = await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('ninferd did not listen:\n' + log)), 60000);
        proc.stderr.on('data', (d) => {
            log += d.toString();
            const m = log.match(/listening on [0-9.]+:(\d+)/);
            if (m) { clearTimeout(timer); resolve(Number(m[1])); }
        });
        exited.then((e) => reject(new Error(`ninferd exited ${JSON.stringify(e)}:\n${log}`)));
    });
    const d = {
        proc, port, base: `http://127.0.0.1:${port}`, exited,
        log: () => log,
        client: (opts = {}) => new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'none', maxRetries: 0, ...opts }),
        async stop(signal = 'SIGTERM') { if (proc.exitCode === null) proc.kill(signal); return exited; },
    };
    if (waitReady) {
        const deadline = Date.now() + 120000;
        while ((await request(d.base, 'GET', '/health')).status !== 200) {
            if (Date.now() > deadline) throw new Error('/health never 200:\n' + log);
            await sleep(20);
        }
    }
    return d;
}

// One HTTP request with Node's http module (no retries, any method/body/headers).
function request(base, method, urlPath, { body, headers = {}, agent } = {}) {
    return new Promise((resolve, reject) => {
        const req = http.request(base + urlPath, { method, headers, agent }, (res) => {
            let data = '';
            res.on('data', (c) => (data += c));
            res.on('end', () => {
                let json = null;
                try { json = JSON.parse(data); } catch (_) { /* not JSON */ }
                resolve({ status: res.statusCode, headers: res.headers, text: data, json });
            });
        });
        req.on('error', reject);
        if (body !== undefined) req.write(typeof body === 'string' ? body : JSON.stringify(body));
        req.end();
    });
}

function rssKiB(pid) {
    const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
    return m ? Number(m[1]) : 0;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let failures = 0;
function check(ok, what, detail = '') {
    console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}${ok || !detail ? '' : ': ' + detail}`);
    if (!ok) failures++;
}

async function main(name, fn) {
    const daemons = [];
    try {
        await fn((...a) => startDaemon(...a).then((d) => (daemons.push(d), d)));
    } catch (e) {
        console.log('FAIL ' + name + ' threw: ' + (e.stack || e));
        for (const d of daemons) console.log('--- daemon log ---\n' + d.log());
        failures++;
    }
    for (const d of daemons) if (d.proc.exitCode === null) d.proc.kill('SIGKILL');
    console.log(failures ? `${name}: ${failures} failure(s)` : `${name}: all checks passed`);
    process.exit(failures ? 1 : 0);
}

const user = (text) => [{ role: 'user', content: text }];

module.exports = { startDaemon, request, rssKiB, sleep, check, main, user, TEST_DIR };
