// ninfer black-box test - mutated HTTP requests (bytes flipped, inserted, deleted; seeded) against
// the real daemon: every answer is a well-formed HTTP response or a clean close, error bodies are
// valid JSON, and the daemon keeps serving (/health 200) afterwards.
'use strict';
const net = require('net');
const { main, check, request } = require('./harness');

const seeds = [
    'GET /health HTTP/1.1\r\n\r\n',
    'POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 42\r\n\r\n{"messages":[{"role":"user","content":"x"}]}',
    'POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{"mes\r\n0\r\n\r\n',
    'GET /v1/models/tiny HTTP/1.1\r\n\r\n',
];

let state = 12345; // xorshift: the same mutations every run
const rand = (n) => { state ^= state << 13; state ^= state >>> 17; state ^= state << 5; return (state >>> 0) % n; };

function mutate(text) {
    const b = [...Buffer.from(text)];
    for (let k = rand(7); k > 0; k--) {
        const p = rand(b.length + 1);
        const op = rand(3);
        if (op === 0 && b.length) b[p % b.length] = rand(256);
        else if (op === 1) b.splice(p, 0, ...Array.from({ length: 1 + rand(8) }, () => rand(256)));
        else b.splice(p, 1 + rand(8));
    }
    return Buffer.from(b);
}

function exchange(port, bytes) {
    return new Promise((resolve) => {
        const s = net.connect(port, '127.0.0.1');
        let data = Buffer.alloc(0);
        s.setTimeout(3000, () => s.destroy());
        s.on('data', (d) => (data = Buffer.concat([data, d])));
        s.on('close', () => resolve(data.toString('latin1')));
        s.on('error', () => {});
        s.end(bytes);
    });
}

main('http_robustness', async (start) => {
    const d = await start(['--max-body-mib', '1', '--max-concurrency', '1']);
    const counts = {};
    let malformed = 0;
    for (let i = 0; i < 1000; i++) {
        const reply = await exchange(d.port, mutate(seeds[rand(seeds.length)]));
        const m = reply.match(/^HTTP\/1\.1 (\d{3}) /);
        const key = m ? m[1] : reply.length ? 'garbage' : 'closed';
        counts[key] = (counts[key] || 0) + 1;
        if (m && Number(m[1]) >= 400) {
            // Leftover bytes may form a second (pipelined) request: read the first body by its length.
            const length = Number((reply.match(/\r\nContent-Length: (\d+)\r\n/) || [0, 0])[1]);
            const start = reply.indexOf('\r\n\r\n') + 4;
            const body = Buffer.from(reply.slice(start), 'latin1').subarray(0, length).toString('utf8');
            try { JSON.parse(body); } catch (_) { if (++malformed <= 2) console.log('not JSON: ' + JSON.stringify(reply.slice(0, 400))); }
        }
    }
    console.log('figures: answers by status ' + JSON.stringify(counts));
    check(!counts.garbage && !counts['500'], 'every answer is a well-formed HTTP response, never 500', JSON.stringify(counts));
    check(malformed === 0, 'every error body is valid JSON', String(malformed));
    check((await request(d.base, 'GET', '/health')).status === 200 && d.proc.exitCode === null, 'the daemon still serves');
    check((await d.stop()).code === 0, 'exit 0');
});
