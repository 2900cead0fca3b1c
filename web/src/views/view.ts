/** What every tab's view implements; the app mounts one at a time. */
import type { Api } from "../api";
import type { Store, LiveChange } from "../store";

export interface ViewContext {
  api: Api;
  store: Store;
}

export interface View {
  readonly el: HTMLElement;
  /** New data on the server for these runs and kinds. */
  live(change: LiveChange): void;
  destroy(): void;
}

export type ViewFactory = (ctx: ViewContext) => View;
