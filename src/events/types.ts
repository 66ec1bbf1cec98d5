/**
 * What core publishes after each committed change. Events carry ids and the new status only:
 * subscribers refetch what they show, so a payload stays far under NOTIFY's 8000-byte limit.
 */
export type DomainEvent =
  | { type: "revision.status"; workspaceId: string; deploymentId: string; revisionId: string; status: string }
  | { type: "deployment.revisions"; workspaceId: string; deploymentId: string; revisionId: string }
  | { type: "deployment.status"; workspaceId: string; deploymentId: string; status: string };

/** The topic an event is delivered on; subscribers name topics with the same helpers. */
export const topics = {
  revision: (revisionId: string) => `revision:${revisionId}`,
  deploymentRevisions: (deploymentId: string) => `deployment-revisions:${deploymentId}`,
  deploymentStatus: (deploymentId: string) => `deployment:${deploymentId}`,
};

export function topicOf(event: DomainEvent): string {
  switch (event.type) {
    case "revision.status":
      return topics.revision(event.revisionId);
    case "deployment.revisions":
      return topics.deploymentRevisions(event.deploymentId);
    case "deployment.status":
      return topics.deploymentStatus(event.deploymentId);
  }
}

/**
 * Every topic an event is delivered on: a revision's status change is also a change among its
 * deployment's revisions, so one publication reaches both kinds of subscriber.
 */
export function topicsOf(event: DomainEvent): string[] {
  return event.type === "revision.status"
    ? [topics.revision(event.revisionId), topics.deploymentRevisions(event.deploymentId)]
    : [topicOf(event)];
}

export type Unsubscribe = () => void;

export interface EventBus {
  /** Delivers to every subscriber of the event's topic, on every replica. */
  publish(event: DomainEvent): Promise<void>;
  subscribe(topic: string, handler: (event: DomainEvent) => void): Unsubscribe;
  close(): Promise<void>;
}
