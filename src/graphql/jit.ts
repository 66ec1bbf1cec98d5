import {
  BREAK,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FieldNode,
  getOperationAST,
  getVariableValues,
  GraphQLEnumType,
  GraphQLError,
  GraphQLList,
  GraphQLNonNull,
  type GraphQLOutputType,
  GraphQLScalarType,
  type GraphQLSchema,
  isListType,
  isNonNullType,
  visit,
} from "graphql";
import { compileQuery, type CompiledQuery, isCompiledQuery } from "graphql-jit";
import { MapperKind, mapSchema } from "@graphql-tools/utils";
import type { Plugin } from "graphql-yoga";

/** A document is compiled on its second run: a one-off (or a fuzzer's) query never pays for compiling. */
const COMPILE_ON_RUN = 2;

interface Entry {
  runs: number;
  /** null: not compiled (yet, or graphql-jit declined it: then graphql-js runs it for good). */
  compiled: CompiledQuery | null;
  failed: boolean;
  /** Field nodes by "line:column", to give graphql-jit's errors back their nodes; built on first need. */
  fields?: Map<string, FieldNode>;
}

/** By document (yoga's parse cache hands out the same object for the same text), then operation name. */
const entries = new WeakMap<DocumentNode, Map<string, Entry>>();

function entryFor(args: ExecutionArgs): Entry {
  let byOperation = entries.get(args.document);
  if (!byOperation) entries.set(args.document, (byOperation = new Map()));
  const name = args.operationName ?? "";
  let entry = byOperation.get(name);
  if (!entry) byOperation.set(name, (entry = { runs: 0, compiled: null, failed: false }));
  return entry;
}

/**
 * The schema graphql-jit compiles against: the service's, with the same resolvers, except in what
 * its leaves cost. graphql-jit serialises a leaf through a call that takes a new array of locations
 * and a new path each time (some 9,000 a page of 100 deployments); with `disableLeafSerialization`
 * it answers String, Boolean, Int, Float, ID and enum values as their resolvers return them.
 * That is the same answer only where serialising changes nothing:
 * - String, Boolean and ID: resolvers return strings and booleans (their types say so: the builder's
 *   ID output is a string, and stored JSON is read by type, see core/stored-json.ts), so they skip it;
 * - enums are answered by name but held by value (coreEnum): here they are scalars that serialise as
 *   their enum does;
 * - Int and Float refuse values out of range (an older row may hold one): their fields are retyped
 *   to copies under other names, which graphql-jit serialises.
 * Variables are read with these types as with the service's (graphql-js has checked them first).
 * Introspection would describe these types, so a document that introspects compiles against the
 * service's own schema, serialising every leaf.
 */
function compilationSchema(schema: GraphQLSchema): GraphQLSchema {
  const serialised = new Map<string, GraphQLScalarType>();
  for (const name of ["Int", "Float"]) {
    const type = schema.getType(name);
    if (type instanceof GraphQLScalarType) serialised.set(name, new GraphQLScalarType({ ...type.toConfig(), name: `${name}_serialised` }));
  }
  const retype = (type: GraphQLOutputType): GraphQLOutputType => {
    if (isNonNullType(type)) return new GraphQLNonNull(retype(type.ofType));
    if (isListType(type)) return new GraphQLList(retype(type.ofType));
    return serialised.get(type.name) ?? type;
  };
  return mapSchema(schema, {
    [MapperKind.TYPE]: (type) =>
      type instanceof GraphQLEnumType
        ? new GraphQLScalarType({
            name: type.name,
            serialize: (value) => type.serialize(value),
            parseValue: (value) => type.parseValue(value),
            parseLiteral: (node, variables) => type.parseLiteral(node, variables),
          })
        : type,
    [MapperKind.COMPOSITE_FIELD]: (field) => ({ ...field, type: retype(field.type) }),
  });
}

const compilationSchemas = new WeakMap<GraphQLSchema, GraphQLSchema>();

/** graphql-jit's compilation of a query, against the schema above unless it introspects. */
export function compileOperation(args: ExecutionArgs) {
  const operationName = args.operationName ?? undefined;
  if (introspects(args.document)) return compileQuery(args.schema, args.document, operationName);
  let schema = compilationSchemas.get(args.schema);
  if (!schema) compilationSchemas.set(args.schema, (schema = compilationSchema(args.schema)));
  return compileQuery(schema, args.document, operationName, { disableLeafSerialization: true });
}

