package inspect

import (
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlqdump/dlqdump/segment"
)

// FmtTime formats a time for tables: RFC 3339 in UTC to the second; "-"
// for the zero time.
func FmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// JSONTime formats a time for JSON output: RFC 3339 with nanoseconds, UTC;
// "" for the zero time.
func JSONTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Printable reports whether b is valid UTF-8 made of printable characters,
// tabs and line breaks: text that reads well as a JSON string.
func Printable(b []byte) bool {
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r == utf8.RuneError && n <= 1 {
			return false
		}
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
		b = b[n:]
	}
	return true
}

// PayloadJSON returns a payload for a JSON document: a string when it is
// printable, else the bytes (which encoding/json writes as base64) and b64
// set.
func PayloadJSON(p []byte) (payload any, b64 bool) {
	if Printable(p) {
		return string(p), false
	}
	return p, true // encoding/json writes []byte as base64
}

// HeadersMap returns a record's headers as a map, empty (not nil) when it
// has none.
func HeadersMap(h segment.Headers) map[string]string {
	m := make(map[string]string, h.Len())
	for k, v := range h.All() {
		m[k] = v
	}
	return m
}
