import { Lexer, type ParseOptions, Source, syntaxError, TokenKind } from "graphql";
import type { Plugin } from "graphql-yoga";

const OPENING = new Set<string>([TokenKind.BRACE_L, TokenKind.BRACKET_L, TokenKind.PAREN_L]);
const CLOSING = new Set<string>([TokenKind.BRACE_R, TokenKind.BRACKET_R, TokenKind.PAREN_R]);

/**
 * Refuses a document whose brackets (selection sets, lists, input objects, arguments) nest deeper
 * than `maxNesting`, before it is parsed. graphql-js parses recursively: a list literal 2,400 levels
 * deep is under 5,000 tokens, and overflowed the stack of the parser, then of every walk after it (a
 * 500 logged as a fault, a graphql-ws socket closed with every subscription on it). The check lexes
 * (iteratively) as far as `maxTokens` tokens, past which the parser itself refuses the document; a
 * text the lexer cannot read is left to the parser too, which says why in its own words. The
 * refusal is a syntax error, as the token limit's is (GRAPHQL_PARSE_FAILED, 400).
 */
export function useNestingLimit(maxNesting: number, maxTokens: number): Plugin {
  return {
    onParse({ parseFn, setParseFn }) {
      setParseFn((text: string | Source, options?: ParseOptions) => {
        const source = typeof text === "string" ? new Source(text) : text;
        const opening = firstTooDeep(source, maxNesting, maxTokens);
        if (opening !== null) throw syntaxError(source, opening, `Document nests brackets more than ${maxNesting} levels deep.`);
        return parseFn(source, options);
      });
    },
  };
}

/** Where the first bracket deeper than `maxNesting` opens, within the first `maxTokens` tokens; null if none does (or the lexer cannot read that far). */
function firstTooDeep(source: Source, maxNesting: number, maxTokens: number): number | null {
  const lexer = new Lexer(source);
  let depth = 0;
  try {
    for (let token = lexer.advance(), count = 1; token.kind !== TokenKind.EOF && count <= maxTokens; token = lexer.advance(), count++) {
      if (CLOSING.has(token.kind)) depth--;
      else if (OPENING.has(token.kind) && ++depth > maxNesting) return token.start;
    }
  } catch {
    // The lexer's own syntax error: the parser reports it, where it comes to it.
  }
  return null;
}
