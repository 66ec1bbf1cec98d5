import { describe, expect, it } from "vitest";
import {
  canBeSkipped,
  isTerminal,
  REVISION_EVENTS,
  REVISION_STATUSES,
  type RevisionEvent,
  type RevisionStatus,
  routeFor,
  transition,
} from "../../src/core/revision-machine.js";

type Row = Partial<Record<RevisionEvent, RevisionStatus>>;

// Written out by hand from SPEC.md, COMPAT.md and issue 3, independently of the implementation's tables.
// A missing entry means the event is refused in that status.
const TERMINAL: Row = {};
const BUILT: Record<RevisionStatus, Row> = {
  CREATING: { advance: "QUEUED", fail: "CREATE_FAILED", skip: "SKIPPED", interrupt: "INTERRUPTED" },
  QUEUED: { advance: "AWAITING_BUILD", fail: "CREATE_FAILED", skip: "SKIPPED", interrupt: "INTERRUPTED" },
  AWAITING_BUILD: { advance: "BUILDING", fail: "BUILD_FAILED", skip: "SKIPPED", interrupt: "INTERRUPTED" },
  BUILDING: { advance: "AWAITING_DEPLOY", fail: "BUILD_FAILED", interrupt: "INTERRUPTED" },
  AWAITING_DEPLOY: { advance: "DEPLOYING", fail: "DEPLOY_FAILED", interrupt: "INTERRUPTED" },
  DEPLOYING: { advance: "DEPLOYED", fail: "DEPLOY_FAILED", interrupt: "INTERRUPTED" },
  CREATE_FAILED: TERMINAL,
  BUILD_FAILED: TERMINAL,
  DEPLOY_FAILED: TERMINAL,
  DEPLOYED: TERMINAL,
  SKIPPED: TERMINAL,
  INTERRUPTED: TERMINAL,
  UNKNOWN: { interrupt: "INTERRUPTED" },
};
const IMAGE_ONLY: Record<RevisionStatus, Row> = {
  ...BUILT,
  QUEUED: { advance: "AWAITING_DEPLOY", fail: "CREATE_FAILED", skip: "SKIPPED", interrupt: "INTERRUPTED" },
  // Never entered without a build; a revision found there anyway can still be stopped.
  AWAITING_BUILD: { interrupt: "INTERRUPTED" },
  BUILDING: { interrupt: "INTERRUPTED" },
  AWAITING_DEPLOY: { advance: "DEPLOYING", fail: "DEPLOY_FAILED", skip: "SKIPPED", interrupt: "INTERRUPTED" },
};

const routes = [
  { name: "managed (built)", route: { build: true }, table: BUILT },
  { name: "external_container (image only)", route: { build: false }, table: IMAGE_ONLY },
];

describe("revision state machine", () => {
  for (const { name, route, table } of routes) {
    describe(name, () => {
      for (const from of REVISION_STATUSES) {
        for (const event of REVISION_EVENTS) {
          const expected = table[from][event];
          it(`${from} × ${event} → ${expected ?? "refused"}`, () => {
            const result = transition(from, event, route);
            if (expected) {
              expect(result).toEqual({ ok: true, to: expected });
            } else {
              expect(result.ok).toBe(false);
              if (!result.ok) {
                expect(result.reason.length).toBeGreaterThan(10);
                expect(result.reason).toContain(from);
              }
            }
          });
        }
      }
    });
  }

  it("covers every status and event (13 × 4 × 2 cases)", () => {
    expect(REVISION_STATUSES).toHaveLength(13);
    expect(REVISION_EVENTS).toEqual(["advance", "fail", "skip", "interrupt"]);
    for (const { table } of routes) expect(Object.keys(table).sort()).toEqual([...REVISION_STATUSES].sort());
  });

  it("walks COMPAT.md's observed order for managed sources and skips the build for external_container", () => {
    const walk = (source: string) => {
      const seen: RevisionStatus[] = ["CREATING"];
      for (;;) {
        const next = transition(seen.at(-1)!, "advance", routeFor(source));
        if (!next.ok) return seen;
        seen.push(next.to);
      }
    };
    const managed = ["CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"];
    for (const source of ["codehost", "internal_container", "internal_source", "internal_template"]) {
      expect(walk(source)).toEqual(managed);
    }
    expect(walk("external_container")).toEqual(["CREATING", "QUEUED", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"]);
  });

  it("never produces a status outside SPEC.md's list, and terminal statuses are exactly the six ends", () => {
    for (const route of [{ build: true }, { build: false }]) {
      for (const from of REVISION_STATUSES) {
        for (const event of REVISION_EVENTS) {
          const r = transition(from, event, route);
          if (r.ok) expect(REVISION_STATUSES).toContain(r.to);
        }
      }
    }
    expect(REVISION_STATUSES.filter(isTerminal)).toEqual([
      "CREATE_FAILED",
      "BUILD_FAILED",
      "DEPLOY_FAILED",
      "DEPLOYED",
      "SKIPPED",
      "INTERRUPTED",
    ]);
  });

  it("canBeSkipped agrees with the skip event of the table", () => {
    for (const { route, table } of routes) {
      for (const status of REVISION_STATUSES) expect(canBeSkipped(status, route)).toBe(table[status].skip === "SKIPPED");
    }
  });
});
