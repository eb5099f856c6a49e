import * as MetricKey from "effect/MetricKey"
import * as MetricLabel from "effect/MetricLabel"
import * as MetricPair from "effect/MetricPair"
import * as MetricState from "effect/MetricState"
import * as Option from "effect/Option"

/** The content type of Prometheus' text exposition format. */
export const CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

/** A label value as the format quotes it: backslash, double quote and line feed escaped. */
export const escapeLabelValue = (value: string): string =>
  value.replace(/[\\"\n]/g, (c) => (c === "\n" ? "\\n" : `\\${c}`))

const escapeHelp = (text: string) => text.replace(/[\\\n]/g, (c) => (c === "\n" ? "\\n" : "\\\\"))

/** A metric name with every character the format does not allow replaced by `_`. */
export const metricName = (name: string): string => name.replace(/[^a-zA-Z0-9_:]/g, "_").replace(/^(?=[0-9])/, "_")

const labelName = (name: string) => name.replace(/[^a-zA-Z0-9_]/g, "_").replace(/^(?=[0-9])/, "_")

const formatValue = (value: number | bigint): string => {
  if (typeof value === "bigint") return value.toString()
  if (Number.isNaN(value)) return "NaN"
  if (value === Infinity) return "+Inf"
  if (value === -Infinity) return "-Inf"
  return String(value)
}

type Labels = ReadonlyArray<readonly [string, string]>

const formatLabels = (labels: Labels) =>
  labels.length === 0 ? "" : `{${labels.map(([k, v]) => `${labelName(k)}="${escapeLabelValue(v)}"`).join(",")}}`

const sample = (name: string, labels: Labels, value: number | bigint) => `${name}${formatLabels(labels)} ${formatValue(value)}`

const typeOf = (state: MetricState.MetricState.Untyped) => {
  if (MetricState.isCounterState(state) || MetricState.isFrequencyState(state)) return "counter"
  if (MetricState.isGaugeState(state)) return "gauge"
  if (MetricState.isHistogramState(state)) return "histogram"
  if (MetricState.isSummaryState(state)) return "summary"
  return "untyped"
}

/** One series' sample lines: a histogram's cumulative buckets (ending with `+Inf`), `_sum` and `_count`, and so on. */
const samples = (name: string, labels: Labels, state: MetricState.MetricState.Untyped): ReadonlyArray<string> => {
  if (MetricState.isCounterState(state)) return [sample(name, labels, state.count)]
  if (MetricState.isGaugeState(state)) return [sample(name, labels, state.value)]
  if (MetricState.isHistogramState(state)) {
    // Effect's buckets are cumulative already, and its boundaries end with +Inf.
    const buckets = state.buckets.map(([le, count]) => sample(`${name}_bucket`, [...labels, ["le", formatValue(le)]], count))
    const last = state.buckets[state.buckets.length - 1]
    if (last === undefined || last[0] !== Infinity) buckets.push(sample(`${name}_bucket`, [...labels, ["le", "+Inf"]], state.count))
    return [...buckets, sample(`${name}_sum`, labels, state.sum), sample(`${name}_count`, labels, state.count)]
  }
  if (MetricState.isSummaryState(state)) {
    return [
      ...state.quantiles.map(([q, value]) =>
        sample(name, [...labels, ["quantile", formatValue(q)]], Option.getOrElse(value, () => NaN))
      ),
      sample(`${name}_sum`, labels, state.sum),
      sample(`${name}_count`, labels, state.count)
    ]
  }
  if (MetricState.isFrequencyState(state)) {
    return [...state.occurrences].map(([key, count]) => sample(name, [...labels, ["key", key]], count))
  }
  return []
}

interface Family {
  readonly type: string
  readonly help: Option.Option<string>
  readonly series: Array<{ readonly labels: string; readonly lines: ReadonlyArray<string> }>
}

/**
 * The text exposition of a metrics snapshot (`Metric.snapshot`, and any pairs made at scrape time):
 * one `# HELP` (when the metric has a description) and one `# TYPE` line per metric name, then its
 * series, all sorted so that two scrapes of the same figures read the same. A name seen with two
 * kinds of metric keeps the first.
 */
export const render = (pairs: Iterable<MetricPair.MetricPair.Untyped>): string => {
  const families = new Map<string, Family>()
  for (const { metricKey, metricState } of pairs) {
    const name = metricName(metricKey.name)
    const type = typeOf(metricState)
    let family = families.get(name)
    if (family === undefined) {
      family = { type, help: metricKey.description, series: [] }
      families.set(name, family)
    } else if (family.type !== type) {
      continue
    }
    const labels: Labels = metricKey.tags.map((label) => [label.key, label.value] as const)
    family.series.push({ labels: formatLabels(labels), lines: samples(name, labels, metricState) })
  }
  const lines: Array<string> = []
  for (const name of [...families.keys()].sort()) {
    const family = families.get(name)!
    if (Option.isSome(family.help)) lines.push(`# HELP ${name} ${escapeHelp(family.help.value)}`)
    lines.push(`# TYPE ${name} ${family.type}`)
    for (const series of family.series.sort((a, b) => (a.labels < b.labels ? -1 : a.labels > b.labels ? 1 : 0))) {
      lines.push(...series.lines)
    }
  }
  return lines.length === 0 ? "" : `${lines.join("\n")}\n`
}

/** A gauge's value made at scrape time (not kept in the registry), labelled with `labels`. */
export const gauge = (
  name: string,
  description: string,
  labels: Readonly<Record<string, string>>,
  value: number
): MetricPair.MetricPair.Untyped =>
  MetricPair.unsafeMake(
    MetricKey.taggedWithLabels(
      MetricKey.gauge(name, { description }),
      Object.entries(labels).map(([key, value]) => MetricLabel.make(key, value))
    ),
    MetricState.gauge(value)
  )
