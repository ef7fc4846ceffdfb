// The one module that touches the `vscode` API. Everything else calls these small functions with
// plain values (strings for URIs and URLs), so that it runs under Node with `vscode` stubbed.
// vscode-languageclient calls `vscode` itself; that is the library's business, not ours.
import * as vscode from 'vscode';

export interface Disposable {
  dispose(): unknown;
}

/** The subset of a LogOutputChannel the extension writes to. */
export interface Log {
  trace(message: string, ...args: unknown[]): void;
  debug(message: string, ...args: unknown[]): void;
  info(message: string, ...args: unknown[]): void;
  warn(message: string, ...args: unknown[]): void;
  error(message: string | Error, ...args: unknown[]): void;
  show(preserveFocus?: boolean): void;
}

export interface EditorPosition {
  uri: string;
  languageId: string;
  /** Zero-based, like LSP positions. */
  line: number;
  character: number;
  lines: string[];
}

export interface Inspected<T> {
  defaultValue?: T;
  globalValue?: T;
  workspaceValue?: T;
  workspaceFolderValue?: T;
}

export interface PickItem {
  label: string;
  description?: string;
  detail?: string;
}

/** A status bar item through which only text, tooltip, click command and error colour pass. */
export interface StatusItem {
  text: string;
  tooltip: string;
  command: string | undefined;
  setError(error: boolean): void;
  show(): void;
  dispose(): void;
}

// -- commands
export function registerCommand(id: string, run: (...args: unknown[]) => unknown): Disposable {
  return vscode.commands.registerCommand(id, run);
}

export async function executeCommand<T>(id: string, ...args: unknown[]): Promise<T> {
  return vscode.commands.executeCommand<T>(id, ...args);
}

// -- messages and pickers
export async function showInformationMessage(message: string, ...actions: string[]) {
  return vscode.window.showInformationMessage(message, ...actions);
}

export async function showWarningMessage(message: string, ...actions: string[]) {
  return vscode.window.showWarningMessage(message, ...actions);
}

export async function showErrorMessage(message: string, ...actions: string[]) {
  return vscode.window.showErrorMessage(message, ...actions);
}

export async function showQuickPick<T extends PickItem>(
  items: T[],
  placeHolder: string,
): Promise<T | undefined> {
  return vscode.window.showQuickPick(items, { placeHolder, matchOnDescription: true });
}

export function createLogChannel(name: string): vscode.LogOutputChannel {
  return vscode.window.createOutputChannel(name, { log: true });
}

export function createStatusItem(id: string, name: string, priority: number): StatusItem {
  const item = vscode.window.createStatusBarItem(id, vscode.StatusBarAlignment.Left, priority);
  item.name = name;
  return {
    get text() {
      return item.text;
    },
    set text(value: string) {
      item.text = value;
    },
    get tooltip() {
      return typeof item.tooltip === 'string' ? item.tooltip : '';
    },
    set tooltip(value: string) {
      item.tooltip = value;
    },
    get command() {
      return typeof item.command === 'string' ? item.command : undefined;
    },
    set command(value: string | undefined) {
      item.command = value;
    },
    setError(error: boolean) {
      item.backgroundColor = error ? new vscode.ThemeColor('statusBarItem.errorBackground') : undefined;
    },
    show: () => item.show(),
    dispose: () => item.dispose(),
  };
}

export function runInTerminal(name: string, commandLine: string): void {
  const terminal = vscode.window.createTerminal(name);
  terminal.show();
  terminal.sendText(commandLine);
}

export async function writeClipboard(text: string): Promise<void> {
  await vscode.env.clipboard.writeText(text);
}

// -- editors
export function activeEditor(): EditorPosition | undefined {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined) {
    return undefined;
  }
  const document = editor.document;
  const lines: string[] = [];
  for (let i = 0; i < document.lineCount; i++) {
    lines.push(document.lineAt(i).text);
  }
  return {
    uri: document.uri.toString(),
    languageId: document.languageId,
    line: editor.selection.active.line,
    character: editor.selection.active.character,
    lines,
  };
}

