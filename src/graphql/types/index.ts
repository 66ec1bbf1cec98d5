import { lexicographicSortSchema } from "graphql";
import { builder } from "../builder.js";
// Each import adds its entity's types, queries, mutations and subscriptions to the builder.
import "./scalars.js";
import "./enums.js";
import "./node.js";
import "./viewer.js";
import "./listeners.js";
import "./deployments.js";
import "./revisions.js";
import "./installations.js";
import "./connections.js";
import "./builds.js";
import "./oauth.js";
import "./oauth-flows.js";
import "./subscriptions.js";
import "./logs.js";

/** The schema, sorted so that its printed form (schema.graphql) does not depend on import order. */
export const schema = lexicographicSortSchema(builder.toSchema());
