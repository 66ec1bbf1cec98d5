/**
 * Loaded into the server process by the benchmark harness only (`node --expose-gc --import
 * ./bench/lib/probe.ts`), never by `npm start`. Answers the harness over the IPC channel with what only
 * the server can see: its heap after a full collection, its CPU time, and the SQL statements it has
 * sent (counted by src/db/statement-counter.ts when BENCH_COUNT_SQL=1).
 */
export type ProbeRequest = { id: number; kind: "memory" | "statements" | "cpu" };
export type ProbeReply =
  | { id: number; kind: "memory"; memory: NodeJS.MemoryUsage }
  | { id: number; kind: "statements"; count: number }
  | { id: number; kind: "cpu"; usage: NodeJS.CpuUsage };

const send = process.send?.bind(process);

if (send) {
  process.on("message", (message: ProbeRequest) => {
    void answer(message).then((reply) => send(reply));
  });
  // The channel must not keep a stopping server alive.
  process.channel?.unref();
}

async function answer(request: ProbeRequest): Promise<ProbeReply> {
  if (request.kind === "memory") {
    // Two passes: the first may only queue finalizers that free more on the second.
    globalThis.gc?.();
    globalThis.gc?.();
    return { id: request.id, kind: "memory", memory: process.memoryUsage() };
  }
  if (request.kind === "cpu") return { id: request.id, kind: "cpu", usage: process.cpuUsage() };
  const { statementCount } = await import("../../src/db/statement-counter.js");
  return { id: request.id, kind: "statements", count: statementCount() };
}
