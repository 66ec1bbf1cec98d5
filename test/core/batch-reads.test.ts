import { describe, expect, it } from "vitest";
import { groupedInOrder, inOrder } from "../../src/core/batch-reads.js";

const A = "0b6c4a52-0a47-4f0e-9d3f-6f8d1c2a0001";
const B = "0b6c4a52-0a47-4f0e-9d3f-6f8d1c2a0002";

describe("inOrder", () => {
  it("answers the rows in the order of the ids asked, null where none, whatever the ids' case", () => {
    const rows = [{ id: B }, { id: A }];
    expect(inOrder([A, "missing", B.toUpperCase()], rows)).toEqual([{ id: A }, null, { id: B }]);
  });
});

describe("groupedInOrder", () => {
  const row = (owner: string, n: number) => ({ owner, n });

  it("gives each id asked its rows, in the rows' order, and an empty list where it has none", () => {
    const rows = [row(A, 1), row(B, 2), row(A, 3), row(A, 4), row(B, 5)];
    expect(groupedInOrder([B, "other", A], rows, (r) => r.owner)).toEqual([[row(B, 2), row(B, 5)], [], [row(A, 1), row(A, 3), row(A, 4)]]);
  });

  it("finds an id asked in upper case (ids are uuids, rows carry them in lower case)", () => {
    expect(groupedInOrder([A.toUpperCase()], [row(A, 1)], (r) => r.owner)).toEqual([[row(A, 1)]]);
  });

  it("groups a loader's largest batch whole (an installation's 5,000 repositories, 40 installations)", () => {
    const owners = Array.from({ length: 40 }, (_, i) => `00000000-0000-0000-0000-${String(i).padStart(12, "0")}`);
    const rows = owners.flatMap((owner) => Array.from({ length: 5000 }, (_, n) => row(owner, n)));
    const groups = groupedInOrder(owners, rows, (r) => r.owner);
    expect(groups.map((g) => g.length)).toEqual(owners.map(() => 5000));
    expect(groups[7]![4999]).toEqual(row(owners[7]!, 4999));
  });
});
