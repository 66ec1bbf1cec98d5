import {
  type DocumentNode,
  getNamedType,
  GraphQLError,
  type GraphQLInputObjectType,
  type GraphQLInputType,
  type GraphQLSchema,
  isInputObjectType,
  Kind,
  type ASTNode,
  TypeInfo,
  visit,
  visitWithTypeInfo,
} from "graphql";
import { handleStreamOrSingleExecutionResult, type Plugin } from "graphql-yoga";

/**
 * graphql-js quotes what it cannot use: a variable's value (`Variable "$s" got invalid value <value>
 * at "s[0]"; <reason>`) and a literal's (`<reason>: <literal>`, `Expected value of type "T", found
 * <literal>`). Where that value may be a secret, errors are told without it, before anything shows
 * or logs them. A secret is an input field marked `extensions: { secret: true }` (SecretInput's
 * value); a type carries secrets when such a field lies anywhere inside it.
 */

/** The extension that marks an input field's values as secrets. */
export const SECRET_FIELD = { secret: true } as const;

const INVALID_VARIABLE = /^Variable "\$([^"]+)" got invalid value /;

const carrying = new WeakMap<GraphQLInputObjectType, boolean>();

/** Whether values of `type` may hold a secret (SecretInput, lists of it, inputs holding it, at any depth). */
export function carriesSecrets(type: GraphQLInputType, seen = new Set<GraphQLInputObjectType>()): boolean {
  const named = getNamedType(type);
  if (!isInputObjectType(named)) return false;
  const known = carrying.get(named);
  if (known !== undefined) return known;
  if (seen.has(named)) return false;
  seen.add(named);
  const result = Object.values(named.getFields()).some((field) => field.extensions?.secret === true || carriesSecrets(field.type, seen));
  seen.delete(named);
  if (result || seen.size === 0) carrying.set(named, result);
  return result;
}

interface SecretPlaces {
  /** Variables of a secret-carrying type, or used where a secret goes. */
  variables: Set<string>;
  /** Source ranges of literals where a secret goes or of a secret-carrying type. */
  ranges: [number, number][];
}

const placesByDocument = new WeakMap<DocumentNode, SecretPlaces>();

/** Where in the document secrets may be: walked once per document, and only when it has errors. */
function secretPlaces(schema: GraphQLSchema, document: DocumentNode): SecretPlaces {
  const cached = placesByDocument.get(document);
  if (cached) return cached;
  const places: SecretPlaces = { variables: new Set(), ranges: [] };
  const typeInfo = new TypeInfo(schema);
  /** Per object field entered: whether it is a secret field (so everything under it is). */
  const secretFields: boolean[] = [];
  /** Where a secret goes, or a value of a type that carries secrets. */
  const atSecret = () => {
    const type = typeInfo.getInputType();
    return secretFields.includes(true) || (type != null && carriesSecrets(type));
  };
  const values = (node: ASTNode) => {
    if (node.loc && atSecret()) places.ranges.push([node.loc.start, node.loc.end]);
  };
  visit(
    document,
    visitWithTypeInfo(typeInfo, {
      ObjectField: {
        enter(node) {
          const parent = typeInfo.getParentInputType();
          const object = parent && getNamedType(parent);
          const field = object && isInputObjectType(object) ? object.getFields()[node.name.value] : undefined;
          secretFields.push(field?.extensions?.secret === true);
        },
        leave() {
          secretFields.pop();
        },
      },
      // In its definition (its declared type) and wherever it is used.
      Variable(node) {
        if (atSecret()) places.variables.add(node.name.value);
      },
      ObjectValue: values,
      ListValue: values,
      StringValue: values,
      IntValue: values,
      FloatValue: values,
      BooleanValue: values,
      EnumValue: values,
    }),
  );
  // A variable's default value goes wherever the variable does: a secret, when the variable is one,
  // whatever its declared type (a String's default is walked before the use that makes it a secret).
  for (const definition of document.definitions) {
    if (definition.kind !== Kind.OPERATION_DEFINITION) continue;
    for (const { variable, defaultValue } of definition.variableDefinitions ?? []) {
      if (defaultValue?.loc && places.variables.has(variable.name.value)) places.ranges.push([defaultValue.loc.start, defaultValue.loc.end]);
    }
  }
  placesByDocument.set(document, places);
  return places;
}

