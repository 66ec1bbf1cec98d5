import { execFileSync } from "node:child_process";
import { appendFileSync } from "node:fs";
import { cpus, loadavg, totalmem } from "node:os";
import { join } from "node:path";
import type { LoadResult } from "./load.js";
import { ROOT } from "./server.js";

export type Cell = string | number;

/** The machine and tree a figure was taken on, as the README records it. */
export function machine(): string {
  const cpu = cpus()[0]?.model.trim() ?? "unknown CPU";
  const gib = (totalmem() / 2 ** 30).toFixed(1);
  return `${cpu}, ${cpus().length} cores, ${gib} GiB, Node ${process.version}, ${process.platform} ${process.arch}`;
}

export function commit(): string {
  const git = (...args: string[]) => execFileSync("git", args, { cwd: ROOT, encoding: "utf8" }).trim();
  try {
    const head = git("rev-parse", "--short", "HEAD");
    return git("status", "--porcelain", "--untracked-files=no") === "" ? head : `${head} (with uncommitted changes)`;
  } catch {
    return "unknown";
  }
}

export const load = () => loadavg().map((l) => l.toFixed(2)).join(", ");

/** One benchmark's results: tables and notes, printed and appended to bench/RESULTS.md. */
export class Report {
  private readonly parts: string[] = [];
  private readonly startLoad = load();
  private readonly started = new Date();

  constructor(
    private readonly benchmark: string,
    private readonly scale: string,
    private readonly params: Record<string, number>,
  ) {}

  table(title: string, headers: string[], rows: Cell[][]): void {
    const line = (cells: Cell[]) => `| ${cells.map(String).join(" | ")} |`;
    const text = `#### ${title}\n\n${line(headers)}\n|${headers.map(() => "---").join("|")}|\n${rows.map(line).join("\n")}`;
    this.parts.push(text);
    process.stdout.write(`\n${text}\n\n`);
  }

  note(text: string): void {
    this.parts.push(text);
    process.stdout.write(`${text}\n`);
  }

  markdown(): string {
    const settings = Object.entries(this.params)
      .map(([k, v]) => `${k}=${v}`)
      .join(", ");
    return [
      `### ${this.benchmark}: ${this.started.toISOString().replace(/\.\d+Z$/, "Z")}`,
      "",
      `- machine: ${machine()}`,
      `- commit: ${commit()}`,
      `- scale: ${this.scale} (${settings})`,
      `- load average (1, 5, 15 min) at start: ${this.startLoad}; at end: ${load()}`,
      "",
      this.parts.join("\n\n"),
      "",
    ].join("\n");
  }

  /** Appends to bench/RESULTS.md when record is set. */
  finish(record: boolean): void {
    const text = this.markdown();
    if (record) {
      appendFileSync(join(ROOT, "bench", "RESULTS.md"), `\n${text}`);
      process.stdout.write(`\nappended to bench/RESULTS.md\n`);
    }
  }
}

export const fmt = {
  int: (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : "n/a"),
  ms: (n: number) => (Number.isFinite(n) ? `${n < 10 ? n.toFixed(2) : n.toFixed(1)} ms` : "n/a"),
  ratio: (n: number) => (Number.isFinite(n) ? `${n.toFixed(2)}×` : "n/a"),
  mb: (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MB`,
  kb: (bytes: number) => `${(bytes / 1024).toFixed(2)} KB`,
  verdict: (ok: boolean) => (ok ? "met" : "NOT met"),
};

/** A load result as a table row, under RESULT_HEADERS. */
export const resultRow = (r: LoadResult): Cell[] => [
  r.name,
  fmt.int(r.rps),
  `${fmt.int(r.rpsRange[0])}–${fmt.int(r.rpsRange[1])}`,
  fmt.ms(r.p50),
  fmt.ms(r.p99),
  fmt.int(r.requests),
  Number.isFinite(r.cpuPerRequest) ? fmt.ms(r.cpuPerRequest) : "n/a",
  r.failures === 0 ? 0 : `${r.failures} (${r.failureKinds})`,
];
export const RESULT_HEADERS = ["target", "requests/s", "per round", "p50", "p99", "requests", "server CPU per request", "failures"];
