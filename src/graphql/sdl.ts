import { printSchema } from "graphql";
import { schema } from "./types/index.js";

/** schema.graphql's expected content: the code's schema, printed. */
export const printedSchema = () => `${printSchema(schema)}\n`;