/** A variable's error without the value graphql-js quoted: the variable, where in it, and why, but not what. */
function withoutVariableValue(error: GraphQLError, name: string): GraphQLError {
  const reason = error.originalError?.message ?? "";
  const head = reason && error.message.endsWith(`; ${reason}`) ? error.message.slice(0, -(reason.length + 2)) : error.message;
  const at = head.lastIndexOf(` at "${name}`);
  const where = at >= 0 && head.endsWith('"') ? head.slice(at) : "";
  // The reason loses what follows its first ": " (a scalar's "cannot represent ...: <value>").
  const why = reason.split(": ")[0] || "invalid value";
  return new GraphQLError(`Variable "$${name}" got an invalid value${where}; ${why}`, {
    nodes: error.nodes,
    // A user's mistake, told as such (and so not logged as an unexpected error when masked).
    extensions: { ...error.extensions, code: "BAD_USER_INPUT" },
  });
}

/** A literal's error without the literal: `Expected value of type "T"` or the scalar's reason alone. */
function withoutLiteral(error: GraphQLError): GraphQLError {
  const found = error.message.indexOf(", found ");
  const colon = error.message.indexOf(": ");
  const message =
    found >= 0 ? `${error.message.slice(0, found)}; the value is not shown.` : colon >= 0 ? `${error.message.slice(0, colon)}.` : error.message;
  return new GraphQLError(message, { nodes: error.nodes, extensions: error.extensions });
}

const overlaps = (ranges: [number, number][], start: number, end: number) => ranges.some(([s, e]) => start < e && s < end);

/** The errors of an operation on `document`, each without any value that may be a secret. */
export function redactSecrets<E extends Error>(schema: GraphQLSchema, document: DocumentNode, errors: readonly E[]): readonly (E | GraphQLError)[] {
  if (errors.length === 0) return errors;
  let places: SecretPlaces | null = null;
  let changed = false;
  const redacted = errors.map((error) => {
    if (!(error instanceof GraphQLError)) return error;
    const variable = INVALID_VARIABLE.exec(error.message)?.[1];
    if (variable) {
      places ??= secretPlaces(schema, document);
      if (!places.variables.has(variable)) return error;
      changed = true;
      return withoutVariableValue(error, variable);
    }
    const nodes = error.nodes ?? [];
    if (nodes.length === 0 || !nodes.some((n) => n.kind !== Kind.DOCUMENT && n.loc)) return error;
    places ??= secretPlaces(schema, document);
    const { ranges } = places;
    if (!nodes.some((n) => n.loc && overlaps(ranges, n.loc.start, n.loc.end))) return error;
    changed = true;
    return withoutLiteral(error);
  });
  return changed ? redacted : errors;
}

/**
 * Redacts over every face that runs through yoga's envelop: validation errors (literals), and the
 * errors of executions and subscriptions (variables). Before error masking, which logs the errors it
 * rewrites: neither the answer nor the log quotes a secret.
 */
export function useRedactedSecrets(): Plugin {
  const onResult = (payload: Parameters<typeof handleStreamOrSingleExecutionResult>[0]) =>
    handleStreamOrSingleExecutionResult(payload, ({ args, result, setResult }) => {
      if (!result.errors?.length) return;
      const errors = redactSecrets(args.schema, args.document, result.errors);
      if (errors !== result.errors) setResult({ ...result, errors });
    });
  return {
    onValidate({ params }) {
      return ({ result, setResult }) => {
        if (result.length === 0) return;
        const errors = redactSecrets(params.schema, params.documentAST, result);
        if (errors !== result) setResult([...errors]);
      };
    },
    onExecute: () => ({ onExecuteDone: onResult }),
    onSubscribe: () => ({ onSubscribeResult: onResult }),
  };
}
