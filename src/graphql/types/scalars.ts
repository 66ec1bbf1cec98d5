import { GraphQLError, Kind, type ValueNode } from "graphql";
import { parseInstant } from "../../core/schemas/logs.js";
import { isoString } from "../../time.js";
import { builder } from "../builder.js";
import { isObj } from "../../core/stored-json.js";

const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

function parseDateTime(value: unknown): Date {
  // parseInstant, as REST reads its bounds: a date or time that does not exist (2026-02-30, 24:00),
  // which Date.parse would roll over, is refused, and so is an instant before year 1.
  const at = typeof value === "string" && ISO_DATE_TIME.test(value) ? parseInstant(value) : null;
  if (!at) {
    throw new GraphQLError("DateTime must be an ISO 8601 date-time string such as 2024-01-31T12:00:00Z, no earlier than 0001-01-01T00:00:00Z");
  }
  return at;
}

builder.scalarType("DateTime", {
  description: "An instant as an ISO 8601 date-time string in UTC, e.g. 2024-01-31T12:00:00.000Z.",
  specifiedByURL: "https://scalars.graphql.org/andimarek/date-time",
  serialize: (value) => {
    if (!(value instanceof Date)) throw new GraphQLError("DateTime cannot represent a non-Date value");
    return isoString(value);
  },
  parseValue: parseDateTime,
  parseLiteral: (ast) => {
    if (ast.kind !== Kind.STRING) throw new GraphQLError("DateTime must be a string");
    return parseDateTime(ast.value);
  },
});

function literal(ast: ValueNode, variables: Record<string, unknown> | null | undefined): unknown {
  switch (ast.kind) {
    case Kind.STRING:
    case Kind.BOOLEAN:
      return ast.value;
    case Kind.INT:
    case Kind.FLOAT:
      return Number(ast.value);
    case Kind.NULL:
      return null;
    case Kind.LIST:
      return ast.values.map((v) => literal(v, variables));
    case Kind.OBJECT:
      return Object.fromEntries(ast.fields.map((f) => [f.name.value, literal(f.value, variables)]));
    case Kind.VARIABLE:
      return variables?.[ast.name.value];
    case Kind.ENUM:
      return ast.value;
  }
}

builder.scalarType("JSONObject", {
  description: "A JSON object whose inner structure the API does not define (labels, volume sources, security contexts).",
  serialize: (value) => {
    if (!isObj(value)) throw new GraphQLError("JSONObject cannot represent a non-object value");
    return value;
  },
  parseValue: (value) => {
    if (!isObj(value)) throw new GraphQLError("JSONObject must be an object");
    return value;
  },
  parseLiteral: (ast, variables) => {
    const value = literal(ast, variables);
    if (!isObj(value)) throw new GraphQLError("JSONObject must be an object");
    return value;
  },
});
