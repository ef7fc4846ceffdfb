// A stand-in for the `vscode` module, installed before any module under test loads it. Only
// src/vscodeapi.ts imports `vscode`; this fake records what it is asked to do and answers what
// each test tells it to, so the rest of the extension runs under plain Node.
import Module = require('node:module');

type Listener<T> = (value: T) => void;

export class FakeEventEmitter<T> {
  private listeners: Listener<T>[] = [];
  readonly event = (listener: Listener<T>) => {
    this.listeners.push(listener);
    return { dispose: () => (this.listeners = this.listeners.filter((l) => l !== listener)) };
  };
  fire(value: T): void {
    this.listeners.slice().forEach((listener) => listener(value));
  }
}

export class FakeUri {
  private constructor(
    readonly scheme: string,
    readonly fsPath: string,
    private readonly text: string,
  ) {}
  static parse(text: string): FakeUri {
    const scheme = text.split(':', 1)[0];
    const fsPath = scheme === 'file' ? decodeURIComponent(text.replace(/^file:\/\//, '')) : text;
    return new FakeUri(scheme, fsPath, text);
  }
  static file(path: string): FakeUri {
    return new FakeUri('file', path, `file://${path}`);
  }
  toString(): string {
    return this.text;
  }
}

/** A webview panel: its options, HTML, title, and the page's side of the message channel. */
export class FakePanel {
  html = '';
  revealed = 0;
  disposed = false;
  readonly messages = new FakeEventEmitter<unknown>();
  readonly disposal = new FakeEventEmitter<void>();
  constructor(
    readonly viewType: string,
    public title: string,
    readonly column: unknown,
    readonly options: Record<string, unknown>,
  ) {}
  get webview() {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const panel = this;
    return {
      get html() {
        return panel.html;
      },
      set html(value: string) {
        panel.html = value;
      },
      onDidReceiveMessage: panel.messages.event,
    };
  }
  reveal() {
    this.revealed++;
  }
  onDidDispose = (listener: () => void) => this.disposal.event(listener);
  dispose() {
    this.disposed = true;
    this.disposal.fire();
  }
}

class FakePosition {
  constructor(
    readonly line: number,
    readonly character: number,
  ) {}
}

class FakeRange {
  constructor(
    readonly start: FakePosition,
    readonly end: FakePosition,
  ) {}
}

export interface Shown {
  kind: 'info' | 'warning' | 'error';
  message: string;
  actions: string[];
}

export interface FakeEditor {
  uri: string;
  languageId: string;
  text: string;
  line: number;
  character?: number;
}

/** What the fake records and answers; reset before each test. */
export const state = {
  shown: [] as Shown[],
  /** Answers to show*Message, in order (undefined: dismissed). */
  messageAnswers: [] as Array<string | undefined>,
  /** Chooses from a quick pick's items; undefined: dismissed. */
  quickPick: (items: Array<{ label: string }>) => items[0] as unknown,
  quickPicks: [] as Array<{ labels: string[]; placeHolder: string }>,
  commands: new Map<string, (...args: unknown[]) => unknown>(),
  executed: [] as Array<{ id: string; args: unknown[] }>,
  /** section.key -> inspect() result */
  settings: new Map<string, Record<string, unknown>>(),
  trusted: true,
  editor: undefined as FakeEditor | undefined,
  terminals: [] as Array<{ name: string; sent: string[] }>,
  clipboard: '',
  opened: [] as string[],
  /** url -> what asExternalUri maps it to (default: itself) */
  externalUris: new Map<string, string>(),
  extensions: new Map<string, { isActive: boolean; exports: unknown; activate(): Promise<unknown> }>(),
  statusItems: [] as Array<Record<string, unknown>>,
  panels: [] as FakePanel[],
  /** showTextDocument calls: the file path and the selected line (0-based). */
  revealed: [] as Array<{ path: string; line: number; column: unknown }>,
  channels: [] as Array<{ name: string; lines: string[]; shown: number }>,
  configurationChanged: new FakeEventEmitter<{ affectsConfiguration(section: string): boolean }>(),
  trustGranted: new FakeEventEmitter<void>(),
};

export function reset(): void {
  state.shown = [];
  state.messageAnswers = [];
  state.quickPick = (items) => items[0];
  state.quickPicks = [];
  state.commands = new Map();
  state.executed = [];
  state.settings = new Map();
  state.trusted = true;
  state.editor = undefined;
  state.terminals = [];
  state.clipboard = '';
  state.opened = [];
  state.externalUris = new Map();
  state.extensions = new Map();
  state.statusItems = [];
  state.panels = [];
  state.revealed = [];
  state.channels = [];
  state.configurationChanged = new FakeEventEmitter();
  state.trustGranted = new FakeEventEmitter();
}

function show(kind: Shown['kind']) {
  return async (message: string, ...actions: string[]) => {
    state.shown.push({ kind, message, actions });
    return state.messageAnswers.shift();
  };
}

function configuration(section: string) {
  const full = (key: string) => `${section}.${key}`;
  return {
    get: (key: string) => {
      const found = state.settings.get(full(key));
      return found?.workspaceFolderValue ?? found?.workspaceValue ?? found?.globalValue ?? found?.defaultValue;
    },
    inspect: (key: string) => state.settings.get(full(key)),
  };
}

const fake = {
  Uri: FakeUri,
  Position: FakePosition,
  Range: FakeRange,
  ViewColumn: { One: 1, Two: 2, Beside: -2 },
  TextEditorRevealType: { InCenter: 2 },
  EventEmitter: FakeEventEmitter,
  StatusBarAlignment: { Left: 1, Right: 2 },
  ThemeColor: class {
    constructor(readonly id: string) {}
  },
  commands: {
    registerCommand(id: string, run: (...args: unknown[]) => unknown) {
      if (state.commands.has(id)) {
        throw new Error(`command ${id} already registered`);
      }
      state.commands.set(id, run);
      return { dispose: () => state.commands.delete(id) };
    },
    async executeCommand(id: string, ...args: unknown[]) {
      state.executed.push({ id, args });
      return undefined;
    },
  },
  window: {
    showInformationMessage: show('info'),
    showWarningMessage: show('warning'),
    showErrorMessage: show('error'),
    async showQuickPick(items: Array<{ label: string }>, options: { placeHolder: string }) {
      state.quickPicks.push({ labels: items.map((item) => item.label), placeHolder: options.placeHolder });
      return state.quickPick(items);
    },
    createOutputChannel(name: string) {
      const channel = { name, lines: [] as string[], shown: 0 };
      const write = (level: string) => (message: unknown) => void channel.lines.push(`${level} ${String(message)}`);
      state.channels.push(channel);
      return {
        name,
        trace: write('trace'),
        debug: write('debug'),
        info: write('info'),
        warn: write('warn'),
        error: write('error'),
        show: () => void channel.shown++,
        dispose: () => undefined,
      };
    },
    createStatusBarItem(id: string) {
      const item: Record<string, unknown> = { id, visible: false };
      item.show = () => (item.visible = true);
      item.dispose = () => (item.visible = false);
      state.statusItems.push(item);
      return item;
    },
    createWebviewPanel(viewType: string, title: string, column: unknown, options: Record<string, unknown>) {
      const panel = new FakePanel(viewType, title, column, options);
      state.panels.push(panel);
      return panel;
    },
    async showTextDocument(uri: FakeUri, options: { selection: FakeRange; viewColumn: unknown }) {
      state.revealed.push({ path: uri.fsPath, line: options.selection.start.line, column: options.viewColumn });
      return { revealRange: () => undefined };
    },
    createTerminal(name: string) {
      const terminal = { name, sent: [] as string[] };
      state.terminals.push(terminal);
      return { show: () => undefined, sendText: (text: string) => terminal.sent.push(text) };
    },
    get activeTextEditor() {
      const editor = state.editor;
      if (editor === undefined) {
        return undefined;
      }
      const lines = editor.text.split('\n');
      return {
        document: {
          uri: FakeUri.parse(editor.uri),
          languageId: editor.languageId,
          lineCount: lines.length,
          lineAt: (line: number) => ({ text: lines[line] }),
        },
        selection: { active: { line: editor.line, character: editor.character ?? 0 } },
      };
    },
  },
  workspace: {
    getConfiguration: (section: string) => configuration(section),
    onDidChangeConfiguration: (listener: Listener<{ affectsConfiguration(s: string): boolean }>) =>
      state.configurationChanged.event(listener),
    get isTrusted() {
      return state.trusted;
    },
    onDidGrantWorkspaceTrust: (listener: Listener<void>) => state.trustGranted.event(listener),
    workspaceFolders: undefined,
  },
  env: {
    async asExternalUri(uri: FakeUri) {
      return FakeUri.parse(state.externalUris.get(uri.toString()) ?? uri.toString());
    },
    async openExternal(uri: FakeUri) {
      state.opened.push(uri.toString());
      return true;
    },
    clipboard: {
      async writeText(text: string) {
        state.clipboard = text;
      },
    },
  },
  extensions: {
    getExtension: (id: string) => state.extensions.get(id),
  },
};

// Node resolves `require('vscode')` through Module._load; answer it with the fake.
type Load = (request: string, parent: unknown, isMain: boolean) => unknown;
const moduleWithLoad = Module as unknown as { _load: Load };
const originalLoad = moduleWithLoad._load;
moduleWithLoad._load = function (request: string, parent: unknown, isMain: boolean) {
  if (request === 'vscode') {
    return fake;
  }
  return originalLoad.call(this, request, parent, isMain);
};
