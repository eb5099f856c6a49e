import * as MetricLabel from "effect/MetricLabel"

const made = new Map<string, ReadonlyArray<MetricLabel.MetricLabel>>()

/**
 * The labels of one series of a metric, as an array made once per combination: a metric finds its
 * series by the labels array itself (`metric.unsafeUpdate(value, labels)`), so an update after the
 * first costs one short string and a map lookup here, and the metric allocates and hashes no key.
 * A `Metric.tagged` metric makes and hashes a new key on every update instead, about 3 µs each.
 * Only for labels of bounded values (methods, route templates, statuses, names): every combination
 * is kept.
 */
export const labels = (...pairs: ReadonlyArray<readonly [key: string, value: string]>): ReadonlyArray<MetricLabel.MetricLabel> => {
  // Every request updates two series: the key is built without intermediate arrays.
  let key = ""
  for (const [name, value] of pairs) key += `${name}=${value}\u0000`
  let series = made.get(key)
  if (series === undefined) {
    series = pairs.map(([name, value]) => MetricLabel.make(name, value))
    made.set(key, series)
  }
  return series
}
