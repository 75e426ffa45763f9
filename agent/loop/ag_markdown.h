/*
 * ag_markdown: make the model's markdown display as written in Jupyter.
 */
#ifndef AGENT_LOOP_AG_MARKDOWN_H
#define AGENT_LOOP_AG_MARKDOWN_H

/* Jupyter's markdown renderers (Notebook, Lab) read "$...$" as LaTeX, so
 * an analyst's "$34.9M against a $34.6M budget" turns into italic math.
 * Returns a new string in which every '$' directly followed by a digit is
 * escaped as "\$" (which renders as "$"), except inside code spans and
 * fenced code blocks and where it is already escaped. Math the model
 * writes on purpose ("$x^2$", "$$...$$") is left alone. Caller frees. */
char *ag_markdown_escape_currency(const char *md);

#endif
