// Package selectiontest holds the selection language's table of cases
// (selection/testdata/cases.json), shared by the tests of package
// selection, of dlqdump cat --select and of the console's search: the
// same expressions, the same records, the same answers everywhere.
package selectiontest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/sink"
)

// Table is the table of cases: segments of records, and expressions with
// what they select or why they are refused.
type Table struct {
	Segments []Segment `json:"segments"`
	Cases    []Case    `json:"cases"`
}

// Segment is a segment of the table's store.
type Segment struct {
	Area    string    `json:"area"`
	Created time.Time `json:"created"`
	ID      string    `json:"id"` // 32 hex digits
	Records []Record  `json:"records"`

	Name   string         `json:"-"` // segment.FileName(Created, ID)
	Header segment.Header `json:"-"`
}

// Record is a record of the table's store.
type Record struct {
	Name    string            `json:"name"` // r1, r2, ...
	Time    time.Time         `json:"time"`
	Headers map[string]string `json:"headers"`
	Payload string            `json:"payload"`

	ID string `json:"-"` // its RecordID
}

// Case is an expression and what it selects (Match, the records' names),
// how it prints (String, when given), or the column and a part of the
// message of its error.
type Case struct {
	Expr   string   `json:"expr"`
	Match  []string `json:"match"`
	String *string  `json:"string"`
	Column int      `json:"column"`
	Error  string   `json:"error"`
}

// Load reads the table.
func Load(t testing.TB) *Table {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "testdata", "cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tb Table
	if err := json.Unmarshal(b, &tb); err != nil {
		t.Fatal(err)
	}
	for i := range tb.Segments {
		s := &tb.Segments[i]
		var id segment.ID
		if _, err := hex.Decode(id[:], []byte(s.ID)); err != nil || len(s.ID) != 32 {
			t.Fatalf("segment %d: id %q: want 32 hex digits", i, s.ID)
		}
		s.Name = segment.FileName(s.Created, id)
		s.Header = segment.Header{Codec: segment.CodecZstd, Created: s.Created, ID: id}
		for j := range s.Records {
			r := &s.Records[j]
			r.ID = segment.RecordID{Origin: s.Header.Origin(), Seq: uint64(j)}.String()
			if v, ok := r.Headers[segment.RecordIDHeader]; ok {
				r.ID = v
			}
		}
	}
	return &tb
}

// ByID returns the name of the record with ID id, "" when none has it.
func (tb *Table) ByID(id string) string {
	for _, s := range tb.Segments {
		for _, r := range s.Records {
			if r.ID == id {
				return r.Name
			}
		}
	}
	return ""
}

// Names returns the names of every record, in order.
func (tb *Table) Names() []string {
	var out []string
	for _, s := range tb.Segments {
		for _, r := range s.Records {
			out = append(out, r.Name)
		}
	}
	return out
}

// Write writes the table's segments, with summaries, into their areas of
// rd.
func (tb *Table) Write(t testing.TB, rd sink.Reader) {
	t.Helper()
	ctx := context.Background()
	for _, s := range tb.Segments {
		area, err := sink.ParseArea(s.Area)
		if err != nil {
			t.Fatal(err)
		}
		sw, err := rd.Create(ctx, area, s.Name)
		if err != nil {
			t.Fatal(err)
		}
		w, err := segment.NewWriter(sw, s.Header, &segment.WriterOptions{Summarize: true, BlockSize: 256})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range s.Records {
			if err := w.Add(r.Time, r.Headers, []byte(r.Payload)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if err := sw.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// Sorted returns names sorted, for comparing sets of records.
func Sorted(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	if out == nil {
		out = []string{}
	}
	return out
}