// -- configuration
export function getSetting<T>(section: string, key: string, scopeUri?: string): T | undefined {
  return vscode.workspace.getConfiguration(section, scope(scopeUri)).get<T>(key);
}

export function inspectSetting<T>(section: string, key: string, scopeUri?: string): Inspected<T> {
  const found = vscode.workspace.getConfiguration(section, scope(scopeUri)).inspect<T>(key);
  return found ?? {};
}

export function onDidChangeConfiguration(
  listener: (affects: (section: string) => boolean) => void,
): Disposable {
  return vscode.workspace.onDidChangeConfiguration((event) =>
    listener((section) => event.affectsConfiguration(section)),
  );
}

function scope(scopeUri: string | undefined): vscode.Uri | undefined {
  return scopeUri === undefined ? undefined : vscode.Uri.parse(scopeUri);
}

export function workspaceFolderPaths(): string[] {
  return (vscode.workspace.workspaceFolders ?? []).map((folder) => folder.uri.fsPath);
}

/** The first workspace folder as VS Code's own object, for APIs (the Python extension's) that
 * take one; opaque to the rest of the extension. */
export function firstWorkspaceFolder(): vscode.WorkspaceFolder | undefined {
  return vscode.workspace.workspaceFolders?.[0];
}

export function fsPath(uri: string): string {
  return vscode.Uri.parse(uri).fsPath;
}

// -- workspace trust
export function isWorkspaceTrusted(): boolean {
  return vscode.workspace.isTrusted;
}

export function onDidGrantWorkspaceTrust(listener: () => void): Disposable {
  return vscode.workspace.onDidGrantWorkspaceTrust(listener);
}

// -- URLs: asExternalUri maps a URL on the extension host's machine to one the user's browser can
// reach (forwarding the port under Remote-SSH, codespaces or code-server).
export async function asExternalUri(url: string): Promise<string> {
  const mapped = await vscode.env.asExternalUri(vscode.Uri.parse(url));
  // The encoded form: Uri.parse(toString()) gives back the same Uri in openExternal.
  return mapped.toString();
}

export async function openExternal(url: string): Promise<boolean> {
  return vscode.env.openExternal(vscode.Uri.parse(url));
}

// -- other extensions
/** The exports of an installed extension, activated first; undefined when it is absent. */
export async function extensionExports<T>(id: string): Promise<T | undefined> {
  const extension = vscode.extensions.getExtension<T>(id);
  if (extension === undefined) {
    return undefined;
  }
  return extension.isActive ? extension.exports : extension.activate();
}

// -- webviews (the run report)
/** A webview panel through which only HTML, messages and disposal pass. */
export interface ReportPanel {
  setHtml(html: string, title: string): void;
  reveal(): void;
  onMessage(listener: (message: unknown) => void): Disposable;
  onDidDispose(listener: () => void): Disposable;
  dispose(): void;
}

/** A panel beside the active editor, scripts on (the page's CSP allows only its own nonce'd
 * script), no local resources (the page is self-contained). */
export function createReportPanel(title: string): ReportPanel {
  const panel = vscode.window.createWebviewPanel(
    'trnlens.report',
    title,
    { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
    { enableScripts: true, localResourceRoots: [], enableFindWidget: true },
  );
  return {
    setHtml(html: string, newTitle: string) {
      panel.title = newTitle;
      panel.webview.html = html;
    },
    reveal: () => panel.reveal(vscode.ViewColumn.Beside, true),
    onMessage: (listener) => panel.webview.onDidReceiveMessage(listener),
    onDidDispose: (listener) => panel.onDidDispose(listener),
    dispose: () => panel.dispose(),
  };
}

/** Opens a file in the first editor column with the cursor on `line` (1-based). */
export async function revealLine(path: string, line: number): Promise<void> {
  const position = new vscode.Position(Math.max(line - 1, 0), 0);
  const editor = await vscode.window.showTextDocument(vscode.Uri.file(path), {
    viewColumn: vscode.ViewColumn.One,
    selection: new vscode.Range(position, position),
  });
  editor.revealRange(new vscode.Range(position, position), vscode.TextEditorRevealType.InCenter);
}

export function fileUri(path: string): string {
  return vscode.Uri.file(path).toString();
}
