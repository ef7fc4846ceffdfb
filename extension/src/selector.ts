// Which documents the language client hands the server. Python files, and the Python cells of
// Jupyter notebooks: the server declares notebookDocumentSync for `jupyter-notebook` (its
// lsp/notebooks.py), so vscode-languageclient syncs a notebook's cells with
// notebookDocument/didOpen and didChange, and sends the requests (lenses, inlay hints, hovers,
// code actions) for the cells this selector matches. No module here loads `vscode`: the unit
// tests read the selector as it ships.
import type { DocumentSelector } from 'vscode-languageclient';

export const NOTEBOOK_TYPE = 'jupyter-notebook';

export const DOCUMENT_SELECTOR: DocumentSelector = [
  { scheme: 'file', language: 'python' },
  { scheme: 'untitled', language: 'python' },
  { notebook: NOTEBOOK_TYPE, language: 'python' },
];
