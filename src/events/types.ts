import { z } from "zod";

const ids = { workspaceId: z.string(), deploymentId: z.string() };

/**
 * What core publishes after each committed change. Events carry ids and the new status only:
 * subscribers refetch what they show, so a payload stays far under NOTIFY's 8000-byte limit. The
 * schema also reads what other replicas send (events/postgres.ts): one of another version, or any
 * session of the database's, may send what this one does not know, which is then dropped.
 */
export const DomainEventSchema = z.discriminatedUnion("type", [
  z.object({ type: z.literal("revision.status"), ...ids, revisionId: z.string(), status: z.string() }),
  z.object({ type: z.literal("deployment.revisions"), ...ids, revisionId: z.string() }),
  z.object({ type: z.literal("deployment.status"), ...ids, status: z.string() }),
  /** New lines in a revision's build or deploy log (lines a status change writes come with revision.status). */
  z.object({ type: z.literal("revision.logs"), ...ids, revisionId: z.string(), kind: z.enum(["build", "deploy"]) }),
  z.object({ type: z.literal("oauth.flow"), workspaceId: z.string(), flowId: z.string(), status: z.string() }),
  /** A key was revoked: every replica drops it from its authentication cache at once. */
  z.object({ type: z.literal("api_key.revoked"), workspaceId: z.string().nullable(), keyId: z.string() }),
]);
export type DomainEvent = z.infer<typeof DomainEventSchema>;

/** The topic an event is delivered on; subscribers name topics with the same helpers. */
export const topics = {
  revision: (revisionId: string) => `revision:${revisionId}`,
  deploymentRevisions: (deploymentId: string) => `deployment-revisions:${deploymentId}`,
  deploymentStatus: (deploymentId: string) => `deployment:${deploymentId}`,
  revisionLogs: (revisionId: string, kind: "build" | "deploy") => `revision-logs:${revisionId}:${kind}`,
  oauthFlow: (flowId: string) => `oauth-flow:${flowId}`,
  apiKeys: () => "api-keys",
};

export function topicOf(event: DomainEvent): string {
  switch (event.type) {
    case "revision.status":
      return topics.revision(event.revisionId);
    case "deployment.revisions":
      return topics.deploymentRevisions(event.deploymentId);
    case "deployment.status":
      return topics.deploymentStatus(event.deploymentId);
    case "revision.logs":
      return topics.revisionLogs(event.revisionId, event.kind);
    case "oauth.flow":
      return topics.oauthFlow(event.flowId);
    case "api_key.revoked":
      return topics.apiKeys();
  }
}

/**
 * Every topic an event is delivered on: a revision's status change is also a change among its
 * deployment's revisions, and a line in its logs (every status change writes one, and a final one
 * closes both logs), so one publication reaches every kind of subscriber.
 */
export function topicsOf(event: DomainEvent): string[] {
  if (event.type !== "revision.status") return [topicOf(event)];
  const id = event.revisionId;
  return [topics.revision(id), topics.deploymentRevisions(event.deploymentId), topics.revisionLogs(id, "build"), topics.revisionLogs(id, "deploy")];
}

export type Unsubscribe = () => void;

export interface EventBus {
  /** Delivers to every subscriber of the event's topic, on every replica. */
  publish(event: DomainEvent): Promise<void>;
  subscribe(topic: string, handler: (event: DomainEvent) => void): Unsubscribe;
  /**
   * Calls `handler` each time the bus has connected again after losing its connection: events
   * published meanwhile (by other replicas) may never be delivered here, so whatever the bus feeds
   * (a live view, a cache) reads its objects' current state again. Called once the bus is listening
   * again, so that a change committed after that read is delivered as usual. The in-process bus never
   * loses an event and calls it only when told to (resync()).
   */
  onResync(handler: () => void): Unsubscribe;
  close(): Promise<void>;
}
