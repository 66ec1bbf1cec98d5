/**
 * Loaded into the server process by the benchmark harness only (`node --expose-gc --import
 * ./bench/lib/probe.ts`), never by `npm start`. Answers the harness over the IPC channel with what only
 * the server can see: its heap after a full collection, its CPU time, and the SQL statements it has
 * sent (counted by src/db/statement-counter.ts when BENCH_COUNT_SQL=1).
 */
import { Session } from "node:inspector/promises";

export type ProbeRequest = { id: number; kind: "memory" | "statements" | "cpu" | "profile-start" | "profile-stop" | "recent"; since?: number };
export type ProbeReply =
  | { id: number; kind: "memory"; memory: NodeJS.MemoryUsage }
  | { id: number; kind: "statements"; count: number }
  | { id: number; kind: "cpu"; usage: NodeJS.CpuUsage }
  | { id: number; kind: "profile-start" }
  /** A V8 CPU profile (.cpuprofile JSON) of the time since profile-start. */
  | { id: number; kind: "profile-stop"; profile: string }
  /** The SQL Prisma sent since the statement count was `since`. */
  | { id: number; kind: "recent"; statements: { sql: string; params: string }[] }
  | { id: number; kind: "error"; message: string };

const send = process.send?.bind(process);

if (send) {
  process.on("message", (message: ProbeRequest) => {
    void answer(message).then(send, (err: unknown) =>
      send({ id: message.id, kind: "error", message: err instanceof Error ? err.message : String(err) }),
    );
  });
  // The channel must not keep a stopping server alive.
  process.channel?.unref();
}

let session: Session | null = null;

async function answer(request: ProbeRequest): Promise<ProbeReply> {
  if (request.kind === "profile-start") {
    session = new Session();
    session.connect();
    await session.post("Profiler.enable");
    await session.post("Profiler.setSamplingInterval", { interval: 200 });
    await session.post("Profiler.start");
    return { id: request.id, kind: "profile-start" };
  }
  if (request.kind === "profile-stop") {
    if (!session) throw new Error("profile-stop without profile-start");
    const { profile } = await session.post("Profiler.stop");
    session.disconnect();
    session = null;
    return { id: request.id, kind: "profile-stop", profile: JSON.stringify(profile) };
  }
  if (request.kind === "memory") {
    // Two passes: the first may only queue finalizers that free more on the second.
    globalThis.gc?.();
    globalThis.gc?.();
    return { id: request.id, kind: "memory", memory: process.memoryUsage() };
  }
  if (request.kind === "cpu") return { id: request.id, kind: "cpu", usage: process.cpuUsage() };
  const counter = await import("../../src/db/statement-counter.js");
  if (request.kind === "recent") return { id: request.id, kind: "recent", statements: counter.statementsSince(request.since ?? 0) };
  return { id: request.id, kind: "statements", count: counter.statementCount() };
}
