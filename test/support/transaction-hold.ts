import { vi } from "vitest";
import type { PrismaClient } from "../../src/db/client.js";
import type { TestApp } from "./app.js";

export interface TransactionHold {
  /** 1 once a request's transaction is held: the request has done its reads and waits to begin writing. */
  readonly arrived: number;
  /** Lets the held transaction begin; every later transaction went through unheld. */
  release(): void;
}

/**
 * Holds the next transaction opened through core's tenant door (deps.data) before it begins, until
 * release(); every later one goes through. A test starts one request, waits on `arrived`, runs
 * another request to its end, then releases: the held request meets what the other did between its
 * reads and its transaction, whatever the timing. (On PGlite an open transaction holds the whole
 * database, so the hold is before the transaction, never inside it.)
 */
export function holdNextTransaction(t: TestApp): TransactionHold {
  const deps = t.app.deps;
  const door = deps.data.bind(deps);
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let arrived = 0;
  const spy = vi.spyOn(deps, "data").mockImplementation((tenant) => {
    const client = door(tenant);
    return new Proxy(client, {
      get(target, prop) {
        const value: unknown = Reflect.get(target, prop);
        if (prop !== "$transaction" || arrived > 0 || typeof value !== "function") return value;
        arrived++;
        return (...args: unknown[]) => gate.then(() => value.apply(target, args));
      },
    }) as PrismaClient;
  });
  return {
    get arrived() {
      return arrived;
    },
    release() {
      spy.mockRestore();
      open();
    },
  };
}

export interface CreationHold {
  /** True once the held creation has been called: its request is in flight. */
  readonly arrived: boolean;
  /** Lets it go on (idempotent); later creations were never held. */
  release(): void;
  /** Releases it and puts core's creation back as it was. */
  restore(): void;
}

/** Holds the next deployment creation in core, in flight, until release(): a request whose answer a test makes wait. */
export function holdNextCreation(t: TestApp): CreationHold {
  const create = t.app.core.deployments;
  const original = create.create.bind(create);
  let arrived = false;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const spy = vi.spyOn(create, "create").mockImplementationOnce(async (...args) => {
    arrived = true;
    await released;
    return original(...args);
  });
  return {
    get arrived() {
      return arrived;
    },
    release: () => release(),
    restore() {
      release();
      spy.mockRestore();
    },
  };
}
