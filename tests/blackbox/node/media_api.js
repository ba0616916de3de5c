// ninfer black-box test - images and video (issue 31) through the official `openai` and
// `@anthropic-ai/sdk` clients: a towerless artifact refuses media (400) and says so in /props and
// /v1/models; a synthetic vision artifact decodes a base64 PNG (Chat, Responses, Anthropic) and a
// short MP4, counts one prompt token per merged vision token (count_tokens; usage when the engine
// runs the tower, else a 501 naming it); bad media (truncated PNG, a 30000x30000 header, a zip
// named .mp4, an hour-long video, 17 images, remote URLs, file:// outside the allowed directory)
// are each a 400 and the next request is served; without FFmpeg (NINFER_FFMPEG_DIR pointing at an
// empty directory) media is a 501 naming the library and text is served; `ninferctl run
// --messages` takes the same image part.
'use strict';
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const Anthropic = require('@anthropic-ai/sdk');
const { main, check, request, TEST_DIR } = require('./harness');

const FIXTURES = path.join(process.env.NINFER_SOURCE_DIR, 'tests/fixtures/media');
const fixture = (name) => fs.readFileSync(path.join(FIXTURES, name));
const dataUrl = (type, bytes) => `data:${type};base64,${Buffer.from(bytes).toString('base64')}`;
const PNG = dataUrl('image/png', fixture('grad.png'));
const MP4 = dataUrl('video/mp4', fixture('clip.mp4'));

async function errorOf(promise) {
    try { await promise; } catch (e) { return e; }
    return null;
}

// A 30000x30000 PNG: signature and IHDR only.
function hugePngHeader() {
    const b = Buffer.alloc(33);
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]).copy(b);
    b.writeUInt32BE(30000, 16);
    b.writeUInt32BE(30000, 20);
    b[24] = 8; b[25] = 2;
    return b;
}

const imagePart = (url) => ({ type: 'image_url', image_url: { url } });
const chatWith = (parts) => ({ model: 'tiny', max_tokens: 2, temperature: 0, messages: [{ role: 'user', content: parts }] });

