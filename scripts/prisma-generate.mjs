// postinstall: generate the Prisma client so that `npm install` alone prepares a fresh clone.
// The app talks to the database through driver adapters and never needs Prisma's schema-engine
// binary, which cannot always be downloaded; `prisma generate` only checks that the path exists.
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const env = { ...process.env };
env.PRISMA_SCHEMA_ENGINE_BINARY ??= process.execPath;
env.PRISMA_HIDE_UPDATE_MESSAGE = "1";
execFileSync(process.execPath, [require.resolve("prisma/build/index.js"), "generate"], { stdio: "inherit", env });
