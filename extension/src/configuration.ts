// The `trnlens` settings as the server receives them, and which changes need a new server.
//
// Only values the user actually set are sent (never the defaults from package.json): the server
// folds its layers (defaults, the project's [tool.trnlens], the client's values) and a default
// sent by the editor would silently hide what the project's pyproject.toml says.
import type { Inspected } from './vscodeapi';

export const SECTION = 'trnlens';

/** Settings the extension itself reads; the server never sees them. */
export const EXTENSION_ONLY = new Set(['interpreter', 'serverLogLevel', 'trace.server']);

/** Settings that take effect only when the server starts. The rest reach the running server
 * through `workspace/didChangeConfiguration` and need no restart. */
export const RESTART_KEYS = ['interpreter', 'serverLogLevel'];

export type Inspect = (key: string, scopeUri?: string) => Inspected<unknown>;

export interface ContributedSettings {
  /** Keys under `trnlens.` (e.g. `hints.enabled`) sent to the server. */
  serverKeys: string[];
  /** Keys that an untrusted workspace may not set (package.json's restrictedConfigurations). */
  restricted: Set<string>;
}

/** Reads the contributed keys and restricted ones from the extension's package.json, so that
 * the list lives in one place. */
export function contributedSettings(packageJson: unknown): ContributedSettings {
  const manifest = packageJson as {
    contributes?: { configuration?: { properties?: Record<string, unknown> } };
    capabilities?: { untrustedWorkspaces?: { restrictedConfigurations?: string[] } };
  };
  const properties = Object.keys(manifest.contributes?.configuration?.properties ?? {});
  const serverKeys = properties
    .filter((key) => key.startsWith(`${SECTION}.`))
    .map((key) => key.slice(SECTION.length + 1))
    .filter((key) => !EXTENSION_ONLY.has(key));
  const restricted = new Set(
    (manifest.capabilities?.untrustedWorkspaces?.restrictedConfigurations ?? [])
      .filter((key) => key.startsWith(`${SECTION}.`))
      .map((key) => key.slice(SECTION.length + 1)),
  );
  return { serverKeys, restricted };
}

/**
 * The section object for the server: `{target: "trn2", hints: {enabled: false}}`, holding only
 * explicitly set values, the narrowest scope winning. In an untrusted workspace a restricted key
 * takes only the user's own (global) value: VS Code does this too, and doing it here as well
 * keeps a cloned repository's settings away from anything that runs code.
 */
export function serverSection(
  settings: ContributedSettings,
  inspect: Inspect,
  trusted: boolean,
  scopeUri?: string,
): Record<string, unknown> {
  const section: Record<string, unknown> = {};
  for (const key of settings.serverKeys) {
    const found = inspect(key, scopeUri);
    const fromWorkspace = !trusted && settings.restricted.has(key) ? undefined : found;
    const value =
      fromWorkspace?.workspaceFolderValue ?? fromWorkspace?.workspaceValue ?? found.globalValue;
    if (value !== undefined) {
      setNested(section, key.split('.'), value);
    }
  }
  return section;
}

function setNested(target: Record<string, unknown>, path: string[], value: unknown): void {
  let node = target;
  for (const part of path.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== 'object' || next === null || Array.isArray(next)) {
      node[part] = {};
    }
    node = node[part] as Record<string, unknown>;
  }
  node[path[path.length - 1]] = value;
}

export function needsRestart(affects: (section: string) => boolean): boolean {
  return RESTART_KEYS.some((key) => affects(`${SECTION}.${key}`));
}

export function affectsServer(
  settings: ContributedSettings,
  affects: (section: string) => boolean,
): boolean {
  return settings.serverKeys.some((key) => affects(`${SECTION}.${key}`));
}
