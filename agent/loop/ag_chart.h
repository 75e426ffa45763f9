/*
 * ag_chart: what each consumer makes of the chart and table data that
 * ag_outputs.py adds to a session's outputs (docs/outputs.md): a compact
 * text for the model, and the E2B SDK's shapes (Result.chart, Result.data)
 * for the E2B server. No I/O.
 */
#ifndef AGENT_LOOP_AG_CHART_H
#define AGENT_LOOP_AG_CHART_H

#include "common/buf.h"

#include <jansson.h>
#include <stddef.h>

/* Bytes of text per figure's charts and per table for the model. */
#define AG_CHART_TEXT_BUDGET 2048
#define AG_TABLE_TEXT_BUDGET 3072

/* Append the text form of one chart+json value (all its charts, one line
 * each) to `b`: at most `budget` bytes, cut at a value with "…" when
 * longer. E.g. "bar chart 'Revenue by region', y: USD (k); north 17,
 * south 42, east 23". Unknown shapes give a short note, never nothing. */
void ag_chart_text(buf_t *b, const json_t *chart, size_t budget);

/* Append the text form of one table+json value: shape, columns with
 * dtypes, first and last rows as a '|' table; at most `budget` bytes. */
void ag_table_text(buf_t *b, const json_t *table, size_t budget);

/* The E2B SDK's Result.chart for a chart+json value: the one chart, or a
 * "superchart" whose elements are the charts of a figure with several
 * axes; NULL for a figure with none. New reference. Types and fields as
 * the SDK's ChartType/ScaleType name them: line and scatter elements are
 * {label, points: [[x, y], ...]}, bars {label, group, value}, pie
 * {label, angle, radius}, box_and_whisker {label, min, first_quartile,
 * median, third_quartile, max, outliers}; a histogram becomes a bar chart
 * with one bar per bin labelled "lo–hi"; axes give x_label, x_unit,
 * x_scale ("datetime" for dates), x_ticks, x_tick_labels and the same
 * for y. */
json_t *ag_chart_e2b(const json_t *chart);

/* The E2B SDK's Result.data for a table+json value: {column: [values of
 * the rows the table carries, first then last]}, as E2B gives a
 * DataFrame. New reference, NULL when the value is not a table. */
json_t *ag_table_e2b(const json_t *table);

/* For an MCP structuredContent object `sc`: "charts", the chart data of
 * each figure among `outputs` (nbformat), and "tables", the table data of
 * each frame, in output order; keys left out when there are none. */
void ag_chart_structured(json_t *sc, const json_t *outputs);

#endif
