package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlqdump/dlqdump/internal/inspect"
)

// humanBytes returns n in binary units: "512 B", "12.3 KiB", "1.0 GiB".
func humanBytes[T int64 | uint64 | int](n T) string {
	v := float64(n)
	if v < 1024 {
		return strconv.FormatUint(uint64(n), 10) + " B"
	}
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= 1024
		if v < 1024 || u == "TiB" {
			return strconv.FormatFloat(v, 'f', 1, 64) + " " + u
		}
	}
	return ""
}

// fmtRatio formats a compression ratio; "-" when unknown.
func fmtRatio(r float64) string {
	if r <= 0 {
		return "-"
	}
	return strconv.FormatFloat(r, 'f', 2, 64)
}

// fmtTime formats a time for tables: RFC 3339 in UTC to the second; "-"
// for the zero time.
func fmtTime(t time.Time) string { return inspect.FmtTime(t) }

// jsonTime formats a time for JSON output: RFC 3339 with nanoseconds, UTC;
// "" for the zero time.
func jsonTime(t time.Time) string { return inspect.JSONTime(t) }

// printable reports whether b is printable text (see inspect.Printable).
func printable(b []byte) bool { return inspect.Printable(b) }

// jsonLine writes v as one line of JSON without HTML escaping.
func jsonLine(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// table writes aligned columns: each column as wide as its widest cell,
// separated by two spaces; the last column is not padded. Columns listed in
// right are right-aligned.
type table struct {
	rows  [][]string
	right map[int]bool
}

func newTable(right ...int) *table {
	t := &table{right: map[int]bool{}}
	for _, c := range right {
		t.right[c] = true
	}
	return t
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	var b, line strings.Builder
	for _, r := range t.rows {
		line.Reset()
		for i, c := range r {
			pad := widths[i] - utf8.RuneCountInString(c)
			if t.right[i] {
				line.WriteString(strings.Repeat(" ", pad))
				line.WriteString(c)
			} else {
				line.WriteString(c)
				line.WriteString(strings.Repeat(" ", pad))
			}
			line.WriteString("  ")
		}
		b.WriteString(strings.TrimRight(line.String(), " "))
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// plural returns "1 segment" or "2 segments", "1 retry" or "2 retries".
func plural[T int | int64 | uint64 | uint32](n T, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	if w, ok := strings.CutSuffix(word, "y"); ok && !strings.HasSuffix(w, "a") && !strings.HasSuffix(w, "e") && !strings.HasSuffix(w, "o") {
		return fmt.Sprintf("%d %sies", n, w)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// quoteCell quotes a table cell only when it would be ambiguous: empty,
// with leading or trailing spaces, or with unprintable characters.
func quoteCell(s string) string {
	if s == "" || strings.TrimSpace(s) != s || !printable([]byte(s)) || strings.ContainsAny(s, "\n\r\t") {
		return strconv.Quote(s)
	}
	return s
}

// quoteIfNeeded quotes s when it is empty or has spaces, quotes or
// unprintable characters.
func quoteIfNeeded(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\"'=\\") || !printable([]byte(s)) || strings.ContainsAny(s, "\n\r") {
		return strconv.Quote(s)
	}
	return s
}
