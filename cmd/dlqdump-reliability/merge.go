package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// marked returns the block between its markers.
func (b block) marked() string {
	return fmt.Sprintf("<!-- begin %s -->\n%s<!-- end %s -->\n", b.name, strings.TrimRight(b.text, "\n")+"\n", b.name)
}

// writeReport writes the Markdown report to o.out: the whole file, or, with
// -only and an existing file, the rows and blocks of the sections run merged
// into it.
func writeReport(rs []result, o *options, took time.Duration) error {
	old, err := os.ReadFile(o.out)
	if o.only == "" || errors.Is(err, os.ErrNotExist) {
		var b bytes.Buffer
		report(&b, rs, o, took, true)
		return os.WriteFile(o.out, b.Bytes(), 0o644)
	}
	if err != nil {
		return err
	}
	text := string(old)
	for _, r := range rs {
		text = replaceRow(text, r)
	}
	for _, b := range o.blocks {
		text = replaceBlock(text, b)
	}
	return os.WriteFile(o.out, []byte(text), 0o644)
}

// replaceRow replaces the table row of r's check, or adds it after the
// table's last row.
func replaceRow(text string, r result) string {
	row := fmt.Sprintf("| %s | %s | %s | %s | %s |", r.section, r.figures, r.bound, verdict(r), r.note)
	lines := strings.Split(text, "\n")
	last := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "| "+r.section+" |") {
			lines[i] = row
			return strings.Join(lines, "\n")
		}
		if strings.HasPrefix(l, "| ") && last == i-1 || strings.HasPrefix(l, "| check |") {
			last = i
		}
	}
	if last < 0 {
		return text + "\n" + row + "\n"
	}
	lines = append(lines[:last+1], append([]string{row}, lines[last+1:]...)...)
	return strings.Join(lines, "\n")
}

// replaceBlock replaces the marked block named b.name, or appends it.
func replaceBlock(text string, b block) string {
	begin, end := "<!-- begin "+b.name+" -->", "<!-- end "+b.name+" -->\n"
	i := strings.Index(text, begin)
	j := strings.Index(text, end)
	if i < 0 || j < i {
		return strings.TrimRight(text, "\n") + "\n\n" + b.marked()
	}
	return text[:i] + b.marked() + text[j+len(end):]
}
