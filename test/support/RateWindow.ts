/**
 * Request counts are kept per UTC minute: a burst that straddles two windows is admitted twice.
 * Tests that fire one wait out the last 5 s of a minute first.
 */
export const awayFromMinuteEdge = async () => {
  const intoMinute = Date.now() % 60_000
  if (intoMinute > 55_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 100))
}
