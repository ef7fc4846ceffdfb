// Small fakes shared by the unit tests.
import type { Log } from '../../src/vscodeapi';

export interface RecordingLog extends Log {
  lines: string[];
  shown: number;
}

export function recordingLog(): RecordingLog {
  const lines: string[] = [];
  const log = {
    lines,
    shown: 0,
    trace: (message: string) => lines.push(`trace ${message}`),
    debug: (message: string) => lines.push(`debug ${message}`),
    info: (message: string) => lines.push(`info ${message}`),
    warn: (message: string) => lines.push(`warn ${message}`),
    error: (message: string | Error) => lines.push(`error ${String(message)}`),
    show: () => {
      log.shown++;
    },
  };
  return log;
}

/** Resolves after pending promise callbacks (and timers of `ms`) have run. */
export function settle(ms = 0): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export const PACKAGE_JSON = require('../../../package.json') as {
  contributes: {
    commands: Array<{ command: string; title: string; category?: string; enablement?: string }>;
    keybindings: Array<{ command: string; key: string; when?: string }>;
    menus: Record<string, Array<{ command: string; when?: string }>>;
    configuration: { properties: Record<string, Record<string, unknown>> };
  };
  capabilities: {
    untrustedWorkspaces: { supported: string | boolean; restrictedConfigurations: string[] };
  };
  main: string;
  activationEvents: string[];
};
