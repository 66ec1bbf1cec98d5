import { readFileSync } from "node:fs";
import { buildSchema, findBreakingChanges, findDangerousChanges } from "graphql";
import { describe, expect, it } from "vitest";
import { schema } from "../../src/graphql/types/index.js";
import { printedSchema } from "../../src/graphql/sdl.js";

const committed = readFileSync(new URL("../../schema.graphql", import.meta.url), "utf8");

describe("schema.graphql", () => {
  it("is the schema the code builds (run `npx tsx src/graphql/print-schema.ts` after changing it)", () => {
    const drift = [...findBreakingChanges(buildSchema(committed), schema), ...findDangerousChanges(buildSchema(committed), schema)];
    expect(drift.map((c) => c.description)).toEqual([]);
    expect(committed).toBe(printedSchema());
  });

  it("gives every node type a uuid and names every mutation's payload userErrors", () => {
    const types = Object.values(schema.getTypeMap());
    const nodes = types.filter((t) => "getInterfaces" in t && t.getInterfaces().some((i) => i.name === "Node"));
    expect(nodes.map((n) => n.name).sort()).toEqual([
      "AgentConnection", "CodehostInstallation", "Deployment", "Listener", "OAuthFlow", "OAuthProvider", "OAuthToken", "Revision", "Workspace",
    ]);
    for (const n of nodes) expect(Object.keys((n as import("graphql").GraphQLObjectType).getFields()), n.name).toContain("uuid");
    for (const field of Object.values(schema.getMutationType()!.getFields())) {
      const payload = field.type.toString().replace("!", "");
      // An acronym keeps its case in the type's name: oauthProviderCreate → OAuthProviderCreatePayload.
      expect(payload.toLowerCase(), field.name).toBe(`${field.name}Payload`.toLowerCase());
      expect(Object.keys((schema.getType(payload) as import("graphql").GraphQLObjectType).getFields()), field.name).toContain("userErrors");
    }
  });
});
