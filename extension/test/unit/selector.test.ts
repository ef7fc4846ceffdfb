// The client's document selector as it ships: Python files and the Python cells of Jupyter
// notebooks, the notebook type the server declares in notebookDocumentSync (lsp/notebooks.py;
// tests/lsp/test_e2e_notebook.py checks the server's side of it).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { DOCUMENT_SELECTOR, NOTEBOOK_TYPE } from '../../src/selector';
import { PACKAGE_JSON } from './helpers';

describe('document selector', () => {
  it('takes Python files and the Python cells of Jupyter notebooks', () => {
    assert.deepEqual(DOCUMENT_SELECTOR, [
      { scheme: 'file', language: 'python' },
      { scheme: 'untitled', language: 'python' },
      { notebook: 'jupyter-notebook', language: 'python' },
    ]);
  });

  it('activates the extension when a Jupyter notebook of that type opens', () => {
    assert.ok(PACKAGE_JSON.activationEvents.includes(`onNotebook:${NOTEBOOK_TYPE}`));
  });
});
