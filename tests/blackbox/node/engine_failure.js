// ninfer black-box test - the engine's failure path end to end: the scripted backend
// (--device script:FILE) fails the device on its fourth token; the request running then gets
// 503 engine_unavailable with a message saying the engine failed, /health answers 503 and a
// later request is refused 503 as well, while the daemon keeps answering HTTP.
'use strict';
const fs = require('fs');
const path = require('path');
const { main, check, request, user, TEST_DIR } = require('./harness');

main('engine_failure', async (start) => {
    const script = path.join(TEST_DIR, 'failing.txt');
    fs.writeFileSync(script, '# -1 = the device fails when this token is produced\nids: 10 11 12 -1\n');
    const d = await start(['--device', `script:${script}`]);
    const body = { model: 'tiny', messages: user('hello'), max_tokens: 50 };
    const post = () => request(d.base, 'POST', '/v1/chat/completions', { body, headers: { 'content-type': 'application/json' } });
    const r = await post();
    check(r.status === 503, 'the running request gets 503', `${r.status} ${r.text}`);
    const err = (r.json && r.json.error) || {};
    check(err.code === 'engine_unavailable' && /engine failed/.test(err.message) && !/shutting down/.test(err.message),
        'the error says the engine failed', r.text);
    check((await request(d.base, 'GET', '/health')).status === 503, '/health is 503 after the failure');
    const later = await post();
    check(later.status === 503, 'a later request is refused 503', `${later.status} ${later.text}`);
    check(/engine, failed: backend: scripted device failure/.test(d.log()), 'the log names the failure', d.log().slice(-400));
    await d.stop();
});