main('media_api', async (start) => {
    // --- a towerless artifact: media refused, capabilities say so -----------------------------
    const plain = await start();
    const props = (await request(plain.base, 'GET', '/props')).json;
    check(props.modalities && props.modalities.vision === false, '/props: no vision without a tower', JSON.stringify(props.modalities));
    const models = await plain.client().models.list();
    check(JSON.stringify(models.data[0].modalities) === '["text"]', '/v1/models: text only', JSON.stringify(models.data[0]));
    let e = await errorOf(plain.client().chat.completions.create(chatWith([imagePart(PNG), { type: 'text', text: 'What is it?' }])));
    check(e && e.status === 400 && e.code === 'modality_not_supported', 'towerless: image_url is 400 modality_not_supported',
        e && JSON.stringify(e.error));
    const anthropicPlain = new Anthropic({ baseURL: plain.base, apiKey: 'none', maxRetries: 0 });
    e = await errorOf(anthropicPlain.messages.create({ model: 'tiny', max_tokens: 2, messages: [{ role: 'user', content: [
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: fixture('grad.png').toString('base64') } }] }] }));
    check(e && e.status === 400 && /no images or video/.test(e.message), 'towerless: Anthropic image block is 400', e && e.message);
    await plain.stop();

    // --- a synthetic vision artifact ------------------------------------------------------------
    const ctl = path.join(path.dirname(process.env.NINFERD), '../ctl/ninferctl');
    const visDir = path.join(TEST_DIR, 'vis');
    fs.mkdirSync(visDir, { recursive: true });
    const towerless = process.env.NINFER_TINY_ARTIFACT;
    process.env.NINFER_TINY_ARTIFACT = path.join(visDir, 'tiny.ninfer'); // served as "tiny" like the plain one
    execFileSync(ctl, ['convert', '--synthetic', 'tiny', process.env.NINFER_TINY_ARTIFACT, '--components', 'text,vision'],
        { stdio: ['ignore', 'ignore', 'inherit'] });
    const allowed = path.join(TEST_DIR, 'allowed');
    fs.mkdirSync(allowed, { recursive: true });
    fs.copyFileSync(path.join(FIXTURES, 'grad.png'), path.join(allowed, 'grad.png'));
    const d = await start(['--allowed-local-media-path', allowed]);
    const client = d.client();
    const anthropic = new Anthropic({ baseURL: d.base, apiKey: 'none', maxRetries: 0 });
    const vprops = (await request(d.base, 'GET', '/props')).json;
    check(vprops.modalities.vision === true && vprops.modalities.video === true, '/props: vision artifact takes images and video');
    const vmodels = await client.models.list();
    check(JSON.stringify(vmodels.data[0].modalities) === '["text","image","video"]', '/v1/models: text, image, video',
        JSON.stringify(vmodels.data[0]));

    // 64x64 PNG under the artifact's bounds (65536..16777216 px) -> 256x256 -> 16x16 patches ->
    // 64 merged tokens; the placeholder adds <|vision_start|> and <|vision_end|>.
    const imageBlock = { type: 'image', source: { type: 'base64', media_type: 'image/png', data: fixture('grad.png').toString('base64') } };
    const textBlock = { type: 'text', text: 'Describe the picture.' };
    const withImage = await anthropic.messages.countTokens({ model: 'tiny', messages: [{ role: 'user', content: [imageBlock, textBlock] }] });
    const textOnly = await anthropic.messages.countTokens({ model: 'tiny', messages: [{ role: 'user', content: [textBlock] }] });
    check(withImage.input_tokens - textOnly.input_tokens === 66, 'count_tokens: the image takes 64 pads + 2 markers',
        `${withImage.input_tokens} - ${textOnly.input_tokens}`);

    // The engine runs the tower (200, usage counts the expansion) or says it cannot (501).
    const textReply = await client.chat.completions.create(chatWith([{ type: 'text', text: 'Describe the picture.' }]));
    const P0 = textReply.usage.prompt_tokens;
    let encoded = 0; // requests whose media went through the tower
    async function expectServed(what, promise, delta) {
        const r = await promise.then((v) => ({ v }), (err) => ({ err }));
        if (!r.err) encoded += 1;
        if (r.err) {
            check(r.err.status === 501 && /vision tower/.test(r.err.message), `${what}: 501, the engine has no vision tower yet`,
                `${r.err.status} ${r.err.message}`);
        } else {
            check(r.v.usage.prompt_tokens === P0 + delta, `${what}: usage.prompt_tokens counts the expansion`,
                `${r.v.usage.prompt_tokens} vs ${P0} + ${delta}`);
        }
    }
    await expectServed('chat image_url', client.chat.completions.create(chatWith([imagePart(PNG), { type: 'text', text: 'Describe the picture.' }])), 66);
    await expectServed('chat file:// image', client.chat.completions.create(chatWith([imagePart('file://' + path.join(allowed, 'grad.png')),
        { type: 'text', text: 'Describe the picture.' }])), 66);
    // clip.mp4: 20 frames at 10 fps -> frames 0, 6, 13, 19 -> 2 temporal patches of 64x64 (2x2 merged
    // tokens each), each "<t seconds>" + start + 4 pads + end; t = 0.3 and 1.6.
    const stamp = async (t) => (await request(d.base, 'POST', '/tokenize', { body: { content: `<${t} seconds>` } })).json.tokens.length;
    const videoDelta = (await stamp('0.3')) + (await stamp('1.6')) + 2 * 6;
    await expectServed('chat video_url', client.chat.completions.create(chatWith([{ type: 'video_url', video_url: { url: MP4 } },
        { type: 'text', text: 'Describe the picture.' }])), videoDelta);
    const resp = await client.responses.create({ model: 'tiny', max_output_tokens: 2, input: [{ role: 'user', content: [
        { type: 'input_image', image_url: PNG }, { type: 'input_text', text: 'Describe the picture.' }] }] })
        .then((v) => ({ v }), (err) => ({ err }));
    check(resp.v ? resp.v.usage.input_tokens > P0 : resp.err.status === 501, 'Responses input_image decoded',
        resp.err ? `${resp.err.status} ${resp.err.message}` : '');
    if (resp.v) encoded += 1;

    // /metrics counts the items decoded on the media pool (count_tokens decodes too: 5 in all) and
    // those the tower encoded, with their times; a request whose image's rows a cached prefix holds
    // (the same pixels, by digest) does not run the tower again, so encoded <= served.
    const metricsText = (await request(d.base, 'GET', '/metrics')).text;
    const metric = (name) => Number((metricsText.match(new RegExp(`^${name} (\\S+)$`, 'm')) || [])[1]);
    check(metric('ninfer_media_items_decoded_total') === 5 && metric('ninfer_media_decode_seconds_total') > 0,
        '/metrics: 5 media items decoded, their time counted',
        `${metric('ninfer_media_items_decoded_total')} ${metric('ninfer_media_decode_seconds_total')}`);
    const towerRuns = metric('ninfer_vision_items_encoded_total');
    check(encoded === 0 ? towerRuns === 0 : towerRuns >= 2 && towerRuns <= encoded && metric('ninfer_vision_encode_seconds_total') > 0,
        '/metrics: the image and the video through the tower, their time counted', `${towerRuns} of ${encoded} served`);

    // --- ninferctl run --messages takes the same shapes (the tower runs on the CPU) ----------------
    const messagesFile = path.join(TEST_DIR, 'messages.json');
    fs.writeFileSync(messagesFile, JSON.stringify({ messages: [{ role: 'user', content: [
        { type: 'image_url', image_url: { url: 'file://' + path.join(allowed, 'grad.png') } },
        { type: 'text', text: 'Describe the picture.' }] }] }));
    const runOut = require('child_process').spawnSync(ctl, ['run', process.env.NINFER_TINY_ARTIFACT, '--messages', messagesFile,
        '--max-new', '2', '--greedy', '--print-token-ids'], { encoding: 'utf8' });
    const textRun = require('child_process').spawnSync(ctl, ['run', process.env.NINFER_TINY_ARTIFACT, '--prompt', 'Describe the picture.',
        '--max-new', '2', '--greedy', '--print-token-ids'], { encoding: 'utf8' });
    const prefillOf = (r) => Number(((r.stderr || '').match(/prefill: (\d+) tokens/) || [])[1]);
    check(runOut.status === 0 && /vision: 1 item\(s\) through the tower/.test(runOut.stderr) &&
        prefillOf(runOut) === prefillOf(textRun) + 66, 'ninferctl run --messages: the image through the tower, 66 more prompt tokens',
        `${runOut.status} ${runOut.stderr} | ${textRun.stderr}`);

    // --- bad media: each a clear 400, the next request served ------------------------------------
    const png = fixture('grad.png');
    const zip = Buffer.concat([Buffer.from('PK\x03\x04'), Buffer.alloc(2000, 0x5a)]);
    const seventeen = Array.from({ length: 17 }, () => imagePart(PNG));
    const bad = [
        ['truncated PNG', [imagePart(dataUrl('image/png', png.subarray(0, png.length >> 1)))], /media item 1: media: /],
        ['30000x30000 PNG header', [imagePart(dataUrl('image/png', hugePngHeader()))], /30000x30000 picture exceeds/],
        ['zip named .mp4', [{ type: 'video_url', video_url: { url: dataUrl('video/mp4', zip) } }], /not a supported image or video/],
        ['hour-long video', [{ type: 'video_url', video_url: { url: dataUrl('video/mp4', fixture('hour.mp4')) } }], /lasts 3600 s/],
        ['17 images', seventeen, /at most 16 a request/],
        ['remote URL', [imagePart('https://example.com/cat.png')], /not fetched by this server/],
        ['file:// outside the allowed directory', [imagePart('file://' + path.join(FIXTURES, 'grad.png'))], /outside the allowed media directory/],
        ['not base64', [imagePart('data:image/png;base64,@@@@')], /not base64/],
    ];
    for (const [what, parts, pattern] of bad) {
        const err = await errorOf(client.chat.completions.create(chatWith(parts)));
        check(err && err.status === 400 && pattern.test(err.message), `${what}: 400`, err ? `${err.status} ${err.message}` : 'served');
        const next = await client.chat.completions.create(chatWith([{ type: 'text', text: 'Still there?' }]));
        check(next.choices.length === 1 && next.usage.completion_tokens > 0, `${what}: the next request is served`);
    }
    await d.stop();

    // --- no FFmpeg: text served, media a 501 naming the library ----------------------------------
    const empty = path.join(TEST_DIR, 'no-ffmpeg');
    fs.mkdirSync(empty, { recursive: true });
    const noff = await start([], { env: { NINFER_FFMPEG_DIR: empty } });
    const ok = await noff.client().chat.completions.create(chatWith([{ type: 'text', text: 'Hello' }]));
    check(ok.choices.length === 1, 'without FFmpeg: text is served');
    e = await errorOf(noff.client().chat.completions.create(chatWith([imagePart(PNG)])));
    check(e && e.status === 501 && e.code === 'media_decoding_unavailable' && /libavutil\.so\.57/.test(e.message),
        'without FFmpeg: media is 501 naming libavutil', e && `${e.status} ${e.message}`);
    await noff.stop();
    process.env.NINFER_TINY_ARTIFACT = towerless;
});
