/**
 * Text from a source that may send anything (a build's output, a provider's error), as PostgreSQL
 * text can hold it and a reader can take it in: NUL and unpaired surrogates become U+FFFD, and text
 * longer than `maxLength` is cut, saying how much was left out.
 */
export function storableText(text: string, maxLength: number): string {
  // With the u flag, \p{Cs} matches only a surrogate that is not half of a pair.
  const clean = text.replace(/\u0000/g, "\uFFFD").replace(/\p{Cs}/gu, "\uFFFD");
  if (clean.length <= maxLength) return clean;
  return `${clean.slice(0, maxLength)}… (${clean.length - maxLength} more characters left out)`;
}
