// ninfer black-box test - the engine's failure path end to end: the scripted backend
// (--device script:FILE) fails the device on its fourth token; the request running then gets
// 503 engine_unavailable with a message saying the engine failed, and the daemon exits with
// status 1 once that answer is written (so systemd's Restart=on-failure starts a fresh process),
// its log naming the failure and why it exits.
'use strict';
const fs = require('fs');
const path = require('path');
const { main, check, request, user, TEST_DIR } = require('./harness');

main('engine_failure', async (start) => {
    const script = path.join(TEST_DIR, 'failing.txt');
    fs.writeFileSync(script, '# -1 = the device fails when this token is produced\nids: 10 11 12 -1\n');
    const d = await start(['--device', `script:${script}`]);
    const body = { model: 'tiny', messages: user('hello'), max_tokens: 50 };
    const r = await request(d.base, 'POST', '/v1/chat/completions', { body, headers: { 'content-type': 'application/json' } });
    check(r.status === 503, 'the running request gets 503', `${r.status} ${r.text}`);
    const err = (r.json && r.json.error) || {};
    check(err.code === 'engine_unavailable' && /engine failed/.test(err.message) && !/shutting down/.test(err.message),
        'the error says the engine failed', r.text);
    const timeout = new Promise((resolve) => setTimeout(() => resolve({ code: 'still running after 10 s' }), 10000));
    const ended = await Promise.race([d.exited, timeout]);
    check(ended.code === 1, 'the daemon exits with status 1 after the failure', JSON.stringify(ended));
    check(/engine, failed: backend: scripted device failure/.test(d.log()), 'the log names the failure', d.log().slice(-400));
    check(/exiting so that the service manager restarts ninferd/.test(d.log()), 'the log says why it exits', d.log().slice(-400));
    await d.stop();
});
