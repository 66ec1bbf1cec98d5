import { execFileSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { join } from "node:path";
import { type BenchArgs, parseBenchArgs } from "./args.js";
import { ROOT } from "./server.js";

/**
 * A comparison script's command line: a git ref first (as its short commit id), then the benchmark
 * options. Without a ref, or with one git does not know, it says so with the usage and exits 2.
 */
export function refCommandLine(usage: string): { sha: string; args: BenchArgs } {
  const ref = process.argv[2];
  let sha: string | undefined;
  if (ref && !ref.startsWith("--")) {
    try {
      sha = execFileSync("git", ["rev-parse", "--short", "--verify", `${ref}^{commit}`], { cwd: ROOT, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
    } catch {
      process.stderr.write(`not a commit: ${ref}\n`);
    }
  }
  if (!sha) {
    process.stderr.write(`usage: ${usage}\n`);
    process.exit(2);
  }
  return { sha, args: parseBenchArgs(process.argv.slice(3)) };
}

/**
 * A git ref's src/ in a temporary folder under build/ (inside the repository, so that its imports find
 * the same node_modules), with the working tree's generated Prisma client (not in git): both sides
 * of a comparison must therefore have the same schema. Removed after fn, whether it succeeds or throws.
 */
export async function withRefSource<T>(sha: string, prefix: string, fn: (tree: string) => Promise<T>): Promise<T> {
  const tree = mkdtempSync(join(ROOT, "build", prefix));
  try {
    const tar = execFileSync("git", ["archive", "--format=tar", sha, "src"], { cwd: ROOT, maxBuffer: 256 * 1024 * 1024 });
    execFileSync("tar", ["-x", "-C", tree], { input: tar });
    cpSync(join(ROOT, "src", "generated"), join(tree, "src", "generated"), { recursive: true });
    return await fn(tree);
  } finally {
    rmSync(tree, { recursive: true, force: true });
  }
}
