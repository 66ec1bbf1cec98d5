import { linePosition, type LogLine } from "../../core/log-queries.js";
import { DEFAULT_TAIL, LOG_BACKLOG_LIMIT, MAX_TAIL } from "../../core/log-feed.js";
import type { LogKind } from "../../core/schemas/logs.js";
import { builder } from "../builder.js";
import type { GraphQLContext } from "../context.js";
import { requireId } from "../nodes.js";
import { connection, PAGE_ARGS_DESCRIPTION, pageComplexity } from "../paging.js";
import { LogKindEnum, LogLevelEnum } from "./enums.js";
import { RevisionRef } from "./refs.js";

const LogEntryRef = builder.objectRef<LogLine>("LogEntry").implement({
  description: "One line of a revision's build or deploy log.",
  fields: (t) => ({
    id: t.exposeID("id", { description: "The line's id (REST `id`): its number in its deployment's log, 1, 2, 3…, across all its revisions." }),
    timestamp: t.expose("timestamp", { type: "DateTime", description: "When the line was written; lines written together share one." }),
    level: t.field({ type: LogLevelEnum, resolve: (l) => l.level }),
    message: t.exposeString("message"),
  }),
});

const LogFilter = builder.inputType("LogFilter", {
  description: "The REST log reads' filters; all given filters must match.",
  fields: (t) => ({
    level: t.field({ type: LogLevelEnum, description: "Lines at least this severe (WARNING: warnings, errors and critical lines)." }),
    query: t.string({ description: "Lines whose message contains this text, case-insensitively (no wildcards)." }),
    startTime: t.field({ type: "DateTime", description: "Lines written at or after this instant." }),
    endTime: t.field({ type: "DateTime", description: "Lines written at or before this instant." }),
  }),
});

const LogConnection = builder.connectionObject({ type: LogEntryRef, name: "LogEntryConnection" }, { name: "LogEntryEdge" });

/** A Revision field paging one of its logs; a page of revisions asking for it costs one statement. */
const logField = (kind: LogKind) =>
  builder.objectField(RevisionRef, kind === "build" ? "buildLogs" : "deployLogs", (t) =>
    t.connection(
      {
        type: LogEntryRef,
        description:
          (kind === "build"
            ? "What the revision's creating, queueing and building did (empty for a revision with nothing to build)"
            : "What the revision's deploy did (everything, for a revision with nothing to build)") +
          `, oldest first: last: 30 gives the newest 30 lines. ${PAGE_ARGS_DESCRIPTION}`,
        args: { filter: t.arg({ type: LogFilter }) },
        complexity: pageComplexity,
        resolve: async (revision, { filter, ...args }, ctx) => {
          const { startTime, endTime, ...rest } = filter ?? {};
          const parsed = ctx.core.logs.parseFilter({ ...rest, start_time: startTime, end_time: endTime });
          const purpose = `graphql:${kind}-logs:${revision.id}:${JSON.stringify(parsed)}`;
          const keyset = ctx.core.batch.keysetArgs(purpose, args);
          const page = await ctx.loaders.logPage(kind, keyset, parsed).load(revision.id);
          return connection(ctx.core.batch.toRelayBy(purpose, page, linePosition), () => ctx.loaders.logCount(kind, parsed).load(revision.id));
        },
      },
      LogConnection,
    ),
  );

logField("build");
logField("deploy");

builder.subscriptionField("revisionLogAppended", (t) =>
  t.field({
    type: LogEntryRef,
    description:
      `The last \`tail\` lines of the revision's build or deploy log (${DEFAULT_TAIL} by default, at most ${MAX_TAIL}), oldest first, ` +
      "then every new line as it is written; completes after the revision's final status line (DEPLOYED, a FAILED status, SKIPPED or INTERRUPTED), " +
      `or once its deployment is being deleted. A subscriber that falls about ${Math.round(LOG_BACKLOG_LIMIT / 2 ** 20)} MiB of lines behind (it stopped reading) ` +
      "is ended with a SLOW_CONSUMER error: subscribe again.",
    args: {
      revisionId: t.arg.id({ required: true }),
      kind: t.arg({ type: LogKindEnum, required: true }),
      tail: t.arg.int({ defaultValue: DEFAULT_TAIL }),
    },
    subscribe: (_root, { revisionId, kind, tail }, ctx: GraphQLContext) =>
      ctx.core.watch.revisionLogs(ctx.tenant, requireId(revisionId, "Revision"), kind, tail ?? DEFAULT_TAIL),
    resolve: (line) => line,
  }),
);
