/** "Did you mean …?" for a mistyped name: the closest candidate by edit distance. */

export function levenshtein(a: string, b: string): number {
  const previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = previous[0]!;
    previous[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = previous[j]!;
      previous[j] = Math.min(
        above + 1,
        previous[j - 1]! + 1,
        diagonal + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
      diagonal = above;
    }
  }
  return previous[b.length]!;
}

/** The candidate nearest to `word`, if within `maxDistance` edits. */
export function closest(
  word: string,
  candidates: readonly string[],
  maxDistance: number,
): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const candidate of candidates) {
    const distance = levenshtein(word, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return bestDistance <= maxDistance ? best : undefined;
}

/** `"chat_mesages" is not one of them; did you mean "chat_messages"? Known: a, b, c.` */
export function unknownNameAdvice(name: string, known: readonly string[]): string {
  const near = closest(name, known, Math.max(1, Math.min(3, Math.floor(name.length / 4))));
  const list = known.length > 0 ? `known: ${known.join(', ')}` : 'none is known yet';
  return near === undefined ? list : `did you mean ${JSON.stringify(near)}? (${list})`;
}
