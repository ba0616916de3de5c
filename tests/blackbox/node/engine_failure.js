// ninfer black-box test - the engine's failure path end to end: the scripted backend
// (--device script:FILE) fails the device on its fourth token; the request running then gets
// 503 engine_unavailable with a message saying the engine failed, and the daemon exits with
// status 3 once that answer is written (so systemd's Restart=on-failure starts a fresh process),
// its log naming the failure and why it exits. With --persist-slots the lanes are saved from the
// prefix cache's host checkpoints (the failed device is not read) and the next start restores them.
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
    check(ended.code === 3, 'the daemon exits with status 3 after the failure', JSON.stringify(ended));
    check(/event=engine-failed engine, failed: backend: scripted device failure/.test(d.log()),
        'the catalogued engine-failed line names the failure', d.log().slice(-400));
    check(/exiting with status 3 so that the service manager restarts ninferd/.test(d.log()), 'the log says why it exits',
        d.log().slice(-400));
    await d.stop();

    // --persist-slots: a reply that finished left its checkpoint in host memory; then the device
    // fails on another lane. The lane files come from the checkpoints and the next start reads them.
    const state = fs.mkdtempSync(path.join(TEST_DIR, 'state-'));
    const scripts = path.join(TEST_DIR, 'one_ok_one_failing.txt');
    fs.writeFileSync(scripts, 'ids: 10 11 12 13\nids: 10 -1\n');
    const persist = ['--persist-slots', '--state-dir', state, '--max-concurrency', '2'];
    const p = await start(['--device', `script:${scripts}`, ...persist]);
    const post = (b) => request(p.base, 'POST', '/v1/chat/completions', { body: b, headers: { 'content-type': 'application/json' } });
    const ok = await post({ ...body, messages: user('first conversation'), max_tokens: 4 });
    check(ok.status === 200, 'the first reply finishes', `${ok.status} ${ok.text}`);
    const bad = await post({ ...body, messages: user('second conversation, on another lane') });
    check(bad.status === 503, 'the second request meets the device failure', `${bad.status} ${bad.text}`);
    const gone = await Promise.race([p.exited, timeout]);
    check(gone.code === 3, 'the daemon exits with status 3', JSON.stringify(gone));
    const saved = /slots, saved from host checkpoints (\d+) lane\(s\)/.exec(p.log());
    check(saved !== null && Number(saved[1]) >= 1, 'the lanes are saved from the host checkpoints', p.log().slice(-600));
    const files = fs.existsSync(path.join(state, 'lanes')) ? fs.readdirSync(path.join(state, 'lanes')) : [];
    check(files.some((f) => /^lane-\d+\.nslot$/.test(f)), 'lane files are on disk', JSON.stringify(files));
    const again = await start(['--device', `script:${scripts}`, ...persist]);
    await new Promise((resolve) => setTimeout(resolve, 500)); // the restore pass runs before READY
    const restored = /slots, restored (\d+) lane\(s\)/.exec(again.log());
    check(restored !== null && Number(restored[1]) === Number(saved && saved[1]), 'the next start restores them',
        again.log().slice(-600));
    await again.stop();
});
