import './vscode-stub';
import { reset, state } from './vscode-stub';
import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { openExplorer, openUrl, UrlOpener } from '../../src/urls';
import * as api from '../../src/vscodeapi';

const urlApi = { asExternalUri: api.asExternalUri, openExternal: api.openExternal };

describe('opening URLs', () => {
  beforeEach(reset);

  it('opens what asExternalUri maps the URL to', async () => {
    state.externalUris.set('http://127.0.0.1:8123/report.html', 'https://box.example/proxy/8123/report.html');
    const opened = await openUrl('http://127.0.0.1:8123/report.html', urlApi);
    assert.equal(opened, 'https://box.example/proxy/8123/report.html');
    assert.deepEqual(state.opened, ['https://box.example/proxy/8123/report.html']);
  });
});

describe('Neuron Explorer', () => {
  beforeEach(reset);

  it('forwards the UI and the API, and is content when both keep their ports', async () => {
    const mapped: string[] = [];
    const recording = {
      asExternalUri: async (url: string) => (mapped.push(url), url),
      openExternal: api.openExternal,
    };
    const opened = await openExplorer('http://localhost:3001/profile/abc', undefined, recording);
    assert.deepEqual(mapped, ['http://localhost:3002/', 'http://localhost:3001/profile/abc']);
    assert.deepEqual(opened.problems, []);
    assert.deepEqual(state.opened, ['http://localhost:3001/profile/abc']);
  });

  it('says so when a port lands on another number', async () => {
    state.externalUris.set('http://localhost:3002/', 'http://localhost:53002/');
    const opened = await openExplorer('http://localhost:3001/', undefined, urlApi);
    assert.equal(opened.problems.length, 1);
    assert.match(opened.problems[0], /API port 3002 reaches your browser as http:\/\/localhost:53002\//);
  });

  it('notices a path-based proxy too (code-server maps ports to /proxy/N/)', async () => {
    state.externalUris.set('http://localhost:3001/', 'https://ide.example/proxy/3001/');
    state.externalUris.set('http://localhost:4000/', 'https://ide.example/proxy/4000/');
    const opened = await openExplorer('http://localhost:3001/', 'http://localhost:4000/', urlApi);
    assert.equal(opened.problems.length, 2);
    assert.deepEqual(state.opened, ['https://ide.example/proxy/3001/']);
  });
});

describe('UrlOpener', () => {
  beforeEach(reset);

  it('opens showDocument URLs at once outside an explorer request', async () => {
    const opener = new UrlOpener(urlApi);
    assert.equal(await opener.showDocument('http://127.0.0.1:9000/'), true);
    assert.deepEqual(state.opened, ['http://127.0.0.1:9000/']);
  });

  it('holds the explorer URL the server shows during its request until both ports are forwarded', async () => {
    const opener = new UrlOpener(urlApi);
    const opened = await opener.explorer(async () => {
      await opener.showDocument('http://localhost:3001/p');
      assert.deepEqual(state.opened, [], 'not opened before the request returned');
      return { cleared: 0 };
    });
    assert.equal(opened?.opened, 'http://localhost:3001/p');
    assert.deepEqual(state.opened, ['http://localhost:3001/p']);
  });

  it('prefers the URLs in the result, and names none when there are none', async () => {
    const opener = new UrlOpener(urlApi);
    const opened = await opener.explorer(async () => ({ url: 'http://localhost:3001/a', apiUrl: 'http://localhost:3002/' }));
    assert.deepEqual(opened?.problems, []);
    assert.equal(await opener.explorer(async () => null), undefined);
  });

  it('lets showDocument open again after a failed explorer request', async () => {
    const opener = new UrlOpener(urlApi);
    await assert.rejects(opener.explorer(async () => Promise.reject(new Error('no tunnel'))));
    await opener.showDocument('http://127.0.0.1:9/');
    assert.deepEqual(state.opened, ['http://127.0.0.1:9/']);
  });
});
