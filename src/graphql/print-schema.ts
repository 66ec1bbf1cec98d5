import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { printedSchema } from "./sdl.js";

/** Writes schema.graphql at the top level: `npx tsx src/graphql/print-schema.ts` after changing the schema. */
const target = fileURLToPath(new URL("../../schema.graphql", import.meta.url));
writeFileSync(target, printedSchema());
process.stdout.write(`wrote ${target}\n`);
