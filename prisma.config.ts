import { defineConfig } from "prisma/config";

// The app applies migrations itself (src/db/migrate.ts); this file only tells the CLI where things are.
export default defineConfig({
  schema: "prisma/schema.prisma",
  migrations: { path: "prisma/migrations" },
  datasource: { url: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/postgres" },
});