function introspects(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    Field(node) {
      if (node.name.value !== "__schema" && node.name.value !== "__type") return undefined;
      found = true;
      return BREAK;
    },
  });
  return found;
}

function compiledFor(args: ExecutionArgs): { entry: Entry; compiled: CompiledQuery } | null {
  const entry = entryFor(args);
  if (entry.failed) return null;
  if (!entry.compiled) {
    if (++entry.runs < COMPILE_ON_RUN) return null;
    try {
      const result = compileOperation(args);
      if (isCompiledQuery(result)) entry.compiled = result;
      else entry.failed = true;
    } catch {
      entry.failed = true;
    }
    if (!entry.compiled) return null;
  }
  return { entry, compiled: entry.compiled };
}

/**
 * graphql-jit's errors as graphql-js would have raised them, so that error masking treats both alike.
 * - They carry locations but no AST nodes; error masking rebuilds errors from their nodes, so without
 *   them an error would lose its locations. The node is found by its location.
 * - An error graphql-jit raises itself during execution (a null for a non-null field, a value its
 *   scalar cannot serialise, a list that is not one) has a path but no originalError, which masking
 *   takes for a deliberate client error (BAD_USER_INPUT, its message shown, logged at info). The
 *   executor yoga runs otherwise (graphql-js's, as @graphql-tools/executor) raises these as plain
 *   Errors and wraps what it caught in every execution error (locatedError), so the same fault is a
 *   masked INTERNAL_SERVER_ERROR logged as a fault there: such an error gets an originalError too.
 *   (Errors resolvers throw already carry theirs, CoreErrors and deliberate GraphQLErrors included.)
 */
function asGraphQLJsErrors(errors: readonly GraphQLError[], document: DocumentNode, entry: Entry): GraphQLError[] {
  return errors.map((error) => {
    const raisedByJit = error.path !== undefined && error.originalError == null;
    let nodes = error.nodes;
    if (!nodes && error.locations?.length) {
      entry.fields ??= fieldsByLocation(document);
      const found = error.locations.flatMap(({ line, column }) => entry.fields!.get(`${line}:${column}`) ?? []);
      if (found.length > 0) nodes = found;
    }
    if (!raisedByJit && nodes === error.nodes) return error;
    return new GraphQLError(error.message, {
      nodes,
      path: error.path,
      originalError: raisedByJit ? executionFault(error) : error.originalError,
      extensions: error.extensions,
    });
  });
}

/** What graphql-js would have caught: a plain Error with graphql-jit's message and stack. */
function executionFault(error: GraphQLError): Error {
  const fault = new Error(error.message);
  if (error.stack) fault.stack = error.stack;
  return fault;
}

function fieldsByLocation(document: DocumentNode): Map<string, FieldNode> {
  const fields = new Map<string, FieldNode>();
  visit(document, {
    Field(node) {
      if (node.loc) fields.set(`${node.loc.startToken.line}:${node.loc.startToken.column}`, node);
    },
  });
  return fields;
}

async function runCompiled(args: ExecutionArgs, entry: Entry, compiled: CompiledQuery): Promise<ExecutionResult> {
  const result = await compiled.query(args.rootValue, args.contextValue, args.variableValues);
  if (!result.errors?.length) return result;
  // graphql-js puts errors before data; an answer's bytes do not depend on which of the two ran it.
  const { errors, ...rest } = result;
  return { errors: asGraphQLJsErrors(errors, args.document, entry), ...rest };
}

/**
 * Queries run compiled by graphql-jit once their document is seen again: a page of 100 deployments
 * resolves some 8,000 fields, and graphql-js's generic walk over them (with its promise and
 * allocation overhead) cost as much as the database work. Mutations and subscriptions keep
 * graphql-js (they are small, and mutations must keep its exact variable errors, see redact.ts).
 * Anything graphql-jit cannot compile runs on graphql-js as before.
 */
export function useCompiledQueries(): Plugin {
  return {
    onExecute({ args, setExecuteFn }) {
      const operation = getOperationAST(args.document, args.operationName);
      if (operation?.operation !== "query") return;
      // Bad variables are told in graphql-js's words (and as a 400): graphql-js answers those.
      const variables = getVariableValues(args.schema, operation.variableDefinitions ?? [], args.variableValues ?? {}, { maxErrors: 1 });
      if (variables.errors) return;
      const found = compiledFor(args);
      if (found) setExecuteFn((a) => runCompiled(a, found.entry, found.compiled));
    },
  };
}
